"""The sans-I/O session core: harness frames in, effects out.

Nothing here touches a socket or awaits anything. `SessionCore.receive(frame)` turns one
decoded `OutputEvent` (a JSON object in the canonical protobuf JSON mapping) into a list
of effects (effects.py) for the I/O layer to carry out — dispatch a hook, run a host-side
tool, ask the user, emit a stream chunk, end the turn; each request effect builds the
`InputEvent` that answers it.

Incoming frames are read by field name from plain dicts (fields.py), so fields and enum
values a newer harness adds are ignored by construction, and a field of the wrong type is
a `ProtocolError`.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

from .._reasons import StopReason
from ..errors import ProtocolError, ToolExecutionError
from ..hooks import EVENTS
from ..media import PromptPart
from ..types import (
    AskQuestionEntry,
    AskQuestionOption,
    ChatResponse,
    Step,
    StreamChunk,
    ToolCall,
    ToolResult,
    UsageMetadata,
)
from . import effects, wire
from .catalog import INTERNAL_NAMES, TOOLS, ToolGuard, canonical_args
from .fields import int_field, list_field, obj_field, parse_args, str_field, wire_path
from .pairing import TurnCalls
from .rewrite import json_args

__all__ = ["HOOK_EVENTS", "SessionCore"]

logger = logging.getLogger("antigravity_sdk.agent")

# Session start and end are dispatched by the SDK itself (the harness raises them lazily
# or late), and questions arrive as step updates: the harness is asked for the others.
_SDK_DISPATCHED: Final = frozenset({"on_session_start", "on_session_end", "on_interaction"})

HOOK_EVENTS: Final = {
    event: "LIFECYCLE_HOOK_" + event.upper().removesuffix("_CALL")
    for event in EVENTS
    if event not in _SDK_DISPATCHED
}
"""Hook event -> the harness's LifecycleHook value that asks for it (named after the event:
`pre_tool_call` is `LIFECYCLE_HOOK_PRE_TOOL`)."""
_EVENT_OF_TYPE: Final = {v: k for k, v in HOOK_EVENTS.items()}

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


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part.title() for part in rest)


# UsageMetadata field -> the wire field that carries it.
_USAGE_FIELDS: Final = {name: _camel(name) for name in UsageMetadata.model_fields}


def _sandbox(response: dict[str, Any]) -> effects.SandboxStatus | None:
    if "sandboxStatus" not in response:
        return None
    status = obj_field(response, "sandboxStatus")
    available = status.get("available", False)
    if not isinstance(available, bool):
        raise ProtocolError(f"field 'available' should be a bool, got {available!r}")
    return effects.SandboxStatus(available, str_field(status, "unavailableReason"))


# Token counts travel as a tuple of ints in _USAGE_FIELDS' order: a usage update comes
# with every model call, and a UsageMetadata is only built when someone reads one.
Counts = tuple[int, ...]
_NO_USAGE: Final[Counts] = (0,) * len(_USAGE_FIELDS)


def _usage(frame: dict[str, Any]) -> Counts:
    return tuple([int_field(frame, key) for key in _USAGE_FIELDS.values()])


def _usage_model(counts: Counts) -> UsageMetadata:
    return UsageMetadata(**dict(zip(_USAGE_FIELDS, counts, strict=True)))


def _usage_delta(end: Counts, start: Counts) -> UsageMetadata:
    return _usage_model(tuple([e - s for e, s in zip(end, start, strict=True)]))


def _trajectory_usage(entries: list[Any]) -> dict[str, Counts]:
    """`TrajectoryUsageEntry`s by trajectory id (entries without an id are skipped)."""
    usage = {}
    for entry in entries:
        if not isinstance(entry, dict):
            raise ProtocolError("a trajectory usage entry should be an object")
        trajectory = str_field(entry, "trajectoryId")
        if trajectory:
            usage[trajectory] = _usage(obj_field(entry, "usage"))
    return usage


_STOP_REASONS: Final = {
    "STOP_REASON_MAX_MODEL_CALLS_EXCEEDED": StopReason.MAX_MODEL_CALLS,
    "STOP_REASON_MAX_TOOL_CALLS_EXCEEDED": StopReason.MAX_TOOL_CALLS,
    "STOP_REASON_MAX_INPUT_TOKENS_EXCEEDED": StopReason.MAX_INPUT_TOKENS,
    "STOP_REASON_MAX_OUTPUT_TOKENS_EXCEEDED": StopReason.MAX_OUTPUT_TOKENS,
    "STOP_REASON_MAX_TOTAL_TOKENS_EXCEEDED": StopReason.MAX_TOTAL_TOKENS,
    "STOP_REASON_QUOTA_EXHAUSTED": StopReason.QUOTA_EXHAUSTED,
}


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
    reported: bool = False  # its tool_result chunk was streamed
    call_index: int | None = None  # the turn's call it runs (`TurnCalls.pair`), once paired

    def to_step(self, executed: ToolCall | None, denied: Denial | None = None) -> Step:
        """The public view; `executed` is the call a tool step runs (see `_executed_call`),
        `denied` the call and reason of a denial that ended this step."""
        tool_call: ToolCall | None = None
        output: str | None = None
        exit_code: int | None = None
        error = self.error
        kind: Any
        if denied is not None and self.state == "error":
            kind = "denied"
            tool_call, error = denied
        elif _is_tool_action(self.action):
            kind = "tool_call"
            tool_call = executed
            if self.action == "runCommand":
                if "combinedOutput" in self.action_fields:
                    output = str(self.action_fields["combinedOutput"])
                if self.state == "done":
                    exit_code = int_field(self.action_fields, "exitCode")
            elif self.action == "customTool":
                output = (
                    str_field(obj_field(self.action_fields, "toolResponse"), "responseJson") or None
                )
        elif self.action == "compaction":
            kind = "compaction"
        elif self.action == "finish":
            kind = "finish"
            output = str_field(self.action_fields, "outputString")
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
            error=error,
        )


Denial: TypeAlias = tuple[ToolCall, str]
"""A denied tool call and the reason it was denied with (what the model read)."""


_TOOL_ACTIONS: Final = frozenset({*_ACTIONS, "mcpTool", "customTool"})
_STEP_ACTIONS: Final = (*_ACTIONS, "mcpTool", "customTool", "compaction", "finish", "error")


def _is_tool_action(action: str) -> bool:
    return action in _TOOL_ACTIONS


def _step_args(raw: str) -> dict[str, Any]:
    """A step's report of a call's arguments; {} when they are not a JSON object (a call
    with such arguments was refused: its step describes nothing the SDK can check)."""
    try:
        return parse_args(raw)
    except ProtocolError:
        return {}


def _action_call(action: str, fields: dict[str, Any]) -> ToolCall:
    if action == "mcpTool":
        return ToolCall(
            name=str_field(fields, "toolName"),
            args=_step_args(str_field(fields, "argumentsJson")),
            server_name=str_field(fields, "serverName") or None,
        )
    if action == "customTool":
        call = obj_field(fields, "toolCall")
        return ToolCall(
            name=str_field(call, "name"),
            args=_step_args(str_field(call, "argumentsJson")),
            id=str_field(call, "id"),
        )
    name, keys = _ACTIONS[action]
    args: dict[str, Any] = {}
    for wire_key, arg_key in keys.items():
        value = fields.get(wire_key)
        if isinstance(value, str) and value:
            args[arg_key] = wire_path(value) if "path" in wire_key.lower() else value
    return ToolCall(name=name, args=args)


def _questions(request: dict[str, Any]) -> tuple[AskQuestionEntry, ...]:
    entries = []
    for question in list_field(request, "questions"):
        if not isinstance(question, dict):
            raise ProtocolError("a question should be an object")
        choice = obj_field(question, "multipleChoice")
        options = [
            AskQuestionOption(id=str(i), text=str(text))
            for i, text in enumerate(list_field(choice, "choices"))
        ]
        entries.append(
            AskQuestionEntry(
                question=str_field(choice, "question"),
                options=options,
                is_multi_select=bool(choice.get("isMultiSelect", False)),
            )
        )
    return tuple(entries)


# -- tool-call arguments ----------------------------------------------------------------

# The harness decodes arguments case-insensitively at every depth (Go's encoding/json: `cwd`
# is `Cwd`, `Subagents[].workspace` is `Workspace`, and of two keys that differ only in case
# the last wins), so hooks and policies get each key of a built-in tool in its canonical
# spelling at every depth (`catalog.canonical_args`), and a call whose keys collide under
# case-folding is refused: the harness would act on a value the policies never saw.
_MCP_WRAPPER: Final = frozenset({"servername", "toolname", "arguments"})
_WAKE_REFUSAL: Final = (
    "refused: the harness acted on its own while no chat() or stream() was running (a "
    "timer the model scheduled woke an agent); AgentBuilder.allow_ungoverned('schedule') "
    "lets such wakes run"
)


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


def _known_args(name: str, args: Mapping[str, Any], known: frozenset[str] | None) -> None:
    """Refuse a rewritten argument the tool does not take (`known` None: not known)."""
    if known is None:
        return
    unknown = sorted(key for key in args if key not in known)
    if unknown:
        takes = ", ".join(sorted(known)) or "none"
        raise ValueError(f"{name} takes no argument {unknown[0]!r} (it takes: {takes})")


def _governed_args(
    name: str, server: str | None, args: dict[str, Any]
) -> tuple[dict[str, Any], str]:
    """The arguments as the harness will act on them — canonical key spelling for built-in
    tools, an MCP tool's own arguments rather than the `call_mcp_tool` wrapper — and why
    to refuse the call if they cannot be told (an MCP `Arguments` that is not an object,
    or a string that is not one in JSON)."""
    if server is not None:
        folded = {key.casefold(): value for key, value in args.items()}
        if "arguments" not in folded:
            return args, ""
        inner = folded["arguments"]
        if isinstance(inner, str):
            try:
                inner = parse_args(inner)
            except ProtocolError as exc:
                return args, f"refused: the MCP tool's Arguments cannot be checked: {exc}"
        if not isinstance(inner, dict):
            return args, (
                "refused: the MCP tool's Arguments cannot be checked: they are a "
                f"{type(inner).__name__}, not a JSON object"
            )
        if folded.keys() != _MCP_WRAPPER:
            extra = sorted(key for key in args if key.casefold() not in _MCP_WRAPPER)
            return args, f"refused: call_mcp_tool takes no argument {extra[0]!r}"
        return inner, ""
    return canonical_args(name, args), ""


# -- the core ---------------------------------------------------------------------------


class SessionCore:
    """The protocol state of one conversation, independent of how frames travel."""

    def __init__(
        self,
        host_tools: frozenset[str] = frozenset(),
        guard: ToolGuard | None = None,
        *,
        host_args: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        # Host-side tools keep their own names: only built-in tools are reported to hooks
        # under internal names that need translating.
        self._host_tools = host_tools
        self._host_args = host_args or {}  # host tool -> the arguments its schema names
        self._guard = guard  # None: no tool is refused for what it is (unit tests)
        self.conversation_id = ""
        self.streaming = False  # until a turn starts: before that nobody reads chunks
        self._usage = _NO_USAGE
        self._usage_by_trajectory: dict[str, Counts] = {}
        self._turn_usage_start = _NO_USAGE
        self._turn_usage_by_trajectory: dict[str, Counts] = {}
        self.stop_reason: StopReason | None = None  # the harness's, for the current turn
        self._steps: dict[tuple[str, int], _StepState] = {}
        self._calls: dict[str, ToolCall] = {}  # pending: PRE_TOOL seen, no POST/ERROR yet
        self._turn_calls = TurnCalls()  # every call PRE_TOOL asked about this turn
        self._denials: list[Denial] = []  # this turn's, in the order they were made
        self._in_turn = False  # from user_input() until the main trajectory's turn ends
        self._halted = False  # a wake outside any turn was halted (until the next one)

    @property
    def usage(self) -> UsageMetadata:
        """The conversation's token counts so far."""
        return _usage_model(self._usage)

    @property
    def usage_by_trajectory(self) -> dict[str, UsageMetadata]:
        """The same per trajectory (the main one and each subagent's)."""
        return {key: _usage_model(counts) for key, counts in self._usage_by_trajectory.items()}

    # -- outgoing ---------------------------------------------------------------------

    def user_input(
        self, prompt: str | Sequence[PromptPart], *, streaming: bool = True
    ) -> effects.Frame:
        """Start a turn: forget the previous turn's steps and send the prompt (text, or
        checked parts: see media.py).

        With `streaming=False` no `Chunk` effects are built (nobody reads them).
        """
        self.streaming = streaming
        self._in_turn = True
        self._halted = False
        self._turn_calls = TurnCalls()
        self._denials = []
        self._steps = {}
        self._calls = {}
        self._turn_usage_start = self._usage
        self._turn_usage_by_trajectory = dict(self._usage_by_trajectory)
        self.stop_reason = None
        if isinstance(prompt, str):
            return {"userInput": {"parts": [{"text": prompt}]}}
        frame = {"userInput": {"parts": [_input_part(part) for part in prompt]}}
        if all(isinstance(part, str) for part in prompt):
            return frame
        return wire.StreamedFrame(frame)  # media bytes are encoded while being sent

    # -- incoming ---------------------------------------------------------------------

    def receive(self, frame: dict[str, Any]) -> list[effects.Effect]:
        """Translate one decoded OutputEvent into effects (possibly none).

        While no turn of the client's runs, the harness can only be acting on its own (a
        timer the model scheduled woke an agent; measured: no PRE_TURN, the woken agents'
        tool calls asked as usual). Unless the guard lets such wakes run
        (`ToolGuard.scheduled_wakes`), every request of one is refused unasked and the
        wake is halted.
        """
        found = self._receive(frame)
        guard = self._guard
        if self._in_turn or guard is None or guard.scheduled_wakes:
            return found
        return [self._unasked(effect) for effect in found]

    def _unasked(self, effect: effects.Effect) -> effects.Effect:
        if isinstance(effect, effects.Chunk | effects.Initialized | effects.SessionEnded):
            return effect
        if isinstance(effect, effects.TurnEnded | effects.Unasked | effects.HaltWake):
            return effect
        return effects.Unasked(effect, _WAKE_REFUSAL)

    def _receive(self, frame: dict[str, Any]) -> list[effects.Effect]:
        if not isinstance(frame, dict):
            raise ProtocolError(f"frame is not a JSON object: {type(frame).__name__}")
        if "callHookRequest" in frame:
            hook_call = self._hook_call(obj_field(frame, "callHookRequest"))
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
                return [effects.Chunk(chunk), hook_call]
            return [hook_call]
        if "stepUpdate" in frame:
            return self._step_update(obj_field(frame, "stepUpdate"))
        if "trajectoryStateUpdate" in frame:
            return self._trajectory_update(obj_field(frame, "trajectoryStateUpdate"))
        if "toolCall" in frame:
            call = obj_field(frame, "toolCall")
            refusal = ""
            try:
                arguments = parse_args(str_field(call, "argumentsJson"))
            except ProtocolError as exc:
                arguments, refusal = {}, f"refused: {exc}"
            run = effects.RunTool(
                ToolCall(
                    name=str_field(call, "name"),
                    args=arguments,
                    id=str_field(call, "id"),
                    trajectory_id=str_field(call, "trajectoryId"),
                )
            )
            return [effects.Unasked(run, refusal) if refusal else run]
        if "usageUpdate" in frame:
            update = obj_field(frame, "usageUpdate")
            total = obj_field(update, "total")
            if total:
                self._usage = _usage(total)
            self._usage_by_trajectory.update(_trajectory_usage(list_field(update, "agents")))
            return []
        if "policyDecisionRequest" in frame:
            request = obj_field(frame, "policyDecisionRequest")
            asked, refusal = self._tool_call(obj_field(request, "toolArgs"))
            return [effects.PolicyRequest(str_field(request, "requestId"), asked, refusal)]
        if "initializeConversationResponse" in frame:
            response = obj_field(frame, "initializeConversationResponse")
            self.conversation_id = str_field(response, "cascadeId")
            # A resumed conversation: what it has cost so far. Its usage updates count
            # from there, so its first turn here does not report the earlier sessions'
            # tokens as its own (a turn's usage is the difference from its start).
            self._usage = _usage(obj_field(response, "cumulativeUsage"))
            self._usage_by_trajectory = _trajectory_usage(list_field(response, "trajectoryUsage"))
            history = []
            for update in list_field(response, "history"):
                if isinstance(update, dict):
                    step = self._merge_step(update)
                    history.append(step.to_step(self._executed_call(step)))
            self._steps = {}
            return [effects.Initialized(self.conversation_id, tuple(history), _sandbox(response))]
        if "sessionEndResponse" in frame:
            return [effects.SessionEnded()]
        return []  # an event this SDK does not know: ignore it

    def _model_name(self, name: str, server: str | None) -> str:
        if server is None and name not in self._host_tools:
            # Hooks see some built-in tools under internal names; policies and users know the
            # names the model calls them by, so translate back.
            return INTERNAL_NAMES.get(name, name)
        return name

    def _tool_call(self, args: dict[str, Any]) -> tuple[ToolCall, str]:
        """The call a PRE_TOOL (or policy) request is about, and why to refuse it, if so."""
        raw_name = str_field(args, "toolName")
        server = str_field(args, "serverName") or None
        name = self._model_name(raw_name, server)
        refusal = ""
        try:
            arguments = parse_args(str_field(args, "argumentsJson"))
        except ProtocolError as exc:
            arguments, refusal = {}, f"refused: {exc}"
        try:
            collision = _case_collision(arguments)
            if collision:
                refusal = (
                    f"refused: arguments {collision} differ only in case, and the harness "
                    "would act on one the policies did not check"
                )
            if not raw_name:
                refusal = "refused: a tool-call request without a tool name"
            if not refusal:
                arguments, refusal = _governed_args(name, server, arguments)
            if not refusal and self._guard is not None:
                refusal = self._guard.refusal(name, server, arguments)
        except RecursionError:
            arguments, refusal = {}, "refused: tool arguments are nested too deep to check"
        step_index = args.get("stepIndex")
        call = ToolCall(
            name=name,
            args=arguments,
            id=str_field(args, "callId"),
            server_name=server,
            trajectory_id=str_field(args, "trajectoryId"),
            step_index=int_field(args, "stepIndex") if step_index is not None else None,
        )
        return call, refusal

    def check_rewrite(self, call: ToolCall, args: dict[str, Any]) -> ToolCall:
        """The call with a hook's rewritten `args`, canonicalised as the model's arguments
        are (a `RewriteCheck`); raises ValueError or TypeError to refuse them.

        Beyond the model's path, a rewrite may not name an argument the tool does not take
        (the harness would reject or ignore it, and no policy was written for it), and it
        passes the SDK's own guard again. The SDK remembers the rewritten call as the one
        the harness runs.
        """
        plain = json_args(args)  # no two keys equal under case-folding, at any depth
        if call.server_name is None:
            if call.name in self._host_tools:
                _known_args(call.name, plain, self._host_args.get(call.name))
            elif call.name in TOOLS and call.name != "finish":
                plain = canonical_args(call.name, plain)
                _known_args(call.name, plain, frozenset(TOOLS[call.name].args))
        if self._guard is not None:
            refusal = self._guard.refusal(call.name, call.server_name, plain)
            if refusal:
                raise ValueError(refusal)
        rewritten = call.model_copy(update={"args": plain})
        if call.id and self._calls.get(call.id) is call:
            self._calls[call.id] = rewritten
        self._turn_calls.replace(call, rewritten)
        return rewritten

    def note_denial(self, call: ToolCall, reason: str) -> None:
        """A tool call the SDK denied (hooks, policies or a refusal): the step it ends is
        reported as `denied`, with the call and the reason, and no tool step is taken for
        it (the same call asked again and allowed is the one that runs)."""
        self._denials.append((call, reason))
        self._turn_calls.exclude(call)

    @staticmethod
    def _denial(step: _StepState, denials: dict[tuple[str, str], deque[Denial]]) -> Denial | None:
        """The denial that ended `step`: the harness records a denied call as an error
        step of its own (not at the request's step index) whose error is the reason, so
        the first unused denial of the same trajectory with that reason, in order
        (`denials`: the turn's, by trajectory and reason, each taken once)."""
        if step.state != "error" or step.action not in ("", "error"):
            return None
        waiting = denials.get((step.trajectory_id, step.error))
        return waiting.popleft() if waiting else None

    def _hook_call(self, request: dict[str, Any]) -> effects.HookCall:
        request_id = str_field(request, "requestId")
        event = _EVENT_OF_TYPE.get(str_field(request, "type"), "")
        if event == "pre_tool_call":
            call, refusal = self._tool_call(obj_field(request, "preToolArgs"))
            if not refusal:
                self._turn_calls.add(call)
                if call.id:
                    self._calls[call.id] = call
            return effects.HookCall(request_id, event, call, refusal)
        if event == "post_tool_call":
            args = obj_field(request, "postToolArgs")
            name = str_field(args, "toolName")
            call_id = str_field(args, "callId")
            ran = self._calls.pop(call_id, None)
            raw = str_field(args, "result")
            result: Any = raw
            if raw[:1] in ("{", "["):
                with contextlib.suppress(ValueError):
                    result = json.loads(raw)
            return effects.HookCall(
                request_id,
                event,
                ToolResult(
                    name=self._model_name(name, str_field(args, "serverName") or None),
                    id=call_id,
                    result=result,
                    error=str_field(args, "error") or None,
                    server_name=str_field(args, "serverName") or None,
                    tool_call=ran,
                ),
            )
        if event == "on_tool_error":
            args = obj_field(request, "onToolErrorArgs")
            name = str_field(args, "toolName")
            call_id = str_field(args, "callId")
            known = self._calls.pop(call_id, None)
            server = str_field(args, "serverName") or None
            call = known or ToolCall(
                name=self._model_name(name, server),
                id=call_id,
                server_name=server,
                trajectory_id=str_field(args, "trajectoryId"),
            )
            message = str_field(args, "errorMessage") or "tool failed"
            return effects.HookCall(request_id, event, ToolExecutionError(message, call))
        if event == "pre_turn":
            parts = list_field(obj_field(obj_field(request, "preTurnArgs"), "userInput"), "parts")
            text = "".join(p["text"] for p in parts if isinstance(p, dict) and "text" in p)
            return effects.HookCall(request_id, event, text)
        if event == "on_compaction":
            summary = str_field(obj_field(request, "onCompactionArgs"), "summary")
            return effects.HookCall(request_id, event, summary)
        if event == "post_turn":
            return effects.HookCall(request_id, event, self.response())  # the turn as it ended
        return effects.HookCall(request_id, event)

    def _merge_step(self, update: dict[str, Any]) -> _StepState:
        key = (str_field(update, "trajectoryId"), int_field(update, "stepIndex"))
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
            step.text = str_field(update, "text")
        if update.get("thinking"):
            step.thinking = str_field(update, "thinking")
        elif update.get("thinkingDelta"):
            step.thinking += str_field(update, "thinkingDelta")
        if update.get("errorMessage"):
            step.error = str_field(update, "errorMessage")
        for action in _STEP_ACTIONS:
            if action in update:
                step.action = action
                step.action_fields = obj_field(update, action)
                break
        return step

    def _step_update(self, update: dict[str, Any]) -> list[effects.Effect]:
        step = self._merge_step(update)
        found: list[effects.Effect] = []
        if step.state == "error" and step.source == "system" and not step.reported:
            # The harness's own errors: a model call it will retry, the one that ends the
            # turn. Otherwise they would only show as a late TurnFailedError (or, while it
            # retries, as silence). A refused tool call or a budget stop is the model's
            # step: the tool_call chunk and `stop_reason` report those.
            step.reported = True
            logger.warning("the harness reports an error: %s", step.text or step.error)
            if self.streaming:
                found.append(effects.Chunk(_error_chunk(step)))
        if self.streaming:
            self._chunks(step, update, found)
        questions = update.get("questionsRequest")
        if isinstance(questions, dict) and not step.asked:
            step.asked = True
            found.append(
                effects.AskUser(step.trajectory_id, step.step_index, _questions(questions))
            )
        if "toolConfirmationRequest" in update and step.state == "waiting_for_user":
            call = (
                _action_call(step.action, step.action_fields)
                if _is_tool_action(step.action)
                else None
            )
            guard = self._guard
            if call and guard and guard.refusal(call.name, call.server_name, call.args):
                call = None  # rejected, like a step the SDK cannot describe
            found.append(effects.ConfirmTool(step.trajectory_id, step.step_index, call))
        return found

    def _chunks(
        self, step: _StepState, update: dict[str, Any], found: list[effects.Effect]
    ) -> None:
        """The stream chunks one step update carries: text and thought, and a tool step's
        result once it is done or failed (tool calls are announced from their PRE_TOOL
        request)."""
        if step.source == "model" and step.target == "TARGET_USER" and step.state != "error":
            delta = str_field(update, "textDelta")
            if delta and not step.action:
                found.append(effects.Chunk(_chunk("text", delta, step)))
        thought = str_field(update, "thinkingDelta")
        if thought:
            found.append(effects.Chunk(_chunk("thought", thought, step)))
        if not step.reported and step.state in _FINISHED and _is_tool_action(step.action):
            step.reported = True
            public = step.to_step(self._executed_call(step))
            result = StreamChunk(
                type="tool_result",
                text=(public.output or "")[:_RESULT_PREVIEW],
                error=public.error,
                tool_call=public.tool_call,
                step_index=step.step_index,
                trajectory_id=step.trajectory_id,
            )
            found.append(effects.Chunk(result))

    def _trajectory_update(self, update: dict[str, Any]) -> list[effects.Effect]:
        trajectory = str_field(update, "trajectoryId")
        is_main = trajectory == self.conversation_id or (
            not self.conversation_id and not update.get("parentTrajectoryId")
        )
        state = update.get("state")
        guard = self._guard
        if not self._in_turn and guard is not None and not guard.scheduled_wakes:
            # No turn of the client's: an agent the harness woke by itself. Halted when
            # the root's woken turn starts (measured: a HALT while the root waits for a
            # woken subagent leaves the harness stuck; at this point it ends the wake
            # and its timer), and its end is no turn of the client's.
            if not is_main:
                return []
            if state in ("STATE_FULLY_IDLE", "STATE_CANCELLED"):
                self._halted = False  # that wake is over; halt the next one too
            elif state == "STATE_RUNNING" and not self._halted:
                self._halted = True
                return [effects.HaltWake(_WAKE_REFUSAL)]
            return []
        if not is_main:
            return []
        reason = update.get("stopReason")
        if isinstance(reason, str) and reason != "STOP_REASON_UNSPECIFIED":
            self.stop_reason = _STOP_REASONS.get(reason, StopReason.UNKNOWN)
        if state not in ("STATE_FULLY_IDLE", "STATE_CANCELLED"):
            return []
        self._in_turn = False
        response = self.response()
        if state == "STATE_CANCELLED":
            response.stop_reason = StopReason.CANCELLED
        return [
            effects.TurnEnded(
                response,
                error=str_field(update, "error"),
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
        denials: dict[tuple[str, str], deque[Denial]] = {}
        for denial in self._denials:
            denials.setdefault((denial[0].trajectory_id, denial[1]), deque()).append(denial)
        start = self._turn_usage_by_trajectory
        by_trajectory = {
            trajectory: _usage_delta(usage, start.get(trajectory, _NO_USAGE))
            for trajectory, usage in self._usage_by_trajectory.items()
            if usage != start.get(trajectory)
        }
        return ChatResponse(
            text=text,
            thinking="\n".join(thinking),
            steps=[s.to_step(self._executed_call(s), self._denial(s, denials)) for s in steps],
            usage=_usage_delta(self._usage, self._turn_usage_start),
            usage_by_trajectory=by_trajectory,
            stop_reason=self.stop_reason or StopReason.FINISHED,
        )

    def _executed_call(self, step: _StepState) -> ToolCall | None:
        """The PRE_TOOL call this tool step runs: same tool, same target; else the call as
        the step describes it (None for a step that is not a tool call). Steps only say
        what they do (an `editFile` is write_to_file or replace_file_content); the call
        has the model's name and full arguments. Paired once (`TurnCalls.pair`): the
        step's streamed result and the turn's response name the same call."""
        if not _is_tool_action(step.action):
            return None
        described = _action_call(step.action, step.action_fields)
        if step.call_index is None:
            names: tuple[str, ...] = (described.name,)
            if step.action == "editFile":
                names = (described.name, "write_to_file")
            step.call_index = self._turn_calls.pair(names, step.trajectory_id, described.args)
        if step.call_index < 0:
            return described
        return self._turn_calls.calls[step.call_index]


_FINISHED: Final = frozenset({"done", "error"})
_RESULT_PREVIEW: Final = 2000  # characters of a tool's output in its tool_result chunk


def _error_chunk(step: _StepState) -> StreamChunk:
    return StreamChunk(
        type="error",
        text=step.text,
        error=step.error or step.text,
        step_index=step.step_index,
        trajectory_id=step.trajectory_id,
    )


def _input_part(part: PromptPart) -> dict[str, Any]:
    """One `UserInput.Part`: text, or media whose bytes stay bytes until sent."""
    if isinstance(part, str):
        return {"text": part}
    media: dict[str, Any] = {"mimeType": part.mime_type, "data": wire.Base64(part.data)}
    if part.description:
        media["description"] = part.description
    return {"media": media}


def _chunk(kind: Literal["text", "thought"], delta: str, step: _StepState) -> StreamChunk:
    return StreamChunk(
        type=kind, text=delta, step_index=step.step_index, trajectory_id=step.trajectory_id
    )
