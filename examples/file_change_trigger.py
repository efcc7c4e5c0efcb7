"""Wake the agent when files change (offline).

`on_file_change(paths, message_or_callback)` watches files with `watchfiles` (install the
`watch` extra: pip install 'antigravity-sdk[watch]') and sends one message per burst of
changes, once none has come for `debounce` seconds. A callback gets the changes and
returns the message, or None to send nothing. The turn it starts is governed like any
other.

    python examples/file_change_trigger.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from antigravity_sdk import Agent, ChatResponse, Hook
from antigravity_sdk.testing import ScriptedModel
from antigravity_sdk.triggers import FileChange, on_file_change


class TurnDone(Hook):
    """Sets `done` when a turn has finished."""

    def __init__(self) -> None:
        self.done = asyncio.Event()

    async def post_turn(self, response: ChatResponse) -> None:
        self.done.set()


def describe(changes: list[FileChange]) -> str | None:
    """Only CSV files matter here; anything else sends nothing."""
    csvs = [f"{c.kind}: {c.path.name}" for c in changes if c.path.suffix == ".csv"]
    return "Summarise these new reports: " + ", ".join(csvs) if csvs else None


async def main() -> int:
    inbox = Path(tempfile.mkdtemp())
    model = ScriptedModel(["Summary: one report, two rows."])
    turn = TurnDone()
    agent = (
        Agent.builder()
        .model(model)
        .workspaces([inbox])
        .hook(turn)
        .trigger(on_file_change([inbox], describe, debounce=0.2))
        .build()
    )
    async with agent:
        await asyncio.sleep(0.3)  # let the watcher start
        (inbox / "notes.txt").write_text("ignored")
        (inbox / "sales.csv").write_text("day,total\nmon,3\n")
        async with asyncio.timeout(15):
            await turn.done.wait()
    sent = model.requests[0].last_message or {}
    print(f"the trigger sent: {sent.get('content')!r}")
    return 0 if "added: sales.csv" in str(sent.get("content")) else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
