"""Unit tests of the sans-I/O `SessionCore` and of the replies its request effects build.

Frames are the ones observed from harness 0.1.22 (/work/ref/FINDINGS.md), trimmed.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from antigravity_sdk.errors import ProtocolError, ToolExecutionError
from antigravity_sdk.harness import wire
from antigravity_sdk.harness.effects import (
    HALT,
    SESSION_END,
    AskUser,
    Chunk,
    ConfirmTool,
    HookCall,
    Initialized,
    PolicyRequest,
    RunTool,
    SandboxStatus,
    SessionEnded,
    TurnEnded,
    Unasked,
)
from antigravity_sdk.harness.protocol import HOOK_EVENTS, SessionCore
from antigravity_sdk.harness.wire import decode_frame
from antigravity_sdk.types import (
    AskQuestionEntry,
    AskQuestionOption,
    HookResult,
    QuestionHookResult,
    QuestionResponse,
    StreamChunk,
    ToolCall,
    ToolResult,
)

MAIN = "fdf309472cb77c8949cdb2128f70545b"
SUB = "8df7a1b2c3d4e5f60718293a4b5c254d"


def init(cascade: str = MAIN, **extra: Any) -> dict[str, Any]:
    return {
        "initializeConversationResponse": {
            "cascadeId": cascade,
            "sandboxStatus": {"available": True, "unavailableReason": ""},
            **extra,
        },
        "seqNum": "1",
        "timestampMicros": "1795329222316394",
    }


def core() -> SessionCore:
    c = SessionCore()
    (effect,) = c.receive(init())
    assert effect == Initialized(MAIN, (), SandboxStatus(available=True))
    return c


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({"available": True}, SandboxStatus(True)),
        ({"unavailableReason": "no user namespaces"}, SandboxStatus(False, "no user namespaces")),
        ({}, SandboxStatus(False)),  # false and "" are left out on the wire
        (None, None),  # an older harness says nothing
    ],
)
def test_initialized_reports_the_sandbox_status(
    status: dict[str, Any] | None, expected: SandboxStatus | None
) -> None:
    frame = init()
    if status is None:
        del frame["initializeConversationResponse"]["sandboxStatus"]
    else:
        frame["initializeConversationResponse"]["sandboxStatus"] = status
    (effect,) = SessionCore().receive(frame)
    assert isinstance(effect, Initialized)
    assert effect.sandbox == expected


def hook(type_: str, request_id: str = "hook_request_2", **args: Any) -> dict[str, Any]:
    name = type_.removeprefix("LIFECYCLE_HOOK_").title().replace("_", "")
    return {
        "callHookRequest": {"requestId": request_id, "name": name, "type": type_, **args},
        "seqNum": "7",
    }


def pre_tool(tool: str, args: dict[str, Any], call_id: str = "call_2", **extra: Any) -> Any:
    return hook(
        "LIFECYCLE_HOOK_PRE_TOOL",
        preToolArgs={
            "toolName": tool,
            "argumentsJson": json.dumps(args),
            "serverName": "",
            "callId": call_id,
            "trajectoryId": MAIN,
            "stepIndex": 2,
            **extra,
        },
    )


def step(index: int, state: str, source: str, target: str, **fields: Any) -> dict[str, Any]:
    return {
        "stepUpdate": {
            "cascadeId": MAIN,
            "trajectoryId": fields.pop("trajectoryId", MAIN),
            "stepIndex": index,
            "state": state,
            "source": source,
            "target": target,
            "thinking": "",
            "thinkingDelta": "",
            **fields,
        },
        "seqNum": "9",
    }


def idle(trajectory: str = MAIN, state: str = "STATE_FULLY_IDLE", **extra: Any) -> Any:
    return {"trajectoryStateUpdate": {"trajectoryId": trajectory, "state": state, **extra}}


def usage(prompt: int, candidates: int) -> dict[str, Any]:
    counts = {
        "promptTokenCount": str(prompt),
        "cachedContentTokenCount": "0",
        "candidatesTokenCount": str(candidates),
        "thoughtsTokenCount": "0",
        "totalTokenCount": str(prompt + candidates),
    }
    return {"usageUpdate": {"agents": [{"trajectoryId": MAIN, "usage": counts}], "total": counts}}


# -- hook calls ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("internal", "model_facing"),
    [
        ("create_file", "write_to_file"),
        ("edit_file", "replace_file_content"),
        ("list_directory", "list_dir"),
        ("run_command", "run_command"),
        ("view_file", "view_file"),
        ("ask_question", "ask_question"),
        ("invoke_subagent", "invoke_subagent"),
        ("get_weather", "get_weather"),
    ],
)
def test_pre_tool_maps_internal_tool_names(internal: str, model_facing: str) -> None:
    c = core()
    args = {"TargetFile": "/ws/a.txt", "CodeContent": "x > y\n", "Overwrite": False}
    (effect,) = c.receive(pre_tool(internal, args))
    assert effect == HookCall(
        "hook_request_2",
        "pre_tool_call",
        ToolCall(name=model_facing, args=args, id="call_2", trajectory_id=MAIN, step_index=2),
    )


def test_pre_tool_go_encoded_arguments_and_server_name() -> None:
    c = core()
    frame = pre_tool("run_command", {})
    frame["callHookRequest"]["preToolArgs"]["argumentsJson"] = (
        '{"CommandLine":"echo hi \\u003e ran.txt","Cwd":"/ws","WaitMsBeforeAsync":5000}'
    )
    frame["callHookRequest"]["preToolArgs"]["serverName"] = "github"
    (effect,) = c.receive(frame)
    assert isinstance(effect, HookCall)
    assert effect.arg.args["CommandLine"] == "echo hi > ran.txt"
    assert effect.arg.server_name == "github"
    assert effect.arg.qualified_name == "github/run_command"


def test_post_tool_parses_json_results_and_keeps_plain_text() -> None:
    c = core()
    c.receive(pre_tool("run_command", {"CommandLine": "echo hi"}))
    result = '{"command_line":"echo hi", "exit_code":0, "combined_output":"hi\\r\\n"}'
    (effect,) = c.receive(
        hook(
            "LIFECYCLE_HOOK_POST_TOOL",
            "hook_request_3",
            postToolArgs={
                "toolName": "run_command",
                "result": result,
                "error": "",
                "callId": "call_2",
                "trajectoryId": MAIN,
                "stepIndex": 2,
            },
        )
    )
    assert effect == HookCall(
        "hook_request_3",
        "post_tool_call",
        ToolResult(
            name="run_command",
            id="call_2",
            result={"command_line": "echo hi", "exit_code": 0, "combined_output": "hi\r\n"},
            tool_call=ToolCall(
                name="run_command",
                args={"CommandLine": "echo hi"},
                id="call_2",
                trajectory_id=MAIN,
                step_index=2,
            ),
        ),
    )
    (effect,) = c.receive(
        hook(
            "LIFECYCLE_HOOK_POST_TOOL",
            "hook_request_4",
            postToolArgs={
                "toolName": "create_file",
                "result": "Tool execution",
                "callId": "call_3",
                "trajectoryId": MAIN,
                "stepIndex": 3,
            },
        )
    )
    assert effect.arg == ToolResult(name="write_to_file", id="call_3", result="Tool execution")


def test_on_tool_error_carries_the_call_seen_in_pre_tool() -> None:
    c = core()
    c.receive(pre_tool("view_file", {"AbsolutePath": "/nonexistent/missing.txt"}))
    (effect,) = c.receive(
        hook(
            "LIFECYCLE_HOOK_ON_TOOL_ERROR",
            "hook_request_3",
            onToolErrorArgs={
                "toolName": "view_file",
                "errorMessage": "path file:///nonexistent/missing.txt does not exist",
                "callId": "call_2",
                "trajectoryId": MAIN,
                "stepIndex": 2,
            },
        )
    )
    assert isinstance(effect, HookCall) and effect.event == "on_tool_error"
    error = effect.arg
    assert isinstance(error, ToolExecutionError)
    assert str(error) == "path file:///nonexistent/missing.txt does not exist"
    assert error.tool_call.name == "view_file"
    assert error.tool_call.args == {"AbsolutePath": "/nonexistent/missing.txt"}
    assert error.tool_call.id == "call_2"


def test_on_tool_error_for_an_unseen_call() -> None:
    c = core()
    (effect,) = c.receive(
        hook(
            "LIFECYCLE_HOOK_ON_TOOL_ERROR",
            onToolErrorArgs={"toolName": "edit_file", "callId": "call_9", "trajectoryId": MAIN},
        )
    )
    error = effect.arg  # type: ignore[union-attr]
    assert isinstance(error, ToolExecutionError)
    assert str(error) == "tool failed"  # no message from the harness: still a message
    assert error.tool_call == ToolCall(name="replace_file_content", id="call_9", trajectory_id=MAIN)


def test_hook_events_are_the_harness_lifecycle_hooks() -> None:
    assert HOOK_EVENTS == {
        "pre_turn": "LIFECYCLE_HOOK_PRE_TURN",
        "post_turn": "LIFECYCLE_HOOK_POST_TURN",
        "pre_tool_call": "LIFECYCLE_HOOK_PRE_TOOL",
        "post_tool_call": "LIFECYCLE_HOOK_POST_TOOL",
        "on_tool_error": "LIFECYCLE_HOOK_ON_TOOL_ERROR",
        "on_compaction": "LIFECYCLE_HOOK_ON_COMPACTION",
    }
    names = wire.pb.LifecycleHook.betterproto_renamed_proto_names_to_value()
    assert set(HOOK_EVENTS.values()) <= set(names)


def test_pre_turn_post_turn_compaction_and_session_hooks() -> None:
    c = core()
    (pre_turn,) = c.receive(
        hook(
            "LIFECYCLE_HOOK_PRE_TURN",
            "hook_request_1",
            preTurnArgs={
                "userInput": {"parts": [{"text": "Say "}, {"inlineData": {}}, {"text": "hello"}]}
            },
        )
    )
    assert pre_turn == HookCall("hook_request_1", "pre_turn", "Say hello")
    (post_turn,) = c.receive(
        hook(
            "LIFECYCLE_HOOK_POST_TURN",
            "hook_request_3",
            postTurnArgs={"responseText": "Hello", "trajectoryId": MAIN},
        )
    )
    assert post_turn == HookCall("hook_request_3", "post_turn", c.response())
    (compaction,) = c.receive(
        hook(
            "LIFECYCLE_HOOK_ON_COMPACTION",
            "hook_request_8",
            onCompactionArgs={"trajectoryId": MAIN, "stepIndex": 5, "summary": "the summary"},
        )
    )
    assert compaction == HookCall("hook_request_8", "on_compaction", "the summary")
    # Session start and end are dispatched by the SDK itself (the harness raises them
    # lazily or late); should the harness ask anyway, it gets an empty answer.
    (end,) = c.receive(hook("LIFECYCLE_HOOK_ON_SESSION_END", "hook_request_9"))
    assert end == HookCall("hook_request_9", "")
    assert end.reply(None) == {
        "callHookResponse": {"requestId": "hook_request_9", "emptyResult": {}}
    }


@pytest.mark.parametrize(
    "type_",
    ["LIFECYCLE_HOOK_ON_SESSION_START", "LIFECYCLE_HOOK_STOP", "LIFECYCLE_HOOK_FROM_THE_FUTURE"],
)
def test_hooks_the_sdk_does_not_dispatch_are_still_answered(type_: str) -> None:
    c = core()
    (effect,) = c.receive(hook(type_, "hook_request_0", stopArgs={"responseText": "x"}))
    assert effect == HookCall("hook_request_0", "")
    assert effect.reply(None) == {
        "callHookResponse": {"requestId": "hook_request_0", "emptyResult": {}}
    }


# -- tolerance -----------------------------------------------------------------------------


def test_unknown_event_kinds_are_ignored() -> None:
    c = core()
    assert c.receive({"brandNewEvent": {"x": 1}, "seqNum": "12"}) == []
    assert c.receive({"seqNum": "13", "timestampMicros": "1"}) == []
    assert c.receive({}) == []


def test_unknown_enum_values_are_kept_as_unknown() -> None:
    c = core()
    c.user_input("hi")
    effects = c.receive(
        step(1, "STATE_HOLOGRAPHIC", "SOURCE_ORACLE", "TARGET_USER", text="x", textDelta="x")
    )
    assert effects == []  # not a model->user step: no text chunk
    (only,) = c.response().steps
    assert (only.state, only.source, only.kind) == ("unknown", "unknown", "text")
    # A known trajectory state next to an unknown one: only FULLY_IDLE/CANCELLED end a turn.
    assert c.receive(idle(state="STATE_DREAMING")) == []


@pytest.mark.parametrize(
    "frame",
    [
        {"callHookRequest": ["not", "an", "object"]},
        {"callHookRequest": {"requestId": 7, "type": "LIFECYCLE_HOOK_PRE_TURN"}},
        {"callHookRequest": {"requestId": "r", "type": ["LIFECYCLE_HOOK_PRE_TOOL"]}},
        pre_tool("run_command", {}, stepIndex="two"),
        pre_tool("run_command", {}, stepIndex=True),
        {"stepUpdate": {"trajectoryId": MAIN, "stepIndex": 1, "text": 5}},
        {"stepUpdate": {"trajectoryId": MAIN, "stepIndex": 1.5}},
        {"stepUpdate": "x"},
        {"trajectoryStateUpdate": {"trajectoryId": 3, "state": "STATE_FULLY_IDLE"}},
        {"usageUpdate": {"total": {"promptTokenCount": "many"}}},
        {"initializeConversationResponse": {"cascadeId": None, "history": "x"}},
        {"initializeConversationResponse": {"cascadeId": "c", "history": {"a": 1}}},
        {"initializeConversationResponse": {"cascadeId": "c", "sandboxStatus": True}},
        {"initializeConversationResponse": {"sandboxStatus": {"available": "yes"}}},
        {"initializeConversationResponse": {"sandboxStatus": {"unavailableReason": 3}}},
        ["a", "list"],
        "a string",
    ],
)
def test_wrong_types_raise_protocol_error(frame: Any) -> None:
    c = core()
    c.user_input("hi")
    with pytest.raises(ProtocolError):
        c.receive(frame)


def test_decode_frame() -> None:
    assert decode_frame('{"seqNum": "1"}') == {"seqNum": "1"}
    with pytest.raises(ProtocolError, match="not JSON"):
        decode_frame("this is not json")
    with pytest.raises(ProtocolError, match="not a JSON object"):
        decode_frame("[1, 2]")
    with pytest.raises(ProtocolError):
        decode_frame(b"\xff\xfe")


# -- turns ---------------------------------------------------------------------------------


def plain_turn(c: SessionCore, reply: str = "Hello from the scripted model!") -> list[Any]:
    """The frames of FINDINGS §3 (plain text turn), fed to `c`; returns all effects."""
    half = len(reply) // 2
    frames = [
        idle(state="STATE_RUNNING"),
        step(
            0, "STATE_DONE", "SOURCE_USER", "TARGET_MODEL", textDelta="Say hello", text="Say hello"
        ),
        step(
            1,
            "STATE_ACTIVE",
            "SOURCE_MODEL",
            "TARGET_USER",
            textDelta=reply[:half],
            text=reply[:half],
        ),
        step(1, "STATE_ACTIVE", "SOURCE_MODEL", "TARGET_USER", textDelta=reply[half:], text=reply),
        step(1, "STATE_ACTIVE", "SOURCE_MODEL", "TARGET_USER", textDelta="", text=reply),
        step(1, "STATE_DONE", "SOURCE_MODEL", "TARGET_USER", textDelta="", text=reply),
        usage(1361, 7),
        idle(),
    ]
    effects: list[Any] = []
    for frame in frames:
        effects.extend(c.receive(frame))
    return effects


def test_plain_text_turn() -> None:
    c = core()
    assert c.user_input("Say hello") == {"userInput": {"parts": [{"text": "Say hello"}]}}
    effects = plain_turn(c)
    *chunks, end = effects
    assert "".join(e.chunk.text for e in chunks) == "Hello from the scripted model!"
    assert len(chunks) == 2
    assert all(e.chunk.type == "text" and e.chunk.step_index == 1 for e in chunks)
    assert isinstance(end, TurnEnded)
    assert (end.error, end.cancelled) == ("", False)
    response = end.response
    assert response.text == "Hello from the scripted model!"
    assert [(s.kind, s.state, s.source) for s in response.steps] == [
        ("user", "done", "user"),
        ("text", "done", "model"),
    ]
    assert response.usage is not None
    assert response.usage.prompt_token_count == 1361
    assert response.usage.total_token_count == 1368


def test_usage_is_a_per_turn_delta() -> None:
    c = core()
    c.user_input("one")
    first = plain_turn(c)[-1]
    c.user_input("two")
    frames = [usage(1361 + 1500, 7 + 9), idle()]
    second = [e for f in frames for e in c.receive(f)][-1]
    assert first.response.usage.candidates_token_count == 7
    assert second.response.usage.prompt_token_count == 1500
    assert second.response.usage.candidates_token_count == 9
    assert second.response.usage.total_token_count == 1509
    assert c.usage.total_token_count == 1361 + 7 + 1500 + 9  # the session's running total


def test_only_the_main_trajectory_ends_the_turn() -> None:
    c = core()
    c.user_input("delegate")
    sub = {"parentTrajectoryId": MAIN, "depth": 1}
    assert c.receive(idle(SUB, "STATE_RUNNING", **sub)) == []
    assert c.receive(
        step(
            0,
            "STATE_DONE",
            "SOURCE_MODEL",
            "TARGET_USER",
            trajectoryId=SUB,
            parentTrajectoryId=MAIN,
            text="sub says hi",
            textDelta="sub says hi",
        )
    ) == [Chunk(StreamChunk(type="text", text="sub says hi", step_index=0, trajectory_id=SUB))]
    assert c.receive(idle(SUB, **sub)) == []  # the subagent went idle: not our turn end
    assert c.receive(idle(SUB, "STATE_CANCELLED", **sub)) == []
    assert c.receive(idle("some-other-trajectory")) == []
    c.receive(step(1, "STATE_DONE", "SOURCE_MODEL", "TARGET_USER", text="main done"))
    (end,) = c.receive(idle())
    assert isinstance(end, TurnEnded)
    assert end.response.text == "main done"  # the subagent's text is not the answer
    assert [s.trajectory_id for s in end.response.steps] == [MAIN, SUB]


@pytest.mark.parametrize("raw", ["{not json", "[1, 2]"])
def test_a_host_tool_call_whose_arguments_are_not_an_object_fails_unrun(raw: str) -> None:
    """The model's arguments, not the harness's frame: refused (a failed tool), never a
    ProtocolError that would end the session."""
    frame = {"toolCall": {"id": "call_2", "name": "get_weather", "argumentsJson": raw}}
    (refused,) = SessionCore().receive(frame)
    assert isinstance(refused, Unasked) and isinstance(refused.request, RunTool)
    reply = refused.reply(None)["toolResponse"]
    assert "not" in reply["errorMessage"] and "responseJson" not in reply


def test_before_initialize_a_trajectory_without_parent_is_main() -> None:
    c = SessionCore()
    assert c.receive(idle("x", parentTrajectoryId="y")) == []
    (end,) = c.receive(idle("x"))
    assert isinstance(end, TurnEnded)


def test_cancelled_turn_carries_the_error() -> None:
    c = core()
    c.user_input("blocked")
    (end,) = c.receive(idle(state="STATE_CANCELLED", error="turn blocked by test"))
    assert end == TurnEnded(end.response, error="turn blocked by test", cancelled=True)
    assert end.response.text == ""
    assert end.response.steps == []


def test_turn_error_rides_on_fully_idle() -> None:
    c = core()
    c.user_input("x")
    (end,) = c.receive(idle(error="agent max token limit error"))
    assert (end.error, end.cancelled) == ("agent max token limit error", False)


def test_user_input_forgets_the_previous_turns_steps() -> None:
    c = core()
    c.user_input("one")
    plain_turn(c, "first answer")
    c.user_input("two")
    (end,) = c.receive(idle())
    assert end.response.steps == []
    assert end.response.text == ""


# -- stream chunks and tool steps ----------------------------------------------------------


def test_tool_calls_are_announced_from_pre_tool_and_steps_name_the_executed_call() -> None:
    c = core()
    c.user_input("write")
    target = "/ws/notes.txt"
    args = {"TargetFile": target, "CodeContent": "hi", "Overwrite": True}
    # write_to_file: the harness shows the step (an editFile action) before PRE_TOOL.
    active = step(
        1,
        "STATE_ACTIVE",
        "SOURCE_MODEL",
        "TARGET_ENVIRONMENT",
        text="Tool execution",
        editFile={"filePath": f"file://{target}"},
    )
    assert c.receive(active) == []  # steps announce nothing: the call's name is not known
    announced, pre = c.receive(pre_tool("create_file", args))
    assert announced == Chunk(
        StreamChunk(type="tool_call", tool_call=pre.arg, step_index=0, trajectory_id=MAIN)
    )
    assert pre.arg == ToolCall(
        name="write_to_file", args=args, id="call_2", trajectory_id=MAIN, step_index=2
    )
    assert c.receive(copy.deepcopy(active)) == []
    (s,) = c.response().steps
    assert s.tool_call == pre.arg  # not "replace_file_content", and with every argument


def test_identical_calls_each_stream_and_report_their_own_call() -> None:
    """Three identical commands: each step's streamed result names the call it ran, and
    the response names the same calls (it used to stream the first call three times)."""
    c = core()
    c.user_input("run")
    streamed = []
    for n in range(1, 4):
        c.receive(pre_tool("run_command", {"CommandLine": "true"}, f"call_{n}"))
        done = step(
            n,
            "STATE_DONE",
            "SOURCE_MODEL",
            "TARGET_ENVIRONMENT",
            runCommand={"commandLine": "true", "exitCode": 0, "combinedOutput": ""},
        )
        (result,) = c.receive(done)
        streamed.append(result.chunk.tool_call.id)
    assert streamed == ["call_1", "call_2", "call_3"]
    assert [s.tool_call.id for s in c.response().steps if s.tool_call] == streamed


def test_a_rewritten_call_pairs_as_it_ran_and_a_denied_one_never() -> None:
    """A call rewritten twice pairs with the step that ran the last rewrite; a rewritten
    call then denied (the denial names the call as asked) pairs with nothing, so the same
    call asked again is the one its step ran."""
    c = core()
    c.user_input("go", streaming=False)
    (ran,) = c.receive(pre_tool("run_command", {"CommandLine": "rm -rf /"}, "call_1"))
    first = c.check_rewrite(ran.arg, {"CommandLine": "echo one"})
    c.check_rewrite(first, {"CommandLine": "echo safe"})
    (denied,) = c.receive(pre_tool("run_command", {"CommandLine": "ls"}, "call_2"))
    c.check_rewrite(denied.arg, {"CommandLine": "ls -l"})
    c.note_denial(denied.arg, "no")
    c.receive(pre_tool("run_command", {"CommandLine": "ls -l"}, "call_3"))
    for index, command in ((1, "echo safe"), (2, "ls -l")):
        c.receive(
            step(
                index,
                "STATE_DONE",
                "SOURCE_MODEL",
                "TARGET_ENVIRONMENT",
                runCommand={"commandLine": command, "exitCode": 0},
            )
        )
    safe, listed = c.response().steps
    assert safe.tool_call is not None and safe.tool_call.id == "call_1"
    assert safe.tool_call.args == {"CommandLine": "echo safe"}
    assert listed.tool_call is not None and listed.tool_call.id == "call_3"


_PAIRING_CALL = st.tuples(
    st.sampled_from(["run_command", "view_file"]),
    st.sampled_from([MAIN, SUB, ""]),  # "": a call that names no trajectory
    st.sampled_from(["/a", "/b"]),
    st.booleans(),  # denied
)
_PAIRING_STEP = st.tuples(
    st.sampled_from(["runCommand", "viewFile"]),
    st.sampled_from([MAIN, SUB]),
    st.sampled_from(["/a", "/b"]),
)


@settings(max_examples=200, deadline=None)
@given(
    calls=st.lists(_PAIRING_CALL, max_size=12),
    steps=st.lists(_PAIRING_STEP, max_size=12),
    streaming=st.booleans(),
)
def test_steps_pair_with_the_earliest_call_that_fits(
    calls: list[tuple[str, str, str, bool]], steps: list[tuple[str, str, str]], streaming: bool
) -> None:
    """Against the definition, scanned in full: each tool step runs the earliest call not
    yet paired, and not denied, with the same name, its trajectory (or none) and the
    arguments it shows.
    Steps pair as they finish when the turn streams, else in the response's order; the
    streamed results and the response always name the same calls."""
    key = {"run_command": "CommandLine", "view_file": "AbsolutePath"}
    c = core()
    c.user_input("go", streaming=streaming)
    for n, (name, trajectory, value, denied) in enumerate(calls):
        *_, asked = c.receive(
            pre_tool(name, {key[name]: value}, f"call_{n}", trajectoryId=trajectory)
        )
        if denied:
            c.note_denial(asked.arg, "no")
    chunks: dict[tuple[str, int], str] = {}
    for index, (action, trajectory, value) in enumerate(steps):
        field = "commandLine" if action == "runCommand" else "filePath"
        done = step(
            index,
            "STATE_DONE",
            "SOURCE_MODEL",
            "TARGET_ENVIRONMENT",
            trajectoryId=trajectory,
            **{action: {field: value}},
        )
        for effect in c.receive(done):
            chunks[(trajectory, index)] = effect.chunk.tool_call.id

    def earliest(order: list[int]) -> dict[int, str]:
        paired = {n for n, call in enumerate(calls) if call[3]}  # denied: never run
        found = {}
        for index in order:
            action, trajectory, value = steps[index]
            name = "run_command" if action == "runCommand" else "view_file"
            found[index] = ""  # described by the step itself: no call id
            for n, (call_name, call_trajectory, call_value, _) in enumerate(calls):
                fits = call_name == name and call_trajectory in ("", trajectory)
                if n not in paired and fits and call_value == value:
                    paired.add(n)
                    found[index] = f"call_{n}"
                    break
        return found

    response_order = sorted(range(len(steps)), key=lambda i: (steps[i][1] != MAIN, i))
    expected = earliest(list(range(len(steps))) if streaming else response_order)
    got = {(s.trajectory_id, s.step_index): s.tool_call.id for s in c.response().steps}
    assert got == {(steps[i][1], i): expected[i] for i in range(len(steps))}
    if streaming:
        assert chunks == got


def test_a_tool_step_without_its_pre_tool_describes_itself() -> None:
    c = core()
    c.user_input("run")
    action = {"commandLine": "echo hi > ran.txt", "workingDir": "/ws"}
    done = step(
        1,
        "STATE_DONE",
        "SOURCE_MODEL",
        "TARGET_ENVIRONMENT",
        text="Tool execution",
        runCommand={**action, "exitCode": 0, "combinedOutput": "hi\r\n"},
    )
    (result,) = c.receive(done)  # a streaming turn gets the finished tool's result
    assert c.receive(copy.deepcopy(done)) == []  # once
    (s,) = c.response().steps
    assert result == Chunk(
        StreamChunk(
            type="tool_result",
            text="hi\r\n",
            tool_call=s.tool_call,
            step_index=1,
            trajectory_id=MAIN,
        )
    )
    assert (s.kind, s.state, s.output, s.exit_code) == ("tool_call", "done", "hi\r\n", 0)
    assert s.tool_call == ToolCall(
        name="run_command", args={"CommandLine": "echo hi > ran.txt", "Cwd": "/ws"}
    )
    assert c.response().text == ""  # tool text is not the answer


def test_a_turn_that_does_not_stream_gets_no_chunks() -> None:
    c = core()
    c.user_input("quiet", streaming=False)
    (pre,) = c.receive(pre_tool("run_command", {"CommandLine": "true"}))
    assert isinstance(pre, HookCall)
    done = step(
        3,
        "STATE_DONE",
        "SOURCE_MODEL",
        "TARGET_ENVIRONMENT",
        runCommand={"commandLine": "true", "exitCode": 0, "combinedOutput": ""},
    )
    assert c.receive(done) == []


def test_a_failed_tool_streams_its_error_and_long_output_is_cut() -> None:
    c = core()
    c.user_input("view")
    failed = step(
        2,
        "STATE_ERROR",
        "SOURCE_MODEL",
        "TARGET_ENVIRONMENT",
        errorMessage="Cannot view file /ws/missing.txt which does not exist.",
        viewFile={"filePath": "file:///ws/missing.txt"},
    )
    (result,) = c.receive(failed)
    assert result.chunk.type == "tool_result" and "does not exist" in result.chunk.error
    assert result.chunk.tool_call.name == "view_file"
    long = step(
        3,
        "STATE_DONE",
        "SOURCE_MODEL",
        "TARGET_ENVIRONMENT",
        runCommand={"commandLine": "yes", "exitCode": 0, "combinedOutput": "y\n" * 5000},
    )
    (result,) = c.receive(long)
    assert result.chunk.text == ("y\n" * 5000)[:2000]


def test_file_uris_become_paths() -> None:
    c = core()
    c.user_input("view")
    c.receive(
        step(
            1,
            "STATE_ACTIVE",
            "SOURCE_MODEL",
            "TARGET_ENVIRONMENT",
            text="Tool execution",
            viewFile={"filePath": "file:///tmp/my%20dir/a.txt", "startLine": 0},
        )
    )
    (s,) = c.response().steps
    assert s.tool_call is not None
    assert s.tool_call.args == {"AbsolutePath": "/tmp/my dir/a.txt"}


def test_chunks_carry_their_trajectory() -> None:
    c = core()
    c.user_input("delegate")
    sub = {"trajectoryId": SUB, "parentTrajectoryId": MAIN}
    frames = [
        step(1, "STATE_ACTIVE", "SOURCE_MODEL", "TARGET_USER", thinkingDelta="plan", **sub),
        step(1, "STATE_DONE", "SOURCE_MODEL", "TARGET_USER", textDelta="sub text", **sub),
        pre_tool("list_directory", {"DirectoryPath": "/w"}, trajectoryId=SUB),
        step(3, "STATE_ACTIVE", "SOURCE_MODEL", "TARGET_USER", thinkingDelta="hmm"),
        step(3, "STATE_DONE", "SOURCE_MODEL", "TARGET_USER", textDelta="main text"),
        pre_tool("view_file", {"AbsolutePath": "/w/a"}),
    ]
    chunks = [e.chunk for f in frames for e in c.receive(f) if isinstance(e, Chunk)]
    assert [(ch.type, ch.trajectory_id) for ch in chunks] == [
        ("thought", SUB),
        ("text", SUB),
        ("tool_call", SUB),
        ("thought", MAIN),
        ("text", MAIN),
        ("tool_call", MAIN),
    ]
    assert c.conversation_id == MAIN  # what Agent.stream() compares to


def test_thought_chunks_and_thinking() -> None:
    c = core()
    c.user_input("think")
    frame = step(1, "STATE_ACTIVE", "SOURCE_MODEL", "TARGET_USER", thinkingDelta="hmm ")
    assert c.receive(frame) == [
        Chunk(StreamChunk(type="thought", text="hmm ", step_index=1, trajectory_id=MAIN))
    ]
    c.receive(step(1, "STATE_ACTIVE", "SOURCE_MODEL", "TARGET_USER", thinkingDelta="ok"))
    assert c.response().thinking == "hmm ok"


def test_denied_tool_step_is_an_error_step_without_text_chunks() -> None:
    c = core()
    c.user_input("x")
    reason = "no shell today (policy X)"
    effects = c.receive(
        step(
            1,
            "STATE_ERROR",
            "SOURCE_MODEL",
            "TARGET_USER",
            errorMessage=reason,
            textDelta=f'{reason} ("denied by pre-tool hook: {reason}")',
            text=f'{reason} ("denied by pre-tool hook: {reason}")',
            error={"errorMessage": reason, "httpCode": 0},
        )
    )
    assert effects == []
    (s,) = c.response().steps
    assert (s.kind, s.error) == ("error", reason)
    assert c.response().text == ""


def test_host_tool_call_becomes_run_tool() -> None:
    c = core()
    (effect,) = c.receive(
        {
            "toolCall": {
                "id": "call_2",
                "name": "get_weather",
                "argumentsJson": '{"city":"Paris"}',
                "arguments": {"fields": [{"name": "city", "value": {"stringValue": "Paris"}}]},
                "trajectoryId": MAIN,
            }
        }
    )
    assert effect == RunTool(
        ToolCall(name="get_weather", args={"city": "Paris"}, id="call_2", trajectory_id=MAIN)
    )


def test_policy_decision_request() -> None:
    c = core()
    (effect,) = c.receive(
        {
            "policyDecisionRequest": {
                "requestId": "1",
                "ruleId": "rule_0",
                "toolArgs": {
                    "toolName": "create_file",
                    "argumentsJson": '{"TargetFile":"/ws/a"}',
                    "serverName": "",
                    "callId": "call_2",
                    "trajectoryId": MAIN,
                    "stepIndex": 2,
                },
            }
        }
    )
    assert effect == PolicyRequest(
        "1",
        ToolCall(
            name="write_to_file",
            args={"TargetFile": "/ws/a"},
            id="call_2",
            trajectory_id=MAIN,
            step_index=2,
        ),
    )


def test_tool_confirmation_request() -> None:
    c = core()
    c.user_input("x")
    (confirm,) = c.receive(
        step(
            1,
            "STATE_WAITING_FOR_USER",
            "SOURCE_MODEL",
            "TARGET_ENVIRONMENT",
            runCommand={"commandLine": "rm -rf /", "workingDir": "/"},
            toolConfirmationRequest={},
        )
    )
    assert confirm == ConfirmTool(
        MAIN, 1, ToolCall(name="run_command", args={"CommandLine": "rm -rf /", "Cwd": "/"})
    )
    assert confirm.reply(HookResult(allow=True)) == {
        "toolConfirmation": {"trajectoryId": MAIN, "stepIndex": 1, "accepted": True}
    }


def test_session_end_and_history() -> None:
    c = SessionCore()
    history = [
        {
            "trajectoryId": MAIN,
            "stepIndex": 0,
            "state": "STATE_DONE",
            "source": "SOURCE_USER",
            "text": "earlier",
        },
        {
            "trajectoryId": MAIN,
            "stepIndex": 1,
            "state": "STATE_DONE",
            "source": "SOURCE_MODEL",
            "target": "TARGET_USER",
            "text": "earlier answer",
        },
    ]
    (effect,) = c.receive(init(history=history))
    assert isinstance(effect, Initialized)
    assert [(s.kind, s.text) for s in effect.history] == [
        ("user", "earlier"),
        ("text", "earlier answer"),
    ]
    assert c.receive({"sessionEndResponse": True, "seqNum": "81"}) == [SessionEnded()]


# -- questions -----------------------------------------------------------------------------


QUESTION_STEP = step(
    1,
    "STATE_WAITING_FOR_USER",
    "SOURCE_MODEL",
    "TARGET_ENVIRONMENT",
    text="Q",
    requestText="Prompted for questions",
    questionsRequest={
        "questions": [
            {
                "multipleChoice": {
                    "question": "Color?",
                    "choices": ["red", "blue"],
                    "isMultiSelect": False,
                }
            },
            {
                "multipleChoice": {
                    "question": "Sizes?",
                    "choices": ["S", "M", "L"],
                    "isMultiSelect": True,
                }
            },
        ]
    },
)


def ask() -> AskUser:
    c = core()
    c.user_input("ask")
    (effect,) = c.receive(QUESTION_STEP)
    assert isinstance(effect, AskUser)
    assert c.receive(copy.deepcopy(QUESTION_STEP)) == []  # asked once
    return effect


def test_questions_request() -> None:
    effect = ask()
    assert (effect.trajectory_id, effect.step_index) == (MAIN, 1)
    assert effect.questions == (
        AskQuestionEntry(
            question="Color?",
            options=[AskQuestionOption(id="0", text="red"), AskQuestionOption(id="1", text="blue")],
        ),
        AskQuestionEntry(
            question="Sizes?",
            options=[
                AskQuestionOption(id="0", text="S"),
                AskQuestionOption(id="1", text="M"),
                AskQuestionOption(id="2", text="L"),
            ],
            is_multi_select=True,
        ),
    )


def test_question_reply() -> None:
    effect = ask()
    answer = QuestionHookResult(
        responses=[
            QuestionResponse(selected_option_ids=["1", "0"]),  # single select: first only
            QuestionResponse(selected_option_ids=["0", "2", "nope"], freeform_response="XL"),
        ]
    )
    assert effect.reply(answer) == {
        "questionResponse": {
            "trajectoryId": MAIN,
            "stepIndex": 1,
            "response": {
                "answers": [
                    {"multipleChoiceAnswer": {"selectedChoiceIndices": [1]}},
                    {
                        "multipleChoiceAnswer": {
                            "selectedChoiceIndices": [0, 2],
                            "freeformResponse": "XL",
                        }
                    },
                ]
            },
        }
    }
    skipped = QuestionHookResult(responses=[QuestionResponse(skipped=True)])
    assert effect.reply(skipped)["questionResponse"]["response"] == {
        "answers": [{"unanswered": True}, {"unanswered": True}]  # missing = unanswered
    }
    cancelled = {"questionResponse": {"trajectoryId": MAIN, "stepIndex": 1, "cancelled": True}}
    assert effect.reply(None) == cancelled
    assert effect.reply(QuestionHookResult(cancelled=True)) == cancelled


@given(st.lists(st.lists(st.text(max_size=3), max_size=5), max_size=3))
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)
def test_question_reply_indices_are_always_valid(selections: list[list[str]]) -> None:
    effect = ask()
    answer = QuestionHookResult(
        responses=[QuestionResponse(selected_option_ids=s) for s in selections]
    )
    answers = effect.reply(answer)["questionResponse"]["response"]["answers"]
    assert len(answers) == len(effect.questions)
    for entry, item in zip(effect.questions, answers, strict=True):
        if "unanswered" in item:
            continue
        indices = item["multipleChoiceAnswer"]["selectedChoiceIndices"]
        assert all(0 <= i < len(entry.options) for i in indices)
        if not entry.is_multi_select:
            assert len(indices) <= 1


# -- replies -------------------------------------------------------------------------------


PRE_TOOL = HookCall("hook_request_2", "pre_tool_call", ToolCall(name="run_command"))
PRE_TURN = HookCall("hook_request_1", "pre_turn", "hi")


def test_decide_replies_are_explicit() -> None:
    assert PRE_TOOL.reply(HookResult()) == {
        "callHookResponse": {"requestId": "hook_request_2", "preToolResult": {"decision": "ALLOW"}}
    }
    assert PRE_TOOL.reply(HookResult.denied("no shell")) == {
        "callHookResponse": {
            "requestId": "hook_request_2",
            "preToolResult": {"decision": "DENY", "reason": "no shell"},
        }
    }
    assert PRE_TURN.reply(HookResult(allow=False)) == {
        "callHookResponse": {
            "requestId": "hook_request_1",
            "preTurnResult": {"decision": "DENY", "reason": "denied by a hook"},
        }
    }


@given(st.text(), st.sampled_from([PRE_TOOL, PRE_TURN]))
def test_a_denial_is_always_an_explicit_deny_with_a_reason(message: str, call: HookCall) -> None:
    reply = call.reply(HookResult(allow=False, message=message))["callHookResponse"]
    (result,) = [v for k, v in reply.items() if k != "requestId"]
    assert result["decision"] == "DENY"
    assert result["reason"]
    assert "errorMessage" not in reply  # fatal for PRE_TURN, never sent


@given(
    st.text(),
    st.sampled_from(
        [
            "pre_tool_call",
            "pre_turn",
            "post_tool_call",
            "post_turn",
            "on_tool_error",
            "on_compaction",
            "on_session_end",
            "",
        ]
    ),
)
def test_failed_hook_replies_fail_closed(reason: str, event: str) -> None:
    call = HookCall("hook_request_5", event)
    reply = call.refuse(reason)["callHookResponse"]
    assert reply["requestId"] == "hook_request_5"
    assert "errorMessage" not in reply
    if event in ("pre_tool_call", "pre_turn"):
        key = "preToolResult" if event == "pre_tool_call" else "preTurnResult"
        assert reply[key]["decision"] == "DENY"
        assert reply[key]["reason"]
    else:
        assert reply == {"requestId": "hook_request_5", "emptyResult": {}}


def test_on_tool_error_replies() -> None:
    call = HookCall("hook_request_3", "on_tool_error")
    recovered = call.reply((HookResult(allow=True), "CUSTOM: try README"))
    assert recovered == {
        "callHookResponse": {
            "requestId": "hook_request_3",
            "onToolErrorResult": {"customErrorMessage": "CUSTOM: try README"},
        }
    }
    as_json = call.reply((HookResult(allow=True), {"fallback": 42}))
    assert as_json["callHookResponse"]["onToolErrorResult"] == {
        "customErrorMessage": '{"fallback": 42}'
    }
    empty = {"callHookResponse": {"requestId": "hook_request_3", "emptyResult": {}}}
    assert call.reply((HookResult(allow=False, message="x"), "ignored")) == empty
    assert call.reply((HookResult(allow=True), None)) == empty


def test_inspect_replies_are_empty() -> None:
    for event in ("post_tool_call", "post_turn", "on_compaction", "on_session_end", ""):
        assert HookCall("r", event).reply(None) == {
            "callHookResponse": {"requestId": "r", "emptyResult": {}}
        }


def test_tool_replies() -> None:
    call = ToolCall(name="get_weather", id="call_2")
    assert RunTool(call).reply(ToolResult(name="get_weather", result={"temp_c": 21})) == {
        "toolResponse": {"id": "call_2", "responseJson": '{"temp_c": 21}'}
    }
    assert RunTool(call).reply(ToolResult(name="get_weather", result=[1, 2])) == {
        "toolResponse": {"id": "call_2", "responseJson": '{"result": [1, 2]}'}
    }
    assert RunTool(call).reply(ToolResult(name="get_weather", result=None)) == {
        "toolResponse": {"id": "call_2", "responseJson": '{"result": null}'}
    }
    assert RunTool(call).reply(ToolResult(name="get_weather", error="weather service down")) == {
        "toolResponse": {"id": "call_2", "errorMessage": "weather service down"}
    }
    loop: dict[str, Any] = {}
    loop["self"] = loop
    reply = RunTool(call).reply(ToolResult(name="get_weather", result=loop))
    assert reply["toolResponse"]["id"] == "call_2"
    assert "errorMessage" in reply["toolResponse"]


def test_policy_replies_and_constants() -> None:
    request = PolicyRequest("1", ToolCall(name="run_command"))
    assert request.reply(HookResult()) == {
        "policyDecisionResponse": {"requestId": "1", "outcome": "POLICY_EVALUATION_OUTCOME_ALLOW"}
    }
    assert request.reply(HookResult(allow=False)) == {
        "policyDecisionResponse": {
            "requestId": "1",
            "outcome": "POLICY_EVALUATION_OUTCOME_DENY",
            "denyReason": "denied by policy",
        }
    }
    assert HALT == {"haltRequest": True}
    assert SESSION_END == {"sessionEndRequest": True}


# -- hypothesis: unknown fields never change the effects -----------------------------------


def normalize(effects: list[Any]) -> list[Any]:
    out = []
    for e in effects:
        if isinstance(e, HookCall) and isinstance(e.arg, ToolExecutionError):
            out.append(("tool_error", e.request_id, str(e.arg), e.arg.tool_call))
        else:
            out.append(e)
    return out


SESSION = [
    init(),
    hook("LIFECYCLE_HOOK_ON_SESSION_START", "hook_request_0"),
    hook(
        "LIFECYCLE_HOOK_PRE_TURN",
        "hook_request_1",
        preTurnArgs={"userInput": {"parts": [{"text": "go"}]}},
    ),
    idle(state="STATE_RUNNING"),
    step(0, "STATE_DONE", "SOURCE_USER", "TARGET_MODEL", text="go", textDelta="go"),
    pre_tool("create_file", {"TargetFile": "/ws/a.txt", "CodeContent": "a", "Overwrite": False}),
    step(
        1,
        "STATE_ACTIVE",
        "SOURCE_MODEL",
        "TARGET_ENVIRONMENT",
        text="Tool execution",
        editFile={"filePath": "file:///ws/a.txt", "diffBlock": [{"startLine": 1}]},
    ),
    step(
        1,
        "STATE_DONE",
        "SOURCE_MODEL",
        "TARGET_ENVIRONMENT",
        text="Tool execution",
        editFile={"filePath": "file:///ws/a.txt"},
    ),
    hook(
        "LIFECYCLE_HOOK_POST_TOOL",
        "hook_request_3",
        postToolArgs={
            "toolName": "create_file",
            "result": "Tool execution",
            "callId": "call_2",
            "trajectoryId": MAIN,
            "stepIndex": 2,
        },
    ),
    pre_tool("view_file", {"AbsolutePath": "/missing"}, call_id="call_3"),
    hook(
        "LIFECYCLE_HOOK_ON_TOOL_ERROR",
        "hook_request_5",
        onToolErrorArgs={
            "toolName": "view_file",
            "errorMessage": "gone",
            "callId": "call_3",
            "trajectoryId": MAIN,
        },
    ),
    {
        "toolCall": {
            "id": "call_4",
            "name": "get_weather",
            "argumentsJson": '{"city":"P"}',
            "trajectoryId": MAIN,
        }
    },
    QUESTION_STEP,
    idle(SUB, "STATE_FULLY_IDLE", parentTrajectoryId=MAIN, depth=1),
    step(
        4,
        "STATE_ACTIVE",
        "SOURCE_MODEL",
        "TARGET_USER",
        textDelta="do",
        text="do",
        thinkingDelta="t",
    ),
    step(4, "STATE_DONE", "SOURCE_MODEL", "TARGET_USER", textDelta="ne", text="done"),
    usage(100, 5),
    hook(
        "LIFECYCLE_HOOK_POST_TURN",
        "hook_request_6",
        postTurnArgs={"responseText": "done", "trajectoryId": MAIN},
    ),
    idle(),
    {"sessionEndResponse": True},
]


def run_session(frames: list[dict[str, Any]]) -> list[list[Any]]:
    c = SessionCore()
    results = []
    for i, frame in enumerate(frames):
        if i == 2:
            c.user_input("go")
        results.append(normalize(c.receive(frame)))
    return results


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
# Names a newer harness might add: never one the SDK reads (those all start lowercase ASCII
# and none starts with "future").
extra_keys = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_", min_size=1, max_size=10
).map(lambda s: "future" + s)


def inject(frame: Any, extras: dict[str, Any], rnd: random.Random) -> Any:
    """Copy `frame`, adding the unknown `extras` to a random half of its objects."""
    if isinstance(frame, dict):
        out = {k: inject(v, extras, rnd) for k, v in frame.items()}
        if rnd.random() < 0.5:
            out.update(extras)
        return out
    if isinstance(frame, list):
        return [inject(v, extras, rnd) for v in frame]
    return frame


BASELINE = run_session(SESSION)


@given(st.dictionaries(extra_keys, json_values, min_size=1, max_size=3), st.randoms())
@settings(max_examples=100, deadline=None)
def test_unknown_fields_never_change_the_effects(
    extras: dict[str, Any], rnd: random.Random
) -> None:
    frames = [inject(frame, extras, rnd) for frame in SESSION]
    assert run_session(frames) == BASELINE


def test_baseline_session_effects() -> None:
    """The effects the hypothesis test protects are themselves the right ones."""
    kinds = [
        [type(e).__name__ if not isinstance(e, tuple) else e[0] for e in effects]
        for effects in BASELINE
    ]
    assert kinds == [
        ["Initialized"],
        ["HookCall"],
        ["HookCall"],
        [],
        [],
        ["Chunk", "HookCall"],  # PRE_TOOL announces the call to a streaming turn
        [],
        ["Chunk"],  # the tool step is done: its result is streamed
        ["HookCall"],
        ["Chunk", "HookCall"],
        ["tool_error"],
        ["RunTool"],
        ["AskUser"],
        [],
        ["Chunk", "Chunk"],
        ["Chunk"],
        [],
        ["HookCall"],
        ["TurnEnded"],
        ["SessionEnded"],
    ]
    announced, pre = BASELINE[5]
    assert pre.arg.name == "write_to_file"
    assert announced.chunk.tool_call == pre.arg
    (result,) = BASELINE[7]
    assert result.chunk.type == "tool_result" and result.chunk.tool_call == pre.arg
    end = BASELINE[-2][0]
    assert end.response.text == "done"
    assert end.response.usage.total_token_count == 105


# -- arguments as the harness will act on them ------------------------------------------


def test_builtin_argument_keys_are_given_in_their_canonical_spelling() -> None:
    # The harness decodes arguments case-insensitively: `cwd` is its Cwd. Policies must see
    # the value under the name they check.
    (call,) = core().receive(pre_tool("run_command", {"commandLine": "rm -rf /", "cwd": "/"}))
    assert call.refusal == ""
    assert call.arg.args == {"CommandLine": "rm -rf /", "Cwd": "/"}


@pytest.mark.parametrize(
    "args",
    [
        {"AbsolutePath": "/ws/a.txt", "absolutePath": "/etc/hostname"},
        {"CommandLine": "echo", "commandline": "rm -rf /"},
        {"Subagents": [{"Workspace": "/ws", "workspace": "/"}]},
    ],
)
def test_arguments_that_differ_only_in_case_are_refused(args: dict[str, Any]) -> None:
    (call,) = core().receive(pre_tool("view_file", args))
    assert call.event == "pre_tool_call"
    assert "differ only in case" in call.refusal
    assert (
        call.reply(HookResult(allow=False, message=call.refusal))["callHookResponse"][
            "preToolResult"
        ]["decision"]
        == "DENY"
    )


@pytest.mark.parametrize(
    "frame",
    [
        hook("LIFECYCLE_HOOK_PRE_TOOL", preToolArgsV2={"toolName": "run_command"}),
        hook("LIFECYCLE_HOOK_PRE_TOOL", preToolArgs={"toolName": "", "argumentsJson": "{}"}),
        hook(
            "LIFECYCLE_HOOK_PRE_TOOL",
            preToolArgs={"toolName": "run_command", "argumentsJson": "not json"},
        ),
    ],
)
def test_a_request_that_cannot_be_read_is_refused_not_allowed(frame: dict[str, Any]) -> None:
    (call,) = core().receive(frame)
    assert call.event == "pre_tool_call"
    assert call.refusal.startswith("refused:")


def test_mcp_calls_keep_their_names_and_get_their_own_arguments() -> None:
    wrapped = {"Arguments": {"path": "/etc/passwd"}, "ServerName": "fs", "ToolName": "edit_file"}
    (call,) = core().receive(pre_tool("edit_file", wrapped, serverName="fs"))
    assert call.arg.qualified_name == "fs/edit_file"  # not fs/replace_file_content
    assert call.arg.args == {"path": "/etc/passwd"}


def test_host_tools_keep_their_names() -> None:
    c = SessionCore(frozenset({"list_directory"}))
    (call,) = c.receive(pre_tool("list_directory", {"where": "."}))
    assert call.arg.name == "list_directory"
    (builtin,) = SessionCore().receive(pre_tool("list_directory", {"DirectoryPath": "."}))
    assert builtin.arg.name == "list_dir"


def test_a_confirmation_for_a_step_the_sdk_cannot_describe_carries_no_call() -> None:
    c = core()
    update = {
        "trajectoryId": MAIN,
        "stepIndex": 4,
        "state": "STATE_WAITING_FOR_USER",
        "source": "SOURCE_MODEL",
        "toolConfirmationRequest": {},
    }
    effects = c.receive({"stepUpdate": update})
    assert [e for e in effects if isinstance(e, ConfirmTool)] == [ConfirmTool(MAIN, 4, None)]
