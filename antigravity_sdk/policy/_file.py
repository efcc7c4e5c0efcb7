"""Policies as data: the TOML rule language, and `load` that reads it into a `PolicyFile`.

A file lists `[[rule]]` tables (a pattern, a decision, an optional `when` condition
over the call's arguments, or `command` patterns for `run_command`) and the MCP servers
its rules may name. Every error is a
`PolicyError` naming the file, the rule and the key.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from .._defaults import default_ask_handler
from ..errors import PolicyError
from ..timeouts import is_duration
from ._commands import CommandPredicate, Mode
from ._rules import AskHandler, Decision, Policy, _parse_pattern
from ._workspace import workspace_only

_DECISIONS: Final = {
    "allow": Decision.APPROVE,
    "approve": Decision.APPROVE,
    "deny": Decision.DENY,
    "ask_user": Decision.ASK_USER,
}
_RULE_KEYS: Final = frozenset({"tool", "decision", "name", "reason", "when", "timeout", "command"})
_MODES: Final[Mapping[Decision, Mode]] = {
    Decision.APPROVE: "allow",
    Decision.DENY: "deny",
    Decision.ASK_USER: "ask",
}
_STRING_OPS: Final = ("contains", "startswith", "endswith", "regex", "glob", "commands")
_OPS: Final = ("equals", *_STRING_OPS)
_MAX_CONDITION_DEPTH: Final = 32
"""How deep `all` / `any` / `not` may nest: far beyond any real rule, and well inside
Python's recursion limit when such a condition is built, printed and evaluated."""


class _Leaf:
    """`{arg = "Key", <op> = value, ...}`: every operator must hold for the argument."""

    __slots__ = ("arg", "checks", "text")

    def __init__(self, arg: str, checks: list[tuple[str, Any]], text: str) -> None:
        self.arg = arg
        self.checks = checks
        self.text = text

    def __call__(self, args: Mapping[str, Any]) -> bool:
        if self.arg not in args:
            raise LookupError(f"the call has no {self.arg!r} argument")
        value = args[self.arg]
        return all(_check(op, operand, value) for op, operand in self.checks)

    def __repr__(self) -> str:
        return self.text


def _check(op: str, operand: Any, value: Any) -> bool:
    if op == "equals":
        return bool(value == operand)
    if op == "contains" and isinstance(value, list):
        return any(o in value for o in operand)
    if not isinstance(value, str):
        raise TypeError(f"{op} needs a string argument, got {type(value).__name__}")
    if op == "contains":
        return any(o in value for o in operand)
    if op == "startswith":
        return value.startswith(operand)
    if op == "endswith":
        return value.endswith(operand)
    if op == "regex":
        return any(p.search(value) for p in operand)
    if op == "commands":  # every command of the line matches: the allow_commands proof
        return bool(operand({"CommandLine": value}))
    return any(fnmatch.fnmatchcase(value, p) for p in operand)


class _Combine:
    """`all = [...]`, `any = [...]` or `not = {...}` over conditions."""

    __slots__ = ("op", "parts")

    def __init__(self, op: str, parts: list[Callable[[Mapping[str, Any]], bool]]) -> None:
        self.op = op
        self.parts = parts

    def __call__(self, args: Mapping[str, Any]) -> bool:
        if self.op == "all":
            return all(p(args) for p in self.parts)
        if self.op == "any":
            return any(p(args) for p in self.parts)
        return not self.parts[0](args)

    def __repr__(self) -> str:
        if self.op == "not":
            return f"not ({self.parts[0]!r})"
        joiner = " or " if self.op == "any" else " and "
        return joiner.join(f"({p!r})" for p in self.parts)


def _shown(value: object) -> str:
    """An operand as the file spells it: a regex's backslashes single, lists in [ ]."""
    if isinstance(value, list):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    if isinstance(value, str):
        return f"'{value}'" if "'" not in value else f'"{value}"'
    return json.dumps(value, default=str)


def _strings(value: object, where: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(i, str) for i in items):
        raise PolicyError(f"{where}: expected a string or a non-empty list of strings")
    return tuple(items)


def _condition(node: object, where: str, depth: int = 0) -> Callable[[Mapping[str, Any]], bool]:
    if not isinstance(node, dict):
        raise PolicyError(f"{where}: a condition must be a table")
    combinators = [k for k in ("all", "any", "not") if k in node]
    if combinators:
        op = combinators[0]
        if len(node) != 1:
            extra = sorted(set(node) - {op})
            raise PolicyError(f"{where}: '{op}' cannot be combined with {extra} in one table")
        if depth == _MAX_CONDITION_DEPTH:
            raise PolicyError(
                f"{where}: conditions nest more than {_MAX_CONDITION_DEPTH} levels deep"
            )
        if op == "not":
            return _Combine("not", [_condition(node["not"], f"{where}.not", depth + 1)])
        items = node[op]
        if not isinstance(items, list) or not items:
            raise PolicyError(f"{where}.{op}: expected a non-empty list of conditions")
        parts = [_condition(item, f"{where}.{op}[{i}]", depth + 1) for i, item in enumerate(items)]
        return _Combine(op, parts)
    unknown = sorted(set(node) - {"arg", *_OPS})
    if unknown:
        raise PolicyError(
            f"{where}: unknown key {unknown[0]!r} (expected arg with one of {', '.join(_OPS)}, "
            "or all / any / not)"
        )
    arg = node.get("arg")
    if not isinstance(arg, str) or not arg:
        raise PolicyError(f'{where}.arg: expected the argument name, e.g. arg = "CommandLine"')
    checks: list[tuple[str, Any]] = []
    for op in _OPS:
        if op not in node:
            continue
        operand = node[op]
        if op == "equals":
            checks.append((op, operand))
            continue
        values = _strings(operand, f"{where}.{op}")
        if op == "regex":
            try:
                checks.append((op, tuple(re.compile(v) for v in values)))
            except (re.error, OverflowError, RecursionError, ValueError) as exc:
                raise PolicyError(f"{where}.regex: invalid regular expression: {exc}") from None
        elif op == "commands":
            checks.append((op, CommandPredicate(values, "allow", f"{where}.commands")))
        else:
            checks.append((op, values))
    if not checks:
        raise PolicyError(f"{where}: a condition on {arg!r} needs one of {', '.join(_OPS)}")
    text = " and ".join(f"{arg} {op} {_shown(node[op])}" for op, _ in checks)
    return _Leaf(arg, checks, text)


class _Both:
    """A rule with `when` and `command`: the condition first, so that a line the command
    rule cannot check only matters when the condition holds."""

    __slots__ = ("command", "condition")

    def __init__(
        self, condition: Callable[[Mapping[str, Any]], bool], command: CommandPredicate
    ) -> None:
        self.condition = condition
        self.command = command

    def __call__(self, args: Mapping[str, Any]) -> bool:
        return self.condition(args) and self.command(args)

    def explain(self, line: str) -> list[str]:
        """The command rule's explanation (`CommandPredicate.explain`)."""
        return self.command.explain(line)

    def __repr__(self) -> str:
        return f"({self.condition!r}) and {self.command!r}"


def _command_rule(table: Mapping[str, Any], decision: Decision, where: str) -> CommandPredicate:
    patterns = table["command"]
    if not isinstance(patterns, list):
        raise PolicyError(
            f"{where}: command: expected a list of command patterns, e.g. "
            'command = ["npm test", "pytest"]'
        )
    try:
        return CommandPredicate(patterns, _MODES[decision], "command")
    except PolicyError as exc:
        raise PolicyError(f"{where}: {exc}") from None


class PolicyFile(list[Policy]):
    """The policies of a policy file, in file order: a `list[Policy]` that also says where
    it came from (`path`) and which MCP servers the file declares (`mcp_servers`, in file
    order), so that `enforce(f, f.mcp_servers)` accepts its `server/tool` rules."""

    def __init__(
        self, policies: Iterable[Policy] = (), *, path: str = "", mcp_servers: Iterable[str] = ()
    ) -> None:
        super().__init__(policies)
        self.path = path
        self.mcp_servers: tuple[str, ...] = tuple(dict.fromkeys(mcp_servers))


_MAX_FILE_BYTES: Final = 4 * 1024 * 1024


def _read_file(path: str | os.PathLike[str], ask_handler: AskHandler | None) -> PolicyFile:
    """Parse a policy file; every error is a `PolicyError` naming the file (and the rule
    and the key when the file parsed)."""
    source = os.fspath(path)
    try:
        with open(source, "rb") as f:
            raw = f.read(_MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise PolicyError(f"{source}: cannot read the file: {exc.strerror or exc}") from exc
    if len(raw) > _MAX_FILE_BYTES:
        raise PolicyError(f"{source}: larger than {_MAX_FILE_BYTES} bytes; not a policy file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise PolicyError(
            f"{source}: line {line}: not UTF-8 (byte 0x{raw[exc.start]:02x}); "
            "policy files are UTF-8 TOML"
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"{source}: invalid TOML: {exc}") from None
    except RecursionError:
        raise PolicyError(f"{source}: invalid TOML: values nest too deeply") from None
    return parse_document(source, data, os.path.dirname(os.path.abspath(source)), ask_handler)


def parse_document(
    source: str, data: dict[str, Any], base: str, ask_handler: AskHandler | None = None
) -> PolicyFile:
    """The policies of a policy file already parsed as TOML (`tomllib`'s dict): `source`
    names it in errors, `base` is where its relative workspaces start, and `ask_handler`
    (default: the terminal) answers its ask_user rules. Errors are `PolicyError`s, as
    `load`'s. Public for a caller that holds a policy file's text rather than the file
    (a fleet's `AgentSpec` carries it, and checks it before parsing)."""
    unknown = sorted(set(data) - {"rule", "mcp_servers"})
    if unknown:
        raise PolicyError(
            f"{source}: unknown top-level key {unknown[0]!r} (expected rule, mcp_servers)"
        )
    declared = data.get("mcp_servers", [])
    if not isinstance(declared, list) or not all(isinstance(s, str) for s in declared):
        raise PolicyError(f"{source}: mcp_servers: expected a list of server names")
    servers = frozenset(declared)
    rules = data.get("rule", [])
    if not isinstance(rules, list):
        raise PolicyError(f"{source}: rules are written as [[rule]] tables")
    policies: list[Policy] = []
    for number, table in enumerate(rules, start=1):
        policies.extend(_parse_rule(source, number, table, servers, base, ask_handler))
    return PolicyFile(policies, path=source, mcp_servers=declared)


def _parse_rule(
    source: str,
    number: int,
    table: object,
    servers: frozenset[str],
    base: str,
    ask_handler: AskHandler | None,
) -> list[Policy]:
    name = table.get("name", "") if isinstance(table, dict) else ""
    where = f"{source}: rule #{number}" + (f" ({name!r})" if isinstance(name, str) and name else "")
    if not isinstance(table, dict):
        raise PolicyError(f"{where}: expected a table")
    if not isinstance(name, str):
        raise PolicyError(f"{where}: name: expected a string")
    if "workspace_only" in table:
        extra = sorted(set(table) - {"workspace_only", "name"})
        if extra:
            raise PolicyError(
                f"{where}: {extra[0]}: a workspace_only rule takes only workspace_only and name"
            )
        roots = _strings(table["workspace_only"], f"{where}: workspace_only")
        try:
            resolved = [os.path.join(base, os.path.expanduser(r)) for r in roots]
            guards = workspace_only(resolved, name=name or "workspace_only")
            return [dataclasses.replace(p, origin=where) for p in guards]
        except (PolicyError, ValueError, OSError) as exc:  # e.g. "~\x00" in expanduser
            raise PolicyError(f"{where}: workspace_only: {exc}") from None
    unknown = sorted(set(table) - _RULE_KEYS)
    if unknown:
        raise PolicyError(
            f"{where}: unknown key {unknown[0]!r} (expected "
            f"{', '.join(sorted(_RULE_KEYS | {'workspace_only'}))})"
        )
    raw_decision = table.get("decision")
    decision = _DECISIONS.get(raw_decision) if isinstance(raw_decision, str) else None
    if decision is None:
        raise PolicyError(
            f"{where}: decision: expected one of {', '.join(_DECISIONS)}, "
            f"got {table.get('decision')!r}"
        )
    if "command" in table:
        if table.get("tool", "run_command") not in ("run_command", ["run_command"]):
            raise PolicyError(
                f"{where}: tool: a rule with command patterns is on 'run_command', "
                f"not {table['tool']!r}"
            )
        tools: tuple[str, ...] = ("run_command",)
    elif "tool" not in table:
        raise PolicyError(
            f"{where}: tool: missing (a tool name, 'server/tool', 'server/*' or "
            "'*', or a list of them)"
        )
    else:
        tools = _strings(table["tool"], f"{where}: tool")
    for tool in tools:
        try:
            _, server = _parse_pattern(tool)
        except ValueError as exc:
            raise PolicyError(f"{where}: tool: {exc}") from None
        if server is not None and server not in servers:
            raise PolicyError(
                f"{where}: tool: {tool!r} names the MCP server {server!r}; "
                "list it in mcp_servers = [...] at the top of the file"
            )
    reason = table.get("reason", "")
    if not isinstance(reason, str):
        raise PolicyError(f"{where}: reason: expected a string")
    timeout = table.get("timeout")
    if timeout is not None:
        if decision is not Decision.ASK_USER:
            raise PolicyError(f"{where}: timeout: only ask_user rules take a timeout")
        if not is_duration(timeout):
            raise PolicyError(
                f"{where}: timeout: expected a positive, finite number of seconds, got {timeout!r}"
            )
    predicate: Callable[[Mapping[str, Any]], bool] | None = None
    if "when" in table:
        predicate = _condition(table["when"], f"{where}: when")
    if "command" in table:
        command = _command_rule(table, decision, where)
        predicate = command if predicate is None else _Both(predicate, command)
    handler = None
    if decision is Decision.ASK_USER:
        # The default (documented: the terminal) is not this package's to resolve: the
        # policy package never imports the terminal module, nor chooses who answers a
        # person's questions. The package root chooses it, and `_defaults` (below both,
        # importing nothing) holds the choice for us to read; the terminal module loads
        # only now, when a rule needs it, as before.
        handler = default_ask_handler() if ask_handler is None else ask_handler
    return [
        Policy(
            tool,
            decision,
            predicate,
            handler,
            name,
            reason,
            float(timeout) if timeout is not None else None,
            origin=where,
        )
        for tool in tools
    ]


def load(path: str | os.PathLike[str], *, ask_handler: AskHandler | None = None) -> PolicyFile:
    """Read policies from a TOML file (format: docs/policies.md).

    `ask_handler` answers the file's ask_user rules; by default the terminal does
    (`interactive.confirm_in_terminal`: y/N, denied without one). Every error is a
    `PolicyError` naming the file and, once it parsed, the rule (numbered from 1) and
    the bad key: unreadable, not UTF-8, invalid or too deeply nested TOML included.
    """
    if ask_handler is not None and not callable(ask_handler):
        raise PolicyError(f"load: ask_handler must be callable, got {ask_handler!r}")
    return _read_file(path, ask_handler)
