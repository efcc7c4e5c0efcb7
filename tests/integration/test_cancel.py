"""`Agent.cancel()`: a turn blocked in a slow tool ends at once, the harness halts it, and
the session stays usable. Against the real harness."""

from __future__ import annotations

import asyncio
import time

import pytest

from antigravity_sdk import TurnCancelledError, policy
from antigravity_sdk.testing import tool_call

from .conftest import AgentFactory, Workspace
from .test_examples import load_example

# The example's hook: signals when the model's tool call has been allowed.
Started = load_example("cancel_turn").Started


async def test_cancel_ends_a_turn_blocked_in_a_slow_tool(
    make_agent: AgentFactory, env: Workspace
) -> None:
    marker = env.ws / "finished"
    script = [
        tool_call(
            "run_command",
            CommandLine=f"sleep 20 && touch {marker}",
            Cwd=str(env.ws),
            WaitMsBeforeAsync=60_000,
        ),
        "after the cancel",  # the halted turn asks the model nothing more
    ]
    started = Started()
    agent, _ = make_agent(script, hooks=[started], policies=[policy.allow_all()])
    async with agent:
        assert await agent.cancel() is False  # no turn running
        turn = asyncio.create_task(agent.chat("slow"))
        await asyncio.wait_for(started.event.wait(), 20)
        await asyncio.sleep(0.3)
        t0 = time.monotonic()
        assert await agent.cancel() is True
        with pytest.raises(TurnCancelledError):
            await turn
        assert time.monotonic() - t0 < 1.0
        response = await agent.chat("quick")
        assert response.text == "after the cancel"
        assert agent.turn_count == 1
    assert not marker.exists()


async def test_cancel_ends_a_stream(make_agent: AgentFactory, env: Workspace) -> None:
    script = [
        tool_call("run_command", CommandLine="sleep 20", Cwd=str(env.ws), WaitMsBeforeAsync=60_000),
        "after the cancel",
    ]
    started = Started()
    agent, _ = make_agent(script, hooks=[started], policies=[policy.allow_all()])
    async with agent:

        async def consume() -> list[str]:
            return [chunk.type async for chunk in agent.stream("slow")]

        streaming = asyncio.create_task(consume())
        await asyncio.wait_for(started.event.wait(), 20)
        await agent.cancel()
        with pytest.raises(TurnCancelledError):
            await streaming
        assert (await agent.chat("quick")).text == "after the cancel"


async def test_cancel_example_runs() -> None:
    assert await load_example("cancel_turn").main() == 0
