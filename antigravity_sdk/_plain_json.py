"""Tool-call arguments as plain JSON: the check a rewritten call's arguments pass.

`json_args` accepts only what survives the harness's reading unchanged (see
`harness/rewrite.py`, which encodes the result for the wire): plain JSON types, finite
numbers, integers within 2**53, valid Unicode, no two keys of one object equal under
case-folding. It lives here, below `hooks` (whose `plain_rewrite` is this check) and
`harness/` alike, because `hooks`, `types` and `errors` import nothing above them.
Pure, standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["json_args"]

_EXACT_INT: Final = 2**53  # the largest run of integers a double holds exactly


def json_args(args: object) -> dict[str, Any]:
    """A deep copy of `args` in plain JSON types; raises TypeError or ValueError (naming
    the path) for anything the harness would read as something else."""
    if not isinstance(args, Mapping):
        raise TypeError(f"rewritten args must be a mapping, got {type(args).__name__}")
    copied: dict[str, Any] = _plain(dict(args), "args")
    return copied


def _plain(value: object, where: str) -> Any:
    # Exact types only: a subclass (a str enum, a dict subclass) could compare, print or
    # serialise differently from what the policies were shown.
    exact = type(value)
    if value is None or exact is bool:
        return value
    if isinstance(value, str) and exact is str:
        return _text(value, where)
    if isinstance(value, int) and exact is int:
        if not -_EXACT_INT <= value <= _EXACT_INT:
            raise ValueError(f"{where}: integer {value} does not survive the wire (beyond 2**53)")
        return value
    if isinstance(value, float) and exact is float:
        if not math.isfinite(value):
            raise ValueError(f"{where}: {value} is not a JSON number")
        return value
    if isinstance(value, dict) and exact is dict:
        out: dict[str, Any] = {}
        folded: dict[str, str] = {}
        for key, item in value.items():
            if not isinstance(key, str) or type(key) is not str:
                raise TypeError(f"{where}: key {key!r} is not a str")
            _text(key, where)
            fold = key.casefold()
            if fold in folded:
                raise ValueError(
                    f"{where}: keys {folded[fold]!r} and {key!r} differ only in case "
                    "(the harness would act on one of them)"
                )
            folded[fold] = key
            out[key] = _plain(item, f"{where}[{key!r}]")
        return out
    if isinstance(value, list | tuple) and exact in (list, tuple):
        return [_plain(item, f"{where}[{i}]") for i, item in enumerate(value)]
    raise TypeError(f"{where}: {exact.__name__} is not a JSON value")


def _text(value: str, where: str) -> str:
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"{where}: not valid Unicode ({exc.reason})") from None
    return value
