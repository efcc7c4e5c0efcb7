"""What the session core asks of the I/O layer, and the frames that answer the harness.

`SessionCore.receive` turns each frame into effects. Five of them are requests the harness
waits on (`Request`). Each knows the one way to work out its outcome (`decide`, asking the
hooks or the host-side tools), the frame that answers with that outcome (`reply`), and the
fail-closed frame for when deciding fails or is cancelled (`refuse`): DENY, a failed tool,
cancelled questions, a rejected confirmation. A request that carries a `refusal` (unsafe
to decide: malformed, or refused by the SDK's own guard) decides a DENY without asking;
`Unasked` wraps one to be refused outright (a request of a scheduled wake), and
`HaltWake` halts a turn the harness started on its own.

Outgoing frames carry only schema fields: the harness drops a whole frame with an unknown
field (and the awaited answer never arrives), and it treats anything but an explicit DENY
on PRE_TOOL as allow. So every decision here is explicit, and every refusal is a DENY.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Literal, Protocol

from ..types import (
    AskQuestionEntry,
    ChatResponse,
    HookResult,
    QuestionHookResult,
    Step,
    StreamChunk,
    ToolCall,
    ToolResult,
)
from .rewrite import json_args, to_struct

__all__ = [
    "HALT",
    "SESSION_END",
    "AskUser",
    "Chunk",
    "ConfirmTool",
    "Effect",
    "Frame",
    "HaltWake",
    "HookCall",
    "HookDispatch",
    "Initialized",
    "PolicyRequest",
    "Request",
    "RunTool",
    "SessionEnded",
    "ToolRun",
    "TurnEnded",
    "Unasked",
]

# The agent's logger: a refusal is the agent refusing a call, whichever module decides it.
logger = logging.getLogger("antigravity_sdk.agent")

Frame = dict[str, Any]
"""One outgoing frame: an `InputEvent` in the canonical protobuf JSON mapping."""

HALT: Final[Frame] = {"haltRequest": True}
SESSION_END: Final[Frame] = {"sessionEndRequest": True}


class HookDispatch(Protocol):
    """What deciding asks of the hooks (a `HookRunner`)."""

    def dispatch(self, event: str, arg: Any = None) -> Awaitable[Any]: ...


class ToolRun(Protocol):
    """What running a host-side tool asks of the tools (a `ToolRunner`)."""

    async def run(self, tool_call: ToolCall) -> ToolResult: ...


# -- requests: the harness waits for exactly one answer to each ----------------------------

# Hook events answered with a decision, and the result field that carries it.
_DECISION_FIELDS: Final = {"pre_tool_call": "preToolResult", "pre_turn": "preTurnResult"}
_EMPTY: Final[dict[str, Any]] = {"emptyResult": {}}


def _hook_response(request_id: str, result: dict[str, Any]) -> Frame:
    return {"callHookResponse": {"requestId": request_id, **result}}


@dataclass(frozen=True, slots=True)
class HookCall:
    """The harness calls a lifecycle hook: dispatch `event` to the hooks with `arg`.

    A non-empty `refusal` means the request itself is unsafe to decide (malformed, or
    arguments the harness would read differently than the hooks): it is denied with that
    reason, and no hook is asked.
    """

    request_id: str
    event: str  # a Hook method name, or "" for a hook type this SDK does not know
    arg: Any = None
    refusal: str = ""

    @property
    def gates_turn(self) -> bool:
        """A deny here refuses the whole turn (pre_turn): the agent keeps it for
        `TurnDeniedError`."""
        return self.event == "pre_turn"

    async def decide(self, hooks: HookDispatch, tools: ToolRun) -> Any:
        """What the hooks make of it (what `HookRunner.dispatch` returns)."""
        if self.refusal:
            logger.warning("refusing %s: %s", self.event, self.refusal)
            return HookResult(allow=False, message=self.refusal)
        if not self.event:
            return None  # a hook type this SDK does not know: answered empty
        if self.event == "pre_tool_call":
            return await _decide_call(hooks, self.arg, rewrites=True)
        return await hooks.dispatch(self.event, self.arg)

    def reply(self, outcome: Any) -> Frame:
        """A decision for pre_tool_call and pre_turn (always an explicit ALLOW or DENY, a
        DENY always with a reason), a recovery for on_tool_error, else an empty result."""
        decision_field = _DECISION_FIELDS.get(self.event)
        if decision_field is not None:
            result: HookResult = outcome
            if result.allow:
                allow: dict[str, Any] = {"decision": "ALLOW"}
                if result.args is not None:  # only pre_tool_call's dispatch lets one through
                    allow["modifiedArgs"] = _modified_args(self.arg, result.args)
                return _hook_response(self.request_id, {decision_field: allow})
            reason = result.message or "denied by a hook"
            decision = {"decision": "DENY", "reason": reason}
            return _hook_response(self.request_id, {decision_field: decision})
        if self.event == "on_tool_error":
            recovered, value = outcome
            if recovered.allow and value is not None:
                text = value if isinstance(value, str) else json.dumps(value, default=str)
                return _hook_response(
                    self.request_id, {"onToolErrorResult": {"customErrorMessage": text}}
                )
        return _hook_response(self.request_id, _EMPTY)

    def refuse(self, reason: str) -> Frame:
        """DENY a decision with `reason`; anything else gets an empty result (no recovery)."""
        if self.event in _DECISION_FIELDS:
            return self.reply(HookResult(allow=False, message=reason))
        return _hook_response(self.request_id, _EMPTY)


_NO_REWRITE: Final = (
    "refused: a hook rewrote the call's arguments, and the harness cannot apply a rewrite "
    "on this route (it would run the call as the model made it)"
)
_MUTATED: Final = (
    "refused: a hook changed the tool call's arguments in place (the harness would run "
    "them unchanged); rewrite with HookResult.rewrite instead"
)


async def _decide_call(hooks: HookDispatch, call: ToolCall, *, rewrites: bool) -> HookResult:
    """The pre_tool_call hooks' decision on `call`, fail-closed on what the harness would
    not do: a rewrite on a route that cannot carry one (`rewrites` False), or arguments
    changed in place, which the hooks and policies saw but the harness never would."""
    before = _snapshot(call.args)
    decision: HookResult = await hooks.dispatch("pre_tool_call", call)
    if not decision.allow:
        return decision
    if decision.args is not None:
        if rewrites:
            return decision
        logger.warning("%s", _NO_REWRITE)
        return HookResult(allow=False, message=_NO_REWRITE)
    if _unchanged(call.args, before):
        return decision
    logger.warning("%s", _MUTATED)
    return HookResult(allow=False, message=_MUTATED)


_SORTED: Final = json.JSONEncoder(sort_keys=True)  # canonical JSON: equal iff same arguments
_STR_INT: Final = frozenset({str, int})


def _snapshot(args: dict[str, Any]) -> dict[str, Any] | str:
    """What `_unchanged` compares `args` with later: a shallow copy when every value is a
    str or an int (most calls: nothing nested that a hook could change in place), else
    the canonical JSON."""
    if _STR_INT.issuperset(map(type, args.values())):
        return dict(args)
    return _SORTED.encode(args)


def _unchanged(args: dict[str, Any], before: dict[str, Any] | str) -> bool:
    """Whether `args` are still what `_snapshot` saw, as JSON. Against a copy of str and
    int values: equal, and still only str and int values (`True == 1`, not in JSON)."""
    if isinstance(before, dict):
        return before == args and _STR_INT.issuperset(map(type, args.values()))
    try:
        return _SORTED.encode(args) == before
    except Exception:  # not JSON any more (or nested too deep to tell): changed
        return False


def _modified_args(call: ToolCall, args: dict[str, Any]) -> dict[str, Any]:
    """`PreToolResult.modified_args` for `call` rewritten to `args`: the harness replaces
    all the model's arguments with it, so an MCP call keeps its server and tool (hooks
    rewrite only the tool's own arguments, inside the `call_mcp_tool` wrapper)."""
    if call.server_name is not None:
        args = {"ServerName": call.server_name, "ToolName": call.name, "Arguments": args}
    return to_struct(json_args(args))


@dataclass(frozen=True, slots=True)
class RunTool:
    """The harness asks for a host-side tool to run."""

    call: ToolCall
    gates_turn: ClassVar[bool] = False

    async def decide(self, hooks: HookDispatch, tools: ToolRun) -> ToolResult:
        return await tools.run(self.call)

    def reply(self, result: ToolResult) -> Frame:
        """The tool's result: a dict as is, anything else wrapped as `{"result": ...}`."""
        call_id = self.call.id
        if result.error is not None:
            return {"toolResponse": {"id": call_id, "errorMessage": result.error}}
        value = result.result
        payload = value if isinstance(value, dict) else {"result": value}
        try:
            encoded = json.dumps(payload, default=str)
        except ValueError as exc:  # circular structures
            return self.refuse(f"unserialisable result: {exc}")
        return {"toolResponse": {"id": call_id, "responseJson": encoded}}

    def refuse(self, reason: str) -> Frame:
        """The tool failed with `reason`."""
        return {"toolResponse": {"id": self.call.id, "errorMessage": reason}}


@dataclass(frozen=True, slots=True)
class AskUser:
    """The agent asks the user questions (the `on_interaction` hooks answer)."""

    trajectory_id: str
    step_index: int
    questions: tuple[AskQuestionEntry, ...]
    gates_turn: ClassVar[bool] = False

    async def decide(self, hooks: HookDispatch, tools: ToolRun) -> QuestionHookResult | None:
        answer: QuestionHookResult | None = await hooks.dispatch("on_interaction", self.questions)
        return answer

    def reply(self, answer: QuestionHookResult | None) -> Frame:
        """Answers by option index; no answer, or a cancelled one, cancels the questions."""
        if answer is None or answer.cancelled:
            return self.refuse("no answer")
        answers: list[dict[str, Any]] = []
        for i, entry in enumerate(self.questions):
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
        return {"questionResponse": {**self._where(), "response": {"answers": answers}}}

    def refuse(self, reason: str) -> Frame:
        """Cancel the questions (the harness has no field for a reason)."""
        return {"questionResponse": {**self._where(), "cancelled": True}}

    def _where(self) -> dict[str, Any]:
        return {"trajectoryId": self.trajectory_id, "stepIndex": self.step_index}


_UNDESCRIBED: Final = HookResult(
    allow=False, message="refused: a tool step the SDK cannot describe, or one it refuses"
)


@dataclass(frozen=True, slots=True)
class ConfirmTool:
    """The harness wants a yes/no for a tool step; the pre_tool_call hooks decide."""

    trajectory_id: str
    step_index: int
    call: ToolCall | None  # None: a step the SDK cannot describe, so it is rejected unasked
    gates_turn: ClassVar[bool] = False

    async def decide(self, hooks: HookDispatch, tools: ToolRun) -> HookResult:
        if self.call is None:
            return _UNDESCRIBED
        return await _decide_call(hooks, self.call, rewrites=False)

    def reply(self, decision: HookResult) -> Frame:
        return {
            "toolConfirmation": {
                "trajectoryId": self.trajectory_id,
                "stepIndex": self.step_index,
                "accepted": decision.allow,
            }
        }

    def refuse(self, reason: str) -> Frame:
        """Reject the step (the harness has no field for a reason)."""
        return self.reply(HookResult(allow=False, message=reason))


@dataclass(frozen=True, slots=True)
class PolicyRequest:
    """The harness asks for a dynamic policy verdict; the pre_tool_call hooks decide."""

    request_id: str
    call: ToolCall
    refusal: str = ""  # as for HookCall
    gates_turn: ClassVar[bool] = False

    async def decide(self, hooks: HookDispatch, tools: ToolRun) -> HookResult:
        if self.refusal:
            return HookResult(allow=False, message=self.refusal)
        return await _decide_call(hooks, self.call, rewrites=False)

    def reply(self, decision: HookResult) -> Frame:
        outcome: Literal["POLICY_EVALUATION_OUTCOME_ALLOW", "POLICY_EVALUATION_OUTCOME_DENY"] = (
            "POLICY_EVALUATION_OUTCOME_ALLOW"
            if decision.allow
            else "POLICY_EVALUATION_OUTCOME_DENY"
        )
        body: dict[str, Any] = {"requestId": self.request_id, "outcome": outcome}
        if not decision.allow:
            body["denyReason"] = decision.message or "denied by policy"
        return {"policyDecisionResponse": body}

    def refuse(self, reason: str) -> Frame:
        return self.reply(HookResult(allow=False, message=reason))


@dataclass(frozen=True, slots=True)
class Unasked:
    """A request refused without asking anyone — a DENY, a failed tool, cancelled
    questions, a rejected confirmation (`request.refuse`): one the harness made on its own
    while no turn of the client's was running (a timer the model scheduled woke an
    agent), or a host-side tool call whose arguments are not a JSON object."""

    request: HookCall | RunTool | AskUser | ConfirmTool | PolicyRequest
    reason: str
    gates_turn: ClassVar[bool] = False

    async def decide(self, hooks: HookDispatch, tools: ToolRun) -> None:
        logger.warning("refusing %s unasked: %s", type(self.request).__name__, self.reason)

    def reply(self, outcome: None) -> Frame:
        return self.request.refuse(self.reason)

    def refuse(self, reason: str) -> Frame:
        return self.request.refuse(self.reason)


@dataclass(frozen=True, slots=True)
class HaltWake:
    """The harness started a turn on its own while no turn of the client's was running:
    halt it (answered with `HALT`, whatever happens)."""

    reason: str
    gates_turn: ClassVar[bool] = False

    async def decide(self, hooks: HookDispatch, tools: ToolRun) -> None:
        logger.warning("halting a turn the harness started on its own: %s", self.reason)

    def reply(self, outcome: None) -> Frame:
        return HALT

    def refuse(self, reason: str) -> Frame:
        return HALT


Request = HookCall | RunTool | AskUser | ConfirmTool | PolicyRequest | Unasked | HaltWake
"""An effect the harness waits on: answer it exactly once, with `reply(await decide(...))`,
or with `refuse(reason)` when deciding fails or is cancelled."""


# -- notifications: nothing to answer ---------------------------------------------------


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


Effect = Request | Chunk | TurnEnded | SessionEnded | Initialized
