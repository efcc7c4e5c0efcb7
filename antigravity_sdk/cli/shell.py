"""Shell-command rules shared by `antigravity chat` and `antigravity demo`, as command
rules (`policy.deny_commands`, `policy.allow_commands`): which commands are destructive,
which are on the demo's read-only allow-list, and the policies built on them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .. import policy

__all__ = ["DESTRUCTIVE_COMMANDS", "SAFE_COMMANDS", "no_destructive_shell", "safe_shell"]

DESTRUCTIVE_COMMANDS: Final = (
    "rm -r",
    "rm -f",
    "find -delete",
    "sudo",
    "doas",
    "su",
    "dd",
    "shred",
    "mkfs",
    *(f"mkfs.{fs}" for fs in ("ext2", "ext3", "ext4", "xfs", "btrfs", "vfat", "fat", "ntfs")),
)
"""Denied wherever they appear in a line (nested, wrapped, in any flag spelling)."""
SAFE_COMMANDS: Final = frozenset(
    {"ls", "cat", "head", "tail", "wc", "grep", "pwd", "echo", "true", "date", "stat"}
)


def no_destructive_shell() -> policy.Policy:
    """Deny destructive shell commands (`DESTRUCTIVE_COMMANDS`), and lines that cannot be
    checked, in the specific-deny bucket."""
    return policy.deny_commands(
        DESTRUCTIVE_COMMANDS,
        name="no-destructive-shell",
        reason="Denied by policy 'no-destructive-shell': destructive shell commands "
        "(rm -r/-f, sudo, mkfs, dd, shred) are never run.",
    )


class _NotAllowed:
    """True unless the allow rule's predicate holds; an unprovable line raises, and the
    deny rule carrying this denies it (the fail-safe rule)."""

    __slots__ = ("allowed",)

    def __init__(self, allowed: policy.CommandPredicate) -> None:
        self.allowed = allowed

    def __call__(self, args: Mapping[str, Any]) -> bool:
        return not self.allowed(args)

    def explain(self, line: str) -> list[str]:
        """The allow rule's explanation (`CommandPredicate.explain`)."""
        return self.allowed.explain(line)

    def __repr__(self) -> str:
        return f"not {self.allowed!r}"


def safe_shell() -> list[policy.Policy]:
    """The demo's allow-list: `SAFE_COMMANDS`, every command of the line on it (bucket 2),
    and a deny of any other line (bucket 0) naming the list; `workspace_only` keeps their
    paths inside."""
    allowed = policy.CommandPredicate(sorted(SAFE_COMMANDS), "allow", "safe_shell")
    deny = policy.deny(
        "run_command",
        when=_NotAllowed(allowed),
        name="shell-not-allow-listed",
        reason="Denied by policy 'shell-not-allow-listed': only simple read-only "
        f"commands ({', '.join(sorted(SAFE_COMMANDS))}) on workspace paths may run.",
    )
    return [deny, policy.allow("run_command", when=allowed, name="safe-shell")]
