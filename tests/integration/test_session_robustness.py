"""Sessions that keep going, against the real harness: a blocking predicate cannot stall
the event loop past the hook timeout, a trigger survives denied turns, a prompt of the
wrong type is refused before it is sent, and a stream shows only the agent's own work
unless asked for its subagents' too."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from antigravity_sdk import ChatResponse, Hook, HookResult, policy
from antigravity_sdk.testing import Reply, tool_call
from antigravity_sdk.triggers import every

from .conftest import AgentFactory, Workspace, tool_messages


@contextlib.asynccontextmanager
async def heartbeat() -> AsyncIterator[list[float]]:
    """Ticks on the event loop; yields [the longest the loop was unavailable]."""
    worst = [0.0]

    async def beat() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.01)
            now = time.monotonic()
            worst[0] = max(worst[0], now - last)
            last = now

    task = asyncio.create_task(beat())
    try:
        yield worst
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_blocking_sync_predicate_cannot_stall_the_loop_past_the_hook_timeout(
    make_agent: AgentFactory, env: Workspace
) -> None:
    secret = env.ws / "secret.txt"
    secret.write_text("top secret\n")
    release = threading.Event()

    def slow_check(args: Any) -> bool:
        release.wait(5.0)  # e.g. a lookup without a timeout: never yields to the loop
        return False

    agent, model = make_agent(
        [tool_call("view_file", AbsolutePath=str(secret)), "done"],
        policies=[policy.deny("view_file", when=slow_check, name="lookup"), policy.allow_all()],
        hook_timeout=0.5,
    )
    try:
        async with agent, heartbeat() as worst:
            start = time.monotonic()
            response = await agent.chat("read it")
            took = time.monotonic() - start
    finally:
        release.set()
    assert response.text == "done"
    (result,) = tool_messages(model, 1)
    assert "top secret" not in result and "timed out" in result
    assert worst[0] < 0.4, f"the event loop stalled for {worst[0]:.2f}s"
    assert took < 4.0


class DenyEveryOtherTurn(Hook):
    """A rate limit of sorts: denies the 1st, 3rd, 5th... turn."""

    def __init__(self) -> None:
        self.turns = 0
        self.events: list[str] = []
        self.two_completed_after_a_denial = asyncio.Event()

    async def pre_turn(self) -> HookResult:
        self.turns += 1
        if self.turns % 2:
            self.events.append("denied")
            return HookResult.denied("rate limited")
        return HookResult.allowed()

    async def post_turn(self, response: ChatResponse) -> None:
        if response.text:
            self.events.append("completed")
        if "denied" in self.events:
            after = self.events[self.events.index("denied") :]
            if after.count("completed") >= 2:
                self.two_completed_after_a_denial.set()


async def test_a_trigger_keeps_running_after_a_denied_turn(
    make_agent: AgentFactory, caplog: pytest.LogCaptureFixture
) -> None:
    hook = DenyEveryOtherTurn()
    agent, _ = make_agent(
        lambda messages, tools: "tock",
        hooks=[hook],
        configure=lambda b: b.trigger(every(0.2, "tick")),
    )
    with caplog.at_level("WARNING", logger="antigravity_sdk.triggers"):
        async with agent:
            await asyncio.wait_for(hook.two_completed_after_a_denial.wait(), 15)
    assert hook.events[0] == "denied"
    assert any("turn was denied: rate limited" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("prompt", [12345, {"a": "b"}, None, b"bytes"])
async def test_a_prompt_that_is_not_a_string_is_refused_before_it_is_sent(
    make_agent: AgentFactory, prompt: Any
) -> None:
    agent, model = make_agent(["first", "second"], turn_timeout=5.0)
    async with agent:
        start = time.monotonic()
        with pytest.raises(
            TypeError, match=rf"prompt must be a str, .* got {type(prompt).__name__}"
        ):
            await agent.chat(prompt)
        with pytest.raises(TypeError, match="prompt must be a str"):
            async for _ in agent.stream(prompt):
                pass
        assert time.monotonic() - start < 1.0
        assert (await agent.chat("hello")).text == "first"
        assert "".join([c.text async for c in agent.stream("again")]) == "second"
    assert len(model.requests) == 2


async def test_a_prompt_that_is_not_valid_unicode_is_refused_before_it_is_sent(
    make_agent: AgentFactory,
) -> None:
    agent, _ = make_agent(["first"], turn_timeout=5.0)
    async with agent:
        start = time.monotonic()
        with pytest.raises(ValueError, match=r"not valid Unicode \(.*surrogate.* at index 1\)"):
            await agent.chat("a\ud800b")
        assert time.monotonic() - start < 1.0
        assert (await agent.chat("héllo 👋")).text == "first"


def delegating_script(target: str) -> Any:
    """Main agent: delegate each user request to a `research` subagent, then answer.
    Subagent (it has no invoke_subagent tool): view `target`, then report."""

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        names = {t["function"]["name"] for t in tools}
        last = json.dumps(messages[-1])
        if "invoke_subagent" not in names:
            if not any(m.get("role") == "tool" for m in messages):
                return tool_call("view_file", AbsolutePath=target)
            return "sub says hi"
        if "USER_REQUEST" in last:
            return tool_call(
                "invoke_subagent",
                Subagents=[{"TypeName": "research", "Prompt": "look", "Role": "Researcher"}],
            )
        return "main done"

    return script


async def test_stream_shows_subagents_only_when_asked(
    make_agent: AgentFactory, env: Workspace
) -> None:
    (env.ws / "a.txt").write_text("hello\n")
    agent, _ = make_agent(delegating_script(str(env.ws / "a.txt")), policies=[policy.allow_all()])
    async with agent:
        own = [c async for c in agent.stream("delegate")]
        everything = [c async for c in agent.stream("delegate again", subagents=True)]
    main = agent.conversation_id
    assert main and {c.trajectory_id for c in own} == {main}
    assert "".join(c.text for c in own if c.type == "text").startswith("main done")
    # (tool_call chunks: each tool's result also carries its call, as a tool_result chunk)
    assert [c.tool_call.name for c in own if c.type == "tool_call" and c.tool_call] == [
        "invoke_subagent"
    ]
    subs = [c for c in everything if c.trajectory_id != main]
    assert subs and len({c.trajectory_id for c in subs}) == 1
    assert "".join(c.text for c in subs if c.type == "text") == "sub says hi"
    assert [c.tool_call.name for c in subs if c.type == "tool_call" and c.tool_call] == [
        "view_file"
    ]
    assert [c.tool_call.name for c in everything if c.type == "tool_call" and c.tool_call] == [
        "invoke_subagent",
        "view_file",
    ]
