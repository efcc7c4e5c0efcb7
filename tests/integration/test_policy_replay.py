"""`antigravity policy replay` on an audit log a real agent wrote: the calls the policies
decided are decided again under a candidate file; redacted ones and the ones a hook
decided are counted, never guessed."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from antigravity_sdk import Hook, HookResult, ToolCall, policy
from antigravity_sdk.testing import tool_call

from .conftest import AgentFactory, Workspace

ROOT = Path(__file__).resolve().parents[2]


class NoSecrets(Hook):
    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        if "secret" in str(tool_call.args):
            return HookResult.denied("no secrets")
        return HookResult.allowed()


def mask_tokens(args: dict[str, Any]) -> dict[str, Any]:
    return {k: "***" if "token=" in str(v) else v for k, v in args.items()}


async def test_replay_of_a_real_session(make_agent: AgentFactory, env: Workspace) -> None:
    (env.ws / "notes.txt").write_text("hello")
    log = env.root / "audit.jsonl"
    agent, _ = make_agent(
        [
            tool_call(
                "run_command", CommandLine="echo hi", Cwd=str(env.ws), WaitMsBeforeAsync=5000
            ),
            tool_call(
                "run_command", CommandLine="echo token=abc", Cwd=str(env.ws), WaitMsBeforeAsync=5000
            ),
            tool_call("view_file", AbsolutePath=str(env.ws / "notes.txt")),
            tool_call("view_file", AbsolutePath=str(env.ws / "secret.txt")),
            "done",
        ],
        hooks=[NoSecrets()],
        policies=[policy.allow_all()],
        configure=lambda b: b.audit_log(log, redact=mask_tokens),
    )
    async with agent:
        assert (await agent.chat("go")).text == "done"
    candidate = env.root / "candidate.toml"
    candidate.write_text(
        "[[rule]]\nname = 'no-commands'\ntool = 'run_command'\ndecision = 'deny'\n"
        "[[rule]]\nname = 'allow_all'\ntool = '*'\ndecision = 'allow'\n"
    )
    command = [sys.executable, "-m", "antigravity_sdk", "policy", "replay", str(candidate)]
    done = await asyncio.to_thread(
        subprocess.run,
        [*command, str(log), "--redacted", "***"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 1, done
    assert done.stderr == ""
    out = done.stdout.splitlines()
    assert out[0].endswith(
        f"2 decisions of the policies replayed under {candidate}: 1 would change"
    )
    (change,) = [line for line in out if "echo hi" in line]
    assert "allow (allow_all)" in change and "deny (no-commands)" in change
    assert "notes.txt" not in done.stdout  # the same rule decides it under both
    assert out[-1] == (
        "not replayed: 1 with redacted arguments (not guessed), "
        "1 decided before the policies (a hook or the SDK)"
    )
