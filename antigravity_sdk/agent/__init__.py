"""`Agent` and `AgentBuilder`: a governed agent on the real Antigravity harness.

`Agent` is a thin facade: it builds a `Session` at each `start()` and delegates to it.
The session owns one live conversation: its `SessionState` (moved only through a table
of legal transitions), its record, the connection and the `SessionCore` reading it;
each turn is a `Turn`, and every harness request goes through one answer path, answered
exactly once, fail-closed. Arrows run one way: agent -> session -> turn -> answers.

One module per collaborator, all private; this package is the public surface:
`_settings` (the frozen settings groups), `_checks` (what `build()` checks, and
`default_policies`), `_builder` (`AgentBuilder`), `_agent` (`Agent`), `_lifecycle`
(`SessionState` and its transitions), `_session` (`Session`, `SessionDeps`), `_turn`
(`Turn`), `_answers` (the answer path), `_outside` (what a contained session keeps
outside the agent). Everything logs on `antigravity_sdk.agent`.
"""

from __future__ import annotations

from ._agent import Agent
from ._builder import AgentBuilder
from ._checks import default_policies as default_policies  # documented
from ._lifecycle import SessionState
from ._settings import ServedModel as ServedModel

__all__ = ["Agent", "AgentBuilder", "SessionState"]

# Reprs name the classes where users import them from, as before the split.
for _public in (Agent, AgentBuilder, ServedModel, SessionState, default_policies):
    _public.__module__ = __name__
del _public
