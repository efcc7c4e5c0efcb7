"""Faults against the REAL harness: missing binary, a dying harness, garbage on the wire,
a harness that ignores the session end, and — in every way an agent can end — no harness
process outliving its Agent (checked in the process table, /proc)."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import time
from typing import Any

import pytest

from antigravity_sdk import Agent, Hook
from antigravity_sdk.errors import HarnessConnectionError, HarnessNotFoundError, ProtocolError
from antigravity_sdk.harness.connection import LocalConnection
from antigravity_sdk.testing import ScriptedModel

from .conftest import AgentFactory, harness_pid, process_alive, wait_gone


def on_own_connection(make_agent: AgentFactory, script: list[str]) -> tuple[Agent, Any]:
    """An agent whose harness connection the test holds, to inject faults into it."""
    conn = LocalConnection()
    agent, _ = make_agent(script, configure=lambda builder: builder.connection(conn))
    return agent, conn


def garble(conn: LocalConnection, text: bytes) -> None:
    """From now on each message the harness sends arrives as `text`: replaced where the raw
    WebSocket message is handed on, before anything parses it."""
    real_message = conn._message

    def garbled(data: bytes) -> None:
        real_message(text)  # a real message arrived from the harness... garbled

    conn._message = garbled  # type: ignore[method-assign]


class SessionEnd(Hook):
    def __init__(self) -> None:
        self.ended = 0

    async def on_session_end(self) -> None:
        self.ended += 1


# -- the binary ----------------------------------------------------------------------------


async def test_missing_harness_binary(make_agent: AgentFactory) -> None:
    agent, model = make_agent(
        ["unused"], configure=lambda b: b.harness_path("/nonexistent/localharness")
    )
    with pytest.raises(HarnessNotFoundError) as info:
        await agent.start()
    message = str(info.value)
    assert "/nonexistent/localharness" in message
    assert "does not exist" in message
    assert "antigravity harness install" in message  # says how to install it
    assert "pip install google-antigravity==" in message
    assert not agent.started
    assert not model.started  # the model the agent started is stopped again
    # Private on purpose: no public surface tells whether an agent still holds a
    # connection (harness_pid is None here either way), and a failed start must drop it.
    assert agent._session.conn is None


# -- the harness dies ----------------------------------------------------------------------


async def test_harness_killed_mid_turn_raises_with_stderr_tail(
    make_agent: AgentFactory,
) -> None:
    holder: dict[str, int] = {}
    release = asyncio.Event()

    async def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        os.kill(holder["pid"], signal.SIGKILL)
        await release.wait()  # the harness is gone; this reply never matters
        return "too late"

    hook = SessionEnd()
    model = ScriptedModel(script)
    agent, _ = make_agent(model, hooks=[hook])
    async with model, agent:
        release_later = asyncio.get_running_loop().call_later(3, release.set)
        pid = holder["pid"] = harness_pid(agent)
        started = time.monotonic()
        with pytest.raises(HarnessConnectionError) as info:
            await agent.chat("die")
        elapsed = time.monotonic() - started
        assert elapsed < 2.0, f"took {elapsed:.2f}s to notice the dead harness"
        error = info.value
        assert error.stderr_tail  # the harness's last words travel with the error
        assert error.stderr_tail in str(error)
        assert "harness stderr" in str(error)
        assert "harness exited with status -9" in str(error)
        # The agent stays failed: the next turn raises at once instead of hanging.
        with pytest.raises(HarnessConnectionError):
            await asyncio.wait_for(agent.chat("again"), 2)
        stopping = time.monotonic()
        await agent.stop()
        assert time.monotonic() - stopping < 3
        release.set()
        release_later.cancel()
    assert not process_alive(pid)
    assert hook.ended == 1  # session_end is still dispatched, by the SDK


async def test_harness_killed_between_turns(make_agent: AgentFactory) -> None:
    agent, _ = make_agent(["one", "two"])
    async with agent:
        assert (await agent.chat("first")).text == "one"
        pid = harness_pid(agent)
        os.kill(pid, signal.SIGKILL)
        assert await wait_gone(pid)
        with pytest.raises(HarnessConnectionError, match="closed the connection"):
            await asyncio.wait_for(agent.chat("second"), 5)


# -- garbage on the wire -------------------------------------------------------------------


async def test_malformed_frame_raises_protocol_error_and_closes_the_harness(
    make_agent: AgentFactory,
) -> None:
    agent, conn = on_own_connection(make_agent, ["never seen"])
    async with agent:
        pid = harness_pid(agent)
        garble(conn, b'{"callHookRequest": {"requestId": "x", "type": "LIFECY')
        with pytest.raises(ProtocolError, match="not JSON"):
            await asyncio.wait_for(agent.chat("hello"), 5)
        # The real harness process is closed right away, not only at stop().
        assert await wait_gone(pid, 5), "the harness survived a protocol error"
        with pytest.raises(ProtocolError):
            await agent.chat("again")
        started = time.monotonic()
    assert time.monotonic() - started < 5
    assert not agent.started


async def test_frame_with_wrong_types_raises_protocol_error(make_agent: AgentFactory) -> None:
    agent, conn = on_own_connection(make_agent, ["never seen"])
    async with agent:
        pid = harness_pid(agent)
        garble(conn, b'{"trajectoryStateUpdate": ["not", "an", "object"]}')
        with pytest.raises(ProtocolError, match="trajectoryStateUpdate"):
            await asyncio.wait_for(agent.chat("hello"), 5)
        assert await wait_gone(pid, 5)


async def test_non_object_frame_raises_protocol_error(make_agent: AgentFactory) -> None:
    agent, conn = on_own_connection(make_agent, ["never seen"])
    async with agent:
        pid = harness_pid(agent)
        garble(conn, b'["a", "list"]')
        with pytest.raises(ProtocolError):
            await asyncio.wait_for(agent.chat("hello"), 5)
        assert await wait_gone(pid, 5)


# -- stop() is bounded ---------------------------------------------------------------------


async def test_stop_is_bounded_when_the_harness_ignores_session_end(
    make_agent: AgentFactory,
) -> None:
    hook = SessionEnd()
    conn = LocalConnection()
    agent, _ = make_agent(["hi"], hooks=[hook], configure=lambda b: b.connection(conn))
    await agent.start()
    pid = harness_pid(agent)
    assert (await agent.chat("hi")).text == "hi"
    real_send = conn.send
    dropped: list[dict[str, Any]] = []

    async def drop_session_end(frame: dict[str, Any]) -> None:
        if "sessionEndRequest" in frame:
            dropped.append(frame)
            return
        await real_send(frame)

    conn.send = drop_session_end
    started = time.monotonic()
    await agent.stop()
    elapsed = time.monotonic() - started
    assert dropped, "stop() did not ask the harness to end the session"
    assert elapsed <= 5.0, f"stop() took {elapsed:.2f}s"
    assert hook.ended == 1  # dispatched by the SDK when the harness never asked
    assert await wait_gone(pid)


async def test_stop_is_bounded_when_the_harness_is_frozen(make_agent: AgentFactory) -> None:
    """SIGSTOP: no session end, no reaction to stdin EOF or SIGTERM — only SIGKILL works."""
    agent, _ = make_agent(["hi"])
    await agent.start()
    pid = harness_pid(agent)
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        await agent.stop()
        elapsed = time.monotonic() - started
    finally:
        if process_alive(pid):
            os.kill(pid, signal.SIGKILL)
    assert elapsed <= 5.0, f"stop() took {elapsed:.2f}s"
    assert await wait_gone(pid)


# -- no harness outlives its agent ---------------------------------------------------------


async def test_no_process_left_after_normal_exit(make_agent: AgentFactory) -> None:
    agent, _ = make_agent(["hi"])
    async with agent:
        pid = harness_pid(agent)
        assert process_alive(pid)
        await agent.chat("hi")
    assert not process_alive(pid)  # stop() waited for the exit: gone at once
    assert await wait_gone(pid, 0.5)


async def test_no_process_left_after_exception_in_async_with(make_agent: AgentFactory) -> None:
    agent, _ = make_agent(["hi"])
    pid = 0
    with pytest.raises(ValueError, match="user code failed"):
        async with agent:
            pid = harness_pid(agent)
            await agent.chat("hi")
            raise ValueError("user code failed")
    assert pid and not process_alive(pid)
    assert not agent.started


async def test_no_process_left_after_cancelling_a_chat(make_agent: AgentFactory) -> None:
    model_called, release = asyncio.Event(), asyncio.Event()

    async def slow(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        model_called.set()
        await release.wait()
        return "too late"

    # The test owns the model, so the agent's teardown is timed without the model's.
    model = ScriptedModel(slow)
    await model.start()
    agent, _ = make_agent(model)
    pids: list[int] = []

    async def session() -> None:
        async with agent:
            pids.append(harness_pid(agent))
            await agent.chat("take your time")

    task = asyncio.create_task(session())
    await asyncio.wait_for(model_called.wait(), 10)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 5
    (pid,) = pids
    assert await wait_gone(pid)
    assert not agent.started
    release.set()
    await model.stop()


async def test_no_process_left_after_cancelling_a_chat_but_keeping_the_agent(
    make_agent: AgentFactory,
) -> None:
    """A cancelled chat halts the harness's turn; the agent stays usable."""
    release, called = asyncio.Event(), asyncio.Event()
    calls = 0

    async def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            called.set()
            await release.wait()
            return "abandoned"
        return "second turn works"

    agent, _ = make_agent(script)
    async with agent:
        pid = harness_pid(agent)
        chat = asyncio.create_task(agent.chat("first"))
        await asyncio.wait_for(called.wait(), 10)
        chat.cancel()
        with pytest.raises(asyncio.CancelledError):
            await chat
        release.set()
        response = await asyncio.wait_for(agent.chat("second"), 10)
        assert response.text == "second turn works"
    assert await wait_gone(pid)


async def test_garbage_collected_agent_kills_its_harness(make_agent: AgentFactory) -> None:
    builder, model = make_agent.builder(["hi"])  # not tracked: the factory must not hold it
    agent: Agent | None = builder.build()
    assert agent is not None
    await agent.start()
    pid = harness_pid(agent)
    assert (await agent.chat("hi")).text == "hi"
    make_agent.pids.append(pid)
    del agent
    gc.collect()
    assert await wait_gone(pid, 5), "the harness outlived its garbage-collected agent"
    for _ in range(100):  # the cleanup also stops the model the agent started
        if not model.started:
            break
        await asyncio.sleep(0.05)
    assert not model.started


async def test_rejected_config_fails_start_with_stderr_and_leaves_no_process(
    make_agent: AgentFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The harness rejects an invalid config by dropping the socket and lingering (FINDINGS
    §1); start() must fail fast with the harness's reason and kill the process."""
    from antigravity_sdk.harness import config

    real_config = config.harness_config

    def invalid_config(**kwargs: Any) -> dict[str, Any]:
        frame = real_config(**kwargs)
        frame["config"]["policyConfig"] = {
            "rules": [
                {
                    "tool": "run_command",
                    "name": "confirm_rc",
                    "decision": "POLICY_DECISION_ASK_USER",
                }
            ]
        }
        return frame

    from antigravity_sdk.harness import connection

    pids: list[int] = []
    real_open = connection.LocalConnection.open

    async def spy_open(self: Any, **kwargs: Any) -> None:
        await real_open(self, **kwargs)
        pids.append(self.pid)

    monkeypatch.setattr(config, "harness_config", invalid_config)
    monkeypatch.setattr(connection.LocalConnection, "open", spy_open)
    agent, _ = make_agent(["unused"])
    started = time.monotonic()
    with pytest.raises(HarnessConnectionError) as info:
        await agent.start()
    assert time.monotonic() - started < 10
    assert "ASK_USER requires is_dynamic=true" in info.value.stderr_tail
    assert not agent.started
    assert agent._session.conn is None  # private on purpose: see test_missing_harness_binary
    (pid,) = pids
    assert not process_alive(pid)  # it lingers on its own; start() killed it
