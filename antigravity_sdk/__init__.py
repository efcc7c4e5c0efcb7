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
    from .containment import Containment
    from .context import HookContext, ToolContext, current_context
    from .conversations import ConversationInfo, list_conversations
    from .errors import (
        AgentStateError,
        AntigravityError,
        ConfigurationError,
        ContainmentError,
        ConversationNotFoundError,
        HarnessConnectionError,
        HarnessError,
        HarnessInstallError,
        HarnessNotFoundError,
        ModelNotConfiguredError,
        OutputValidationError,
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
    from .instructions import BUILTIN_SECTIONS, BuiltinSection
    from .media import Document, Image, Prompt
    from .models import ServiceTier, ThinkingLevel
    from .policy import Decision, Policy, PolicyEnforcer
    from .skills import Skill
    from .types import (
        AskQuestionEntry,
        AskQuestionOption,
        Budget,
        BudgetScope,
        BuiltinTool,
        CapabilitiesConfig,
        ChatResponse,
        HookResult,
        McpHttpServer,
        McpStdioServer,
        QuestionHookResult,
        QuestionResponse,
        RetryPolicy,
        Step,
        StopReason,
        StreamChunk,
        ToolCall,
        ToolOutputLimit,
        ToolResult,
        UsageMetadata,
    )

__version__ = "0.1.0"

__all__ = [
    "BUILTIN_SECTIONS",
    "Agent",
    "AgentBuilder",
    "AgentStateError",
    "AntigravityError",
    "AskQuestionEntry",
    "AskQuestionOption",
    "Budget",
    "BudgetScope",
    "BuiltinSection",
    "BuiltinTool",
    "CapabilitiesConfig",
    "ChatResponse",
    "ConfigurationError",
    "Containment",
    "ContainmentError",
    "ConversationInfo",
    "ConversationNotFoundError",
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
    "OutputValidationError",
    "Policy",
    "PolicyEnforcer",
    "PolicyError",
    "Prompt",
    "PromptError",
    "ProtocolError",
    "QuestionHookResult",
    "QuestionResponse",
    "RetryPolicy",
    "ServiceTier",
    "Skill",
    "Step",
    "StopReason",
    "StreamChunk",
    "ThinkingLevel",
    "ToolCall",
    "ToolContext",
    "ToolExecutionError",
    "ToolOutputLimit",
    "ToolResult",
    "TurnCancelledError",
    "TurnDeniedError",
    "TurnError",
    "TurnFailedError",
    "TurnTimeoutError",
    "UsageMetadata",
    "__version__",
    "current_context",
    "list_conversations",
    "policy",
]


# Public name -> the private module that defines it. Names load on first access (PEP 562)
# so `import antigravity_sdk` stays cheap; pydantic, asyncio, websockets and the protocol
# code load only when something that needs them is used.
_EXPORTS = {
    "Agent": "agent",
    "AgentBuilder": "agent",
    "Containment": "containment",
    "HookContext": "context",
    "ToolContext": "context",
    "current_context": "context",
    "ConversationInfo": "conversations",
    "list_conversations": "conversations",
    "Hook": "hooks",
    "HookRunner": "hooks",
    "BUILTIN_SECTIONS": "instructions",
    "BuiltinSection": "instructions",
    "Skill": "skills",
    "ServiceTier": "models",
    "ThinkingLevel": "models",
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
            "Budget",
            "BudgetScope",
            "BuiltinTool",
            "CapabilitiesConfig",
            "ChatResponse",
            "HookResult",
            "McpHttpServer",
            "McpStdioServer",
            "QuestionHookResult",
            "QuestionResponse",
            "RetryPolicy",
            "Step",
            "StopReason",
            "StreamChunk",
            "ToolCall",
            "ToolOutputLimit",
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
