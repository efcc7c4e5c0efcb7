"""One live conversation, one `Session`: its state moves only as the table says, and an
agent's life (start, turns, a given-up turn, a failure, stop) is a walk through it."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from antigravity_sdk import AgentStateError, HarnessConnectionError, TurnCancelledError
from antigravity_sdk.agent import SessionState
from antigravity_sdk.agent._lifecycle import TRANSITIONS, Lifecycle

S = SessionState
CONVERSATION = "fdf309472cb77c8949cdb2128f70545b"  # the scripted connection's
ScriptedAgent = Any  # the `scripted_agent` fixture (tests/conftest.py)


@given(st.lists(st.sampled_from(list(SessionState)), max_size=30))
def test_a_move_happens_exactly_when_the_table_lists_it(moves: list[SessionState]) -> None:
    life = Lifecycle()
    for to in moves:
        before = life.state
        if to in TRANSITIONS[before]:
            life.move(to)
            assert life.state is to
        else:
            with pytest.raises(AgentStateError, match=before.value):
                life.move(to)
            assert life.state is before  # a refused move changes nothing


def test_the_table_covers_every_state_and_every_state_can_close() -> None:
    assert set(TRANSITIONS) == set(SessionState)
    reached, todo = {S.STARTING}, deque([S.STARTING])
    while todo:
        for to in TRANSITIONS[todo.popleft()] - reached:
            reached.add(to)
            todo.append(to)
    assert reached == set(SessionState)  # no state is unreachable
    assert TRANSITIONS[S.CLOSED] == frozenset()  # nothing leaves CLOSED
    for state in set(SessionState) - {S.CLOSED}:
        assert S.CLOSED in TRANSITIONS[state]  # stop() works from anywhere
    # A failed session never takes turns again, and ending happens once.
    assert TRANSITIONS[S.FAILED] == {S.ENDING, S.CLOSED}
    assert S.ENDING not in TRANSITIONS[S.ENDING]


def ended(state: str = "STATE_FULLY_IDLE") -> dict[str, Any]:
    return {"trajectoryStateUpdate": {"trajectoryId": CONVERSATION, "state": state}}


async def until(agent: Any, state: SessionState) -> None:
    async with asyncio.timeout(5):
        while agent.state is not state:  # noqa: ASYNC110 - polling the public property
            await asyncio.sleep(0)


async def test_an_agents_life_is_a_walk_through_the_states(scripted_agent: ScriptedAgent) -> None:
    agent, conn = scripted_agent(lambda builder: builder.allow_all())
    assert agent.state is None and not agent.started
    await agent.start()
    assert agent.state is S.READY and agent.conversation_id == CONVERSATION

    chat = asyncio.create_task(agent.chat("hi"))
    await until(agent, S.IN_TURN)
    conn.incoming.put_nowait(ended())
    await asyncio.wait_for(chat, 5)
    assert agent.state is S.READY and agent.turn_count == 1

    # A turn given up is halted: HALTING until the harness confirms, then READY.
    chat = asyncio.create_task(agent.chat("again"))
    await until(agent, S.IN_TURN)
    assert await agent.cancel()
    with pytest.raises(TurnCancelledError):
        await asyncio.wait_for(chat, 5)
    await conn.wait_for("haltRequest")
    assert agent.state is S.HALTING
    conn.incoming.put_nowait(ended("STATE_CANCELLED"))
    await until(agent, S.READY)

    await agent.stop()
    assert agent.state is S.CLOSED and not agent.started
    assert agent.conversation_id == CONVERSATION  # the record stays readable
    with pytest.raises(AgentStateError):
        await agent.chat("after stop")
    await agent.stop()  # idempotent


async def test_a_lost_connection_fails_the_session_and_stop_still_closes_it(
    scripted_agent: ScriptedAgent,
) -> None:
    agent, conn = scripted_agent(lambda builder: builder.allow_all())
    await agent.start()
    conn.incoming.put_nowait(HarnessConnectionError("the harness died"))
    await until(agent, S.FAILED)
    assert agent.started  # failed, not stopped: stop() still runs the session_end hooks
    with pytest.raises(HarnessConnectionError, match="died"):
        await agent.chat("hi")
    await agent.stop()
    assert agent.state is S.CLOSED
    assert conn.sent_with("sessionEndRequest") == []  # nobody to ask


async def test_a_second_session_starts_from_a_new_record(scripted_agent: ScriptedAgent) -> None:
    agent, conn = scripted_agent(lambda builder: builder.allow_all())
    async with agent:
        chat = asyncio.create_task(agent.chat("hi"))
        await until(agent, S.IN_TURN)
        conn.incoming.put_nowait(ended())
        await asyncio.wait_for(chat, 5)
    assert agent.turn_count == 1
    conn.incoming.put_nowait({"initializeConversationResponse": {"cascadeId": CONVERSATION}})
    async with agent:
        assert agent.turn_count == 0 and agent.state is S.READY
