"""The agent answers every harness request exactly once, fail-closed when deciding fails.

The runners never raise by design, so these tests break them on purpose: a dispatch that
raises, and one that is cancelled mid-way, must still produce exactly one answer, and it
must be the most conservative one (DENY, a failed tool, cancelled questions, rejected
confirmation). A missing or permissive answer would let the harness run the tool.

The agent is driven through its public surface: a scripted `Connection` given to
`AgentBuilder.connection()` (the `scripted_agent` fixture) delivers the harness's request
frames, and the fault is injected by replacing `Agent.hook_runner` or patching
`ToolRunner.run`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from antigravity_sdk import Agent, HookResult, HookRunner, ToolCall, TurnDeniedError
from antigravity_sdk.harness.effects import (
    AskUser,
    ConfirmTool,
    HookCall,
    PolicyRequest,
    Request,
    RunTool,
)
from antigravity_sdk.tools import ToolRunner
from antigravity_sdk.types import AskQuestionEntry, ToolResult

MAIN = "fdf309472cb77c8949cdb2128f70545b"  # the scripted conversation
RM = {"toolName": "run_command", "argumentsJson": '{"CommandLine": "rm -rf /"}', "callId": "c1"}

# One request frame of each kind, as harness 0.1.22 sends them (trimmed).
FRAMES: dict[str, dict[str, Any]] = {
    "pre_tool_call": {
        "callHookRequest": {
            "requestId": "hook_request_1",
            "type": "LIFECYCLE_HOOK_PRE_TOOL",
            "preToolArgs": RM,
        }
    },
    "host_tool": {"toolCall": {"name": "lookup", "argumentsJson": "{}", "id": "c1"}},
    "questions": {
        "stepUpdate": {
            "trajectoryId": MAIN,
            "stepIndex": 3,
            "questionsRequest": {
                "questions": [{"multipleChoice": {"question": "Go?", "choices": ["yes"]}}]
            },
        }
    },
    "confirmation": {
        "stepUpdate": {
            "trajectoryId": MAIN,
            "stepIndex": 4,
            "state": "STATE_WAITING_FOR_USER",
            "source": "SOURCE_MODEL",
            "runCommand": {"commandLine": "rm -rf /"},
            "toolConfirmationRequest": {},
        }
    },
    "policy_request": {"policyDecisionRequest": {"requestId": "7", "toolArgs": RM}},
}
ANSWER_KEYS = {
    "pre_tool_call": "callHookResponse",
    "host_tool": "toolResponse",
    "questions": "questionResponse",
    "confirmation": "toolConfirmation",
    "policy_request": "policyDecisionResponse",
}
FAIL_CLOSED: dict[str, Callable[[dict[str, Any]], object]] = {
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


class BrokenRunner(HookRunner):
    """Every dispatch the requests use fails (or, with `block`, never finishes)."""

    def __init__(self, *, block: bool = False) -> None:
        super().__init__()
        self.block = block
        self.asked = asyncio.Event()

    async def _fail(self) -> Any:
        self.asked.set()
        if self.block:
            await asyncio.Event().wait()
        raise RuntimeError("runner exploded")

    async def dispatch_pre_tool_call(self, tool_call: ToolCall) -> Any:
        return await self._fail()

    async def dispatch_interaction(self, questions: Any) -> Any:
        return await self._fail()


def lookup() -> str:
    return "found"


async def started_agent(scripted_agent: Any, runner: BrokenRunner) -> tuple[Agent, Any]:
    # The frames arrive outside any turn: let them be asked as a scheduled wake's are.
    agent, conn = scripted_agent(
        lambda builder: builder.tool(lookup).allow_all().allow_ungoverned("schedule")
    )
    await agent.start()
    agent.hook_runner = runner
    return agent, conn


def break_tools(monkeypatch: pytest.MonkeyPatch, runner: BrokenRunner) -> None:
    async def run(self: ToolRunner, tool_call: ToolCall) -> ToolResult:
        return await runner._fail()  # type: ignore[no-any-return]

    monkeypatch.setattr(ToolRunner, "run", run)


@pytest.mark.parametrize("kind", sorted(FRAMES))
async def test_a_failing_decision_is_answered_fail_closed_once(
    kind: str, scripted_agent: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = BrokenRunner()
    break_tools(monkeypatch, runner)
    agent, conn = await started_agent(scripted_agent, runner)
    try:
        conn.incoming.put_nowait(FRAMES[kind])
        await conn.wait_for(ANSWER_KEYS[kind])
        assert runner.asked.is_set()  # the failure was the dispatch's, not a refusal
        (answer,) = conn.sent_with(ANSWER_KEYS[kind])
        assert FAIL_CLOSED[kind](answer), answer
        assert "runner exploded" in json.dumps(answer) or kind in ("questions", "confirmation")
    finally:
        await agent.stop()
    assert len(conn.sent_with(ANSWER_KEYS[kind])) == 1


@pytest.mark.parametrize("kind", sorted(FRAMES))
async def test_a_cancelled_decision_is_answered_fail_closed_once(
    kind: str, scripted_agent: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = BrokenRunner(block=True)
    break_tools(monkeypatch, runner)
    agent, conn = await started_agent(scripted_agent, runner)
    try:
        conn.incoming.put_nowait(FRAMES[kind])
        async with asyncio.timeout(5):
            await runner.asked.wait()
        assert conn.sent_with(ANSWER_KEYS[kind]) == []
    finally:
        await agent.stop()  # cancels the pending answer: it answers as it unwinds
    (answer,) = conn.sent_with(ANSWER_KEYS[kind])
    assert FAIL_CLOSED[kind](answer), answer


class DenyingTurns(HookRunner):
    async def dispatch_pre_turn(self) -> HookResult:
        return HookResult.denied("quota used up")


class BreakingTurns(HookRunner):
    async def dispatch_pre_turn(self) -> HookResult:
        raise RuntimeError("turn gate exploded")


@pytest.mark.parametrize(
    ("runner", "reason"),
    [(DenyingTurns(), "quota used up"), (BreakingTurns(), "turn gate exploded")],
)
async def test_a_denied_or_failed_pre_turn_is_the_turns_denial(
    runner: HookRunner, reason: str, scripted_agent: Any
) -> None:
    """The harness cancels a turn whose PRE_TURN is denied; chat() then raises with the
    denial, whether a hook denied or deciding failed."""
    agent, conn = scripted_agent(lambda builder: builder.allow_all())
    real_send = conn.send

    async def play_the_harness(frame: dict[str, Any]) -> None:
        await real_send(frame)
        if "userInput" in frame:
            conn.incoming.put_nowait(
                {
                    "callHookRequest": {
                        "requestId": "hook_request_1",
                        "type": "LIFECYCLE_HOOK_PRE_TURN",
                        "preTurnArgs": {"userInput": {"parts": [{"text": "hi"}]}},
                    }
                }
            )
        elif "callHookResponse" in frame:
            update = {"trajectoryId": MAIN, "state": "STATE_CANCELLED"}
            conn.incoming.put_nowait({"trajectoryStateUpdate": update})

    conn.send = play_the_harness
    async with agent:
        agent.hook_runner = runner
        with pytest.raises(TurnDeniedError, match=reason) as info:
            await asyncio.wait_for(agent.chat("hi"), 5)
    assert info.value.result.allow is False
    (answer,) = conn.sent_with("callHookResponse")
    assert answer["callHookResponse"]["preTurnResult"]["decision"] == "DENY"
    assert reason in answer["callHookResponse"]["preTurnResult"]["reason"]


# -- the request effects on their own ----------------------------------------------------

CALL = ToolCall(name="run_command", args={"CommandLine": "rm -rf /"}, id="call_1")
EFFECTS: dict[str, Request] = {
    "pre_tool_call": HookCall("hook_request_1", "pre_tool_call", CALL),
    "host_tool": RunTool(CALL),
    "questions": AskUser("traj", 3, (AskQuestionEntry(question="Go?"),)),
    "confirmation": ConfirmTool("traj", 4, CALL),
    "policy_request": PolicyRequest("7", CALL),
}


@pytest.mark.parametrize("kind", sorted(EFFECTS))
def test_every_refusal_is_fail_closed(kind: str) -> None:
    assert FAIL_CLOSED[kind](EFFECTS[kind].refuse("the SDK could not decide")), kind


class AllowEverything(HookRunner):
    def __init__(self) -> None:
        super().__init__()
        self.asked: list[ToolCall] = []

    async def dispatch_pre_tool_call(self, tool_call: ToolCall) -> Any:
        self.asked.append(tool_call)
        return HookResult.allowed()


async def test_a_refused_request_is_denied_without_asking_any_hook() -> None:
    runner, tools = AllowEverything(), ToolRunner()
    refused = HookCall("hook_request_2", "pre_tool_call", CALL, refusal="refused: ambiguous")
    assert refused.reply(await refused.decide(runner, tools)) == {
        "callHookResponse": {
            "requestId": "hook_request_2",
            "preToolResult": {"decision": "DENY", "reason": "refused: ambiguous"},
        }
    }
    policy = PolicyRequest("8", CALL, refusal="refused: ambiguous")
    answer = policy.reply(await policy.decide(runner, tools))
    assert answer["policyDecisionResponse"]["outcome"] == "POLICY_EVALUATION_OUTCOME_DENY"
    assert runner.asked == []
    allowed = HookCall("hook_request_3", "pre_tool_call", CALL)
    assert allowed.reply(await allowed.decide(runner, tools))["callHookResponse"] == {
        "requestId": "hook_request_3",
        "preToolResult": {"decision": "ALLOW"},
    }
    assert runner.asked == [CALL]  # the same runner is asked when nothing is refused


async def test_a_confirmation_for_an_undescribed_step_is_rejected_unasked() -> None:
    runner = AllowEverything()
    confirm = ConfirmTool("traj", 5, None)
    assert confirm.reply(await confirm.decide(runner, ToolRunner())) == {
        "toolConfirmation": {"trajectoryId": "traj", "stepIndex": 5, "accepted": False}
    }
    assert runner.asked == []


@pytest.mark.parametrize("name", ["create_file", "edit_file", "view_file", "call_mcp_tool"])
def test_host_tools_may_not_take_the_harness_tools_names(name: str) -> None:
    def tool_fn(path: str) -> str:
        return path

    tool_fn.__name__ = name
    with pytest.raises(ValueError, match="harness's own tool names"):
        Agent.builder().tool(tool_fn).allow_all().build()
