"""`antigravity policy check|explain|lint|test|replay`: validate a TOML policy file, explain
how it decides a call, find rules that can never decide, check it against expected
decisions (CI), and replay an audit log under it.

Exit codes, as for every command (`_common.EXIT_CODES`): 0 the answer is yes, 1 it is no,
2 not runnable. `check` 0 valid / 2 invalid; `explain` 0 allowed / 1 denied or asks / 2
bad input (an invalid file, a tool no policy could decide); `lint` 0 clean / 1 warnings /
2 errors (an invalid file); `test` 0 every case passes / 1 a mismatch / 2 not runnable;
`replay` 0 nothing changes / 1 some decisions change / 2 not runnable.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..errors import PolicyError
from ._common import EXIT_CODES, run_loop

if TYPE_CHECKING:
    from ..policy import PolicyDecision, PolicyEnforcer, PolicyFile
    from ..types import ToolCall
    from ._common import Subparsers

__all__ = ["add_policy"]


def _load(path: str) -> PolicyFile | None:
    """The policy file, or None after printing why it cannot be read."""
    from .. import policy

    try:
        return policy.load(path)
    except PolicyError as exc:  # reading and parsing raise it
        print(f"error: {exc}", file=sys.stderr)
        return None


def _load_enforcer(path: str) -> tuple[PolicyFile, PolicyEnforcer] | None:
    """The policy file and its enforcer, or None after printing why it is invalid."""
    from .. import policy

    loaded = _load(path)
    if loaded is None:
        return None
    try:
        return loaded, policy.enforce(loaded, loaded.mcp_servers)
    except PolicyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None


def _undecidable(call: ToolCall, mcp_servers: Sequence[str]) -> str:
    """Why no policy could ever decide `call`, or "": refused as a rule naming its tool
    is (`enforce()`'s words and did-you-mean), so that a typo is not answered ALLOWED by
    a catch-all rule. An MCP call must name one of `mcp_servers` when the file declares
    some (the tools a server offers are not known here)."""
    import difflib

    from ..policy import why_undecidable

    if not call.name:
        return f"{call.qualified_name!r}: expected a tool name, or server/tool for MCP"
    if call.server_name is None:
        return why_undecidable(call.name)
    if not mcp_servers or call.server_name in mcp_servers:
        return ""
    close = difflib.get_close_matches(call.server_name, mcp_servers, n=1, cutoff=0.75)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return (
        f"{call.qualified_name!r}: server {call.server_name!r} is not among the file's "
        f"mcp_servers ({', '.join(mcp_servers)}){hint}"
    )


@contextlib.contextmanager
def _quiet_engine() -> Iterator[None]:
    """The decisions printed show a failing condition themselves; the engine's log line
    would only repeat it on stderr."""
    engine_log = logging.getLogger("antigravity_sdk.policy")
    was_disabled, engine_log.disabled = engine_log.disabled, True
    try:
        yield
    finally:
        engine_log.disabled = was_disabled


def _call(tool: str, args: dict[str, Any], server: str | None = None) -> ToolCall:
    """The call of `tool` (`server/tool` for MCP unless `server` is given)."""
    from ..types import ToolCall

    if server is None:
        head, slash, name = tool.partition("/")
        if slash:
            return ToolCall(name=name, args=args, server_name=head)
    return ToolCall(name=tool, args=args, server_name=server)


async def _evaluate_all(
    enforcer: PolicyEnforcer, calls: Sequence[ToolCall]
) -> list[PolicyDecision]:
    """Each call's decision, no handler called (an ASK_USER match is reported)."""
    return [await enforcer.evaluate(call, ask=False) for call in calls]


def _outcome(decision: PolicyDecision) -> str:
    """`allow`, `deny` or `ask` (the handler would be asked), as the call would end."""
    if decision.would_ask:
        return "ask"
    return "allow" if decision.allow else "deny"


def _shown(args: object, width: int = 48) -> str:
    text = json.dumps(args, ensure_ascii=True, separators=(",", ":"), default=str)
    return text if len(text) <= width else text[: width - 3] + "..."


def _table(header: Sequence[str], rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in [list(header), *rows]) for i in range(len(header))]
    for row in [list(header), ["-" * w for w in widths], *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


# -- check, explain ------------------------------------------------------------------------


def _policy_check(args: argparse.Namespace) -> int:
    from .. import policy

    loaded = _load(args.file)
    if loaded is None:
        return 2
    try:
        enforcer = policy.enforce(loaded, loaded.mcp_servers)
    except PolicyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    count = len(enforcer.policies)
    if count == 0:
        print(f"{args.file}: OK, but it has no rules: on its own it allows every tool call")
        return 0
    print(f"{args.file}: OK, {count} {'policy' if count == 1 else 'policies'}")
    print("Evaluation order (bucket, then file order):")
    ranked = sorted(enumerate(enforcer.policies), key=lambda item: (item[1].bucket, item[0]))
    for _, p in ranked:
        condition = f"  when {p.predicate!r}" if p.predicate is not None else ""
        print(f"  [{p.bucket} {policy.BUCKETS[p.bucket]:<14}] {p.tool:<22} {p.label}{condition}")
    findings = policy.lint(loaded, mcp_servers=loaded.mcp_servers)
    warnings = sum(f.severity == "warning" for f in findings)
    if warnings:
        print(
            f"note: antigravity policy lint {args.file} finds {warnings} "
            f"warning{'s' if warnings > 1 else ''}: rules that can never decide or change nothing",
            file=sys.stderr,
        )
    return 0


def _command_parse(enforcer: PolicyEnforcer, call: ToolCall) -> list[str]:
    """For a `run_command` call: how its line parses into simple commands, and what each
    command rule of the set makes of it."""
    from ..policy import CommandPredicate, parse_command_line

    line = call.args.get("CommandLine")
    if call.server_name or call.name != "run_command" or not isinstance(line, str):
        return []
    parsed = parse_command_line(line).describe()
    lines = ["  command line, parsed:", *(f"    {row}" for row in parsed)]
    for p in enforcer.policies:
        if isinstance(p.predicate, CommandPredicate):
            predicate = p.predicate
            lines.append(f"  rule {p.label!r} ({predicate.mode} {', '.join(predicate.patterns)}):")
            lines += [f"    {row}" for row in predicate.explain(line)]
    return lines


def _policy_explain(args: argparse.Namespace) -> int:
    try:
        call_args = json.loads(args.args_json)
    except json.JSONDecodeError as exc:
        print(f"error: ARGS_JSON is not valid JSON: {exc}", file=sys.stderr)
        return 2
    if not isinstance(call_args, dict):
        print("error: ARGS_JSON must be a JSON object", file=sys.stderr)
        return 2
    call = _call(args.tool, call_args)
    compiled = _load_enforcer(args.file)
    if compiled is None:
        return 2
    loaded, enforcer = compiled
    problem = _undecidable(call, loaded.mcp_servers)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    with _quiet_engine():
        decision = run_loop(enforcer.evaluate(call, ask=False))
    print(decision)
    for line in _command_parse(enforcer, call):
        print(line)
    return 0 if decision.allow else 1


# -- lint ------------------------------------------------------------------------------------


def _policy_lint(args: argparse.Namespace) -> int:
    from .. import policy

    loaded = _load(args.file)
    if loaded is None:
        return 2
    findings = policy.lint(loaded, mcp_servers=loaded.mcp_servers, unattended=args.unattended)
    for finding in findings:
        print(finding)
    counts = {s: sum(f.severity == s for f in findings) for s in ("error", "warning", "info")}
    summary = ", ".join(f"{n} {s}{'s' if n > 1 else ''}" for s, n in counts.items() if n)
    print(f"{args.file}: {summary or 'clean'}")
    return {"error": 2, "warning": 1}.get(policy.worst_severity(findings) or "", 0)


# -- test ------------------------------------------------------------------------------------

_EXPECT: Final = frozenset({"allow", "deny", "ask"})
_CASE_KEYS: Final = frozenset({"name", "tool", "server", "args", "expect", "rule"})


@dataclass(frozen=True)
class _Case:
    number: int
    name: str
    call: ToolCall
    expect: str
    rule: str | None  # None: not checked; "": no rule decides


def _read_cases(path: str) -> list[_Case]:
    """The `[[case]]` tables of a cases file; a `PolicyError` names the case and key."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read the file: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise PolicyError(f"{path}: invalid TOML: {exc}") from None
    unknown = sorted(set(data) - {"case"})
    if unknown:
        raise PolicyError(f"{path}: unknown top-level key {unknown[0]!r} (expected [[case]])")
    tables = data.get("case", [])
    if not isinstance(tables, list) or not tables:
        raise PolicyError(f"{path}: no cases: write each one as a [[case]] table")
    return [_read_case(path, n, table) for n, table in enumerate(tables, start=1)]


def _read_case(path: str, number: int, table: object) -> _Case:
    if not isinstance(table, dict):
        raise PolicyError(f"{path}: case #{number}: expected a table")
    name = table.get("name", "")
    where = f"{path}: case #{number}" + (f" ({name!r})" if isinstance(name, str) and name else "")
    unknown = sorted(set(table) - _CASE_KEYS)
    if unknown:
        raise PolicyError(
            f"{where}: unknown key {unknown[0]!r} (expected {', '.join(sorted(_CASE_KEYS))})"
        )
    for key in ("name", "tool", "server", "rule", "expect"):
        if key in table and not isinstance(table[key], str):
            raise PolicyError(f"{where}: {key}: expected a string")
    if not table.get("tool"):
        raise PolicyError(f'{where}: tool: missing (e.g. tool = "run_command")')
    expect = table.get("expect")
    if expect not in _EXPECT:
        raise PolicyError(
            f"{where}: expect: expected one of allow, deny, ask, got {table.get('expect')!r}"
        )
    args = table.get("args", {})
    if not isinstance(args, dict):
        raise PolicyError(f"{where}: args: expected a table, e.g. args = {{ CommandLine = 'ls' }}")
    call = _call(table["tool"], args, table.get("server"))
    return _Case(number, name, call, expect, table.get("rule"))


def _verdict(outcome: str, rule: str | None) -> str:
    return f"{outcome} ({rule})" if rule else f"{outcome} (no rule)"


def _policy_test(args: argparse.Namespace) -> int:
    try:
        cases = _read_cases(args.cases)
    except PolicyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    compiled = _load_enforcer(args.file)
    if compiled is None:
        return 2
    loaded, enforcer = compiled
    for case in cases:
        problem = _undecidable(case.call, loaded.mcp_servers)
        if problem:
            name = f" ({case.name!r})" if case.name else ""
            where = f"{args.cases}: case #{case.number}{name}"
            print(f"error: {where}: tool: {problem}", file=sys.stderr)
            return 2
    with _quiet_engine():
        decisions = run_loop(_evaluate_all(enforcer, [case.call for case in cases]))
    rows: list[list[str]] = []
    failed: list[tuple[_Case, PolicyDecision]] = []
    for case, decision in zip(cases, decisions, strict=True):
        outcome = _outcome(decision)
        rule = decision.policy.label if decision.policy is not None else ""
        ok = outcome == case.expect and case.rule in (None, rule)
        expected = case.expect if case.rule is None else _verdict(case.expect, case.rule)
        label = case.name or f"{case.call.qualified_name} {_shown(case.call.args)}"
        rows.append(
            [str(case.number), "pass" if ok else "FAIL", label, expected, _verdict(outcome, rule)]
        )
        if not ok:
            failed.append((case, decision))
    _table(["#", "result", "case", "expected", "got"], rows)
    for case, decision in failed:
        print(f"\ncase #{case.number} {case.name or ''}".rstrip() + ":")
        print(decision)
    passed = len(cases) - len(failed)
    print(
        f"\n{len(cases)} case{'s' if len(cases) > 1 else ''}: {passed} passed, {len(failed)} failed"
    )
    return 1 if failed else 0


# -- replay ----------------------------------------------------------------------------------

_KIND: Final = {"approve": "allow", "deny": "deny", "ask_user": "ask", None: "allow"}


def _contains(value: object, markers: frozenset[str]) -> bool:
    if isinstance(value, str):
        return value in markers
    if isinstance(value, dict):
        return any(_contains(v, markers) for v in value.values())
    if isinstance(value, list):
        return any(_contains(v, markers) for v in value)
    return False


@dataclass
class _Replay:
    calls: list[ToolCall]
    entries: list[dict[str, Any]]
    before_policies: int = 0
    redacted: int = 0
    rewritten: int = 0


def _replayable(entries: list[dict[str, Any]], markers: frozenset[str]) -> _Replay:
    """The decision lines the policies decided, as calls: with the arguments the
    policies saw (a hook's rewrite, when logged), unless they were redacted."""
    from ..audit import REDACTION_FAILED

    replay = _Replay([], [])
    for entry in entries:
        if entry.get("kind") != "decision":
            continue
        tool = entry.get("tool")
        if entry.get("by") != "policy" or not isinstance(tool, str) or not tool:
            replay.before_policies += 1
            continue
        if "rewritten_by" in entry and "rewritten_args" not in entry:
            replay.rewritten += 1  # denied after a rewrite: what the policies saw is not logged
            continue
        call_args = entry.get("rewritten_args", entry.get("args"))
        if not isinstance(call_args, dict) or _contains(call_args, markers | {REDACTION_FAILED}):
            replay.redacted += 1
            continue
        replay.calls.append(_call(tool, call_args))
        replay.entries.append(entry)
    return replay


def _policy_replay(args: argparse.Namespace) -> int:
    from ..audit import read_entries

    compiled = _load_enforcer(args.file)
    if compiled is None:
        return 2
    _, enforcer = compiled
    try:
        entries, unreadable = read_entries(args.audit_log)
    except OSError as exc:
        print(f"error: cannot read {args.audit_log}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    replay = _replayable(entries, frozenset(args.redacted))
    with _quiet_engine():
        decisions = run_loop(_evaluate_all(enforcer, replay.calls))
    changed: list[list[str]] = []
    moved: list[list[str]] = []
    for call, entry, decision in zip(replay.calls, replay.entries, decisions, strict=True):
        was = (_KIND.get(entry.get("decision"), "?"), entry.get("rule"))
        kind = decision.decision.value if decision.decision is not None else None
        now = (_KIND[kind], decision.policy.label if decision.policy is not None else None)
        if was == now:
            continue
        row = [
            str(entry.get("time", ""))[:19],
            call.qualified_name,
            _shown(call.args, 40),
            _verdict(*was),
            _verdict(*now),
        ]
        (changed if was[0] != now[0] else moved).append(row)
    print(
        f"{args.audit_log}: {len(replay.calls)} decision{'s' if len(replay.calls) != 1 else ''} "
        f"of the policies replayed under {args.file}: {len(changed)} would change"
    )
    header = ["time", "tool", "arguments", "was", "now"]
    if changed:
        _table(header, changed)
    if moved:
        print(f"same outcome, decided by another rule: {len(moved)}")
        _table(header, moved)
    skipped = [
        (replay.redacted, "with redacted arguments (not guessed)"),
        (replay.rewritten, "denied after a hook's rewrite (the rewrite is not logged)"),
        (replay.before_policies, "decided before the policies (a hook or the SDK)"),
    ]
    text = ", ".join(f"{n} {why}" for n, why in skipped if n)
    if text:
        print(f"not replayed: {text}")
    if unreadable:
        print(f"warning: {unreadable} unreadable line(s) skipped", file=sys.stderr)
    return 1 if changed else 0


def add_policy(subparsers: Subparsers) -> None:
    """`antigravity policy check|explain|lint|test|replay`."""
    parser = subparsers.add_parser(
        "policy",
        help="validate, explain, lint and test policy files",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="policy_command", required=True, metavar="COMMAND")
    check = commands.add_parser(
        "check",
        help="validate a policy file and list its rules in evaluation order (exit 0 valid, "
        "2 invalid)",
    )
    check.add_argument("file", metavar="FILE", help="a TOML policy file")
    check.set_defaults(run=_policy_check)
    explain = commands.add_parser(
        "explain",
        help="show how a policy file decides one tool call (exit 0 allowed, 1 denied or "
        "asks, 2 an invalid file or a tool no policy could decide)",
    )
    explain.add_argument("file", metavar="FILE", help="a TOML policy file")
    explain.add_argument("tool", metavar="TOOL", help="a tool name, or server/tool for MCP")
    explain.add_argument(
        "args_json", metavar="ARGS_JSON", nargs="?", default="{}", help="the call's arguments"
    )
    explain.set_defaults(run=_policy_explain)
    lint = commands.add_parser(
        "lint",
        help="find rules that can never decide (exit 0 clean, 1 warnings, 2 errors: an "
        "invalid file)",
    )
    lint.add_argument("file", metavar="FILE", help="a TOML policy file")
    lint.add_argument(
        "--unattended",
        action="store_true",
        help="the file will run where no one answers a terminal (CI, a server): ask_user "
        "rules answered on the terminal are warnings",
    )
    lint.set_defaults(run=_policy_lint)
    test = commands.add_parser(
        "test",
        help="decide each case of CASES.toml and compare (exit 0 all pass, 1 a mismatch, "
        "2 not runnable)",
    )
    test.add_argument("file", metavar="FILE", help="a TOML policy file")
    test.add_argument("cases", metavar="CASES", help="a TOML file of [[case]] tables")
    test.set_defaults(run=_policy_test)
    replay = commands.add_parser(
        "replay",
        help="decide an audit log's calls again under FILE and print what would change "
        "(exit 0 nothing, 1 some outcomes change, 2 not runnable)",
    )
    replay.add_argument("file", metavar="FILE", help="the candidate TOML policy file")
    replay.add_argument("audit_log", metavar="AUDIT", help="a JSON-lines audit log")
    replay.add_argument(
        "--redacted",
        metavar="MARKER",
        action="append",
        default=[],
        help="a value your redactor writes in place of a secret (repeatable): calls "
        "holding it are counted, not replayed",
    )
    replay.set_defaults(run=_policy_replay)
