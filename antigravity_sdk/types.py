"""Value types shared by hooks, policies, tools and the agent (pydantic v2 models).

`HookResult` is frozen: results are values, and a frozen result can be shared, so
`HookResult.allowed()` and an all-allow dispatch return one cached instance instead of
building a model per tool call.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ._reasons import StopReason

__all__ = [
    "AskQuestionEntry",
    "AskQuestionOption",
    "Budget",
    "BudgetScope",
    "BuiltinTool",
    "CapabilitiesConfig",
    "ChatResponse",
    "HookResult",
    "McpHttpServer",
    "McpServer",
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
]

_MCP_NAME = r"^[A-Za-z0-9_-]+$"


class _Model(BaseModel):
    # Build validators on first use, not at import: most programs touch a few types only.
    model_config = ConfigDict(defer_build=True)


class ToolCall(_Model):
    """One tool call the model asked for, as hooks and policies see it."""

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    id: str = ""
    server_name: str | None = None
    trajectory_id: str = ""
    step_index: int | None = None

    @property
    def qualified_name(self) -> str:
        """`"server/name"` for an MCP tool, else the bare name: what policies match on."""
        if self.server_name:
            return f"{self.server_name}/{self.name}"
        return self.name


class ToolResult(_Model):
    """The outcome of one tool call, as post_tool_call sees it."""

    name: str
    id: str = ""
    result: Any = None
    error: str | None = None
    server_name: str | None = None
    tool_call: ToolCall | None = None
    """The call as it ran (after any rewrite by a pre_tool_call hook), when the SDK saw it."""


class HookResult(_Model):
    """A Decide hook's verdict: allow or deny, with a message the model reads on deny.

    A pre_tool_call hook may allow with `args`: the complete arguments the tool runs with
    instead of the model's (`HookResult.rewrite`). Later hooks and the policies see the
    rewritten call, and the harness runs exactly that.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    allow: bool = True
    message: str = ""
    args: dict[str, Any] | None = None

    ALLOWED: ClassVar[HookResult]

    @model_validator(mode="after")
    def _rewrite_allows(self) -> HookResult:
        # A deny that also rewrites is a contradiction: refuse it rather than guess.
        if self.args is not None and not self.allow:
            raise ValueError("a denying HookResult cannot carry rewritten args")
        return self

    @classmethod
    def allowed(cls, msg: str = "") -> HookResult:
        """An allowing result; without a message it is one shared instance."""
        if not msg:
            return _ALLOWED  # a module global: class attribute lookups on models are slow
        return cls(allow=True, message=msg)

    @classmethod
    def denied(cls, msg: str) -> HookResult:
        """A denying result; `msg` tells the model why."""
        return cls(allow=False, message=msg)

    @classmethod
    def rewrite(cls, args: Mapping[str, Any], msg: str = "") -> HookResult:
        """Allow the tool call with `args` as its complete arguments (not merged with the
        model's: a key left out is dropped)."""
        if not isinstance(args, Mapping):
            raise TypeError(f"rewritten args must be a mapping, got {type(args).__name__}")
        return cls(allow=True, message=msg, args=dict(args))


_ALLOWED = HookResult.ALLOWED = HookResult()


class UsageMetadata(_Model):
    """Token counts, as the harness reports them."""

    prompt_token_count: int = 0
    cached_content_token_count: int = 0
    candidates_token_count: int = 0
    thoughts_token_count: int = 0
    total_token_count: int = 0


StepState = Literal["active", "done", "waiting_for_user", "error", "unknown"]
StepKind = Literal["text", "tool_call", "denied", "system", "user", "compaction", "finish", "error"]


class Step(_Model):
    """One step of a trajectory: a model message, a tool action, an error.

    `kind` says which; for tool steps `tool_call` holds the call and `output` what it
    printed or returned. A tool call the hooks or policies denied is a `denied` step:
    `tool_call` is the call, `error` the reason the model read (a policy's names the rule:
    "Denied by policy 'no-rm'."). Fields the SDK does not model are dropped, not errors.
    """

    step_index: int = 0
    trajectory_id: str = ""
    kind: StepKind = "text"
    state: StepState = "unknown"
    source: Literal["system", "user", "model", "unknown"] = "unknown"
    text: str = ""
    thinking: str = ""
    tool_call: ToolCall | None = None
    output: str | None = None
    exit_code: int | None = None
    error: str = ""


class ChatResponse(_Model):
    """What one `Agent.chat()` turn produced; `output` is the answer validated into the
    agent's output type (`AgentBuilder.output_type`), None without one."""

    """What one `Agent.chat()` turn produced.

    `usage` is what the turn cost (all trajectories); `usage_by_trajectory` splits it
    by trajectory id (the conversation's id for the agent itself, others for subagents).
    `stop_reason` says why the turn ended: `finished`, or a budget that ran out.
    """

    text: str = ""
    thinking: str = ""
    steps: list[Step] = Field(default_factory=list)
    usage: UsageMetadata | None = None
    output: Any = None
    usage_by_trajectory: dict[str, UsageMetadata] = Field(default_factory=dict)
    stop_reason: StopReason = StopReason.FINISHED


class StreamChunk(_Model):
    """One piece of a streamed turn: a text delta, a thought delta, a tool call (when it
    reaches the SDK for a decision), a tool result (when the tool has run: `text` is
    the start of its output, `error` its error, `tool_call` the call), or an error the
    harness reported (`error` its message, `text` the detail: a model call it will retry,
    or the one that ends the turn).

    `trajectory_id` says whose: the conversation's id for the agent itself, another id
    for a subagent.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    type: Literal["text", "thought", "tool_call", "tool_result", "error"]
    text: str = ""
    error: str = ""
    tool_call: ToolCall | None = None
    step_index: int = 0
    trajectory_id: str = ""


class AskQuestionOption(_Model):
    """One choice of a multiple-choice question."""

    id: str
    text: str


class AskQuestionEntry(_Model):
    """A question the agent asks the user."""

    question: str
    options: list[AskQuestionOption] = Field(default_factory=list)
    is_multi_select: bool = False


class QuestionResponse(_Model):
    """The answer to one `AskQuestionEntry`."""

    selected_option_ids: list[str] | None = None
    freeform_response: str | None = None
    skipped: bool = False


class QuestionHookResult(_Model):
    """An on_interaction hook's answers, one per question, or a cancellation."""

    responses: list[QuestionResponse] = Field(default_factory=list)
    cancelled: bool = False


class BuiltinTool(StrEnum):
    """The harness's built-in tools that `CapabilitiesConfig` can switch on or off."""

    RUN_COMMAND = "run_command"
    VIEW_FILE = "view_file"
    WRITE_TO_FILE = "write_to_file"
    EDIT_FILE = "replace_file_content"
    LIST_DIR = "list_dir"
    GREP_SEARCH = "grep_search"
    FIND = "find_by_name"
    ASK_QUESTION = "ask_question"
    SUBAGENTS = "invoke_subagent"
    SEARCH_WEB = "search_web"
    READ_URL_CONTENT = "read_url_content"
    GENERATE_IMAGE = "generate_image"
    MANAGE_TASK = "manage_task"
    SCHEDULE = "schedule"
    RUN_WORKFLOW = "run_workflow"


_DEFAULT_TOOLS = frozenset(
    {
        BuiltinTool.RUN_COMMAND,
        BuiltinTool.VIEW_FILE,
        BuiltinTool.WRITE_TO_FILE,
        BuiltinTool.EDIT_FILE,
        BuiltinTool.SUBAGENTS,
    }
)


class CapabilitiesConfig(_Model):
    """Which built-in tools the harness exposes to the model, and their limits.

    Switching a tool off removes it from the model's view; a policy leaves it visible and
    refuses the call. Prefer this for tools the agent never needs.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    enabled_tools: frozenset[BuiltinTool] = _DEFAULT_TOOLS
    run_command_timeout_ms: int | None = Field(default=None, gt=0)
    max_subagent_depth: int | None = Field(default=None, ge=1)
    max_model_calls: int | None = Field(default=None, gt=0)
    max_tool_calls: int | None = Field(default=None, gt=0)
    compaction_token_threshold: int | None = Field(default=None, gt=0)


class _McpServerBase(_Model):
    name: str = Field(pattern=_MCP_NAME)
    enabled_tools: list[str] | None = None
    disabled_tools: list[str] | None = None
    timeout_seconds: int | None = Field(default=None, gt=0)


class McpStdioServer(_McpServerBase):
    """An MCP server the harness starts as a subprocess."""

    command: str
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)


class McpHttpServer(_McpServerBase):
    """An MCP server the harness reaches over streamable HTTP."""

    url: str
    headers: dict[str, str] = Field(default_factory=dict)


McpServer = McpStdioServer | McpHttpServer


_MAX_INT32 = 2**31 - 1
_MAX_INT64 = 2**63 - 1
_MAX_UINT32 = 2**32 - 1


class BudgetScope(StrEnum):
    """What a `Budget` counts from. Measured on the harness: both count across turns (a
    budget is never per turn); they differ only for a resumed conversation, which
    `LIFETIME` counts from its first step and `FORWARD_LOOKING` from the resume."""

    LIFETIME = "lifetime"
    FORWARD_LOOKING = "forward_looking"


class Budget(_Model):
    """Limits the harness enforces on the conversation; past one it ends the turn with
    that `StopReason` (the turn returns; it is not an error), and every later turn ends
    the same way after at most one model call. Tokens are as the model reports them:
    input is prompt minus cached tokens, output is candidates plus thoughts."""

    model_config = ConfigDict(frozen=True, defer_build=True, extra="forbid")

    max_model_calls: int | None = Field(default=None, gt=0, le=_MAX_INT32)
    max_tool_calls: int | None = Field(default=None, gt=0, le=_MAX_INT32)
    max_input_tokens: int | None = Field(default=None, gt=0, le=_MAX_INT64)
    max_output_tokens: int | None = Field(default=None, gt=0, le=_MAX_INT64)
    max_total_tokens: int | None = Field(default=None, gt=0, le=_MAX_INT64)
    scope: BudgetScope = BudgetScope.LIFETIME


class RetryPolicy(_Model):
    """How the harness retries a Gemini API call that failed with a retryable error
    (network, HTTP 429 and 5xx; an OpenAI-compatible endpoint is never retried), and a
    model answer it cannot parse (`max_output_retries`). Each retry is logged as a
    WARNING and streamed as an `error` chunk; after the last one the turn fails with
    `TurnFailedError` carrying the harness's cause. A field left None is the harness's
    default. The SDK's default policy is bounded: 3 retries from 1 s, doubling (about
    7 s in all) — without one the harness retries for many minutes."""

    model_config = ConfigDict(frozen=True, defer_build=True, extra="forbid")

    max_retries: int = Field(default=3, ge=0, le=_MAX_UINT32)
    initial_backoff: float | None = Field(
        default=1.0, ge=0.001, le=_MAX_UINT32 / 1000, allow_inf_nan=False
    )
    backoff_multiplier: float | None = Field(default=None, ge=1, le=100, allow_inf_nan=False)
    jitter: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False)
    max_output_retries: int | None = Field(default=None, ge=0, le=_MAX_UINT32)


class ToolOutputLimit(_Model):
    """A bound on what one tool's output may cost the model, in (estimated) tokens.

    `on_exceed="truncate"` keeps the start of the output and tells the model it was cut
    (`save_full_output`: the harness keeps the whole output in a file the model can
    read); `"error"` replaces the output with an error (`error_message`, or the
    harness's own)."""

    model_config = ConfigDict(frozen=True, defer_build=True, extra="forbid")

    max_tokens: int = Field(gt=0, le=_MAX_INT32)
    on_exceed: Literal["truncate", "error"] = "truncate"
    save_full_output: bool = False
    error_message: str = ""

    @model_validator(mode="after")
    def _one_strategy(self) -> ToolOutputLimit:
        if self.on_exceed == "error" and self.save_full_output:
            raise ValueError("save_full_output goes with on_exceed='truncate'")
        if self.on_exceed == "truncate" and self.error_message:
            raise ValueError("error_message goes with on_exceed='error'")
        return self
