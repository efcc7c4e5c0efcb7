"""The callback path's shortcuts give exactly what the plain code they replace gives.

Each shortcut (the frame decoder, the in-place-change check, the usage counts, the 3.11
inline task) is checked against the slow, obvious version over a space of inputs.
"""

from __future__ import annotations

import asyncio
import gc
import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_rewrite import JSON as JSON_WITH_CASES
from test_rewrite import KEYS, collides

from antigravity_sdk import Hook, HookResult, HookRunner
from antigravity_sdk._eager import start_now
from antigravity_sdk.errors import ProtocolError
from antigravity_sdk.harness.effects import HookCall
from antigravity_sdk.harness.fields import int_field, loads
from antigravity_sdk.harness.protocol import SessionCore, _case_collision
from antigravity_sdk.harness.wire import decode_frame
from antigravity_sdk.types import ToolCall, UsageMetadata

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values, NaN included (NaN != NaN)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _outcome(fn: Any, data: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(data)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        return "error", f"{type(exc).__name__}: {exc}"


@settings(max_examples=300)
@given(JSON, st.sampled_from(["", " ", "\n", "\ufeff", "x", "{}", " 1"]), st.booleans())
def test_loads_gives_what_json_loads_gives(value: Any, around: str, as_bytes: bool) -> None:
    """The same value, or the same error, for any JSON with or without surroundings."""
    for text in (json.dumps(value), json.dumps(value) + around, around + json.dumps(value)):
        data: str | bytes = text.encode("utf-8", "surrogatepass") if as_bytes else text
        ours, theirs = _outcome(loads, data), _outcome(json.loads, data)
        assert ours[0] == theirs[0], (data, ours, theirs)
        if ours[0] == "ok":
            assert _same(ours[1], theirs[1])
            assert type(ours[1]) is type(theirs[1])
        else:
            assert ours[1] == theirs[1]


@settings(max_examples=300)
@given(st.binary(max_size=40))
def test_loads_on_arbitrary_bytes_agrees_with_json_loads(data: bytes) -> None:
    ours, theirs = _outcome(loads, data), _outcome(json.loads, data)
    assert ours[0] == theirs[0]
    if ours[0] == "ok":
        assert _same(ours[1], theirs[1])


@pytest.mark.parametrize(
    "data",
    [
        b'{"a": 1}',  # spaces after the colon: the C scanner's job too
        b'\xef\xbb\xbf{"a": 1}',  # a BOM: json.loads accepts it in bytes
        b'{"a": "\xed\xa0\x80"}',  # an encoded lone surrogate: json.loads passes it
        b'{"a": 123456789012345678901234567890}',  # beyond 64 bits: stays an int
        b'{"a": NaN, "b": -Infinity}',
        b'{"a": 1, "a": 2}',  # duplicate keys: the last wins, as in the harness
    ],
)
def test_loads_edge_cases(data: bytes) -> None:
    assert _same(loads(data), json.loads(data))


def test_decode_frame_refuses_what_is_not_one_json_object() -> None:
    for data in (b"[1]", b'{"a": 1} x', b"\xff", b"", b"{"):
        with pytest.raises(ProtocolError):
            decode_frame(data)
    assert decode_frame(b' {"a": 1} ') == {"a": 1}


# -- arguments changed in place -----------------------------------------------------------

SCALAR = st.one_of(st.text(max_size=4), st.integers(-3, 3))
VALUE = st.one_of(
    SCALAR,
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False),
    st.lists(SCALAR, max_size=3),
    st.dictionaries(st.text(max_size=3), SCALAR, max_size=2),
)
ARGS = st.dictionaries(st.sampled_from(["A", "B", "C", "D"]), VALUE, max_size=4)


class Mutates(Hook):
    def __init__(self, change: dict[str, Any]) -> None:
        self.change = change

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        tool_call.args.clear()
        tool_call.args.update(self.change)
        return HookResult.ALLOWED


@settings(max_examples=300)
@given(ARGS, ARGS)
@example({"A": 1}, {"A": True})  # equal in Python, not in JSON
@example({"A": 0.0}, {"A": -0.0})
@example({"A": "x", "B": 2}, {"B": 2, "A": "x"})  # the same arguments, reordered
def test_a_change_in_place_is_refused_exactly_when_the_json_changed(
    before: dict[str, Any], after: dict[str, Any]
) -> None:
    """`True` for `1`, `1` for `"1"`, a nested change: whatever json.dumps tells apart."""
    call = ToolCall(name="run_command", args=json.loads(json.dumps(before)))
    decision = asyncio.run(
        HookCall("r", "pre_tool_call", call).decide(HookRunner([Mutates(after)]), None)
    )
    changed = json.dumps(before, sort_keys=True) != json.dumps(after, sort_keys=True)
    assert decision.allow is not changed


def test_a_nested_change_in_place_is_refused() -> None:
    call = ToolCall(name="run_command", args={"CommandLine": "ls", "Env": ["A=1"]})

    class Appends(Hook):
        async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
            tool_call.args["Env"].append("LD_PRELOAD=/tmp/x.so")
            return HookResult.ALLOWED

    decision = asyncio.run(
        HookCall("r", "pre_tool_call", call).decide(HookRunner([Appends()]), None)
    )
    assert not decision.allow and "in place" in decision.message


# -- usage ----------------------------------------------------------------------------------

COUNT = st.integers(min_value=0, max_value=2**40)


@given(st.lists(st.tuples(COUNT, COUNT, COUNT), min_size=1, max_size=4))
def test_usage_counts_as_the_harness_sent_them(updates: list[tuple[int, int, int]]) -> None:
    core = SessionCore()
    core.receive({"initializeConversationResponse": {"cascadeId": "main"}})
    core.user_input("go", streaming=False)
    for prompt, output, total in updates:
        usage = {
            "promptTokenCount": str(prompt),
            "candidatesTokenCount": output,
            "totalTokenCount": str(total),
        }
        core.receive(
            {"usageUpdate": {"total": usage, "agents": [{"trajectoryId": "sub", "usage": usage}]}}
        )
    prompt, output, total = updates[-1]
    expected = UsageMetadata(
        prompt_token_count=prompt, candidates_token_count=output, total_token_count=total
    )
    assert core.usage == expected
    assert core.usage_by_trajectory == {"sub": expected}
    assert core.response().usage == expected
    assert core.response().usage_by_trajectory == {"sub": expected}


def test_a_usage_count_that_is_not_an_integer_is_a_protocol_error() -> None:
    core = SessionCore()
    with pytest.raises(ProtocolError, match="promptTokenCount"):
        core.receive({"usageUpdate": {"total": {"promptTokenCount": "many"}}})


# -- answers leave no garbage -----------------------------------------------------------------


def test_an_answer_that_never_waits_leaves_no_reference_cycle() -> None:
    """Each answer would otherwise leave a cycle (its StopIteration's traceback holding
    the frame that holds it) for the cyclic GC: a dozen objects per tool call."""

    async def answer() -> None:
        return None

    async def main() -> int:
        for _ in range(3):  # warm: first calls may cache what later calls reuse
            start_now(answer())
        await asyncio.sleep(0)
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            for _ in range(20):
                assert start_now(answer()) is None
            await asyncio.sleep(0)  # the tasks' own steps run
            gc.collect()
            return len(gc.garbage)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()

    assert asyncio.run(main()) == 0


# -- keys that differ only in case ------------------------------------------------------------


@settings(max_examples=400)
@given(st.dictionaries(KEYS, JSON_WITH_CASES, max_size=4))
def test_a_case_collision_is_found_at_any_depth(args: dict[str, Any]) -> None:
    found = _case_collision(args)
    assert bool(found) is collides(args)
    if found:  # it names the two keys
        first, second = (part.strip("'") for part in found.split(" and "))
        assert first != second and first.casefold() == second.casefold()


@pytest.mark.parametrize("value", [True, False, 1.5, "many", None, [1]])
def test_an_integer_field_refuses_what_is_not_an_integer(value: Any) -> None:
    with pytest.raises(ProtocolError, match="'n' should be an integer"):
        int_field({"n": value}, "n")


def test_an_integer_field_reads_ints_and_64_bit_strings() -> None:
    assert int_field({"n": 7}, "n") == 7
    assert int_field({"n": "18446744073709551615"}, "n") == 2**64 - 1
    assert int_field({}, "n") == 0
