"""`Agent` and `AgentBuilder`: a governed agent on the real Antigravity harness.

The agent owns one harness connection and one `SessionCore`. The connection hands every
frame to the core as it is parsed; hook calls, tool runs and questions it yields start at
once as tasks (an answer that never waits goes out before the next frame is read; a slow
hook never stalls the socket) and always answer exactly once — fail-closed when the
dispatch itself fails. Stream chunks and the turn's end go to the turn in progress.

One module per collaborator, all private; this package is the public surface:
`_settings` (the frozen settings groups), `_checks` (what `build()` checks, one group
each, and `default_policies`), `_builder` (`AgentBuilder`), `_agent` (`Agent`),
`_session` (start, stop, the listener and the weak-reference discipline), `_turn` (one
object per turn: its queue, deadline, audit and trace state), `_answers` (the answer
path). Everything logs on `antigravity_sdk.agent`.
"""

from __future__ import annotations

from ._agent import Agent
from ._builder import AgentBuilder
from ._checks import default_policies as default_policies  # documented
from ._settings import ServedModel as ServedModel

__all__ = ["Agent", "AgentBuilder"]

# Reprs name the classes where users import them from, as before the split.
for _public in (Agent, AgentBuilder, ServedModel, default_policies):
    _public.__module__ = __name__
del _public
