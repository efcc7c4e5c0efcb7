"""Every hook, through the REAL harness, offline (ScriptedModel plays the model).

Each test drives a scripted session and asserts on three independent witnesses: what the
hooks saw, what the model was shown next (`ScriptedModel.requests`), and the file system.

All nine hooks can be triggered offline against harness 0.1.22, including
`on_interaction` (ask_question in interactive mode) and `on_compaction` (a 14k-token
compaction threshold with ~1.2k-token messages compacts on the third turn, in well
under a second).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from antigravity_sdk import (
    ChatResponse,
    Hook,
    HookResult,
    ToolCall,
    ToolResult,
    TurnDeniedError,
    current_context,
    policy,
)
from antigravity_sdk.errors import ToolExecutionError
from antigravity_sdk.testing import ToolCallSpec, tool_call, tool_calls
from antigravity_sdk.types import (
    AskQuestionEntry,
    BuiltinTool,
    CapabilitiesConfig,
    QuestionHookResult,
    QuestionResponse,
)

from .conftest import AgentFactory, Workspace, tool_messages


def _command_args(ws: Path, command: str) -> dict[str, Any]:
    return {"CommandLine": command, "Cwd": str(ws), "WaitMsBeforeAsync": 5000}


def run_command(ws: Path, command: str) -> Any:
    return tool_call("run_command", **_command_args(ws, command))


class Recorder(Hook):
    """Records every event (name, argument) and what current_context() showed."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self.contexts: dict[str, Any] = {}

    def names(self) -> list[str]:
        return [name for name, _ in self.events]

    def args(self, event: str) -> list[Any]:
        return [arg for name, arg in self.events if name == event]

    async def on_session_start(self) -> None:
        self.events.append(("on_session_start", None))

    async def on_session_end(self) -> None:
        self.events.append(("on_session_end", None))

    async def pre_turn(self) -> HookResult:
        ctx = current_context()
        self.contexts.setdefault("pre_turn", []).append(ctx)
        self.events.append(("pre_turn", ctx.get("prompt")))
        return HookResult()

    async def post_turn(self, response: ChatResponse) -> None:
        ctx = current_context()
        self.contexts.setdefault("post_turn", []).append(ctx)
        self.events.append(("post_turn", response))

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        ctx = current_context()
        ctx.set("seen_in_pre", tool_call.id)
        self.contexts.setdefault("pre_tool", []).append(ctx)
        self.events.append(("pre_tool_call", tool_call))
        return HookResult()

    async def post_tool_call(self, result: ToolResult) -> None:
        ctx = current_context()
        self.contexts.setdefault("post_tool", []).append((result.id, ctx.get("seen_in_pre"), ctx))
        self.events.append(("post_tool_call", result))

    async def on_tool_error(self, error: Exception) -> tuple[HookResult, Any | None]:
        ctx = current_context()
        self.contexts.setdefault("tool_error", []).append(ctx.get("seen_in_pre"))
        self.events.append(("on_tool_error", error))
        return HookResult(allow=False, message=str(error)), None


# -- session and turn ----------------------------------------------------------------------


async def test_session_and_turn_hooks_fire_in_order(make_agent: AgentFactory) -> None:
    rec = Recorder()
    agent, model = make_agent(["Hello from the scripted model!"], hooks=[rec])
    async with agent:
        assert rec.names() == ["on_session_start"]  # dispatched once the session is up
        response = await agent.chat("Say hello")
        assert rec.names() == ["on_session_start", "pre_turn", "post_turn"]
    assert rec.names() == ["on_session_start", "pre_turn", "post_turn", "on_session_end"]

    assert response.text == "Hello from the scripted model!"
    (seen,) = rec.args("post_turn")
    assert isinstance(seen, ChatResponse)
    assert seen.text == "Hello from the scripted model!"
    assert rec.args("pre_turn") == ["Say hello"]
    # The turn context holds the prompt in pre_turn and post_turn, and is one context.
    (pre_ctx,) = rec.contexts["pre_turn"]
    (post_ctx,) = rec.contexts["post_turn"]
    assert pre_ctx is post_ctx
    assert post_ctx.get("prompt") == "Say hello"
    assert post_ctx.has_parent()
    assert len(model.requests) == 1
    assert "Say hello" in model.requests[0].text


async def test_multi_turn_history_and_turn_count(make_agent: AgentFactory) -> None:
    rec = Recorder()
    agent, model = make_agent(["one", "two", "three"], hooks=[rec])
    async with agent:
        texts = [(await agent.chat(p)).text for p in ("first", "second", "third")]
        assert agent.turn_count == 3
        assert agent.conversation_id
    assert texts == ["one", "two", "three"]
    assert rec.names().count("on_session_start") == 1
    assert rec.names().count("on_session_end") == 1
    assert rec.args("pre_turn") == ["first", "second", "third"]
    assert [r.text for r in rec.args("post_turn")] == ["one", "two", "three"]
    users = [s.text for s in agent.history if s.kind == "user"]
    assert users == ["first", "second", "third"]
    assert [s.text for s in agent.history if s.kind == "text"] == ["one", "two", "three"]
    # The harness carries the conversation: turn 3's request shows turns 1 and 2.
    last = model.requests[2]
    roles = [m["role"] for m in last.messages if m["role"] != "system"]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    assert "first" in last.text and "one" in last.text and "two" in last.text


# -- built-in tools ------------------------------------------------------------------------


async def test_tool_hooks_fire_for_builtin_tools(make_agent: AgentFactory, env: Workspace) -> None:
    rec = Recorder()
    readme = env.ws / "README.md"
    readme.write_text("read me please\n")
    target = env.ws / "out" / "hello.txt"
    script = [
        run_command(env.ws, "echo hi > ran.txt; echo hi"),
        tool_call("view_file", AbsolutePath=str(readme)),
        tool_call(
            "write_to_file", TargetFile=str(target), CodeContent="hello world\n", Overwrite=False
        ),
        "all done",
    ]
    agent, model = make_agent(script, hooks=[rec], policies=[policy.allow_all()])
    async with agent:
        response = await agent.chat("use the tools")
    assert response.text == "all done"

    pre = rec.args("pre_tool_call")
    post = rec.args("post_tool_call")
    # Model-facing names, never the harness's internal ones (create_file).
    assert [c.name for c in pre] == ["run_command", "view_file", "write_to_file"]
    assert [r.name for r in post] == ["run_command", "view_file", "write_to_file"]
    assert pre[0].args == {
        "CommandLine": "echo hi > ran.txt; echo hi",
        "Cwd": str(env.ws),
        "WaitMsBeforeAsync": 5000,
    }
    assert pre[1].args["AbsolutePath"] == str(readme)
    assert pre[2].args["TargetFile"] == str(target)
    assert pre[2].args["CodeContent"] == "hello world\n"
    assert pre[2].args["Overwrite"] is False
    # The hook's call id is the model's tool-call id, and post matches pre.
    model_ids = [m["tool_call_id"] for m in model.requests[3].tool_results]
    assert [c.id for c in pre] == model_ids
    assert [r.id for r in post] == model_ids
    assert all(c.trajectory_id == agent.conversation_id for c in pre)
    assert isinstance(post[0].result, dict)
    assert post[0].result["exit_code"] == 0
    assert "hi" in post[0].result["combined_output"]
    assert not rec.args("on_tool_error")

    # The tools really ran.
    assert (env.ws / "ran.txt").read_text().strip() == "hi"
    assert target.read_text() == "hello world\n"
    assert "read me please" in tool_messages(model, 2)[1]
    # Ordering: each tool's pre comes before its post.
    tool_events = [(n, a.name) for n, a in rec.events if n.endswith("tool_call")]
    assert tool_events == [
        ("pre_tool_call", "run_command"),
        ("post_tool_call", "run_command"),
        ("pre_tool_call", "view_file"),
        ("post_tool_call", "view_file"),
        ("pre_tool_call", "write_to_file"),
        ("post_tool_call", "write_to_file"),
    ]
    # Steps of the turn describe the tool calls too.
    calls = [s.tool_call for s in response.steps if s.kind == "tool_call" and s.tool_call]
    assert [c.name for c in calls] == ["run_command", "view_file", "write_to_file"]
    assert calls[0].args["CommandLine"] == "echo hi > ran.txt; echo hi"
    # write_to_file's step is an `editFile` action on the wire (FINDINGS §4); the step
    # still names the call the model made, with all its arguments.
    assert calls[2].args["TargetFile"] == str(target)
    assert "CodeContent" in calls[2].args
    assert [s.kind for s in response.steps] == ["user", *["tool_call"] * 3, "text"]


async def test_pre_and_post_share_one_operation_context(
    make_agent: AgentFactory, env: Workspace
) -> None:
    rec = Recorder()
    script = [run_command(env.ws, "true"), run_command(env.ws, "true"), "done"]
    agent, _ = make_agent(script, hooks=[rec], policies=[policy.allow_all()])
    async with agent:
        await agent.chat("twice")
    pre_ctxs = rec.contexts["pre_tool"]
    posts = rec.contexts["post_tool"]
    assert len(pre_ctxs) == len(posts) == 2
    for pre_ctx, (call_id, seen_in_pre, post_ctx) in zip(pre_ctxs, posts, strict=True):
        assert post_ctx is pre_ctx  # the same operation context...
        assert seen_in_pre == call_id  # ...so post reads what pre set for this call
        assert post_ctx.get("prompt") == "twice"  # an operation sees its turn
    assert pre_ctxs[0] is not pre_ctxs[1]  # one context per call
    # A parent never sees a child's keys: the turn context has no "seen_in_pre".
    assert rec.contexts["pre_tool"][0].parent.get("seen_in_pre") is None


# -- tool errors ---------------------------------------------------------------------------


class Recovering(Hook):
    def __init__(self, value: Any) -> None:
        self.errors: list[Exception] = []
        self.value = value

    async def on_tool_error(self, error: Exception) -> tuple[HookResult, Any | None]:
        self.errors.append(error)
        return HookResult(allow=True), self.value


async def test_on_tool_error_fires_and_recovery_reaches_the_model(
    make_agent: AgentFactory, env: Workspace
) -> None:
    hook = Recovering("CUSTOM: the file is gone, try README.md")
    missing = env.ws / "missing.txt"
    script = [tool_call("view_file", AbsolutePath=str(missing)), "ok"]
    agent, model = make_agent(script, hooks=[hook], policies=[policy.allow_all()])
    async with agent:
        assert (await agent.chat("look")).text == "ok"
    (error,) = hook.errors
    assert isinstance(error, ToolExecutionError)
    assert error.tool_call.name == "view_file"
    assert error.tool_call.args == {"AbsolutePath": str(missing)}  # remembered from pre
    assert "does not exist" in str(error)
    (message,) = tool_messages(model, 1)
    assert "CUSTOM: the file is gone, try README.md" in message
    assert "does not exist" not in message  # the recovery replaced the error


async def test_on_tool_error_without_recovery_keeps_the_harness_error(
    make_agent: AgentFactory, env: Workspace
) -> None:
    rec = Recorder()
    script = [tool_call("view_file", AbsolutePath=str(env.ws / "nope.txt")), "ok"]
    agent, model = make_agent(script, hooks=[rec], policies=[policy.allow_all()])
    async with agent:
        await agent.chat("look")
    (error,) = rec.args("on_tool_error")
    assert isinstance(error, ToolExecutionError)
    assert not rec.args("post_tool_call")  # a failed call has no post_tool_call
    # on_tool_error runs in the call's operation context (what pre set is visible).
    assert rec.contexts["tool_error"] == [error.tool_call.id]
    (message,) = tool_messages(model, 1)
    assert "does not exist" in message


# -- decisions -----------------------------------------------------------------------------


async def test_policy_denial_stops_a_builtin_tool(make_agent: AgentFactory, env: Workspace) -> None:
    rec = Recorder()
    script = [run_command(env.ws, "touch marker"), "understood"]
    policies = [
        policy.deny("run_command", when=lambda a: "touch" in a["CommandLine"], name="no-touch"),
        policy.allow_all(),
    ]
    agent, model = make_agent(script, hooks=[rec], policies=policies)
    async with agent:
        response = await agent.chat("touch it")
    assert response.text == "understood"
    assert not (env.ws / "marker").exists()  # the command never ran
    (message,) = tool_messages(model, 1)
    assert "denied by pre-tool hook: " in message
    assert "no-touch" in message
    assert [c.name for c in rec.args("pre_tool_call")] == ["run_command"]  # user hook first
    assert not rec.args("post_tool_call")
    # The denied call is a `denied` step: the call, and the reason naming the rule.
    (denied,) = [s for s in response.steps if s.kind == "denied"]
    assert denied.tool_call is not None and denied.tool_call.name == "run_command"
    assert denied.tool_call.args["CommandLine"] == "touch marker"
    assert "no-touch" in denied.error
    assert [s.kind for s in response.steps].count("error") == 0


async def test_denied_steps_name_each_call_and_its_rule(
    make_agent: AgentFactory, env: Workspace
) -> None:
    """Two calls in one reply, each denied by its own rule (one by a hook), and a third
    refused by the SDK: each step names its call and the reason."""

    class NoCat(Hook):
        async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
            if "cat" in str(tool_call.args.get("CommandLine", "")):
                return HookResult.denied("NoCat: no cat")
            return HookResult.allowed()

    script = [
        tool_calls(
            ToolCallSpec("run_command", _command_args(env.ws, "touch a")),
            ToolCallSpec("run_command", _command_args(env.ws, "cat b")),
        ),
        tool_call("view_file", AbsolutePath=str(env.ws / "x"), absolutepath="/etc/passwd"),
        "done",
    ]
    policies = [
        policy.deny("run_command", when=lambda a: "touch" in a["CommandLine"], name="no-touch"),
        policy.allow_all(),
    ]
    agent, _ = make_agent(script, hooks=[NoCat()], policies=policies)
    async with agent:
        response = await agent.chat("go")
    denied = [s for s in response.steps if s.kind == "denied"]
    assert [(s.tool_call.args.get("CommandLine") if s.tool_call else None) for s in denied] == [
        "touch a",
        "cat b",
        None,
    ]
    assert "no-touch" in denied[0].error and denied[1].error == "NoCat: no cat"
    assert denied[2].tool_call is not None and denied[2].tool_call.name == "view_file"
    assert denied[2].error.startswith("refused:")


async def test_default_policies_deny_run_command_and_allow_the_rest(
    make_agent: AgentFactory, env: Workspace
) -> None:
    notes = env.ws / "notes.txt"
    notes.write_text("visible content\n")
    script = [
        run_command(env.ws, "touch marker"),
        tool_call("view_file", AbsolutePath=str(notes)),
        "done",
    ]
    agent, model = make_agent(script)  # no policies: confirm_run_command() without handler
    async with agent:
        assert (await agent.chat("go")).text == "done"
    assert not (env.ws / "marker").exists()
    denied = tool_messages(model, 1)[0]
    assert "denied by pre-tool hook: " in denied
    assert "confirm_run_command" in denied
    assert "visible content" in tool_messages(model, 2)[1]


class Raising(Hook):
    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        raise RuntimeError("policy backend exploded")


async def test_raising_pre_tool_hook_denies_fail_closed(
    make_agent: AgentFactory, env: Workspace
) -> None:
    script = [run_command(env.ws, "touch marker"), "ok"]
    agent, model = make_agent(script, hooks=[Raising()], policies=[policy.allow_all()])
    async with agent:
        assert (await agent.chat("go")).text == "ok"
    assert not (env.ws / "marker").exists()
    (message,) = tool_messages(model, 1)
    assert "denied by pre-tool hook: " in message
    assert "policy backend exploded" in message


class Hanging(Hook):
    def __init__(self) -> None:
        self.cancelled = False

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return HookResult()


async def test_hanging_hook_times_out_and_denies(make_agent: AgentFactory, env: Workspace) -> None:
    hook = Hanging()
    script = [run_command(env.ws, "touch marker"), "finished anyway"]
    agent, model = make_agent(script, hooks=[hook], policies=[policy.allow_all()], hook_timeout=0.2)
    async with agent:
        started = time.monotonic()
        response = await agent.chat("go")
        elapsed = time.monotonic() - started
    assert response.text == "finished anyway"
    assert elapsed < 5
    assert hook.cancelled
    assert not (env.ws / "marker").exists()
    (message,) = tool_messages(model, 1)
    assert "denied by pre-tool hook: " in message
    assert "timed out" in message


class TurnGate(Hook):
    def __init__(self) -> None:
        self.deny: str | None = "no turns today"

    async def pre_turn(self) -> HookResult:
        if self.deny is not None:
            return HookResult.denied(self.deny)
        return HookResult()


async def test_pre_turn_denial_raises_and_never_calls_the_model(
    make_agent: AgentFactory,
) -> None:
    gate = TurnGate()
    rec = Recorder()
    agent, model = make_agent(["second answer"], hooks=[gate, rec])
    async with agent:
        with pytest.raises(TurnDeniedError) as info:
            await agent.chat("forbidden prompt")
        assert str(info.value) == "no turns today"
        assert info.value.result.allow is False
        assert len(model.requests) == 0
        assert agent.turn_count == 0
        assert "post_turn" not in rec.names()
        # The session stays usable.
        gate.deny = None
        response = await agent.chat("allowed prompt")
        assert response.text == "second answer"
        assert agent.turn_count == 1
    assert len(model.requests) == 1
    assert "allowed prompt" in model.requests[0].text
    assert "forbidden prompt" not in model.requests[0].text  # not in the history either


# -- host-side tools -----------------------------------------------------------------------


async def test_host_tool_runs_and_its_result_reaches_the_model(make_agent: AgentFactory) -> None:
    calls: list[str] = []

    def get_weather(city: str) -> dict[str, Any]:
        """Current weather for a city."""
        calls.append(city)
        return {"temp_c": 21, "city": city}

    rec = Recorder()
    script = [tool_call("get_weather", city="Paris"), "It is 21 C in Paris."]
    agent, model = make_agent(
        script, hooks=[rec], tools=[get_weather], policies=[policy.allow_all()]
    )
    async with agent:
        response = await agent.chat("weather?")
    assert response.text == "It is 21 C in Paris."
    assert calls == ["Paris"]
    assert "get_weather" in model.requests[0].tool_names
    (message,) = tool_messages(model, 1)
    assert '"temp_c": 21' in message
    (pre,) = rec.args("pre_tool_call")
    assert (pre.name, pre.args) == ("get_weather", {"city": "Paris"})
    (post,) = rec.args("post_tool_call")
    assert post.name == "get_weather"
    assert post.result == {"temp_c": 21, "city": "Paris"}


async def test_policies_govern_host_tools(make_agent: AgentFactory) -> None:
    calls: list[str] = []

    def get_weather(city: str) -> dict[str, Any]:
        """Current weather for a city."""
        calls.append(city)
        return {"temp_c": 21}

    script = [tool_call("get_weather", city="Paris"), "no weather then"]
    policies = [policy.deny("get_weather", name="no-weather"), policy.allow_all()]
    agent, model = make_agent(script, tools=[get_weather], policies=policies)
    async with agent:
        assert (await agent.chat("weather?")).text == "no weather then"
    assert calls == []
    (message,) = tool_messages(model, 1)
    assert "denied by pre-tool hook: " in message
    assert "no-weather" in message


async def test_host_tool_failure_reaches_on_tool_error(make_agent: AgentFactory) -> None:
    def flaky(x: int) -> int:
        """Always fails."""
        raise ValueError("service down")

    hook = Recovering({"fallback": 42})
    script = [tool_call("flaky", x=1), "recovered"]
    agent, model = make_agent(script, hooks=[hook], tools=[flaky], policies=[policy.allow_all()])
    async with agent:
        assert (await agent.chat("go")).text == "recovered"
    (error,) = hook.errors
    assert isinstance(error, ToolExecutionError)
    assert error.tool_call.name == "flaky"
    assert "service down" in str(error)
    (message,) = tool_messages(model, 1)
    assert '"fallback": 42' in message


# -- streaming -----------------------------------------------------------------------------


async def test_stream_yields_text_and_tool_call_chunks(
    make_agent: AgentFactory, env: Workspace
) -> None:
    rec = Recorder()
    script = [run_command(env.ws, "echo streamed"), "a streamed final answer"]
    agent, _ = make_agent(script, hooks=[rec], policies=[policy.allow_all()])
    async with agent:
        chunks = [chunk async for chunk in agent.stream("stream it")]
        assert agent.turn_count == 1
    kinds = [c.type for c in chunks]
    assert "tool_call" in kinds and "text" in kinds
    first_tool = kinds.index("tool_call")
    assert first_tool < len(kinds) - 1 - kinds[::-1].index("text")  # tool before the answer
    (tool_chunk,) = [c for c in chunks if c.type == "tool_call"]
    assert tool_chunk.tool_call is not None
    assert tool_chunk.tool_call.name == "run_command"
    assert tool_chunk.tool_call.args["CommandLine"] == "echo streamed"
    text = "".join(c.text for c in chunks if c.type == "text")
    assert text == "a streamed final answer"
    assert [r.text for r in rec.args("post_turn")] == ["a streamed final answer"]


# -- questions -----------------------------------------------------------------------------


ASK = tool_call(
    "ask_question",
    toolSummary="Q",
    toolAction="Asking",
    questions=[
        {"question": "Favourite colour?", "options": ["red", "blue"], "is_multi_select": False}
    ],
)
QUESTIONS = CapabilitiesConfig(
    enabled_tools=frozenset({BuiltinTool.ASK_QUESTION, BuiltinTool.VIEW_FILE})
)


class Answering(Hook):
    def __init__(self, answer: QuestionHookResult | None) -> None:
        self.answer = answer
        self.asked: list[Sequence[AskQuestionEntry]] = []

    async def on_interaction(
        self, questions: Sequence[AskQuestionEntry]
    ) -> QuestionHookResult | None:
        self.asked.append(questions)
        return self.answer


async def test_on_interaction_answers_reach_the_model(make_agent: AgentFactory) -> None:
    blue = QuestionHookResult(responses=[QuestionResponse(selected_option_ids=["1"])])
    hook = Answering(blue)
    agent, model = make_agent(
        [ASK, "blue it is"], hooks=[hook], capabilities=QUESTIONS, policies=[policy.allow_all()]
    )
    async with agent:
        assert (await agent.chat("ask me")).text == "blue it is"
    (questions,) = hook.asked
    (entry,) = questions
    assert entry.question == "Favourite colour?"
    assert [o.text for o in entry.options] == ["red", "blue"]
    assert entry.is_multi_select is False
    assert "ask_question" in model.requests[0].tool_names
    (message,) = tool_messages(model, 1)
    assert "A1: blue" in message


async def test_on_interaction_none_cancels_the_questions(make_agent: AgentFactory) -> None:
    hook = Answering(None)
    agent, model = make_agent(
        [ASK, "fine"], hooks=[hook], capabilities=QUESTIONS, policies=[policy.allow_all()]
    )
    async with agent:
        assert (await agent.chat("ask me")).text == "fine"
    assert len(hook.asked) == 1
    (message,) = tool_messages(model, 1)
    assert "blue" not in message and "A1" not in message
    assert "cancel" in message.lower()


# -- compaction ----------------------------------------------------------------------------


class Compactions(Hook):
    def __init__(self) -> None:
        self.summaries: list[str] = []

    async def on_compaction(self, summary: str) -> None:
        self.summaries.append(summary)


async def test_on_compaction_fires_with_the_summary(make_agent: AgentFactory) -> None:
    big = "lorem ipsum " * 400  # ~1.2k tokens per message

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        last = str(messages[-1].get("content", ""))
        if "continuation summary" in last:
            return "SUMMARY: the user sent lorem ipsum turns"
        return "answer " + big

    hook = Compactions()
    agent, model = make_agent(
        script,
        hooks=[hook],
        capabilities=CapabilitiesConfig(compaction_token_threshold=14000),
        policies=[policy.allow_all()],
    )
    started = time.monotonic()
    async with agent:
        for i in range(4):
            await agent.chat(f"turn {i} " + big)
            if hook.summaries:
                break
    assert time.monotonic() - started < 15
    assert hook.summaries, "no compaction within 4 turns"
    assert hook.summaries[0] == "SUMMARY: the user sent lorem ipsum turns"
    assert any("continuation summary" in str(r.last_message) for r in model.requests)
