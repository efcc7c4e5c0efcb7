"""Keep an audit log of every decision an agent makes, with secrets redacted (offline).

`AgentBuilder.audit_log(path, redact=...)` appends one JSON line per tool-call decision:
the tool, its arguments (after `redact`), the verdict and what decided it (a policy rule
and its bucket, a hook by name, or the SDK's own refusal), and how long deciding took;
each turn ends with a line holding its usage and stop reason. Here a policy denies
`rm`, a hook denies reading `.env`, and the redactor hides tokens in commands; the `curl`
the policies allow is refused by the containment's egress proxy (`example.test` is no
allowed host), a decision line of its own on the `network` route. Then the log is read
back and summarised, as `antigravity audit summarize FILE` prints it.

    python examples/audit_log.py
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from antigravity_sdk import Agent, Hook, HookResult, ToolCall, policy
from antigravity_sdk.audit import render_summary, summarize
from antigravity_sdk.testing import ScriptedModel, tool_call

TOKEN = re.compile(r"(token=)\S+")


def redact(args: dict[str, Any]) -> dict[str, Any]:
    """Mask `token=...` in shell commands before the line is written."""
    if "CommandLine" in args:
        args["CommandLine"] = TOKEN.sub(r"\1***", args["CommandLine"])
    return args


class NoDotEnv(Hook):
    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        if tool_call.args.get("AbsolutePath", "").endswith(".env"):
            return HookResult.denied("reading .env is not allowed")
        return HookResult.allowed()


async def main() -> int:
    root = Path(tempfile.mkdtemp())
    workspace = root / "workspace"
    workspace.mkdir()
    (workspace / ".env").write_text("API_KEY=do-not-log")
    log = root / "audit.jsonl"
    model = ScriptedModel(
        [
            tool_call(
                "run_command", CommandLine="curl -s example.test?token=s3cr3t", Cwd=str(workspace)
            ),
            tool_call("run_command", CommandLine="rm -rf build", Cwd=str(workspace)),
            tool_call("view_file", AbsolutePath=str(workspace / ".env")),
            "All done.",
        ]
    )
    rules = [
        policy.deny_commands(["rm"], name="no-rm"),
        policy.allow_all(),
    ]
    agent = (
        Agent.builder()
        .model(model)
        .hook(NoDotEnv())
        .policies(rules)
        .workspaces([workspace])
        .save_dir(root / "conversations")
        .app_data_dir(root / "app-data")
        .audit_log(log, redact=redact)
        .build()
    )
    async with agent:
        await agent.chat("fetch, clean up, read the config")
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    decisions = [line for line in lines if line["kind"] == "decision"]
    for line in decisions:
        if line["route"] == "network":  # no tool call: a connection the proxy refused
            where = f"{line['host']}:{line['port']}"
            print(f"{'(network)':<12} {line['verdict']:<6} by {line['by']} ({where})")
            continue
        why = line["rule"] or line["hook"] or line["by"]
        print(f"{line['tool']:<12} {line['verdict']:<6} by {line['by']:<6} ({why})")
    render_summary(summarize(log), sys.stdout)
    calls = [e for e in decisions if e["route"] != "network"]
    verdicts = [(e["verdict"], e["rule"] or e["hook"]) for e in calls]
    expected = [("allow", "allow_all"), ("deny", "no-rm"), ("deny", "NoDotEnv")]
    refused = [e["host"] for e in decisions if e["route"] == "network"]
    if refused != ["example.test"] and refused != []:  # (curl may not be installed)
        return 1
    redacted = "s3cr3t" not in log.read_text() and "token=***" in log.read_text()
    (turn,) = [line for line in lines if line["kind"] == "turn"]
    return 0 if verdicts == expected and redacted and turn["stop_reason"] == "finished" else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
