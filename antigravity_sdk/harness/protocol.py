"""The sans-I/O session core: harness frames in, effects and reply frames out.

Nothing here touches a socket or awaits anything. `SessionCore.receive(frame)` turns one
decoded `OutputEvent` (a JSON object in the canonical protobuf JSON mapping) into a list
of effects for the I/O layer to carry out — dispatch a hook, run a host-side tool, ask
the user, emit a stream chunk, end the turn — and the `*_reply` functions build the
`InputEvent` that answers each one.

Incoming frames are read by field name from plain dicts, so fields and enum values a
newer harness adds are ignored by construction. Outgoing frames carry only schema fields:
the harness drops a whole frame with an unknown field (and the awaited answer never
arrives), and it treats anything but an explicit DENY on PRE_TOOL as allow. So every
decide reply here is explicit, and every failure path answers DENY.
"""

from __future__ import annotations

import contextlib
import json
import os
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ..errors import ProtocolError, ToolExecutionError
from ..types import (
    AskQuestionEntry,
    AskQuestionOption,
    ChatResponse,
    HookResult,
    QuestionHookResult,
    Step,
    StreamChunk,
    ToolCall,
    ToolResult,
    UsageMetadata,
)
from .catalog import INTERNAL_NAMES, TOOLS, ToolGuard

__all__ = [
    "HOOK_EVENTS",
    "RESERVED_TOOL_NAMES",
    "AskUser",
    "Chunk",
    "ConfirmTool",
    "Effect",
    "HookCall",
    "PolicyRequest",
    "Reply",
    "RunTool",
    "SessionCore",
    "SessionEnded",
    "TurnEnded",
]

# Hook method name -> the harness's LifecycleHook value that asks for it.
HOOK_EVENTS: Final = {
    "pre_turn": "LIFECYCLE_HOOK_PRE_TURN",
    "post_turn": "LIFECYCLE_HOOK_POST_TURN",
    "pre_tool_call": "LIFECYCLE_HOOK_PRE_TOOL",
    "post_tool_call": "LIFECYCLE_HOOK_POST_TOOL",
    "on_tool_error": "LIFECYCLE_HOOK_ON_TOOL_ERROR",
    "on_compaction": "LIFECYCLE_HOOK_ON_COMPACTION",
}
_EVENT_OF_TYPE: Final = {v: k for k, v in HOOK_EVENTS.items()}

# Hooks see some built-in tools under internal names; policies and users know the names
# the model calls them by, so translate back.
_MODEL_TOOL_NAME: Final = INTERNAL_NAMES

# Step action field -> (tool name, {action field: argument key}).
_ACTIONS: Final[dict[str, tuple[str, Mapping[str, str]]]] = {
    spec.action: (spec.name, spec.action_args) for spec in TOOLS.values() if spec.action
}
_STEP_STATES: Final = {
    "STATE_ACTIVE": "active",
    "STATE_DONE": "done",
    "STATE_WAITING_FOR_USER": "waiting_for_user",
    "STATE_ERROR": "error",
}
_SOURCES: Final = {"SOURCE_SYSTEM": "system", "SOURCE_USER": "user", "SOURCE_MODEL": "model"}
_USAGE_FIELDS: Final = (
    "promptTokenCount",
    "cachedContentTokenCount",
    "candidatesTokenCount",
    "thoughtsTokenCount",
    "totalTokenCount",
)


# -- effects ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HookCall:
    """Dispatch `event` to the hooks with `arg`, then answer with `hook_reply`.

    A non-empty `refusal` means the request itself is unsafe to decide (malformed, or
    arguments the harness would read differently than the hooks): answer DENY with it,
    without dispatching.
    """

    request_id: str
    event: str  # a Hook method name, or "" for a hook type this SDK does not know
    arg: Any = None
    refusal: str = ""


@dataclass(frozen=True, slots=True)
class RunTool:
    """Run a host-side tool, then answer with `tool_reply`."""

    call: ToolCall


@dataclass(frozen=True, slots=True)
class AskUser:
    """The agent asks the user; answer with `question_reply`."""

    trajectory_id: str
    step_index: int
    questions: tuple[AskQuestionEntry, ...]


@dataclass(frozen=True, slots=True)
class ConfirmTool:
    """The harness wants a yes/no for a tool step; answer with `confirmation_reply`."""

    trajectory_id: str
    step_index: int
    call: ToolCall | None  # None: a step the SDK cannot describe, so it is rejected


@dataclass(frozen=True, slots=True)
class PolicyRequest:
    """The harness asks for a dynamic policy verdict; answer with `policy_reply`."""

    request_id: str
    call: ToolCall
    refusal: str = ""  # as for HookCall


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of the running turn, for `Agent.stream()`."""

    chunk: StreamChunk


@dataclass(frozen=True, slots=True)
class TurnEnded:
    """The main trajectory went idle: the turn is over, with or without an error."""

    response: ChatResponse
    error: str = ""
    cancelled: bool = False


@dataclass(frozen=True, slots=True)
class SessionEnded:
    """The harness acknowledged the session end request."""


@dataclass(frozen=True, slots=True)
class SandboxStatus:
    """Whether the harness's OS sandbox for commands works on this machine."""

    available: bool
    unavailable_reason: str = ""


@dataclass(frozen=True, slots=True)
class Initialized:
    """The harness accepted the configuration and named the conversation."""

    conversation_id: str
    history: tuple[Step, ...]
    sandbox: SandboxStatus | None = None  # None: the harness did not say


Effect = (
    HookCall
    | RunTool
    | AskUser
    | ConfirmTool
    | PolicyRequest
    | Chunk
    | TurnEnded
    | SessionEnded
    | Initialized
)
Reply = dict[str, Any]


# -- field access that never trusts the peer --------------------------------------------


def _obj(frame: dict[str, Any], key: str) -> dict[str, Any]:
    value = frame.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ProtocolError(f"field {key!r} should be an object, got {type(value).__name__}")
    return value


def _str(frame: dict[str, Any], key: str) -> str:
    value = frame.get(key, "")
    if not isinstance(value, str):
        raise ProtocolError(f"field {key!r} should be a string, got {type(value).__name__}")
    return value


def _int(frame: dict[str, Any], key: str) -> int:
    value = frame.get(key, 0)
    if isinstance(value, bool):
        raise ProtocolError(f"field {key!r} should be an integer, got bool")
    if isinstance(value, int):
        return value
    if isinstance(value, str):  # 64-bit integers travel as strings
        try:
            return int(value)
        except ValueError:
            pass
    raise ProtocolError(f"field {key!r} should be an integer, got {value!r}")


def _list(frame: dict[str, Any], key: str) -> list[Any]:
    value = frame.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ProtocolError(f"field {key!r} should be a list, got {type(value).__name__}")
    return value


def _sandbox(response: dict[str, Any]) -> SandboxStatus | None:
    if "sandboxStatus" not in response:
        return None
    status = _obj(response, "sandboxStatus")
    available = status.get("available", False)
    if not isinstance(available, bool):
        raise ProtocolError(f"field 'available' should be a bool, got {available!r}")
    return SandboxStatus(available, _str(status, "unavailableReason"))


def decode_frame(text: str | bytes) -> dict[str, Any]:
    """Parse one WebSocket text frame into a JSON object, or raise ProtocolError."""
    try:
        frame = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"frame is not JSON: {exc}") from None
    if not isinstance(frame, dict):
        raise ProtocolError(f"frame is not a JSON object: {type(frame).__name__}")
    return frame


def wire_path(value: str) -> str:
    """A `file://` URI as the harness writes it, as a plain filesystem path."""
    if value.startswith("file:"):
        return urllib.request.url2pathname(urllib.parse.urlparse(value).path)
    return value


def _parse_args(raw: str) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        args = json.loads(raw)
    except ValueError:
        raise ProtocolError(f"tool arguments are not JSON: {raw[:200]!r}") from None
    if not isinstance(args, dict):
        raise ProtocolError(f"tool arguments are not a JSON object: {raw[:200]!r}")
    return args


def _usage(frame: dict[str, Any]) -> UsageMetadata:
    return UsageMetadata(
        prompt_token_count=_int(frame, "promptTokenCount"),
        cached_content_token_count=_int(frame, "cachedContentTokenCount"),
        candidates_token_count=_int(frame, "candidatesTokenCount"),
        thoughts_token_count=_int(frame, "thoughtsTokenCount"),
        total_token_count=_int(frame, "totalTokenCount"),
    )


def _usage_delta(end: UsageMetadata, start: UsageMetadata) -> UsageMetadata:
    return UsageMetadata(
        prompt_token_count=end.prompt_token_count - start.prompt_token_count,
        cached_content_token_count=end.cached_content_token_count
        - start.cached_content_token_count,
        candidates_token_count=end.candidates_token_count - start.candidates_token_count,
        thoughts_token_count=end.thoughts_token_count - start.thoughts_token_count,
        total_token_count=end.total_token_count - start.total_token_count,
    )


# -- steps ------------------------------------------------------------------------------


@dataclass(slots=True)
class _StepState:
    """What the SDK knows of one step, merged from its successive updates."""

    trajectory_id: str
    step_index: int
    state: str = "unknown"
    source: str = "unknown"
    target: str = ""
    text: str = ""
    thinking: str = ""
    error: str = ""
    action: str = ""
    action_fields: dict[str, Any] = field(default_factory=dict)
    asked: bool = False

    def to_step(self, executed: ToolCall | None) -> Step:
        """The public view; `executed` is the call a tool step runs (see `_executed_call`)."""
        tool_call: ToolCall | None = None
        output: str | None = None
        exit_code: int | None = None
        kind: Any
        if _is_tool_action(self.action):
            kind = "tool_call"
            tool_call = executed
            if self.action == "runCommand":
                if "combinedOutput" in self.action_fields:
                    output = str(self.action_fields["combinedOutput"])
                if self.state == "done":
                    exit_code = _int(self.action_fields, "exitCode")
            elif self.action == "customTool":
                output = _str(_obj(self.action_fields, "toolResponse"), "responseJson") or None
        elif self.action == "compaction":
            kind = "compaction"
        elif self.action == "finish":
            kind = "finish"
            output = _str(self.action_fields, "outputString")
        elif self.state == "error" or self.action == "error":
            kind = "error"
        elif self.source in ("user", "system"):
            kind = self.source
        else:
            kind = "text"
        return Step(
            step_index=self.step_index,
            trajectory_id=self.trajectory_id,
            kind=kind,
            state=self.state,
            source=self.source,
            text=self.text,
            thinking=self.thinking,
            tool_call=tool_call,
            output=output,
            exit_code=exit_code,
            error=self.error,
        )


_TOOL_ACTIONS: Final = frozenset({*_ACTIONS, "mcpTool", "customTool"})
_STEP_ACTIONS: Final = (*_ACTIONS, "mcpTool", "customTool", "compaction", "finish", "error")


def _is_tool_action(action: str) -> bool:
    return action in _TOOL_ACTIONS


def _action_call(action: str, fields: dict[str, Any]) -> ToolCall:
    if action == "mcpTool":
        return ToolCall(
            name=_str(fields, "toolName"),
            args=_parse_args(_str(fields, "argumentsJson")),
            server_name=_str(fields, "serverName") or None,
        )
    if action == "customTool":
        call = _obj(fields, "toolCall")
        return ToolCall(
            name=_str(call, "name"),
            args=_parse_args(_str(call, "argumentsJson")),
            id=_str(call, "id"),
        )
    name, keys = _ACTIONS[action]
    args: dict[str, Any] = {}
    for wire_key, arg_key in keys.items():
        value = fields.get(wire_key)
        if isinstance(value, str) and value:
            args[arg_key] = wire_path(value) if "path" in wire_key.lower() else value
    return ToolCall(name=name, args=args)


def _same_arg(given: Any, described: str) -> bool:
    """Whether a call's argument is the value a step reports (paths compared normalised)."""
    if not isinstance(given, str):
        return False
    if given == described:
        return True
    return os.path.normpath(wire_path(given)) == os.path.normpath(described)


def _questions(request: dict[str, Any]) -> tuple[AskQuestionEntry, ...]:
    entries = []
    for question in _list(request, "questions"):
        if not isinstance(question, dict):
            raise ProtocolError("a question should be an object")
        choice = _obj(question, "multipleChoice")
        options = [
            AskQuestionOption(id=str(i), text=str(text))
            for i, text in enumerate(_list(choice, "choices"))
        ]
        entries.append(
            AskQuestionEntry(
                question=_str(choice, "question"),
                options=options,
                is_multi_select=bool(choice.get("isMultiSelect", False)),
            )
        )
    return tuple(entries)


# -- tool-call arguments ----------------------------------------------------------------

# The harness decodes arguments case-insensitively (Go's encoding/json: `cwd` is `Cwd`, and
# of two keys that differ only in case the last wins), so hooks and policies get each key
# of a built-in tool in its canonical spelling (from the catalogue), and a call whose keys
# collide under case-folding is refused: the harness would act on a value the policies
# never saw.
_BUILTIN_ARGS: Final = {
    spec.name: {key.casefold(): key for key in (*spec.args, "toolAction", "toolSummary")}
    for spec in TOOLS.values()
}
_MCP_WRAPPER: Final = frozenset({"servername", "toolname", "arguments"})

RESERVED_TOOL_NAMES: Final = frozenset({*TOOLS, *INTERNAL_NAMES, "call_mcp_tool"})
"""Names of the harness's own tools (as the model and as hooks see them): a host-side tool
with one of these names would be indistinguishable from the built-in in PRE_TOOL."""


def _case_collision(value: Any) -> str:
    """Two keys of one object (at any depth) that differ only in case, or ""."""
    if isinstance(value, dict):
        seen: dict[str, str] = {}
        for key, item in value.items():
            folded = key.casefold()
            if folded in seen:
                return f"{seen[folded]!r} and {key!r}"
            seen[folded] = key
            found = _case_collision(item)
            if found:
                return found
    elif isinstance(value, list):
        for item in value:
            found = _case_collision(item)
            if found:
                return found
    return ""


def _governed_args(name: str, server: str | None, args: dict[str, Any]) -> dict[str, Any]:
    """The arguments as the harness will act on them: canonical key spelling for built-in
    tools, and an MCP tool's own arguments rather than the `call_mcp_tool` wrapper."""
    if server is not None:
        folded = {key.casefold(): value for key, value in args.items()}
        if folded.keys() == _MCP_WRAPPER:
            inner = folded["arguments"]
            if isinstance(inner, str):
                inner = _parse_args(inner)
            if isinstance(inner, dict):
                return inner
        return args
    canonical = _BUILTIN_ARGS.get(name)
    if canonical is None:
        return args
    return {canonical.get(key.casefold(), key): value for key, value in args.items()}


# -- the core ---------------------------------------------------------------------------


class SessionCore:
    """The protocol state of one conversation, independent of how frames travel."""

    def __init__(
        self, host_tools: frozenset[str] = frozenset(), guard: ToolGuard | None = None
    ) -> None:
        # Host-side tools keep their own names: only built-in tools are reported to hooks
        # under internal names that need translating.
        self._host_tools = host_tools
        self._guard = guard  # None: no tool is refused for what it is (unit tests)
        self.conversation_id = ""
        self.streaming = False  # until a turn starts: before that nobody reads chunks
        self.usage = UsageMetadata()
        self._turn_usage_start = UsageMetadata()
        self._steps: dict[tuple[str, int], _StepState] = {}
        self._calls: dict[str, ToolCall] = {}  # pending: PRE_TOOL seen, no POST/ERROR yet
        self._turn_calls: list[ToolCall] = []  # every call PRE_TOOL asked about this turn

    # -- outgoing ---------------------------------------------------------------------

    def user_input(self, text: str, *, streaming: bool = True) -> Reply:
        """Start a turn: forget the previous turn's steps and send the prompt.

        With `streaming=False` no `Chunk` effects are built (nobody reads them).
        """
        self.streaming = streaming
        self._turn_calls = []
        self._steps = {}
        self._calls = {}
        self._turn_usage_start = self.usage
        return {"userInput": {"parts": [{"text": text}]}}

    # -- incoming ---------------------------------------------------------------------

    def receive(self, frame: dict[str, Any]) -> list[Effect]:
        """Translate one decoded OutputEvent into effects (possibly none)."""
        if not isinstance(frame, dict):
            raise ProtocolError(f"frame is not a JSON object: {type(frame).__name__}")
        if "callHookRequest" in frame:
            hook_call = self._hook_call(_obj(frame, "callHookRequest"))
            if hook_call.event == "pre_tool_call" and not hook_call.refusal and self.streaming:
                # Announced from PRE_TOOL: the exact call the model made (the step that
                # runs it can come earlier, and under another tool's name).
                asked: ToolCall = hook_call.arg
                chunk = StreamChunk(
                    type="tool_call",
                    tool_call=asked,
                    step_index=0,
                    trajectory_id=asked.trajectory_id,
                )
                return [Chunk(chunk), hook_call]
            return [hook_call]
        if "stepUpdate" in frame:
            return self._step_update(_obj(frame, "stepUpdate"))
        if "trajectoryStateUpdate" in frame:
            return self._trajectory_update(_obj(frame, "trajectoryStateUpdate"))
        if "toolCall" in frame:
            call = _obj(frame, "toolCall")
            return [
                RunTool(
                    ToolCall(
                        name=_str(call, "name"),
                        args=_parse_args(_str(call, "argumentsJson")),
                        id=_str(call, "id"),
                        trajectory_id=_str(call, "trajectoryId"),
                    )
                )
            ]
        if "usageUpdate" in frame:
            total = _obj(_obj(frame, "usageUpdate"), "total")
            if total:
                self.usage = _usage(total)
            return []
        if "policyDecisionRequest" in frame:
            request = _obj(frame, "policyDecisionRequest")
            asked, refusal = self._tool_call(_obj(request, "toolArgs"))
            return [PolicyRequest(_str(request, "requestId"), asked, refusal)]
        if "initializeConversationResponse" in frame:
            response = _obj(frame, "initializeConversationResponse")
            self.conversation_id = _str(response, "cascadeId")
            history = []
            for update in _list(response, "history"):
                if isinstance(update, dict):
                    step = self._merge_step(update)
                    history.append(step.to_step(self._executed_call(step, set())))
            self._steps = {}
            return [Initialized(self.conversation_id, tuple(history), _sandbox(response))]
        if "sessionEndResponse" in frame:
            return [SessionEnded()]
        return []  # an event this SDK does not know: ignore it

    def _model_name(self, name: str, server: str | None) -> str:
        if server is None and name not in self._host_tools:
            return _MODEL_TOOL_NAME.get(name, name)
        return name

    def _tool_call(self, args: dict[str, Any]) -> tuple[ToolCall, str]:
        """The call a PRE_TOOL (or policy) request is about, and why to refuse it, if so."""
        raw_name = _str(args, "toolName")
        server = _str(args, "serverName") or None
        name = self._model_name(raw_name, server)
        refusal = ""
        try:
            arguments = _parse_args(_str(args, "argumentsJson"))
        except ProtocolError as exc:
            arguments, refusal = {}, f"refused: {exc}"
        collision = _case_collision(arguments)
        if collision:
            refusal = (
                f"refused: arguments {collision} differ only in case, and the harness "
                "would act on one the policies did not check"
            )
        if not raw_name:
            refusal = "refused: a tool-call request without a tool name"
        if not refusal:
            arguments = _governed_args(name, server, arguments)
            if self._guard is not None:
                refusal = self._guard.refusal(name, server, arguments)
        step_index = args.get("stepIndex")
        call = ToolCall(
            name=name,
            args=arguments,
            id=_str(args, "callId"),
            server_name=server,
            trajectory_id=_str(args, "trajectoryId"),
            step_index=_int(args, "stepIndex") if step_index is not None else None,
        )
        return call, refusal

    def _hook_call(self, request: dict[str, Any]) -> HookCall:
        request_id = _str(request, "requestId")
        event = _EVENT_OF_TYPE.get(_str(request, "type"), "")
        if event == "pre_tool_call":
            call, refusal = self._tool_call(_obj(request, "preToolArgs"))
            if not refusal:
                self._turn_calls.append(call)
                if call.id:
                    self._calls[call.id] = call
            return HookCall(request_id, event, call, refusal)
        if event == "post_tool_call":
            args = _obj(request, "postToolArgs")
            name = _str(args, "toolName")
            call_id = _str(args, "callId")
            self._calls.pop(call_id, None)
            raw = _str(args, "result")
            result: Any = raw
            if raw[:1] in ("{", "["):
                with contextlib.suppress(ValueError):
                    result = json.loads(raw)
            return HookCall(
                request_id,
                event,
                ToolResult(
                    name=self._model_name(name, _str(args, "serverName") or None),
                    id=call_id,
                    result=result,
                    error=_str(args, "error") or None,
                    server_name=_str(args, "serverName") or None,
                ),
            )
        if event == "on_tool_error":
            args = _obj(request, "onToolErrorArgs")
            name = _str(args, "toolName")
            call_id = _str(args, "callId")
            known = self._calls.pop(call_id, None)
            server = _str(args, "serverName") or None
            call = known or ToolCall(
                name=self._model_name(name, server),
                id=call_id,
                server_name=server,
                trajectory_id=_str(args, "trajectoryId"),
            )
            message = _str(args, "errorMessage") or "tool failed"
            return HookCall(request_id, event, ToolExecutionError(message, call))
        if event == "pre_turn":
            parts = _list(_obj(_obj(request, "preTurnArgs"), "userInput"), "parts")
            text = "".join(p["text"] for p in parts if isinstance(p, dict) and "text" in p)
            return HookCall(request_id, event, text)
        if event == "on_compaction":
            return HookCall(request_id, event, _str(_obj(request, "onCompactionArgs"), "summary"))
        return HookCall(request_id, event)

    def _merge_step(self, update: dict[str, Any]) -> _StepState:
        key = (_str(update, "trajectoryId"), _int(update, "stepIndex"))
        step = self._steps.get(key)
        if step is None:
            step = self._steps[key] = _StepState(*key)
        state = update.get("state")
        if isinstance(state, str):
            step.state = _STEP_STATES.get(state, "unknown")
        source = update.get("source")
        if isinstance(source, str):
            step.source = _SOURCES.get(source, "unknown")
        target = update.get("target")
        if isinstance(target, str):
            step.target = target
        if "text" in update:
            step.text = _str(update, "text")
        if update.get("thinking"):
            step.thinking = _str(update, "thinking")
        elif update.get("thinkingDelta"):
            step.thinking += _str(update, "thinkingDelta")
        if update.get("errorMessage"):
            step.error = _str(update, "errorMessage")
        for action in _STEP_ACTIONS:
            if action in update:
                step.action = action
                step.action_fields = _obj(update, action)
                break
        return step

    def _step_update(self, update: dict[str, Any]) -> list[Effect]:
        step = self._merge_step(update)
        effects: list[Effect] = []
        if self.streaming:
            self._chunks(step, update, effects)
        questions = update.get("questionsRequest")
        if isinstance(questions, dict) and not step.asked:
            step.asked = True
            effects.append(AskUser(step.trajectory_id, step.step_index, _questions(questions)))
        if "toolConfirmationRequest" in update and step.state == "waiting_for_user":
            call = (
                _action_call(step.action, step.action_fields)
                if _is_tool_action(step.action)
                else None
            )
            guard = self._guard
            if call and guard and guard.refusal(call.name, call.server_name, call.args):
                call = None  # rejected, like a step the SDK cannot describe
            effects.append(ConfirmTool(step.trajectory_id, step.step_index, call))
        return effects

    def _chunks(self, step: _StepState, update: dict[str, Any], effects: list[Effect]) -> None:
        """The stream chunks one step update carries: text and thought (tool calls are
        announced from their PRE_TOOL request)."""
        if step.source == "model" and step.target == "TARGET_USER" and step.state != "error":
            delta = _str(update, "textDelta")
            if delta and not step.action:
                effects.append(Chunk(_chunk("text", delta, step)))
        thought = _str(update, "thinkingDelta")
        if thought:
            effects.append(Chunk(_chunk("thought", thought, step)))

    def _trajectory_update(self, update: dict[str, Any]) -> list[Effect]:
        trajectory = _str(update, "trajectoryId")
        is_main = trajectory == self.conversation_id or (
            not self.conversation_id and not update.get("parentTrajectoryId")
        )
        state = update.get("state")
        if not is_main or state not in ("STATE_FULLY_IDLE", "STATE_CANCELLED"):
            return []
        return [
            TurnEnded(
                self.response(),
                error=_str(update, "error"),
                cancelled=state == "STATE_CANCELLED",
            )
        ]

    def response(self) -> ChatResponse:
        """The current turn's response as far as it has arrived."""
        main = self.conversation_id
        steps = sorted(self._steps.values(), key=lambda s: (s.trajectory_id != main, s.step_index))
        text = ""
        thinking = []
        for step in steps:
            if step.trajectory_id != main and main:
                continue
            if step.thinking:
                thinking.append(step.thinking)
            if (
                step.source == "model"
                and step.target == "TARGET_USER"
                and step.state == "done"
                and not step.action
                and step.text
            ):
                text = step.text
        used: set[int] = set()
        return ChatResponse(
            text=text,
            thinking="\n".join(thinking),
            steps=[s.to_step(self._executed_call(s, used)) for s in steps],
            usage=_usage_delta(self.usage, self._turn_usage_start),
        )

    def _executed_call(self, step: _StepState, used: set[int]) -> ToolCall | None:
        """The PRE_TOOL call this tool step runs: same tool, same target; else the call as
        the step describes it (None for a step that is not a tool call). Steps only say
        what they do (an `editFile` is write_to_file or replace_file_content); the call
        has the model's name and full arguments."""
        if not _is_tool_action(step.action):
            return None
        described = _action_call(step.action, step.action_fields)
        names = {described.name}
        if step.action == "editFile":
            names.add("write_to_file")
        for n, call in enumerate(self._turn_calls):
            if n in used or call.name not in names:
                continue
            if call.trajectory_id and call.trajectory_id != step.trajectory_id:
                continue
            if all(_same_arg(call.args.get(k), v) for k, v in described.args.items()):
                used.add(n)
                return call
        return described


def _chunk(kind: Literal["text", "thought"], delta: str, step: _StepState) -> StreamChunk:
    return StreamChunk(
        type=kind, text=delta, step_index=step.step_index, trajectory_id=step.trajectory_id
    )


# -- replies ----------------------------------------------------------------------------


def _hook_response(request_id: str, result: dict[str, Any]) -> Reply:
    return {"callHookResponse": {"requestId": request_id, **result}}


_EMPTY: Final[dict[str, Any]] = {"emptyResult": {}}


def hook_reply(call: HookCall, outcome: Any) -> Reply:
    """The answer to `call` given what the hooks decided (see `failed_hook_reply`)."""
    if call.event == "pre_tool_call" or call.event == "pre_turn":
        result: HookResult = outcome
        key = "preToolResult" if call.event == "pre_tool_call" else "preTurnResult"
        if result.allow:
            return _hook_response(call.request_id, {key: {"decision": "ALLOW"}})
        reason = result.message or "denied by a hook"
        return _hook_response(call.request_id, {key: {"decision": "DENY", "reason": reason}})
    if call.event == "on_tool_error":
        recovered, value = outcome
        if recovered.allow and value is not None:
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            return _hook_response(
                call.request_id, {"onToolErrorResult": {"customErrorMessage": text}}
            )
    return _hook_response(call.request_id, _EMPTY)


def failed_hook_reply(call: HookCall, reason: str) -> Reply:
    """The fail-closed answer when dispatching `call` itself failed or was cancelled."""
    if call.event in ("pre_tool_call", "pre_turn"):
        return hook_reply(call, HookResult(allow=False, message=reason))
    return _hook_response(call.request_id, _EMPTY)


def tool_reply(call: ToolCall, result: ToolResult) -> Reply:
    """The answer to a host-side tool call: a dict result as is, anything else wrapped."""
    if result.error is not None:
        return {"toolResponse": {"id": call.id, "errorMessage": result.error}}
    value = result.result
    payload = value if isinstance(value, dict) else {"result": value}
    try:
        encoded = json.dumps(payload, default=str)
    except ValueError as exc:  # circular structures
        return {"toolResponse": {"id": call.id, "errorMessage": f"unserialisable result: {exc}"}}
    return {"toolResponse": {"id": call.id, "responseJson": encoded}}


def question_reply(ask: AskUser, answer: QuestionHookResult | None) -> Reply:
    """Answers by option index; no answer, or a cancelled one, cancels the questions."""
    base: dict[str, Any] = {"trajectoryId": ask.trajectory_id, "stepIndex": ask.step_index}
    if answer is None or answer.cancelled:
        return {"questionResponse": {**base, "cancelled": True}}
    answers: list[dict[str, Any]] = []
    for i, entry in enumerate(ask.questions):
        response = answer.responses[i] if i < len(answer.responses) else None
        if response is None or response.skipped:
            answers.append({"unanswered": True})
            continue
        ids = {option.id: n for n, option in enumerate(entry.options)}
        indices = [ids[o] for o in response.selected_option_ids or () if o in ids]
        if not entry.is_multi_select:
            indices = indices[:1]
        choice: dict[str, Any] = {"selectedChoiceIndices": indices}
        if response.freeform_response:
            choice["freeformResponse"] = response.freeform_response
        answers.append({"multipleChoiceAnswer": choice})
    return {"questionResponse": {**base, "response": {"answers": answers}}}


def confirmation_reply(confirm: ConfirmTool, accepted: bool) -> Reply:
    return {
        "toolConfirmation": {
            "trajectoryId": confirm.trajectory_id,
            "stepIndex": confirm.step_index,
            "accepted": accepted,
        }
    }


def policy_reply(request: PolicyRequest, result: HookResult) -> Reply:
    outcome: Literal["POLICY_EVALUATION_OUTCOME_ALLOW", "POLICY_EVALUATION_OUTCOME_DENY"] = (
        "POLICY_EVALUATION_OUTCOME_ALLOW" if result.allow else "POLICY_EVALUATION_OUTCOME_DENY"
    )
    body: dict[str, Any] = {"requestId": request.request_id, "outcome": outcome}
    if not result.allow:
        body["denyReason"] = result.message or "denied by policy"
    return {"policyDecisionResponse": body}


HALT: Final[Reply] = {"haltRequest": True}
SESSION_END: Final[Reply] = {"sessionEndRequest": True}
