"""Three ways to shape the system prompt, and what the model receives (offline).

- `system_instructions(text)` appends your text to the harness's own prompt;
- `override_system_sections({...})` replaces sections of it by name, or removes one (None);
- `replace_system_instructions(...)` replaces it entirely, keeping only the built-in
  sections you name (`BuiltinSection`).

The prompt governs nothing: hooks and policies decide every tool call whatever it says.

    python examples/system_instructions.py
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from pathlib import Path

from antigravity_sdk import Agent, AgentBuilder, BuiltinSection
from antigravity_sdk.testing import ScriptedModel


async def system_prompt(configure: Callable[[AgentBuilder], AgentBuilder]) -> str:
    """Run one turn and return the system message the model was sent."""
    model = ScriptedModel(["ok"])
    workspace = Path(tempfile.mkdtemp())
    agent = configure(Agent.builder().model(model).workspaces([workspace])).build()
    async with agent:
        await agent.chat("hi")
    return next(m["content"] for m in model.requests[0].messages if m["role"] == "system")


async def main() -> int:
    appended = await system_prompt(lambda b: b.system_instructions("Answer in French."))
    overridden = await system_prompt(
        lambda b: b.override_system_sections(
            {"identity": "You are Ledger, a bookkeeping assistant.", "messaging": None}
        )
    )
    replaced = await system_prompt(
        lambda b: b.replace_system_instructions(
            "You are Ledger. Answer in one sentence.", BuiltinSection("user_information")
        )
    )
    for name, prompt in (("appended", appended), ("overridden", overridden)):
        print(f"{name}: {len(prompt)} characters, ends with {prompt[-60:]!r}")
    print(f"replaced:\n{replaced}")
    ok = (
        appended.rstrip().endswith("Answer in French.\n</Instructions>")
        and "You are Ledger, a bookkeeping" in overridden
        and "<messaging>" not in overridden
        and replaced.startswith("<System>\nYou are Ledger.")
        and "<identity>" not in replaced
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
