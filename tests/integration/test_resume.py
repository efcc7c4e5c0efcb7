"""Resuming a saved conversation (`AgentBuilder.resume`), against the real harness."""

from __future__ import annotations

import os
from typing import Any

import pytest

from antigravity_sdk import (
    ConversationNotFoundError,
    Hook,
    HookResult,
    Step,
    ToolCall,
    list_conversations,
    policy,
)
from antigravity_sdk.testing import ScriptedModel, tool_call

from .conftest import AgentFactory, Workspace, process_alive, tool_messages
from .test_examples import load_example

UNSAVED = "0123456789abcdef0123456789abcdef"


def lookup(key: str) -> str:
    """Look a key up."""
    return f"value-of-{key}"


def _texts(model: ScriptedModel, request: int) -> list[tuple[str, str]]:
    return [(m["role"], str(m.get("content") or "")) for m in model.requests[request].messages]


def _children() -> set[int]:
    """The live processes whose parent is this test process."""
    found = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and process_alive(int(name)):
            found.add(int(name))
    return found


async def _first_conversation(make_agent: AgentFactory) -> str:
    script = [tool_call("lookup", key="colour"), "the colour is value-of-colour"]
    first, _ = make_agent(script, tools=[lookup], policies=[policy.allow_all()])
    async with first:
        await first.chat("what is the colour?")
    return first.conversation_id


async def test_a_second_agent_continues_the_conversation(make_agent: AgentFactory) -> None:
    conversation = await _first_conversation(make_agent)
    second, model = make_agent(
        ["it was value-of-colour"],
        tools=[lookup],
        policies=[policy.allow_all()],
        configure=lambda b: b.resume(conversation),
    )
    async with second:
        assert second.conversation_id == conversation
        earlier = list(second.history)
        response = await second.chat("what did you find?")
    # The model's next request carries the earlier exchange, tool result included.
    sent = _texts(model, 0)
    users = [text for role, text in sent if role == "user"]
    assert "what is the colour?" in users[0] and "what did you find?" in users[-1]
    assert ("assistant", "the colour is value-of-colour") in sent
    assert any(role == "tool" and "value-of-colour" in text for role, text in sent)
    # agent.history: the earlier steps as typed Steps, then this turn's.
    assert all(isinstance(step, Step) for step in earlier)
    kinds = [(s.kind, s.text) for s in earlier if s.kind in ("user", "text")]
    assert kinds == [("user", "what is the colour?"), ("text", "the colour is value-of-colour")]
    calls = [s for s in earlier if s.kind == "tool_call"]
    assert len(calls) == 1 and calls[0].tool_call is not None
    assert calls[0].tool_call.name == "lookup" and calls[0].tool_call.args == {"key": "colour"}
    assert "value-of-colour" in (calls[0].output or "")
    assert {s.trajectory_id for s in earlier} == {conversation}
    assert second.history == earlier + response.steps
    assert response.text == "it was value-of-colour"


async def test_an_unsaved_conversation_is_a_clear_error_before_anything_runs(
    make_agent: AgentFactory, env: Workspace
) -> None:
    await _first_conversation(make_agent)  # the save dir exists and holds another one
    before = _children()
    agent, model = make_agent(configure=lambda b: b.resume(UNSAVED))
    with pytest.raises(ConversationNotFoundError, match=UNSAVED) as raised:
        await agent.start()
    assert "list_conversations" in str(raised.value) and str(env.save) in str(raised.value)
    assert raised.value.__cause__ is None  # found out before any harness was asked
    assert not agent.started and agent.harness_pid is None and not model.started
    assert _children() == before
    assert not (env.save / f"{UNSAVED}.db").exists()


async def test_the_harness_refusal_is_the_same_clear_error(
    make_agent: AgentFactory, env: Workspace
) -> None:
    """Saved when checked, gone when the harness looks (or a harness whose save dir the
    SDK cannot see): the harness exits, and the error still names the conversation."""
    env.save.mkdir(parents=True)
    before = _children()
    agent, model = make_agent(configure=lambda b: b.resume(UNSAVED))
    agent._check_resumable = lambda save_dir: None  # type: ignore[method-assign]
    with pytest.raises(ConversationNotFoundError, match=UNSAVED) as raised:
        await agent.start()
    assert "cannot resume" in str(raised.value.__cause__)
    assert not agent.started and agent.harness_pid is None and not model.started
    assert _children() == before


async def test_create_starts_a_conversation_under_the_id_then_resumes_it(
    make_agent: AgentFactory, env: Workspace
) -> None:
    first, _ = make_agent(["first answer"], configure=lambda b: b.resume(UNSAVED, create=True))
    async with first:
        assert first.conversation_id == UNSAVED and first.history == []
        await first.chat("first question")
    assert (env.save / f"{UNSAVED}.db").is_file()
    again, _ = make_agent(["second answer"], configure=lambda b: b.resume(UNSAVED, create=True))
    async with again:
        assert [s.text for s in again.history] == ["first question", "first answer"]


async def test_the_resumed_agents_policies_govern(make_agent: AgentFactory, env: Workspace) -> None:
    """Nothing of the first agent's governance carries over: its allow does not, its hooks
    are not asked; the new agent's policy denies the same tool."""

    def write(name: str) -> Any:
        return tool_call(
            "write_to_file", TargetFile=str(env.ws / name), CodeContent="x\n", Overwrite=False
        )

    first, _ = make_agent([write("one"), "wrote one"], policies=[policy.allow_all()])
    async with first:
        await first.chat("write one")
    assert (env.ws / "one").exists()

    class Seen(Hook):
        def __init__(self) -> None:
            self.calls: list[ToolCall] = []

        async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
            self.calls.append(tool_call)
            return HookResult.allowed()

    seen = Seen()
    rules = [policy.deny("write_to_file", reason="no writing here"), policy.allow_all()]
    second, model = make_agent(
        [write("two"), "could not"],
        hooks=[seen],
        policies=rules,
        configure=lambda b: b.resume(first.conversation_id),
    )
    async with second:
        await second.chat("write two")
    assert not (env.ws / "two").exists()
    assert [call.name for call in seen.calls] == ["write_to_file"]
    assert any("no writing here" in text for text in tool_messages(model, 1))


async def test_a_resumed_turn_reports_its_own_usage(make_agent: AgentFactory) -> None:
    fresh, _ = make_agent(["same words"])
    async with fresh:
        alone = await fresh.chat("hello")
    resumed, _ = make_agent(["same words"], configure=lambda b: b.resume(fresh.conversation_id))
    async with resumed:
        later = await resumed.chat("hello again")
    assert alone.usage is not None and later.usage is not None
    assert later.usage.candidates_token_count == alone.usage.candidates_token_count


async def test_saved_conversations_are_listed(make_agent: AgentFactory, env: Workspace) -> None:
    assert list_conversations(env.save) == []
    older = await _first_conversation(make_agent)
    newer = await _first_conversation(make_agent)
    os.utime(env.save / f"{older}.db", (1, 1))  # same second otherwise
    listed = list_conversations(env.save)
    assert [info.id for info in listed] == [newer, older]
    assert all(info.size > 0 and info.path.parent == env.save for info in listed)
    assert listed[1].modified.timestamp() == 1


async def test_resume_example_runs() -> None:
    assert await load_example("resume_conversation").main() == 0


async def test_after_a_model_error_ends_the_session_resume_continues(
    make_agent: AgentFactory,
) -> None:
    from antigravity_sdk import HarnessConnectionError, TurnFailedError
    from antigravity_sdk.testing import http_error

    first, _ = make_agent([http_error(500)], policies=[policy.allow_all()])
    async with first:
        with pytest.raises(TurnFailedError, match="status 500"):
            await first.chat("one")
        # The harness ends its session after a model error; the error says how to go on.
        with pytest.raises(HarnessConnectionError) as ended:
            for _ in range(50):  # the close may trail the failed turn by a moment
                await first.chat("two")
        notes = "\n".join(getattr(ended.value, "__notes__", []))
        assert f".resume({first.conversation_id!r})" in notes
    second, model = make_agent(
        ["back again"],
        policies=[policy.allow_all()],
        configure=lambda b: b.resume(first.conversation_id),
    )
    async with second:
        response = await second.chat("three")
    assert response.text == "back again"
    users = [text for role, text in _texts(model, 0) if role == "user"]
    assert "one" in users[0] and "three" in users[-1]
