"""Saved conversations: what the harness keeps under a save dir, and how to name one.

The harness stores each conversation as one SQLite file, `<conversation id>.db`, in the
storage directory the SDK hands it (`AgentBuilder.save_dir`); a subagent's steps live in
its parent's file. Listing reads directory entries only: the file's schema is the
harness's own and is never opened here.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from .errors import ConfigurationError

__all__ = ["ConversationInfo", "default_save_dir", "list_conversations"]

_SUFFIX: Final = ".db"
# The harness accepts ids of at least 32 characters from [A-Za-z0-9-] (it refuses others
# only after it has started). The upper bound keeps `<id>.db` and SQLite's `-journal`
# beside it within a file name's 255 bytes.
_ID: Final = re.compile(r"[A-Za-z0-9-]{32,200}")


@dataclass(frozen=True, slots=True)
class ConversationInfo:
    """One saved conversation: its id (what `resume()` takes), its file, when it was last
    written (UTC) and the file's size in bytes."""

    id: str
    path: Path
    modified: datetime
    size: int


def default_save_dir() -> Path:
    """Where an agent saves conversations when `save_dir()` was not given."""
    from .harness.install import default_cache_dir

    return default_cache_dir() / "conversations"


def check_conversation_id(conversation_id: object) -> str:
    """`conversation_id` if the harness would accept it, else a clear error: checked in
    Python, because the harness only says so by exiting after it has started."""
    if not isinstance(conversation_id, str):
        raise TypeError(f"a conversation id must be a str, got {type(conversation_id).__name__}")
    if not _ID.fullmatch(conversation_id):
        raise ConfigurationError(
            f"conversation id {conversation_id!r} is not one the harness accepts: "
            "32 to 200 characters from A-Z, a-z, 0-9 and '-' (agent.conversation_id "
            "and list_conversations() give the ids of saved conversations)"
        )
    return conversation_id


def conversation_file(save_dir: Path, conversation_id: str) -> Path:
    """The file the harness keeps `conversation_id` in under `save_dir`."""
    return save_dir / f"{conversation_id}{_SUFFIX}"


def list_conversations(save_dir: str | os.PathLike[str] | None = None) -> list[ConversationInfo]:
    """The conversations saved under `save_dir` (default: the agent's default save dir),
    most recently written first. A save dir that does not exist holds none."""
    directory = Path(save_dir) if save_dir is not None else default_save_dir()
    directory = directory.expanduser()
    if directory.exists() and not directory.is_dir():
        raise ConfigurationError(f"save dir {str(directory)!r} is not a directory")
    found: list[ConversationInfo] = []
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return []
    for entry in entries:
        stem = entry.name.removesuffix(_SUFFIX)
        if stem == entry.name or not _ID.fullmatch(stem):
            continue  # SQLite's side files, anything else kept there
        try:
            if not entry.is_file():
                continue
            stat = entry.stat()
        except FileNotFoundError:  # removed while listing
            continue
        modified = datetime.fromtimestamp(stat.st_mtime, tz=UTC)
        found.append(ConversationInfo(stem, Path(entry.path), modified, stat.st_size))
    found.sort(key=lambda info: (info.modified, info.id), reverse=True)
    return found
