"""The audit log against the real harness: each line says exactly what was decided.

One turn makes four calls (allowed by a rule, denied by a rule, denied by a hook,
rewritten by a hook); the log must attribute each to what decided it, and end the turn
with its usage and stop reason. Attacks: a redactor that raises must never let the raw
arguments through; SDK refusals are recorded as the SDK's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from antigravity_sdk import Hook, HookResult, ToolCall, policy
from antigravity_sdk.audit import REDACTION_FAILED, summarize
from antigravity_sdk.testing import tool_call

from .conftest import AgentFactory, Workspace
from .test_examples import load_example


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


class Gate(Hook):
    """Denies reading secrets; rewrites reading the decoy into reading `instead`."""

    def __init__(self, instead: Path) -> None:
        self.instead = instead

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        path = tool_call.args.get("AbsolutePath", "")
        if "secret" in path:
            return HookResult.denied("no secrets")
        if path.endswith("decoy.txt"):
            return HookResult.rewrite({"AbsolutePath": str(self.instead)})
        return HookResult.allowed()


async def test_each_line_says_what_decided_the_call(
    make_agent: AgentFactory, env: Workspace
) -> None:
    (env.ws / "notes.txt").write_text("hello")
    log = env.root / "audit.jsonl"
    agent, _ = make_agent(
        [
            tool_call("view_file", AbsolutePath=str(env.ws / "notes.txt")),
            tool_call("run_command", CommandLine="rm -rf /", Cwd=str(env.ws)),
            tool_call("view_file", AbsolutePath=str(env.ws / "secret.txt")),
            tool_call("view_file", AbsolutePath=str(env.ws / "decoy.txt")),
            "done",
        ],
        hooks=[Gate(env.ws / "notes.txt")],
        policies=[
            policy.deny("run_command", name="no-shell"),
            policy.allow("view_file", name="read-ok"),
            policy.allow_all(),
        ],
        configure=lambda b: b.audit_log(log),
    )
    async with agent:
        response = await agent.chat("go")
    assert response.text == "done"
    decisions = [e for e in _lines(log) if e["kind"] == "decision"]
    turns = [e for e in _lines(log) if e["kind"] == "turn"]
    assert [(e["tool"], e["verdict"], e["by"]) for e in decisions] == [
        ("view_file", "allow", "policy"),
        ("run_command", "deny", "policy"),
        ("view_file", "deny", "hook"),
        ("view_file", "allow", "policy"),
    ]
    allowed, denied, hooked, rewritten = decisions
    assert (allowed["rule"], allowed["decision"], allowed["bucket_name"]) == (
        "read-ok",
        "approve",
        "specific allow",
    )
    assert allowed["args"] == {"AbsolutePath": str(env.ws / "notes.txt")}
    assert (denied["rule"], denied["decision"], denied["bucket"]) == ("no-shell", "deny", 0)
    assert denied["args"]["CommandLine"] == "rm -rf /"
    assert "no-shell" in denied["message"]
    assert (hooked["hook"], hooked["rule"], hooked["message"]) == ("Gate", None, "no secrets")
    assert rewritten["args"] == {"AbsolutePath": str(env.ws / "decoy.txt")}
    assert rewritten["rewritten_args"] == {"AbsolutePath": str(env.ws / "notes.txt")}
    assert (rewritten["rewritten_by"], rewritten["rule"]) == (["Gate"], "read-ok")
    assert "rewritten_args" not in allowed
    for entry in decisions:
        assert entry["conversation"] == agent.conversation_id
        assert entry["trajectory"] == agent.conversation_id  # the agent's own trajectory
        assert entry["turn"] == 1
        assert 0 < entry["latency_us"] < 1_000_000
        if entry is not hooked:  # the policies never saw the call a hook denied
            assert 0 < entry["policy_us"] <= entry["latency_us"]
    assert hooked["policy_us"] is None
    (turn,) = turns
    assert turn["stop_reason"] == "finished"
    assert turn["conversation"] == agent.conversation_id
    assert (turn["decisions"], turn["denied"]) == (4, 2)
    assert response.usage is not None
    assert turn["usage"]["total"] == response.usage.total_token_count > 0
    assert set(turn["usage_by_trajectory"]) == set(response.usage_by_trajectory)
    summary = summarize(log)
    assert (summary.tools["view_file"].allowed, summary.tools["view_file"].denied) == (2, 1)
    assert summary.tools["run_command"].deny_reasons == {"rule no-shell": 1}


async def test_a_failing_redactor_never_lets_the_arguments_through(
    make_agent: AgentFactory, env: Workspace
) -> None:
    log = env.root / "audit.jsonl"
    secret = "sk-live-0123456789"

    def redact(args: dict[str, Any]) -> dict[str, Any]:
        raise ValueError(f"cannot redact {args['CommandLine']}")  # quotes the secret

    agent, _ = make_agent(
        [tool_call("run_command", CommandLine=f"echo {secret}", Cwd=str(env.ws)), "ok"],
        policies=[policy.allow_all()],
        configure=lambda b: b.audit_log(log, redact=redact),
    )
    async with agent:
        assert (await agent.chat("go")).text == "ok"  # the turn is unaffected
    text = log.read_text()
    assert secret not in text
    (decision,) = [e for e in _lines(log) if e["kind"] == "decision"]
    assert decision["args"] == REDACTION_FAILED
    assert decision["verdict"] == "allow"


async def test_sdk_refusals_are_recorded_as_the_sdks(
    make_agent: AgentFactory, env: Workspace
) -> None:
    log = env.root / "audit.jsonl"
    agent, _ = make_agent(
        [
            # Keys equal under case-folding: the SDK refuses before any hook is asked.
            tool_call("run_command", CommandLine="ls", commandline="rm -rf /", Cwd=str(env.ws)),
            "ok",
        ],
        policies=[policy.allow_all()],
        configure=lambda b: b.audit_log(log),
    )
    async with agent:
        await agent.chat("go")
    (refused,) = [e for e in _lines(log) if e["kind"] == "decision"]
    assert (refused["verdict"], refused["by"], refused["rule"], refused["hook"]) == (
        "deny",
        "sdk",
        None,
        None,
    )
    assert "differ only in case" in refused["message"]


async def test_audit_log_example_runs() -> None:
    assert await load_example("audit_log").main() == 0


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The `antigravity` command line of this checkout, offline."""
    env = {k: v for k, v in os.environ.items() if k != "GEMINI_API_KEY"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    return subprocess.run(
        [sys.executable, "-m", "antigravity_sdk", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_the_demo_writes_its_decisions_to_the_audit_log(tmp_path: Path) -> None:
    log = tmp_path / "demo-audit.jsonl"
    done = _cli("demo", "--audit-log", str(log))
    assert done.returncode == 0, done.stdout + done.stderr
    entries = _lines(log)
    decisions = [e for e in entries if e["kind"] == "decision"]
    assert {e["verdict"] for e in decisions} == {"allow", "deny"}
    assert [e["kind"] for e in entries[-2:]] == ["turn", "end"]
    assert entries[-2]["stop_reason"] == "finished"
    summary = _cli("audit", "summarize", str(log))
    assert summary.returncode == 0 and "run_command" in summary.stdout
