"""A fleet of governed agents on the embedded default (offline; needs the `fleet` extra).

Three tasks go into a durable queue in a SQLite file; a worker in this process runs them,
two at a time. The policy file asks before any file is written: the task that writes one
waits for an approval, which this script grants the way `antigravity fleet approve ID`
would from another terminal. Every decision of every task lands in one audit table.

    pip install 'antigravity-sdk[fleet]'
    python examples/fleet.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from antigravity_sdk.fleet import AgentSpec, Fleet
from antigravity_sdk.testing import ScriptedModel, tool_call

POLICIES = """
[[rule]]
name = "ask before writing"
tool = "write_to_file"
decision = "ask_user"
timeout = 120

[[rule]]
name = "read freely"
tool = ["view_file", "list_dir"]
decision = "allow"

[[rule]]
name = "nothing else"
tool = "*"
decision = "deny"
"""


def scripted_model(workspace: Path) -> ScriptedModel:
    """The model: a task whose prompt says "write" writes notes.md, then answers."""

    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        last = messages[-1]
        if last.get("role") == "user" and "write" in str(last.get("content")):
            notes = str(workspace / "notes.md")
            return tool_call(
                "write_to_file", TargetFile=notes, CodeContent="# Notes\n", Overwrite=False
            )
        return "Done."

    return ScriptedModel(reply)


def main() -> int:
    with (
        tempfile.TemporaryDirectory() as tmp,
        scripted_model(WORKSPACE := Path(tmp) / "project").in_thread() as model,
    ):
        WORKSPACE.mkdir()
        (WORKSPACE / "policies.toml").write_text(POLICIES)
        spec = AgentSpec.from_files(
            WORKSPACE / "policies.toml",
            model=model.model_name,
            base_url=model.base_url,
            workspace=str(WORKSPACE),
        )
        # The fleet's file stays outside the workspace, out of the agents' reach (with
        # no URL, Fleet() keeps it in the SDK's per-user state directory).
        with Fleet(f"sqlite:///{Path(tmp) / 'fleet.sqlite'}") as fleet, fleet.worker(2):
            handles = fleet.map(spec, ["summarise the repo", "write the notes", "list the docs"])
            deadline = time.monotonic() + 120
            while not fleet.approvals() and time.monotonic() < deadline:
                time.sleep(0.2)
            for approval in fleet.approvals():
                print(f"approval {approval.id}: {approval.tool} by rule {approval.rule!r}")
                fleet.approve(approval.id, by="example")
            for handle in handles:
                print(f"{handle.task_id}: {handle.result(timeout=120).text}")
            decided = [(e["tool"], e["verdict"]) for e in fleet.audit() if e["kind"] == "decision"]
            print("decisions:", decided)
        print("notes.md written:", (WORKSPACE / "notes.md").exists())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
