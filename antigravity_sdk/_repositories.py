"""What in a git repository makes git run code later, for the containment to hold read-only.

Git runs what its configuration and hooks say when the user next works in the repository,
outside the agent: `core.fsmonitor`, filters, `core.hooksPath`, hooks. The containment
holds a repository's `hooks` and `config` read-only, and also what would point git at
other ones: `commondir` (a git dir's "use that directory's config and hooks": made as
`.` where it is missing, which git reads as this directory), `config.worktree`, each
worktree's `commondir` and `gitdir`, each submodule's git dir (`.git/modules/...`), and
the directory `core.hooksPath` names. Repositories are found at each writable root and
one level below it; a `.git` file (a worktree or submodule) leads to its git dir.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

__all__ = ["prepare", "repository_paths"]

_HOOKS_PATH = re.compile(r"^\s*hookspath\s*=\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_MAX_SUBMODULES = 200  # git dirs under .git/modules looked at (a bound on a walk)


def _git_dirs(worktree: Path) -> list[Path]:
    """The git dir of the repository at `worktree` and, for a linked worktree, its
    common dir; none when `worktree/.git` is neither a directory nor a `gitdir:` file."""
    git = worktree / ".git"
    if git.is_dir() and not git.is_symlink():
        return [git]
    if not git.is_file():
        return []
    try:
        text = git.read_text(errors="replace").strip()
    except OSError:
        return []
    if not text.startswith("gitdir:"):
        return []
    gitdir = (worktree / text.removeprefix("gitdir:").strip()).resolve()
    dirs = [gitdir]
    with contextlib.suppress(OSError):
        dirs.append((gitdir / (gitdir / "commondir").read_text().strip()).resolve())
    return dirs


def _worktrees(root: Path) -> Iterator[Path]:
    """`root` and the directories one level below it (not through links)."""
    yield root
    with contextlib.suppress(OSError), os.scandir(root) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False) and entry.name != ".git":
                yield Path(entry.path)


def _submodules(gitdir: Path) -> list[Path]:
    """The git dirs of the submodules under `gitdir/modules`, at any depth (bounded)."""
    found: list[Path] = []
    stack = [gitdir / "modules"]
    while stack and len(found) < _MAX_SUBMODULES:
        with contextlib.suppress(OSError), os.scandir(stack.pop()) as entries:
            for entry in entries:
                if not entry.is_dir(follow_symlinks=False):
                    continue
                path = Path(entry.path)
                if (path / "config").is_file():
                    found.append(path)
                stack.append(path)
    return found


def _hooks_path(gitdir: Path, worktree: Path) -> list[Path]:
    """The directory `core.hooksPath` names in the repository's config (relative to the
    work tree), when it lies in the work tree: husky's `.husky`, `.githooks`."""
    try:
        text = (gitdir / "config").read_text(errors="replace")
    except OSError:
        return []
    found = []
    for value in _HOOKS_PATH.findall(text):
        path = Path(os.path.expanduser(value.strip().strip('"')))
        found.append(path if path.is_absolute() else worktree / path)
    return found


def repository_paths(root: Path) -> list[Path]:
    """Every path of the repositories at and one level below `root` that the containment
    holds read-only (those that exist and those that do not: the caller sorts them)."""
    paths: list[Path] = []
    for worktree in _worktrees(root):
        for gitdir in _git_dirs(worktree):
            for git in (gitdir, *_submodules(gitdir)):
                paths += [git / "hooks", git / "config", git / "commondir"]
                paths += [git / "config.worktree", git / "info" / "attributes"]
                for linked in _linked(git):
                    paths += [linked / "commondir", linked / "gitdir", linked / "config.worktree"]
            paths += _hooks_path(gitdir, worktree)
    return list(dict.fromkeys(paths))


def _linked(gitdir: Path) -> list[Path]:
    with contextlib.suppress(OSError), os.scandir(gitdir / "worktrees") as entries:
        return [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)]
    return []


def prepare(root: Path) -> None:
    """Make what a read-only mount must hold in the repositories at and below `root`:
    an empty `hooks` directory and a `commondir` of `.` (git's "this directory") where
    they are missing, so that neither can be made by the agent to lead git elsewhere."""
    for worktree in _worktrees(root):
        for gitdir in _git_dirs(worktree):
            for git in (gitdir, *_submodules(gitdir)):
                if not (git / "config").is_file():
                    continue
                with contextlib.suppress(OSError):
                    (git / "hooks").mkdir(exist_ok=True)
                if not os.path.lexists(git / "commondir"):
                    with contextlib.suppress(OSError):
                        (git / "commondir").write_text(".\n")
