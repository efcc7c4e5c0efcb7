"""`start_now`: an answer's first step runs at once, inside the task that goes on running it
(by hand on 3.11, eager tasks on 3.12+), so `current_task`, `asyncio.timeout` and
cancellation behave as in any task; and the agent sends an answer that never waits before
the frame's delivery returns."""

from __future__ import annotations

import asyncio
import contextvars
import gc
from collections.abc import Callable
from typing import Any

import pytest

from antigravity_sdk import Hook, HookResult, ToolCall
from antigravity_sdk._eager import start_now

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="outer")


async def from_a_callback(run: Callable[[], Any]) -> Any:
    """`run()` from a plain loop callback (no current task), as a transport calls back."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def callback() -> None:
        try:
            assert asyncio.current_task() is None
            done.set_result(run())
        except BaseException as exc:
            done.set_exception(exc)

    loop.call_soon(callback)
    return await asyncio.wait_for(done, 5)


@pytest.mark.parametrize("where", ["task", "callback"])
async def test_an_answer_that_never_waits_finishes_before_start_now_returns(where: str) -> None:
    seen: list[Any] = []

    async def answer() -> None:
        seen.append(asyncio.current_task())
        VAR.set("inner")

    def start() -> list[Any]:
        outer = asyncio.current_task()
        task = start_now(answer())
        assert task is None  # finished: nothing left to track
        assert len(seen) == 1  # ran already, before start_now returned
        assert asyncio.current_task() is outer  # the caller's task (or none) is back
        return [outer]

    outer = start() if where == "task" else await from_a_callback(start)
    (current,) = seen
    assert isinstance(current, asyncio.Task)  # a task of its own, not the caller's
    assert current is not outer[0]
    assert VAR.get() == "outer"  # its context is its own
    await asyncio.sleep(0)  # its task's step (3.11) just hands over the outcome


@pytest.mark.parametrize("where", ["task", "callback"])
async def test_an_answer_that_waits_goes_on_in_the_same_task(where: str) -> None:
    gate = asyncio.Event()
    tasks: list[Any] = []

    async def answer() -> str:
        tasks.append(asyncio.current_task())
        await gate.wait()
        tasks.append(asyncio.current_task())
        return "answered"

    def start() -> asyncio.Task[Any] | None:
        return start_now(answer())  # type: ignore[arg-type]

    task = start() if where == "task" else await from_a_callback(start)
    assert task is not None and not task.done()
    assert tasks == [task]  # the first step ran at once, as `task`
    gate.set()
    assert await asyncio.wait_for(task, 5) == "answered"
    assert tasks == [task, task]


@pytest.mark.parametrize("where", ["task", "callback"])
@pytest.mark.parametrize("delay", [0, 0.01])
async def test_asyncio_timeout_inside_an_answer_times_out_that_answer(
    where: str, delay: float
) -> None:
    outcome: list[str] = []

    async def answer() -> None:
        try:
            async with asyncio.timeout(delay):
                await asyncio.sleep(10)
        except TimeoutError:
            outcome.append("timed out")
            return
        outcome.append("not timed out")

    def start() -> asyncio.Task[None] | None:
        return start_now(answer())

    outer = asyncio.current_task()
    task = start() if where == "task" else await from_a_callback(start)
    assert task is not None
    await asyncio.wait_for(task, 5)
    assert outcome == ["timed out"]
    assert not task.cancelled() and task.cancelling() == 0
    assert outer is not None and outer.cancelling() == 0  # nobody else was cancelled


@pytest.mark.parametrize("when", ["before its task ran", "while it waits"])
async def test_cancelling_a_pending_answer_reaches_the_coroutine(when: str) -> None:
    unwound: list[str] = []

    async def answer() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            unwound.append("cancelled")  # where the agent answers fail-closed
            raise

    task = start_now(answer())
    assert task is not None
    if when == "while it waits":
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert unwound == ["cancelled"]


async def test_an_exception_after_a_wait_is_the_tasks() -> None:
    async def answer() -> None:
        await asyncio.sleep(0)
        raise ValueError("late")

    task = start_now(answer())
    assert task is not None
    with pytest.raises(ValueError, match="late"):
        await asyncio.wait_for(task, 5)


async def test_an_exception_in_the_first_step_is_reported_not_lost() -> None:
    loop = asyncio.get_running_loop()
    reported: list[BaseException | None] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: reported.append(context.get("exception")))
    try:

        async def answer() -> None:
            raise ValueError("at once")

        assert start_now(answer()) is None
        await asyncio.sleep(0)
        gc.collect()
        assert [type(e) for e in reported] == [ValueError]  # as any task's unseen error
    finally:
        loop.set_exception_handler(previous)


# -- the agent ------------------------------------------------------------------------------

PRE_TOOL = {
    "callHookRequest": {
        "requestId": "hook_request_2",
        "type": "LIFECYCLE_HOOK_PRE_TOOL",
        "preToolArgs": {
            "toolName": "run_command",
            "argumentsJson": '{"CommandLine":"true"}',
            "callId": "call_2",
            "trajectoryId": "3eea33a4e35d17e07b3e21e8d0509940",
            "stepIndex": 2,
        },
    }
}


class Allow(Hook):
    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        return HookResult.allowed()


class Slow(Hook):
    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        await asyncio.sleep(0.01)
        return HookResult.allowed()


@pytest.mark.parametrize(("hook", "inline"), [(Allow(), True), (Slow(), False)])
async def test_the_agent_answers_inside_the_frames_delivery(
    hook: Hook, inline: bool, scripted_agent: Any
) -> None:
    """A hook that never waits: its answer is sent before delivering the frame returns."""
    # The frame arrives outside any turn: let it be asked as a scheduled wake's is.
    agent, conn = scripted_agent(
        lambda builder: builder.hook(hook).allow_all().allow_ungoverned("schedule")
    )
    delivered: list[Callable[[dict[str, Any]], None]] = []
    listen = conn.listen

    def keep(on_frame: Callable[[dict[str, Any]], None], on_lost: Any) -> None:
        delivered.append(on_frame)
        listen(on_frame, on_lost)

    conn.listen = keep  # type: ignore[method-assign]
    async with agent:
        (on_frame,) = delivered
        on_frame(PRE_TOOL)
        assert bool(conn.sent_with("callHookResponse")) is inline
        await conn.wait_for("callHookResponse")
        (answer,) = conn.sent_with("callHookResponse")
        assert answer["callHookResponse"]["requestId"] == "hook_request_2"
