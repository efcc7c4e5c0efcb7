"""The wire codec: protobuf-JSON encoding and the length-prefixed handshake (no harness needed)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import betterproto2
import pytest

from antigravity_sdk.errors import ProtocolError
from antigravity_sdk.harness import wire
from antigravity_sdk.harness.config import ModelSettings, harness_config
from antigravity_sdk.harness.wire import pb
from antigravity_sdk.types import BuiltinTool, CapabilitiesConfig, McpHttpServer, McpStdioServer

# ----------------------------------------------------------------------------- encoding


def test_encode_names_enums_int64_maps_and_defaults() -> None:
    cfg = pb.HarnessConfig(
        cascade_id="c",
        session_continuation_mode=pb.HarnessConfigSessionContinuationMode.CREATE_OR_RESUME,
        enabled_hooks=[pb.LifecycleHook.PRE_TOOL, pb.LifecycleHook.STOP],
        budget_config=pb.BudgetConfig(max_total_tokens=12345678901234, max_model_calls=0),
        mcp_servers=[
            pb.McpServerConfig(name="fs", stdio=pb.McpStdioTransport(command="x", env={"A": "1"}))
        ],
        retry_config=pb.RetryConfig(api_retry=pb.ModelApiRetryConfig(jitter_range=math.inf)),
        models=[pb.ModelConfig(name="m", types=[pb.ModelType.TEXT])],
        compaction_threshold=0,
        app_data_dir="",
    )
    d = wire.message_to_dict(pb.InitializeConversationEvent(config=cfg))["config"]
    assert d == {
        "cascadeId": "c",
        "sessionContinuationMode": "CREATE_OR_RESUME",  # nested enum: its proto name
        "enabledHooks": ["LIFECYCLE_HOOK_PRE_TOOL", "LIFECYCLE_HOOK_STOP"],
        "budgetConfig": {"maxTotalTokens": "12345678901234"},  # zero values omitted
        "mcpServers": [{"name": "fs", "stdio": {"command": "x", "env": {"A": "1"}}}],
        "retryConfig": {"apiRetry": {"jitterRange": "Infinity"}},
        "models": [{"name": "m", "types": ["MODEL_TYPE_TEXT"]}],
    }


def test_encode_set_messages_and_oneof_members_are_written_even_when_empty() -> None:
    tools = pb.HarnessSideTools(find=pb.FindToolConfig(enabled=False))
    assert wire.message_to_dict(tools) == {"find": {}}
    ws = pb.Workspace(filesystem_workspace=pb.FilesystemWorkspace())
    assert wire.message_to_dict(ws) == {"filesystemWorkspace": {}}
    si = pb.SystemInstructions(appended=pb.AppendedSystemInstructions())
    assert wire.message_to_dict(si) == {"appended": {}}
    assert wire.message_to_dict(pb.HarnessConfig()) == {}


def test_encode_unknown_enum_number_as_number() -> None:
    budget = pb.BudgetConfig(scope=pb.BudgetConfigBudgetScope(42))
    assert wire.message_to_dict(budget) == {"scope": 42}


_BOOL_TO_UINT64 = betterproto2.map_meta(betterproto2.TYPE_BOOL, betterproto2.TYPE_UINT64)


@dataclass(eq=False, repr=False)
class _Blob(betterproto2.Message):
    """Types the kept schema happens not to use: bytes, bool map keys, a NaN double."""

    data: bytes = betterproto2.field(1, betterproto2.TYPE_BYTES)
    # betterproto2.field() returns a dataclasses.field() with a default_factory: not shared.
    flags: dict[bool, int] = betterproto2.field(  # noqa: RUF009
        2, betterproto2.TYPE_MAP, map_meta=_BOOL_TO_UINT64
    )
    ratio: float = betterproto2.field(3, betterproto2.TYPE_DOUBLE)


def test_encode_bytes_bool_map_keys_and_nan() -> None:
    blob = _Blob(data=b"\x00\xff", flags={True: 5, False: 0}, ratio=math.nan)
    assert wire.message_to_dict(blob) == {
        "data": "AP8=",
        "flags": {"true": "5", "false": "0"},  # map values are written even when zero
        "ratio": "NaN",
    }


def _full_harness_config() -> pb.HarnessConfig:
    return pb.HarnessConfig(
        cascade_id="conv",
        session_continuation_mode=pb.HarnessConfigSessionContinuationMode.CREATE_OR_RESUME,
        system_instructions=pb.SystemInstructions(
            appended=pb.AppendedSystemInstructions(
                appended_sections=[
                    pb.AppendedSystemInstructionsSection(title="Instructions", content="Be brief.")
                ]
            )
        ),
        tools=[pb.Tool(name="t", description="d", parameters_json_schema="{}")],
        harness_side_tools=pb.HarnessSideTools(
            run_command=pb.RunCommandToolConfig(
                enabled=True,
                max_timeout_ms=1000,
                execution_mode=pb.ToolExecutionMode.ASYNC,
            ),
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
                name="w",
                http=pb.McpHttpTransport(url="http://u", headers={"X": "y"}),
                auth_provider_type=pb.McpServerConfigAuthProviderType.GOOGLE_CREDENTIALS,
            )
        ],
        enabled_hooks=list(pb.LifecycleHook)[1:],
        retry_config=pb.RetryConfig(
            api_retry=pb.ModelApiRetryConfig(max_retries=3, exponential_multiplier=1.5),
            model_output_retry=pb.ModelOutputRetryConfig(max_retries=2),
        ),
        agent_behavior=pb.AgentBehavior.AUTONOMOUS,
        budget_config=pb.BudgetConfig(
            max_input_tokens=7, scope=pb.BudgetConfigBudgetScope.FORWARD_LOOKING
        ),
        compaction_config=pb.CompactionConfig(token_threshold=10),
    )


def test_encode_matches_betterproto2() -> None:
    msgs: list[Any] = [
        pb.InitializeConversationEvent(config=_full_harness_config()),
        pb.InputConfig(
            storage_directory="/s",
            port=9,
            client_info=pb.ClientInfo(language="python", os="linux"),
            env={"HOME": "/h"},
        ),
    ]
    for msg in msgs:
        assert wire.message_to_dict(msg) == msg.to_dict()
        assert type(msg).from_dict(wire.message_to_dict(msg)) == msg  # and reads it back


def test_harness_config_json_shape() -> None:
    """The first frame exactly as `harness_config` builds it for `Agent`."""
    frame = harness_config(
        model=ModelSettings("gemma3", base_url="http://127.0.0.1:11434/v1"),
        workspaces=[Path("/ws")],
        app_data_dir=Path("/data"),
        capabilities=CapabilitiesConfig(
            enabled_tools=frozenset({BuiltinTool.RUN_COMMAND, BuiltinTool.ASK_QUESTION}),
            run_command_timeout_ms=5000,
            max_model_calls=4,
            compaction_token_threshold=1000,
        ),
        hook_events=["post_tool_call", "pre_tool_call", "pre_turn", "not_a_hook"],
        system_instructions="Be brief.",
        tools=[("get_weather", "Weather for a city.", '{"type": "object"}')],
        mcp_servers=[
            McpStdioServer(name="fs", command="mcp-fs", env={"A": "1"}),
            McpHttpServer(name="web", url="http://u/mcp", timeout_seconds=30),
        ],
    )
    cfg = frame["config"]
    assert cfg["models"] == [
        {
            "name": "gemma3",
            "types": ["MODEL_TYPE_TEXT"],
            "gemmaEndpoint": {"baseUrl": "http://127.0.0.1:11434/v1"},
        }
    ]
    assert cfg["enabledHooks"] == [  # in enum order
        "LIFECYCLE_HOOK_PRE_TURN",
        "LIFECYCLE_HOOK_PRE_TOOL",
        "LIFECYCLE_HOOK_POST_TOOL",
    ]
    side = cfg["harnessSideTools"]
    assert side["runCommand"] == {"enabled": True, "maxTimeoutMs": 5000}
    assert side["userQuestions"] == {"enabled": True}
    assert side["viewFile"] == {}  # switched off: present, with enabled=false omitted
    assert cfg["workspaces"] == [{"filesystemWorkspace": {"directory": "/ws"}}]
    assert cfg["appDataDir"] == "/data"
    assert cfg["systemInstructions"] == {
        "appended": {"appendedSections": [{"title": "Instructions", "content": "Be brief."}]}
    }
    assert cfg["tools"] == [
        {
            "name": "get_weather",
            "description": "Weather for a city.",
            "parametersJsonSchema": '{"type": "object"}',
        }
    ]
    assert cfg["mcpServers"] == [
        {"name": "fs", "stdio": {"command": "mcp-fs", "env": {"A": "1"}}},
        {"name": "web", "http": {"url": "http://u/mcp"}, "timeoutSeconds": 30},
    ]
    assert cfg["agentBehavior"] == "AGENT_BEHAVIOR_INTERACTIVE"
    assert cfg["budgetConfig"] == {"maxModelCalls": 4, "scope": "BUDGET_SCOPE_LIFETIME"}
    assert cfg["compactionConfig"] == {"tokenThreshold": 1000}
    # The whole frame is valid protobuf JSON for the schema.
    assert wire.message_to_dict(pb.InitializeConversationEvent.from_dict(frame)) == frame


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
    run = pb.RunCommandToolConfig.parse(b"\x28\x63")  # execution_mode = 99
    assert int(run.execution_mode) == 99
