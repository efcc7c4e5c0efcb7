"""Structured output without the harness: the output type's checks, the finish tool's
schema, the guard's verdicts, and the answer taken from a turn's steps."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field, RootModel, ValidationError, field_validator

from antigravity_sdk import (
    ChatResponse,
    HookResult,
    OutputValidationError,
    Step,
    ToolCall,
    TurnError,
)
from antigravity_sdk.harness.catalog import RESERVED_TOOL_NAMES
from antigravity_sdk.harness.config import ModelSettings, harness_config
from antigravity_sdk.harness.protocol import SessionCore
from antigravity_sdk.structured import OutputGuard, check_output_type, output_schema
from antigravity_sdk.types import CapabilitiesConfig


class Item(BaseModel):
    name: str
    qty: int = Field(ge=0)

    @field_validator("name")
    @classmethod
    def not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("blank name")
        return value


class Order(BaseModel):
    items: list[Item]
    note: str | None = None


class Opaque:
    pass


class WithOpaque(BaseModel):
    model_config = {"arbitrary_types_allowed": True}
    thing: Opaque


@pytest.mark.parametrize(
    "bad", [dict, int, str, None, Order(items=[]), RootModel[list[int]], "Order", list[Order]]
)
def test_only_model_classes_with_fields_are_output_types(bad: object) -> None:
    with pytest.raises(TypeError, match="output_type"):
        check_output_type(bad)
    with pytest.raises(TypeError, match="output_type"):
        output_schema(bad)


def test_a_model_without_a_json_schema_is_refused() -> None:
    with pytest.raises(TypeError, match="no JSON schema"):
        output_schema(WithOpaque)


def test_the_schema_is_the_models_json_schema() -> None:
    assert json.loads(output_schema(Order)) == Order.model_json_schema()
    assert check_output_type(Order) is Order


def test_finish_is_a_reserved_tool_name() -> None:
    assert "finish" in RESERVED_TOOL_NAMES


def _config(**kwargs: Any) -> dict[str, Any]:
    config: dict[str, Any] = harness_config(
        model=ModelSettings("m", base_url="http://127.0.0.1:1/v1"),
        workspaces=[],
        app_data_dir=Path("/tmp"),
        capabilities=CapabilitiesConfig(),
        hook_events=[],
        **kwargs,
    )["config"]
    return config


def test_the_config_carries_the_schema_and_the_instruction() -> None:
    plain = _config(system_instructions="be brief")
    assert "finishToolSchemaJson" not in plain
    structured = _config(system_instructions="be brief", output_schema=output_schema(Order))
    assert json.loads(structured["finishToolSchemaJson"]) == Order.model_json_schema()
    titles = [s["title"] for s in structured["systemInstructions"]["appended"]["appendedSections"]]
    assert titles == ["Instructions", "Answer format"]
    alone = _config(output_schema=output_schema(Order))
    assert len(alone["systemInstructions"]["appended"]["appendedSections"]) == 1


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)
items = st.fixed_dictionaries(
    {"name": st.sampled_from(["a", " ", "", 3]), "qty": st.sampled_from([0, 1, -1, "2", 1.5])}
)
orders = st.one_of(
    st.dictionaries(st.sampled_from(["items", "note", "x"]), json_values, max_size=3),
    st.fixed_dictionaries({"items": st.lists(items, max_size=3)}, optional={"note": json_values}),
)


def _verdict(guard: OutputGuard, call: ToolCall) -> HookResult:
    return asyncio.run(guard.pre_tool_call(call))


@given(orders)
def test_the_guard_allows_exactly_what_validates(args: dict[str, Any]) -> None:
    verdict = _verdict(OutputGuard(Order), ToolCall(name="finish", args=args))
    try:
        Order.model_validate_json(json.dumps(args))
    except ValidationError:
        assert not verdict.allow
        assert "does not validate as Order" in verdict.message
    else:
        assert verdict.allow


@given(st.dictionaries(st.text(max_size=4), json_values, max_size=3))
def test_the_guard_ignores_other_tools(args: dict[str, Any]) -> None:
    guard = OutputGuard(Order)
    assert _verdict(guard, ToolCall(name="view_file", args=args)).allow
    assert _verdict(guard, ToolCall(name="finish", args=args, server_name="srv")).allow


def _finished(raw: str, trajectory: str = "main", state: Any = "done") -> ChatResponse:
    step = Step(kind="finish", state=state, trajectory_id=trajectory, output=raw)
    return ChatResponse(steps=[step])


def test_the_answer_is_the_agents_own_finish_step() -> None:
    guard = OutputGuard(Order)
    raw = json.dumps({"items": [{"name": "a", "qty": 1}]})
    assert guard.structured_output(_finished(raw), "main", required=True) == Order(
        items=[Item(name="a", qty=1)]
    )
    for response in (_finished(raw, trajectory="subagent"), _finished(raw, state="error")):
        assert guard.structured_output(response, "main", required=False) is None
        with pytest.raises(OutputValidationError, match="did not call the finish tool"):
            guard.structured_output(response, "main", required=True)


def test_a_finished_answer_that_does_not_validate_raises_with_it() -> None:
    raw = json.dumps({"items": [{"name": " ", "qty": 1}]})
    with pytest.raises(OutputValidationError, match="blank name") as caught:
        OutputGuard(Order).structured_output(_finished(raw), "main", required=False)
    assert caught.value.raw == raw and isinstance(caught.value.errors, ValidationError)
    assert isinstance(caught.value, TurnError)


async def test_a_turn_remembers_its_last_finish_call() -> None:
    guard = OutputGuard(Order)
    empty = ChatResponse(text="hmm")
    bad = {"items": [{"name": "", "qty": 1}]}
    await guard.pre_tool_call(ToolCall(name="finish", args=bad))
    with pytest.raises(OutputValidationError, match="refused") as caught:
        guard.structured_output(empty, "main", required=True)
    assert json.loads(caught.value.raw) == bad
    await guard.pre_tool_call(ToolCall(name="finish", args={"items": []}))
    with pytest.raises(OutputValidationError, match="hook or policy denied") as caught:
        guard.structured_output(empty, "main", required=True)
    assert json.loads(caught.value.raw) == {"items": []}
    guard.begin_turn()
    with pytest.raises(OutputValidationError, match="did not call") as caught:
        guard.structured_output(empty, "main", required=True)
    assert caught.value.raw == "hmm"


def test_finish_arguments_keep_their_spelling() -> None:
    """The harness checks finish's arguments against the schema as they are: keys that
    look like a built-in tool's (`toolAction`) are not respelled for the hooks."""
    core = SessionCore(guard=None)
    args = {"toolaction": "x", "toolsummary": "y"}
    request = {
        "requestId": "r1",
        "type": "LIFECYCLE_HOOK_PRE_TOOL",
        "preToolArgs": {"toolName": "finish", "argumentsJson": json.dumps(args)},
    }
    (hook_call,) = core.receive({"callHookRequest": request})
    assert hook_call.arg.args == args
