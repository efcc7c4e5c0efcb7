"""Rewrite a tool call's arguments in a hook, governed like the model's own call (offline).

A pre_tool_call hook answers `HookResult.rewrite(args)`: the call runs with `args` (the
complete arguments) instead of the model's. Later hooks and the policies see the rewritten
call, and the harness runs exactly what they checked. Here a hook turns any `rm` into a
dry run that only says what it would remove; a policy still refuses the rewrite it is
written against, and post_tool_call sees the call as it ran.

    python examples/rewrite_arguments.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from antigravity_sdk import Agent, Hook, HookResult, ToolCall, ToolResult, policy
from antigravity_sdk.testing import ScriptedModel, tool_call


class DryRunRemovals(Hook):
    """Rewrite `rm ...` to an `echo` of what it would have removed."""

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        command = tool_call.args.get("CommandLine", "")
        if tool_call.name == "run_command" and command.startswith("rm "):
            dry_run = "echo would run: " + command.removeprefix("rm ")
            return HookResult.rewrite({**tool_call.args, "CommandLine": dry_run})
        return HookResult.allowed()


class ShowRuns(Hook):
    """Print each call as it actually ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    async def post_tool_call(self, result: ToolResult) -> None:
        if result.tool_call is not None:
            command = result.tool_call.args.get("CommandLine", "")
            self.ran.append(command)
            print(f"ran: {command}")


async def main() -> int:
    workspace = Path(tempfile.mkdtemp())
    (workspace / "build").mkdir()
    (workspace / "build" / "output.bin").write_text("keep me")
    model = ScriptedModel(
        [
            tool_call("run_command", CommandLine="rm -rf build", Cwd=str(workspace)),
            # The dry run of this one would print the secret: the policy sees that and denies.
            tool_call("run_command", CommandLine="rm secret.key", Cwd=str(workspace)),
            "Cleaned up (as a dry run).",
        ]
    )
    rules = [
        policy.deny(
            "run_command", when=lambda args: "secret" in args["CommandLine"], name="no-secrets"
        ),
        policy.allow_all(),
    ]
    shown = ShowRuns()
    agent = (
        Agent.builder()
        .model(model)
        .hooks([DryRunRemovals(), shown])
        .policies(rules)
        .workspaces([workspace])
        .build()
    )
    async with agent:
        response = await agent.chat("clean the build directory")
    print(response.text)
    survived = (workspace / "build" / "output.bin").exists()
    print(f"build/output.bin survived: {survived}")
    denied = "no-secrets" in str(model.requests[2].tool_results)
    print(f"the rewritten secret.key call was denied: {denied}")
    return 0 if survived and denied and shown.ran == ["echo would run: -rf build"] else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
