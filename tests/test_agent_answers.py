"""The agent answers every harness request exactly once, fail-closed when deciding fails.

The runners never raise by design, so these tests break them on purpose: a dispatch that
raises, and one that is cancelled mid-way, must still produce exactly one answer, and it
must be the most conservative one (DENY, a failed tool, cancelled questions, rejected
confirmation). A missing or permissive answer would let the harness run the tool.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from antigravity_sdk import Agent, HookResult, HookRunner, ToolCall
from antigravity_sdk.harness import protocol as p
from antigravity_sdk.tools import ToolRunner
from antigravity_sdk.types import AskQuestionEntry


class FakeConnection:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def send(self, frame: dict[str, Any]) -> None:
        self.sent.append(frame)


class BrokenRunner(HookRunner):
    """Every dispatch fails (or, with `block`, never finishes)."""

    def __init__(self, *, block: bool = False) -> None:
        super().__init__()
        self.block = block

    async def _fail(self) -> Any:
        if self.block:
            await asyncio.Event().wait()
        raise RuntimeError("runner exploded")

    async def dispatch_pre_tool_call(self, tool_call: ToolCall) -> Any:
        return await self._fail()

    async def dispatch_interaction(self, questions: Any) -> Any:
        return await self._fail()


class BrokenTools(ToolRunner):
    def __init__(self, *, block: bool = False) -> None:
        super().__init__()
        self.block = block

    async def run(self, tool_call: ToolCall) -> Any:
        if self.block:
            await asyncio.Event().wait()
        raise RuntimeError("tool runner exploded")


CALL = ToolCall(name="run_command", args={"CommandLine": "rm -rf /"}, id="call_1")
EFFECTS = {
    "pre_tool_call": p.HookCall("hook_request_1", "pre_tool_call", CALL),
    "host_tool": p.RunTool(CALL),
    "questions": p.AskUser("traj", 3, (AskQuestionEntry(question="Go?"),)),
    "confirmation": p.ConfirmTool("traj", 4, CALL),
    "policy_request": p.PolicyRequest("7", CALL),
}
FAIL_CLOSED = {
    "pre_tool_call": lambda r: (
        r["callHookResponse"]["preToolResult"]["decision"] == "DENY"
        and r["callHookResponse"]["preToolResult"]["reason"]
    ),
    "host_tool": lambda r: (
        "errorMessage" in r["toolResponse"] and "responseJson" not in r["toolResponse"]
    ),
    "questions": lambda r: r["questionResponse"].get("cancelled") is True,
    "confirmation": lambda r: r["toolConfirmation"]["accepted"] is False,
    "policy_request": lambda r: (
        r["policyDecisionResponse"]["outcome"] == "POLICY_EVALUATION_OUTCOME_DENY"
    ),
}


def make_agent(*, block: bool = False) -> tuple[Agent, FakeConnection]:
    agent = Agent.builder().allow_all().build()
    conn = FakeConnection()
    agent.hook_runner = BrokenRunner(block=block)
    agent._tools = BrokenTools(block=block)
    agent._core = p.SessionCore()
    agent._conn = conn  # type: ignore[assignment]
    return agent, conn


@pytest.mark.parametrize("kind", sorted(EFFECTS))
async def test_a_failing_decision_is_answered_fail_closed_once(kind: str) -> None:
    agent, conn = make_agent()
    await agent._answer(EFFECTS[kind])
    assert len(conn.sent) == 1
    assert FAIL_CLOSED[kind](conn.sent[0]), conn.sent[0]


@pytest.mark.parametrize("kind", sorted(EFFECTS))
async def test_a_cancelled_decision_is_answered_fail_closed_once(kind: str) -> None:
    agent, conn = make_agent(block=True)
    task = asyncio.create_task(agent._answer(EFFECTS[kind]))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(conn.sent) == 1
    assert FAIL_CLOSED[kind](conn.sent[0]), conn.sent[0]


class AllowEverything(HookRunner):
    def __init__(self) -> None:
        super().__init__()
        self.asked: list[ToolCall] = []

    async def dispatch_pre_tool_call(self, tool_call: ToolCall) -> Any:
        self.asked.append(tool_call)
        return HookResult.allowed()


async def test_a_refused_request_is_denied_without_asking_any_hook() -> None:
    agent, conn = make_agent()
    runner = agent.hook_runner = AllowEverything()
    refused = p.HookCall("hook_request_2", "pre_tool_call", CALL, refusal="refused: ambiguous")
    await agent._answer(refused)
    assert runner.asked == []
    assert conn.sent == [
        {
            "callHookResponse": {
                "requestId": "hook_request_2",
                "preToolResult": {"decision": "DENY", "reason": "refused: ambiguous"},
            }
        }
    ]
    await agent._answer(p.PolicyRequest("8", CALL, refusal="refused: ambiguous"))
    assert runner.asked == []
    assert conn.sent[-1]["policyDecisionResponse"]["outcome"] == "POLICY_EVALUATION_OUTCOME_DENY"


async def test_a_confirmation_for_an_undescribed_step_is_rejected_unasked() -> None:
    agent, conn = make_agent()
    runner = agent.hook_runner = AllowEverything()
    await agent._answer(p.ConfirmTool("traj", 5, None))
    assert runner.asked == []
    assert conn.sent == [
        {"toolConfirmation": {"trajectoryId": "traj", "stepIndex": 5, "accepted": False}}
    ]


@pytest.mark.parametrize("name", ["create_file", "edit_file", "view_file", "call_mcp_tool"])
def test_host_tools_may_not_take_the_harness_tools_names(name: str) -> None:
    def tool_fn(path: str) -> str:
        return path

    tool_fn.__name__ = name
    with pytest.raises(ValueError, match="harness's own tool names"):
        Agent.builder().tool(tool_fn).allow_all().build()
