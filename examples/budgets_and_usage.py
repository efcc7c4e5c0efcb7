"""What a turn cost and why it ended, with a budget on tool calls (offline).

The scripted model keeps asking to read a file; the budget allows two tool calls for the
whole conversation, so the harness ends the turn after the second and
`ChatResponse.stop_reason` says so. Token counts are the ones the model reported.

    python examples/budgets_and_usage.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from antigravity_sdk import Agent, Budget, StopReason, ToolOutputLimit, policy
from antigravity_sdk.testing import ScriptedModel, tool_call


async def main() -> int:
    workspace = Path(tempfile.mkdtemp())
    notes = workspace / "notes.txt"
    notes.write_text("remember the milk\n" * 2000)
    model = ScriptedModel(
        ["Hello! Ask me to read your notes."]
        + [tool_call("view_file", AbsolutePath=str(notes))] * 5
    )
    agent = (
        Agent.builder()
        .model(model)
        .policies([policy.allow_all()])
        .workspaces([workspace])
        .budget(Budget(max_tool_calls=2, max_total_tokens=1_000_000))
        .tool_output_limit(ToolOutputLimit(max_tokens=200))  # the model sees the start only
        .build()
    )
    async with agent:
        hello = await agent.chat("hi")
        print(f"turn 1: {hello.stop_reason}, {hello.usage.total_token_count} tokens")
        reading = await agent.chat("read my notes, again and again")
        print(f"turn 2: {reading.stop_reason}, {reading.usage.total_token_count} tokens")
        print(f"session: {agent.usage.total_token_count} tokens")
        for trajectory, usage in agent.usage_by_trajectory.items():
            print(f"  trajectory {trajectory[:8]}: {usage.total_token_count} tokens")
        finished = hello.stop_reason is StopReason.FINISHED
        return 0 if finished and reading.stop_reason is StopReason.MAX_TOOL_CALLS else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
