"""`workspace_only`: keep path-taking tools inside the workspaces.

A target is resolved at call time the way the harness will act on it (`..` cleaned
textually, and `..` after symlinks as `chdir` does): both must be inside a workspace.
Paths that name process state (`/proc`, `/dev/fd`) or that the harness would read
differently (relative, backslashes, URIs with a host) are denied. For `run_command` the
paths its `CommandLine` names are checked too: every argument and redirection target
that is absolute, starts with `~` or holds a `..` component (`_command_paths`).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Mapping
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from ..errors import PolicyError
from ..harness.catalog import TOOLS
from ._rules import Decision, Policy
from ._shell import parse_command_line

# From the tool catalogue: which argument of each built-in tool names a file-system
# location, whether it may be left out (no images; an inline `Script`), whether it is a
# list (every element must be inside), and whether it can be a `file://` URI.
_PATH_ARGUMENTS: Final[Mapping[str, str]] = {
    name: spec.paths[0] for name, spec in TOOLS.items() if spec.paths
}
_OPTIONAL_PATHS: Final = frozenset(name for name, spec in TOOLS.items() if spec.path_optional)
_PATH_LISTS: Final = frozenset(name for name, spec in TOOLS.items() if spec.path_list)
_NO_URIS: Final = frozenset(name for name, spec in TOOLS.items() if spec.paths and not spec.uris)

_ABSENT: Final = object()

_MAX_SYMLINKS: Final = 40

_PROCESS_PATHS: Final = frozenset({"/proc", "/dev/fd", "/dev/stdin", "/dev/stdout", "/dev/stderr"})
_PROCESS_PREFIXES: Final = ("/proc/", "/dev/fd/")
"""Paths naming the state of the process that opens them (`/proc/self`, its cwd, its file
descriptors): the SDK would resolve them in its own process, the harness in its."""


def _process_path(path: str) -> bool:
    return path in _PROCESS_PATHS or path.startswith(_PROCESS_PREFIXES)


def _clean(path: str) -> str:
    """`path` with `.`, `..` and repeated slashes removed textually, as the harness does
    before it opens a path (Go's `filepath.Clean`): `..` drops the name before it even
    when that name is a symlink, so `/ws/docs/../..` is `/` whatever `docs` points to."""
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part and part != ".":
            parts.append(part)
    return "/" + "/".join(parts)


def _realpath(path: str) -> str:
    """Resolve absolute `path` like the kernel would: `..` after symlinks, missing leaves
    lexically.

    Missing components are treated as plain directories (where a write would land);
    any other lookup failure (loop, permission, too long) raises OSError, and so does a
    symlink under `/proc` or `/dev/fd`, whose target depends on the process following it.
    """
    resolved = "/"
    missing: list[str] = []
    pending = path.split("/")
    pending.reverse()
    links = 0
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if missing:
                missing.pop()
            else:
                resolved = os.path.dirname(resolved)
            continue
        if missing:
            missing.append(part)
            continue
        candidate = resolved.rstrip("/") + "/" + part
        try:
            mode = os.lstat(candidate).st_mode
        except (FileNotFoundError, NotADirectoryError):
            missing.append(part)
            continue
        if stat.S_ISLNK(mode):
            links += 1
            if links > _MAX_SYMLINKS:
                raise OSError(errno.ELOOP, "too many levels of symbolic links", path)
            if _process_path(candidate):
                raise OSError(errno.EACCES, "a process-relative link", candidate)
            target = os.readlink(candidate)
            if target.startswith("/"):
                resolved = "/"
            pending.extend(reversed(target.split("/")))
            continue
        resolved = candidate
    if missing:
        return resolved.rstrip("/") + "/" + "/".join(missing)
    return resolved


def _targets(raw: object, uris: bool = True) -> tuple[str, ...] | None:
    """Where a path argument can take the harness, or None when that cannot be known.

    The harness cleans `..` textually before it opens most paths, but `run_command`
    changes to `Cwd` as given, where the kernel applies `..` after symlinks: both
    resolutions are returned when they can differ. A relative path is None: the harness
    refuses it, except as `Cwd`, which it resolves against its own working directory (not
    the SDK's). So is a path with a backslash, which the harness reads as a separator, and
    a URI with a host: the harness opens `file://localhost/x` as the UNC path
    `\\\\localhost\\x`.
    """
    if not isinstance(raw, str) or not raw:
        return None
    if uris and raw[:5].lower() == "file:":
        uri = urlsplit(raw)
        if uri.netloc or uri.query or uri.fragment:
            return None
        raw = unquote(uri.path)
    if not raw.startswith("/") or "\x00" in raw or "\\" in raw:
        return None
    try:
        if ".." not in raw:  # cleaning only drops `.` and `//`, which resolve alike
            found: tuple[str, ...] = (_realpath(raw),)
        else:
            found = (_realpath(_clean(raw)), _realpath(raw))
    except (OSError, ValueError):
        return None
    return None if any(map(_process_path, found)) else found


class _OutsideWorkspaces:
    """Predicate of `workspace_only`: true (deny) unless every resolution of the path
    (`_targets`) lies inside a root.

    A missing argument denies, unless `optional` (the tool's schema does not require it);
    a `file://` URI is decoded only if `uris` (the tool reads it as one).
    """

    __slots__ = ("key", "optional", "roots", "uris")

    def __init__(
        self, key: str, roots: tuple[str, ...], optional: bool = False, uris: bool = True
    ) -> None:
        self.key = key
        self.roots = roots
        self.optional = optional
        self.uris = uris

    def __call__(self, args: Mapping[str, Any]) -> bool:
        raw = args.get(self.key, _ABSENT)
        if raw is _ABSENT:
            return not self.optional
        return self.outside(raw)

    def outside(self, raw: object) -> bool:
        targets = _targets(raw, self.uris)
        return targets is None or not all(map(self.inside, targets))

    def inside(self, target: str) -> bool:
        for root in self.roots:
            if target == root or target.startswith(root if root == "/" else root + "/"):
                return True
        return False

    def __repr__(self) -> str:
        return f"{self.key} outside {', '.join(self.roots)}"


class _AnyOutsideWorkspaces(_OutsideWorkspaces):
    """For a list-of-paths argument: true (deny) if it is not a list or any element is
    not a usable path inside a root. An empty list names no path, so it is allowed."""

    __slots__ = ()

    def __call__(self, args: Mapping[str, Any]) -> bool:
        raw = args.get(self.key, _ABSENT)
        if raw is _ABSENT:
            return not self.optional
        if not isinstance(raw, list):
            return True
        return any(self.outside(item) for item in raw)

    def __repr__(self) -> str:
        return f"any of {self.key} outside {', '.join(self.roots)}"


_DEVICES: Final = frozenset(
    {"/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/tty"}
    | {"/dev/stdin", "/dev/stdout", "/dev/stderr"}
)
"""Devices a command may name wherever the workspace is: they hold no files."""
_EXPANDING: Final = ("$", "`", "*", "?", "[", "{")


def _path_of(word: str, literal: bool) -> str:
    """The part of a word that names a path the guard checks, or "": an absolute, `~` or
    `..` path (after `--option=`), up to the first expansion in a word that is not a
    literal (`/etc/pass*` checks `/etc`; `$HOME/x` cannot be checked)."""
    if word.startswith("-"):
        word = word.partition("=")[2]
    if not literal:
        cut = min((i for i in map(word.find, _EXPANDING) if i >= 0), default=len(word))
        if cut < len(word):  # keep the directory before the expansion: "/etc/pass*" → "/etc"
            head = word[:cut]
            word = head.rpartition("/")[0] or head[:1]
    if word.startswith(("/", "~")) or ".." in word.split("/"):
        return word
    return ""


def _command_paths(line: str, cwd: object) -> list[str]:
    """The absolute paths `line` names (arguments and redirection targets, see
    `_path_of`): `~` expanded, relative ones joined to `cwd` ("" when there is none)."""
    parsed = parse_command_line(line)
    found = [
        _path_of(word, i not in cmd.dynamic)
        for cmd in parsed.commands
        for i, word in enumerate(cmd.words)
        if i
    ]
    found += [
        _path_of(t, i not in parsed.dynamic_redirects) for i, t in enumerate(parsed.redirects)
    ]
    paths = []
    for path in found:
        if not path or path in _DEVICES:
            continue
        if path.startswith("~"):
            path = os.path.expanduser(path)
        if not path.startswith("/"):
            path = f"{cwd}/{path}" if isinstance(cwd, str) and cwd.startswith("/") else ""
        paths.append(path)
    return paths


class _CommandOutsideWorkspaces(_OutsideWorkspaces):
    """For `run_command`: true (deny) if `Cwd` is outside, or a path the `CommandLine`
    names (`_command_paths`) is; a relative `..` path without a usable `Cwd` denies."""

    __slots__ = ()

    def __call__(self, args: Mapping[str, Any]) -> bool:
        if super().__call__(args):
            return True
        line = args.get("CommandLine")
        if not isinstance(line, str):
            return False
        return any(self.outside(path) for path in _command_paths(line, args.get(self.key)))

    def __repr__(self) -> str:
        return f"{self.key} or a path in CommandLine outside {', '.join(self.roots)}"


def _path_guard(tool: str, key: str, roots: tuple[str, ...]) -> _OutsideWorkspaces:
    kind = _AnyOutsideWorkspaces if tool in _PATH_LISTS else _OutsideWorkspaces
    if tool == "run_command":
        kind = _CommandOutsideWorkspaces
    return kind(key, roots, optional=tool in _OPTIONAL_PATHS, uris=tool not in _NO_URIS)


def is_workspace_check(predicate: object) -> bool:
    """Whether `predicate` is one of the path checks `workspace_only` gives its policies.
    Public so that a display of a policy set (the CLI's policy table) can show
    `workspace_only`'s policies, one per path-taking tool, as the one rule they are."""
    return isinstance(predicate, _OutsideWorkspaces)


def workspace_only(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    name: str = "workspace_only",
) -> list[Policy]:
    """Deny path-taking tools whose target resolves outside every workspace in `paths`
    (one path, or a list of them: as a policy file's `workspace_only` key takes them).

    Workspaces are resolved now (relative ones against the working directory). A
    target is resolved at call time, twice: with `..` cleaned textually first (as the
    harness opens it) and with symlinks followed first (as `chdir` does); both must be
    inside. `file://` URIs are decoded; a relative path, a path under `/proc` or
    `/dev/fd`, and an unusable or missing path argument are denied. `generate_image`'s
    `ImagePaths` is a list: every element must be inside. It and `run_workflow`'s
    `ScriptPath` are optional in their tools' schemas, so leaving them out is allowed.
    """
    if isinstance(paths, bytes):
        raise PolicyError(f"workspace_only takes str paths, not the bytes {paths!r}")
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    roots: list[str] = []
    for path in paths:
        raw = os.fspath(path)
        if not isinstance(raw, str) or not raw:
            raise PolicyError(f"workspace_only: invalid workspace path {path!r}")
        try:
            root = _realpath(raw if raw.startswith("/") else os.getcwd() + "/" + raw)
        except (OSError, ValueError) as exc:
            raise PolicyError(f"workspace_only: cannot resolve workspace {raw!r}: {exc}") from exc
        if _process_path(root):
            raise PolicyError(
                f"workspace_only: workspace {raw!r} is process state ({root}), not files"
            )
        roots.append(root)
    if not roots:
        raise PolicyError("workspace_only needs at least one workspace path")
    shown = ", ".join(roots)
    return [
        Policy(
            tool,
            Decision.DENY,
            predicate=_path_guard(tool, key, tuple(roots)),
            name=name,
            reason=f"Denied by policy '{name}': {tool} may only use paths "
            f"inside the workspace ({shown}); "
            + (
                f"a path in {key} is outside it, or {key} is not a list of usable paths."
                if tool in _PATH_LISTS
                else f"{key} is outside it or not a usable absolute path."
            )
            + (
                " So is every path the command line names (arguments and redirections)."
                if tool == "run_command"
                else ""
            ),
        )
        for tool, key in _PATH_ARGUMENTS.items()
    ]
