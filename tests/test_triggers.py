"""Triggers: periodic messages, failure containment and bounded shutdown."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest

from antigravity_sdk.triggers import Trigger, TriggerContext, TriggerRunner, every

TICK = 0.01


class Inbox:
    """A `send` function that records messages and lets a test wait for some."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self._changed = asyncio.Event()

    async def __call__(self, text: str) -> None:
        self.messages.append(text)
        self._changed.set()

    async def wait_for(self, predicate: Any) -> None:
        async with asyncio.timeout(1):
            while not predicate(self.messages):
                self._changed.clear()
                await self._changed.wait()


def trigger_tasks() -> set[asyncio.Task[Any]]:
    return {t for t in asyncio.all_tasks() if t.get_name().startswith("trigger ")}


async def test_every_sends_a_fixed_message_repeatedly() -> None:
    inbox = Inbox()
    runner = TriggerRunner([every(TICK, "tick")])
    await runner.start(inbox)
    try:
        await inbox.wait_for(lambda m: len(m) >= 3)
    finally:
        await runner.stop()
    assert set(inbox.messages) == {"tick"}


async def test_every_waits_one_interval_before_the_first_message() -> None:
    inbox = Inbox()
    async with TriggerRunner([every(0.2, "late")], send=inbox):
        await asyncio.sleep(0.05)
    assert inbox.messages == []


async def test_callbacks_sync_and_async_none_sends_nothing() -> None:
    inbox = Inbox()
    sync_threads: list[int] = []
    quiet_ran_thrice = asyncio.Event()
    quiet_calls: list[int] = []

    def sync_cb() -> str:
        sync_threads.append(threading.get_ident())
        return "from sync"

    async def async_cb() -> str:
        return "from async"

    async def quiet() -> None:
        quiet_calls.append(1)
        if len(quiet_calls) >= 3:
            quiet_ran_thrice.set()

    async with TriggerRunner(
        [every(TICK, sync_cb), every(TICK, async_cb), every(TICK, quiet)], send=inbox
    ):
        await inbox.wait_for(lambda m: {"from sync", "from async"} <= set(m))
        await asyncio.wait_for(quiet_ran_thrice.wait(), 1)
    assert set(inbox.messages) == {"from sync", "from async"}  # nothing for None
    assert threading.get_ident() not in sync_threads  # sync callbacks run off the loop


async def test_raising_trigger_is_logged_not_restarted_others_keep_running(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runs: list[int] = []

    class Broken:
        async def run(self, ctx: TriggerContext) -> None:
            runs.append(1)
            raise RuntimeError("broken trigger")

    inbox = Inbox()
    runner = TriggerRunner([Broken(), every(TICK, "alive")])
    with caplog.at_level(logging.ERROR, logger="antigravity_sdk.triggers"):
        await runner.start(inbox)
        await inbox.wait_for(lambda m: len(m) >= 3)  # keeps ticking after the failure
        await runner.stop()
    assert runs == [1]
    [record] = caplog.records
    assert "not be restarted" in record.getMessage()
    assert record.exc_info is not None and "broken trigger" in str(record.exc_info[1])


async def test_callback_returning_a_non_string_ends_that_trigger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[int] = []

    def bad() -> int:
        calls.append(1)
        return 42

    with caplog.at_level(logging.ERROR, logger="antigravity_sdk.triggers"):
        async with TriggerRunner([every(TICK, bad)], send=Inbox()):  # type: ignore[arg-type]
            await asyncio.sleep(TICK * 6)
    assert calls == [1]
    assert "expected str or None" in str(caplog.records[0].exc_info[1])  # type: ignore[index]


async def test_stop_cancels_everything_and_leaves_no_tasks() -> None:
    cancelled = asyncio.Event()

    class Forever:
        async def run(self, ctx: TriggerContext) -> None:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.set()
                raise

    runner = TriggerRunner([Forever(), every(TICK, "x")])
    await runner.start(Inbox())
    await asyncio.sleep(0)  # let the tasks reach their first await
    assert runner.running
    assert len(trigger_tasks()) == 2
    started = time.monotonic()
    await runner.stop()
    assert time.monotonic() - started < 0.5
    assert cancelled.is_set()
    assert not runner.running
    assert trigger_tasks() == set()
    await runner.stop()  # idempotent


async def test_stop_is_bounded_when_a_trigger_ignores_cancellation(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release = asyncio.Event()

    class Stubborn:
        async def run(self, ctx: TriggerContext) -> None:
            while not release.is_set():
                try:
                    await asyncio.sleep(60)
                except asyncio.CancelledError:
                    continue

    runner = TriggerRunner([Stubborn()], stop_timeout=0.05)
    await runner.start(Inbox())
    await asyncio.sleep(0)
    [task] = trigger_tasks()
    try:
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="antigravity_sdk.triggers"):
            async with asyncio.timeout(2):  # fail, rather than hang, if stop() is unbounded
                await runner.stop()
        assert time.monotonic() - started < 0.5
        assert "did not stop within" in caplog.records[0].getMessage()
        assert not runner.running
    finally:
        release.set()  # let the stubborn task end so the test leaves nothing behind
        task.cancel()
        await asyncio.wait({task}, timeout=1)
    assert task.done()


async def test_trigger_returning_normally_just_ends() -> None:
    class Once:
        async def run(self, ctx: TriggerContext) -> None:
            await ctx.send("hello")

    inbox = Inbox()
    async with TriggerRunner([Once()], send=inbox) as runner:
        await inbox.wait_for(lambda m: m == ["hello"])
        await asyncio.sleep(0)
        assert trigger_tasks() == set()
        assert runner.running  # running means started, not "has live triggers"
    assert not runner.running


async def test_add_while_running_starts_the_trigger() -> None:
    inbox = Inbox()
    runner = TriggerRunner()
    await runner.start(inbox)
    try:
        runner.add(every(TICK, "late add"))
        await inbox.wait_for(lambda m: "late add" in m)
    finally:
        await runner.stop()
    assert len(runner.triggers) == 1


async def test_start_errors() -> None:
    runner = TriggerRunner()
    with pytest.raises(TypeError, match="send"):
        await runner.start()
    assert not runner.running
    await runner.start(Inbox())
    with pytest.raises(RuntimeError, match="already running"):
        await runner.start(Inbox())
    await runner.stop()
    with pytest.raises(TypeError, match="not a trigger"):
        runner.add(object())  # type: ignore[arg-type]


async def test_context_send_requires_str() -> None:
    inbox = Inbox()
    ctx = TriggerContext(inbox)
    await ctx.send("ok")
    with pytest.raises(TypeError, match="only send str"):
        await ctx.send(3)  # type: ignore[arg-type]
    assert inbox.messages == ["ok"]


@pytest.mark.parametrize(
    ("seconds", "action", "error"),
    [
        (0, "x", ValueError),
        (-1, "x", ValueError),
        (float("nan"), "x", ValueError),
        (float("inf"), "x", ValueError),
        (True, "x", TypeError),
        ("1", "x", TypeError),
        (1, "", ValueError),
        (1, 42, TypeError),
    ],
)
def test_every_validates_its_arguments(seconds: Any, action: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        every(seconds, action)


def test_every_is_a_trigger() -> None:
    t = every(1, "x")
    assert isinstance(t, Trigger)
    assert repr(t) == "every(1.0, 'x')"


async def test_an_agents_denied_or_failed_turns_do_not_end_its_triggers(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, scripted_agent: Any
) -> None:
    from antigravity_sdk import AntigravityError, HookResult, TurnDeniedError

    agent, conn = scripted_agent(lambda builder: builder.trigger(every(TICK, "tick")))
    outcomes: list[BaseException | None] = [
        TurnDeniedError(HookResult.denied("rate limited")),
        AntigravityError("the turn failed: model error"),
        TimeoutError("the turn did not finish within 1s (halted)"),
        None,
    ]
    inbox = Inbox()

    async def chat(text: str) -> None:
        await inbox(text)
        outcome = outcomes[(len(inbox.messages) - 1) % len(outcomes)]
        if outcome is not None:
            raise outcome

    monkeypatch.setattr(agent, "chat", chat)
    with caplog.at_level(logging.WARNING, logger="antigravity_sdk.triggers"):
        await agent.start()
        try:
            await inbox.wait_for(lambda m: len(m) >= 6)
            assert len(trigger_tasks()) == 1, "the trigger must keep running"
            conn.incoming.put_nowait(ConnectionResetError("the harness is gone"))
            _, running = await asyncio.wait(trigger_tasks(), timeout=1)
            assert not running, "a dead session still ends the trigger (logged)"
        finally:
            await agent.stop()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "a trigger's turn was denied: rate limited" in warnings
    assert "a trigger's turn failed: the turn failed: model error" in warnings
    assert any("did not finish within" in w for w in warnings)
    assert [r.levelno for r in caplog.records if r.levelno > logging.WARNING] == [logging.ERROR]
