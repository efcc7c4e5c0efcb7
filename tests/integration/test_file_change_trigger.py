"""on_file_change() in an agent on the real harness: a change becomes one turn."""

from __future__ import annotations

import asyncio

from antigravity_sdk import ChatResponse, Hook
from antigravity_sdk.triggers import on_file_change

from .conftest import AgentFactory, Workspace
from .test_examples import load_example


class TurnDone(Hook):
    """Sets `done` when a turn has finished."""

    def __init__(self) -> None:
        self.done = asyncio.Event()

    async def post_turn(self, response: ChatResponse) -> None:
        self.done.set()


async def test_a_file_change_becomes_a_turn(make_agent: AgentFactory, env: Workspace) -> None:
    watched = env.root / "inbox"
    watched.mkdir()
    trigger = on_file_change([watched], "New files arrived.", debounce=0.2)
    turn = TurnDone()
    agent, model = make_agent(["noted"], hooks=[turn], configure=lambda b: b.trigger(trigger))
    async with agent:
        await asyncio.sleep(0.3)  # the watcher is up
        (watched / "report.csv").write_text("a,b\n")
        async with asyncio.timeout(15):
            await turn.done.wait()
    assert len(model.requests) == 1
    last = model.requests[0].last_message
    assert last is not None and last["role"] == "user"
    text = str(last["content"])
    assert "New files arrived." in text and f"added: {watched / 'report.csv'}" in text


async def test_file_change_trigger_example_runs() -> None:
    assert await load_example("file_change_trigger").main() == 0
