"""workspace_only against the real harness: paths that resolve differently for it.

The harness cleans `..` textually before it opens a path (`ws/docs/../..` is the parent of
`ws` whatever `docs` links to), changes to `run_command`'s `Cwd` as given (the kernel
follows symlinks first), and reads relative paths and `/proc/self` in its own process.
Each test first runs the call without the policy and checks that the harness really acts
outside the workspace (so the test cannot pass on a harness that no longer does), then
with `workspace_only([ws])` and checks that it never acts.

Containment is off here: these tests pin the policy layer alone, and the kernel would
refuse the same writes and reads outside the workspace anyway (see test_containment.py),
which would hide a policy that let them through.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from antigravity_sdk import policy
from antigravity_sdk.testing import tool_call
from antigravity_sdk.types import BuiltinTool, CapabilitiesConfig

from .conftest import AgentFactory, Workspace, tool_messages

UNCONTAINED = {"configure": lambda builder: builder.containment(None)}

# Every tool the harness asks about (the never-asked ones need an opt-in, and take no path).
ALL_TOOLS = CapabilitiesConfig(
    enabled_tools=frozenset(BuiltinTool) - {BuiltinTool.MANAGE_TASK, BuiltinTool.SCHEDULE}
)


@dataclass
class Tree:
    """ws/docs -> a/b inside the workspace, and a secret in a sibling `outside`."""

    ws: Path
    outside: Path
    secret: Path
    marker: str  # the secret's content
    leak: str  # the secret's file name

    @property
    def escape(self) -> str:
        """`outside`, spelled through the workspace: ws/docs/../.. is the workspace's parent."""
        return f"{self.ws}/docs/../../outside"


@pytest.fixture
def tree(env: Workspace) -> Tree:
    (env.ws / "a" / "b").mkdir(parents=True)
    (env.ws / "docs").symlink_to("a/b")
    outside = env.root / "outside"
    outside.mkdir()
    marker = f"SECRET-{uuid.uuid4().hex}"
    leak = f"leak-{uuid.uuid4().hex[:12]}.txt"
    secret = outside / leak
    secret.write_text(marker + "\n")
    return Tree(env.ws, outside, secret, marker, leak)


async def run_call(make_agent: AgentFactory, call: Any, policies: list[Any]) -> str:
    """Run one scripted tool call; the tool result the model gets back."""
    agent, model = make_agent(
        [call, "done"], policies=policies, capabilities=ALL_TOOLS, **UNCONTAINED
    )
    async with agent:
        await agent.chat("go")
    (result,) = tool_messages(model, 1)
    return result


def guarded(ws: Path) -> list[Any]:
    return [*policy.workspace_only([ws]), policy.allow_all()]


# tool -> (its arguments for the escape path, whether the harness acted outside).
Case = tuple[Callable[[Tree], dict[str, Any]], Callable[[Tree, str], bool]]
CASES: dict[str, Case] = {
    "view_file": (
        lambda t: {"AbsolutePath": f"{t.escape}/{t.leak}"},
        lambda t, result: t.marker in result,
    ),
    "write_to_file": (
        lambda t: {"TargetFile": f"{t.escape}/new.txt", "CodeContent": "PWNED", "Overwrite": False},
        lambda t, result: (t.outside / "new.txt").exists(),
    ),
    "replace_file_content": (
        lambda t: {
            "TargetFile": f"{t.escape}/{t.leak}",
            "TargetContent": t.marker,
            "ReplacementContent": "PWNED",
            "Instruction": "edit",
            "Description": "edit",
            "AllowMultiple": False,
        },
        lambda t, result: "PWNED" in t.secret.read_text(),
    ),
    "list_dir": (
        lambda t: {"DirectoryPath": t.escape},
        lambda t, result: t.leak in result,
    ),
    "grep_search": (
        lambda t: {"SearchPath": t.escape, "Query": "SECRET"},
        lambda t, result: t.leak in result,
    ),
    "find_by_name": (
        lambda t: {"SearchDirectory": t.escape, "Pattern": "leak-*"},
        lambda t, result: t.leak in result,
    ),
}


@pytest.mark.parametrize("tool", list(CASES))
async def test_dotdot_after_a_symlink_cannot_leave_the_workspace(
    make_agent: AgentFactory, tree: Tree, tool: str
) -> None:
    arguments, acted = CASES[tool]
    call = tool_call(tool, **arguments(tree))
    assert acted(tree, await run_call(make_agent, call, [policy.allow_all()]))
    tree.secret.write_text(tree.marker + "\n")
    (tree.outside / "new.txt").unlink(missing_ok=True)

    result = await run_call(make_agent, call, guarded(tree.ws))
    assert "workspace_only" in result
    assert not acted(tree, result)
    assert tree.secret.read_text() == tree.marker + "\n"
    assert sorted(p.name for p in tree.outside.iterdir()) == [tree.leak]


async def test_a_symlink_after_dotdot_is_followed_where_the_harness_opens_it(
    make_agent: AgentFactory, tree: Tree
) -> None:
    # ws/docs/../link_out is ws/link_out for the harness (out), ws/a/link_out for the kernel.
    (tree.ws / "link_out").symlink_to(tree.outside)
    call = tool_call("view_file", AbsolutePath=f"{tree.ws}/docs/../link_out/{tree.leak}")
    assert tree.marker in await run_call(make_agent, call, [policy.allow_all()])
    result = await run_call(make_agent, call, guarded(tree.ws))
    assert "workspace_only" in result and tree.marker not in result


async def test_run_command_cwd_is_resolved_the_kernel_s_way(
    make_agent: AgentFactory, tree: Tree
) -> None:
    # Textually ws/up/.. is ws; chdir follows `up` first and lands in `outside`.
    (tree.outside / "sub").mkdir()
    (tree.ws / "up").symlink_to(tree.outside / "sub")
    call = tool_call(
        "run_command", CommandLine="touch made-here", Cwd=f"{tree.ws}/up/..", WaitMsBeforeAsync=5000
    )
    await run_call(make_agent, call, [policy.allow_all()])
    assert (tree.outside / "made-here").exists()
    (tree.outside / "made-here").unlink()
    result = await run_call(make_agent, call, guarded(tree.ws))
    assert "workspace_only" in result
    assert not (tree.outside / "made-here").exists()
    assert not (tree.ws / "made-here").exists()


async def test_a_relative_cwd_is_the_harness_s_own_not_the_sdk_s(
    make_agent: AgentFactory, tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The harness resolves a relative Cwd against the directory it was started in; the
    # program may have changed its own since.
    call = tool_call("run_command", CommandLine="touch made-here", Cwd=".", WaitMsBeforeAsync=5000)
    for policies, expect_made in (([policy.allow_all()], True), (guarded(tree.ws), False)):
        monkeypatch.chdir(tree.outside)
        agent, model = make_agent([call, "done"], policies=policies, **UNCONTAINED)
        async with agent:
            monkeypatch.chdir(tree.ws)
            await agent.chat("go")
        assert (tree.outside / "made-here").exists() is expect_made
        assert not (tree.ws / "made-here").exists()
        if not expect_made:
            assert "workspace_only" in tool_messages(model, 1)[0]
        (tree.outside / "made-here").unlink(missing_ok=True)


async def test_proc_self_is_the_harness_s_own_process(
    make_agent: AgentFactory, tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ws/cwd -> /proc/self/cwd is the workspace for the SDK (its cwd) but `outside` for the
    # harness, started there.
    (tree.ws / "cwd").symlink_to("/proc/self/cwd")
    call = tool_call("view_file", AbsolutePath=f"{tree.ws}/cwd/{tree.leak}")
    for policies, expect_read in (([policy.allow_all()], True), (guarded(tree.ws), False)):
        monkeypatch.chdir(tree.outside)
        agent, model = make_agent([call, "done"], policies=policies, **UNCONTAINED)
        async with agent:
            monkeypatch.chdir(tree.ws)
            await agent.chat("go")
        (result,) = tool_messages(model, 1)
        assert (tree.marker in result) is expect_read


async def test_a_backslash_is_a_separator_for_the_harness(
    make_agent: AgentFactory, tree: Tree
) -> None:
    # No symlink needed: `a\..\..\outside` is one (missing) name to the kernel.
    call = tool_call("view_file", AbsolutePath=f"{tree.ws}/a\\..\\..\\outside/{tree.leak}")
    assert tree.marker in await run_call(make_agent, call, [policy.allow_all()])
    result = await run_call(make_agent, call, guarded(tree.ws))
    assert "workspace_only" in result and tree.marker not in result


async def test_a_uri_cwd_is_a_relative_directory_for_run_command(
    make_agent: AgentFactory, tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    # view_file decodes file:///ws; run_command runs in ./file:/ws below its own directory.
    lookalike = tree.outside / "file:" / tree.ws.relative_to("/")
    lookalike.mkdir(parents=True)
    call = tool_call(
        "run_command",
        CommandLine="touch made-here",
        Cwd=f"file://{tree.ws}",
        WaitMsBeforeAsync=5000,
    )
    monkeypatch.chdir(tree.outside)
    await run_call(make_agent, call, [policy.allow_all()])
    assert (lookalike / "made-here").exists()
    (lookalike / "made-here").unlink()
    result = await run_call(make_agent, call, guarded(tree.ws))
    assert "workspace_only" in result
    assert not (lookalike / "made-here").exists() and not (tree.ws / "made-here").exists()
