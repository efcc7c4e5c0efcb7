"""Defaults the library as a whole chooses, held where a package below it can read them.

`default_ask_handler()`: who answers a policy file's ask_user rules when `policy.load` is
given no handler (documented: the terminal). The policy package decides tool calls and
never talks to a person, so it must neither import the terminal (`interactive`) nor choose
it. The choice is the package root's (`__init__.py`, which is imported before any module
of the package, registers the terminal with `choose_ask_handler`); this module, below
both and importing nothing at run time, only holds it. So the dependency points down
from both sides: the root -> `interactive` and this module, the policy package -> this
module; nothing of the policy package's reaches up to the terminal.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from .types import ToolCall

__all__ = ["choose_ask_handler", "default_ask_handler"]

AskHandler: TypeAlias = "Callable[[ToolCall], bool | Awaitable[bool]]"  # as policy's

_ask_handler: Callable[[], AskHandler] | None = None


def choose_ask_handler(resolve: Callable[[], AskHandler]) -> None:
    """Make `resolve()` what gives the default ask handler. Called once, by the package
    root; `resolve` runs only when a default is needed, so the terminal module loads only
    when a file with an ask_user rule is loaded without a handler."""
    global _ask_handler
    _ask_handler = resolve


def default_ask_handler() -> AskHandler:
    """The ask handler the library chose (the terminal's y/N question, denied without a
    terminal), for a policy file's ask_user rules loaded without one."""
    if _ask_handler is None:  # the package root chooses before any module can ask
        raise RuntimeError("antigravity_sdk chose no default ask handler")
    return _ask_handler()
