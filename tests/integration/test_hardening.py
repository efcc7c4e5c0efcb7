"""Attacks and edge cases found in review, each against the real harness.

The harness reads tool arguments case-insensitively (Go's encoding/json), answers to hook
requests it has dropped end its session, and it waits for hook answers forever; each test
here pins down how the SDK keeps those properties from turning into fail-open paths.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from antigravity_sdk import (
    AntigravityError,
    Hook,
    HookResult,
    ToolCall,
    policy,
)
from antigravity_sdk.testing import text, tool_call
from antigravity_sdk.timeouts import (
    Timeouts,
)

from .conftest import AgentFactory, Workspace, tool_messages


async def test_a_case_variant_key_cannot_smuggle_a_path_past_workspace_only(
    make_agent: AgentFactory, env: Workspace
) -> None:
    inside = env.ws / "a.txt"
    inside.write_text("inside\n")
    smuggled = {"AbsolutePath": str(inside), "absolutePath": "/etc/hostname"}
    agent, model = make_agent(
        [tool_call("view_file", **smuggled), "done"],
        policies=[policy.workspace_only([env.ws]), policy.allow_all()],
    )
    async with agent:
        await agent.chat("read it")
    (result,) = tool_messages(model, 1)
    assert "differ only in case" in result
    assert "/etc/hostname" not in result.replace("'absolutePath'", "")


async def test_a_lowercase_key_is_checked_under_its_canonical_name(
    make_agent: AgentFactory, env: Workspace
) -> None:
    # A predicate written against `CommandLine` must see a model's `commandline`.
    marker = env.ws / "marker"
    agent, model = make_agent(
        [tool_call("run_command", commandline=f"touch {marker}", cwd=str(env.ws)), "done"],
        policies=[
            policy.deny("run_command", when=lambda a: "touch" in a.get("CommandLine", "")),
            policy.allow_all(),
        ],
    )
    async with agent:
        await agent.chat("touch it")
    assert not marker.exists()
    assert "denied by pre-tool hook" in tool_messages(model, 1)[0]


class SlowHook(Hook):
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        await asyncio.sleep(self.seconds)
        return HookResult.allowed()


async def test_a_turn_timeout_with_a_hook_still_running_leaves_the_session_usable(
    make_agent: AgentFactory, env: Workspace
) -> None:
    marker = env.ws / "marker"
    hook = SlowHook(3.0)
    script = [
        tool_call("run_command", CommandLine=f"touch {marker}", Cwd=str(env.ws)),
        "first done",
        "second done",
    ]
    agent, _ = make_agent(script, hooks=[hook], policies=[policy.allow_all()], turn_timeout=1)
    async with agent:
        with pytest.raises(TimeoutError):
            await agent.chat("slow")
        hook.seconds = 0
        await asyncio.sleep(3.5)  # past the moment the hook would have answered ALLOW
        response = await agent.chat("again")
    assert not marker.exists()  # the abandoned call was answered DENY, never ALLOW
    assert response.text in ("first done", "second done")


async def test_stop_during_a_chat_ends_the_chat_at_once(make_agent: AgentFactory) -> None:
    release = asyncio.Event()

    async def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        await release.wait()
        return text("late")

    agent, _ = make_agent(script, policies=[policy.allow_all()], turn_timeout=60)
    await agent.start()
    chat = asyncio.create_task(agent.chat("wait"))
    await asyncio.sleep(0.5)
    began = time.monotonic()
    await agent.stop()
    with pytest.raises(AntigravityError):
        await asyncio.wait_for(chat, 5)
    assert time.monotonic() - began < 6
    release.set()


class Lifecycle(Hook):
    def __init__(self, end_seconds: float = 0) -> None:
        self.end_seconds = end_seconds
        self.events: list[str] = []

    async def on_session_start(self) -> None:
        self.events.append("start")

    async def on_session_end(self) -> None:
        await asyncio.sleep(self.end_seconds)
        self.events.append("end")


async def test_a_slow_on_session_end_hook_runs_to_completion(make_agent: AgentFactory) -> None:
    hook = Lifecycle(end_seconds=3.0)
    agent, _ = make_agent(hooks=[hook], policies=[policy.allow_all()])
    async with agent:
        pass
    assert hook.events == ["start", "end"]


async def test_an_agent_can_be_started_again_after_stop(make_agent: AgentFactory) -> None:
    hook = Lifecycle()
    agent, _ = make_agent(["one", "two"], hooks=[hook], policies=[policy.allow_all()])
    async with agent:
        first = agent.conversation_id
        assert (await agent.chat("1")).text == "one"
    async with agent:
        assert agent.conversation_id and agent.conversation_id != first
        assert agent.turn_count == 0
        assert (await agent.chat("2")).text == "two"
    assert hook.events == ["start", "end", "start", "end"]


class HangingSessionHooks(Hook):
    async def on_session_start(self) -> None:
        await asyncio.Event().wait()

    async def on_session_end(self) -> None:
        await asyncio.Event().wait()


async def test_hanging_session_hooks_do_not_hang_start_or_stop(make_agent: AgentFactory) -> None:
    agent, _ = make_agent(
        ["still works"],
        hooks=[HangingSessionHooks()],
        configure=lambda b: b.timeouts(Timeouts(session_hooks=0.5, turn=30)),
    )
    async with asyncio.timeout(8):  # without the bound, start() would never return
        async with agent:
            assert (await agent.chat("hi")).text == "still works"
