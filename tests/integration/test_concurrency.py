"""Eight agents in one process and one event loop, each with its own harness and model."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from antigravity_sdk import Hook, ToolCall, ToolResult, policy
from antigravity_sdk.testing import tool_call

from .conftest import AgentFactory, Workspace, harness_pid, process_alive, tool_messages

AGENTS = 8


class PerAgent(Hook):
    """Each agent's own hook: it must only ever see its own agent's calls."""

    def __init__(self) -> None:
        self.pre: list[ToolCall] = []
        self.post: list[ToolResult] = []

    async def pre_tool_call(self, tool_call: ToolCall) -> Any:
        self.pre.append(tool_call)
        await asyncio.sleep(0.01)  # yield, so dispatches of different agents interleave
        return await super().pre_tool_call(tool_call)

    async def post_tool_call(self, result: ToolResult) -> None:
        self.post.append(result)


async def test_eight_agents_concurrently(make_agent: AgentFactory, env: Workspace) -> None:
    def run(i: int, turn: int) -> Any:
        marker = env.ws / f"agent{i}-turn{turn}.txt"
        return tool_call(
            "run_command",
            CommandLine=f"echo agent-{i}-turn-{turn} > {marker.name}; echo agent-{i}-turn-{turn}",
            Cwd=str(env.ws),
            WaitMsBeforeAsync=5000,
        )

    setups = []
    for i in range(AGENTS):
        hook = PerAgent()
        script = [run(i, 1), f"agent {i} turn 1 done", run(i, 2), f"agent {i} turn 2 done"]
        agent, model = make_agent(script, hooks=[hook], policies=[policy.allow_all()])
        setups.append((i, agent, model, hook))

    pids: dict[int, int] = {}

    async def session(i: int, agent: Any) -> list[str]:
        async with agent:
            pids[i] = harness_pid(agent)
            first = await agent.chat(f"agent {i}, first")
            second = await agent.chat(f"agent {i}, second")
            assert agent.turn_count == 2
            return [first.text, second.text]

    started = time.monotonic()
    results = await asyncio.wait_for(
        asyncio.gather(*(session(i, agent) for i, agent, _, _ in setups)), 60
    )
    elapsed = time.monotonic() - started

    assert len(set(pids.values())) == AGENTS  # one harness each
    for (i, agent, model, hook), texts in zip(setups, results, strict=True):
        assert texts == [f"agent {i} turn 1 done", f"agent {i} turn 2 done"]
        assert len(model.requests) == 4
        assert model.exhausted_count == 0
        # Each model saw only its own agent's prompts and tool output.
        assert f"agent {i}, first" in model.requests[0].text
        assert f"agent-{i}-turn-1" in tool_messages(model, 1)[0]
        assert f"agent-{i}-turn-2" in tool_messages(model, 3)[-1]
        other = (i + 1) % AGENTS
        assert all(f"agent {other}," not in r.text for r in model.requests)
        # Each agent's hook saw exactly its own two calls, pre and post.
        assert [c.args["CommandLine"].split(" >")[0] for c in hook.pre] == [
            f"echo agent-{i}-turn-1",
            f"echo agent-{i}-turn-2",
        ]
        assert [r.id for r in hook.post] == [c.id for c in hook.pre]
        assert all(c.trajectory_id == agent.conversation_id for c in hook.pre)
        for turn in (1, 2):
            marker = env.ws / f"agent{i}-turn{turn}.txt"
            assert marker.read_text().strip() == f"agent-{i}-turn-{turn}"
        assert not agent.started
    assert len({agent.conversation_id for _, agent, _, _ in setups}) == AGENTS
    # Every harness is gone once its agent stopped.
    assert [pid for pid in pids.values() if process_alive(pid)] == []
    assert elapsed < 45
