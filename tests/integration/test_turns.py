"""Turn after turn in one session, on every supported interpreter.

Regression tests for the Python 3.12+ hang: `chat()` returned from inside `async for`
over the turn's async generator, so the generator's `finally` (which clears the turn's
queue and its hook scope) ran later, when the event loop's async-generator finalizer got
to it. On 3.11 `asyncio.wait_for` always gave the loop a pass before the next turn began,
so the clean-up ran first; 3.12's `wait_for` (rewritten on `asyncio.timeout`) returns at
once for a set event, the next turn installed its queue first, and the late clean-up of
the previous turn cleared it: the second turn never saw its own end. Each scenario below
hung until the turn timeout on 3.12 and 3.13.
"""

from __future__ import annotations

import asyncio

import pytest

from antigravity_sdk import Hook, HookResult, TurnDeniedError, current_context, policy
from antigravity_sdk.triggers import TriggerContext

from .conftest import AgentFactory

TURN_TIMEOUT = 8.0  # a hang shows as a timeout in seconds, not minutes


class PromptsSeen(Hook):
    """Records the prompt each pre_turn and post_turn sees in its turn context."""

    def __init__(self, deny_first: int = 0) -> None:
        self.deny_first = deny_first
        self.pre: list[str] = []
        self.post: list[str] = []
        self.turn_over = asyncio.Event()

    async def pre_turn(self) -> HookResult:
        self.pre.append(current_context().get("prompt"))
        if len(self.pre) <= self.deny_first:
            return HookResult.denied("not now")
        return HookResult.allowed()

    async def post_turn(self, response: object) -> None:
        self.post.append(current_context().get("prompt"))
        self.turn_over.set()


async def test_back_to_back_turns_each_see_their_own_end(make_agent: AgentFactory) -> None:
    seen = PromptsSeen()
    agent, model = make_agent(
        ["one", "two", "three", "four"], hooks=[seen], turn_timeout=TURN_TIMEOUT
    )
    async with agent:
        texts = [(await agent.chat(prompt)).text for prompt in ("a", "b")]
        streamed = "".join([c.text async for c in agent.stream("c") if c.type == "text"])
        texts += [streamed, (await agent.chat("d")).text]
        assert agent.turn_count == 4
    assert texts == ["one", "two", "three", "four"]
    # A late clean-up of one turn must not end the next turn's hook scope either.
    assert seen.pre == seen.post == ["a", "b", "c", "d"]
    assert len(model.requests) == 4


async def test_a_turn_after_a_denied_turn(make_agent: AgentFactory) -> None:
    seen = PromptsSeen(deny_first=1)
    agent, model = make_agent(["answered"], hooks=[seen], turn_timeout=TURN_TIMEOUT)
    async with agent:
        with pytest.raises(TurnDeniedError, match="not now"):
            await agent.chat("first")
        response = await agent.chat("second")
        assert response.text == "answered"
        assert agent.turn_count == 1
    assert len(model.requests) == 1
    assert "second" in model.requests[0].text


async def test_a_turn_right_after_an_abandoned_stream(make_agent: AgentFactory) -> None:
    seen = PromptsSeen()
    agent, _ = make_agent(
        ["a long streamed answer", "after"],
        hooks=[seen],
        policies=[policy.allow_all()],
        turn_timeout=TURN_TIMEOUT,
    )
    async with agent:
        stream = agent.stream("first")
        async for _chunk in stream:
            break  # the consumer walks away mid-turn...
        await asyncio.wait_for(seen.turn_over.wait(), TURN_TIMEOUT)
        await asyncio.sleep(0.3)  # ...the harness finishes that turn and goes idle...
        await stream.aclose()
        # ...and the next turn starts at once: the abandoned turn's HALT (a no-op for an
        # idle harness) must go out before this turn's input, never after it.
        response = await agent.chat("second")
        assert response.text == "after"


class TwoTicks:
    """A trigger that pushes two messages back to back, then ends."""

    def __init__(self) -> None:
        self.done = asyncio.Event()

    async def run(self, ctx: TriggerContext) -> None:
        await ctx.send("tick one")
        await ctx.send("tick two")
        self.done.set()


async def test_a_triggers_second_turn(make_agent: AgentFactory) -> None:
    trigger = TwoTicks()
    agent, model = make_agent(
        ["tock one", "tock two"],
        turn_timeout=TURN_TIMEOUT,
        configure=lambda b: b.trigger(trigger),
    )
    async with agent:
        await asyncio.wait_for(trigger.done.wait(), 3 * TURN_TIMEOUT)
        assert agent.turn_count == 2
    assert len(model.requests) == 2
    assert "tick two" in model.requests[1].text
