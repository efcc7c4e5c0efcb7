"""The answer path: every effect the `SessionCore` yields, routed as it is parsed.

Stream chunks and the turn's end go to the turn in progress; the conversation's id and
earlier steps to the agent. Each request (a hook call, a host-side tool run, questions,
a confirmation, a policy decision) starts at once as a task whose first step runs inline
(`start_now`): an answer that never waits goes out before the next frame is read, a slow
hook never stalls the socket, and the harness gets exactly one answer, fail-closed when
working it out fails or is cancelled.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from .._eager import start_now
from ..harness.effects import Chunk, Effect, HookCall, Initialized, Request, SessionEnded, TurnEnded
from ..types import HookResult, ToolCall

if TYPE_CHECKING:
    from ._agent import Agent
    from ._session import Session

logger = logging.getLogger("antigravity_sdk.agent")


def handle(agent: Agent, session: Session, effect: Effect) -> None:
    """Route one effect of `session` (called by the connection's listener)."""
    if isinstance(effect, Chunk):  # only built when the turn streams
        if session.turn is not None:
            session.turn.queue.put_nowait(effect)
    elif isinstance(effect, TurnEnded):
        session.idle.set()
        if session.turn is not None:
            session.turn.queue.put_nowait(effect)
    elif isinstance(effect, Initialized):
        agent.conversation_id = effect.conversation_id
        agent.history.extend(effect.history)
        agent._tools.context.conversation_id = effect.conversation_id
        session.initialized.set()
    elif isinstance(effect, SessionEnded):
        session.ended.set()
    else:
        # Started here, inside the connection's callback: an answer that needs no
        # waiting is sent before this returns, and leaves nothing to track.
        task = start_now(_answer(agent, session, effect))
        if task is not None:
            session.track(task)
            session.answers.add(task)
            task.add_done_callback(session.answers.discard)


async def _answer(agent: Agent, session: Session, request: Request) -> None:
    """Work out the answer to `request` and send it, exactly once. If that fails or is
    cancelled, the answer is its fail-closed refusal (deny, failed tool, cancel)."""
    try:
        hooks = agent.hook_runner
        assert hooks is not None, "answering before start()"
        # Any: what one request's `decide` returns is what its own `reply` takes.
        audit = agent._audit
        if audit is not None:
            outcome: Any = await audit.decide(request, hooks, agent._tools, agent.conversation_id)
        else:
            outcome = await request.decide(hooks, agent._tools)
        if request.gates_turn and not outcome.allow:
            _deny_turn(session, outcome)
        _note_denial(session, request, outcome)
        reply = request.reply(outcome)
    except BaseException as exc:
        if not isinstance(exc, asyncio.CancelledError):
            logger.error("answering %s failed (answering fail-closed): %s", request, exc)
        reason = failure_reason(exc)
        if request.gates_turn:
            _deny_turn(session, HookResult(allow=False, message=reason))
        _note_denial(session, request, HookResult(allow=False, message=reason))
        await session.send_quietly(request.refuse(reason))
        if isinstance(exc, Exception):
            return
        raise
    await session.send_quietly(reply)


def _deny_turn(session: Session, outcome: HookResult) -> None:
    """A denial that ends the turn in progress: its `chat()` raises `TurnDeniedError`."""
    if session.turn is not None:
        session.turn.denial = outcome


def _note_denial(session: Session, request: Request, outcome: Any) -> None:
    """A denied tool call, for the turn's `denied` step (`Step.kind`)."""
    if (
        isinstance(request, HookCall)
        and request.event == "pre_tool_call"
        and isinstance(request.arg, ToolCall)
        and not outcome.allow
        and session.core is not None
    ):
        session.core.note_denial(request.arg, outcome.message)


def failure_reason(exc: BaseException) -> str:
    return f"the SDK could not decide: {type(exc).__name__}: {exc}".rstrip(": ")
