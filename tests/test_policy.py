"""Policy engine: builders, buckets, predicates, fail-safe, handlers, explanation, shadow."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from typing import Any

import pytest
from pydantic import BaseModel

from antigravity_sdk import (
    HookRunner,
    McpHttpServer,
    McpStdioServer,
    PolicyError,
    ToolCall,
    policy,
)
from antigravity_sdk.policy import Decision, Policy, PolicyDecision, PolicyEnforcer

HOST_TOOLS = ("x", "y", "a", "b", "c", "ok", "drop_table")
"""Tool names these tests make up: they stand for host-side tools of an agent."""


def enforce(*args: Any, **kwargs: Any) -> PolicyEnforcer:
    return policy.enforce(*args, tools=HOST_TOOLS, **kwargs)


DB = McpStdioServer(name="db", command="db-server")


def cmd(line: str) -> ToolCall:
    return ToolCall(name="run_command", args={"CommandLine": line})


def mcp(server: str, name: str, **args: Any) -> ToolCall:
    return ToolCall(name=name, server_name=server, args=args)


async def allowed(enforcer: PolicyEnforcer, call: ToolCall) -> bool:
    result = await enforcer.pre_tool_call(call)
    explained = await enforcer.evaluate(call)
    assert explained.allow == result.allow, "evaluate() and pre_tool_call() disagree"
    return result.allow


# -- builders ----------------------------------------------------------------------------------


def test_builders_make_frozen_policies() -> None:
    p = policy.deny("run_command", name="x", reason="no")
    assert p == Policy("run_command", Decision.DENY, name="x", reason="no")
    with pytest.raises(AttributeError):
        p.tool = "other"  # type: ignore[misc]
    assert policy.allow_all() == Policy("*", Decision.APPROVE, name="allow_all")
    assert policy.deny_all() == Policy("*", Decision.DENY, name="deny_all")


def test_when_and_with_name_return_copies() -> None:
    base = policy.allow("view_file")

    def pred(a: dict[str, Any]) -> bool:
        return True

    changed = base.when(pred).with_name("v")
    assert base.predicate is None and base.name == ""
    assert changed.predicate is pred and changed.name == "v" and changed.tool == "view_file"
    assert policy.allow("view_file", when=pred).predicate is pred


def test_confirm_run_command() -> None:
    denying = policy.confirm_run_command()
    assert [(p.tool, p.decision) for p in denying] == [
        ("run_command", Decision.DENY),
        ("*", Decision.APPROVE),
    ]
    asking = policy.confirm_run_command(lambda call: True)
    assert asking[0].decision is Decision.ASK_USER and asking[0].handler is not None


def test_mcp_builders() -> None:
    assert [p.tool for p in policy.allow_mcp(DB)] == ["db/*"]
    assert [p.tool for p in policy.deny_mcp("db", ["a", "b"])] == ["db/a", "db/b"]
    asks = policy.ask_user_mcp(DB, ["x"], handler=lambda c: True)
    assert asks[0].tool == "db/x" and asks[0].decision is Decision.ASK_USER
    web = McpHttpServer(name="web", url="http://x")
    assert [p.tool for p in policy.deny(web, mcp_tools=["get"])] == ["web/get"]
    assert [p.tool for p in policy.allow(web)] == ["web/*"]
    assert [p.tool for p in policy.ask_user(web, lambda c: True, mcp_tools=["a"])] == ["web/a"]


@pytest.mark.parametrize(
    "build",
    [
        lambda: policy.deny_mcp("db", "drop_table"),  # type: ignore[arg-type]
        lambda: policy.allow(DB, mcp_tools="drop_table"),  # type: ignore[call-overload]
        lambda: policy.allow("view_file", mcp_tools=["x"]),  # type: ignore[call-overload]
        lambda: policy.allow(42),  # type: ignore[call-overload]
    ],
)
def test_builder_misuse_raises_policy_error(build: Any) -> None:
    with pytest.raises(PolicyError):
        build()


# -- validation ----------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", ["", "run_*", "*/x", "a/b/c", "/x", "db/", " x", "a b/*"])
def test_malformed_patterns_are_rejected(pattern: str) -> None:
    with pytest.raises(PolicyError, match=r"policy #2 \('bad'\)"):
        enforce([policy.allow("ok"), policy.deny(pattern, name="bad")], mcp_servers=["db"])


def test_validation_names_the_policy() -> None:
    """Policies count from 1, in Python as in a policy file."""
    with pytest.raises(PolicyError, match=r"policy #1 \('asker'\).*handler"):
        enforce([policy.ask_user("x", name="asker")])
    with pytest.raises(PolicyError, match=r"policy #2 is a str .*not a Policy"):
        enforce([policy.allow("x"), "deny run_command"])  # type: ignore[list-item]
    with pytest.raises(PolicyError, match="mcp_servers"):
        enforce(policy.deny_mcp("db"))
    with pytest.raises(PolicyError, match="'other' is not among"):
        enforce(policy.deny_mcp("other"), mcp_servers=[DB])
    with pytest.raises(PolicyError, match="timeout"):
        enforce([policy.ask_user("x", lambda c: True, timeout=0)])
    with pytest.raises(PolicyError, match="one positional argument"):
        enforce([policy.deny("x", when=lambda: True)])  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match="ASK_USER"):
        enforce([Policy("x", Decision.DENY, handler=lambda c: True)])
    with pytest.raises(PolicyError, match="mode"):
        enforce([], mode="audit")  # type: ignore[arg-type]


def test_nested_lists_are_flattened_and_servers_accept_names_or_configs() -> None:
    enforcer = enforce(
        [policy.allow("a"), [policy.deny("b"), (policy.deny_mcp(DB),)]], mcp_servers=["db"]
    )
    assert [p.tool for p in enforcer.policies] == ["a", "b", "db/*"]
    assert enforce(policy.deny_mcp(DB), mcp_servers=[DB]).policies[0].tool == "db/*"
    assert enforce(policy.allow_all()).policies == (policy.allow_all(),)


# -- the priority model (the article's examples) ------------------------------------------------


async def test_rm_and_sudo_first_match() -> None:
    enforcer = enforce(
        [
            policy.deny("run_command", when=lambda a: "rm" in a["CommandLine"], name="no-rm"),
            policy.deny("run_command", when=lambda a: "sudo" in a["CommandLine"], name="no-sudo"),
            policy.allow("run_command"),
        ]
    )
    assert (await enforcer.evaluate(cmd("rm -rf /"))).policy.name == "no-rm"  # type: ignore[union-attr]
    assert (await enforcer.evaluate(cmd("sudo ls"))).policy.name == "no-sudo"  # type: ignore[union-attr]
    assert (await enforcer.evaluate(cmd("sudo rm x"))).policy.name == "no-rm"  # type: ignore[union-attr]
    assert await allowed(enforcer, cmd("ls -la"))
    assert not await allowed(enforcer, cmd("sudo ls"))


async def test_specific_allow_beats_global_deny() -> None:
    enforcer = enforce([policy.deny("*"), policy.allow("view_file")])
    assert await allowed(enforcer, ToolCall(name="view_file"))
    assert not await allowed(enforcer, ToolCall(name="write_to_file"))
    decision = await enforcer.evaluate(ToolCall(name="view_file"))
    assert decision.bucket == 2 and decision.decision is Decision.APPROVE


async def test_deny_npm_allow_npm_test() -> None:
    # A specific deny outranks a specific allow whatever the registration order...
    deny_npm = policy.deny("run_command", when=lambda a: a["CommandLine"].startswith("npm"))
    allow_test = policy.allow("run_command", when=lambda a: a["CommandLine"] == "npm test")
    for rules in ([deny_npm, allow_test], [allow_test, deny_npm]):
        assert not await allowed(enforce(rules), cmd("npm test"))
    # ...so the exception goes into the deny's predicate; inside a bucket, order decides.
    first = policy.allow("run_command", when=lambda a: a["CommandLine"] == "npm test", name="t")
    rest = policy.allow("run_command", name="rest")
    decision = await enforce([first, rest]).evaluate(cmd("npm test"))
    assert decision.policy is first
    decision = await enforce([rest, first]).evaluate(cmd("npm test"))
    assert decision.policy is rest


async def test_no_match_allows() -> None:
    enforcer = enforce([policy.deny("run_command")])
    decision = await enforcer.evaluate(ToolCall(name="view_file"))
    assert decision.allow and decision.policy is None and decision.bucket is None
    assert decision.trace == []
    assert (await enforcer.pre_tool_call(ToolCall(name="view_file"))).allow


async def test_mcp_database_server() -> None:
    enforcer = enforce(
        [policy.deny_mcp("db", tools=["drop_table"]), policy.allow_mcp("db"), policy.deny_all()],
        mcp_servers=[DB],
    )
    assert not await allowed(enforcer, mcp("db", "drop_table"))
    assert await allowed(enforcer, mcp("db", "select"))
    assert not await allowed(enforcer, mcp("other", "select"))
    # A bare name never matches an MCP call, and `server/*` only its own server.
    bare = enforce([policy.deny("drop_table"), policy.deny_mcp("db")], mcp_servers=["db"])
    assert await allowed(bare, mcp("web", "drop_table"))
    assert not await allowed(bare, ToolCall(name="drop_table"))
    assert not await allowed(bare, mcp("db", "anything"))


# -- predicates ------------------------------------------------------------------------------


class Cmd(BaseModel):
    CommandLine: str


async def test_predicate_kinds() -> None:
    seen: list[Any] = []

    def by_args(args: dict[str, Any]) -> bool:
        seen.append(args)
        return False

    def by_model(c: Cmd) -> bool:
        seen.append(c)
        return False

    async def by_call(call: ToolCall) -> bool:
        seen.append(call)
        return False

    def by_string_annotation(call: ToolCall) -> bool:
        seen.append(call)
        return False

    enforcer = enforce(
        [policy.deny("run_command", when=f) for f in (by_args, by_model, by_call)]
        + [policy.deny("run_command", when=by_string_annotation)]
    )
    call = cmd("ls")
    assert (await enforcer.pre_tool_call(call)).allow
    assert seen[0] == {"CommandLine": "ls"}
    assert isinstance(seen[1], Cmd) and seen[1].CommandLine == "ls"
    assert seen[2] is call and seen[3] is call  # `from __future__ import annotations` here


async def test_predicate_signature_inspected_once_at_enforce(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import inspect

    enforcer = enforce([policy.deny("x", when=lambda a: False)])
    calls = 0
    real = inspect.signature

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(inspect, "signature", counting)
    for _ in range(5):
        await enforcer.pre_tool_call(ToolCall(name="x"))
        await enforcer.evaluate(ToolCall(name="x"))
    assert calls == 0


async def test_truthy_and_awaitable_predicate_results() -> None:
    import re

    async def coroutine_true() -> bool:
        return True

    enforcer = enforce(
        [
            policy.deny("a", when=lambda args: re.search("x", args["v"])),  # type: ignore[arg-type,return-value]
            policy.deny("b", when=lambda args: coroutine_true()),
        ]
    )
    assert not await allowed(enforcer, ToolCall(name="a", args={"v": "xyz"}))
    assert await allowed(enforcer, ToolCall(name="a", args={"v": "abc"}))
    assert not await allowed(enforcer, ToolCall(name="b"))


async def test_predicate_error_fail_safe(caplog: pytest.LogCaptureFixture) -> None:
    def boom(args: dict[str, Any]) -> bool:
        raise RuntimeError("kaput")

    def bad_model(c: Cmd) -> bool:
        return True

    caplog.set_level(logging.WARNING, logger="antigravity_sdk.policy")
    denying = enforce([policy.deny("x", when=boom, name="d"), policy.allow_all()])
    result = await denying.pre_tool_call(ToolCall(name="x"))
    assert not result.allow and "'d'" in result.message and "kaput" in result.message
    asking = enforce([policy.ask_user("x", lambda c: True, when=boom), policy.allow_all()])
    assert not (await asking.pre_tool_call(ToolCall(name="x"))).allow
    approving = enforce([policy.allow("x", when=boom), policy.deny_all()])
    decision = await approving.evaluate(ToolCall(name="x"))
    assert not decision.allow and decision.policy == policy.deny_all()
    assert "raised RuntimeError" in decision.trace[0].outcome
    # Validation failure of a model predicate counts as raising.
    validating = enforce([policy.deny("run_command", when=bad_model)])
    assert not (await validating.pre_tool_call(ToolCall(name="run_command", args={}))).allow
    assert sum("kaput" in r.getMessage() for r in caplog.records) >= 3


# -- ASK_USER handlers ------------------------------------------------------------------------


async def test_handlers_sync_async_and_refusal() -> None:
    asked: list[ToolCall] = []

    def yes(call: ToolCall) -> bool:
        asked.append(call)
        return True

    async def no(call: ToolCall) -> bool:
        return False

    assert await allowed(enforce([policy.ask_user("x", yes)]), ToolCall(name="x"))
    assert asked and asked[0].name == "x"
    refused = await enforce([policy.ask_user("x", no, name="q")]).pre_tool_call(ToolCall(name="x"))
    assert not refused.allow and "'q'" in refused.message and "refused" in refused.message


@pytest.mark.parametrize(
    "handler",
    [
        lambda call: 1 / 0,
        lambda call: "yes",  # not a bool: only True approves
        lambda call: None,
    ],
)
async def test_handler_failures_deny(handler: Any) -> None:
    enforcer = enforce([policy.ask_user("x", handler), policy.allow_all()])
    assert not await allowed(enforcer, ToolCall(name="x"))


async def test_handler_timeout_denies_async_and_sync() -> None:
    async def slow(call: ToolCall) -> bool:
        await asyncio.sleep(5)
        return True

    def blocking(call: ToolCall) -> bool:
        time.sleep(0.5)
        return True

    for handler in (slow, blocking):
        enforcer = enforce([policy.ask_user("x", handler, timeout=0.05, name="t")])
        started = time.perf_counter()
        result = await enforcer.pre_tool_call(ToolCall(name="x"))
        assert not result.allow and "0.05s" in result.message
        assert time.perf_counter() - started < 0.4


async def test_a_late_answer_after_the_timeout_denies() -> None:
    """A handler that swallows the timeout's cancellation and approves anyway is too late."""

    async def stubborn(call: ToolCall) -> bool:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(5)
        return True

    enforcer = enforce([policy.ask_user("x", stubborn, timeout=0.05, name="t")])
    result = await enforcer.pre_tool_call(ToolCall(name="x"))
    assert not result.allow and "within 0.05s" in result.message
    decision = await enforcer.evaluate(ToolCall(name="x"))
    assert not decision.allow and decision.message == result.message
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_sync_handler_without_timeout_does_not_block_the_loop() -> None:
    """`lambda c: input(...)`-style handlers run in a worker thread, timeout or not."""
    loop_thread = threading.get_ident()
    ticked = threading.Event()
    threads: list[int] = []

    def blocking(call: ToolCall) -> bool:
        threads.append(threading.get_ident())
        return ticked.wait(2)  # only the event loop can set it

    async def tick() -> None:
        await asyncio.sleep(0.01)
        ticked.set()

    enforcer = enforce([policy.ask_user("x", blocking)])
    ticker = asyncio.create_task(tick())
    started = time.perf_counter()
    assert (await enforcer.pre_tool_call(ToolCall(name="x"))).allow
    await ticker
    assert time.perf_counter() - started < 1.5
    assert threads and threads[0] != loop_thread


async def test_sync_handler_returning_an_awaitable_is_awaited() -> None:
    async def later() -> bool:
        return True

    enforcer = enforce([policy.ask_user("x", lambda c: later())])
    assert await allowed(enforcer, ToolCall(name="x"))


async def test_handler_raising_cancelled_error_denies() -> None:
    async def cancelled(call: ToolCall) -> bool:
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        future.cancel()
        return await future

    for timeout in (None, 5.0):
        enforcer = enforce([policy.ask_user("x", cancelled, name="c", timeout=timeout)])
        result = await enforcer.pre_tool_call(ToolCall(name="x"))
        assert not result.allow and "CancelledError" in result.message
        assert not (await enforcer.evaluate(ToolCall(name="x"))).allow


async def test_handler_own_timeout_error_is_a_failure_not_the_deadline() -> None:
    def own(call: ToolCall) -> bool:
        raise TimeoutError("the pager timed out")

    for timeout in (None, 5.0):
        enforcer = enforce([policy.ask_user("x", own, name="o", timeout=timeout)])
        result = await enforcer.pre_tool_call(ToolCall(name="x"))
        assert not result.allow and "the pager timed out" in result.message
        assert "within" not in result.message


async def test_predicate_raising_cancelled_error_is_a_failure() -> None:
    async def cancelled(args: dict[str, Any]) -> bool:
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        future.cancel()
        return await future

    guard = policy.deny("x", when=cancelled, name="guard")
    result = await enforce([guard]).pre_tool_call(ToolCall(name="x"))
    assert not result.allow and "CancelledError" in result.message
    opener = policy.allow("x", when=cancelled)  # APPROVE: does not match
    enforcer = enforce([opener, policy.deny_all()])
    assert not await allowed(enforcer, ToolCall(name="x"))
    assert (await enforcer.evaluate(ToolCall(name="x"))).policy is not opener


@pytest.mark.parametrize("where", ["handler", "predicate"])
async def test_cancelling_a_decision_propagates(where: str) -> None:
    entered = asyncio.Event()

    async def hang(_: Any) -> bool:
        entered.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise asyncio.CancelledError("re-raised") from None
        return True

    if where == "handler":
        rules = [policy.ask_user("x", hang, timeout=60)]
    else:
        rules = [policy.deny("x", when=hang)]
    enforcer = enforce(rules)
    for decide in (enforcer.pre_tool_call, enforcer.evaluate):
        entered.clear()
        task = asyncio.create_task(decide(ToolCall(name="x")))  # type: ignore[operator]
        await entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_evaluate_without_asking() -> None:
    asked: list[ToolCall] = []
    enforcer = enforce([policy.ask_user("x", lambda c: asked.append(c) or True)])
    decision = await enforcer.evaluate(ToolCall(name="x"), ask=False)
    assert not decision.allow and decision.decision is Decision.ASK_USER and not asked
    assert "ASKS THE USER" in str(decision)
    assert (await enforcer.evaluate(ToolCall(name="x"))).allow and asked


# -- messages and explanation -------------------------------------------------------------------


async def test_messages_name_the_policy_or_use_the_reason() -> None:
    enforcer = enforce(
        [policy.deny("a", name="named"), policy.deny("b"), policy.deny("c", reason="Because.")]
    )
    assert (await enforcer.pre_tool_call(ToolCall(name="a"))).message == "Denied by policy 'named'."
    assert (await enforcer.pre_tool_call(ToolCall(name="b"))).message == "Denied by policy 'b'."
    assert (await enforcer.pre_tool_call(ToolCall(name="c"))).message == "Because."


async def test_evaluate_traces_rules_in_bucket_order() -> None:
    enforcer = enforce(
        [
            policy.allow_all(),
            policy.allow("x", when=lambda a: False, name="never"),
            policy.deny("x", when=lambda a: a.get("bad", False), name="guard"),
            policy.deny("y"),
        ]
    )
    decision = await enforcer.evaluate(ToolCall(name="x"))
    assert isinstance(decision, PolicyDecision)
    assert [e.policy.label for e in decision.trace] == ["guard", "never", "allow_all"]
    assert [e.bucket for e in decision.trace] == [0, 2, 8]
    assert [e.matched for e in decision.trace] == [False, False, True]
    assert all(e.elapsed_ns >= 0 for e in decision.trace)
    assert decision.bucket == 8 and decision.bucket_name == "* allow" and decision.allow
    text = str(decision)
    assert "x: ALLOWED by policy 'allow_all'" in text and "guard" in text and "<- decides" in text


# -- shadow mode and HookRunner ---------------------------------------------------------------


async def test_shadow_mode_logs_but_allows(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="antigravity_sdk.policy")
    asked: list[ToolCall] = []
    rules = [
        policy.deny("run_command", name="no-shell"),
        policy.deny("x", when=lambda a: 1 / 0),
        policy.ask_user("y", lambda c: asked.append(c) or False),
    ]
    shadow = enforce(rules, mode="shadow")
    for name in ("run_command", "x", "y", "z"):
        assert (await shadow.pre_tool_call(ToolCall(name=name))).allow
    assert not asked, "shadow mode must not prompt anyone"
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "would be denied by policy 'no-shell'" in logged and "would ask the user" in logged
    # evaluate() still reports what the rules decide.
    assert not (await shadow.evaluate(ToolCall(name="run_command"))).allow
    assert not (await enforce(rules).pre_tool_call(ToolCall(name="run_command"))).allow


async def test_enforcer_is_a_hook() -> None:
    runner = HookRunner([enforce([policy.deny("run_command", reason="nope")])])
    result = await runner.dispatch_pre_tool_call(cmd("ls"))
    assert not result.allow and result.message == "nope"
    assert (await runner.dispatch_pre_tool_call(ToolCall(name="view_file"))).allow
