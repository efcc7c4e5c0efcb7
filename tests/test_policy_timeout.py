"""Predicates bounded by the enforcer's `timeout`: off the event loop, fail-safe past it."""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from antigravity_sdk import Agent, HookRunner, PolicyError, ToolCall, policy
from antigravity_sdk.policy import Decision

CALL = ToolCall(name="run_command", args={"CommandLine": "ls"})
BOUND = 0.3


_release = threading.Event()


@pytest.fixture(autouse=True)
async def _release_blocked_predicates() -> AsyncIterator[None]:
    """Abandoned predicate threads finish with the test, before its loop's executor is
    shut down (which waits for them)."""
    _release.clear()
    yield
    _release.set()


def blocking(seconds: float, verdict: bool) -> Callable[[Any], bool]:
    def predicate(args: Any) -> bool:
        _release.wait(seconds)  # a sync call that never yields: the loop is stuck in it
        return verdict

    return predicate


class Heartbeat:
    """Ticks on the event loop; `worst` is the longest the loop was unavailable."""

    def __init__(self) -> None:
        self.worst = 0.0

    async def run(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.01)
            now = time.monotonic()
            self.worst = max(self.worst, now - last)
            last = now


@contextlib.asynccontextmanager
async def heartbeat() -> AsyncIterator[Heartbeat]:
    beat = Heartbeat()
    task = asyncio.create_task(beat.run())
    await asyncio.sleep(0.02)
    try:
        yield beat
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def timed(enforcer: policy.PolicyEnforcer) -> tuple[bool, str, float]:
    start = time.monotonic()
    result = await enforcer.pre_tool_call(CALL)
    return result.allow, result.message, time.monotonic() - start


async def test_a_blocking_deny_predicate_denies_at_the_bound_without_stalling_the_loop() -> None:
    enforcer = policy.enforce(
        [policy.deny("run_command", when=blocking(2.0, False), name="slow"), policy.allow_all()],
        timeout=BOUND,
    )
    async with heartbeat() as beat:
        allowed, message, took = await timed(enforcer)
    assert not allowed
    assert "Denied by policy 'slow'" in message and "no verdict within 0.3s" in message
    assert took < BOUND + 0.5
    assert beat.worst < 0.25, f"the event loop stalled for {beat.worst:.2f}s"


@pytest.mark.parametrize(
    ("fallback", "allowed"), [(policy.allow_all(), True), (policy.deny_all(), False)]
)
async def test_a_blocking_allow_predicate_does_not_match(
    fallback: policy.Policy, allowed: bool
) -> None:
    enforcer = policy.enforce(
        [policy.allow("run_command", when=blocking(2.0, True)), fallback], timeout=BOUND
    )
    got, _, took = await timed(enforcer)
    assert got is allowed
    assert took < BOUND + 0.5


async def test_a_blocking_ask_predicate_denies_without_asking() -> None:
    asked: list[ToolCall] = []
    enforcer = policy.enforce(
        [
            policy.ask_user("run_command", asked.append, when=blocking(2.0, True)),  # type: ignore[arg-type]
            policy.allow_all(),
        ],
        timeout=BOUND,
    )
    allowed, message, _ = await timed(enforcer)
    assert not allowed and "its condition failed" in message
    assert asked == []


async def test_async_predicates_are_bounded_and_late_answers_ignored() -> None:
    async def hangs(args: Any) -> bool:
        await asyncio.sleep(30)
        return False

    async def answers_late(args: Any) -> bool:
        with contextlib.suppress(asyncio.CancelledError):  # swallows the deadline's cancel
            await asyncio.sleep(30)
        return False  # ... and answers anyway

    async def blocks_the_loop(args: Any) -> bool:
        time.sleep(0.5)  # noqa: ASYNC251 - the point: no await, so the deadline cannot fire
        return False

    for predicate in (hangs, answers_late, blocks_the_loop):
        enforcer = policy.enforce(
            [policy.deny("run_command", when=predicate), policy.allow_all()], timeout=BOUND
        )
        allowed, message, took = await timed(enforcer)
        assert not allowed and "TimeoutError" in message
        assert took < (1.0 if predicate is blocks_the_loop else BOUND + 0.5)


async def test_only_a_timeout_moves_sync_predicates_off_the_loop() -> None:
    threads: list[threading.Thread] = []

    def where(args: Any) -> bool:
        threads.append(threading.current_thread())
        return False

    rules = [policy.deny("run_command", when=where), policy.allow_all()]
    assert (await policy.enforce(rules).pre_tool_call(CALL)).allow
    assert (await policy.enforce(rules, timeout=5).pre_tool_call(CALL)).allow
    assert threads[0] is threading.main_thread(), "without a timeout: inline, the fast path"
    assert threads[1] is not threading.main_thread(), "with a timeout: in a worker thread"


async def test_evaluate_reports_the_timeout_in_its_trace() -> None:
    enforcer = policy.enforce(
        [policy.allow("run_command", when=blocking(2.0, True), name="slow"), policy.deny_all()],
        timeout=BOUND,
    )
    decision = await enforcer.evaluate(CALL)
    assert not decision.allow and decision.decision is Decision.DENY
    assert decision.trace[0].outcome.startswith("predicate raised TimeoutError")
    assert decision.trace[0].outcome.endswith("-> no match")


async def test_under_a_hook_runner_the_loop_stays_free_and_the_call_is_denied() -> None:
    # What an Agent does: the runner bounds the enforcer by the same timeout. That bound
    # starts first, so it cuts off the whole decision: fail-closed, whatever the policy.
    enforcer = policy.enforce(
        [policy.allow("run_command", when=blocking(2.0, True)), policy.allow_all()],
        timeout=BOUND,
    )
    runner = HookRunner([enforcer], timeout=BOUND)
    async with heartbeat() as beat:
        start = time.monotonic()
        result = await runner.dispatch_pre_tool_call(CALL)
        took = time.monotonic() - start
    assert not result.allow and "timed out" in result.message
    assert took < BOUND + 0.5
    assert beat.worst < 0.25, f"the event loop stalled for {beat.worst:.2f}s"


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, True, "5"])
def test_the_timeout_must_be_a_positive_finite_number(bad: Any) -> None:
    with pytest.raises(PolicyError, match="timeout must be a positive, finite number"):
        policy.enforce([policy.allow_all()], timeout=bad)
    with pytest.raises(PolicyError, match="timeout must be a positive, finite number"):
        policy.enforce([policy.ask_user("view_file", lambda call: True, timeout=bad)])


def test_the_agent_gives_its_hook_timeout_to_the_enforcer() -> None:
    agent = Agent.builder().model("m", base_url="http://127.0.0.1:9/v1").hook_timeout(2.5).build()
    assert agent.policy_enforcer.timeout == 2.5
    assert Agent.builder().build().policy_enforcer.timeout is None
    for bad in (0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="hook_timeout must be a positive, finite number"):
            Agent.builder().hook_timeout(bad)
