"""Model-based tests: HookRunner against a small reference implementation of the table.

Random lists of hooks with random behaviours, for every event, must give what the
reference model (written here, from docs/api.md, HookRunner) says: the outcome, which hooks ran, in
which order, and which failures were logged. A state machine checks registration.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from antigravity_sdk import (
    AskQuestionEntry,
    ChatResponse,
    Hook,
    HookResult,
    HookRunner,
    QuestionHookResult,
    QuestionResponse,
    ToolCall,
    ToolExecutionError,
    ToolResult,
)
from antigravity_sdk.hooks import EVENTS

TIMEOUT = 0.03  # wide enough that a loaded machine does not make an instant hook late
PAST_TIMEOUT = 0.04  # just past it: the timeout always fires first

CALL = ToolCall(name="write_to_file", args={"path": "/tmp/f"}, id="call-7")
ERROR = ToolExecutionError("write failed", CALL)
ARGS: dict[str, tuple[Any, ...]] = {
    "on_session_start": (),
    "on_session_end": (),
    "pre_turn": (),
    "post_turn": (ChatResponse(text="hi"),),
    "pre_tool_call": (CALL,),
    "post_tool_call": (ToolResult(name="write_to_file", id="call-7"),),
    "on_tool_error": (ERROR,),
    "on_interaction": ([AskQuestionEntry(question="Which?")],),
    "on_compaction": ("summary",),
}
DISPATCHERS = {
    "on_session_start": "dispatch_session_start",
    "on_session_end": "dispatch_session_end",
    "pre_turn": "dispatch_pre_turn",
    "post_turn": "dispatch_post_turn",
    "pre_tool_call": "dispatch_pre_tool_call",
    "post_tool_call": "dispatch_post_tool_call",
    "on_tool_error": "dispatch_on_tool_error",
    "on_interaction": "dispatch_interaction",
    "on_compaction": "dispatch_on_compaction",
}
CATEGORY = {
    **dict.fromkeys(
        ("on_session_start", "on_session_end", "post_turn", "post_tool_call", "on_compaction"),
        "inspect",
    ),
    "pre_turn": "decide",
    "pre_tool_call": "decide",
    "on_tool_error": "transform_error",
    "on_interaction": "transform_interaction",
}

# allow:   let the others decide (Decide: allowed; on_tool_error: a decline; others: None)
# note:    allow with a message / decline with a value: still not a stop
# stop:    deny (Decide) / recover (on_tool_error) / answer (on_interaction)
# raise:   raise an exception
# sleep:   sleep past the timeout, then would "stop"
# late:    sleep past the timeout, swallow its cancellation, then "stop" anyway (too late)
# cancel:  raise CancelledError (a cancelled inner future) while the task is not cancelled
# wrong:   return a value of the wrong type
# off:     the hook does not override this event at all
BEHAVIOURS = ("allow", "note", "stop", "raise", "sleep", "late", "cancel", "wrong", "off")
SLOW = ("sleep", "late")


@dataclass
class Spec:
    name: str
    behaviour: str
    returned: Any = field(default=None, compare=False)


def value_for(event: str, spec: Spec) -> Any:
    category, b = CATEGORY[event], spec.behaviour
    if b == "wrong":
        return {"decide": "yes", "transform_error": ("ok", 1)}.get(category, 3.5)
    if category == "decide":
        return {
            "allow": HookResult.allowed(),
            "note": HookResult(allow=True, message=f"{spec.name} noted"),
        }.get(b) or HookResult.denied(f"{spec.name} says no")
    if category == "transform_error":
        if b in ("allow", "note"):
            return (HookResult(allow=False, message=f"{spec.name} declines"), b)
        return (HookResult(allow=True, message=f"{spec.name} recovered"), {"by": spec.name})
    if category == "transform_interaction":
        if b in ("allow", "note"):
            return None
        return QuestionHookResult(responses=[QuestionResponse(freeform_response=spec.name)])
    return None  # inspect: the value is ignored


def build_hook(event: str, spec: Spec, calls: list[str]) -> Hook:
    async def method(self: Hook, *args: Any) -> Any:
        assert args == ARGS[event]
        calls.append(spec.name)
        if spec.behaviour == "raise":
            raise ValueError(f"{spec.name} exploded")
        if spec.behaviour == "cancel":
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            future.cancel()
            await future
        value = value_for(event, spec)
        if spec.behaviour == "sleep":
            await asyncio.sleep(PAST_TIMEOUT)
        if spec.behaviour == "late":
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(PAST_TIMEOUT)
        spec.returned = value
        return value

    if spec.behaviour == "off":
        return type(spec.name, (Hook,), {})()
    return type(spec.name, (Hook,), {event: method})()


@dataclass
class Expected:
    calls: list[str]
    failed: str | None  # the hook whose failure decided (or, for Inspect, None)
    logged: list[str]  # hooks whose failure must be logged
    outcome: Any  # "stop:<name>" for a returned-as-is result, else a value


def reference(event: str, specs: list[Spec]) -> Expected:
    """The table of docs/api.md (HookRunner), as plainly as possible."""
    category = CATEGORY[event]
    calls: list[str] = []
    logged: list[str] = []
    for spec in specs:
        if spec.behaviour == "off":
            continue
        calls.append(spec.name)
        fails = spec.behaviour in ("raise", "sleep", "late", "cancel") or (
            spec.behaviour == "wrong" and category != "inspect"
        )
        if category == "inspect":
            if fails:
                logged.append(spec.name)
            continue
        if fails:
            return Expected(calls, spec.name, [*logged, spec.name], None)
        if spec.behaviour == "stop":
            return Expected(calls, None, logged, f"stop:{spec.name}")
    default = {
        "inspect": None,
        "decide": HookResult(allow=True),
        "transform_error": (HookResult(allow=False, message=str(ERROR)), None),
        "transform_interaction": None,
    }[category]
    return Expected(calls, None, logged, default)


class ListHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


async def run_dispatch(
    event: str, specs: list[Spec], *, by_name: bool = False
) -> tuple[Any, list[str], list[str]]:
    calls: list[str] = []
    runner = HookRunner([build_hook(event, s, calls) for s in specs], timeout=TIMEOUT)
    handler = ListHandler()
    logger = logging.getLogger("antigravity_sdk.hooks")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        if by_name:  # the generic entry point must be the same dispatch
            outcome = await runner.dispatch(event, *ARGS[event])
        else:
            outcome = await getattr(runner, DISPATCHERS[event])(*ARGS[event])
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    return outcome, calls, handler.messages


def check(event: str, specs: list[Spec], outcome: Any, calls: list[str], logs: list[str]) -> None:
    expected = reference(event, specs)
    category = CATEGORY[event]
    assert calls == expected.calls
    for name in expected.logged:
        assert any(name in m and event in m for m in logs), (name, logs)
    named_in_logs = {s.name for s in specs if any(s.name in m for m in logs)}
    assert named_in_logs == set(expected.logged), logs

    if expected.failed is not None:
        name = expected.failed
        if category == "decide":
            assert isinstance(outcome, HookResult) and outcome.allow is False
            assert name in outcome.message and event in outcome.message
        elif category == "transform_error":
            result, value = outcome
            assert isinstance(result, HookResult) and result.allow is False
            assert value is None and name in result.message
        else:
            assert outcome == QuestionHookResult(responses=[], cancelled=True)
        return

    if isinstance(expected.outcome, str) and expected.outcome.startswith("stop:"):
        winner = next(s for s in specs if s.name == expected.outcome[5:])
        if category == "transform_error":
            assert outcome[0] is winner.returned[0]
            assert outcome[1] == winner.returned[1] == {"by": winner.name}
        else:
            assert outcome is winner.returned  # returned as is
        return
    assert outcome == expected.outcome
    if category == "decide":
        assert outcome.message == ""  # allow messages of earlier hooks do not leak


def specs_strategy(max_hooks: int = 6) -> st.SearchStrategy[list[Spec]]:
    behaviour = st.sampled_from(BEHAVIOURS).filter(lambda b: b not in SLOW) | st.sampled_from(SLOW)
    return st.lists(behaviour, max_size=max_hooks).map(
        lambda bs: [Spec(f"Hook{i}{b.capitalize()}", b) for i, b in enumerate(bs)]
    )


def limited_sleeps(specs: list[Spec]) -> bool:
    return sum(s.behaviour in SLOW for s in specs) <= 2


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(
    event=st.sampled_from(EVENTS),
    specs=specs_strategy().filter(limited_sleeps),
    by_name=st.booleans(),
)
def test_dispatch_matches_the_reference_model(event: str, specs: list[Spec], by_name: bool) -> None:
    outcome, calls, logs = asyncio.run(run_dispatch(event, specs, by_name=by_name))
    check(event, specs, outcome, calls, logs)


def test_the_reference_model_is_not_vacuous() -> None:
    """Sanity: the model itself distinguishes the three categories."""
    specs = [Spec("A", "allow"), Spec("B", "raise"), Spec("C", "stop")]
    assert reference("post_turn", specs).calls == ["A", "B", "C"]
    assert reference("pre_turn", specs).calls == ["A", "B"]
    assert reference("pre_turn", specs).failed == "B"
    assert reference("on_interaction", [Spec("A", "wrong")]).failed == "A"
    assert reference("on_compaction", [Spec("A", "wrong")]).failed is None
    assert reference("pre_tool_call", [Spec("A", "late"), Spec("B", "stop")]).failed == "A"
    assert reference("on_interaction", [Spec("A", "cancel")]).failed == "A"
    assert reference("post_turn", [Spec("A", "cancel"), Spec("B", "late")]).logged == ["A", "B"]
    assert reference("on_tool_error", [Spec("A", "note")]).outcome == (
        HookResult(allow=False, message="write failed"),
        None,
    )


# -- registration: a state machine against a plain list -------------------------------------


class RegistrationMachine(RuleBasedStateMachine):
    """register / unregister / dispatch, checked against a list model."""

    def __init__(self) -> None:
        super().__init__()
        self.runner = HookRunner()
        self.model: list[Hook] = []
        self.pool: list[Hook] = []
        self.calls: list[int] = []
        self.loop = asyncio.new_event_loop()

    def teardown(self) -> None:
        self.loop.close()

    def _make(self, overrides: bool) -> Hook:
        index = len(self.pool)
        calls = self.calls

        class Counting(Hook):
            pass

        if overrides:

            async def pre_tool_call(self: Hook, tool_call: ToolCall) -> HookResult:
                calls.append(index)
                return HookResult.allowed()

            Counting.pre_tool_call = pre_tool_call  # type: ignore[method-assign]
        hook = Counting()
        hook.index = index  # type: ignore[attr-defined]
        self.pool.append(hook)
        return hook

    @rule(overrides=st.booleans())
    def register_new(self, overrides: bool) -> None:
        hook = self._make(overrides)
        self.runner.register(hook)
        self.model.append(hook)

    @precondition(lambda self: bool(self.pool))
    @rule(data=st.data())
    def register_again(self, data: st.DataObject) -> None:
        hook = data.draw(st.sampled_from(self.pool))
        self.runner.register(hook)
        self.model.append(hook)

    @precondition(lambda self: bool(self.pool))
    @rule(data=st.data())
    def unregister(self, data: st.DataObject) -> None:
        hook = data.draw(st.sampled_from(self.pool))
        expected = any(h is hook for h in self.model)
        if expected:
            i = next(i for i, h in enumerate(self.model) if h is hook)
            del self.model[i]
        assert self.runner.unregister(hook) is expected

    @rule()
    def dispatch(self) -> None:
        self.calls.clear()
        result = self.loop.run_until_complete(self.runner.dispatch_pre_tool_call(CALL))
        assert result == HookResult(allow=True)
        overriding = [h.index for h in self.model if "pre_tool_call" in type(h).__dict__]  # type: ignore[attr-defined]
        assert self.calls == overriding

    @invariant()
    def hooks_match_the_model(self) -> None:
        assert list(self.runner.hooks) == self.model


RegistrationMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None
)
TestRegistration = RegistrationMachine.TestCase
