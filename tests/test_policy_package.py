"""The policy package's public surface: import paths, the bucket model, `PolicyFile`."""

from __future__ import annotations

import logging
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from antigravity_sdk import Agent, McpStdioServer, PolicyError, ToolCall, policy
from antigravity_sdk.interactive import confirm_in_terminal
from antigravity_sdk.policy import BUCKETS, Decision, Policy, PolicyFile

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "policies.toml"

# Every name the package exports: the module's names before it became a package, then
# the ones added with it (BUCKETS, PolicyFile), then lint's (Finding, lint), then command
# rules', then what the SDK's own clients (the CLI, the fleet, the agent) use.
PUBLIC = (
    "AskHandler", "Decision", "Policy", "PolicyDecision", "PolicyEnforcer", "Predicate",
    "TraceEntry", "allow", "allow_all", "allow_mcp", "ask_user", "ask_user_mcp",
    "confirm_run_command", "deny", "deny_all", "deny_mcp", "enforce", "load", "workspace_only",
    "BUCKETS", "PolicyFile", "Finding", "lint",
    "CommandPredicate", "ParsedLine", "SimpleCommand", "UnprovableCommand", "allow_commands",
    "ask_commands", "deny_commands", "parse_command_line",
    "PolicyLike", "is_workspace_check", "parse_document", "why_undecidable", "worst_severity",
)  # fmt: skip


def python(code: str) -> str:
    """Run `code` in a fresh interpreter (nothing imported yet) on this checkout."""
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


# -- import paths --------------------------------------------------------------------------


def test_every_public_name_is_exported_from_the_package() -> None:
    assert sorted(policy.__all__) == sorted(PUBLIC)
    namespace: dict[str, Any] = {}
    exec(f"from antigravity_sdk.policy import {', '.join(PUBLIC)}", namespace)
    for name in PUBLIC:
        assert namespace[name] is getattr(policy, name)


def test_top_level_names_load_lazily_and_are_the_package_s() -> None:
    out = python(
        "import sys, antigravity_sdk as a\n"
        "before = 'antigravity_sdk.policy' in sys.modules\n"
        "from antigravity_sdk import policy\n"
        "print(before, a.Policy is policy.Policy, a.Decision is policy.Decision,\n"
        "      a.PolicyEnforcer is policy.PolicyEnforcer, a.policy is policy)"
    )
    assert out == "False True True True True"


def test_the_engine_does_not_import_the_terminal() -> None:
    out = python(
        "import sys, antigravity_sdk.policy as p\n"
        "p.enforce([p.deny('run_command'), p.allow_all()])\n"
        "print('antigravity_sdk.interactive' in sys.modules)"
    )
    assert out == "False"


# -- the bucket model ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "decision", "name"),
    [
        ("run_command", Decision.DENY, "specific deny"),
        ("db/query", Decision.ASK_USER, "specific ask"),
        ("view_file", Decision.APPROVE, "specific allow"),
        ("db/*", Decision.DENY, "server/* deny"),
        ("db/*", Decision.ASK_USER, "server/* ask"),
        ("db/*", Decision.APPROVE, "server/* allow"),
        ("*", Decision.DENY, "* deny"),
        ("*", Decision.ASK_USER, "* ask"),
        ("*", Decision.APPROVE, "* allow"),
    ],
)
async def test_policy_bucket_names_the_bucket_the_enforcer_uses(
    tool: str, decision: Decision, name: str
) -> None:
    handler = (lambda c: False) if decision is Decision.ASK_USER else None
    rule = Policy(tool, decision, handler=handler)
    assert BUCKETS[rule.bucket] == name
    enforcer = policy.enforce([rule], mcp_servers=["db"])
    mcp = "/" in tool
    call = ToolCall(name="query" if mcp else tool, server_name="db" if mcp else None)
    explained = await enforcer.evaluate(call, ask=False)
    assert explained.bucket == rule.bucket and explained.bucket_name == name


def test_buckets_are_nine_in_evaluation_order() -> None:
    assert len(BUCKETS) == 9 and len(set(BUCKETS)) == 9
    assert BUCKETS[0] == "specific deny" and BUCKETS[-1] == "* allow"


@pytest.mark.parametrize("tool", ["", "run_*", "*/x", "a/b/c", " x", 3])
def test_bucket_of_a_malformed_policy_is_a_policy_error(tool: Any) -> None:
    with pytest.raises(PolicyError, match=r"malformed|must be a str"):
        _ = Policy(tool, Decision.DENY, name="bad").bucket
    with pytest.raises(PolicyError, match="decision must be a Decision"):
        _ = Policy("x", "deny", name="bad").bucket  # type: ignore[arg-type]


# -- PolicyFile ----------------------------------------------------------------------------


def test_load_returns_a_policy_file_with_its_servers() -> None:
    loaded = policy.load(EXAMPLE)
    assert isinstance(loaded, PolicyFile) and isinstance(loaded, list)
    assert loaded.path == str(EXAMPLE) and loaded.mcp_servers == ("db",)
    assert all(isinstance(p, Policy) for p in loaded) and len(loaded) == 20
    copy = pickle.loads(pickle.dumps(PolicyFile([], path="p", mcp_servers=["a", "b", "a"])))
    assert (copy.path, copy.mcp_servers) == ("p", ("a", "b"))


async def test_a_policy_file_enforces_with_its_own_servers() -> None:
    loaded = policy.load(EXAMPLE)
    with pytest.raises(PolicyError, match="needs the configured servers"):
        policy.enforce(loaded)
    enforcer = policy.enforce(loaded, loaded.mcp_servers)
    drop = await enforcer.pre_tool_call(ToolCall(name="drop_table", server_name="db"))
    assert not drop.allow and "Destructive database operations" in drop.message


def test_a_file_without_servers_declares_none(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('[[rule]]\ntool = "*"\ndecision = "allow"\n')
    loaded = policy.load(path)
    assert loaded.mcp_servers == () and len(policy.enforce(loaded, loaded.mcp_servers).policies)


# -- load(ask_handler=) ----------------------------------------------------------------------


async def test_load_takes_the_ask_handler(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('[[rule]]\ntool = "run_command"\ndecision = "ask_user"\n')
    asked: list[ToolCall] = []

    def approve(call: ToolCall) -> bool:
        asked.append(call)
        return True

    loaded = policy.load(path, ask_handler=approve)
    assert loaded[0].handler is approve
    call = ToolCall(name="run_command", args={"CommandLine": "ls", "Cwd": "/"})
    assert (await policy.enforce(loaded).pre_tool_call(call)).allow and asked == [call]
    assert policy.load(path)[0].handler is confirm_in_terminal  # the default: the terminal
    with pytest.raises(PolicyError, match="ask_handler must be callable"):
        policy.load(path, ask_handler="yes")  # type: ignore[arg-type]


# -- an agent given a PolicyFile -------------------------------------------------------------


async def test_an_agent_checks_a_policy_file_against_its_declared_servers() -> None:
    """What `antigravity chat --policies FILE` builds: no MCP servers of its own."""
    agent = Agent.builder().policies(policy.load(EXAMPLE)).build()
    enforcer = agent.policy_enforcer
    assert len(enforcer.policies) == 20
    drop = await enforcer.evaluate(ToolCall(name="drop_table", server_name="db"))
    assert not drop.allow and drop.policy is not None and drop.policy.label == "no-destructive-sql"
    nested = Agent.builder().policy(policy.load(EXAMPLE)).build()
    assert len(nested.policy_enforcer.policies) == 20


def test_configured_servers_win_over_a_file_s_declaration() -> None:
    other = McpStdioServer(name="other", command="true")
    builder = Agent.builder().mcp_server(other).policies(policy.load(EXAMPLE))
    with pytest.raises(PolicyError, match="server 'db' is not among mcp_servers \\(other\\)"):
        builder.build()
    db = McpStdioServer(name="db", command="true")
    assert Agent.builder().mcp_server(db).policies(policy.load(EXAMPLE)).build()


# -- logs -------------------------------------------------------------------------------------


async def test_denials_are_logged_by_pre_tool_call_only(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="antigravity_sdk.policy")
    rules = [
        policy.deny("run_command", name="no-shell"),
        policy.deny("view_file", when=lambda a: 1 / 0, name="broken"),
        policy.allow_all(),
    ]
    enforcer = policy.enforce(rules)
    shell, view = ToolCall(name="run_command"), ToolCall(name="view_file")
    await enforcer.evaluate(shell)
    assert caplog.messages == []
    await enforcer.pre_tool_call(shell)
    assert caplog.messages == ["policy 'no-shell' denied run_command"]
    caplog.clear()
    await enforcer.pre_tool_call(view)
    await enforcer.evaluate(view)
    assert [r.levelno for r in caplog.records] == [logging.ERROR, logging.ERROR]
    assert all("predicate failed on view_file" in m for m in caplog.messages)
