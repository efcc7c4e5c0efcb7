"""Stream a turn and watch each tool call and its result as they happen (offline).

`agent.stream()` yields `text` and `thought` deltas, a `tool_call` chunk when a call
reaches the SDK for a decision, and a `tool_result` chunk when the tool has run (`text` is
the start of its output, `error` its error). A call the policies deny gets no result.

    python examples/stream_tool_results.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from antigravity_sdk import Agent, policy
from antigravity_sdk.testing import ScriptedModel, tool_call


async def main() -> int:
    workspace = Path(tempfile.mkdtemp())
    model = ScriptedModel(
        [
            tool_call("run_command", CommandLine="echo hello", Cwd=str(workspace)),
            tool_call("view_file", AbsolutePath=str(workspace / "missing.txt")),
            tool_call("run_command", CommandLine="rm -rf build", Cwd=str(workspace)),
            "All done.",
        ]
    )
    rules = [
        policy.deny("run_command", when=lambda args: "rm " in args["CommandLine"], name="no-rm"),
        policy.allow_all(),
    ]
    agent = Agent.builder().model(model).policies(rules).workspaces([workspace]).build()
    results = []
    async with agent:
        async for chunk in agent.stream("use some tools"):
            name = chunk.tool_call.name if chunk.tool_call else ""
            if chunk.type == "tool_call":
                print(f"-> {name} {chunk.tool_call.args if chunk.tool_call else ''}")
            elif chunk.type == "tool_result":
                results.append(name)
                outcome = f"failed: {chunk.error}" if chunk.error else f"ok: {chunk.text!r}"
                print(f"<- {name} {outcome}")
            elif chunk.type == "text":
                print(chunk.text, end="", flush=True)
    print()
    return 0 if results == ["run_command", "view_file"] else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
