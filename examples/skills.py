"""Skills: instructions the model loads on demand, from a directory or inline (offline).

A skill directory holds one sub-directory per skill with a `SKILL.md` (front matter:
`name`, `description`); the model is told where it is and reads it with `view_file`,
which the policies decide like any other read. An inline `Skill` is looked up with the
harness's `lookup_skill` tool. Neither widens what the policies allow.

    python examples/skills.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from antigravity_sdk import Agent, Skill
from antigravity_sdk.testing import ScriptedModel, tool_call

SKILL_MD = """---
name: release-notes
description: How to write release notes. Use when asked for release notes.
---
Write one line per change, newest first, each starting with a verb.
"""


async def from_directory(workspace: Path) -> str:
    skill_md = workspace / "skills" / "release-notes" / "SKILL.md"
    skill_md.parent.mkdir(parents=True)
    skill_md.write_text(SKILL_MD)
    model = ScriptedModel([tool_call("view_file", AbsolutePath=str(skill_md)), "Done."])
    agent = (
        Agent.builder()
        .model(model)
        .workspaces([workspace])
        .skills_paths([workspace / "skills"])
        .build()
    )
    async with agent:
        await agent.chat("write release notes")
    return str(model.requests[1].tool_results[-1]["content"])


async def inline() -> str:
    skill = Skill(
        name="tone",
        description="The house style. Use before writing anything user-facing.",
        content="Be plain and brief; no exclamation marks.",
    )
    model = ScriptedModel([tool_call("lookup_skill", name="tone"), "Done."])
    agent = Agent.builder().model(model).skills([skill]).build()
    async with agent:
        await agent.chat("write a greeting")
    return str(model.requests[1].tool_results[-1]["content"])


async def main() -> int:
    read = await from_directory(Path(tempfile.mkdtemp()))
    looked_up = await inline()
    print(f"view_file of SKILL.md returned:\n{read}\n")
    print(f"lookup_skill returned:\n{looked_up}")
    return 0 if "one line per change" in read and "no exclamation marks" in looked_up else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
