"""What a policy is: `Decision`, `Policy`, the builders, and the bucket a policy falls in.

A policy's bucket (`Policy.bucket`, named in `BUCKETS`) comes from its pattern's scope
(specific / `server/*` / `*`) and its decision (deny / ask / allow): `enforce()` checks
the buckets in that order. Nothing here evaluates a call; see `_engine`.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias, overload

from ..errors import PolicyError
from ..types import McpHttpServer, McpStdioServer, ToolCall


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


class Undecidable(Exception):
    """Raised by a predicate whose call cannot be judged (a command line that does not
    reduce to plain words, say): the fail-safe rule applies as to any failure (a deny or
    ask rule denies, an allow rule does not match), but as a decision, not an error: it
    is logged at INFO, and the deny message gives the reason."""


@dataclass(frozen=True, slots=True)
class Policy:
    """One rule: calls matching `tool` get `decision` when `predicate` holds (or always).

    `tool` is `"name"`, `"server/name"`, `"server/*"` or `"*"`. `handler` answers
    ASK_USER policies, within `timeout` seconds when set. `name` labels the policy in
    messages and traces; `reason` replaces the message the model reads on a deny.
    `origin` says where a policy was written when that is not Python code, e.g.
    `"policies.toml: rule #7 ('no-sudo')"` for a rule `load()` read: errors name the
    policy by it, so they point to the file's own numbering.
    """

    tool: str
    decision: Decision
    predicate: Predicate | None = None
    handler: AskHandler | None = None
    name: str = ""
    reason: str = ""
    timeout: float | None = None
    origin: str = dataclasses.field(default="", compare=False, repr=False)

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

    @property
    def bucket(self) -> int:
        """Where `enforce()` files this policy: its index (0-8) in `BUCKETS`.

        Raises `PolicyError` for a malformed pattern or a decision that is not a `Decision`.
        """
        if not isinstance(self.decision, Decision):
            raise PolicyError(
                f"policy {self.label!r}: decision must be a Decision, got {self.decision!r}"
            )
        try:
            scope, _ = _parse_pattern(self.tool)
        except ValueError as exc:
            raise PolicyError(f"policy {self.label!r}: {exc}") from None
        return _bucket(scope, self.decision)


# -- patterns and buckets ----------------------------------------------------------------

_SERVER = re.compile(r"[A-Za-z0-9_-]+")

BUCKETS: Final = (
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
"""The nine buckets, in the order `enforce()` checks them: `BUCKETS[policy.bucket]`."""
_ORDER: Final = {Decision.DENY: 0, Decision.ASK_USER: 1, Decision.APPROVE: 2}


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


def _bucket(scope: int, decision: Decision) -> int:
    """The bucket of a pattern of `scope` (from `_parse_pattern`) with `decision`."""
    return scope * 3 + _ORDER[decision]


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
