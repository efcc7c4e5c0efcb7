"""`antigravity conversations list|clean`: the conversations agents saved, and removing
them. Agents save every conversation (one SQLite file each, see
`antigravity_sdk.conversations`) under the default save dir unless given `save_dir()`;
nothing else ever removes them."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..conversations import ConversationInfo
    from ._common import Subparsers

__all__ = ["add_conversations"]


def _days(value: str) -> float:
    try:
        days = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of days: {value!r}") from None
    if not days >= 0 or days == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number of days >= 0, got {value!r}")
    return days


def _size(size: int) -> str:
    for unit in ("B", "KB", "MB"):
        if size < 1024:
            return f"{size:.0f} {unit}"
        size //= 1024
    return f"{size} GB"


def _saved(args: argparse.Namespace) -> tuple[Path, list[ConversationInfo]] | None:
    """The save dir `--dir` names (or the default) and its conversations; None after
    printing why it cannot be read."""
    from ..conversations import default_save_dir, list_conversations
    from ..errors import ConfigurationError

    directory = Path(args.dir) if args.dir else default_save_dir()
    try:
        return directory, list_conversations(directory)
    except ConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None


def _list(args: argparse.Namespace) -> int:
    saved = _saved(args)
    if saved is None:
        return 2
    directory, found = saved
    if not found:
        print(f"no saved conversations in {directory}")
        return 0
    print(f"{len(found)} saved in {directory} (most recent first):")
    for info in found:
        when = info.modified.astimezone().strftime("%Y-%m-%d %H:%M")
        print(f"  {info.id}  {when}  {_size(info.size):>7}")
    return 0


def _clean(args: argparse.Namespace) -> int:
    saved = _saved(args)
    if saved is None:
        return 2
    directory, found = saved
    cutoff = datetime.now(UTC) - timedelta(days=args.older_than or 0)
    old = [info for info in found if info.modified <= cutoff]
    failed = 0
    for info in old:
        # The harness's file and SQLite's side files beside it (-journal, -wal, -shm).
        for path in (info.path, *info.path.parent.glob(f"{info.path.name}-*")):
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:
                failed += 1
                print(f"error: cannot remove {path}: {exc.strerror or exc}", file=sys.stderr)
    kept = len(found) - len(old)
    print(f"removed {len(old)} conversation(s) from {directory}; {kept} kept")
    return 1 if failed else 0


def add_conversations(subparsers: Subparsers) -> None:
    """`antigravity conversations list|clean`: see and remove saved conversations."""
    parser = subparsers.add_parser(
        "conversations", help="list or remove the conversations agents saved"
    )
    commands = parser.add_subparsers(dest="conversations_command", required=True, metavar="COMMAND")
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument(
        "--dir", metavar="SAVE_DIR", help="a save dir (default: the agents' default save dir)"
    )
    listing = commands.add_parser(
        "list", parents=[where], help="list saved conversations, most recent first"
    )
    listing.set_defaults(run=_list)
    clean = commands.add_parser(
        "clean",
        parents=[where],
        help="remove saved conversations (all of them, or those older than --older-than)",
    )
    clean.add_argument(
        "--older-than",
        metavar="DAYS",
        type=_days,
        help="only conversations last written more than DAYS days ago",
    )
    clean.set_defaults(run=_clean)
