"""The answer path: every request the harness makes, answered exactly once.

Each request (a hook call, a host-side tool run, questions, a confirmation, a policy
decision) starts at once as a task whose first step runs inline (`start_now`): an answer
that never waits goes out before the next frame is read, a slow hook never stalls the
socket, and the harness gets exactly one answer, fail-closed when working it out fails
or is cancelled.

The path sees the session only through `Answering` (which `Session` satisfies), so the
arrows run one way: the session imports this module, never the reverse.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Protocol

from .._eager import start_now
from ..types import HookResult

if TYPE_CHECKING:
    from ..audit import AuditLog
    from ..harness.effects import Frame, Request
    from ..hooks import HookRunner
    from ..tools import ToolRunner

logger = logging.getLogger("antigravity_sdk.agent")


class Answering(Protocol):
    """What the answer path needs of a live conversation."""

    @property
    def hook_runner(self) -> HookRunner | None: ...
    @property
    def conversation_id(self) -> str: ...
    @property
    def audit(self) -> AuditLog | None: ...
    @property
    def tools(self) -> ToolRunner: ...
    def track_answer(self, task: asyncio.Task[None]) -> None: ...
    def deny_turn(self, outcome: HookResult) -> None: ...
    def note_denial(self, request: Request, outcome: Any) -> None: ...
    async def send_quietly(self, frame: Frame) -> None: ...


def answer(session: Answering, request: Request) -> None:
    """Start answering `request` (from the connection's callback): an answer that needs
    no waiting is sent before this returns, and leaves nothing to track."""
    task = start_now(_answer(session, request))
    if task is not None:
        session.track_answer(task)


async def _answer(session: Answering, request: Request) -> None:
    """Work out the answer to `request` and send it, exactly once. If that fails or is
    cancelled, the answer is its fail-closed refusal (deny, failed tool, cancel)."""
    try:
        hooks = session.hook_runner
        assert hooks is not None, "answering before start()"
        # Any: what one request's `decide` returns is what its own `reply` takes.
        audit = session.audit
        if audit is not None:
            outcome: Any = await audit.decide(
                request, hooks, session.tools, session.conversation_id
            )
        else:
            outcome = await request.decide(hooks, session.tools)
        if request.gates_turn and not outcome.allow:
            session.deny_turn(outcome)
        session.note_denial(request, outcome)
        reply = request.reply(outcome)
    except BaseException as exc:
        if not isinstance(exc, asyncio.CancelledError):
            logger.error("answering %s failed (answering fail-closed): %s", request, exc)
        reason = failure_reason(exc)
        refused = HookResult(allow=False, message=reason)
        if request.gates_turn:
            session.deny_turn(refused)
        session.note_denial(request, refused)
        await session.send_quietly(request.refuse(reason))
        if isinstance(exc, Exception):
            return
        raise
    await session.send_quietly(reply)


def failure_reason(exc: BaseException) -> str:
    return f"the SDK could not decide: {type(exc).__name__}: {exc}".rstrip(": ")
