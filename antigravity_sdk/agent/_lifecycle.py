"""`SessionState`: where one live conversation is in its life, and the moves it may make.

Sans-I/O, like websockets' `State` and h11's transition table: a `Lifecycle` holds the
state and refuses a move the table does not list, so every legal combination of the old
flags is one named state, and an impossible one is an error at the line that tried it.

    STARTING ──> READY <──> IN_TURN ──> HALTING ──> READY
        │          │           │           │
        └──────────┴─────┬─────┴───────────┘
                         v
              FAILED ──> ENDING ──> CLOSED      (any state may close: start-up failing)

A failure while ending leaves the state ENDING (the session is going anyway; the failure
is recorded by the session); nothing leaves CLOSED.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final

from ..errors import AgentStateError

__all__ = ["Lifecycle", "SessionState"]


class SessionState(enum.Enum):
    """The state of one live conversation (`Session.state`)."""

    STARTING = "starting"
    """The harness spawned (or connected to) and being configured; no turn yet."""
    READY = "ready"
    """Between turns: the harness is idle and the next turn may start."""
    IN_TURN = "in a turn"
    """A `chat()` or `stream()` runs."""
    HALTING = "halting"
    """A turn was given up (an error, a timeout, `cancel()`): the harness was told to halt
    it, and the next turn waits until it confirms."""
    ENDING = "ending"
    """`stop()` runs: the session_end hooks, then the harness asked to end the session."""
    FAILED = "failed"
    """The session is over (`Session.failure` says why); every later turn raises that,
    and `stop()` still ends it properly."""
    CLOSED = "closed"
    """Nothing listens any more; the connection is closed or closing."""


_S = SessionState
TRANSITIONS: Final[Mapping[SessionState, frozenset[SessionState]]] = {
    _S.STARTING: frozenset({_S.READY, _S.FAILED, _S.ENDING, _S.CLOSED}),
    _S.READY: frozenset({_S.IN_TURN, _S.FAILED, _S.ENDING, _S.CLOSED}),
    _S.IN_TURN: frozenset({_S.READY, _S.HALTING, _S.FAILED, _S.ENDING, _S.CLOSED}),
    _S.HALTING: frozenset({_S.READY, _S.FAILED, _S.ENDING, _S.CLOSED}),
    _S.FAILED: frozenset({_S.ENDING, _S.CLOSED}),
    _S.ENDING: frozenset({_S.CLOSED}),
    _S.CLOSED: frozenset(),
}
"""Each state -> the states it may move to."""


class Lifecycle:
    """One session's state; `move()` is the only way to change it."""

    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state = SessionState.STARTING

    def can(self, to: SessionState) -> bool:
        return to in TRANSITIONS[self.state]

    def move(self, to: SessionState) -> None:
        """Change to `to`, or raise `AgentStateError` if the table does not allow it."""
        if to not in TRANSITIONS[self.state]:
            raise AgentStateError(f"a session cannot go from {self.state.value!r} to {to.value!r}")
        self.state = to

    def __repr__(self) -> str:
        return f"Lifecycle({self.state.value!r})"
