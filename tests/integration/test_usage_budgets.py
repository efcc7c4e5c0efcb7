"""Why a turn ended and what it cost; budgets; tool-output limits; a model that cannot be
reached — each against the real harness, offline."""

from __future__ import annotations

import asyncio
import logging
import socket
import time

import pytest

from antigravity_sdk import (
    Budget,
    BudgetScope,
    CapabilitiesConfig,
    RetryPolicy,
    StopReason,
    ToolOutputLimit,
    TurnCancelledError,
    TurnFailedError,
    TurnTimeoutError,
    UsageMetadata,
    policy,
)
from antigravity_sdk.agent import AgentBuilder
from antigravity_sdk.testing import ScriptedModel, http_error, tool_call

from .conftest import AgentFactory, Workspace
from .test_examples import load_example

ALLOW = [policy.allow_all()]


def _reported(model: ScriptedModel, requests: range) -> tuple[int, int]:
    """Prompt and completion tokens the model reported for those requests."""
    used = [model.requests[i].usage for i in requests]
    return sum(u["prompt_tokens"] for u in used), sum(u["completion_tokens"] for u in used)


def _views(env: Workspace, n: int) -> list[object]:
    (env.ws / "f.txt").write_text("hello")
    return [tool_call("view_file", AbsolutePath=str(env.ws / "f.txt"))] * n


async def test_usage_per_turn_and_for_the_session(make_agent: AgentFactory, env: Workspace) -> None:
    script = ["first answer", *_views(env, 1), "second answer"]
    agent, model = make_agent(script, policies=ALLOW)
    async with agent:
        assert agent.usage == UsageMetadata()
        first = await agent.chat("one")
        second = await agent.chat("two")
        session, by_trajectory = agent.usage, agent.usage_by_trajectory
        main = agent.conversation_id
    assert first.stop_reason is StopReason.FINISHED is agent.last_stop_reason
    # The numbers the model reported, through the harness, per turn and in all.
    assert (first.usage.prompt_token_count, first.usage.candidates_token_count) == _reported(
        model, range(0, 1)
    )
    assert (second.usage.prompt_token_count, second.usage.candidates_token_count) == _reported(
        model, range(1, 3)
    )
    prompt, completion = _reported(model, range(3))
    assert (session.prompt_token_count, session.candidates_token_count) == (prompt, completion)
    assert session.total_token_count == prompt + completion
    assert by_trajectory == {main: session}
    assert first.usage_by_trajectory == {main: first.usage}
    assert second.usage_by_trajectory == {main: second.usage}


async def test_max_tool_calls_stops_the_turn_for_the_whole_conversation(
    make_agent: AgentFactory, env: Workspace
) -> None:
    agent, model = make_agent(
        _views(env, 10), policies=ALLOW, configure=lambda b: b.budget(Budget(max_tool_calls=2))
    )
    async with agent:
        first = await agent.chat("look")
        second = await agent.chat("look again")
    assert first.stop_reason is StopReason.MAX_TOOL_CALLS
    ran = [s for s in first.steps if s.kind == "tool_call" and s.state == "done"]
    assert len(ran) == 2
    # Lifetime, not per turn: the next turn is stopped after one model call.
    assert second.stop_reason is StopReason.MAX_TOOL_CALLS
    assert len(model.requests) == 3  # two calls in the first turn, one in the second
    assert not [s for s in second.steps if s.kind == "tool_call" and s.state == "done"]


async def test_forward_looking_scope_also_counts_across_turns(
    make_agent: AgentFactory, env: Workspace
) -> None:
    budget = Budget(max_tool_calls=2, scope=BudgetScope.FORWARD_LOOKING)
    agent, _ = make_agent(_views(env, 10), policies=ALLOW, configure=lambda b: b.budget(budget))
    async with agent:
        assert (await agent.chat("look")).stop_reason is StopReason.MAX_TOOL_CALLS
        assert (await agent.chat("again")).stop_reason is StopReason.MAX_TOOL_CALLS


async def test_max_model_calls_from_capabilities_still_works(
    make_agent: AgentFactory, env: Workspace
) -> None:
    agent, model = make_agent(
        _views(env, 10), policies=ALLOW, capabilities=CapabilitiesConfig(max_model_calls=2)
    )
    async with agent:
        response = await agent.chat("look")
    assert response.stop_reason is StopReason.MAX_MODEL_CALLS
    assert len(model.requests) == 2


@pytest.mark.parametrize(
    ("limit", "reason"),
    [
        ({"max_total_tokens": 100}, StopReason.MAX_TOTAL_TOKENS),
        ({"max_input_tokens": 100}, StopReason.MAX_INPUT_TOKENS),
        ({"max_output_tokens": 5}, StopReason.MAX_OUTPUT_TOKENS),
    ],
)
async def test_token_budgets_stop_the_turn(
    make_agent: AgentFactory, env: Workspace, limit: dict[str, int], reason: StopReason
) -> None:
    agent, model = make_agent(
        _views(env, 10), policies=ALLOW, configure=lambda b: b.budget(Budget(**limit))
    )
    async with agent:
        response = await agent.chat("look")
    assert response.stop_reason is reason is agent.last_stop_reason
    assert len(model.requests) == 1
    assert response.usage is not None and response.usage.total_token_count > 100


async def test_stream_reports_a_budget_stop_in_last_stop_reason(
    make_agent: AgentFactory, env: Workspace
) -> None:
    agent, _ = make_agent(
        _views(env, 10), policies=ALLOW, configure=lambda b: b.budget(Budget(max_tool_calls=1))
    )
    async with agent:
        await agent.chat("use up the budget")
        chunks = [c async for c in agent.stream("again")]
    assert agent.last_stop_reason is StopReason.MAX_TOOL_CALLS
    assert not [c for c in chunks if c.type == "error"]  # not the harness failing


async def test_cancel_and_timeout_say_why(make_agent: AgentFactory, env: Workspace) -> None:
    release = asyncio.Event()

    async def slow(messages: object, tools: object) -> str:
        await asyncio.wait_for(release.wait(), 30)
        return "too late"

    agent, _ = make_agent(slow, policies=ALLOW, turn_timeout=1.0)
    async with agent:
        with pytest.raises(TurnTimeoutError) as timed_out:
            await agent.chat("wait")
        assert timed_out.value.stop_reason is StopReason.TIMEOUT is agent.last_stop_reason
        turn = asyncio.create_task(agent.chat("wait again"))
        await asyncio.sleep(0.3)
        assert await agent.cancel()
        with pytest.raises(TurnCancelledError) as cancelled:
            await turn
        assert cancelled.value.stop_reason is StopReason.CANCELLED is agent.last_stop_reason
        release.set()


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _gemini_at(builder: AgentBuilder, url: str) -> AgentBuilder:
    return builder.model("gemini-x", api_key="k").model_options(endpoint_url=url)


async def test_unreachable_gemini_fails_fast_with_the_cause(
    make_agent: AgentFactory, env: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"http://127.0.0.1:{_dead_port()}"
    policy_ = RetryPolicy(max_retries=2, initial_backoff=0.05)

    agent, _ = make_agent(
        policies=ALLOW,
        configure=lambda b: _gemini_at(b, url).retry_policy(policy_),
    )
    async with agent:
        caplog.set_level(logging.WARNING, logger="antigravity_sdk.agent")
        started = time.monotonic()
        chunks = []
        with pytest.raises(TurnFailedError) as failed:
            async for chunk in agent.stream("hi"):
                chunks.append(chunk)
        elapsed = time.monotonic() - started
    assert "connection refused" in failed.value.cause and url in failed.value.cause
    assert failed.value.stop_reason is StopReason.ERROR is agent.last_stop_reason
    assert elapsed < 5, elapsed
    errors = [c for c in chunks if c.type == "error"]
    assert [c.error.startswith("Encountered retryable error") for c in errors] == [
        True,
        True,
        False,
    ]
    warned = [r for r in caplog.records if "the harness reports an error" in r.getMessage()]
    assert len(warned) == 3 and all(r.levelno == logging.WARNING for r in warned)


async def test_unreachable_gemini_default_policy_is_bounded(
    make_agent: AgentFactory, env: Workspace
) -> None:
    url = f"http://127.0.0.1:{_dead_port()}"
    agent, _ = make_agent(
        policies=ALLOW,
        turn_timeout=60,
        configure=lambda b: _gemini_at(b, url),
    )
    async with agent:
        started = time.monotonic()
        with pytest.raises(TurnFailedError, match="connection refused"):
            await agent.chat("hi")
        elapsed = time.monotonic() - started
    assert elapsed < 20, elapsed  # the harness's own policy: minutes


async def test_no_retries(make_agent: AgentFactory, env: Workspace) -> None:
    url = f"http://127.0.0.1:{_dead_port()}"
    agent, _ = make_agent(
        policies=ALLOW,
        configure=lambda b: (
            b.model("gemini-x", api_key="k")
            .model_options(endpoint_url=url)
            .retry_policy(RetryPolicy(max_retries=0))
        ),
    )
    async with agent:
        chunks = []
        with pytest.raises(TurnFailedError):
            async for chunk in agent.stream("hi"):
                chunks.append(chunk)
    assert [c.type for c in chunks] == ["error"]


@pytest.mark.parametrize("status", [429, 500])
async def test_openai_endpoint_errors_fail_the_turn_at_once(
    make_agent: AgentFactory, status: int
) -> None:
    agent, model = make_agent([http_error(status), "never"], policies=ALLOW)
    async with agent:
        with pytest.raises(TurnFailedError, match=f"status {status}"):
            await agent.chat("one")
    assert len(model.requests) == 1  # never retried


async def test_unreachable_openai_endpoint_fails_at_once(
    make_agent: AgentFactory, env: Workspace
) -> None:
    url = f"http://127.0.0.1:{_dead_port()}/v1"
    agent, _ = make_agent(policies=ALLOW, configure=lambda b: b.model("m", base_url=url))
    async with agent:
        started = time.monotonic()
        with pytest.raises(TurnFailedError, match="connection refused"):
            await agent.chat("hi")
    assert time.monotonic() - started < 5


def big() -> str:
    """Print a lot."""
    return "line of output\n" * 20_000


@pytest.mark.parametrize(
    ("limit", "seen"),
    [
        (ToolOutputLimit(max_tokens=100), "OUTPUT TRUNCATED"),
        (ToolOutputLimit(max_tokens=100, save_full_output=True), "Full output saved to"),
        (ToolOutputLimit(max_tokens=100, on_exceed="error", error_message="too big"), "too big"),
    ],
)
async def test_tool_output_limit_reaches_the_model(
    make_agent: AgentFactory, limit: ToolOutputLimit, seen: str
) -> None:
    agent, model = make_agent(
        [tool_call("big"), "done"],
        tools=[big],
        policies=ALLOW,
        configure=lambda b: b.tool_output_limit(limit),
    )
    async with agent:
        await agent.chat("go")
    (result,) = model.requests[1].tool_results
    content = str(result["content"])
    assert seen in content
    assert len(content) < 1_000  # of about 300,000 characters


async def test_without_a_limit_the_harness_keeps_about_50k(make_agent: AgentFactory) -> None:
    agent, model = make_agent([tool_call("big"), "done"], tools=[big], policies=ALLOW)
    async with agent:
        await agent.chat("go")
    (result,) = model.requests[1].tool_results
    assert 40_000 < len(str(result["content"])) < 60_000


async def test_budgets_and_usage_example_runs() -> None:
    assert await load_example("budgets_and_usage").main() == 0


async def test_unreachable_model_example_runs() -> None:
    assert await load_example("unreachable_model").main() == 0
