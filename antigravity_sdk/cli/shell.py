"""Shell-command rules shared by `antigravity chat` and `antigravity demo`: which command
lines are destructive, which are on the demo's read-only allow-list, and the
`no-destructive-shell` policy built on the first."""

from __future__ import annotations

import re
import shlex
from typing import Any, Final

from .. import policy

__all__ = ["SAFE_COMMANDS", "is_allow_listed", "is_destructive", "no_destructive_shell"]

_DESTRUCTIVE: Final = re.compile(
    r"(^|[;&|(\s])(sudo|mkfs(\.\w+)?|shred|dd)(\s|$)"  # privilege, disk wiping
    r"|(^|[;&|(\s])rm\s+(-\w*[rRf]|--recursive|--force)"  # rm -r / -f / -rf
    r"|:\(\)\s*\{"  # fork bomb
)
SAFE_COMMANDS: Final = frozenset(
    {"ls", "cat", "head", "tail", "wc", "grep", "pwd", "echo", "true", "date", "stat"}
)
_SHELL_META: Final = re.compile(r"[;&|<>$`\\(){}\n*?~]")


def is_destructive(args: dict[str, Any]) -> bool:
    """`rm -r`/`rm -f`, `sudo`, `mkfs`, `dd`, `shred` or a fork bomb anywhere in the line."""
    return bool(_DESTRUCTIVE.search(str(args["CommandLine"])))


def is_allow_listed(args: dict[str, Any]) -> bool:
    """A read-only command from a short allow-list, on relative paths, no shell syntax."""
    line = str(args["CommandLine"])
    if _SHELL_META.search(line):
        return False
    if "'" in line or '"' in line:
        try:
            words = shlex.split(line)
        except ValueError:
            return False
    else:  # the common case, without shlex's cost (no quoting, no shell syntax left)
        words = line.split()
    if not words or words[0] not in SAFE_COMMANDS:
        return False
    return all(not (w.startswith("/") or ".." in w) for w in words[1:])


def no_destructive_shell() -> policy.Policy:
    """Deny destructive shell commands (`is_destructive`) in the specific-deny bucket."""
    return policy.deny(
        "run_command",
        when=is_destructive,
        name="no-destructive-shell",
        reason="Denied by policy 'no-destructive-shell': destructive shell commands "
        "(rm -r/-f, sudo, mkfs, dd, shred) are never run.",
    )
