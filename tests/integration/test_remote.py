"""`RemoteConnection`: an agent attached to a harness that something else started.

The harness is spawned here by hand (the framed InputConfig/OutputConfig handshake), and
the agent only gets its port and API key, through the arguments or the environment.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from antigravity_sdk import Agent, Hook, HookResult, ToolCall, policy
from antigravity_sdk.harness import wire
from antigravity_sdk.harness.connection import RemoteConnection
from antigravity_sdk.harness.install import find_harness
from antigravity_sdk.testing import ScriptedModel, tool_call


@pytest.fixture
def running_harness(tmp_path: Path) -> Iterator[tuple[int, str]]:
    """A harness started outside the SDK: yields (port, api_key)."""
    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.Popen(
        [str(find_harness())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "HOME": str(home)},
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        config = wire.pb.InputConfig(storage_directory=str(tmp_path / "save"))
        proc.stdin.write(wire.encode_frame(config))
        proc.stdin.flush()
        header = proc.stdout.read(4)
        body = proc.stdout.read(int.from_bytes(header, "little"))
        output, _ = wire.decode_length_prefixed(header + body, wire.pb.OutputConfig)
        assert output is not None and output.port and output.api_key
        yield output.port, output.api_key
    finally:
        proc.kill()
        proc.wait(timeout=5)


class Recorder(Hook):
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        self.calls.append(tool_call.name)
        return HookResult.allowed()


async def test_an_agent_drives_a_harness_it_did_not_start(
    running_harness: tuple[int, str], tmp_path: Path
) -> None:
    port, api_key = running_harness
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("remote notes\n")
    model = ScriptedModel([tool_call("view_file", AbsolutePath=str(ws / "notes.txt")), "read it"])
    recorder = Recorder()
    agent = (
        Agent.builder()
        .hook(recorder)
        .policies([policy.deny("run_command"), policy.allow_all()])
        .model(model)
        .workspaces([ws])
        .app_data_dir(tmp_path / "app")
        .connection(RemoteConnection("127.0.0.1", port, api_key))
        .build()
    )
    async with agent:
        response = await agent.chat("read the notes")
        assert agent.started and agent.harness_pid is None  # nothing was spawned
    assert response.text == "read it"
    assert recorder.calls == ["view_file"]
    assert "remote notes" in str(model.requests[1].tool_results)


def test_remote_connection_defaults_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTIGRAVITY_HARNESS_HOST", "10.1.2.3")
    monkeypatch.setenv("ANTIGRAVITY_HARNESS_PORT", "4567")
    monkeypatch.setenv("ANTIGRAVITY_API_KEY", "k" * 32)
    conn = RemoteConnection()
    assert (conn.host, conn.port, conn.api_key) == ("10.1.2.3", 4567, "k" * 32)
    monkeypatch.delenv("ANTIGRAVITY_API_KEY")
    with pytest.raises(ValueError, match="api_key"):
        RemoteConnection()
