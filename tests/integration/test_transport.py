"""The harness connection on both event loops the SDK supports, against the REAL harness:
plain asyncio and uvloop (whose transports are its own C classes). Hooks answer, a media
prompt streams out as one fragmented message, and a killed harness is reported."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from antigravity_sdk import Hook, HookResult, ToolCall, ToolResult, policy
from antigravity_sdk.media import Image
from antigravity_sdk.testing import text, tool_call

from . import test_faults
from .conftest import AgentFactory, Workspace, wait_gone

JPEG = b"\xff\xd8\xff\xe0" + bytes(16)


Body = Callable[[AgentFactory], Awaitable[None]]


@pytest.fixture(params=["asyncio", "uvloop"])
def on_loop(request: pytest.FixtureRequest, env: Workspace) -> Callable[[Body], None]:
    """Run a test's body on a fresh loop of the given kind (not through pytest-asyncio,
    whose per-test loop choice is global), then stop its agents and check that no harness
    process outlived them."""
    run: Callable[[Any], Any] = asyncio.run
    if request.param == "uvloop":
        run = pytest.importorskip("uvloop").run

    async def main(body: Body) -> None:
        assert type(asyncio.get_running_loop()).__module__.startswith(request.param)
        factory = AgentFactory(env)
        try:
            await body(factory)
        finally:
            for agent in factory.agents:
                if agent.started:
                    await asyncio.wait_for(agent.stop(), 10)
            leftovers = [pid for pid in factory.pids if not await wait_gone(pid)]
            assert not leftovers, f"harness processes outlived their agents: {leftovers}"

    return lambda body: run(main(body))


class Counting(Hook):
    def __init__(self) -> None:
        self.pre: list[str] = []
        self.post = 0

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        self.pre.append(tool_call.args["CommandLine"])
        if tool_call.args["CommandLine"] == "sleepy":
            await asyncio.sleep(0.01)  # an answer that waits
        return HookResult.allowed()

    async def post_tool_call(self, result: ToolResult) -> None:
        self.post += 1


def test_a_governed_turn(on_loop: Callable[[Body], None]) -> None:
    on_loop(_a_governed_turn)


async def _a_governed_turn(make_agent: AgentFactory) -> None:
    commands = ["true", "sleepy", "rm -rf /tmp/x", "true"]
    script = [tool_call("run_command", CommandLine=c, WaitMsBeforeAsync=5000) for c in commands]
    hook = Counting()
    agent, model = make_agent(
        [*script, text("done")],
        hooks=[hook],
        policies=[policy.deny("run_command", when=lambda a: "rm" in a["CommandLine"])],
        configure=lambda b: b.policy(policy.allow_all()),
    )
    async with agent:
        response = await asyncio.wait_for(agent.chat("go"), 30)
    assert response.text == "done"
    assert hook.pre == commands
    assert hook.post == 3  # the denied call never ran
    assert [s.kind for s in response.steps].count("denied") == 1
    assert len(model.requests) == 5


def test_a_media_prompt_streams_out_whole(on_loop: Callable[[Body], None]) -> None:
    """Bigger than one fragment, sent while hooks answer on the same connection."""
    on_loop(_a_media_prompt_streams_out_whole)


async def _a_media_prompt_streams_out_whole(make_agent: AgentFactory) -> None:
    agent, model = make_agent(["seen", "again"])
    image = Image.from_bytes(JPEG + bytes(3_000_000), "image/jpeg")
    async with agent:
        assert (await asyncio.wait_for(agent.chat(["look", image]), 30)).text == "seen"
        assert (await asyncio.wait_for(agent.chat("and now?"), 30)).text == "again"
    assert model.requests[0].images == [("image/jpeg", image.data)]


def test_a_killed_harness_is_reported(on_loop: Callable[[Body], None]) -> None:
    on_loop(test_faults.test_harness_killed_between_turns)
