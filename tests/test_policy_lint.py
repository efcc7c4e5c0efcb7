"""`policy.lint`: each kind of finding, and the oracle that keeps it honest: a rule lint
calls dead is never the rule `evaluate` names as deciding, on any call."""

from __future__ import annotations

import asyncio
import importlib
import sys
import types
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from antigravity_sdk import ToolCall, policy
from antigravity_sdk.policy import Decision, Finding, Policy
from antigravity_sdk.policy._file import _condition
from antigravity_sdk.policy._lint import DEAD

README_EXAMPLE = [  # the README's example before issue 20: its allow can never decide
    policy.deny("run_command", when=lambda a: "sudo" in a["CommandLine"], name="no-sudo"),
    policy.allow("run_command", when=lambda a: a["CommandLine"].startswith("npm test")),
    policy.deny("run_command"),
    policy.deny_mcp("db", tools=["drop_table"]),
    policy.allow_all(),
]


def codes(findings: Sequence[Finding]) -> list[tuple[str, int | None, int | None]]:
    return [(f.code, f.index, f.other_index) for f in findings]


def test_the_readme_s_old_example_warns_naming_both_rules() -> None:
    findings = policy.lint(README_EXAMPLE, mcp_servers=["db"])
    assert codes(findings) == [("shadowed", 1, 2)]
    (finding,) = findings
    assert finding.severity == "warning"
    assert finding.rule == "policy #2 ('run_command')"
    assert finding.other == "policy #3 ('run_command')"
    assert "policy #2" in finding.message and "policy #3" in finding.message
    assert "bucket 0 (specific deny) is checked before bucket 2" in finding.message
    assert str(finding).startswith("warning: policy #2 ('run_command'), a conditional allow")


def test_a_conditional_rule_is_shadowed_only_by_an_unconditional_one() -> None:
    def is_npm(a: Mapping[str, Any]) -> bool:
        return str(a["CommandLine"]).startswith("npm")

    def is_test(a: Mapping[str, Any]) -> bool:
        return "test" in str(a["CommandLine"])

    rules = [policy.deny("run_command", when=is_npm), policy.allow("run_command", when=is_test)]
    assert codes(policy.lint([*rules, policy.allow_all()])) == []
    # the same condition object: it decides first whenever the later rule could
    same = [policy.deny("run_command", when=is_npm), policy.allow("run_command", when=is_npm)]
    assert codes(policy.lint([*same, policy.allow_all()])) == [("shadowed", 1, 0)]


def test_within_a_bucket_the_first_unconditional_rule_wins() -> None:
    rules = [
        policy.allow("view_file", name="first"),
        policy.allow("view_file", when=lambda a: True, name="later"),
        policy.allow("view_file", name="again"),
        policy.deny_all(),
    ]
    found = policy.lint(rules)
    assert codes(found) == [("shadowed", 1, 0), ("duplicate", 2, 0)]
    assert "it comes first in the same bucket (2: specific allow)" in found[0].message
    assert "it repeats policy #1 ('first')" in found[1].message


def test_wider_patterns_never_shadow_narrower_ones() -> None:
    rules = [
        policy.deny_all(),
        policy.deny_mcp("db"),
        policy.allow_mcp("db", ["query"]),
        policy.allow("view_file"),
    ]
    assert policy.lint(rules, mcp_servers=["db"]) == []


def test_conditions_of_a_file_written_the_same_are_the_same(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text(
        "[[rule]]\nname = 'a'\ntool = 'run_command'\ndecision = 'deny'\n"
        "when = { arg = 'CommandLine', startswith = 'sudo ' }\n"
        "[[rule]]\nname = 'b'\ntool = 'run_command'\ndecision = 'deny'\n"
        "when = { arg = 'CommandLine', startswith = 'sudo ' }\n"
        "[[rule]]\nname = 'c'\ntool = 'run_command'\ndecision = 'deny'\n"
        "when = { arg = 'CommandLine', startswith = 'sudo' }\n"
        "[[rule]]\ntool = '*'\ndecision = 'allow'\n"
    )
    found = policy.lint(policy.load(rules))
    assert codes(found) == [("duplicate", 1, 0)]
    assert found[0].rule == f"{rules}: rule #2 ('b')"


def test_invalid_rules_are_errors_and_the_rest_is_still_linted() -> None:
    found = policy.lint(
        [
            policy.allow("run_comand"),
            policy.deny("x/y"),
            policy.deny("view_file"),
            policy.deny("view_file"),
            policy.allow_all(),
        ]
    )
    assert [(f.severity, f.code, f.index) for f in found] == [
        ("error", "invalid", 0),
        ("error", "invalid", 1),
        ("warning", "duplicate", 3),
    ]
    assert "did you mean 'run_command'?" in found[0].message
    assert "needs the configured servers" in found[1].message
    assert policy.lint(["not a policy"]) == [  # type: ignore[list-item]
        Finding("error", "invalid", "policy #1 is a str ('not a policy'), not a Policy")
    ]


def test_an_ask_without_handler_is_an_error() -> None:
    (found,) = policy.lint([policy.ask_user("run_command"), policy.allow_all()])
    assert (found.severity, found.code) == ("error", "invalid")
    assert "needs a handler" in found.message


def test_an_empty_set_reports_the_defaults() -> None:
    (found,) = policy.lint([])
    assert (found.severity, found.code, found.rule) == ("info", "no-policies", None)
    assert "default_policies" in found.message


def test_an_open_set_says_so_and_its_allows_that_change_nothing() -> None:
    rules = [
        policy.allow("view_file", name="read"),
        policy.allow("run_command", when=lambda a: True, name="tests"),
        policy.allow_mcp("db", ["query"]),
        policy.deny("write_to_file"),
        policy.deny("*", when=lambda a: "x" in a),
    ]
    found = policy.lint(rules, mcp_servers=["db"])
    # A conditional `*` deny is checked after every specific allow: none is redundant.
    assert codes(found) == [("no-catch-all", None, None)]
    assert found[0].severity == "info" and "open by default" in found[0].message
    found = policy.lint(rules[:4], mcp_servers=["db"])
    assert codes(found) == [
        ("no-catch-all", None, None),
        ("redundant-allow", 0, None),
        ("redundant-allow", 1, None),
        ("redundant-allow", 2, None),
    ]
    assert "policy.deny_all()" in found[1].message
    # A server rule is checked after a server tool's: it counts.
    assert codes(
        policy.lint([policy.allow_mcp("db", ["q"]), policy.deny_mcp("db")], mcp_servers=["db"])
    ) == [("no-catch-all", None, None)]
    # With an explicit allow_all, an allow is the user's own choice: nothing to say.
    assert policy.lint([rules[0], policy.allow_all()]) == []


def test_unattended_ask_rules_answered_on_the_terminal_warn(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text(
        "[[rule]]\nname = 'confirm'\ntool = 'run_command'\ndecision = 'ask_user'\n"
        "[[rule]]\ntool = '*'\ndecision = 'allow'\n"
    )
    loaded = policy.load(rules)
    assert policy.lint(loaded) == []
    (found,) = policy.lint(loaded, unattended=True)
    assert (found.severity, found.code, found.index) == ("warning", "unanswerable", 0)
    assert "confirm_in_terminal" in found.message
    # A handler of the program's own is answerable wherever it runs.
    answered = policy.load(rules, ask_handler=lambda call: False)
    assert policy.lint(answered, unattended=True) == []


# -- command rules ---------------------------------------------------------------------------


class FakeCommands:
    """The command-rule interface lint relies on (`policy._commands.CommandPredicate`):
    word-prefix patterns; `;` separates simple commands; `$` makes a line unprovable."""

    def __init__(self, patterns: Sequence[str], mode: str) -> None:
        self.patterns = tuple(patterns)
        self.mode = mode

    def __call__(self, args: Mapping[str, Any]) -> bool:
        line = str(args["CommandLine"])
        if "$" in line:
            return self.mode != "allow"
        commands = [c.split() for c in line.split(";") if c.split()]
        hits = [any(c[: len(p.split())] == p.split() for p in self.patterns) for c in commands]
        return bool(hits) and all(hits) if self.mode == "allow" else any(hits)


@contextmanager
def fake_commands() -> Iterator[None]:
    module = types.ModuleType("antigravity_sdk.policy._commands")
    module.CommandPredicate = FakeCommands  # type: ignore[attr-defined]
    with mock.patch.dict(sys.modules, {"antigravity_sdk.policy._commands": module}):
        yield


_MODE = {"allow": Decision.APPROVE, "deny": Decision.DENY, "ask": Decision.ASK_USER}


def commands(mode: str, patterns: Sequence[str], name: str = "") -> Policy:
    handler = (lambda call: True) if mode == "ask" else None
    return Policy("run_command", _MODE[mode], FakeCommands(patterns, mode), handler, name)


def test_command_patterns_an_earlier_rule_covers() -> None:
    with fake_commands():
        found = policy.lint(
            [
                commands("allow", ["git status", "npm test"], "dev"),
                commands("deny", ["git"], "no-git"),
                commands("deny", ["git push", "rm"], "no-push"),
                commands("allow", ["npm test"], "tests"),
                commands("allow", ["git status", "git status"], "twice"),
                policy.deny_all(),
            ]
        )
    assert codes(found) == [
        ("dead-pattern", 0, 1),
        ("dead-pattern", 2, 1),
        ("shadowed", 3, 0),
        ("duplicate-pattern", 4, 4),
        ("shadowed", 4, 1),
    ]
    assert "'git status' can never decide: policy #2 ('no-git') (deny 'git')" in found[0].message
    assert "'git status' repeats in the same rule" in found[3].message


def test_without_the_command_module_command_rules_are_ordinary_conditions() -> None:
    rules = [commands("deny", ["git"]), commands("allow", ["git status"]), policy.deny_all()]
    with mock.patch.dict(sys.modules, {"antigravity_sdk.policy._commands": None}):
        assert policy.lint(rules) == []


def test_real_command_rules() -> None:
    try:
        importlib.import_module("antigravity_sdk.policy._commands")
    except ImportError:
        pytest.skip("antigravity_sdk.policy._commands (command rules) is not installed yet")
    found = policy.lint(
        [
            policy.deny_commands(["git"], name="no-git"),  # type: ignore[attr-defined]
            policy.allow_commands(["git status"], name="status"),  # type: ignore[attr-defined]
            policy.allow_commands(["npm test", "npm test"], name="tests"),  # type: ignore[attr-defined]
            policy.deny_all(),
        ]
    )
    assert codes(found) == [("shadowed", 1, 0), ("duplicate-pattern", 2, 2)]


# -- the oracle ------------------------------------------------------------------------------

TOOLS = ["run_command", "view_file", "db/query", "db/drop", "db/*", "*"]
CALLS = [
    ToolCall(name=name, server_name=server, args={**extra, "CommandLine": line})
    for name, server in [
        ("run_command", None),
        ("view_file", None),
        ("query", "db"),
        ("drop", "db"),
        ("other", "db"),
        ("x", "web"),
    ]
    for extra in [{}, {"x": 1}, {"x": 0, "y": 1}, {"y": 0}]
    for line in ["git status", "git push", "npm test", "npm test; git status", "", "ls $X"]
]


def has_x(a: Mapping[str, Any]) -> bool:
    return a.get("x") == 1


def y_is_one(a: Mapping[str, Any]) -> bool:
    return bool(a["y"] == 1)  # raises without y: the fail-safe rule applies


PATTERNS = ["git", "git status", "npm test", "npm", "ls"]


@st.composite
def rules(draw: st.DrawFn) -> Policy:
    tool = draw(st.sampled_from(TOOLS))
    decision = draw(st.sampled_from(list(Decision)))
    kind = draw(st.sampled_from(["none", "has_x", "y_is_one", "file", "file2", "commands"]))
    predicate: Any = None
    if kind == "has_x":
        predicate = has_x
    elif kind == "y_is_one":
        predicate = y_is_one
    elif kind in ("file", "file2"):  # built afresh each time: the same only as written
        value = 1 if kind == "file" else 0
        predicate = _condition({"arg": "x", "equals": value}, "when")
    elif kind == "commands" and tool == "run_command":
        mode = {Decision.APPROVE: "allow", Decision.DENY: "deny", Decision.ASK_USER: "ask"}
        chosen = draw(st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=3))
        predicate = FakeCommands(chosen, mode[decision])
    handler = (lambda call: True) if decision is Decision.ASK_USER else None
    return Policy(tool, decision, predicate, handler, name=f"r{draw(st.integers(0, 999))}")


async def decide_all(rules: list[Policy]) -> list[tuple[bool, Policy | None]]:
    enforcer = policy.enforce(rules, ["db", "web"])
    decisions = [await enforcer.evaluate(call, ask=False) for call in CALLS]
    return [(d.allow, d.policy) for d in decisions]


@given(st.lists(rules(), max_size=8))
@settings(max_examples=300, deadline=None)
def test_a_rule_lint_calls_dead_never_decides(generated: list[Policy]) -> None:
    with fake_commands():
        found = policy.lint(generated, mcp_servers=["db", "web"])
        decided = asyncio.run(decide_all(generated))
    assert not [f for f in found if f.severity == "error"]
    dead = {f.index for f in found if f.code in DEAD}
    deciding = {i for _, p in decided for i, r in enumerate(generated) if p is r}
    assert not dead & deciding, [str(f) for f in found if f.index in dead & deciding]
    useless = {
        (f.index, p)
        for f in found
        if f.code == "dead-pattern"
        for p in f.message.split("command pattern")[1]
        .split(" can never decide")[0]
        .split("'")[1::2]
    }
    for index, pattern in useless:  # a dead pattern: removing it changes no decision
        rule = generated[index]
        assert isinstance(rule.predicate, FakeCommands)
        kept = [p for p in rule.predicate.patterns if p != pattern]
        if kept:
            rest = FakeCommands(kept, rule.predicate.mode)
            changed = [*generated[:index], rule.when(rest), *generated[index + 1 :]]
            with fake_commands():
                assert asyncio.run(decide_all(changed)) == [
                    (allow, changed[index] if p is rule else p) for allow, p in decided
                ]


@given(st.lists(rules(), max_size=8))
@settings(max_examples=200, deadline=None)
def test_an_allow_lint_calls_redundant_changes_no_verdict(generated: list[Policy]) -> None:
    with fake_commands():
        found = policy.lint(generated, mcp_servers=["db", "web"])
        verdicts = [allow for allow, _ in asyncio.run(decide_all(generated))]
        for f in found:
            if f.code == "redundant-allow":
                assert f.index is not None
                without = generated[: f.index] + generated[f.index + 1 :]
                assert [allow for allow, _ in asyncio.run(decide_all(without))] == verdicts


REAL_LINES = [
    "git status",
    "git status --short",
    "git push origin main",
    "git push -f",
    "npm test",
    "npm test && git status",
    "sudo git push",
    "rm -rf build",
    "ls $HOME",
    "",
]
REAL_PATTERNS = ["git", "git status", "git push", "npm test", "npm", "rm -rf", "rm -r", "ls"]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["allow", "deny", "ask", "plain-deny", "plain-allow"]),
            st.lists(st.sampled_from(REAL_PATTERNS), min_size=1, max_size=3),
        ),
        max_size=6,
    )
)
@settings(max_examples=150, deadline=None)
def test_with_real_command_rules_a_rule_lint_calls_dead_never_decides(
    drawn: list[tuple[str, list[str]]],
) -> None:
    if not hasattr(policy, "deny_commands"):
        pytest.skip("command rules (antigravity_sdk.policy._commands) are not installed yet")
    builders: dict[str, Any] = {
        "allow": policy.allow_commands,  # type: ignore[attr-defined]
        "deny": policy.deny_commands,  # type: ignore[attr-defined]
        "ask": lambda patterns: policy.ask_commands(patterns, handler=lambda c: True),  # type: ignore[attr-defined]
        "plain-deny": lambda patterns: policy.deny("run_command"),
        "plain-allow": lambda patterns: policy.allow("run_command"),
    }
    generated = [builders[kind](patterns) for kind, patterns in drawn]
    found = policy.lint(generated)
    dead = {f.index for f in found if f.code in DEAD}

    async def deciding() -> set[int]:
        enforcer = policy.enforce(generated)
        indices = set()
        for line in REAL_LINES:
            call = ToolCall(name="run_command", args={"CommandLine": line})
            decided = (await enforcer.evaluate(call, ask=False)).policy
            indices |= {i for i, rule in enumerate(generated) if rule is decided}
        return indices

    assert not dead & asyncio.run(deciding())
