"""Declarative, explainable, fail-closed tool-call policies.

A `Policy` says what happens to calls of one tool pattern: APPROVE, DENY or ASK_USER,
optionally only when a predicate holds. `enforce()` validates a list of policies and
compiles it into a `PolicyEnforcer`, a `Hook` whose `pre_tool_call` decides every call.

Evaluation walks nine buckets, highest first (specific / `server/*` / `*`, each as
deny / ask / allow); inside a bucket registration order holds, and the first policy
whose pattern matches and whose predicate holds decides. No match allows. The rules
are indexed by tool name and server at `enforce()` time, so a decision only looks at
the rules that can match the call: its cost does not grow with unrelated rules.

Fail-safe rule: a predicate that raises makes DENY and ASK_USER policies deny and an
APPROVE policy not match, so an error is never more permissive than either value the
predicate could have returned. An ASK_USER handler that raises or times out denies.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import difflib
import enum
import errno
import fnmatch
import gc
import inspect
import logging
import math
import os
import re
import stat
import time
import tomllib
import typing
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, NamedTuple, TypeAlias, overload
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel

from .errors import PolicyError
from .harness.catalog import INTERNAL_NAMES, TOOLS, Governance
from .hooks import Hook, _cancelling
from .interactive import confirm_in_terminal
from .types import HookResult, McpHttpServer, McpStdioServer, ToolCall

__all__ = [
    "AskHandler",
    "Decision",
    "Policy",
    "PolicyDecision",
    "PolicyEnforcer",
    "Predicate",
    "TraceEntry",
    "allow",
    "allow_all",
    "allow_mcp",
    "ask_user",
    "ask_user_mcp",
    "confirm_run_command",
    "deny",
    "deny_all",
    "deny_mcp",
    "enforce",
    "load",
    "workspace_only",
]

logger = logging.getLogger("antigravity_sdk.policy")


class Decision(enum.Enum):
    """What a matching policy does with a tool call."""

    APPROVE = "approve"
    DENY = "deny"
    ASK_USER = "ask_user"


Predicate: TypeAlias = Callable[[Any], bool | Awaitable[bool]]
"""Receives the call's args dict (or a pydantic model, or the `ToolCall`; see `enforce`)."""

AskHandler: TypeAlias = Callable[[ToolCall], bool | Awaitable[bool]]
"""Asks a human about a call; only `True` approves."""

McpServerConfig: TypeAlias = McpStdioServer | McpHttpServer
Mode: TypeAlias = Literal["enforce", "shadow"]
PolicyLike: TypeAlias = "Policy | Iterable[PolicyLike]"


@dataclass(frozen=True, slots=True)
class Policy:
    """One rule: calls matching `tool` get `decision` when `predicate` holds (or always).

    `tool` is `"name"`, `"server/name"`, `"server/*"` or `"*"`. `handler` answers
    ASK_USER policies, within `timeout` seconds when set. `name` labels the policy in
    messages and traces; `reason` replaces the message the model reads on a deny.
    """

    tool: str
    decision: Decision
    predicate: Predicate | None = None
    handler: AskHandler | None = None
    name: str = ""
    reason: str = ""
    timeout: float | None = None

    def when(self, predicate: Predicate) -> Policy:
        """A copy that only applies when `predicate` holds."""
        return dataclasses.replace(self, predicate=predicate)

    def with_name(self, name: str) -> Policy:
        """A copy labelled `name`."""
        return dataclasses.replace(self, name=name)

    @property
    def label(self) -> str:
        """How messages and traces refer to this policy: its name, else its tool."""
        return self.name or self.tool


# -- builders ---------------------------------------------------------------------------


def _mcp_policies(
    decision: Decision,
    server: str | McpServerConfig,
    tools: Sequence[str] | None,
    **fields: Any,
) -> list[Policy]:
    server_name = server if isinstance(server, str) else server.name
    if isinstance(tools, str):
        raise PolicyError(
            f"MCP tools for server {server_name!r} must be a list of names, "
            f"not the string {tools!r} (write [{tools!r}])"
        )
    if tools is None:
        return [Policy(f"{server_name}/*", decision, **fields)]
    return [Policy(f"{server_name}/{tool}", decision, **fields) for tool in tools]


def _build(
    decision: Decision,
    tool: str | McpServerConfig,
    mcp_tools: Sequence[str] | None,
    **fields: Any,
) -> Policy | list[Policy]:
    if isinstance(tool, str):
        if mcp_tools is not None:
            raise PolicyError(f"mcp_tools is only for MCP server configs, not the tool {tool!r}")
        return Policy(tool, decision, **fields)
    if isinstance(tool, McpStdioServer | McpHttpServer):
        return _mcp_policies(decision, tool, mcp_tools, **fields)
    raise PolicyError(f"tool must be a str or an MCP server config, got {type(tool).__name__}")


@overload
def allow(tool: str, *, when: Predicate | None = None, name: str = "") -> Policy: ...
@overload
def allow(
    tool: McpServerConfig,
    *,
    mcp_tools: Sequence[str] | None = None,
    when: Predicate | None = None,
    name: str = "",
) -> list[Policy]: ...
def allow(
    tool: str | McpServerConfig,
    *,
    mcp_tools: Sequence[str] | None = None,
    when: Predicate | None = None,
    name: str = "",
) -> Policy | list[Policy]:
    """Approve calls of `tool` (when `when` holds)."""
    return _build(Decision.APPROVE, tool, mcp_tools, predicate=when, name=name)


@overload
def deny(
    tool: str, *, when: Predicate | None = None, name: str = "", reason: str = ""
) -> Policy: ...
@overload
def deny(
    tool: McpServerConfig,
    *,
    mcp_tools: Sequence[str] | None = None,
    when: Predicate | None = None,
    name: str = "",
    reason: str = "",
) -> list[Policy]: ...
def deny(
    tool: str | McpServerConfig,
    *,
    mcp_tools: Sequence[str] | None = None,
    when: Predicate | None = None,
    name: str = "",
    reason: str = "",
) -> Policy | list[Policy]:
    """Deny calls of `tool` (when `when` holds); `reason` is what the model reads."""
    return _build(Decision.DENY, tool, mcp_tools, predicate=when, name=name, reason=reason)


@overload
def ask_user(
    tool: str,
    handler: AskHandler | None = None,
    *,
    when: Predicate | None = None,
    name: str = "",
    reason: str = "",
    timeout: float | None = None,
) -> Policy: ...
@overload
def ask_user(
    tool: McpServerConfig,
    handler: AskHandler | None = None,
    *,
    mcp_tools: Sequence[str] | None = None,
    when: Predicate | None = None,
    name: str = "",
    reason: str = "",
    timeout: float | None = None,
) -> list[Policy]: ...
def ask_user(
    tool: str | McpServerConfig,
    handler: AskHandler | None = None,
    *,
    mcp_tools: Sequence[str] | None = None,
    when: Predicate | None = None,
    name: str = "",
    reason: str = "",
    timeout: float | None = None,
) -> Policy | list[Policy]:
    """Let `handler` decide calls of `tool`; refusing, raising or timing out denies."""
    return _build(
        Decision.ASK_USER,
        tool,
        mcp_tools,
        predicate=when,
        handler=handler,
        name=name,
        reason=reason,
        timeout=timeout,
    )


def allow_all() -> Policy:
    """Approve every call: the usual catch-all (`"*"`, lowest bucket)."""
    return Policy("*", Decision.APPROVE, name="allow_all")


def deny_all() -> Policy:
    """Deny every call not approved by a more specific policy."""
    return Policy("*", Decision.DENY, name="deny_all")


def allow_mcp(
    server: str | McpServerConfig,
    tools: Sequence[str] | None = None,
    *,
    when: Predicate | None = None,
    name: str = "",
) -> list[Policy]:
    """Approve `tools` of an MCP server, or all of them (`server/*`) when None."""
    return _mcp_policies(Decision.APPROVE, server, tools, predicate=when, name=name)


def deny_mcp(
    server: str | McpServerConfig,
    tools: Sequence[str] | None = None,
    *,
    when: Predicate | None = None,
    name: str = "",
    reason: str = "",
) -> list[Policy]:
    """Deny `tools` of an MCP server, or all of them (`server/*`) when None."""
    return _mcp_policies(Decision.DENY, server, tools, predicate=when, name=name, reason=reason)


def ask_user_mcp(
    server: str | McpServerConfig,
    tools: Sequence[str] | None = None,
    handler: AskHandler | None = None,
    *,
    when: Predicate | None = None,
    name: str = "",
    reason: str = "",
    timeout: float | None = None,
) -> list[Policy]:
    """Ask `handler` about `tools` of an MCP server, or all of them when None."""
    return _mcp_policies(
        Decision.ASK_USER,
        server,
        tools,
        predicate=when,
        handler=handler,
        name=name,
        reason=reason,
        timeout=timeout,
    )


def confirm_run_command(handler: AskHandler | None = None) -> list[Policy]:
    """The default set: ask `handler` before shell commands (deny them without one)."""
    if handler is not None:
        guard = ask_user("run_command", handler, name="confirm_run_command")
    else:
        guard = deny(
            "run_command",
            name="confirm_run_command",
            reason="run_command is denied by policy 'confirm_run_command': "
            "no confirmation handler is configured for shell commands.",
        )
    return [guard, allow_all()]


# -- workspace_only ----------------------------------------------------------------------

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


def _path_guard(tool: str, key: str, roots: tuple[str, ...]) -> _OutsideWorkspaces:
    kind = _AnyOutsideWorkspaces if tool in _PATH_LISTS else _OutsideWorkspaces
    return kind(key, roots, optional=tool in _OPTIONAL_PATHS, uris=tool not in _NO_URIS)


def workspace_only(
    paths: Iterable[str | os.PathLike[str]], *, name: str = "workspace_only"
) -> list[Policy]:
    """Deny path-taking tools whose target resolves outside every workspace in `paths`.

    Workspaces are resolved now (relative ones against the working directory). A
    target is resolved at call time, twice: with `..` cleaned textually first (as the
    harness opens it) and with symlinks followed first (as `chdir` does); both must be
    inside. `file://` URIs are decoded; a relative path, a path under `/proc` or
    `/dev/fd`, and an unusable or missing path argument are denied. `generate_image`'s
    `ImagePaths` is a list: every element must be inside. It and `run_workflow`'s
    `ScriptPath` are optional in their tools' schemas, so leaving them out is allowed.
    """
    if isinstance(paths, str | bytes | os.PathLike):
        raise PolicyError(f"workspace_only takes a list of paths, not {paths!r}")
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
            ),
        )
        for tool, key in _PATH_ARGUMENTS.items()
    ]


# -- compilation --------------------------------------------------------------------------

_SERVER = re.compile(r"[A-Za-z0-9_-]+")
_DOTTED = re.compile(r"[A-Za-z_][\w.]*")
_BUCKETS: Final = (
    "specific deny",
    "specific ask",
    "specific allow",
    "server/* deny",
    "server/* ask",
    "server/* allow",
    "* deny",
    "* ask",
    "* allow",
)
_ORDER: Final = {Decision.DENY: 0, Decision.ASK_USER: 1, Decision.APPROVE: 2}

# How a predicate receives the call: nothing to call, the args dict, the ToolCall, a model.
_NONE, _ARGS, _CALL, _MODEL = 0, 1, 2, 3


def _parse_pattern(tool: object) -> tuple[int, str | None]:
    """(scope, server) of a tool pattern: scope 0 specific, 1 `server/*`, 2 `*`."""
    if not isinstance(tool, str):
        raise ValueError(f"the tool pattern must be a str, got {type(tool).__name__}")
    if tool == "*":
        return 2, None
    server, slash, name = tool.partition("/")
    if not slash:
        if not tool or "*" in tool or tool != tool.strip():
            raise ValueError(
                f"malformed tool pattern {tool!r} (wildcards are only '*', 'server/*')"
            )
        return 0, None
    if not _SERVER.fullmatch(server):
        raise ValueError(f"malformed tool pattern {tool!r}: bad server name {server!r}")
    if name == "*":
        return 1, server
    if not name or "*" in name or "/" in name or name != name.strip():
        raise ValueError(f"malformed tool pattern {tool!r}: expected 'server/tool' or 'server/*'")
    return 0, server


def _bucket_index(policy: Policy) -> int:
    """The bucket (0-8) of a valid policy."""
    scope, _ = _parse_pattern(policy.tool)
    return scope * 3 + _ORDER[policy.decision]


def _predicate_kind(fn: Callable[..., Any]) -> tuple[int, type[BaseModel] | None]:
    """Decide once, from the first parameter's annotation, what the predicate receives."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins without a signature get the args dict
        return _ARGS, None
    params = list(signature.parameters.values())
    try:
        signature.bind(None)
    except TypeError:
        raise ValueError("the predicate must accept exactly one positional argument") from None
    first = params[0]
    if first.kind is first.VAR_POSITIONAL:
        return _ARGS, None
    annotation: Any = first.annotation
    # Only a string naming a class can turn out to be ToolCall or a model; resolving is slow.
    if isinstance(annotation, str) and _DOTTED.fullmatch(annotation):
        target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else type(fn).__call__
        with contextlib.suppress(Exception):  # unresolvable: keep the raw string (args dict)
            annotation = typing.get_type_hints(target).get(first.name, annotation)
    if isinstance(annotation, type) and issubclass(annotation, ToolCall):
        return _CALL, None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _MODEL, annotation
    return _ARGS, None


def _is_async(fn: Callable[..., Any]) -> bool:
    call = getattr(fn, "__call__", None)  # noqa: B004 - callable objects with async __call__
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)


_RULE_TOOLS: Final = frozenset(
    name for name, spec in TOOLS.items() if spec.governance is Governance.ASKED
)
"""Built-in tools a rule can name: the harness asks before each of them runs."""


def _unmatchable(tool: str, host_tools: frozenset[str]) -> str:
    """Why a rule naming the bare tool `tool` could never match a call, or ""."""
    if tool in host_tools:
        return ""
    spec = TOOLS.get(tool)
    if spec is not None:
        switch = f"BuiltinTool.{spec.capability.name}" if spec.capability else "its capability"
        return (
            f"the harness never asks before {tool!r} runs, so a rule on it can never fire; "
            f"switch it off instead (leave {switch} out of CapabilitiesConfig.enabled_tools)"
        )
    public = INTERNAL_NAMES.get(tool)
    if public is not None:
        return (
            f"{tool!r} is the harness's internal name; rules use the name the model calls "
            f"the tool by: {public!r}"
        )
    names = sorted(_RULE_TOOLS | host_tools)
    same = [name for name in names if name.casefold() == tool.casefold()]
    close = same or difflib.get_close_matches(tool, names, n=1, cutoff=0.75)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    where = "a built-in tool" + (" or one of the agent's host-side tools" if host_tools else "")
    return f"no tool is called {tool!r}: it is not {where}, so the rule could never match{hint}"


def _is_duration(value: object) -> bool:
    """A usable timeout: a positive, finite number of seconds (not a bool, not NaN)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _invalid(index: int, policy: Policy, problem: str) -> PolicyError:
    return PolicyError(f"policy #{index} ({policy.label!r}): {problem}")


class _Rule:
    """A validated policy, with everything the hot path needs precomputed."""

    __slots__ = (
        "_denied",
        "bucket",
        "fn",
        "handler",
        "handler_async",
        "index",
        "is_async",
        "kind",
        "model",
        "policy",
        "result",
    )

    def __init__(
        self,
        index: int,
        policy: Policy,
        mcp_servers: frozenset[str] | None,
        host_tools: frozenset[str],
    ) -> None:
        # Kept lean: enforce() runs this once per rule, and rule sets can be large.
        decision = policy.decision
        if not isinstance(decision, Decision):
            raise _invalid(index, policy, f"decision must be a Decision, got {decision!r}")
        try:
            scope, server = _parse_pattern(policy.tool)
        except ValueError as exc:
            raise _invalid(index, policy, str(exc)) from None
        if scope == 0 and server is None and policy.tool not in _RULE_TOOLS:
            problem = _unmatchable(policy.tool, host_tools)
            if problem:
                raise _invalid(index, policy, problem)
        if server is not None:
            if mcp_servers is None:
                raise _invalid(
                    index,
                    policy,
                    f"MCP pattern {policy.tool!r} needs the configured servers: "
                    "pass enforce(..., mcp_servers=[...])",
                )
            if server not in mcp_servers:
                raise _invalid(
                    index,
                    policy,
                    f"server {server!r} is not among mcp_servers "
                    f"({', '.join(sorted(mcp_servers)) or 'none'})",
                )
        handler = policy.handler
        if decision is Decision.ASK_USER:
            if handler is None:
                raise _invalid(index, policy, "an ASK_USER policy needs a handler")
            if not callable(handler):
                raise _invalid(index, policy, "the handler is not callable")
        elif handler is not None:
            raise _invalid(index, policy, "a handler only makes sense on an ASK_USER policy")
        timeout = policy.timeout
        if timeout is not None and not _is_duration(timeout):
            raise _invalid(
                index, policy, f"timeout must be a positive, finite number, got {timeout!r}"
            )
        self.index = index
        self.policy = policy
        self.bucket = scope * 3 + _ORDER[decision]
        self.kind, self.model, self.is_async = _NONE, None, False
        self.fn: Callable[[Any], Any] | None = policy.predicate
        if self.fn is not None:
            if not callable(self.fn):
                raise _invalid(index, policy, "the predicate is not callable")
            try:
                self.kind, self.model = _predicate_kind(self.fn)
            except ValueError as exc:
                raise _invalid(index, policy, str(exc)) from None
            self.is_async = _is_async(self.fn)
        self.handler = handler
        self.handler_async = handler is not None and _is_async(handler)
        # Only APPROVE returns straight from the hot loop; DENY and ASK_USER log or ask.
        self.result = HookResult.ALLOWED if decision is Decision.APPROVE else None
        self._denied: HookResult | None = None

    @property
    def denied(self) -> HookResult:
        """The deny (or user-refused) result, built on first use: most rules never deny."""
        if self._denied is None:
            policy = self.policy
            if policy.decision is Decision.DENY:
                message = policy.reason or f"Denied by policy '{policy.label}'."
            else:
                message = policy.reason or f"Denied by policy '{policy.label}': the user refused."
            self._denied = HookResult.denied(message)
        return self._denied

    def apply(self, call: ToolCall) -> Any:
        """Call the predicate (model validation included): its raw return value."""
        fn, kind = self.fn, self.kind
        assert fn is not None
        if kind == _ARGS:
            return fn(call.args)
        if kind == _CALL:
            return fn(call)
        assert self.model is not None
        return fn(self.model.model_validate(call.args))

    async def test(self, call: ToolCall, bound: float | None = None) -> bool:
        """The predicate's verdict; exceptions propagate (the caller applies fail-safe).

        With a `bound` (seconds) the verdict must come within it, else TimeoutError; a
        sync predicate then runs in a worker thread, so that a blocking one cannot stall
        the event loop (and with it the deadline). Without one it runs inline: the fast
        path.
        """
        if bound is not None:
            return await self._bounded(call, bound)
        value = self.apply(call)
        if self.is_async:
            value = await value
        if value.__class__ is not bool:
            value = await _truth(value)
        return bool(value)

    async def _bounded(self, call: ToolCall, bound: float) -> bool:
        loop = asyncio.get_running_loop()
        ends = loop.time() + bound
        deadline = asyncio.timeout_at(ends)
        try:
            async with deadline:
                if self.is_async:
                    value = await self.apply(call)
                else:
                    value = await asyncio.to_thread(self.apply, call)
                if value.__class__ is not bool:
                    value = await _truth(value)
        except TimeoutError:
            if deadline.expired():
                raise TimeoutError(f"no verdict within {bound}s") from None
            raise  # the predicate's own TimeoutError
        except asyncio.CancelledError:
            if _cancelling():  # e.g. the hook timeout fired first: say what was running
                logger.warning(
                    "policy %r: cancelled while its predicate ran on %s",
                    self.policy.label,
                    call.qualified_name,
                )
            raise
        # Late, even if the timer never got to fire: the predicate swallowed the
        # cancellation, or held the loop (or the GIL) past the deadline.
        if deadline.expired() or loop.time() > ends:
            raise TimeoutError(f"no verdict within {bound}s (its late answer is ignored)")
        return bool(value)


async def _truth(value: object) -> bool:
    if inspect.isawaitable(value):
        value = await value
    return bool(value)


def _describe(exc: BaseException) -> str:
    """`Type: first line` of `exc`, at most 200 characters: deny messages the model reads.

    Not `hooks._describe`, which keeps the whole text (hook failures go to logs)."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    if len(first) > 200:
        first = first[:197] + "..."
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _predicate_failed(rule: _Rule, call: ToolCall, exc: BaseException) -> HookResult | None:
    """Fail-safe: a broken predicate denies for DENY/ASK_USER, does not match for APPROVE."""
    label, what = rule.policy.label, _describe(exc)
    if rule.policy.decision is Decision.APPROVE:
        logger.warning(
            "policy %r: predicate failed on %s (%s); the policy does not match",
            label,
            call.qualified_name,
            what,
        )
        return None
    logger.error(
        "policy %r: predicate failed on %s (%s); denying", label, call.qualified_name, what
    )
    return HookResult.denied(f"Denied by policy '{label}': its condition failed ({what}).")


async def _answer(rule: _Rule, call: ToolCall) -> object:
    handler = rule.handler
    assert handler is not None
    if rule.handler_async:
        answer: object = await handler(call)  # type: ignore[misc]
    else:  # a sync handler (e.g. input()) must never block the event loop
        answer = await asyncio.to_thread(handler, call)
    if inspect.isawaitable(answer):
        answer = await answer
    return answer


async def _ask(rule: _Rule, call: ToolCall) -> HookResult:
    """Run an ASK_USER handler; only a `True` answer, given in time, allows."""
    label = rule.policy.label
    timeout = rule.policy.timeout
    deadline = None if timeout is None else asyncio.timeout(timeout)
    try:
        if deadline is None:
            answer = await _answer(rule, call)
        else:
            async with deadline:
                answer = await _answer(rule, call)
            if deadline.expired():  # it swallowed the cancellation: a late answer is none
                raise TimeoutError
    except (Exception, asyncio.CancelledError) as exc:
        if not isinstance(exc, Exception) and _cancelling():
            raise
        if deadline is not None and deadline.expired():
            logger.error("policy %r: handler timed out after %ss; denying", label, timeout)
            return HookResult.denied(
                f"Denied by policy '{label}': no answer from the user within {timeout}s."
            )
        logger.error("policy %r: handler failed (%s); denying", label, _describe(exc))
        return HookResult.denied(
            f"Denied by policy '{label}': asking the user failed ({_describe(exc)})."
        )
    if answer is True:
        logger.info("policy %r: the user approved %s", label, call.qualified_name)
        return HookResult.ALLOWED
    if answer is not False:
        logger.error(
            "policy %r: handler returned %s, not a bool; denying", label, type(answer).__name__
        )
        return HookResult.denied(
            f"Denied by policy '{label}': its handler returned {type(answer).__name__}, not a bool."
        )
    logger.info("policy %r: the user refused %s", label, call.qualified_name)
    return rule.denied


def _flatten(policies: PolicyLike) -> list[Policy]:
    flat: list[Policy] = []

    def walk(item: object) -> None:
        if isinstance(item, Policy):
            flat.append(item)
        elif isinstance(item, Iterable) and not isinstance(item, str | bytes | Mapping):
            for sub in item:
                walk(sub)
        else:
            raise PolicyError(
                f"policy #{len(flat)} is a {type(item).__name__} ({item!r}), not a Policy"
            )

    walk(policies)
    return flat


def _tool_names(tools: Iterable[str]) -> frozenset[str]:
    if isinstance(tools, str):
        raise PolicyError(f"tools takes a list of tool names, not the string {tools!r}")
    names = frozenset(tools)
    bad = [name for name in names if not isinstance(name, str) or not name]
    if bad:
        raise PolicyError(f"tools takes tool names (non-empty strings), got {bad[0]!r}")
    return names


def _server_names(servers: Iterable[McpServerConfig | str] | None) -> frozenset[str] | None:
    if servers is None:
        return None
    if isinstance(servers, str):
        raise PolicyError(f"mcp_servers must be a list, not the string {servers!r}")
    names = set()
    for server in servers:
        name = server if isinstance(server, str) else getattr(server, "name", None)
        if not isinstance(name, str):
            raise PolicyError(f"mcp_servers: expected a server name or config, got {server!r}")
        names.add(name)
    return frozenset(names)


# -- the enforcer ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """One rule `evaluate()` considered: what its predicate (and handler) said, and how long."""

    policy: Policy
    bucket: int
    matched: bool
    outcome: str
    elapsed_ns: int


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    """Why a call is allowed or denied: the deciding policy, its bucket, and the trace.

    `decision` and `policy` are None when no policy matched (the call is allowed).
    """

    tool: str
    allow: bool
    decision: Decision | None
    bucket: int | None
    policy: Policy | None
    message: str
    trace: list[TraceEntry]
    elapsed_ns: int = 0

    @property
    def bucket_name(self) -> str:
        """The deciding bucket in words, e.g. "specific deny"."""
        return _BUCKETS[self.bucket] if self.bucket is not None else "no match"

    def __str__(self) -> str:
        verdict = "ALLOWED" if self.allow else "DENIED"
        if self.message == _NOT_ASKED:
            verdict = "ASKS THE USER"
        if self.policy is None:
            head = f"{self.tool}: {verdict} (no policy matched; the default allows)"
        else:
            assert self.decision is not None
            head = (
                f"{self.tool}: {verdict} by policy {self.policy.label!r} "
                f"({self.decision.name}, bucket {self.bucket}: {self.bucket_name})"
            )
        lines = [head]
        if self.message:
            lines.append(f"  message: {self.message}")
        lines.append(f"  rules considered: {len(self.trace)} in {self.elapsed_ns / 1000:.1f} µs")
        width = max((len(e.policy.label) for e in self.trace), default=0)
        for i, entry in enumerate(self.trace):
            mark = "  <- decides" if self.policy is not None and i == len(self.trace) - 1 else ""
            lines.append(
                f"    [{entry.bucket} {_BUCKETS[entry.bucket]:<14}] "
                f"{entry.policy.label:<{width}}  {entry.outcome}  "
                f"({entry.elapsed_ns / 1000:.1f} µs){mark}"
            )
        return "\n".join(lines)


_NOT_ASKED: Final = "The user would be asked (the handler was not called)."
_Segments: TypeAlias = tuple[tuple[_Rule, ...], ...]


def _bucket_of(rule: _Rule) -> int:
    return rule.bucket


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Build large rule tables without cyclic-GC passes rescanning every new rule."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class PolicyEnforcer(Hook):
    """A `Hook` deciding every tool call with a validated, indexed policy set.

    In `mode="shadow"` it evaluates and logs what it would deny (or ask about) but
    allows everything: for rolling a policy set out on a live agent.

    `timeout` bounds each predicate (seconds); a predicate without a verdict in time
    counts as raising (the fail-safe rule). With a timeout, sync predicates run in a
    worker thread so that a blocking one cannot stall the event loop; without one they
    run inline, the fast path. An `Agent` passes its `hook_timeout` here.
    """

    def __init__(
        self,
        policies: PolicyLike,
        mcp_servers: Iterable[McpServerConfig | str] | None = None,
        *,
        mode: Mode = "enforce",
        tools: Iterable[str] = (),
        timeout: float | None = None,
    ) -> None:
        if mode not in ("enforce", "shadow"):
            raise PolicyError(f"mode must be 'enforce' or 'shadow', got {mode!r}")
        if timeout is not None and not _is_duration(timeout):
            raise PolicyError(f"timeout must be a positive, finite number, got {timeout!r}")
        flat = _flatten(policies)
        servers = _server_names(mcp_servers)
        host_tools = _tool_names(tools)
        with _gc_paused():
            self._compile([_Rule(i, p, servers, host_tools) for i, p in enumerate(flat)])
        self.policies: tuple[Policy, ...] = tuple(flat)
        self.mode: Mode = mode
        self.timeout = timeout
        self._shadow = mode == "shadow"

    def _compile(self, rules: list[_Rule]) -> None:
        """Index rules by exact name and by server, each list in bucket order."""
        specific: dict[str, list[_Rule]] = {}
        prefix: dict[str, list[_Rule]] = {}
        wildcard: list[_Rule] = []
        for rule in rules:
            if rule.bucket < 3:
                specific.setdefault(rule.policy.tool, []).append(rule)
            elif rule.bucket < 6:
                prefix.setdefault(rule.policy.tool[:-2], []).append(rule)
            else:
                wildcard.append(rule)

        def ordered(group: list[_Rule]) -> tuple[_Rule, ...]:
            # Stable: registration order holds inside a bucket.
            return tuple(group if len(group) == 1 else sorted(group, key=_bucket_of))

        tail = ordered(wildcard)
        tails = {server: ordered(group) + tail for server, group in prefix.items()}
        self._default: _Segments = (tail,)
        self._by_server: dict[str, _Segments] = {s: (t,) for s, t in tails.items()}
        self._by_name: dict[str, _Segments] = {}
        for key, group in specific.items():
            server, slash, _ = key.partition("/")
            self._by_name[key] = (ordered(group), tails.get(server, tail) if slash else tail)

    def __repr__(self) -> str:
        return f"PolicyEnforcer({len(self.policies)} policies, mode={self.mode!r})"

    def _segments(self, name: str) -> _Segments:
        segments = self._by_name.get(name)
        if segments is None:
            if "/" in name:
                return self._by_server.get(name[: name.index("/")], self._default)
            return self._default
        return segments

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        """Decide `tool_call`: the hot path (no trace, precomputed results)."""
        # `tool_call.qualified_name`, inlined: the property costs ~0.2 µs more per call on
        # the decision bench (a third of a whole decision). Keep the two in step.
        server = tool_call.server_name
        name = f"{server}/{tool_call.name}" if server else tool_call.name
        segments = self._by_name.get(name)
        if segments is None:
            segments = self._segments(name)
        for segment in segments:
            for rule in segment:
                kind = rule.kind
                if kind:
                    try:
                        if self.timeout is not None:  # bounded, sync ones off the loop
                            value = await rule.test(tool_call, self.timeout)
                        else:  # `rule.test(tool_call)`, inlined: the fast path
                            fn = rule.fn
                            if kind == _ARGS:
                                value = fn(tool_call.args)  # type: ignore[misc]
                            elif kind == _CALL:
                                value = fn(tool_call)  # type: ignore[misc]
                            else:
                                value = fn(rule.model.model_validate(tool_call.args))  # type: ignore[misc,union-attr]
                            if rule.is_async:
                                value = await value
                            if value.__class__ is not bool:
                                value = await _truth(value)
                    except Exception as exc:
                        failed = _predicate_failed(rule, tool_call, exc)
                        if failed is None:
                            continue
                        return self._shadowed(rule, name, failed) if self._shadow else failed
                    except asyncio.CancelledError as exc:  # free unless raised
                        if _cancelling():
                            raise
                        failed = _predicate_failed(rule, tool_call, exc)
                        if failed is None:
                            continue
                        return self._shadowed(rule, name, failed) if self._shadow else failed
                    if not value:
                        continue
                result = rule.result
                if result is None:
                    return await self._act(rule, tool_call, name)
                return result
        return HookResult.ALLOWED

    async def _act(self, rule: _Rule, call: ToolCall, name: str) -> HookResult:
        """A DENY or ASK_USER policy matched: deny (logged), or ask its handler."""
        if rule.policy.decision is Decision.DENY:
            if self._shadow:
                return self._shadowed(rule, name, rule.denied)
            logger.info("policy %r denied %s", rule.policy.label, name)
            return rule.denied
        if self._shadow:
            logger.warning(
                "shadow mode: %s would ask the user (policy %r); allowing", name, rule.policy.label
            )
            return HookResult.ALLOWED
        return await _ask(rule, call)

    @staticmethod
    def _shadowed(rule: _Rule, name: str, result: HookResult) -> HookResult:
        logger.warning(
            "shadow mode: %s would be denied by policy %r (%s); allowing",
            name,
            rule.policy.label,
            result.message,
        )
        return HookResult.ALLOWED

    async def evaluate(self, tool_call: ToolCall, *, ask: bool = True) -> PolicyDecision:
        """Decide `tool_call` as enforce mode would, recording every rule considered.

        With `ask=False` an ASK_USER policy is reported without calling its handler (the
        decision then does not allow). Shadow mode does not change what this reports.
        """
        name = tool_call.qualified_name
        trace: list[TraceEntry] = []
        clock = time.perf_counter_ns
        start = clock()

        def decide(rule: _Rule, allowed: bool, message: str) -> PolicyDecision:
            return PolicyDecision(
                tool=name,
                allow=allowed,
                decision=rule.policy.decision,
                bucket=rule.bucket,
                policy=rule.policy,
                message=message,
                trace=trace,
                elapsed_ns=clock() - start,
            )

        def note(rule: _Rule, matched: bool, outcome: str, began: int) -> None:
            trace.append(TraceEntry(rule.policy, rule.bucket, matched, outcome, clock() - began))

        for segment in self._segments(name):
            for rule in segment:
                began = clock()
                outcome = "always"
                if rule.kind:
                    try:
                        holds = await rule.test(tool_call, self.timeout)
                    except (Exception, asyncio.CancelledError) as exc:
                        if not isinstance(exc, Exception) and _cancelling():
                            raise
                        failed = _predicate_failed(rule, tool_call, exc)
                        outcome = f"predicate raised {_describe(exc)}"
                        if failed is None:
                            note(rule, False, outcome + " -> no match", began)
                            continue
                        note(rule, True, outcome + " -> deny", began)
                        return decide(rule, False, failed.message)
                    if not holds:
                        note(rule, False, "predicate false", began)
                        continue
                    outcome = "predicate true"
                decision = rule.policy.decision
                if decision is Decision.ASK_USER:
                    if not ask:
                        note(rule, True, outcome + " -> would ask the user", began)
                        return decide(rule, False, _NOT_ASKED)
                    result = await _ask(rule, tool_call)
                    answer = "user approved" if result.allow else "not approved"
                    note(rule, True, f"{outcome} -> {answer}", began)
                    return decide(rule, result.allow, result.message)
                note(rule, True, outcome, began)
                if decision is Decision.DENY:
                    return decide(rule, False, rule.denied.message)
                return decide(rule, True, "")
        return PolicyDecision(
            tool=name,
            allow=True,
            decision=None,
            bucket=None,
            policy=None,
            message="",
            trace=trace,
            elapsed_ns=clock() - start,
        )


def enforce(
    policies: PolicyLike,
    mcp_servers: Iterable[McpServerConfig | str] | None = None,
    *,
    mode: Mode = "enforce",
    tools: Iterable[str] = (),
    timeout: float | None = None,
) -> PolicyEnforcer:
    """Validate and compile `policies` (nested lists are flattened) into an enforcer.

    Raises `PolicyError`, naming the policy, for a non-Policy item, an ASK_USER policy
    without handler, a malformed pattern, an MCP pattern whose server is not in
    `mcp_servers` (configs or names), and a rule that could never match: a bare tool name
    that is neither a built-in tool the harness asks about nor one of `tools` (the names
    of host-side tools; an `Agent` passes its own). Predicates are inspected here, once: a
    first parameter annotated `ToolCall` gets the call, a `BaseModel` subclass gets the
    args validated into it, anything else gets the args dict. `timeout` bounds each
    predicate (see `PolicyEnforcer`).
    """
    return PolicyEnforcer(policies, mcp_servers, mode=mode, tools=tools, timeout=timeout)


# -- policies as data (TOML) -------------------------------------------------------------

_DECISIONS: Final = {
    "allow": Decision.APPROVE,
    "approve": Decision.APPROVE,
    "deny": Decision.DENY,
    "ask_user": Decision.ASK_USER,
}
_RULE_KEYS: Final = frozenset({"tool", "decision", "name", "reason", "when", "timeout"})
_STRING_OPS: Final = ("contains", "startswith", "endswith", "regex", "glob")
_OPS: Final = ("equals", *_STRING_OPS)
_MAX_CONDITION_DEPTH: Final = 32
"""How deep `all` / `any` / `not` may nest: far beyond any real rule, and well inside
Python's recursion limit when such a condition is built, printed and evaluated."""


class _Leaf:
    """`{arg = "Key", <op> = value, ...}`: every operator must hold for the argument."""

    __slots__ = ("arg", "checks", "text")

    def __init__(self, arg: str, checks: list[tuple[str, Any]], text: str) -> None:
        self.arg = arg
        self.checks = checks
        self.text = text

    def __call__(self, args: Mapping[str, Any]) -> bool:
        if self.arg not in args:
            raise LookupError(f"the call has no {self.arg!r} argument")
        value = args[self.arg]
        return all(_check(op, operand, value) for op, operand in self.checks)

    def __repr__(self) -> str:
        return self.text


def _check(op: str, operand: Any, value: Any) -> bool:
    if op == "equals":
        return bool(value == operand)
    if op == "contains" and isinstance(value, list):
        return any(o in value for o in operand)
    if not isinstance(value, str):
        raise TypeError(f"{op} needs a string argument, got {type(value).__name__}")
    if op == "contains":
        return any(o in value for o in operand)
    if op == "startswith":
        return value.startswith(operand)
    if op == "endswith":
        return value.endswith(operand)
    if op == "regex":
        return any(p.search(value) for p in operand)
    return any(fnmatch.fnmatchcase(value, p) for p in operand)


class _Combine:
    """`all = [...]`, `any = [...]` or `not = {...}` over conditions."""

    __slots__ = ("op", "parts")

    def __init__(self, op: str, parts: list[Callable[[Mapping[str, Any]], bool]]) -> None:
        self.op = op
        self.parts = parts

    def __call__(self, args: Mapping[str, Any]) -> bool:
        if self.op == "all":
            return all(p(args) for p in self.parts)
        if self.op == "any":
            return any(p(args) for p in self.parts)
        return not self.parts[0](args)

    def __repr__(self) -> str:
        if self.op == "not":
            return f"not ({self.parts[0]!r})"
        return f" {self.op} ".join(f"({p!r})" for p in self.parts)


def _strings(value: object, where: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(i, str) for i in items):
        raise PolicyError(f"{where}: expected a string or a non-empty list of strings")
    return tuple(items)


def _condition(node: object, where: str, depth: int = 0) -> Callable[[Mapping[str, Any]], bool]:
    if not isinstance(node, dict):
        raise PolicyError(f"{where}: a condition must be a table")
    combinators = [k for k in ("all", "any", "not") if k in node]
    if combinators:
        op = combinators[0]
        if len(node) != 1:
            extra = sorted(set(node) - {op})
            raise PolicyError(f"{where}: '{op}' cannot be combined with {extra} in one table")
        if depth == _MAX_CONDITION_DEPTH:
            raise PolicyError(
                f"{where}: conditions nest more than {_MAX_CONDITION_DEPTH} levels deep"
            )
        if op == "not":
            return _Combine("not", [_condition(node["not"], f"{where}.not", depth + 1)])
        items = node[op]
        if not isinstance(items, list) or not items:
            raise PolicyError(f"{where}.{op}: expected a non-empty list of conditions")
        parts = [_condition(item, f"{where}.{op}[{i}]", depth + 1) for i, item in enumerate(items)]
        return _Combine(op, parts)
    unknown = sorted(set(node) - {"arg", *_OPS})
    if unknown:
        raise PolicyError(
            f"{where}: unknown key {unknown[0]!r} (expected arg with one of {', '.join(_OPS)}, "
            "or all / any / not)"
        )
    arg = node.get("arg")
    if not isinstance(arg, str) or not arg:
        raise PolicyError(f'{where}.arg: expected the argument name, e.g. arg = "CommandLine"')
    checks: list[tuple[str, Any]] = []
    for op in _OPS:
        if op not in node:
            continue
        operand = node[op]
        if op == "equals":
            checks.append((op, operand))
            continue
        values = _strings(operand, f"{where}.{op}")
        if op == "regex":
            try:
                checks.append((op, tuple(re.compile(v) for v in values)))
            except (re.error, OverflowError, RecursionError, ValueError) as exc:
                raise PolicyError(f"{where}.regex: invalid regular expression: {exc}") from None
        else:
            checks.append((op, values))
    if not checks:
        raise PolicyError(f"{where}: a condition on {arg!r} needs one of {', '.join(_OPS)}")
    text = " and ".join(f"{arg} {op} {node[op]!r}" for op, _ in checks)
    return _Leaf(arg, checks, text)


class _PolicyFile(NamedTuple):
    policies: list[Policy]
    mcp_servers: frozenset[str] | None


_MAX_FILE_BYTES: Final = 4 * 1024 * 1024


def _read_file(path: str | os.PathLike[str]) -> _PolicyFile:
    """Parse a policy file; every error is a `PolicyError` naming the file (and the rule
    and the key when the file parsed)."""
    source = os.fspath(path)
    try:
        with open(source, "rb") as f:
            raw = f.read(_MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise PolicyError(f"{source}: cannot read the file: {exc.strerror or exc}") from exc
    if len(raw) > _MAX_FILE_BYTES:
        raise PolicyError(f"{source}: larger than {_MAX_FILE_BYTES} bytes; not a policy file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise PolicyError(
            f"{source}: line {line}: not UTF-8 (byte 0x{raw[exc.start]:02x}); "
            "policy files are UTF-8 TOML"
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"{source}: invalid TOML: {exc}") from None
    except RecursionError:
        raise PolicyError(f"{source}: invalid TOML: values nest too deeply") from None
    return _parse_document(source, data, os.path.dirname(os.path.abspath(source)))


def _parse_document(source: str, data: dict[str, Any], base: str) -> _PolicyFile:
    """The policies of a parsed file; `base` is where relative workspaces start."""
    unknown = sorted(set(data) - {"rule", "mcp_servers"})
    if unknown:
        raise PolicyError(
            f"{source}: unknown top-level key {unknown[0]!r} (expected rule, mcp_servers)"
        )
    servers: frozenset[str] | None = None
    if "mcp_servers" in data:
        raw = data["mcp_servers"]
        if not isinstance(raw, list) or not all(isinstance(s, str) for s in raw):
            raise PolicyError(f"{source}: mcp_servers: expected a list of server names")
        servers = frozenset(raw)
    rules = data.get("rule", [])
    if not isinstance(rules, list):
        raise PolicyError(f"{source}: rules are written as [[rule]] tables")
    policies: list[Policy] = []
    for number, table in enumerate(rules, start=1):
        policies.extend(_parse_rule(source, number, table, servers, base))
    return _PolicyFile(policies, servers)


def _parse_rule(
    source: str, number: int, table: object, servers: frozenset[str] | None, base: str
) -> list[Policy]:
    name = table.get("name", "") if isinstance(table, dict) else ""
    where = f"{source}: rule #{number}" + (f" ({name!r})" if isinstance(name, str) and name else "")
    if not isinstance(table, dict):
        raise PolicyError(f"{where}: expected a table")
    if not isinstance(name, str):
        raise PolicyError(f"{where}: name: expected a string")
    if "workspace_only" in table:
        extra = sorted(set(table) - {"workspace_only", "name"})
        if extra:
            raise PolicyError(
                f"{where}: {extra[0]}: a workspace_only rule takes only workspace_only and name"
            )
        roots = _strings(table["workspace_only"], f"{where}: workspace_only")
        try:
            resolved = [os.path.join(base, os.path.expanduser(r)) for r in roots]
            return workspace_only(resolved, name=name or "workspace_only")
        except (PolicyError, ValueError, OSError) as exc:  # e.g. "~\x00" in expanduser
            raise PolicyError(f"{where}: workspace_only: {exc}") from None
    unknown = sorted(set(table) - _RULE_KEYS)
    if unknown:
        raise PolicyError(
            f"{where}: unknown key {unknown[0]!r} (expected "
            f"{', '.join(sorted(_RULE_KEYS | {'workspace_only'}))})"
        )
    raw_decision = table.get("decision")
    decision = _DECISIONS.get(raw_decision) if isinstance(raw_decision, str) else None
    if decision is None:
        raise PolicyError(
            f"{where}: decision: expected one of {', '.join(_DECISIONS)}, "
            f"got {table.get('decision')!r}"
        )
    if "tool" not in table:
        raise PolicyError(
            f"{where}: tool: missing (a tool name, 'server/tool', 'server/*' or "
            "'*', or a list of them)"
        )
    tools = _strings(table["tool"], f"{where}: tool")
    for tool in tools:
        try:
            _, server = _parse_pattern(tool)
        except ValueError as exc:
            raise PolicyError(f"{where}: tool: {exc}") from None
        if server is not None and (servers is None or server not in servers):
            raise PolicyError(
                f"{where}: tool: {tool!r} names the MCP server {server!r}; "
                "list it in mcp_servers = [...] at the top of the file"
            )
    reason = table.get("reason", "")
    if not isinstance(reason, str):
        raise PolicyError(f"{where}: reason: expected a string")
    timeout = table.get("timeout")
    if timeout is not None:
        if decision is not Decision.ASK_USER:
            raise PolicyError(f"{where}: timeout: only ask_user rules take a timeout")
        if not _is_duration(timeout):
            raise PolicyError(
                f"{where}: timeout: expected a positive, finite number of seconds, got {timeout!r}"
            )
    predicate = _condition(table["when"], f"{where}: when") if "when" in table else None
    handler = confirm_in_terminal if decision is Decision.ASK_USER else None
    return [
        Policy(
            tool,
            decision,
            predicate,
            handler,
            name,
            reason,
            float(timeout) if timeout is not None else None,
        )
        for tool in tools
    ]


def load(path: str | os.PathLike[str]) -> list[Policy]:
    """Read policies from a TOML file (format: docs/policies.md).

    ask_user rules are answered by `interactive.confirm_in_terminal`. Every error is a
    `PolicyError` naming the file and, once it parsed, the rule (numbered from 1) and
    the bad key: unreadable, not UTF-8, invalid or too deeply nested TOML included.
    """
    return _read_file(path).policies
