"""antigravity_sdk: governed AI agents on Google's Antigravity harness.

Every tool call the agent makes passes through your hooks and a fail-closed policy
engine before it runs. The public surface is re-exported here; modules behind it are
private unless documented.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import errors as _errors

if TYPE_CHECKING:
    from . import policy
    from .agent import Agent, AgentBuilder
    from .context import HookContext, ToolContext, current_context
    from .errors import (
        AgentStateError,
        AntigravityError,
        ConfigurationError,
        HarnessConnectionError,
        HarnessError,
        HarnessInstallError,
        HarnessNotFoundError,
        ModelNotConfiguredError,
        PolicyError,
        ProtocolError,
        ToolExecutionError,
        TurnCancelledError,
        TurnDeniedError,
        TurnError,
        TurnFailedError,
        TurnTimeoutError,
    )
    from .hooks import Hook, HookRunner
    from .media import Document, Image, Prompt
    from .policy import Decision, Policy, PolicyEnforcer
    from .types import (
        AskQuestionEntry,
        AskQuestionOption,
        BuiltinTool,
        CapabilitiesConfig,
        ChatResponse,
        HookResult,
        McpHttpServer,
        McpStdioServer,
        QuestionHookResult,
        QuestionResponse,
        Step,
        StreamChunk,
        ToolCall,
        ToolResult,
        UsageMetadata,
    )

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentBuilder",
    "AgentStateError",
    "AntigravityError",
    "AskQuestionEntry",
    "AskQuestionOption",
    "BuiltinTool",
    "CapabilitiesConfig",
    "ChatResponse",
    "ConfigurationError",
    "Decision",
    "Document",
    "HarnessConnectionError",
    "HarnessError",
    "HarnessInstallError",
    "HarnessNotFoundError",
    "Hook",
    "HookContext",
    "HookResult",
    "HookRunner",
    "Image",
    "McpHttpServer",
    "McpStdioServer",
    "ModelNotConfiguredError",
    "Policy",
    "PolicyEnforcer",
    "PolicyError",
    "Prompt",
    "PromptError",
    "ProtocolError",
    "QuestionHookResult",
    "QuestionResponse",
    "Step",
    "StreamChunk",
    "ToolCall",
    "ToolContext",
    "ToolExecutionError",
    "ToolResult",
    "TurnCancelledError",
    "TurnDeniedError",
    "TurnError",
    "TurnFailedError",
    "TurnTimeoutError",
    "UsageMetadata",
    "__version__",
    "current_context",
    "policy",
]


# Public name -> the private module that defines it. Names load on first access (PEP 562)
# so `import antigravity_sdk` stays cheap; pydantic, asyncio, websockets and the protocol
# code load only when something that needs them is used.
_EXPORTS = {
    "Agent": "agent",
    "AgentBuilder": "agent",
    "HookContext": "context",
    "ToolContext": "context",
    "current_context": "context",
    "Hook": "hooks",
    "HookRunner": "hooks",
    "Document": "media",
    "Image": "media",
    "Prompt": "media",
    "Decision": "policy",
    "Policy": "policy",
    "PolicyEnforcer": "policy",
    **dict.fromkeys(_errors.__all__, "errors"),  # errors.py is light: read its own list
    **dict.fromkeys(
        (
            "AskQuestionEntry",
            "AskQuestionOption",
            "BuiltinTool",
            "CapabilitiesConfig",
            "ChatResponse",
            "HookResult",
            "McpHttpServer",
            "McpStdioServer",
            "QuestionHookResult",
            "QuestionResponse",
            "Step",
            "StreamChunk",
            "ToolCall",
            "ToolResult",
            "UsageMetadata",
        ),
        "types",
    ),
}


def __getattr__(name: str) -> Any:
    if name == "policy":
        return importlib.import_module(".policy", __name__)
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
