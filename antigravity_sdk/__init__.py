"""antigravity_sdk: governed AI agents on Google's Antigravity harness.

Every tool call the agent makes passes through your hooks and a fail-closed policy
engine before it runs. The public surface is re-exported here; modules behind it are
private unless documented.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from . import _defaults
from . import errors as _errors

if TYPE_CHECKING:
    # What a type checker sees of the lazy names: exactly `_EXPORTS`, each from the module
    # it names (tests/test_exported_members.py holds the two together). `X as X` marks
    # each as re-exported, since `__all__` is computed and checkers read only literal ones.
    from . import policy as policy
    from .agent import Agent as Agent
    from .agent import AgentBuilder as AgentBuilder
    from .containment import Containment as Containment
    from .context import HookContext as HookContext
    from .context import ToolContext as ToolContext
    from .context import current_context as current_context
    from .conversations import ConversationInfo as ConversationInfo
    from .conversations import list_conversations as list_conversations
    from .errors import AgentStateError as AgentStateError
    from .errors import AntigravityError as AntigravityError
    from .errors import ConfigurationError as ConfigurationError
    from .errors import ConfigurationTypeError as ConfigurationTypeError
    from .errors import ContainmentError as ContainmentError
    from .errors import ConversationNotFoundError as ConversationNotFoundError
    from .errors import HarnessConnectionError as HarnessConnectionError
    from .errors import HarnessError as HarnessError
    from .errors import HarnessInstallError as HarnessInstallError
    from .errors import HarnessNotFoundError as HarnessNotFoundError
    from .errors import ModelNotConfiguredError as ModelNotConfiguredError
    from .errors import OutputValidationError as OutputValidationError
    from .errors import PolicyError as PolicyError
    from .errors import PromptError as PromptError
    from .errors import ProtocolError as ProtocolError
    from .errors import ToolExecutionError as ToolExecutionError
    from .errors import TurnCancelledError as TurnCancelledError
    from .errors import TurnDeniedError as TurnDeniedError
    from .errors import TurnError as TurnError
    from .errors import TurnFailedError as TurnFailedError
    from .errors import TurnTimeoutError as TurnTimeoutError
    from .hooks import Hook as Hook
    from .hooks import HookRunner as HookRunner
    from .instructions import BUILTIN_SECTIONS as BUILTIN_SECTIONS
    from .instructions import BuiltinSection as BuiltinSection
    from .media import Document as Document
    from .media import Image as Image
    from .media import Prompt as Prompt
    from .models import ServiceTier as ServiceTier
    from .models import ThinkingLevel as ThinkingLevel
    from .policy import Decision as Decision
    from .policy import Policy as Policy
    from .policy import PolicyEnforcer as PolicyEnforcer
    from .skills import Skill as Skill
    from .timeouts import Timeouts as Timeouts
    from .types import AskQuestionEntry as AskQuestionEntry
    from .types import AskQuestionOption as AskQuestionOption
    from .types import Budget as Budget
    from .types import BudgetScope as BudgetScope
    from .types import BuiltinTool as BuiltinTool
    from .types import CapabilitiesConfig as CapabilitiesConfig
    from .types import ChatResponse as ChatResponse
    from .types import HookResult as HookResult
    from .types import McpHttpServer as McpHttpServer
    from .types import McpStdioServer as McpStdioServer
    from .types import QuestionHookResult as QuestionHookResult
    from .types import QuestionResponse as QuestionResponse
    from .types import RetryPolicy as RetryPolicy
    from .types import Step as Step
    from .types import StopReason as StopReason
    from .types import StreamChunk as StreamChunk
    from .types import ToolCall as ToolCall
    from .types import ToolOutputLimit as ToolOutputLimit
    from .types import ToolResult as ToolResult
    from .types import UsageMetadata as UsageMetadata

__version__ = "0.1.0"

# The one list of the public API: public name -> the module that defines it. A name that
# is its module's own name (`policy`) exports the module itself. Names load on first
# access (PEP 562) so `import antigravity_sdk` stays cheap; pydantic, asyncio, websockets
# and the protocol code load only when something that needs them is used.
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
    "policy": "policy",
    "Decision": "policy",
    "Policy": "policy",
    "PolicyEnforcer": "policy",
    "Timeouts": "timeouts",
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

__all__ = sorted([*_EXPORTS, "__version__"])


def _terminal() -> Callable[[ToolCall], Awaitable[bool]]:
    """The terminal's y/N question (`interactive.confirm_in_terminal`), imported when
    first needed."""
    from .interactive import confirm_in_terminal

    return confirm_in_terminal


# The library's default for a policy file's ask_user rules loaded without a handler: the
# terminal. Chosen here, at the top, and held below (`_defaults`) for the policy package
# to read, because the policy package may not import the terminal module.
_defaults.choose_ask_handler(_terminal)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    loaded = importlib.import_module(f".{module}", __name__)
    value = loaded if name == module else getattr(loaded, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
