"""The exception hierarchy. Every error the SDK raises derives from `AntigravityError`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .types import HookResult, ToolCall

__all__ = [
    "AntigravityError",
    "ConfigurationError",
    "HarnessConnectionError",
    "HarnessNotFoundError",
    "PolicyError",
    "ProtocolError",
    "ToolExecutionError",
    "TurnDeniedError",
]


class AntigravityError(Exception):
    """Base class of every error raised by antigravity_sdk."""


class ConfigurationError(AntigravityError, ValueError):
    """An agent configuration the SDK refuses at `build()`, saying what to change."""


class HarnessNotFoundError(AntigravityError):
    """No usable `localharness` binary was found; the message says how to install one."""


class HarnessConnectionError(AntigravityError):
    """Spawning, handshaking with, or talking to the harness failed.

    `stderr_tail` holds the harness's last stderr lines (also appended to the message),
    because that is where the harness explains why it died.
    """

    def __init__(self, message: str, *, stderr_tail: str = "") -> None:
        self.stderr_tail = stderr_tail
        if stderr_tail:
            message = f"{message}\n--- harness stderr (last lines) ---\n{stderr_tail}"
        super().__init__(message)


class TurnDeniedError(AntigravityError):
    """A pre_turn hook denied the turn; the model was never called.

    `str()` is the denying hook's message; `result` is its `HookResult`.
    """

    def __init__(self, result: HookResult) -> None:
        self.result = result
        super().__init__(result.message)


class PolicyError(AntigravityError, ValueError):
    """An invalid policy set, reported at `enforce()` time, naming the offending policy."""


class ProtocolError(AntigravityError):
    """A frame from the harness that the SDK cannot decode."""


class ToolExecutionError(Exception):
    """A tool failed. What `on_tool_error` receives, for built-in and host-side tools alike.

    Deliberately not an `AntigravityError`: it describes the tool's failure, not the SDK's.
    """

    def __init__(self, message: str, tool_call: ToolCall, *, cause: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.tool_call = tool_call
        self.cause = cause
