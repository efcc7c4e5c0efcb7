"""Scoped state for hooks (`HookContext`) and for host-side tools (`ToolContext`).

Hook state nests session → turn → operation: `get` looks up the chain, `set` writes only
locally, so a turn can shadow a session value and a parent never sees a child's keys.
`current_context()` is backed by a contextvar, so concurrent dispatches in different
asyncio tasks each see their own innermost context.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

__all__ = ["DecisionNote", "HookContext", "ToolContext", "current_context"]


class HookContext:
    """A key/value scope whose reads fall back to its parent's."""

    __slots__ = ("_data", "parent")

    def __init__(self, parent: HookContext | None = None) -> None:
        self.parent = parent
        self._data: dict[str, Any] = {}

    def child(self) -> HookContext:
        """A new scope below this one."""
        return HookContext(self)

    def has_parent(self) -> bool:
        return self.parent is not None

    def get(self, key: str, default: Any = None) -> Any:
        """The value in this scope, else the nearest ancestor's, else `default`."""
        ctx: HookContext | None = self
        while ctx is not None:
            data = ctx._data
            if key in data:
                return data[key]
            ctx = ctx.parent
        return default

    def set(self, key: str, value: Any) -> None:
        """Set `key` in this scope only (shadowing, never mutating, a parent's value)."""
        self._data[key] = value

    def __contains__(self, key: str) -> bool:
        return self.get(key, _MISSING) is not _MISSING

    def __repr__(self) -> str:
        depth = 0
        ctx = self.parent
        while ctx is not None:
            depth += 1
            ctx = ctx.parent
        return f"HookContext(depth={depth}, keys={sorted(self._data)})"


_MISSING = object()

# A deferred scope: `[make, item, parent, made]`. Tool-call dispatches are hot and most
# hooks never call current_context(), so an operation context is only built (by
# `make(item, parent)`, once per dispatch) when a hook first asks for it. A list because
# it is the cheapest mutable object to build; only this module and hooks.py touch it.
Deferred = list[Any]

_current: ContextVar[HookContext | Deferred] = ContextVar("antigravity_sdk.current_context")


def current_context() -> HookContext:
    """The innermost context of the hook event being dispatched in this task.

    The operation context inside pre/post_tool_call and on_tool_error (one per tool
    call), the turn context inside pre/post_turn (holding `"prompt"`), the session
    context otherwise. Raises `LookupError` outside a dispatch.
    """
    try:
        ctx = _current.get()
    except LookupError:
        raise LookupError(
            "current_context() is only available while a hook is dispatched"
        ) from None
    if isinstance(ctx, list):
        made: HookContext | None = ctx[3]
        if made is None:
            made = ctx[3] = ctx[0](ctx[1], ctx[2])
        return made
    return ctx


class ToolContext:
    """Session-scoped, flat state for host-side tools. Hooks and tools do not share state."""

    __slots__ = ("_state", "conversation_id")

    def __init__(self, conversation_id: str = "") -> None:
        self.conversation_id = conversation_id
        self._state: dict[str, Any] = {}

    def get_state(self, key: str, default: Any = None) -> Any:
        return self._state.get(key, default)

    def set_state(self, key: str, value: Any) -> None:
        self._state[key] = value


class DecisionNote:
    """What decided the tool call being dispatched, noted for an agent's audit log.

    Set (in `noting`) only while an agent with an audit log decides a call, so a dispatch
    without one pays a single context-variable lookup, and only on a deny or a rewrite.
    The hook runner notes the hook whose deny stood (`hook`) and every hook that rewrote
    (`rewriters`); the enforcer (`PolicyEnforcer.note_decisions`) notes the deciding
    rule (`rule`: its `policy` and `bucket`; None when no rule matched), the policies' own verdict
    (`policy_allow`: False in shadow mode for what would be denied), and its time
    (`policy_ns`, -1 while the policies have not decided).
    """

    __slots__ = ("hook", "policy_allow", "policy_ns", "rewriters", "rule")

    def __init__(self) -> None:
        self.hook = ""
        self.rewriters: list[str] = []
        self.rule: Any = None
        self.policy_allow = True
        self.policy_ns = -1


noting: ContextVar[DecisionNote | None] = ContextVar("antigravity_sdk.noting", default=None)
