"""Ctrl-C in a command that runs a session: stop it cleanly, say so in one line.

Without this, Ctrl-C reaches `asyncio.run` (or `uvloop.run`), which cancels the command's
task and then raises `KeyboardInterrupt` out of the runner: about 35 lines of traceback.
`ctrl_c_cancels` takes SIGINT over on the running loop instead (the same on both loops):
the first Ctrl-C cancels the command's task, whose clean-up stops the harness (bounded,
`Agent.stop()`), and the command then reports the interruption and exits 130.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator
from typing import Final, TextIO

__all__ = ["INTERRUPTED", "Interrupt", "ctrl_c_cancels", "report_interrupt"]

INTERRUPTED: Final = 130
"""The exit code of a command stopped by Ctrl-C (128 + SIGINT), as shells report it."""


class Interrupt:
    """Whether Ctrl-C came while inside `ctrl_c_cancels`."""

    __slots__ = ("came",)

    def __init__(self) -> None:
        self.came = False


@contextlib.contextmanager
def ctrl_c_cancels() -> Iterator[Interrupt]:
    """While inside (in a coroutine on the loop's thread): the first Ctrl-C cancels the
    current task; later ones are ignored while its clean-up (bounded) runs. Catch the
    `CancelledError` where the command ends and, if `Interrupt.came`, call
    `report_interrupt`. Outside the main thread nothing changes."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    interrupt = Interrupt()

    def on_sigint() -> None:
        if not interrupt.came and task is not None:
            interrupt.came = True
            task.cancel()

    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    except (ValueError, RuntimeError, NotImplementedError):  # not the main thread
        yield interrupt
        return
    try:
        yield interrupt
    finally:
        loop.remove_signal_handler(signal.SIGINT)


def report_interrupt(err: TextIO, what: str = "the turn was stopped") -> int:
    """After the cancellation Ctrl-C caused was caught: the command's task goes on (it
    returns normally), the one-line message on `err`; returns 130."""
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()
    err.write(f"interrupted (Ctrl-C): {what}\n")
    err.flush()
    return INTERRUPTED
