"""`lint`: what a policy set says that it does not mean.

The nine buckets decide regardless of registration order, so a rule can sit in a set
and never decide anything: `allow("run_command", when=is_npm_test)` next to an
unconditional `deny("run_command")` (bucket 0 beats bucket 2). `lint` finds such rules
without evaluating a call, from the rules' patterns, decisions and conditions alone.

It is sound, not complete: a rule it calls dead can never be the rule that decides a
call (assuming predicates give the same answer for the same call), but a rule whose
condition can never hold, or never hold when earlier rules do not, is not found: that
needs the conditions' meaning. Conditions count as the same only when they are the same
object, or two `policy.load` conditions written the same, or command rules
(`CommandPredicate`, when that module is present) whose patterns cover the other's.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from ..errors import PolicyError
from ._engine import PolicyLike, _flatten, _Rule, _server_names, _tool_names
from ._file import _Combine, _Leaf
from ._rules import BUCKETS, Decision, McpServerConfig, Policy

Severity: TypeAlias = Literal["error", "warning", "info"]

SEVERITIES: Final[tuple[Severity, ...]] = ("error", "warning", "info")


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing `lint` found.

    `severity`: "error" (`enforce` would refuse the set), "warning" (a rule that can
    never decide, or that does not do what it reads as doing) or "info". `code` names the
    kind (see `docs/policies.md`). `rule` is the rule it concerns as errors name it
    (`policy #2 ('npm-test')`, or a file's `rules.toml: rule #2 ('npm-test')`), None for a
    finding about the whole set; `other` the rule that makes it dead, when one does.
    `index` and `other_index` are their positions (from 0) in the flattened list.
    """

    severity: Severity
    code: str
    message: str
    rule: str | None = None
    other: str | None = None
    index: int | None = None
    other_index: int | None = None

    def __str__(self) -> str:
        return f"{self.severity}: {self.message}"


DEAD: Final = frozenset({"shadowed", "duplicate"})
"""The codes of findings that say a rule can never be the one that decides a call."""

_WHAT: Final = {Decision.APPROVE: "allow", Decision.DENY: "deny", Decision.ASK_USER: "ask_user"}


@dataclass(frozen=True, slots=True)
class _Item:
    index: int
    policy: Policy
    bucket: int

    @property
    def ref(self) -> str:
        """The rule as `enforce`'s errors name it."""
        return self.policy.origin or f"policy #{self.index + 1} ({self.policy.label!r})"

    @property
    def what(self) -> str:
        """E.g. "an unconditional deny of run_command"."""
        kind = "a conditional" if self.policy.predicate is not None else "an unconditional"
        return f"{kind} {_WHAT[self.policy.decision]} of {self.policy.tool}"

    def before(self, other: _Item) -> bool:
        """Whether the engine checks this rule before `other` (on the same pattern)."""
        return (self.bucket, self.index) < (other.bucket, other.index)


def _commands_module() -> Any:
    """`policy._commands` (command rules), or None where it is not installed."""
    try:
        return importlib.import_module("antigravity_sdk.policy._commands")
    except ImportError:
        return None


def _same_condition(a: object, b: object) -> bool:
    """Conditions known to give the same answer on every call."""
    if a is b:
        return True
    if isinstance(a, _Leaf | _Combine) and type(a) is type(b):
        return repr(a) == repr(b)  # a file's conditions print as written, operands included
    return False


def _words(pattern: str) -> list[str]:
    return pattern.split()


def _covers(wide: str, narrow: str) -> bool:
    """Command pattern `wide` matches every command `narrow` matches: its words are a
    prefix of `narrow`'s (patterns are word prefixes)."""
    w, n = _words(wide), _words(narrow)
    return bool(w) and n[: len(w)] == w


def _why_first(first: _Item, dead: _Item) -> str:
    if first.bucket == dead.bucket:
        return f"it comes first in the same bucket ({first.bucket}: {BUCKETS[first.bucket]})"
    return (
        f"bucket {first.bucket} ({BUCKETS[first.bucket]}) is checked before bucket "
        f"{dead.bucket} ({BUCKETS[dead.bucket]}), whatever the order of the rules"
    )


def _shadowing(items: list[_Item]) -> tuple[list[Finding], set[int]]:
    """Rules that an earlier-checked rule on the same pattern always preempts: one without
    a condition, or one with the same condition. Only rules with the same pattern can:
    a wider pattern always sits in a later bucket."""
    findings: list[Finding] = []
    dead: set[int] = set()
    by_tool: dict[str, list[_Item]] = {}
    for item in items:
        by_tool.setdefault(item.policy.tool, []).append(item)
    for group in by_tool.values():
        ordered = sorted(group, key=lambda i: (i.bucket, i.index))
        for position, item in enumerate(ordered):
            for first in ordered[:position]:
                if first.index in dead:
                    continue
                unconditional = first.policy.predicate is None
                if not unconditional and not _same_condition(
                    first.policy.predicate, item.policy.predicate
                ):
                    continue
                same = first.policy.decision is item.policy.decision and _same_condition(
                    first.policy.predicate, item.policy.predicate
                )
                if same:
                    code, how = "duplicate", f"it repeats {first.ref}, which decides first"
                elif unconditional:
                    code = "shadowed"
                    how = f"{first.ref}, {first.what}, decides every such call first"
                else:
                    code = "shadowed"
                    how = f"{first.ref}, {first.what} with the same condition, decides first"
                findings.append(
                    Finding(
                        "warning",
                        code,
                        f"{item.ref}, {item.what}, can never decide: {how} "
                        f"({_why_first(first, item)})",
                        item.ref,
                        first.ref,
                        item.index,
                        first.index,
                    )
                )
                dead.add(item.index)
                break
    return findings, dead


def _command_findings(items: list[_Item], dead: set[int]) -> list[Finding]:
    """Command rules (`policy._commands.CommandPredicate`) whose patterns an earlier rule's
    patterns cover: `deny_commands(["git"])` before `allow_commands(["git status"])`.
    Nothing when the command-rule module is not installed."""
    module = _commands_module()
    kind = getattr(module, "CommandPredicate", None)
    if not isinstance(kind, type):
        return []
    rules = [i for i in items if isinstance(i.policy.predicate, kind)]
    checked = sorted(rules, key=lambda i: (i.bucket, i.index))  # the engine's order
    findings: list[Finding] = []
    for item in rules:
        predicate: Any = item.policy.predicate
        patterns = tuple(predicate.patterns)
        findings += _repeated_patterns(item, patterns)
        if item.index in dead:
            continue
        for first in checked:
            if first is item or first.index in dead or first.policy.tool != item.policy.tool:
                continue
            if not first.before(item):
                continue
            found = _command_overlap(first, item, patterns)
            if found is not None:
                findings.append(found)
                if found.code == "shadowed":
                    dead.add(item.index)
                    break
    return findings


def _repeated_patterns(item: _Item, patterns: Sequence[str]) -> list[Finding]:
    """Patterns of one command rule that another of its patterns makes redundant."""
    words = [_words(p) for p in patterns]
    findings = []
    for n, pattern in enumerate(patterns):
        for m, wider in enumerate(patterns):
            if m == n or not words[m] or words[n][: len(words[m])] != words[m]:
                continue
            if words[m] == words[n] and m > n:
                continue  # a repeat is reported on its later occurrence
            said = "repeats" if words[m] == words[n] else f"is covered by {wider!r}"
            findings.append(
                Finding(
                    "warning",
                    "duplicate-pattern",
                    f"{item.ref}: the command pattern {pattern!r} {said} in the same rule: "
                    "it adds nothing",
                    item.ref,
                    item.ref,
                    item.index,
                    item.index,
                )
            )
            break
    return findings


def _holds_on_empty(predicate: Any) -> bool:
    try:
        return bool(predicate({"CommandLine": ""}))
    except Exception:
        return False


def _command_overlap(first: _Item, item: _Item, patterns: Sequence[str]) -> Finding | None:
    """What `first`'s command patterns do to `item`'s (checked after it)."""
    earlier: Any = first.policy.predicate
    wide = tuple(earlier.patterns)
    covered = [p for p in patterns if any(_covers(w, p) for w in wide)]
    if not covered:
        return None
    any_match = earlier.mode in ("deny", "ask")
    everything = len(covered) == len(patterns)
    escapes = item.policy.decision is Decision.APPROVE and _holds_on_empty(item.policy.predicate)
    if everything and not (escapes and not _holds_on_empty(earlier)):
        return Finding(
            "warning",
            "shadowed",
            f"{item.ref}, {item.what}, can never decide: every command it matches, "
            f"{first.ref} ({earlier.mode} {', '.join(repr(w) for w in wide)}) matches "
            f"first ({_why_first(first, item)})",
            item.ref,
            first.ref,
            item.index,
            first.index,
        )
    if not any_match:  # an allow rule only preempts lines that are wholly its own
        return None
    shown = ", ".join(repr(p) for p in covered)
    return Finding(
        "warning",
        "dead-pattern",
        f"{item.ref}: command pattern{'s' if len(covered) > 1 else ''} {shown} can never "
        f"decide: {first.ref} ({earlier.mode} {', '.join(repr(w) for w in wide)}) matches "
        f"every such command first ({_why_first(first, item)})",
        item.ref,
        first.ref,
        item.index,
        first.index,
    )


def _covering_later(item: _Item, items: list[_Item]) -> list[_Item]:
    """The rules checked after `item` on calls `item` matches: wider patterns."""
    tool = item.policy.tool
    server, slash, name = tool.partition("/")
    wider = {"*"}
    if slash and name != "*":
        wider.add(f"{server}/*")
    if tool == "*":
        wider = set()
    return [i for i in items if i.policy.tool in wider]


def _redundant_allows(items: list[_Item], dead: set[int]) -> list[Finding]:
    """In a set without an unconditional `*` rule: allows that only repeat the default
    (a call no rule matches is allowed), as no deny or ask rule is checked after them."""
    findings = []
    for item in items:
        if item.policy.decision is not Decision.APPROVE or item.index in dead:
            continue
        later = _covering_later(item, items)
        if any(i.policy.decision is not Decision.APPROVE for i in later):
            continue
        findings.append(
            Finding(
                "warning",
                "redundant-allow",
                f"{item.ref}, {item.what}, changes nothing: no deny or ask rule is checked "
                "after it, and a call no rule matches is allowed anyway (the set is open by "
                "default). If only what is allowed may run, end the set with policy.deny_all()",
                item.ref,
                None,
                item.index,
            )
        )
    return findings


def _unanswerable(items: list[_Item]) -> list[Finding]:
    """Ask rules answered on the terminal (`policy.load`'s default handler), for a set that
    runs where no one is at one: they deny every call they match."""
    interactive = sys.modules.get("antigravity_sdk.interactive")
    terminal = getattr(interactive, "confirm_in_terminal", None)
    if terminal is None:  # never imported: no rule can have it as its handler
        return []
    return [
        Finding(
            "warning",
            "unanswerable",
            f"{item.ref}, {item.what}, is answered on the terminal (confirm_in_terminal), "
            "which denies at once where stdin is not a terminal: unattended, it denies "
            "every call it matches. Give policy.load() an ask_handler that can reach "
            "someone, or make the rule a deny",
            item.ref,
            None,
            item.index,
        )
        for item in items
        if item.policy.decision is Decision.ASK_USER and item.policy.handler is terminal
    ]


_EMPTY: Final = (
    "no policies: on its own this set allows every call. An Agent given no policies at "
    "all uses antigravity_sdk.agent.default_policies(workspaces) instead: run_command "
    "and run_workflow denied, workspace_only of its workspaces, everything else allowed"
)
_OPEN: Final = (
    "open by default: no unconditional '*' rule, so a call no rule matches is allowed. "
    "End the set with policy.allow_all() to say so, or policy.deny_all() to close it"
)


def lint(
    policies: PolicyLike,
    *,
    mcp_servers: Iterable[McpServerConfig | str] | None = None,
    tools: Iterable[str] = (),
    unattended: bool = False,
) -> list[Finding]:
    """What is wrong with `policies` without running a call: rules `enforce` would refuse
    (errors), rules that can never decide and allows that change nothing (warnings), and
    a set that is open by default (info). `mcp_servers` and `tools` are as for `enforce`.
    With `unattended`, ask rules answered on the terminal are warnings too: the set will
    run where no one can answer (CI, a server). Findings come in rule order, the whole
    set's first; `Finding.code` says the kind (docs/policies.md, "Verifying a policy set").
    """
    try:
        flat = _flatten(policies)
        servers = _server_names(mcp_servers)
        host_tools = _tool_names(tools)
    except PolicyError as exc:
        return [Finding("error", "invalid", str(exc))]
    if not flat:
        return [Finding("info", "no-policies", _EMPTY)]
    findings: list[Finding] = []
    items: list[_Item] = []
    for index, candidate in enumerate(flat):
        try:
            rule = _Rule(index, candidate, servers, host_tools)
        except PolicyError as exc:
            ref = candidate.origin or f"policy #{index + 1} ({candidate.label!r})"
            findings.append(Finding("error", "invalid", str(exc), ref, None, index))
            continue
        items.append(_Item(index, candidate, rule.bucket))
    shadowed, dead = _shadowing(items)
    findings += shadowed
    findings += _command_findings(items, dead)
    if not any(i.policy.tool == "*" and i.policy.predicate is None for i in items):
        findings.append(Finding("info", "no-catch-all", _OPEN))
        findings += _redundant_allows(items, dead)
    if unattended:
        findings += _unanswerable(items)
    return sorted(findings, key=lambda f: -1 if f.index is None else f.index)


def worst_severity(findings: Sequence[Finding]) -> Severity | None:
    """The most severe severity among `findings`, None when there are none: what a
    linting tool's exit status follows (`antigravity policy lint`: 2 on an error, 1 on a
    warning)."""
    present = {f.severity for f in findings}
    return next((s for s in SEVERITIES if s in present), None)
