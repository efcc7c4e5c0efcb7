"""Human-in-the-loop helpers for a terminal session.

`confirm_in_terminal` is an ASK_USER handler: it shows the tool call and asks y/N.
Without a terminal nobody can answer, so it denies rather than wait forever. The
prompt runs in a worker thread so the event loop (and the harness connection) keeps
running while the user thinks.

The model chooses every character shown, so the display is built to be read, not
rendered: nothing is cut (the dangerous part of a command can be its tail), long lines
are wrapped under a visible prefix, and anything that could move the cursor, repaint
the prompt or change how the rest looks is shown as an escape instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import sys
import threading
import unicodedata
from typing import Final

from .harness.catalog import TOOLS, shown_args
from .types import ToolCall

__all__ = ["confirm_in_terminal", "describe_call", "escape_for_terminal"]

logger = logging.getLogger(__name__)

_prompt_lock = threading.Lock()  # one question on the terminal at a time

_ESCAPED: Final = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
"""Categories shown as escapes: control (ANSI escapes, CR, backspace), format (bidi
overrides, zero-width), surrogates, private use, unassigned, line/paragraph separators,
and every space but U+0020 (a no-break space would hide a word boundary)."""
_MAX_MARKS: Final = 2
"""Combining marks kept on one base character (Vietnamese needs two); more are escaped,
because stacked marks ("zalgo") paint over the lines around them."""
_NAMED: Final = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
_MIN_WIDTH: Final = 20


def _escape(char: str) -> str:
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def escape_for_terminal(text: str) -> str:
    """`text` on one line, every character that could drive the terminal escaped. Public
    so that anything else showing the model's text on a terminal (the CLI's report)
    escapes it by the same rules as the y/N question."""
    out = []
    marks = 0
    for char in text:
        if char == " ":
            marks = 0
            out.append(char)
            continue
        category = unicodedata.category(char)
        if category in _ESCAPED:
            marks = 0
            out.append(_escape(char))
        elif category[0] == "M":
            marks += 1
            out.append(char if marks <= _MAX_MARKS else _escape(char))
        else:
            marks = 0
            out.append(char)
    return "".join(out)


def _rows(lines: list[str], first: str, then: str, width: int) -> list[str]:
    """Each line escaped and wrapped at `width`, behind a gutter: `first` marks the first
    line, `then` the others, and a blank gutter a wrapped row; content never starts a row."""
    step = max(_MIN_WIDTH, width - 6)
    rows = []
    for n, line in enumerate(lines):
        shown = escape_for_terminal(line)
        rows.append(f"    {first if n == 0 else then} {shown[:step]}")
        rows.extend(f"      {shown[i : i + step]}" for i in range(step, len(shown), step))
    return rows


_SHELL = "run_command"
_COMMAND, _CWD = "CommandLine", "Cwd"
assert {_COMMAND, _CWD} <= set(TOOLS[_SHELL].args)


def describe_call(call: ToolCall, width: int = 80) -> str:
    """The call as the prompt shows it: a shell command line by line, then every other
    argument the harness acts on (`RunPersistent`, `RequestedTerminalID`, ...), one per
    line; any other call as all its arguments. Only the model's captions of the call
    (`toolAction`, `toolSummary`), which nothing acts on, are left out. Public so that
    another ask handler (the interactive chat's) shows a call exactly as this one does."""
    args = shown_args(call.name, call.server_name, call.args)
    if call.name == _SHELL and not call.server_name and _COMMAND in args:
        command = str(args.pop(_COMMAND))
        where = f" (in {escape_for_terminal(str(args.pop(_CWD)))})" if _CWD in args else ""
        lines = command.split("\n")
        rows = _rows(lines, "$", ">", width)
        size = ""
        if len(rows) > 1:  # say how much there is to read before answering
            size = f", a command of {len(command)} characters on {len(lines)} line(s)"
        for key, value in args.items():
            shown = json.dumps(value, default=str, ensure_ascii=False)
            rows += _rows([f"{key}: {shown}"], "+", "+", width)
        return f"run_command{where}{size}:\n" + "\n".join(rows)
    body = json.dumps(args, indent=2, default=str, ensure_ascii=False)
    rows = _rows(body.split("\n"), "|", "|", width)
    return f"{escape_for_terminal(call.qualified_name)} with arguments:\n" + "\n".join(rows)


def _prompt(call: ToolCall) -> bool:
    width = shutil.get_terminal_size().columns
    with _prompt_lock:
        sys.stderr.write(f"\nThe agent wants to call {describe_call(call, width)}\nAllow? [y/N] ")
        sys.stderr.flush()
        answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")


async def confirm_in_terminal(tool_call: ToolCall) -> bool:
    """Ask y/N on the terminal (default no); deny at once when stdin is not a TTY."""
    stdin = sys.stdin
    if stdin is None or not stdin.isatty():
        logger.warning("no terminal to confirm %s; denying", tool_call.qualified_name)
        return False
    return await _in_daemon_thread(tool_call)


async def _in_daemon_thread(tool_call: ToolCall) -> bool:
    """`_prompt(tool_call)` in a daemon thread. Not `asyncio.to_thread`: a question left
    unanswered (Ctrl-C cancelled the turn) would keep the process from exiting, since
    `asyncio.run` waits for its executor's threads, and this one waits for Enter."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[bool] = loop.create_future()

    def settle(result: bool, exc: Exception | None) -> None:
        if answer.done():  # cancelled meanwhile
            return
        if exc is not None:
            answer.set_exception(exc)
        else:
            answer.set_result(result)

    def ask() -> None:
        result, error = False, None
        try:
            result = _prompt(tool_call)
        except Exception as exc:
            error = exc
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for it
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=ask, name="antigravity-confirm", daemon=True).start()
    return await answer
