"""Where the command line writes what is not its result: errors and warnings go to
stderr as they happen, so that stdout carries only the report or the answer."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import TextIO

__all__ = ["warnings_to"]


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    def __init__(self, stream: TextIO, before: Callable[[], None] | None) -> None:
        super().__init__(stream)
        self.before = before

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "shown_as_row", False):  # a refused connection: a row already
            return
        if self.before is not None:
            self.before()
        super().emit(record)


@contextlib.contextmanager
def warnings_to(stream: TextIO, before: Callable[[], None] | None = None) -> Iterator[None]:
    """While inside: the SDK's warnings and errors (a model call the harness retries, the
    error that ends the turn, a failing hook) are written to `stream` at once, one line
    each, instead of surfacing only as the turn's final error. `before` is called before
    each line (to erase a live indicator on the same terminal)."""
    handler = _Handler(stream, before)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    logger = logging.getLogger("antigravity_sdk")
    level = logger.level
    if logger.getEffectiveLevel() > logging.WARNING:
        logger.setLevel(logging.WARNING)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
