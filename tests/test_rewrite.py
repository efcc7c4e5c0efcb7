"""Argument rewriting without a harness: HookResult, HookRunner chaining, the check on
rewritten arguments (properties over the space of JSON values), and the PRE_TOOL reply."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_protocol_core import MAIN, core, hook, pre_tool

from antigravity_sdk import Hook, HookResult, HookRunner, ToolCall, ToolResult
from antigravity_sdk.errors import ToolExecutionError
from antigravity_sdk.harness.catalog import TOOLS, ToolGuard
from antigravity_sdk.harness.effects import ConfirmTool, HookCall, PolicyRequest
from antigravity_sdk.harness.protocol import SessionCore
from antigravity_sdk.harness.rewrite import json_args, to_struct

# -- HookResult ---------------------------------------------------------------------------


def test_hook_result_stays_backwards_compatible() -> None:
    assert HookResult.allowed() is HookResult.ALLOWED
    assert HookResult.allowed().args is None
    assert HookResult(allow=False, message="no") == HookResult.denied("no")
    assert HookResult.allowed("ok") == HookResult(allow=True, message="ok")


def test_rewrite_is_an_allow_with_complete_arguments() -> None:
    source = {"CommandLine": "echo safe"}
    result = HookResult.rewrite(source, msg="sanitised")
    assert (result.allow, result.message, result.args) == (True, "sanitised", source)
    assert result.args is not source


def test_a_deny_cannot_rewrite_and_a_rewrite_needs_a_mapping() -> None:
    with pytest.raises(ValueError, match="cannot carry rewritten args"):
        HookResult(allow=False, message="no", args={})
    with pytest.raises(TypeError, match="must be a mapping"):
        HookResult.rewrite(["CommandLine"])  # type: ignore[arg-type]


# -- HookRunner chaining ------------------------------------------------------------------


class Rewrites(Hook):
    def __init__(self, **changes: Any) -> None:
        self.changes = changes
        self.seen: list[ToolCall] = []

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        self.seen.append(tool_call)
        return HookResult.rewrite({**tool_call.args, **self.changes})


class Sees(Hook):
    def __init__(self, answer: HookResult = HookResult.ALLOWED) -> None:
        self.answer = answer
        self.seen: list[ToolCall] = []

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        self.seen.append(tool_call)
        return self.answer


CALL = ToolCall(name="run_command", args={"CommandLine": "rm -rf x", "Cwd": "/ws"}, id="c1")


def decide(runner: HookRunner, call: ToolCall = CALL) -> HookResult:
    return asyncio.run(runner.dispatch_pre_tool_call(call))


def test_later_hooks_see_the_rewrite_and_the_answer_carries_it() -> None:
    first, second, last = Rewrites(CommandLine="echo one"), Rewrites(Cwd="/ws/sub"), Sees()
    result = decide(HookRunner([first, second, last]))
    assert first.seen[0] is CALL
    assert second.seen[0].args == {"CommandLine": "echo one", "Cwd": "/ws"}
    assert last.seen[0].args == {"CommandLine": "echo one", "Cwd": "/ws/sub"}
    assert last.seen[0].name == "run_command" and last.seen[0].id == "c1"
    assert result == HookResult(allow=True, args={"CommandLine": "echo one", "Cwd": "/ws/sub"})
    assert CALL.args == {"CommandLine": "rm -rf x", "Cwd": "/ws"}  # the model's call kept


def test_without_a_rewrite_the_answer_is_the_shared_allow() -> None:
    assert decide(HookRunner([Sees(), Sees()])) is HookResult.ALLOWED


def test_a_deny_after_a_rewrite_wins() -> None:
    result = decide(HookRunner([Rewrites(CommandLine="echo"), Sees(HookResult.denied("no"))]))
    assert result == HookResult.denied("no")


class Raises(Hook):
    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        raise RuntimeError("boom")


def test_a_hook_raising_after_a_rewrite_denies() -> None:
    result = decide(HookRunner([Rewrites(CommandLine="echo"), Raises()]))
    assert not result.allow and "Raises.pre_tool_call failed" in result.message


def test_a_rewrite_the_check_refuses_denies_and_no_later_hook_runs() -> None:
    def refuse(call: ToolCall, args: dict[str, Any]) -> ToolCall:
        raise ValueError("not on my watch")

    later = Sees()
    result = decide(HookRunner([Rewrites(CommandLine="echo"), later], check_rewrite=refuse))
    assert not result.allow
    assert result.message == (
        "refused: hook Rewrites rewrote the call's arguments unusably: not on my watch"
    )
    assert later.seen == []


class Reviewer(Sees):
    reviews_rewrites = True


def test_a_rewrite_after_the_last_reviewer_is_refused() -> None:
    reviewer = Reviewer()
    assert not decide(HookRunner([reviewer, Rewrites(CommandLine="echo")])).allow
    assert "runs after the policies" in decide(HookRunner([reviewer, Rewrites(A=1)])).message
    before = decide(HookRunner([Rewrites(CommandLine="echo"), reviewer]))
    assert before.allow and before.args is not None
    # The position counts per registration: the same hook before and after the reviewer.
    twice = Rewrites(CommandLine="echo")
    assert not decide(HookRunner([twice, reviewer, twice])).allow
    assert decide(HookRunner([Rewrites(CommandLine="echo")])).allow  # no reviewer, no rule


class MutatesRewrite(Hook):
    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        tool_call.args["CommandLine"] = "rm -rf /"
        return HookResult.allowed()


def test_changing_a_rewrite_in_place_denies() -> None:
    result = decide(HookRunner([Rewrites(CommandLine="echo"), MutatesRewrite()]))
    assert not result.allow and "in place" in result.message


def test_the_default_check_refuses_what_is_not_plain_json() -> None:
    result = decide(HookRunner([Rewrites(CommandLine={"a", "b"})]))
    assert not result.allow and "set is not a JSON value" in result.message


def test_a_rewrite_too_deep_to_check_is_refused() -> None:
    deep: list[Any] = []
    for _ in range(5000):
        deep = [deep]
    result = decide(HookRunner([Rewrites(CommandLine=deep)]))
    assert not result.allow and "RecursionError" not in result.message
    assert "rewrote the call's arguments unusably" in result.message


class TurnRewrite(Hook):
    async def pre_turn(self) -> HookResult:
        return HookResult.rewrite({"prompt": "x"})

    async def on_tool_error(self, error: Exception) -> tuple[HookResult, Any]:
        return HookResult.rewrite({"x": 1}), "recovered"


def test_only_pre_tool_call_may_rewrite() -> None:
    runner = HookRunner([TurnRewrite()])
    turn = asyncio.run(runner.dispatch_pre_turn())
    assert not turn.allow and "pre_turn has no arguments" in turn.message
    error = ToolExecutionError("failed", CALL)
    recovered, value = asyncio.run(runner.dispatch_on_tool_error(error))
    assert not recovered.allow and value is None


# -- the check: plain JSON, canonical, no collisions (properties) --------------------------

KEYS = st.sampled_from(["a", "A", "b", "Cwd", "cwd", "CWD", "ß", "SS", "ss", "K", "k", "\u212a"])
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5)
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=12,
)


def collides(value: Any) -> bool:
    if isinstance(value, dict):
        folded = [k.casefold() for k in value]
        return len(set(folded)) < len(folded) or any(collides(v) for v in value.values())
    if isinstance(value, list):
        return any(collides(v) for v in value)
    return False


def from_struct(struct: dict[str, Any]) -> dict[str, Any]:
    return {f["name"]: from_value(f["value"]) for f in struct["fields"]}


def from_value(value: dict[str, Any]) -> Any:
    ((kind, inner),) = value.items()
    if kind == "structValue":
        return from_struct(inner)
    if kind == "listValue":
        return [from_value(v) for v in inner["values"]]
    return None if kind == "nullValue" else inner


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(KEYS, JSON, max_size=5))
def test_a_rewrite_is_refused_exactly_when_keys_collide_and_else_survives_the_wire(
    args: dict[str, Any],
) -> None:
    if collides(args):
        with pytest.raises(ValueError, match="differ only in case"):
            json_args(args)
        return
    plain = json_args(args)
    assert json.dumps(plain, sort_keys=True) == json.dumps(args, sort_keys=True)
    # The Struct the harness reads decodes, through its JSON, to the same value.
    wire = json.loads(json.dumps(to_struct(plain)))
    assert json.dumps(from_struct(wire), sort_keys=True) == json.dumps(args, sort_keys=True)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"n": math.nan}, "is not a JSON number"),
        ({"n": math.inf}, "is not a JSON number"),
        ({"n": 2**53 + 1}, "beyond 2\\*\\*53"),
        ({"n": [{"deep": -(2**60)}]}, "beyond 2\\*\\*53"),
        ({1: "x"}, "is not a str"),
        ({"s": "\ud800"}, "not valid Unicode"),
        ({"\ud800": "s"}, "not valid Unicode"),
        ({"o": object()}, "object is not a JSON value"),
        ({"b": b"bytes"}, "bytes is not a JSON value"),
        ({"x": [{"a": 1, "A": 2}]}, "differ only in case"),
    ],
)
def test_json_args_refuses_what_the_harness_would_read_differently(
    args: dict[Any, Any], message: str
) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        json_args(args)


def test_json_args_refuses_subclasses_and_copies_deeply() -> None:
    class Sneaky(str):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = str.__hash__

    with pytest.raises(TypeError, match="Sneaky is not a JSON value"):
        json_args({"CommandLine": Sneaky("rm -rf /")})
    nested = {"l": [{"k": "v"}]}
    copied = json_args(nested)
    nested["l"][0]["k"] = "changed"
    assert copied == {"l": [{"k": "v"}]}


BUILTIN_NAMES = sorted(name for name, spec in TOOLS.items() if spec.args)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(BUILTIN_NAMES),
    st.dictionaries(
        st.sampled_from(["CommandLine", "commandline", "Cwd", "cwd", "AbsolutePath", "x"])
        | st.text(min_size=1, max_size=4),
        st.text(max_size=4),
        max_size=4,
    ),
)
def test_check_rewrite_canonicalises_or_refuses_builtin_arguments(
    name: str, args: dict[str, str]
) -> None:
    c = SessionCore()
    call = ToolCall(name=name, args={}, id="c")
    takes = {key.casefold(): key for key in (*TOOLS[name].args, "toolAction", "toolSummary")}
    try:
        rewritten = c.check_rewrite(call, args)
    except ValueError as exc:
        folded = [k.casefold() for k in args]
        unknown = [k for k in folded if k not in takes]
        assert len(set(folded)) < len(folded) or unknown, exc
        return
    assert rewritten.name == name and rewritten.id == "c"
    assert rewritten.args == {takes[k.casefold()]: v for k, v in args.items()}


def test_check_rewrite_applies_the_guard_and_host_tool_schemas() -> None:
    guard = ToolGuard(enabled=frozenset({"invoke_subagent", "greet"}))
    c = SessionCore(frozenset({"greet"}), guard, host_args={"greet": frozenset({"name"})})
    subagent = ToolCall(name="invoke_subagent", args={"Subagents": [{"TypeName": "research"}]})
    with pytest.raises(ValueError, match="would run its tools without asking"):
        c.check_rewrite(subagent, {"Subagents": [{"TypeName": "self"}]})
    greet = ToolCall(name="greet", args={"name": "a"})
    assert c.check_rewrite(greet, {"name": "b"}).args == {"name": "b"}
    with pytest.raises(ValueError, match="greet takes no argument 'Name'"):
        c.check_rewrite(greet, {"Name": "b"})
    mcp = ToolCall(name="record", server_name="srv", args={})
    with pytest.raises(ValueError, match="MCP server 'srv' is not configured"):
        c.check_rewrite(mcp, {"text": "x"})


def test_the_core_remembers_the_rewritten_call_for_post_tool_call() -> None:
    c = core()
    (asked,) = c.receive(pre_tool("run_command", {"CommandLine": "rm -rf x"}))
    assert isinstance(asked, HookCall)
    ran = c.check_rewrite(asked.arg, {"CommandLine": "echo safe"})
    post = hook(
        "LIFECYCLE_HOOK_POST_TOOL",
        postToolArgs={"toolName": "run_command", "result": "safe", "callId": "call_2"},
    )
    (done,) = c.receive(post)
    assert isinstance(done, HookCall) and isinstance(done.arg, ToolResult)
    assert done.arg.tool_call is ran


# -- the PRE_TOOL reply and the routes that cannot carry a rewrite -------------------------


class Dispatch:
    """A HookDispatch answering every pre_tool_call with `answer` (after `then`)."""

    def __init__(self, answer: HookResult, then: Any = None) -> None:
        self.answer = answer
        self.then = then

    async def dispatch(self, event: str, arg: Any = None) -> Any:
        if self.then is not None:
            self.then(arg)
        return self.answer


def test_the_reply_carries_the_rewrite_as_a_struct() -> None:
    request = HookCall("r1", "pre_tool_call", CALL)
    args = {"CommandLine": "echo", "WaitMsBeforeAsync": 5, "RunPersistent": False}
    outcome = asyncio.run(request.decide(Dispatch(HookResult(args=args)), None))  # type: ignore[arg-type]
    assert request.reply(outcome) == {
        "callHookResponse": {
            "requestId": "r1",
            "preToolResult": {
                "decision": "ALLOW",
                "modifiedArgs": {
                    "fields": [
                        {"name": "CommandLine", "value": {"stringValue": "echo"}},
                        {"name": "WaitMsBeforeAsync", "value": {"numberValue": 5}},
                        {"name": "RunPersistent", "value": {"boolValue": False}},
                    ]
                },
            },
        }
    }


def test_an_mcp_rewrite_keeps_its_server_and_tool() -> None:
    call = ToolCall(name="record", server_name="rec", args={"text": "a"})
    reply = HookCall("r1", "pre_tool_call", call).reply(HookResult(args={"text": "b"}))
    fields = reply["callHookResponse"]["preToolResult"]["modifiedArgs"]
    assert from_struct(fields) == {
        "ServerName": "rec",
        "ToolName": "record",
        "Arguments": {"text": "b"},
    }


def test_a_plain_allow_has_no_modified_args() -> None:
    reply = HookCall("r1", "pre_tool_call", CALL).reply(HookResult.ALLOWED)
    assert reply["callHookResponse"]["preToolResult"] == {"decision": "ALLOW"}


@pytest.mark.parametrize(
    "request_",
    [ConfirmTool(MAIN, 3, CALL), PolicyRequest("p1", CALL)],
    ids=["confirmation", "policy-request"],
)
def test_routes_without_a_rewrite_field_refuse_a_rewrite(request_: Any) -> None:
    outcome = asyncio.run(request_.decide(Dispatch(HookResult(args={"CommandLine": "x"})), None))
    assert not outcome.allow and "cannot apply a rewrite on this route" in outcome.message


@pytest.mark.parametrize(
    "request_",
    [HookCall("r1", "pre_tool_call", CALL), ConfirmTool(MAIN, 3, CALL), PolicyRequest("p", CALL)],
    ids=["pre-tool", "confirmation", "policy-request"],
)
def test_arguments_changed_in_place_are_refused_on_every_route(request_: Any) -> None:
    call = CALL.model_copy(deep=True)
    request_ = type(request_)(*[call if v is CALL else v for v in _fields(request_)])

    def sanitise(arg: ToolCall) -> None:
        arg.args["CommandLine"] = "echo safe"

    outcome = asyncio.run(request_.decide(Dispatch(HookResult.ALLOWED, sanitise), None))
    assert not outcome.allow and "changed the tool call's arguments in place" in outcome.message


def _fields(request: Any) -> list[Any]:
    return [getattr(request, name) for name in request.__slots__]
