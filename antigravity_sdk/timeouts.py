"""`Timeouts`: every bound an agent puts on a wait, in one value, checked once.

Like httpx's `Timeout`, one frozen value holds them all, so a bound is read where it is
applied and validated where it is made: a time limit that is not a positive, finite
number of seconds is a `ConfigurationError` naming the field, wherever it comes from
(`Timeouts(...)`, `AgentBuilder.timeouts()`, or the single-bound setters
`turn_timeout()`, `hook_timeout()`, `startup_timeout()`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from .errors import ConfigurationError

__all__ = ["Timeouts", "is_duration"]


def is_duration(value: object) -> bool:
    """A usable bound: a positive, finite number of seconds (not a bool, not NaN)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


@dataclass(frozen=True)
class Timeouts:
    """How long an agent waits, in seconds, for each thing it waits on.

    - `startup`: spawning the harness, its handshake, and the conversation being ready
      (each of the two waits gets the whole bound);
    - `turn`: one `chat()` or `stream()`; past it the turn is halted and
      `TurnTimeoutError` raised;
    - `hook`: each hook call and each policy predicate (None: unbounded); one that runs
      over counts as failing, so a decide hook denies;
    - `session_hooks`: the `on_session_start` (or `on_session_end`) hooks, all together;
      past it they are cancelled, logged, and the session goes on;
    - `session_end`: the harness confirming the end of the session at `stop()`; past it
      the harness is ended anyway;
    - `previous_turn`: a halted turn's end on the harness, before the next turn starts.
    """

    startup: float = 30.0
    turn: float = 600.0
    hook: float | None = None
    session_hooks: float = 10.0
    session_end: float = 2.0
    previous_turn: float = 10.0

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if value is None and field.name == "hook":
                continue
            if not is_duration(value):
                raise ConfigurationError(
                    f"Timeouts.{field.name} must be a positive, finite number of seconds"
                    f"{' or None' if field.name == 'hook' else ''}, got {value!r}"
                )
