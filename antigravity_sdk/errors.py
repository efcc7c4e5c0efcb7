"""The exception hierarchy. Every error the SDK raises derives from `AntigravityError`.

    AntigravityError
    ├── ConfigurationError (also ValueError)   build() or start() refuses the settings
    │   ├── ConfigurationTypeError (also TypeError)  a setting of the wrong type
    │   ├── PolicyError (also ValueError)      an invalid policy set or policy file
    │   ├── ModelNotConfiguredError            no usable model (name, endpoint or key missing)
    │   ├── ConversationNotFoundError          resume(): no such conversation is saved
    │   ├── PromptError                        a prompt refused before anything was sent
    │   └── ContainmentError                   containment asked for cannot be enforced here
    ├── AgentStateError (also RuntimeError)    not started, already started, ...
    ├── HarnessError                           the harness binary or process
    │   ├── HarnessNotFoundError               no usable binary; says how to install one
    │   │   └── HarnessInstallError            installing one failed (so none was found)
    │   └── HarnessConnectionError             spawn, handshake, socket, harness died
    ├── ProtocolError                          a frame the SDK cannot decode
    └── TurnError                              a turn did not complete
        ├── TurnDeniedError                    a pre_turn hook denied it; no model call
        ├── TurnCancelledError                 Agent.cancel() ended it
        ├── TurnFailedError                    the harness ended it with an error
        ├── OutputValidationError              no answer that validates as the output type
        └── TurnTimeoutError (also TimeoutError)  past turn_timeout; the turn was halted

    ToolExecutionError (Exception)             a tool failed: what on_tool_error receives

The second bases keep `except ValueError` / `except TimeoutError` / `except RuntimeError`
callers working where the SDK used to raise the built-in exception.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._reasons import StopReason

if TYPE_CHECKING:
    from pydantic import ValidationError

    from .types import ChatResponse, HookResult, ToolCall

__all__ = [
    "AgentStateError",
    "AntigravityError",
    "ConfigurationError",
    "ConfigurationTypeError",
    "ContainmentError",
    "ConversationNotFoundError",
    "HarnessConnectionError",
    "HarnessError",
    "HarnessInstallError",
    "HarnessNotFoundError",
    "ModelNotConfiguredError",
    "OutputValidationError",
    "PolicyError",
    "PromptError",
    "ProtocolError",
    "ToolExecutionError",
    "TurnCancelledError",
    "TurnDeniedError",
    "TurnError",
    "TurnFailedError",
    "TurnTimeoutError",
]


class AntigravityError(Exception):
    """Base class of every error raised by antigravity_sdk."""


class ConfigurationError(AntigravityError, ValueError):
    """An agent configuration the SDK refuses at `build()`, saying what to change."""


class ConfigurationTypeError(ConfigurationError, TypeError):
    """A setting of the wrong type (a builder method given something else than it takes):
    the same mistake raises the same error in every setter, and both `except
    ConfigurationError` and `except TypeError` catch it."""


class AgentStateError(AntigravityError, RuntimeError):
    """The agent is not in a state for that call (not started, already started, ...)."""


class HarnessError(AntigravityError):
    """Something about the `localharness` binary or its process."""


class HarnessNotFoundError(HarnessError):
    """No usable `localharness` binary was found; the message says how to install one."""


class HarnessInstallError(HarnessNotFoundError):
    """Installing the harness binary failed (download, hash check or extraction)."""


class HarnessConnectionError(HarnessError):
    """Spawning, handshaking with, or talking to the harness failed.

    `stderr_tail` holds the harness's last stderr lines (also appended to the message),
    because that is where the harness explains why it died.
    """

    def __init__(self, message: str, *, stderr_tail: str = "") -> None:
        self.stderr_tail = stderr_tail
        if stderr_tail:
            message = f"{message}\n--- harness stderr (last lines) ---\n{stderr_tail}"
        super().__init__(message)


class TurnError(AntigravityError):
    """A turn did not complete. `stop_reason` says how it ended (also
    `Agent.last_stop_reason`). The session stays usable, except that the harness ends it
    after some `TurnFailedError`s (a model error): the next call then raises
    `HarnessConnectionError`, and `resume()` continues the saved conversation."""

    stop_reason: StopReason = StopReason.ERROR


class TurnDeniedError(TurnError):
    """A pre_turn hook denied the turn; the model was never called.

    `str()` is the denying hook's message; `result` is its `HookResult`.
    """

    stop_reason = StopReason.DENIED

    def __init__(self, result: HookResult) -> None:
        self.result = result
        super().__init__(result.message)


class TurnCancelledError(TurnError):
    """`Agent.cancel()` ended the turn; the harness halted it and the session goes on."""

    stop_reason = StopReason.CANCELLED


class TurnFailedError(TurnError):
    """The harness ended the turn with an error (model endpoint, quota, ...); `cause` is
    the harness's own message, `stop_reason` `ERROR` or the harness's reason
    (`QUOTA_EXHAUSTED`). After a model error the harness ends the session: the next call
    raises `HarnessConnectionError`."""

    def __init__(self, cause: str, stop_reason: StopReason = StopReason.ERROR) -> None:
        self.cause = cause
        self.stop_reason = stop_reason
        super().__init__(f"the turn failed: {cause}")


class OutputValidationError(TurnError):
    """The turn ended without an answer that validates as the agent's output type.

    `raw` is the model's answer as the SDK saw it (the finish call's JSON, or its text
    when it never called finish), `errors` pydantic's `ValidationError` when there was
    one, and `response` the turn's `ChatResponse` (already in the history).
    """

    def __init__(
        self,
        message: str,
        *,
        raw: str,
        response: ChatResponse,
        errors: ValidationError | None = None,
    ) -> None:
        self.raw = raw
        self.response = response
        self.errors = errors
        super().__init__(message)


class TurnTimeoutError(TurnError, TimeoutError):
    """The turn did not finish within `turn_timeout`; it was halted."""

    stop_reason = StopReason.TIMEOUT


class PolicyError(ConfigurationError):
    """An invalid policy set, reported at `enforce()` time, naming the offending policy
    (a `ConfigurationError`, so also an `AntigravityError` and a `ValueError`)."""


class ModelNotConfiguredError(ConfigurationError):
    """No usable model: a base_url without a model name, or a Gemini model without a key
    (a `ConfigurationError`, so also an `AntigravityError` and a `ValueError`)."""


class ConversationNotFoundError(ConfigurationError):
    """`resume(conversation_id)` names a conversation that is not saved under the save dir;
    raised by `start()` before any turn (`list_conversations()` lists the saved ones)."""


class PromptError(ConfigurationError):
    """A prompt refused before anything was sent (an unreadable file, an unsupported MIME
    type, too large for the harness, an empty sequence, a failed download); the session
    stays usable."""


class ContainmentError(ConfigurationError):
    """The harness cannot be contained as asked: `Containment(required=True)` where the
    kernel offers no Landlock or the harness is not spawned here, or the kernel refused
    the rules at start (the message says which)."""


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
