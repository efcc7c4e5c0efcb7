"""The examples' hooks, against the real harness (a hook that fails open on the harness's
real argument spelling is worse than no example)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from antigravity_sdk import policy
from antigravity_sdk.testing import tool_call

from .conftest import AgentFactory, Workspace, tool_messages

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def test_quickstart_hook_stops_rm_rf_on_the_harness(
    make_agent: AgentFactory, env: Workspace
) -> None:
    quickstart = load_example("quickstart")
    build = env.ws / "build"
    build.mkdir()
    (build / "keep").write_text("x")
    script = [
        tool_call(
            "run_command", CommandLine="rm -rf build", Cwd=str(env.ws), WaitMsBeforeAsync=5000
        ),
        "done",
    ]
    agent, model = make_agent(
        script, hooks=[quickstart.DenyDangerousHook()], policies=[policy.allow_all()]
    )
    async with agent:
        await agent.chat("clean up")
    assert (build / "keep").exists()
    assert "destructive commands are not allowed" in "\n".join(tool_messages(model, 1))


async def test_quickstart_example_runs() -> None:
    assert await load_example("quickstart").main() == 0


async def test_policies_example_decides_each_call_as_documented(
    capsys: pytest.CaptureFixture[str],
) -> None:
    await load_example("policies").main()
    out = capsys.readouterr().out.splitlines()
    verdicts = [line.split(" (")[0] for line in out if not line.startswith(" ") and line]
    assert verdicts == [
        "run_command: ALLOWED by policy 'tests-only'",
        "run_command: DENIED by policy 'no-rm-rf'",
        "run_command: DENIED by policy 'no-rm-rf'",  # `| sh`: cannot be checked, so denied
        "run_command: DENIED by policy 'no-other-commands'",  # npm test && curl ...
        "view_file: DENIED by policy 'workspace'",
        "db/drop_table: DENIED by policy 'no-destructive-sql'",
        "db/execute: ALLOWED by policy 'db'",
        "search_web: ALLOWED by policy 'allow_all'",
    ]


async def test_containment_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert await load_example("containment").main() == 0
    out = capsys.readouterr().out
    if "no Landlock" not in out:
        assert "inside: written" in out
        assert "beside the workspace: refused" in out and "~/.ssh: refused" in out


def test_fleet_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("dbos", reason="the fleet extra (dbos) is not installed")
    assert load_example("fleet").main() == 0
    out = capsys.readouterr().out
    assert "by rule 'ask before writing'" in out
    assert out.count(": Done.") == 3
    assert "('write_to_file', 'allow')" in out and "notes.md written: True" in out
