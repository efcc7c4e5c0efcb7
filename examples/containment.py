"""What the kernel still refuses when every policy allows (offline; Linux with Landlock).

The policies here allow everything, and the scripted model runs one shell command that
writes inside the workspace, then tries to write beside it, to read an SSH key and to
fetch a page from a host nobody allowed. The harness runs contained (the default): the
first works, the other three are refused (by the kernel, and by the SDK's egress proxy,
the agent's only way out). The example's own home directory stands in for yours (`HOME`
points at it), so nothing of yours is touched.

    python examples/containment.py
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

from antigravity_sdk import Agent, Containment, policy
from antigravity_sdk.containment import landlock_abi
from antigravity_sdk.harness.install import find_harness
from antigravity_sdk.testing import ScriptedModel, tool_call


def prepare() -> tuple[Path, Path, Path]:
    """A root with a workspace and a home holding an SSH key."""
    root = Path(tempfile.mkdtemp()).resolve()
    workspace, home = root / "workspace", root / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    workspace.mkdir()
    return root, workspace, home


async def main() -> int:
    if landlock_abi() < 1:
        print("this kernel offers no Landlock: agents run uncontained here")
        return 0
    harness = find_harness()  # before HOME changes: the SDK's cache is found through it
    root, workspace, home = prepare()
    saved_home = os.environ.get("HOME")
    os.environ["HOME"] = str(home)  # ~ is this home for the containment's credential list
    try:
        return await run(harness, root, workspace, home)
    finally:
        if saved_home is not None:
            os.environ["HOME"] = saved_home


async def run(harness: Path, root: Path, workspace: Path, home: Path) -> int:
    command = (
        "echo ok > notes.txt && echo 'inside: written';"
        f" echo x > {root}/beside.txt || echo 'beside the workspace: refused';"
        f" cat {home}/.ssh/id_ed25519 || echo '~/.ssh: refused';"
        " python3 -c \"import urllib.request as u; u.urlopen('https://example.com', timeout=5)\""
        " 2>/dev/null || echo 'example.com: refused (not an allowed host)'"
    )
    model = ScriptedModel(
        [tool_call("run_command", CommandLine=command, Cwd=str(workspace)), "Done."]
    )
    agent = (
        Agent.builder()
        .model(model)
        .harness_path(harness)
        .policies([policy.allow_all()])  # the policies let everything through
        .containment(Containment(required=True))  # and the kernel bounds it
        .workspaces([workspace])
        .save_dir(root / "save")
        .app_data_dir(root / "app")
        .build()
    )
    async with agent:
        assert agent.containment is not None
        print("\n".join(agent.containment.describe()[:2]))
        response = await agent.chat("Tidy up.")
    output = next(step.output for step in response.steps if step.output)
    print(output.strip())
    assert (workspace / "notes.txt").exists() and not (root / "beside.txt").exists()
    assert "example.com: refused" in output
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
