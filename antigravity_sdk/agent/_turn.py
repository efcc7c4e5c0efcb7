"""`Turn`: what lives exactly as long as one `chat()` or `stream()`.

The queue the session's listener feeds (stream chunks, the turn's end, a failure, a
cancellation), the deadline, the denial that ends it, its hook scope, and its audit and
trace records. The loop that runs a turn is the session's (`Session.run_turn`): a turn
refers to no session and no agent.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ..harness.effects import Effect, TurnEnded
from ..media import PromptPart, prompt_text
from ..types import HookResult, StopReason

if TYPE_CHECKING:
    from ..audit import AuditLog
    from ..context import HookContext
    from ..hooks import HookRunner
    from ..tracing import TracedHookRunner


class Turn:
    """The state of one turn."""

    __slots__ = (
        "_audit",
        "_hooks",
        "_scope",
        "_traced",
        "deadline",
        "denial",
        "ended",
        "error",
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
        self.ended: TurnEnded | None = None  # how the harness ended it
        self.error: BaseException | None = None  # or what ended it for good instead
        self.timeout = timeout
        self.deadline = 0.0
        self._hooks, self._traced, self._audit = hooks, traced, audit
        self._scope: HookContext | None = None

    @property
    def finished(self) -> bool:
        """Ended, or failed for good: nothing to halt on the harness."""
        return self.ended is not None or self.error is not None

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
        if isinstance(item, TurnEnded):
            self.ended = item
            if self._traced is not None:
                self._traced.turn_ended(item, self.denial)

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
