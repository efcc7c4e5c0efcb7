"""What the subcommand modules share with the parser that registers them, kept apart so
that none of them imports `_commands` (which imports each of them to register it)."""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Coroutine
from typing import Any, TypeAlias, TypeVar

__all__ = ["EXIT_CODES", "LOOP_ENV", "Subparsers", "event_loop_name", "run_loop"]

EXIT_CODES = """\
exit codes, the same for every command:
  0    done, and the answer is yes: valid, allowed, clean, every case passes, intact
  1    it ran, and the answer is no or what it ran failed: a call denied or asked
       about (policy explain), lint warnings, a test case mismatch, decisions a replay
       changes, a broken audit chain, a failed turn or demo, a failed doctor check or
       download, no harness found (harness path, doctor)
  2    not runnable: bad arguments; a missing, unreadable or invalid input file (a
       policy file, cases, an audit log, a save dir); a tool no policy could decide;
       no harness to start (chat, demo); no model configured
  130  interrupted (Ctrl-C)"""
"""The exit-code scheme of every `antigravity` command: the epilog of `--help` (README,
"Command line"; docs/api.md)."""

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""What an `add_*` registrar adds its subcommand's parser to."""

_T = TypeVar("_T")

LOOP_ENV = "ANTIGRAVITY_LOOP"
"""`ANTIGRAVITY_LOOP=asyncio` keeps the CLI on asyncio's own loop with uvloop installed."""


def event_loop_name() -> str:
    """The loop `run_loop` uses: `uvloop` when the `fast` extra is installed (and not opted
    out of), else `asyncio`."""
    if os.environ.get(LOOP_ENV, "").strip().lower() == "asyncio":
        return "asyncio"
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


def run_loop(main: Coroutine[Any, Any, _T]) -> _T:
    """`asyncio.run(main)`, on uvloop when `event_loop_name()` says so: harness
    callbacks cost less CPU on it (benches/bench_e2e.py)."""
    if event_loop_name() == "uvloop":
        import uvloop

        return uvloop.run(main)
    return asyncio.run(main)
