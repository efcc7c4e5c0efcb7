"""Declarative, explainable, fail-closed tool-call policies.

A `Policy` says what happens to calls of one tool pattern: APPROVE, DENY or ASK_USER,
optionally only when a predicate holds. `enforce()` validates a list of policies and
compiles it into a `PolicyEnforcer`, a `Hook` whose `pre_tool_call` decides every call:
the nine buckets (`BUCKETS`, `Policy.bucket`) first, then registration order. Policy
files (TOML) load into a `PolicyFile` with `load()`.

One module per concept, all private; this package is the public surface:
`_rules` (policies, builders, buckets), `_workspace` (`workspace_only`), `_engine`
(compilation and evaluation), `_file` (the TOML rule language), `_lint` (`lint`: rules
that can never decide).
"""

from __future__ import annotations

from ._commands import (
    CommandPredicate,
    ParsedLine,
    SimpleCommand,
    UnprovableCommand,
    allow_commands,
    ask_commands,
    deny_commands,
    parse_command_line,
)
from ._engine import (
    PolicyDecision,
    PolicyEnforcer,
    PolicyLike,
    TraceEntry,
    enforce,
    why_undecidable,
)
from ._file import PolicyFile, load, parse_document
from ._lint import Finding, lint, worst_severity
from ._rules import (
    BUCKETS,
    AskHandler,
    Decision,
    Policy,
    Predicate,
    allow,
    allow_all,
    allow_mcp,
    ask_user,
    ask_user_mcp,
    confirm_run_command,
    deny,
    deny_all,
    deny_mcp,
)
from ._workspace import is_workspace_check, workspace_only

__all__ = [
    "BUCKETS",
    "AskHandler",
    "CommandPredicate",
    "Decision",
    "Finding",
    "ParsedLine",
    "Policy",
    "PolicyDecision",
    "PolicyEnforcer",
    "PolicyFile",
    "PolicyLike",
    "Predicate",
    "SimpleCommand",
    "TraceEntry",
    "UnprovableCommand",
    "allow",
    "allow_all",
    "allow_commands",
    "allow_mcp",
    "ask_commands",
    "ask_user",
    "ask_user_mcp",
    "confirm_run_command",
    "deny",
    "deny_all",
    "deny_commands",
    "deny_mcp",
    "enforce",
    "is_workspace_check",
    "lint",
    "load",
    "parse_command_line",
    "parse_document",
    "why_undecidable",
    "workspace_only",
    "worst_severity",
]
