"""Turns: one `Turn` per `chat()` or `stream()`, and the loop that runs it.

A `Turn` owns what lives exactly as long as one turn: the queue the connection's
listener feeds (stream chunks, the turn's end, a failure, a cancellation), the deadline,
the denial that ends it, its hook scope, and its audit and trace records. `run` sends
the prompt and yields the turn's effects until it ends; a turn that does not end
(error, timeout, cancellation, its consumer gone) is halted on the harness, after every
request still pending is answered fail-closed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING

from ..errors import (
    AgentStateError,
    HarnessConnectionError,
    TurnCancelledError,
    TurnDeniedError,
    TurnFailedError,
    TurnTimeoutError,
)
from ..harness.effects import HALT, Effect, TurnEnded
from ..media import PromptPart, prompt_text
from ..types import ChatResponse, HookResult, StopReason

if TYPE_CHECKING:
    from ..audit import AuditLog
    from ..context import HookContext
    from ..hooks import HookRunner
    from ..tracing import TracedHookRunner
    from ._agent import Agent
    from ._session import Session

_IDLE_TIMEOUT = 10.0  # for the previous turn to finish on the harness


class Turn:
    """The state of one turn. Like the session, it refers to no agent."""

    __slots__ = (
        "_audit",
        "_hooks",
        "_scope",
        "_traced",
        "deadline",
        "denial",
        "ended",
        "finished",
        "queue",
        "timeout",
    )

    def __init__(
        self,
        hooks: HookRunner,
        traced: TracedHookRunner | None,
        audit: AuditLog | None,
        timeout: float,
    ) -> None:
        self.queue: asyncio.Queue[Effect | BaseException] = asyncio.Queue()
        self.denial: HookResult | None = None  # a gating request's, which ends the turn
        self.ended: TurnEnded | None = None
        self.finished = False  # ended, or failed for good: nothing to halt
        self.timeout = timeout
        self.deadline = 0.0
        self._hooks, self._traced, self._audit = hooks, traced, audit
        self._scope: HookContext | None = None

    def put(self, item: Effect | BaseException) -> None:
        """From the listener (or `cancel()`, or the session's end): for the turn to see."""
        self.queue.put_nowait(item)

    def begin(self, parts: tuple[PromptPart, ...], conversation_id: str) -> None:
        """Open the hook scope, the trace span and the audit record; start the clock."""
        scope = self._hooks.begin_turn(prompt_text(parts))
        scope.set("prompt_parts", parts)
        self._scope = scope
        if self._traced is not None:
            self._traced.start_turn(conversation_id)
        if self._audit is not None:
            self._audit.begin_turn()
        self.deadline = asyncio.get_running_loop().time() + self.timeout

    async def next(self) -> Effect | BaseException:
        """The next item, or TimeoutError once the deadline has passed."""
        async with asyncio.timeout_at(self.deadline):
            return await self.queue.get()

    def saw(self, item: Effect) -> None:
        """`item` is about to be yielded: note (and trace) the turn's end."""
        self.ended = item if isinstance(item, TurnEnded) else None
        self.finished = self.ended is not None
        if self._traced is not None and self.ended is not None:
            self._traced.turn_ended(self.ended, self.denial)

    def failed(self, exc: BaseException) -> None:
        if self._traced is not None and not (self.finished and isinstance(exc, GeneratorExit)):
            self._traced.turn_failed(exc)

    def close(self, conversation_id: str, reason: StopReason | None) -> None:
        """Write the audit record, and close the hook scope and the trace span."""
        if self._audit is not None:
            self._audit.end_turn(conversation_id, self.ended, reason.value if reason else "error")
        if self._scope is not None:
            self._hooks.end_turn(self._scope)
        if self._traced is not None:
            self._traced.close_turn()


async def run(
    agent: Agent, parts: tuple[PromptPart, ...], *, streaming: bool
) -> AsyncGenerator[Effect, None]:
    """One turn of `agent`'s session: send `parts`, yield its effects until it ends."""
    session = agent._session
    if not agent._started or session.core is None or session.conn is None:
        raise AgentStateError("start the agent first (async with agent: ...)")
    if session.failure is not None:
        raise session.failure
    if session.abandoning is not None:
        # Its HALT must reach the harness before this turn's input, or it halts this
        # turn instead (nothing else orders them: the idle wait may not yield at all).
        await asyncio.wait([session.abandoning], timeout=_IDLE_TIMEOUT)
        session.abandoning = None
    await session.wait(session.idle, _IDLE_TIMEOUT, "finish the previous turn")
    hooks = agent.hook_runner
    assert hooks is not None
    timeout = agent._settings.limits.turn_timeout
    turn = Turn(hooks, session.traced, agent._audit, timeout)
    session.turn = turn
    session.idle.clear()
    turn.begin(parts, agent.conversation_id)
    agent.last_stop_reason = None
    conn, core = session.conn, session.core
    try:
        try:
            await conn.send(core.user_input(parts, streaming=streaming))
        except HarnessConnectionError as exc:
            agent._fail(exc)  # the session is over: every later call says so too
            raise
        while True:
            try:
                item = await turn.next()
            except TimeoutError:
                agent.last_stop_reason = StopReason.TIMEOUT
                raise TurnTimeoutError(
                    f"the turn did not finish within {timeout}s (halted)"
                ) from None
            if isinstance(item, TurnCancelledError):
                agent.last_stop_reason = StopReason.CANCELLED
                raise item  # not finished: the clean-up below halts the harness's turn
            if isinstance(item, BaseException):
                turn.finished = True
                raise item
            turn.saw(item)
            yield item
            if turn.finished:
                return
    except BaseException as exc:
        turn.failed(exc)
        raise
    finally:
        turn.close(agent.conversation_id, agent.last_stop_reason)
        # Closed by the caller's `aclosing` before the turn lock is released. Even so,
        # clear only this turn's state: a generator closed late (by the garbage
        # collector) must never end the turn that came after it.
        if session.turn is turn:
            session.turn = None
        if not turn.finished and session.failure is None and session.conn is not None:
            # Abandoned (error, timeout, cancellation, consumer gone): stop the harness's
            # turn; the reader marks the agent idle when the harness confirms.
            session.abandoning = session.spawn(_halt(session))


async def _halt(session: Session) -> None:
    """Answer every pending request fail-closed, then halt the harness's turn. In that
    order: on a halt the harness drops its pending hook requests, and an answer to a
    request it no longer knows ends the whole session."""
    pending = [task for task in session.answers if not task.done()]
    for task in pending:
        task.cancel()  # each answers fail-closed as it unwinds
    if pending:
        await asyncio.wait(pending, timeout=1.0)
    await session.send_quietly(HALT)


def finish(agent: Agent, ended: TurnEnded) -> ChatResponse:
    """The response of a turn that ended, or the error it ended with."""
    turn = agent._session.turn
    denial = turn.denial if turn is not None else None
    if ended.cancelled and denial is not None:
        agent.last_stop_reason = StopReason.DENIED
        raise TurnDeniedError(denial)
    reason = ended.response.stop_reason
    if ended.error:
        failed = TurnFailedError(
            ended.error, StopReason.ERROR if reason is StopReason.FINISHED else reason
        )
        agent.last_stop_reason = failed.stop_reason
        raise failed
    agent.last_stop_reason = reason
    agent.turn_count += 1
    agent.history.extend(ended.response.steps)
    return ended.response
