"""Where the command line writes what is not its result: errors and warnings go to
stderr as they happen, so that stdout carries only the report or the answer."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import TextIO

__all__ = ["warnings_to"]


@contextlib.contextmanager
def warnings_to(stream: TextIO) -> Iterator[None]:
    """While inside: the SDK's warnings and errors (a model call the harness retries, the
    error that ends the turn, a failing hook) are written to `stream` at once, one line
    each, instead of surfacing only as the turn's final error."""
    handler = logging.StreamHandler(stream)
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
