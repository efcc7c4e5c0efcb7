"""HookRunner: the dispatch table of docs/api.md, row by row, for all nine events."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import pytest

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
from antigravity_sdk.hooks import EVENTS, overridden_events

TIMEOUT = 0.03  # wide enough that a loaded machine does not make an instant hook late
PAST_TIMEOUT = 0.06

CALL = ToolCall(name="run_command", args={"cmd": "ls"}, id="call-1")
RESULT = ToolResult(name="run_command", id="call-1", result="ok")
RESPONSE = ChatResponse(text="done")
QUESTIONS = [AskQuestionEntry(question="Proceed?")]
ERROR = ToolExecutionError("disk on fire", CALL)

# event -> (dispatch method, its arguments, category)
DISPATCH: dict[str, tuple[str, tuple[Any, ...], str]] = {
    "on_session_start": ("dispatch_session_start", (), "inspect"),
    "on_session_end": ("dispatch_session_end", (), "inspect"),
    "pre_turn": ("dispatch_pre_turn", (), "decide"),
    "post_turn": ("dispatch_post_turn", (RESPONSE,), "inspect"),
    "pre_tool_call": ("dispatch_pre_tool_call", (CALL,), "decide"),
    "post_tool_call": ("dispatch_post_tool_call", (RESULT,), "inspect"),
    "on_tool_error": ("dispatch_on_tool_error", (ERROR,), "tool_error"),
    "on_interaction": ("dispatch_interaction", (QUESTIONS,), "interaction"),
    "on_compaction": ("dispatch_on_compaction", ("summary",), "inspect"),
}
INSPECT = [e for e, (_, _, c) in DISPATCH.items() if c == "inspect"]
DECIDE = [e for e, (_, _, c) in DISPATCH.items() if c == "decide"]
CANCELLED = QuestionHookResult(responses=[], cancelled=True)


def test_the_table_covers_every_hook_method() -> None:
    assert set(DISPATCH) == set(EVENTS)
    assert len(EVENTS) == 9
    assert len(INSPECT) == 5 and len(DECIDE) == 2


def make_hook(name: str, event: str, log: list[str], body: Callable[[], Any] | None = None) -> Hook:
    """A Hook subclass called `name` overriding only `event`; logs `name` when called.

    `body` is awaited if it returns a coroutine; its value is the hook's return value.
    """

    async def method(self: Hook, *args: Any) -> Any:
        log.append(name)
        value = body() if body is not None else None
        if asyncio.iscoroutine(value):
            value = await value
        return value

    return type(name, (Hook,), {event: method})()


async def dispatch(runner: HookRunner, event: str) -> Any:
    method, args, _ = DISPATCH[event]
    return await getattr(runner, method)(*args)


def boom(name: str) -> Callable[[], Any]:
    def body() -> Any:
        raise RuntimeError(f"boom from {name}")

    return body


async def _sleep_then(value: Any) -> Any:
    await asyncio.sleep(PAST_TIMEOUT)
    return value


def passing(event: str) -> Any:
    """What a hook returns to let the others decide."""
    return {
        "decide": HookResult.allowed(),
        "tool_error": (HookResult(allow=False, message="not mine"), "ignored"),
        "interaction": None,
        "inspect": None,
    }[DISPATCH[event][2]]


def stopping(event: str, tag: str) -> Any:
    """What a hook returns to short-circuit the event (a fresh object each time)."""
    category = DISPATCH[event][2]
    if category == "decide":
        return HookResult.denied(f"denied by {tag}")
    if category == "tool_error":
        return (HookResult(allow=True, message=f"recovered by {tag}"), f"fallback-{tag}")
    if category == "interaction":
        return QuestionHookResult(responses=[QuestionResponse(freeform_response=tag)])
    return None


# -- no hooks -------------------------------------------------------------------------------


@pytest.mark.parametrize("event", EVENTS)
async def test_no_hooks_gives_the_default(event: str) -> None:
    result = await dispatch(HookRunner(), event)
    category = DISPATCH[event][2]
    if category == "decide":
        assert result == HookResult(allow=True)
    elif category == "tool_error":
        assert result == (HookResult(allow=False, message=str(ERROR)), None)
    else:
        assert result is None


# -- order and short-circuit ----------------------------------------------------------------


@pytest.mark.parametrize("event", EVENTS)
async def test_all_hooks_run_in_registration_order_when_none_stops(event: str) -> None:
    log: list[str] = []
    runner = HookRunner()
    for name in ("Charlie", "Alpha", "Bravo"):
        runner.register(make_hook(name, event, log, lambda: passing(event)))
    result = await dispatch(runner, event)
    assert log == ["Charlie", "Alpha", "Bravo"]
    category = DISPATCH[event][2]
    if category == "decide":
        assert result == HookResult(allow=True, message="")
    elif category == "tool_error":
        # Declines do not count: the error's own message, no value.
        assert result == (HookResult(allow=False, message=str(ERROR)), None)
    else:
        assert result is None


@pytest.mark.parametrize("event", EVENTS)
async def test_first_stop_wins_and_later_hooks_are_skipped(event: str) -> None:
    log: list[str] = []
    answers: dict[str, Any] = {}

    def stop(tag: str) -> Callable[[], Any]:
        def body() -> Any:
            answers[tag] = stopping(event, tag)
            return answers[tag]

        return body

    runner = HookRunner(
        [
            make_hook("First", event, log, lambda: passing(event)),
            make_hook("Second", event, log, stop("Second")),
            make_hook("Third", event, log, stop("Third")),
        ]
    )
    result = await dispatch(runner, event)
    category = DISPATCH[event][2]
    if category == "inspect":
        assert log == ["First", "Second", "Third"]  # no short-circuit
        assert result is None
        return
    assert log == ["First", "Second"]
    if category == "tool_error":
        expected_result, expected_value = answers["Second"]
        assert result[0] is expected_result
        assert result[1] == expected_value == "fallback-Second"
    else:
        assert result is answers["Second"]  # returned as is


async def test_decide_allow_messages_do_not_stop_and_do_not_leak() -> None:
    log: list[str] = []
    runner = HookRunner(
        [
            make_hook("A", "pre_tool_call", log, lambda: HookResult.allowed("fine by A")),
            make_hook("B", "pre_tool_call", log, lambda: HookResult(allow=True, message="ok")),
        ]
    )
    assert await runner.dispatch_pre_tool_call(CALL) == HookResult(allow=True)
    assert log == ["A", "B"]


async def test_first_deny_wins_over_later_denies_for_pre_turn() -> None:
    log: list[str] = []
    first = HookResult.denied("quota")
    runner = HookRunner(
        [
            make_hook("Quota", "pre_turn", log, lambda: first),
            make_hook("Other", "pre_turn", log, lambda: HookResult.denied("other")),
        ]
    )
    assert await runner.dispatch_pre_turn() is first
    assert log == ["Quota"]


async def test_on_tool_error_recovery_value_may_be_none() -> None:
    runner = HookRunner(
        [make_hook("Recover", "on_tool_error", [], lambda: (HookResult(allow=True), None))]
    )
    result, value = await runner.dispatch_on_tool_error(ERROR)
    assert result.allow is True and value is None


async def test_on_tool_error_receives_the_error_object() -> None:
    seen: list[Exception] = []

    class Spy(Hook):
        async def on_tool_error(self, error: Exception) -> tuple[HookResult, Any | None]:
            seen.append(error)
            return HookResult(allow=False, message="no"), None

    plain = ValueError("plain error")
    runner = HookRunner([Spy()])
    assert await runner.dispatch_on_tool_error(plain) == (
        HookResult(allow=False, message="plain error"),
        None,
    )
    await runner.dispatch_on_tool_error(ERROR)
    assert seen == [plain, ERROR]
    assert isinstance(seen[1], ToolExecutionError) and seen[1].tool_call is CALL


async def test_hooks_receive_the_dispatched_arguments() -> None:
    seen: dict[str, tuple[Any, ...]] = {}

    class Spy(Hook):
        pass

    for event in EVENTS:

        async def method(self: Hook, *args: Any, _event: str = event) -> Any:
            seen[_event] = args
            return passing(_event)

        setattr(Spy, event, method)
    runner = HookRunner([Spy()])
    for event in EVENTS:
        await dispatch(runner, event)
    assert seen == {event: DISPATCH[event][1] for event in EVENTS}
    assert seen["pre_tool_call"][0] is CALL and seen["post_tool_call"][0] is RESULT


# -- dispatch by name -----------------------------------------------------------------------


@pytest.mark.parametrize("event", EVENTS)
async def test_dispatch_by_name_is_the_events_own_dispatch(event: str) -> None:
    seen: list[tuple[Any, ...]] = []

    async def method(self: Hook, *args: Any) -> Any:
        seen.append(args)
        return stopping(event, "spy")

    runner = HookRunner([type("Spy", (Hook,), {event: method})()])
    _, args, _ = DISPATCH[event]
    by_name = await runner.dispatch(event, *args)
    by_method = await dispatch(runner, event)
    assert seen == [args, args]
    assert by_name == by_method
    if args:
        return
    # An event that takes no argument ignores the one it is given.
    assert await runner.dispatch(event, "ignored") == by_method
    assert seen[-1] == ()


async def test_dispatch_by_name_uses_a_subclass_override() -> None:
    class Denying(HookRunner):
        async def dispatch_pre_tool_call(self, tool_call: ToolCall) -> HookResult:
            return HookResult.denied(f"no {tool_call.name}")

    assert await Denying().dispatch("pre_tool_call", CALL) == HookResult.denied("no run_command")


@pytest.mark.parametrize("event", ["", "pre_tool", "dispatch_pre_turn", "PRE_TURN"])
async def test_dispatch_of_an_unknown_event_is_a_value_error(event: str) -> None:
    with pytest.raises(ValueError, match="unknown hook event"):
        await HookRunner().dispatch(event, CALL)


def test_events_are_the_hook_methods_in_order() -> None:
    assert tuple(DISPATCH) == EVENTS  # the table above is in the order of Hook's methods
    assert all(callable(getattr(Hook, event)) for event in EVENTS)


# -- a hook raises --------------------------------------------------------------------------


def failure_records(caplog: pytest.LogCaptureFixture, name: str, event: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "antigravity_sdk.hooks" and name in r.getMessage() and event in r.getMessage()
    ]


@pytest.mark.parametrize("event", EVENTS)
async def test_a_raising_hook(event: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="antigravity_sdk.hooks")
    log: list[str] = []
    runner = HookRunner(
        [
            make_hook("Before", event, log, lambda: passing(event)),
            make_hook("Exploding", event, log, boom("Exploding")),
            make_hook("After", event, log, lambda: stopping(event, "After")),
        ]
    )
    result = await dispatch(runner, event)  # never raises
    assert_failure(event, result, log, "Exploding", "boom from Exploding")
    assert failure_records(caplog, "Exploding", event), caplog.text


def assert_failure(event: str, result: Any, log: list[str], name: str, why: str) -> None:
    """The fail-safe outcome of the table for a hook `name` that failed with `why`."""
    category = DISPATCH[event][2]
    if category == "inspect":
        assert log == ["Before", name, "After"]  # contained: the others still run
        assert result is None
        return
    assert log == ["Before", name]  # fail-closed: later hooks skipped
    if category == "decide":
        assert isinstance(result, HookResult)
        assert result.allow is False
        assert name in result.message and event in result.message
        assert why in result.message
    elif category == "tool_error":
        hook_result, value = result
        assert isinstance(hook_result, HookResult)
        assert hook_result.allow is False
        assert value is None
        assert name in hook_result.message
    else:
        assert result == CANCELLED


@pytest.mark.parametrize("event", EVENTS)
async def test_a_hook_past_the_timeout_counts_as_raising(
    event: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="antigravity_sdk.hooks")
    log: list[str] = []
    runner = HookRunner(
        [
            make_hook("Before", event, log, lambda: passing(event)),
            make_hook("Sleepy", event, log, lambda: _sleep_then(stopping(event, "Sleepy"))),
            make_hook("After", event, log, lambda: stopping(event, "After")),
        ],
        timeout=TIMEOUT,
    )
    loop = asyncio.get_running_loop()
    start = loop.time()
    result = await dispatch(runner, event)
    assert loop.time() - start < PAST_TIMEOUT  # cut off, not waited for
    assert_failure(event, result, log, "Sleepy", "timed out")
    assert failure_records(caplog, "Sleepy", event), caplog.text


@pytest.mark.parametrize("event", EVENTS)
async def test_a_hook_within_the_timeout_is_not_cut_off(event: str) -> None:
    async def slow_stop() -> Any:
        await asyncio.sleep(0.001)
        return stopping(event, "Slow")

    log: list[str] = []
    runner = HookRunner([make_hook("Slow", event, log, slow_stop)], timeout=1.0)
    result = await dispatch(runner, event)
    assert log == ["Slow"]
    category = DISPATCH[event][2]
    if category == "decide":
        assert result == HookResult.denied("denied by Slow")
    elif category == "tool_error":
        assert result == (HookResult(allow=True, message="recovered by Slow"), "fallback-Slow")
    elif category == "interaction":
        assert result == stopping(event, "Slow")
    else:
        assert result is None


async def test_without_a_timeout_a_slow_hook_is_waited_for() -> None:
    log: list[str] = []
    runner = HookRunner(
        [make_hook("Slow", "pre_tool_call", log, lambda: _sleep_then(HookResult.denied("late")))]
    )
    assert await runner.dispatch_pre_tool_call(CALL) == HookResult.denied("late")


@pytest.mark.parametrize("bad", [0, -1.0])
def test_timeout_must_be_positive(bad: float) -> None:
    with pytest.raises(ValueError, match="timeout"):
        HookRunner(timeout=bad)


# -- a hook returns the wrong type ----------------------------------------------------------

WRONG: dict[str, list[Any]] = {
    "decide": [True, None, "allow", {"allow": True}, (HookResult.allowed(), None)],
    "tool_error": [None, "recovered", HookResult(allow=True), ("ok", 1), (HookResult(),)],
    "interaction": ["yes", HookResult.allowed(), [QuestionResponse()]],
}


@pytest.mark.parametrize(
    ("event", "wrong"),
    [(e, w) for e in EVENTS for w in WRONG.get(DISPATCH[e][2], [42, "ignored"])],
)
async def test_a_wrong_return_type(
    event: str, wrong: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="antigravity_sdk.hooks")
    log: list[str] = []
    runner = HookRunner(
        [
            make_hook("Before", event, log, lambda: passing(event)),
            make_hook("Sloppy", event, log, lambda: wrong),
            make_hook("After", event, log, lambda: stopping(event, "After")),
        ]
    )
    result = await dispatch(runner, event)
    category = DISPATCH[event][2]
    if category == "inspect":
        # An Inspect hook's return value is ignored: nothing failed.
        assert log == ["Before", "Sloppy", "After"]
        assert result is None
        return
    assert log == ["Before", "Sloppy"]
    if category == "decide":
        assert result.allow is False
        assert "Sloppy" in result.message and event in result.message
        assert type(wrong).__name__ in result.message
    elif category == "tool_error":
        assert result[0].allow is False and result[1] is None
        assert "Sloppy" in result[0].message
    else:
        assert result == CANCELLED
    assert failure_records(caplog, "Sloppy", event), caplog.text


# -- cancellation is not a hook failure -----------------------------------------------------


@pytest.mark.parametrize("hook_timeout", [None, 5.0])
@pytest.mark.parametrize("event", EVENTS)
async def test_cancelling_the_dispatch_propagates(event: str, hook_timeout: float | None) -> None:
    entered = asyncio.Event()

    async def hang() -> Any:
        entered.set()
        await asyncio.sleep(3600)

    runner = HookRunner([make_hook("Hanging", event, [], hang)], timeout=hook_timeout)
    task = asyncio.create_task(dispatch(runner, event))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# -- late answers and a hook's own CancelledError -------------------------------------------


async def _swallow_then(value: Any) -> Any:
    """Sleep past the timeout, catch the timeout's cancellation, and answer anyway."""
    with contextlib.suppress(asyncio.CancelledError):  # e.g. a library that retries
        await asyncio.sleep(PAST_TIMEOUT)
    return value


async def _raise_cancelled() -> Any:
    """Await a future someone else cancelled: CancelledError, with no task cancel."""
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.cancel()
    await future


@pytest.mark.parametrize("event", EVENTS)
async def test_an_answer_after_the_timeout_counts_as_failing(
    event: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="antigravity_sdk.hooks")
    log: list[str] = []
    runner = HookRunner(
        [
            make_hook("Before", event, log, lambda: passing(event)),
            # The late answer would pass (allow, decline, no answer): it must not count.
            make_hook("Stubborn", event, log, lambda: _swallow_then(passing(event))),
            make_hook("After", event, log, lambda: stopping(event, "After")),
        ],
        timeout=TIMEOUT,
    )
    result = await dispatch(runner, event)
    assert_failure(event, result, log, "Stubborn", "timed out")
    assert failure_records(caplog, "Stubborn", event), caplog.text


async def test_a_late_allow_from_pre_tool_call_denies() -> None:
    log: list[str] = []
    runner = HookRunner(
        [make_hook("Stubborn", "pre_tool_call", log, lambda: _swallow_then(HookResult.ALLOWED))],
        timeout=TIMEOUT,
    )
    result = await runner.dispatch_pre_tool_call(CALL)
    assert result.allow is False and "Stubborn" in result.message and "timed out" in result.message
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def _block_then(value: Any) -> Any:
    """Block the event loop (sync work inside an async hook) past the timeout, then answer:
    the timer cannot fire while the loop is blocked."""
    time.sleep(PAST_TIMEOUT)  # noqa: ASYNC251 - the point of the test
    return value


@pytest.mark.parametrize("event", EVENTS)
async def test_a_hook_that_blocks_the_loop_past_the_timeout_counts_as_failing(
    event: str,
) -> None:
    log: list[str] = []
    runner = HookRunner(
        [
            make_hook("Before", event, log, lambda: passing(event)),
            make_hook("Blocker", event, log, lambda: _block_then(passing(event))),
            make_hook("After", event, log, lambda: stopping(event, "After")),
        ],
        timeout=TIMEOUT,
    )
    result = await dispatch(runner, event)
    assert_failure(event, result, log, "Blocker", "timed out")


async def test_a_hooks_own_timeout_error_is_not_reported_as_the_deadline() -> None:
    def own() -> Any:
        raise TimeoutError("upstream API timed out")

    runner = HookRunner([make_hook("Own", "pre_tool_call", [], own)], timeout=5.0)
    result = await runner.dispatch_pre_tool_call(CALL)
    assert result.allow is False and "upstream API timed out" in result.message


@pytest.mark.parametrize("hook_timeout", [None, 5.0])
@pytest.mark.parametrize("event", EVENTS)
async def test_a_hook_raising_cancelled_error_counts_as_failing(
    event: str, hook_timeout: float | None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="antigravity_sdk.hooks")
    log: list[str] = []
    runner = HookRunner(
        [
            make_hook("Before", event, log, lambda: passing(event)),
            make_hook("Cancelling", event, log, _raise_cancelled),
            make_hook("After", event, log, lambda: stopping(event, "After")),
        ],
        timeout=hook_timeout,
    )
    result = await dispatch(runner, event)  # does not raise: the task is not cancelled
    assert_failure(event, result, log, "Cancelling", "CancelledError")
    assert failure_records(caplog, "Cancelling", event), caplog.text


@pytest.mark.parametrize("hook_timeout", [None, 5.0])
@pytest.mark.parametrize("event", EVENTS)
async def test_cancelling_the_dispatch_propagates_even_if_the_hook_reraises(
    event: str, hook_timeout: float | None
) -> None:
    """The hook turns the task's cancellation into a fresh CancelledError: still ours."""
    entered = asyncio.Event()

    async def hang() -> Any:
        entered.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise asyncio.CancelledError("re-raised by the hook") from None

    after: list[str] = []
    runner = HookRunner(
        [
            make_hook("Hanging", event, [], hang),
            make_hook("After", event, after, lambda: stopping(event, "After")),
        ],
        timeout=hook_timeout,
    )
    task = asyncio.create_task(dispatch(runner, event))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert after == []


# -- registration ---------------------------------------------------------------------------


def test_register_rejects_a_sync_override_naming_the_method() -> None:
    class Sync(Hook):
        def pre_tool_call(self, tool_call: ToolCall) -> HookResult:  # type: ignore[override]
            return HookResult.allowed()

    runner = HookRunner()
    with pytest.raises(TypeError, match=r"Sync\.pre_tool_call") as info:
        runner.register(Sync())
    assert "async def" in str(info.value)
    assert runner.hooks == ()
    with pytest.raises(TypeError, match=r"pre_tool_call"):
        HookRunner([Sync()])


@pytest.mark.parametrize("event", EVENTS)
def test_every_method_must_be_async(event: str) -> None:
    sync_hook = type("SyncHook", (Hook,), {event: lambda self, *a: None})()
    with pytest.raises(TypeError, match=rf"SyncHook\.{event}\b"):
        HookRunner().register(sync_hook)


def test_an_async_generator_override_is_rejected() -> None:
    class Gen(Hook):
        async def on_compaction(self, summary: str) -> Any:  # type: ignore[override]
            yield summary

    with pytest.raises(TypeError, match=r"Gen\.on_compaction"):
        HookRunner().register(Gen())


def test_register_rejects_a_non_hook() -> None:
    class Duck:
        async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
            return HookResult.allowed()

    with pytest.raises(TypeError):
        HookRunner().register(Duck())  # type: ignore[arg-type]


def test_overridden_events() -> None:
    class Two(Hook):
        async def pre_turn(self) -> HookResult:
            return HookResult.allowed()

        async def on_compaction(self, summary: str) -> None:
            return None

    class Inherits(Two):
        pass

    assert overridden_events(Hook()) == frozenset()
    assert overridden_events(Two()) == {"pre_turn", "on_compaction"}
    assert overridden_events(Inherits()) == {"pre_turn", "on_compaction"}


async def test_register_unregister_and_the_hooks_snapshot() -> None:
    log: list[str] = []
    a = make_hook("A", "pre_tool_call", log, lambda: HookResult.allowed())
    b = make_hook("B", "pre_tool_call", log, lambda: HookResult.allowed())
    runner = HookRunner([a])
    runner.register(b)
    runner.register(a)  # twice: called twice
    snapshot = runner.hooks
    assert isinstance(snapshot, tuple) and snapshot == (a, b, a)
    await runner.dispatch_pre_tool_call(CALL)
    assert log == ["A", "B", "A"]

    assert runner.unregister(a) is True  # the first registration only
    assert runner.hooks == (b, a)
    assert snapshot == (a, b, a)  # an old snapshot does not change
    log.clear()
    await runner.dispatch_pre_tool_call(CALL)
    assert log == ["B", "A"]

    assert runner.unregister(a) is True
    assert runner.unregister(a) is False
    assert runner.unregister(make_hook("C", "pre_turn", [], None)) is False
    assert runner.hooks == (b,)
    log.clear()
    await runner.dispatch_pre_tool_call(CALL)
    assert log == ["B"]


async def test_unregistering_a_hook_stops_its_events() -> None:
    log: list[str] = []

    class Everything(Hook):
        pass

    for event in EVENTS:

        async def method(self: Hook, *args: Any, _event: str = event) -> Any:
            log.append(_event)
            return passing(_event)

        setattr(Everything, event, method)
    hook = Everything()
    runner = HookRunner([hook])
    for event in EVENTS:
        await dispatch(runner, event)
    assert log == list(EVENTS)
    runner.unregister(hook)
    log.clear()
    for event in EVENTS:
        await dispatch(runner, event)
    assert log == []


@pytest.mark.parametrize("event", EVENTS)
async def test_registration_during_a_dispatch_affects_only_the_next(event: str) -> None:
    log: list[str] = []
    runner = HookRunner()
    late = make_hook("Late", event, log, lambda: passing(event))
    doomed = make_hook("Doomed", event, log, lambda: passing(event))

    def mutate() -> Any:
        runner.register(late)
        runner.unregister(doomed)
        return passing(event)

    mutator = make_hook("Mutator", event, log, mutate)
    runner.register(mutator)
    runner.register(doomed)
    await dispatch(runner, event)
    assert log == ["Mutator", "Doomed"]  # the snapshot taken at the start
    assert runner.hooks == (mutator, late)
    log.clear()
    runner.unregister(mutator)
    await dispatch(runner, event)
    assert log == ["Late"]


async def test_non_overridden_methods_are_never_called(monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[str] = []
    for event in EVENTS:
        default = getattr(Hook, event)

        async def spy(self: Hook, *args: Any, _event: str = event, _default: Any = default) -> Any:
            called.append(_event)
            return await _default(self, *args)

        monkeypatch.setattr(Hook, event, spy)

    class OnlyCompaction(Hook):
        async def on_compaction(self, summary: str) -> None:
            called.append("OnlyCompaction.on_compaction")

    runner = HookRunner([Hook(), OnlyCompaction(), Hook()])
    for event in EVENTS:
        await dispatch(runner, event)
    assert called == ["OnlyCompaction.on_compaction"]


async def test_non_overriding_hooks_do_not_change_any_outcome() -> None:
    log: list[str] = []
    deny = HookResult.denied("no")
    runner = HookRunner([Hook(), make_hook("Deny", "pre_tool_call", log, lambda: deny), Hook()])
    assert await runner.dispatch_pre_tool_call(CALL) is deny
    assert await runner.dispatch_pre_turn() == HookResult(allow=True)
    assert await runner.dispatch_interaction(QUESTIONS) is None


def test_hook_defaults() -> None:
    async def run() -> None:
        hook = Hook()
        assert await hook.on_session_start() is None
        assert await hook.on_session_end() is None
        assert await hook.pre_turn() == HookResult(allow=True)
        assert await hook.post_turn(RESPONSE) is None
        assert await hook.pre_tool_call(CALL) == HookResult(allow=True)
        assert await hook.post_tool_call(RESULT) is None
        assert await hook.on_tool_error(ERROR) == (
            HookResult(allow=False, message="disk on fire"),
            None,
        )
        assert await hook.on_interaction(QUESTIONS) is None
        assert await hook.on_compaction("s") is None

    asyncio.run(run())


def test_hook_result_constructors() -> None:
    assert HookResult.allowed() == HookResult(allow=True, message="")
    assert HookResult.allowed("note") == HookResult(allow=True, message="note")
    assert HookResult.denied("why") == HookResult(allow=False, message="why")
