"""Cancel a running turn from another task, then go on with the session (offline).

The scripted model asks for a shell command that would run for a minute; a watchdog task
cancels the turn as soon as the command starts. `chat()` raises `TurnCancelledError`, the
harness halts the turn (the command is ended with it), and the next `chat()` works.

    python examples/cancel_turn.py
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from antigravity_sdk import Agent, Hook, HookResult, ToolCall, TurnCancelledError, policy
from antigravity_sdk.testing import ScriptedModel, tool_call


class Started(Hook):
    """Signals when the model's tool call has been allowed (the command is about to run)."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        self.event.set()
        return HookResult.allowed()


async def main() -> int:
    workspace = Path(tempfile.mkdtemp())
    model = ScriptedModel(
        [
            tool_call(
                "run_command", CommandLine="sleep 60", Cwd=str(workspace), WaitMsBeforeAsync=60_000
            ),
            "a fresh turn, after the cancelled one",  # the halted turn asks nothing more
        ]
    )
    started = Started()
    agent = (
        Agent.builder()
        .model(model)
        .hook(started)
        .policies([policy.allow_all()])
        .workspaces([workspace])
        .build()
    )
    async with agent:
        turn = asyncio.create_task(agent.chat("run the slow command"))
        await asyncio.wait_for(started.event.wait(), 30)
        await asyncio.sleep(0.3)  # the command is running now
        t0 = time.monotonic()
        await agent.cancel()
        try:
            await turn
        except TurnCancelledError as exc:
            print(f"cancelled after {time.monotonic() - t0:.2f}s: {exc}")
        response = await agent.chat("something quick")
        print(f"next turn: {response.text!r}")
        return 0 if response.text.startswith("a fresh turn") else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
