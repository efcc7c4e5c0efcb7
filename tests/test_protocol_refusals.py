"""What the session core refuses by itself: arguments that cannot be checked, and requests
the harness makes on its own while no turn of the client's runs (a scheduled wake)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from test_protocol_core import MAIN, hook, init, pre_tool

from antigravity_sdk.harness import effects
from antigravity_sdk.harness.catalog import TOOLS, ToolGuard
from antigravity_sdk.harness.effects import HALT, HaltWake, HookCall, RunTool, TurnEnded, Unasked
from antigravity_sdk.harness.protocol import SessionCore

SUB = "5ab0c0ffee5ab0c0ffee5ab0c0ffee00"
GUARD = ToolGuard(
    enabled=frozenset({"run_command", "view_file", "invoke_subagent"}),
    mcp_servers=frozenset({"db"}),
)


def started(guard: ToolGuard | None = GUARD) -> SessionCore:
    core = SessionCore(guard=guard)
    core.receive(init())
    return core


def mcp_call(arguments: Any, *, raw: str | None = None) -> dict[str, Any]:
    wrapper = {"ServerName": "db", "ToolName": "query", "Arguments": arguments}
    frame = pre_tool("call_mcp_tool", wrapper, serverName="db")
    if raw is not None:
        frame["callHookRequest"]["preToolArgs"]["argumentsJson"] = raw
    return frame


def state(trajectory: str, value: str, parent: str = "") -> dict[str, Any]:
    update: dict[str, Any] = {"trajectoryId": trajectory, "state": value}
    if parent:
        update["parentTrajectoryId"] = parent
    return {"trajectoryStateUpdate": update}


# -- MCP Arguments ----------------------------------------------------------------------------


def test_mcp_arguments_that_are_not_json_are_refused_and_the_session_goes_on() -> None:
    core = started()
    core.user_input("go", streaming=False)
    (call,) = core.receive(mcp_call("{not json"))
    assert isinstance(call, HookCall) and "Arguments cannot be checked" in call.refusal
    for bad in ("[1]", "3", 4, ["x"], None):
        (call,) = core.receive(mcp_call(bad))
        assert isinstance(call, HookCall) and "Arguments cannot be checked" in call.refusal
    (call,) = core.receive(mcp_call('{"sql": "select 1"}'))
    assert isinstance(call, HookCall) and call.refusal == ""
    assert call.arg.args == {"sql": "select 1"}
    (call,) = core.receive(mcp_call({"sql": "select 1"}))
    assert call.arg.args == {"sql": "select 1"}
    # A wrapper with a key of its own would hide the tool's arguments from the policies.
    frame = pre_tool(
        "call_mcp_tool",
        {"ServerName": "db", "ToolName": "q", "Arguments": {}, "Extra": 1},
        serverName="db",
    )
    (call,) = core.receive(frame)
    assert "takes no argument 'Extra'" in call.refusal


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
NAMES = st.sampled_from([*TOOLS, "call_mcp_tool", "create_file", "unknown", ""])


@given(NAMES, st.one_of(JSON, st.text(max_size=20)), st.booleans(), st.booleans())
@settings(max_examples=400, deadline=None)
def test_no_arguments_ever_raise_out_of_the_core(
    name: str, value: Any, as_text: bool, in_turn: bool
) -> None:
    """Whatever the model sends as arguments (any JSON, or any text where JSON belongs,
    nested anywhere), the core answers a request: it never raises."""
    core = started()
    if in_turn:
        core.user_input("go", streaming=False)
    raw = value if as_text and isinstance(value, str) else json.dumps(value)
    frames = [
        pre_tool(name, {}, serverName="db" if name == "call_mcp_tool" else ""),
        mcp_call(value),
        mcp_call(None, raw=raw),
    ]
    frames[0]["callHookRequest"]["preToolArgs"]["argumentsJson"] = raw
    for key in ("Subagents", "RequestedTerminalID", "questions"):
        frames.append(pre_tool(name, {key: value}))
        frames.append(pre_tool(name, {key: [value, {key.lower(): value}]}))
    for frame in frames:
        (request,) = core.receive(frame)
        assert isinstance(request, HookCall | Unasked)
    tool = {"toolCall": {"name": name, "argumentsJson": raw, "id": "c", "trajectoryId": MAIN}}
    (run,) = core.receive(tool)
    assert isinstance(run, RunTool | Unasked)


# -- a wake outside any turn ------------------------------------------------------------------


def test_a_wake_outside_any_turn_is_refused_unasked_and_halted() -> None:
    core = started()
    assert core.receive(state(SUB, "STATE_RUNNING", MAIN)) == []  # the subagent wakes first
    assert core.receive(state(MAIN, "STATE_WAITING_FOR_SUBAGENTS")) == []
    (call,) = core.receive(pre_tool("view_file", {"AbsolutePath": "/ws/a"}, trajectoryId=SUB))
    assert isinstance(call, Unasked) and isinstance(call.request, HookCall)
    reply = call.reply(asyncio.run(call.decide(None, None)))  # type: ignore[arg-type]
    assert reply["callHookResponse"]["preToolResult"]["decision"] == "DENY"
    assert "allow_ungoverned('schedule')" in reply["callHookResponse"]["preToolResult"]["reason"]
    (halt,) = core.receive(state(MAIN, "STATE_RUNNING"))  # the root's woken turn: halted
    assert isinstance(halt, HaltWake) and halt.reply(None) == HALT
    assert core.receive(state(MAIN, "STATE_RUNNING")) == []  # once per wake
    (post,) = core.receive(hook("LIFECYCLE_HOOK_POST_TURN", postTurnArgs={"responseText": "x"}))
    assert isinstance(post, Unasked)
    assert post.reply(None) == {
        "callHookResponse": {"requestId": "hook_request_2", "emptyResult": {}}
    }
    (pre_turn,) = core.receive(hook("LIFECYCLE_HOOK_PRE_TURN", preTurnArgs={}))
    assert isinstance(pre_turn, Unasked)
    assert pre_turn.reply(None)["callHookResponse"]["preTurnResult"]["decision"] == "DENY"
    assert core.receive(state(MAIN, "STATE_CANCELLED")) == []  # no turn of ours ended
    (halt,) = core.receive(state(MAIN, "STATE_RUNNING"))  # the next wake is halted too
    assert isinstance(halt, HaltWake)
    assert core.receive(state(MAIN, "STATE_FULLY_IDLE")) == []


def test_inside_a_turn_nothing_changes_and_the_opt_in_lets_wakes_run() -> None:
    core = started()
    core.user_input("go", streaming=False)
    assert core.receive(state(MAIN, "STATE_RUNNING")) == []
    (call,) = core.receive(pre_tool("view_file", {"AbsolutePath": "/ws/a"}))
    assert isinstance(call, HookCall) and call.refusal == ""
    (ended,) = core.receive(state(MAIN, "STATE_FULLY_IDLE"))
    assert isinstance(ended, TurnEnded)
    (call,) = core.receive(pre_tool("view_file", {"AbsolutePath": "/ws/a"}))
    assert isinstance(call, Unasked)  # the turn is over

    opted = started(ToolGuard(enabled=GUARD.enabled, scheduled_wakes=True))
    assert opted.receive(state(MAIN, "STATE_RUNNING")) == []
    (call,) = opted.receive(pre_tool("view_file", {"AbsolutePath": "/ws/a"}))
    assert isinstance(call, HookCall) and call.refusal == ""


@given(
    st.lists(
        st.sampled_from(
            [
                ("state", MAIN, "STATE_RUNNING"),
                ("state", SUB, "STATE_RUNNING"),
                ("state", MAIN, "STATE_WAITING_FOR_SUBAGENTS"),
                ("state", MAIN, "STATE_FULLY_IDLE"),
                ("state", SUB, "STATE_FULLY_IDLE"),
                ("state", MAIN, "STATE_CANCELLED"),
                ("tool", MAIN, ""),
                ("tool", SUB, ""),
                ("turn", "", ""),
            ]
        ),
        max_size=25,
    )
)
def test_outside_a_turn_no_request_is_ever_asked(events: list[tuple[str, str, str]]) -> None:
    """In any order of frames, a request reaches the hooks only between `user_input` and
    the main trajectory's end, and a turn of ours ends only inside one."""
    core = started()
    in_turn = False
    for kind, trajectory, value in events:
        if kind == "turn":
            if not in_turn:
                core.user_input("go", streaming=False)
                in_turn = True
            continue
        if kind == "state":
            parent = MAIN if trajectory == SUB else ""
            found = core.receive(state(trajectory, value, parent))
            ends = trajectory == MAIN and value in ("STATE_FULLY_IDLE", "STATE_CANCELLED")
            assert any(isinstance(e, TurnEnded) for e in found) is (in_turn and ends)
            if in_turn:
                assert not any(isinstance(e, HaltWake) for e in found)
            if ends:
                in_turn = False
            continue
        (call,) = core.receive(
            pre_tool("view_file", {"AbsolutePath": "/a"}, trajectoryId=trajectory)
        )
        assert isinstance(call, HookCall if in_turn else Unasked)
        assert isinstance(call, effects.Unasked) or call.refusal == ""


def test_arguments_nested_too_deep_are_refused() -> None:
    core = started()
    core.user_input("go", streaming=False)
    for depth in (100, 5000, 100_000):
        raw = '{"a": ' + "[" * depth + "]" * depth + "}"
        frame = pre_tool("view_file", {})
        frame["callHookRequest"]["preToolArgs"]["argumentsJson"] = raw
        (call,) = core.receive(frame)  # never raises
        assert isinstance(call, HookCall)
        assert bool(call.refusal) is (depth > 100), depth
