"""Rewritten tool-call arguments: checked as plain JSON, and encoded as the harness reads them.

A pre_tool_call hook may allow a call with new arguments (`HookResult.rewrite`). The
harness replaces the call's arguments with `PreToolResult.modified_args`, a `genai.Struct`
that it reads from JSON only in its field-list form (`{"fields": [{"name", "value"}]}`; a
plain JSON object there makes it drop the whole reply, and the turn then hangs). Numbers
travel as doubles, and it matches a built-in tool's keys case-insensitively. So a rewrite
is accepted only if it survives that trip unchanged: plain JSON types, finite numbers,
integers within 2**53, valid Unicode, no two keys of one object equal under case-folding.
That check, `json_args`, lives in `antigravity_sdk._plain_json` (below `hooks`, which
checks every rewrite with it) and is re-exported here; `to_struct` encodes its result.
Everything here is pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._plain_json import json_args

__all__ = ["json_args", "to_struct"]


def to_struct(args: Mapping[str, Any]) -> dict[str, Any]:
    """`args` (plain JSON, as `json_args` returns) as a `genai.Struct` in the JSON form
    the harness reads."""
    return {"fields": [{"name": key, "value": _value(item)} for key, item in args.items()]}


def _value(value: Any) -> dict[str, Any]:
    if value is None:
        return {"nullValue": "NULL_VALUE"}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, int | float):
        return {"numberValue": value}
    if isinstance(value, dict):
        return {"structValue": to_struct(value)}
    return {"listValue": {"values": [_value(item) for item in value]}}
