"""The `antigravity` command (also `python -m antigravity_sdk`).

Each subcommand is one `add_*` function that adds its parser and sets `run` to a
handler `(args) -> exit code`; list the function in `COMMANDS` to register it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Sequence
from typing import TypeAlias

from .errors import PolicyError

__all__ = ["COMMANDS", "main"]

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


# -- antigravity policy ----------------------------------------------------------------------


def _policy_check(args: argparse.Namespace) -> int:
    from . import policy

    try:
        loaded = policy._read_file(args.file)
        enforcer = policy.enforce(loaded.policies, loaded.mcp_servers)
    except (PolicyError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    count = len(enforcer.policies)
    print(f"{args.file}: OK, {count} {'policy' if count == 1 else 'policies'}")
    print("Evaluation order (bucket, then file order):")
    ranked = sorted(
        enumerate(enforcer.policies), key=lambda item: (policy._bucket_index(item[1]), item[0])
    )
    for _, p in ranked:
        bucket = policy._bucket_index(p)
        condition = f"  when {p.predicate!r}" if p.predicate is not None else ""
        print(f"  [{bucket} {policy._BUCKETS[bucket]:<14}] {p.tool:<22} {p.label}{condition}")
    return 0


def _policy_explain(args: argparse.Namespace) -> int:
    from . import policy
    from .types import ToolCall

    try:
        call_args = json.loads(args.args_json)
    except json.JSONDecodeError as exc:
        print(f"error: ARGS_JSON is not valid JSON: {exc}", file=sys.stderr)
        return 2
    if not isinstance(call_args, dict):
        print("error: ARGS_JSON must be a JSON object", file=sys.stderr)
        return 2
    server, slash, name = args.tool.rpartition("/")
    call = ToolCall(name=name, args=call_args, server_name=server if slash else None)
    try:
        loaded = policy._read_file(args.file)
        enforcer = policy.enforce(loaded.policies, loaded.mcp_servers)
    except (PolicyError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    decision = asyncio.run(enforcer.evaluate(call, ask=False))
    print(decision)
    return 0 if decision.allow else 1


def add_policy(subparsers: Subparsers) -> None:
    """`antigravity policy check|explain`: validate and explain a TOML policy file."""
    parser = subparsers.add_parser("policy", help="validate and explain policy files")
    commands = parser.add_subparsers(dest="policy_command", required=True, metavar="COMMAND")
    check = commands.add_parser(
        "check", help="validate a policy file and list its rules in evaluation order"
    )
    check.add_argument("file", metavar="FILE", help="a TOML policy file")
    check.set_defaults(run=_policy_check)
    explain = commands.add_parser(
        "explain",
        help="show how a policy file decides one tool call (exit 0 allowed, 1 denied)",
    )
    explain.add_argument("file", metavar="FILE", help="a TOML policy file")
    explain.add_argument("tool", metavar="TOOL", help="a tool name, or server/tool for MCP")
    explain.add_argument(
        "args_json", metavar="ARGS_JSON", nargs="?", default="{}", help="the call's arguments"
    )
    explain.set_defaults(run=_policy_explain)


# -- registry ---------------------------------------------------------------------------------

COMMANDS: list[Callable[[Subparsers], None]] = [add_policy]
"""Subcommand registrars, in help order: add one function here per subcommand."""


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with every registered subcommand."""
    parser = argparse.ArgumentParser(
        prog="antigravity",
        description="Governed AI agents on Google's Antigravity harness.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in COMMANDS:
        register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (2 for usage errors)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help and usage errors: report the code, do not exit
        return exc.code if isinstance(exc.code, int) else 2
    run: Callable[[argparse.Namespace], int] = args.run
    return run(args)
