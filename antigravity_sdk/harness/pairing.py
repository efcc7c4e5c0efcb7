"""Which PRE_TOOL call each tool step of a turn runs.

A step says what it does (a tool and the arguments it reports), not which call it runs;
`TurnCalls` pairs them. Pure bookkeeping, no I/O.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ..types import ToolCall
from .fields import wire_path

__all__ = ["TurnCalls"]


def _same_arg(given: Any, described: str) -> bool:
    """Whether a call's argument is the value a step reports (paths compared normalised)."""
    if not isinstance(given, str):
        return False
    if given == described:
        return True
    return os.path.normpath(wire_path(given)) == os.path.normpath(described)


class TurnCalls:
    """The calls PRE_TOOL asked about in one turn, and which tool step runs which.

    A step says what it does, not which call it runs: it pairs with the earliest call not
    yet paired that has its tool name, its trajectory (or none) and the arguments it
    describes. Calls are kept per (name, trajectory), each list skipping its paired
    prefix, so pairing a turn's steps costs about one look per step rather than a scan
    of every call (which made a long turn's end quadratic).
    """

    __slots__ = ("_by_key", "_index_of", "_paired", "_skip", "calls")

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []  # as they run (a rewrite replaces the call)
        self._by_key: dict[tuple[str, str], list[int]] = {}
        self._skip: dict[tuple[str, str], int] = {}  # per list: its first unpaired position
        self._paired: set[int] = set()  # paired with a step, or denied
        # Each call as asked and as rewritten, by `id()`, with its index; holding the call
        # keeps it alive, so no other object can come to have its id.
        self._index_of: dict[int, tuple[ToolCall, int]] = {}

    def add(self, call: ToolCall) -> None:
        n = len(self.calls)
        self._by_key.setdefault((call.name, call.trajectory_id), []).append(n)
        self.calls.append(call)
        self._index_of[id(call)] = (call, n)

    def replace(self, old: ToolCall, new: ToolCall) -> None:
        """`new` (a rewrite: same name, same trajectory) takes `old`'s place."""
        known = self._index_of.get(id(old))
        if known is not None:
            self.calls[known[1]] = new
            self._index_of[id(new)] = (new, known[1])

    def exclude(self, call: ToolCall) -> None:
        """`call` (as asked or as rewritten) was denied: it never runs, so no step pairs
        with it. A call the SDK refused before asking the hooks is not one of the turn's."""
        known = self._index_of.get(id(call))
        if known is not None:
            self._paired.add(known[1])

    def pair(self, names: tuple[str, ...], trajectory: str, args: Mapping[str, Any]) -> int:
        """The index of the call a step runs, now paired with it; -1 if no call fits."""
        best = -1
        paired = self._paired
        for key in {(name, where) for name in names for where in (trajectory, "")}:
            indices = self._by_key.get(key)
            if not indices:
                continue
            start = self._skip.get(key, 0)
            while start < len(indices) and indices[start] in paired:
                start += 1
            self._skip[key] = start
            for position in range(start, len(indices)):
                n = indices[position]
                if best >= 0 and n > best:
                    break  # a call this late cannot be the earliest
                if n not in paired and all(
                    _same_arg(self.calls[n].args.get(k), v) for k, v in args.items()
                ):
                    best = n
                    break
        if best >= 0:
            paired.add(best)
        return best
