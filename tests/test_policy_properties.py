"""Property tests: the indexed enforcer against a brute-force reference of the nine buckets."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from antigravity_sdk import ToolCall, policy
from antigravity_sdk.policy import Decision, Policy

TOOLS = ("a", "b", "c")
SERVERS = ("s", "t")
PREDICATES = ("none", "true", "false", "raise")
HANDLERS = ("approve", "refuse", "raise")
SCOPE = {"specific": 0, "server": 1, "global": 2}
ORDER = {Decision.DENY: 0, Decision.ASK_USER: 1, Decision.APPROVE: 2}


@dataclass(frozen=True)
class Spec:
    """A rule as data, so the reference can reason about it without running it."""

    pattern: str
    decision: Decision
    predicate: str
    handler: str
    is_async: bool
    kind: str  # what the predicate takes: "args" or "call"


def make_predicate(outcome: str, is_async: bool, kind: str) -> Any:
    def value() -> bool:
        if outcome == "raise":
            raise ValueError("predicate failure")
        return outcome == "true"

    if kind == "call":
        if is_async:

            async def on_call(call: ToolCall) -> bool:
                assert isinstance(call, ToolCall)
                return value()

            return on_call

        def on_call_sync(call: ToolCall) -> bool:
            assert isinstance(call, ToolCall)
            return value()

        return on_call_sync
    if is_async:

        async def on_args(args: dict[str, Any]) -> bool:
            assert isinstance(args, dict)
            return value()

        return on_args
    return lambda args: value()


def make_handler(outcome: str, is_async: bool) -> Any:
    def answer(call: ToolCall) -> bool:
        if outcome == "raise":
            raise RuntimeError("handler failure")
        return outcome == "approve"

    if is_async:

        async def handler(call: ToolCall) -> bool:
            return answer(call)

        return handler
    return answer


def build(spec: Spec) -> Policy:
    predicate = None
    if spec.predicate != "none":
        predicate = make_predicate(spec.predicate, spec.is_async, spec.kind)
    handler = None
    if spec.decision is Decision.ASK_USER:
        handler = make_handler(spec.handler, spec.is_async)
    return Policy(spec.pattern, spec.decision, predicate=predicate, handler=handler)


def scope_of(pattern: str) -> int:
    if pattern == "*":
        return 2
    return 1 if pattern.endswith("/*") else 0


def reference(specs: list[Spec], qualified: str) -> tuple[bool, int | None]:
    """Brute force: for each bucket 0..8, scan every rule in order. (allowed, deciding index)."""
    for bucket in range(9):
        for i, spec in enumerate(specs):
            if scope_of(spec.pattern) * 3 + ORDER[spec.decision] != bucket:
                continue
            pattern = spec.pattern
            hits = (
                pattern == "*"
                or pattern == qualified
                or (pattern.endswith("/*") and qualified.startswith(pattern[:-1]))
            )
            if not hits or spec.predicate == "false":
                continue
            if spec.predicate == "raise":
                if spec.decision is Decision.APPROVE:
                    continue
                return False, i
            if spec.decision is Decision.DENY:
                return False, i
            if spec.decision is Decision.APPROVE:
                return True, i
            return spec.handler == "approve", i
    return True, None


patterns = st.sampled_from(
    [*TOOLS, *(f"{s}/{t}" for s in SERVERS for t in TOOLS), *(f"{s}/*" for s in SERVERS), "*"]
)
specs_strategy = st.builds(
    Spec,
    pattern=patterns,
    decision=st.sampled_from(list(Decision)),
    predicate=st.sampled_from(PREDICATES),
    handler=st.sampled_from(HANDLERS),
    is_async=st.booleans(),
    kind=st.sampled_from(["args", "call"]),
)
rule_sets = st.lists(specs_strategy, max_size=12)
calls = st.tuples(st.sampled_from(TOOLS), st.sampled_from((None, *SERVERS)))


def to_call(call: tuple[str, str | None]) -> ToolCall:
    return ToolCall(name=call[0], server_name=call[1], args={"k": "v"})


def decide(policies: list[Policy], call: ToolCall) -> tuple[bool, Policy | None, bool]:
    """(pre_tool_call allow, evaluate()'s deciding policy, evaluate allow)."""
    enforcer = policy.enforce(policies, mcp_servers=list(SERVERS), tools=TOOLS)

    async def run() -> tuple[bool, Policy | None, bool]:
        fast = await enforcer.pre_tool_call(call)
        explained = await enforcer.evaluate(call)
        return fast.allow, explained.policy, explained.allow

    return asyncio.run(run())


@settings(max_examples=400, deadline=None)
@given(rule_sets, calls)
def test_matches_brute_force_reference(specs: list[Spec], raw_call: tuple[str, str | None]) -> None:
    policies = [build(s) for s in specs]
    call = to_call(raw_call)
    expected_allow, expected_index = reference(specs, call.qualified_name)
    fast_allow, deciding, explained_allow = decide(policies, call)
    assert fast_allow == expected_allow
    assert explained_allow == expected_allow
    if expected_index is None:
        assert deciding is None
    else:
        assert deciding is policies[expected_index]


@settings(max_examples=200, deadline=None)
@given(rule_sets, calls, st.randoms(use_true_random=False))
def test_permuting_across_buckets_never_changes_a_decision(
    specs: list[Spec], raw_call: tuple[str, str | None], rnd: random.Random
) -> None:
    """Any shuffle that keeps each bucket's internal order decides the same way."""
    policies = [build(s) for s in specs]
    call = to_call(raw_call)
    bucket = [scope_of(s.pattern) * 3 + ORDER[s.decision] for s in specs]
    by_bucket: dict[int, list[int]] = {}
    for i, b in enumerate(bucket):
        by_bucket.setdefault(b, []).append(i)
    # Interleave the buckets randomly, each keeping its own order.
    slots = [b for b, members in by_bucket.items() for _ in members]
    rnd.shuffle(slots)
    cursors = {b: iter(members) for b, members in by_bucket.items()}
    order = [next(cursors[b]) for b in slots]
    shuffled = [policies[i] for i in order]
    original = decide(policies, call)
    permuted = decide(shuffled, call)
    assert permuted[0] == original[0]
    assert permuted[1] is original[1]


def test_order_inside_a_bucket_can_change_a_decision() -> None:
    first = policy.deny("a", name="first")
    second = policy.deny("a", name="second", reason="other")
    call = ToolCall(name="a")
    assert decide([first, second], call)[1] is first
    assert decide([second, first], call)[1] is second
    approve = policy.allow("a", when=lambda args: True)
    refuse_all = policy.ask_user("*", lambda c: False)
    assert decide([approve, refuse_all], call)[0] is True
    # Same bucket, opposite outcomes: order decides.
    ask_yes = policy.ask_user("a", lambda c: True)
    ask_no = policy.ask_user("a", lambda c: False)
    assert decide([ask_yes, ask_no], call)[0] is True
    assert decide([ask_no, ask_yes], call)[0] is False


@settings(max_examples=300, deadline=None)
@given(rule_sets, calls, st.data())
def test_fail_safe_errors_are_never_more_permissive(
    specs: list[Spec], raw_call: tuple[str, str | None], data: st.DataObject
) -> None:
    """Fail-safe: if a predicate (or handler) that raises lets a call through, then the
    same call passes whether that predicate returns True or False (or the handler answers
    either way): an error is never more permissive than any value it replaces."""
    if not specs:
        return
    i = data.draw(st.integers(0, len(specs) - 1))
    call = to_call(raw_call)

    def with_rule(**changes: Any) -> bool:
        changed = list(specs)
        changed[i] = Spec(**{**specs[i].__dict__, **changes})
        return decide([build(s) for s in changed], call)[0]

    if with_rule(predicate="raise"):
        assert with_rule(predicate="true") and with_rule(predicate="false")
    if specs[i].decision is Decision.ASK_USER and with_rule(handler="raise"):
        assert with_rule(handler="approve") and with_rule(handler="refuse")
    # The reference agrees: raising equals "false" for APPROVE and denies otherwise.
    raised = with_rule(predicate="raise")
    assert (
        raised
        == reference(
            [*specs[:i], Spec(**{**specs[i].__dict__, "predicate": "raise"}), *specs[i + 1 :]],
            call.qualified_name,
        )[0]
    )


# -- pre_tool_call and evaluate() implement predicate calling twice: they must agree ---------

# Predicate outcomes beyond true/false/raise: truthy and falsy non-bools, an awaitable from
# a sync function, a CancelledError from a cancelled inner future.
EXTRA_PREDICATES = (*PREDICATES, "truthy", "falsy", "awaitable", "cancel")
EXTRA_HANDLERS = (*HANDLERS, "cancel", "wrong", "own_timeout")


class Args(BaseModel):
    k: str


class Strict(BaseModel):
    missing: int  # never in the call's args: validation fails


def _cancelled() -> Any:
    future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
    future.cancel()
    return future


def extra_predicate(outcome: str, is_async: bool, kind: str) -> Any:
    def plain() -> Any:
        if outcome == "raise":
            raise ValueError("predicate failure")
        return {"truthy": "yes", "falsy": 0}.get(outcome, outcome in ("true", "awaitable"))

    async def awaited() -> Any:
        if outcome == "cancel":
            return await _cancelled()
        return plain()

    # "awaitable" and "cancel" need an await: a sync predicate returns the awaitable.
    needs_await = is_async or outcome in ("awaitable", "cancel")
    if kind == "strict":

        def on_strict(args: Strict) -> bool:
            raise AssertionError("never reached: validation fails first")

        return on_strict
    if kind == "model":

        def on_model(args: Args) -> Any:
            assert isinstance(args, Args)
            return awaited() if needs_await else plain()

        return on_model
    if is_async:

        async def on_args(args: dict[str, Any]) -> Any:
            return await awaited()

        return on_args
    return lambda args: awaited() if needs_await else plain()


def extra_handler(outcome: str, is_async: bool) -> Any:
    def answer() -> Any:
        if outcome == "raise":
            raise RuntimeError("handler failure")
        if outcome == "own_timeout":
            raise TimeoutError("the pager timed out")
        if outcome == "wrong":
            return "yes"
        return outcome == "approve"

    if outcome == "cancel":

        async def cancelled(call: ToolCall) -> bool:
            result: bool = await _cancelled()
            return result

        return cancelled
    if is_async:

        async def handler(call: ToolCall) -> Any:
            return answer()

        return handler
    return lambda call: answer()


@dataclass(frozen=True)
class ExtraSpec:
    pattern: str
    decision: Decision
    predicate: str
    handler: str
    is_async: bool
    kind: str  # "args", "model" or "strict"
    timeout: float | None


def build_extra(spec: ExtraSpec) -> Policy:
    predicate = None
    if spec.predicate != "none" or spec.kind == "strict":
        predicate = extra_predicate(spec.predicate, spec.is_async, spec.kind)
    handler = None
    if spec.decision is Decision.ASK_USER:
        handler = extra_handler(spec.handler, spec.is_async)
    return Policy(
        spec.pattern,
        spec.decision,
        predicate=predicate,
        handler=handler,
        timeout=spec.timeout if spec.decision is Decision.ASK_USER else None,
    )


extra_specs = st.lists(
    st.builds(
        ExtraSpec,
        pattern=patterns,
        decision=st.sampled_from(list(Decision)),
        predicate=st.sampled_from(EXTRA_PREDICATES),
        handler=st.sampled_from(EXTRA_HANDLERS),
        is_async=st.booleans(),
        kind=st.sampled_from(["args", "args", "model", "strict"]),
        timeout=st.sampled_from([None, 5.0]),
    ),
    max_size=10,
)


@settings(max_examples=300, deadline=None)
@given(extra_specs, calls)
def test_pre_tool_call_and_evaluate_agree(
    specs: list[ExtraSpec], raw_call: tuple[str, str | None]
) -> None:
    """Same allow and same message, whatever the predicates and handlers do."""
    policies = [build_extra(s) for s in specs]
    enforcer = policy.enforce(policies, mcp_servers=list(SERVERS), tools=TOOLS)
    call = to_call(raw_call)

    async def run() -> None:
        fast = await enforcer.pre_tool_call(call)
        explained = await enforcer.evaluate(call)
        assert fast.allow == explained.allow
        assert fast.message == explained.message
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]

    asyncio.run(run())


@settings(max_examples=300, deadline=None)
@given(rule_sets, calls)
def test_shadow_mode_allows_and_warns_exactly_when_enforcing_would_not(
    specs: list[Spec], raw_call: tuple[str, str | None]
) -> None:
    """Shadow mode: every call allowed, no handler called, and one warning iff the rules
    would deny or ask; `evaluate` and `Policy.bucket` say which rule and bucket."""
    asked: list[ToolCall] = []

    def tattle(call: ToolCall) -> bool:
        asked.append(call)
        return True

    policies = [
        p if p.handler is None else dataclasses.replace(p, handler=tattle)
        for p in map(build, specs)
    ]
    shadow = policy.enforce(policies, mcp_servers=list(SERVERS), tools=TOOLS, mode="shadow")
    call = to_call(raw_call)
    _, expected_index = reference(specs, call.qualified_name)
    logger = logging.getLogger("antigravity_sdk.policy")
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        allowed = asyncio.run(shadow.pre_tool_call(call)).allow
        explained = asyncio.run(shadow.evaluate(call, ask=False))
    finally:
        logger.removeHandler(handler)
    shadowed = [r for r in records if r.getMessage().startswith("shadow mode:")]
    decided = specs[expected_index].decision if expected_index is not None else None
    would_deny_or_ask = decided is not None and decided is not Decision.APPROVE
    assert allowed and not asked
    assert len(shadowed) == (1 if would_deny_or_ask else 0)
    assert explained.allow == (not would_deny_or_ask)
    if expected_index is None:
        assert explained.policy is None and explained.bucket is None
    else:
        deciding = policies[expected_index]
        assert explained.policy is deciding and explained.bucket == deciding.bucket
        assert explained.bucket == scope_of(deciding.tool) * 3 + ORDER[deciding.decision]
