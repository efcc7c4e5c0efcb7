"""`stream()` yields a `tool_result` chunk when a tool has run, against the real harness."""

from __future__ import annotations

from antigravity_sdk import Hook, HookResult, ToolCall, policy
from antigravity_sdk.testing import tool_call

from .conftest import AgentFactory, Workspace
from .test_examples import load_example


async def test_tool_results_are_streamed(make_agent: AgentFactory, env: Workspace) -> None:
    script = [
        tool_call("run_command", CommandLine="echo hello", Cwd=str(env.ws), WaitMsBeforeAsync=5000),
        tool_call("view_file", AbsolutePath=str(env.ws / "missing.txt")),
        tool_call("run_command", CommandLine="rm -rf x", Cwd=str(env.ws), WaitMsBeforeAsync=5000),
        "done",
    ]
    rules = [
        policy.deny("run_command", when=lambda a: "rm " in a["CommandLine"]),
        policy.allow_all(),
    ]
    agent, _ = make_agent(script, policies=rules)
    async with agent:
        chunks = [chunk async for chunk in agent.stream("go")]
    results = [c for c in chunks if c.type == "tool_result"]
    assert [r.tool_call.name for r in results if r.tool_call] == ["run_command", "view_file"]
    ran, failed = results
    assert "hello" in ran.text and ran.error == ""
    assert ran.tool_call is not None and ran.tool_call.args["CommandLine"] == "echo hello"
    assert "does not exist" in failed.error
    # Each result follows its call; the denied call has a tool_call chunk and no result.
    kinds = [c.type for c in chunks if c.type != "text"]
    assert kinds == ["tool_call", "tool_result", "tool_call", "tool_result", "tool_call"]


async def test_stream_tool_results_example_runs() -> None:
    assert await load_example("stream_tool_results").main() == 0


async def test_identical_calls_each_name_their_own_call(
    make_agent: AgentFactory, env: Workspace
) -> None:
    """Three identical commands, the first denied by a hook: each streamed result and
    each step of the response names the call that ran (not the first one asked), and the
    denied step names the denied call."""
    same = {"CommandLine": "echo same", "Cwd": str(env.ws), "WaitMsBeforeAsync": 5000}

    class DenyFirst(Hook):
        def __init__(self) -> None:
            self.asked: list[str] = []

        async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
            self.asked.append(tool_call.id)
            if len(self.asked) == 1:
                return HookResult.denied("not the first time")
            return HookResult.ALLOWED

    hook = DenyFirst()
    script = [tool_call("run_command", **same) for _ in range(3)] + ["done"]
    agent, _ = make_agent(script, hooks=[hook], policies=[policy.allow_all()])
    async with agent:
        chunks = [chunk async for chunk in agent.stream("go")]
        steps = list(agent.history)
    first, *ran = hook.asked
    assert len(set(hook.asked)) == 3  # three calls, three ids
    streamed = [c.tool_call.id for c in chunks if c.type == "tool_result" and c.tool_call]
    assert streamed == ran
    tool_steps = [s for s in steps if s.kind == "tool_call"]
    assert [s.tool_call.id for s in tool_steps if s.tool_call] == ran
    (denied,) = [s for s in steps if s.kind == "denied"]
    assert denied.tool_call is not None and denied.tool_call.id == first
