"""Human-in-the-loop helpers for a terminal session.

`confirm_in_terminal` is an ASK_USER handler: it shows the tool call and asks y/N.
Without a terminal nobody can answer, so it denies rather than wait forever. The
prompt runs in a worker thread so the event loop (and the harness connection) keeps
running while the user thinks.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
import unicodedata
from typing import Final

from .types import ToolCall

__all__ = ["confirm_in_terminal"]

logger = logging.getLogger("antigravity_sdk.policy")

_MAX_SHOWN: Final = 2000
_prompt_lock = threading.Lock()  # one question on the terminal at a time


def _printable(text: str) -> str:
    """Escape control and format characters: model-chosen text must not drive the terminal."""
    out = []
    for char in text:
        if char in "\n\t" or unicodedata.category(char) not in ("Cc", "Cf"):
            out.append(char)
        else:
            out.append(f"\\u{ord(char):04x}")
    shown = "".join(out)
    if len(shown) > _MAX_SHOWN:
        shown = shown[:_MAX_SHOWN] + f"... ({len(shown) - _MAX_SHOWN} more characters)"
    return shown


def _describe(call: ToolCall) -> str:
    args = dict(call.args)
    if call.name == "run_command" and not call.server_name and "CommandLine" in args:
        command = str(args.pop("CommandLine"))
        where = f" (in {args['Cwd']})" if "Cwd" in args else ""
        return f"run_command{_printable(where)}:\n    $ {_printable(command)}"
    body = json.dumps(args, indent=2, default=str, ensure_ascii=False)
    return f"{_printable(call.qualified_name)} with arguments:\n{_printable(body)}"


def _prompt(call: ToolCall) -> bool:
    with _prompt_lock:
        sys.stderr.write(f"\nThe agent wants to call {_describe(call)}\nAllow? [y/N] ")
        sys.stderr.flush()
        answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")


async def confirm_in_terminal(tool_call: ToolCall) -> bool:
    """Ask y/N on the terminal (default no); deny at once when stdin is not a TTY."""
    stdin = sys.stdin
    if stdin is None or not stdin.isatty():
        logger.warning("no terminal to confirm %s; denying", tool_call.qualified_name)
        return False
    return await asyncio.to_thread(_prompt, tool_call)
