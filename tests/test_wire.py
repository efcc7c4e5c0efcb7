"""The wire codec: protobuf-JSON frames and the length-prefixed handshake (no harness needed)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from antigravity_sdk.errors import ProtocolError
from antigravity_sdk.harness import wire
from antigravity_sdk.harness.wire import pb

# Frames as the 0.1.22 harness sends them (explicit defaults such as `"serverName": ""`
# included: the harness's schema has explicit presence).
PRE_TOOL_FRAME = (
    '{"callHookRequest": {"preToolArgs": {"toolName": "run_command", "argumentsJson": '
    '"{\\"CommandLine\\":\\"echo hi\\",\\"Cwd\\":\\"/ws\\",\\"WaitMsBeforeAsync\\":5000}", '
    '"serverName": "", "callId": "call_2", "trajectoryId": "3eea", "stepIndex": 2}, '
    '"requestId": "hook_request_2", "name": "PreTool", "type": "LIFECYCLE_HOOK_PRE_TOOL"}, '
    '"seqNum": "6", "timestampMicros": "1795329247549843"}'
)
STEP_FRAME = (
    '{"stepUpdate": {"cascadeId": "c1", "trajectoryId": "c1", "stepIndex": 3, '
    '"state": "STATE_DONE", "source": "SOURCE_MODEL", "target": "TARGET_ENVIRONMENT", '
    '"runCommand": {"commandLine": "echo hi", "workingDir": "/ws", "exitCode": 0, '
    '"combinedOutput": "hi\\n"}}, "seqNum": "12", "timestampMicros": "1"}'
)
INIT_RESPONSE_FRAME = (
    '{"initializeConversationResponse": {"cascadeId": "3eea", "sandboxStatus": '
    '{"available": true, "unavailableReason": ""}}, "seqNum": "1", "timestampMicros": "2"}'
)


def decode(obj: dict[str, Any]) -> pb.OutputEvent:
    return wire.decode_output_event(json.dumps(obj))


# ---------------------------------------------------------------------------- decoding


def test_decode_pre_tool_hook_request() -> None:
    ev = wire.decode_output_event(PRE_TOOL_FRAME)
    assert ev.seq_num == 6
    assert ev.timestamp_micros == 1795329247549843
    req = ev.call_hook_request
    assert req is not None
    assert req.request_id == "hook_request_2"
    assert req.type == pb.LifecycleHook.PRE_TOOL
    args = req.pre_tool_args
    assert args is not None
    assert args.tool_name == "run_command"
    assert json.loads(args.arguments_json)["CommandLine"] == "echo hi"
    assert args.server_name == ""
    assert args.step_index == 2
    assert ev.step_update is None


def test_decode_step_update_run_command() -> None:
    ev = wire.decode_output_event(STEP_FRAME.encode())  # bytes frames work too
    step = ev.step_update
    assert step is not None
    assert step.state == pb.StepUpdateState.DONE
    assert step.source == pb.StepUpdateSource.MODEL
    assert step.run_command is not None
    assert step.run_command.combined_output == "hi\n"


def test_decode_init_response_and_session_end() -> None:
    ev = wire.decode_output_event(INIT_RESPONSE_FRAME)
    assert ev.initialize_conversation_response is not None
    assert ev.initialize_conversation_response.cascade_id == "3eea"
    assert ev.initialize_conversation_response.sandbox_status is not None
    assert ev.initialize_conversation_response.sandbox_status.available is True
    end = wire.decode_output_event('{"sessionEndResponse": true, "seqNum": "9"}')
    assert end.session_end_response is True


def test_decode_agrees_with_betterproto2() -> None:
    for frame in (PRE_TOOL_FRAME, STEP_FRAME, INIT_RESPONSE_FRAME):
        assert wire.decode_output_event(frame) == pb.OutputEvent.from_json(frame)


def test_snake_case_keys_and_null_accepted() -> None:
    ev = decode({"call_hook_request": {"request_id": "r", "pre_tool_args": None}, "seqNum": None})
    assert ev.call_hook_request == pb.CallHookRequest(request_id="r")
    assert ev.seq_num == 0


def test_int_representations() -> None:
    ev = decode({"seqNum": 7, "stepUpdate": {"stepIndex": "4"}, "timestampMicros": "1e3"})
    assert ev.seq_num == 7
    assert ev.timestamp_micros == 1000
    assert ev.step_update is not None and ev.step_update.step_index == 4
    ev = decode({"stepUpdate": {"stepIndex": 5.0}})
    assert ev.step_update is not None and ev.step_update.step_index == 5


# ----------------------------------------------------------------- tolerance (newer harness)


def test_unknown_fields_ignored_at_every_depth() -> None:
    obj = json.loads(PRE_TOOL_FRAME)
    obj["brandNewTopLevel"] = {"deep": [1, 2, {"x": None}]}
    obj["callHookRequest"]["someFutureArgs"] = {"a": 1}
    obj["callHookRequest"]["preToolArgs"]["riskScore"] = 0.7
    obj["callHookRequest"]["preToolArgs"]["new_snake_field"] = "v"
    assert decode(obj) == wire.decode_output_event(PRE_TOOL_FRAME)


def test_unknown_oneof_member_leaves_oneof_empty() -> None:
    ev = decode({"fancyNewEvent": {"a": 1}, "seqNum": "3"})
    assert ev.seq_num == 3
    assert ev.step_update is None and ev.call_hook_request is None


def test_genai_struct_fields_are_skipped() -> None:
    ev = decode(
        {
            "toolCall": {
                "id": "1",
                "name": "get_weather",
                "argumentsJson": '{"city": "Paris"}',
                "arguments": {"fields": [{"name": "city", "value": {"stringValue": "Paris"}}]},
                "trajectoryId": "t",
            }
        }
    )
    assert ev.tool_call == pb.ToolCall(
        id="1", name="get_weather", arguments_json='{"city": "Paris"}', trajectory_id="t"
    )


def test_unknown_enum_name_reads_as_default() -> None:
    obj = json.loads(PRE_TOOL_FRAME)
    obj["callHookRequest"]["type"] = "LIFECYCLE_HOOK_SOMETHING_NEW"
    ev = decode(obj)
    assert ev.call_hook_request is not None
    assert ev.call_hook_request.type == pb.LifecycleHook.UNSPECIFIED
    assert ev.call_hook_request.pre_tool_args is not None  # the rest still decodes


def test_unknown_enum_names_nested_and_repeated() -> None:
    ev = decode(
        {
            "usageUpdate": {
                "total": {
                    "promptTokenCount": "12",
                    "promptTokensDetails": [
                        {"modality": "HOLOGRAM", "tokenCount": "3"},
                        {"modality": "TEXT", "tokenCount": "9"},
                    ],
                }
            },
            "stepUpdate": None,
        }
    )
    assert ev.usage_update is not None and ev.usage_update.total is not None
    details = ev.usage_update.total.prompt_tokens_details
    assert [d.modality for d in details] == [pb.Modality.MODALITY_UNSPECIFIED, pb.Modality.TEXT]
    assert [d.token_count for d in details] == [3, 9]
    cfg = wire.message_from_dict(
        pb.HarnessConfig, {"enabledHooks": ["LIFECYCLE_HOOK_PRE_TOOL", "LIFECYCLE_HOOK_NEW"]}
    )
    assert cfg.enabled_hooks == [pb.LifecycleHook.PRE_TOOL]  # unknown names dropped


def test_unknown_enum_number_is_kept_and_reencoded() -> None:
    ev = decode({"trajectoryStateUpdate": {"trajectoryId": "t", "state": 42}})
    assert ev.trajectory_state_update is not None
    state = ev.trajectory_state_update.state
    assert int(state) == 42
    assert state != pb.TrajectoryStateUpdateState.FULLY_IDLE
    assert wire.message_to_dict(ev) == {"trajectoryStateUpdate": {"trajectoryId": "t", "state": 42}}


# ------------------------------------------------------------------------- malformed


@pytest.mark.parametrize(
    "frame",
    [
        "this is not json",
        "",
        b"\xff\xfe garbage",
        "[1, 2]",
        '"a string"',
        "null",
        "42",
        '{"seqNum": "6"',  # truncated
    ],
)
def test_non_json_or_non_object_frames(frame: str | bytes) -> None:
    with pytest.raises(ProtocolError):
        wire.decode_output_event(frame)


@pytest.mark.parametrize(
    ("obj", "where"),
    [
        ({"callHookRequest": "oops"}, "OutputEvent.callHookRequest"),
        ({"callHookRequest": {"preToolArgs": []}}, "callHookRequest.preToolArgs"),
        ({"callHookRequest": {"requestId": 5}}, "callHookRequest.requestId"),
        ({"stepUpdate": {"stepIndex": "x"}}, "stepUpdate.stepIndex"),
        ({"stepUpdate": {"stepIndex": 1.5}}, "stepUpdate.stepIndex"),
        ({"stepUpdate": {"stepIndex": True}}, "stepUpdate.stepIndex"),
        ({"sessionEndResponse": "yes"}, "sessionEndResponse"),
        ({"seqNum": [1]}, "seqNum"),
        ({"stepUpdate": {"state": 1.5}}, "stepUpdate.state"),
        ({"initializeConversationResponse": {"history": {}}}, "history"),
        ({"initializeConversationResponse": {"history": [{"stepIndex": "?"}]}}, "history[0]"),
        ({"usageUpdate": {"agents": [1]}}, "usageUpdate.agents[0]"),
    ],
)
def test_wrong_types_raise_protocol_error_with_path(obj: dict[str, Any], where: str) -> None:
    with pytest.raises(ProtocolError) as info:
        decode(obj)
    assert where in str(info.value)


def test_two_members_of_one_oneof_rejected() -> None:
    with pytest.raises(ProtocolError, match="oneof"):
        decode({"sessionEndResponse": True, "stepUpdate": {}})


def test_bad_map_and_bytes_values() -> None:
    with pytest.raises(ProtocolError, match=r"env\['A'\]"):
        wire.message_from_dict(pb.McpStdioTransport, {"env": {"A": 1}})
    with pytest.raises(ProtocolError, match="env"):
        wire.message_from_dict(pb.McpStdioTransport, {"env": [["A", "1"]]})
    with pytest.raises(ProtocolError, match="base64"):
        wire.message_from_dict(pb.Media, {"data": "not base64!"})
    with pytest.raises(ProtocolError):
        wire.message_from_dict(pb.Media, ["not", "an", "object"])


def test_deeply_nested_frame_is_a_protocol_error() -> None:
    frame = '{"a":' * 100_000 + "1" + "}" * 100_000
    with pytest.raises(ProtocolError):
        wire.decode_output_event(frame)


# ----------------------------------------------------------------------------- encoding


def test_encode_hook_response_canonical() -> None:
    ev = pb.InputEvent(
        call_hook_response=pb.CallHookResponse(
            request_id="hook_request_2",
            pre_tool_result=pb.PreToolResult(decision=pb.PreToolResultDecision.DENY, reason="no"),
        )
    )
    assert json.loads(wire.encode_input_event(ev)) == {
        "callHookResponse": {
            "requestId": "hook_request_2",
            "preToolResult": {"decision": "DENY", "reason": "no"},
        }
    }


def test_encode_oneof_members_set_to_defaults_are_written() -> None:
    empty = pb.InputEvent(
        call_hook_response=pb.CallHookResponse(request_id="r", empty_result=pb.EmptyResult())
    )
    assert json.loads(wire.encode_input_event(empty)) == {
        "callHookResponse": {"requestId": "r", "emptyResult": {}}
    }
    err = pb.InputEvent(call_hook_response=pb.CallHookResponse(request_id="r", error_message=""))
    assert json.loads(wire.encode_input_event(err))["callHookResponse"]["errorMessage"] == ""
    assert json.loads(wire.encode_input_event(pb.InputEvent(halt_request=False))) == {
        "haltRequest": False
    }
    assert wire.encode_input_event(pb.InputEvent(session_end_request=True)) == (
        '{"sessionEndRequest":true}'
    )


def test_encode_scalars_maps_bytes_int64_enums() -> None:
    cfg = pb.HarnessConfig(
        cascade_id="c",
        enabled_hooks=[pb.LifecycleHook.PRE_TOOL, pb.LifecycleHook.STOP],
        budget_config=pb.BudgetConfig(max_total_tokens=12345678901234, max_model_calls=0),
        initial_trajectory=b"\x00\xff",
        mcp_servers=[
            pb.McpServerConfig(name="fs", stdio=pb.McpStdioTransport(command="x", env={"A": "1"}))
        ],
        retry_config=pb.RetryConfig(api_retry=pb.ModelApiRetryConfig(jitter_range=math.inf)),
        models=[pb.ModelConfig(name="m", types=[pb.ModelType.TEXT])],
    )
    d = wire.message_to_dict(pb.InitializeConversationEvent(config=cfg))["config"]
    assert d == {
        "cascadeId": "c",
        "enabledHooks": ["LIFECYCLE_HOOK_PRE_TOOL", "LIFECYCLE_HOOK_STOP"],
        "budgetConfig": {"maxTotalTokens": "12345678901234"},  # zero values omitted
        "initialTrajectory": "AP8=",
        "mcpServers": [{"name": "fs", "stdio": {"command": "x", "env": {"A": "1"}}}],
        "retryConfig": {"apiRetry": {"jitterRange": "Infinity"}},
        "models": [{"name": "m", "types": ["MODEL_TYPE_TEXT"]}],
    }


def test_encode_matches_betterproto2() -> None:
    msgs: list[Any] = [
        pb.InputEvent(user_input=pb.UserInput(parts=[pb.UserInputPart(text="hi")])),
        pb.InputEvent(
            tool_response=pb.ToolResponse(id="1", response_json='{"result": 1}', error_message="")
        ),
        pb.InputEvent(
            question_response=pb.UserQuestionsResponse(
                trajectory_id="t",
                step_index=2,
                response=pb.UserQuestionsResponseQuestionsResponse(
                    answers=[
                        pb.UserQuestionAnswer(
                            multiple_choice_answer=pb.MultipleChoiceAnswer(
                                selected_choice_indices=[0, 2]
                            )
                        ),
                        pb.UserQuestionAnswer(unanswered=True),
                    ]
                ),
            )
        ),
        pb.InputEvent(tool_confirmation=pb.ToolConfirmation(trajectory_id="t", accepted=True)),
        pb.InputEvent(
            policy_decision_response=pb.PolicyDecisionResponse(
                request_id="p", outcome=pb.PolicyEvaluationOutcome.DENY, deny_reason="x"
            )
        ),
        pb.OutputEvent.from_json(PRE_TOOL_FRAME),
        pb.OutputEvent.from_json(STEP_FRAME),
    ]
    for msg in msgs:
        assert wire.message_to_dict(msg) == msg.to_dict()


# --------------------------------------------------------------------------- round trips


def _full_harness_config() -> pb.HarnessConfig:
    return pb.HarnessConfig(
        cascade_id="conv",
        session_continuation_mode=pb.HarnessConfigSessionContinuationMode.CREATE_OR_RESUME,
        system_instructions=pb.SystemInstructions(
            custom=pb.CustomSystemInstructions(
                part=[pb.CustomSystemInstructionsPart(text="Be brief.")]
            )
        ),
        tools=[pb.Tool(name="t", description="d", parameters_json_schema="{}")],
        harness_side_tools=pb.HarnessSideTools(
            run_command=pb.RunCommandToolConfig(enabled=True, max_timeout_ms=1000),
            view_file=pb.ViewFileToolConfig(enabled=True),
        ),
        workspaces=[pb.Workspace(filesystem_workspace=pb.FilesystemWorkspace(directory="/ws"))],
        models=[
            pb.ModelConfig(
                name="g",
                gemini_api_endpoint=pb.GeminiApiEndpoint(
                    api_key="k", http_headers={"a": "b"}, options=pb.GeminiModelOptions()
                ),
            ),
            pb.ModelConfig(name="s", gemma_endpoint=pb.GemmaEndpoint(base_url="http://h/v1")),
        ],
        mcp_servers=[
            pb.McpServerConfig(
                name="w", http=pb.McpHttpTransport(url="http://u", headers={"X": "y"})
            )
        ],
        enabled_hooks=list(pb.LifecycleHook)[1:],
        policy_config=pb.PolicyConfig(
            rules=[pb.PolicyRule(tool="run_command", decision=pb.PolicyDecision.ASK_USER)],
            workspace_containment=pb.PolicyConfigWorkspaceContainment.ENABLED,
        ),
        agent_behavior=pb.AgentBehavior.AUTONOMOUS,
        compaction_config=pb.CompactionConfig(token_threshold=10),
    )


def test_json_round_trips() -> None:
    msgs: list[Any] = [
        pb.InitializeConversationEvent(config=_full_harness_config()),
        wire.decode_output_event(PRE_TOOL_FRAME),
        wire.decode_output_event(STEP_FRAME),
        pb.InputEvent(
            user_input=pb.UserInput(
                parts=[pb.UserInputPart(media=pb.UserInputMedia(mime_type="a/b", data=b"\x01\x02"))]
            )
        ),
    ]
    for msg in msgs:
        text = wire.encode_json(msg)
        assert wire.decode_json(type(msg), text) == msg
        assert type(msg).from_json(text) == msg  # betterproto2 reads our output
        assert wire.decode_json(type(msg), msg.to_json()) == msg  # we read betterproto2's


def test_binary_round_trip_and_input_config_encoding() -> None:
    cfg = pb.InputConfig(
        storage_directory="/save",
        client_info=pb.ClientInfo(language="python", version="0.1.0", os="linux"),
        env={"HOME": "/h"},
    )
    data = bytes(cfg)
    # field 1 (storage_directory), wire type 2, length 5
    assert data.startswith(b"\x0a\x05/save")
    assert pb.InputConfig.parse(data) == cfg
    hc = _full_harness_config()
    assert pb.HarnessConfig.parse(bytes(hc)) == hc


# ------------------------------------------------------------- length-prefixed framing


def test_encode_frame() -> None:
    out = pb.OutputConfig(port=33031, api_key="k" * 32)
    frame = wire.encode_frame(out)
    assert int.from_bytes(frame[:4], "little") == len(frame) - 4
    assert frame[4:] == bytes(out)
    assert wire.encode_frame(b"abc") == b"\x03\x00\x00\x00abc"


def test_read_frame_partial_buffers() -> None:
    out = pb.OutputConfig(port=33031, api_key="secret")
    stream = wire.encode_frame(out) + b"TRAILING"
    buf = b""
    msg = None
    for i, byte in enumerate(stream):
        buf += bytes([byte])
        msg, rest = wire.decode_length_prefixed(buf, pb.OutputConfig)
        if msg is not None:
            assert i == len(stream) - len(b"TRAILING") - 1
            assert rest == b""
            break
        assert rest == buf
    assert msg == out


def test_read_frame_multiple_frames_and_empty_payload() -> None:
    data = wire.encode_frame(b"one") + wire.encode_frame(b"") + b"\x02\x00"
    first, rest = wire.read_frame(data)
    assert first == b"one"
    second, rest = wire.read_frame(rest)
    assert second == b""
    third, rest = wire.read_frame(rest)
    assert third is None and rest == b"\x02\x00"
    assert wire.read_frame(bytearray(b"\x01\x00\x00\x00x")) == (b"x", b"")


def test_decode_empty_output_config() -> None:
    msg, rest = wire.decode_length_prefixed(b"\x00\x00\x00\x00", pb.OutputConfig)
    assert msg == pb.OutputConfig() and rest == b""


def test_oversized_prefix_means_the_peer_printed_text() -> None:
    with pytest.raises(ProtocolError, match="exceeds"):
        wire.read_frame(b"Usage of localharness:\n")
    assert wire.read_frame(b"\x05\x00\x00\x00hello", max_size=5) == (b"hello", b"")
    with pytest.raises(ProtocolError):
        wire.read_frame(b"\x06\x00\x00\x00hello!", max_size=5)


@pytest.mark.parametrize(
    "payload",
    [
        b"\xff\xff\xff",  # unterminated tag varint
        b"\x08",  # varint field without its value
        b"\x08\xff",  # truncated varint value
        b"\x12\x10ab",  # string field longer than the message
        b"\x0b",  # group start (wire type 3): not proto3
        b"\x00\x01",  # field number 0
        b"\x0a\x02ab",  # port (varint) sent as length-delimited
        b"\x15\x01\x02",  # api_key as fixed32, truncated
    ],
)
def test_garbage_binary_payload_is_protocol_error(payload: bytes) -> None:
    with pytest.raises(ProtocolError, match="OutputConfig"):
        wire.decode_length_prefixed(wire.encode_frame(payload), pb.OutputConfig)


def test_binary_unknown_fields_tolerated() -> None:
    # OutputConfig + an unknown field 9 (varint 1) and an unknown enum number.
    payload = bytes(pb.OutputConfig(port=1, api_key="k")) + b"\x48\x01"
    msg, _ = wire.decode_length_prefixed(wire.encode_frame(payload), pb.OutputConfig)
    assert msg is not None and msg.port == 1 and msg.api_key == "k"
    hook = pb.CallHookRequest.parse(b"\x38\x63")  # type = 99
    assert int(hook.type) == 99
