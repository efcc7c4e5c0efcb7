"""`start_now`: a task whose first step runs at once, inside that task.

Most answers to the harness (a hook call, a policy decision) finish without ever waiting.
As an ordinary task each would cost a pass of the event loop, and a task switch, before
its reply goes out. Python 3.12+ has eager tasks for this. 3.11 does not, so `start_now`
does it by hand: it creates the task up front, makes it the current task while the
coroutine's first step runs inline (so `asyncio.current_task()`, `asyncio.timeout()` and a
cancellation all see the task that goes on running the coroutine), and the task's own
first step then hands over whatever that inline step left: the future it waits on, which
the task waits on from there, or its outcome. 3.11 is frozen, so the private
`_enter_task` / `_leave_task` this needs will not change under us.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextvars
import sys
from collections.abc import Coroutine
from typing import Any, cast

__all__ = ["start_now"]


if sys.version_info >= (3, 12):

    def start_now(coro: Coroutine[Any, Any, None]) -> asyncio.Task[None] | None:
        """Run `coro` now up to its first real wait, as a task; the task while it still
        runs, None once it has finished (its outcome is then the task's, as for any task).
        """
        task = asyncio.Task(coro, loop=asyncio.get_running_loop(), eager_start=True)
        return None if task.done() else task

else:
    from asyncio.tasks import _enter_task, _leave_task

    class _Inline:
        """What a 3.11 task runs for a coroutine whose first step already ran inline: its
        first `send` (or `throw`) hands the task what that step left; every later one goes
        straight to the coroutine, so the task drives it like any other."""

        __slots__ = ("_coro", "_failure", "_handed", "_returned", "_yielded")

        def __init__(self, coro: Coroutine[Any, Any, None]) -> None:
            self._coro = coro
            self._yielded: Any = None
            # How the first step ended, if it did. A return keeps its value, not its
            # StopIteration: that one's traceback holds `first_step`'s frame, which holds
            # this object, a reference cycle per answer that only the cyclic GC frees.
            self._returned: tuple[Any] | None = None
            self._failure: BaseException | None = None
            self._handed = False

        def first_step(self) -> bool:
            """Run the coroutine's first step; True if it finished (returned or raised)."""
            try:
                self._yielded = self._coro.send(None)
            except StopIteration as exc:  # the task's result
                self._returned = (exc.value,)
                return True
            except BaseException as exc:
                self._failure = exc
                return True
            return False

        def _outcome(self) -> BaseException | None:
            """The first step's ending, once, for the task to see (None: it waits)."""
            if self._returned is not None:
                return StopIteration(*self._returned)
            failure, self._failure = self._failure, None
            return failure

        def send(self, value: Any) -> Any:
            if not self._handed:
                self._handed = True
                outcome = self._outcome()
                if outcome is not None:
                    try:
                        raise outcome
                    finally:
                        del outcome  # no cycle through this frame
                return self._yielded
            return self._coro.send(value)

        def throw(self, exc: BaseException) -> Any:
            if not self._handed:
                self._handed = True
                outcome = self._outcome()
                if outcome is not None:  # finished already: too late to cancel
                    try:
                        raise outcome
                    finally:
                        del outcome
            return self._coro.throw(exc)

        def close(self) -> None:
            self._coro.close()

        def __repr__(self) -> str:
            return repr(self._coro)

    collections.abc.Coroutine.register(_Inline)  # what asyncio checks a task's coroutine by

    def start_now(coro: Coroutine[Any, Any, None]) -> asyncio.Task[None] | None:
        """Run `coro` now up to its first real wait, as a task; the task while it still
        runs, None once it has finished (its outcome is then the task's, as for any task).
        """
        loop = asyncio.get_running_loop()
        inline = _Inline(coro)
        context = contextvars.copy_context()  # the task's, for its first step too
        task = loop.create_task(cast(Coroutine[Any, Any, None], inline), context=context)
        outer = asyncio.current_task(loop)  # a task that delivers frames itself, if any
        if outer is not None:
            _leave_task(loop, outer)
        _enter_task(loop, task)
        try:
            finished = context.run(inline.first_step)
        finally:
            _leave_task(loop, task)
            if outer is not None:
                _enter_task(loop, outer)
        return None if finished else task
