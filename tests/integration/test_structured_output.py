"""Structured output (`output_type`, the harness's `finish` tool) against the real harness."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import BaseModel, RootModel, ValidationError, field_validator

from antigravity_sdk import (
    ConfigurationError,
    HarnessConnectionError,
    OutputValidationError,
    TurnFailedError,
    policy,
)
from antigravity_sdk.testing import ToolCallSpec, finish, tool_call, tool_calls

from .conftest import AgentFactory, Workspace, tool_messages
from .test_examples import load_example
from .test_governance import Seen


class Weather(BaseModel):
    city: str
    temp: int

    @field_validator("temp")
    @classmethod
    def plausible(cls, value: int) -> int:
        if value > 60:
            raise ValueError("too hot to be true")
        return value


class Other(BaseModel):
    name: str


def _structured(builder: object) -> object:
    return builder.output_type(Weather)  # type: ignore[attr-defined]


async def test_a_valid_answer_is_an_instance(make_agent: AgentFactory) -> None:
    seen = Seen()
    agent, model = make_agent([finish(city="Paris", temp=20)], hooks=[seen], configure=_structured)
    async with agent:
        response = await agent.chat("weather?", output_type=Weather)
    assert isinstance(response.output, Weather)
    assert response.output == Weather(city="Paris", temp=20)
    assert [s.kind for s in response.steps][-1] == "finish"
    # The model was offered `finish` with Weather's schema and told to answer with it...
    (offered,) = [
        t["function"] for t in model.requests[0].tools if t["function"]["name"] == "finish"
    ]
    assert offered["parameters"]["required"] == ["city", "temp"]
    assert "calling the `finish` tool" in model.requests[0].text
    # ...and its call went through the hooks like any tool call.
    assert [(c.name, c.args) for c in seen.calls] == [("finish", {"city": "Paris", "temp": 20})]
    assert len(model.requests) == 1


async def test_chat_without_output_type_still_fills_output(make_agent: AgentFactory) -> None:
    agent, _ = make_agent([finish(city="Oslo", temp=3), "plain text"], configure=_structured)
    async with agent:
        first = await agent.chat("weather?")
        second = await agent.chat("again?")
    assert first.output == Weather(city="Oslo", temp=3)
    assert second.output is None and second.text == "plain text"


async def test_a_schema_invalid_answer_is_retried_by_the_harness(make_agent: AgentFactory) -> None:
    seen = Seen()
    script = [finish(city="Paris", temp="hot"), finish(city="Paris", temp=21)]
    agent, model = make_agent(script, hooks=[seen], configure=_structured)
    async with agent:
        response = await agent.chat("weather?", output_type=Weather)
    assert response.output == Weather(city="Paris", temp=21)
    assert "do not match schema" in "\n".join(tool_messages(model, 1))
    assert len(seen.calls) == 1  # the harness refused the first call before asking


async def test_an_answer_pydantic_rejects_is_refused_before_any_hook(
    make_agent: AgentFactory,
) -> None:
    """Passes the JSON schema, fails the model's validator: refused with pydantic's
    errors, corrected by the model in the same turn; hooks see only the valid call."""
    seen = Seen()
    script = [finish(city="Paris", temp=99), finish(city="Paris", temp=22)]
    agent, model = make_agent(script, hooks=[seen], configure=_structured)
    async with agent:
        response = await agent.chat("weather?", output_type=Weather)
    assert response.output == Weather(city="Paris", temp=22)
    refusal = "\n".join(tool_messages(model, 1))
    assert "does not validate as Weather" in refusal and "too hot to be true" in refusal
    assert [c.args["temp"] for c in seen.calls] == [22]
    assert agent.turn_count == 1


async def test_no_valid_answer_raises_with_the_raw_answer(make_agent: AgentFactory) -> None:
    agent, model = make_agent([finish(city="Paris", temp=99), "I give up"], configure=_structured)
    async with agent:
        with pytest.raises(OutputValidationError) as caught:
            await agent.chat("weather?", output_type=Weather)
        error = caught.value
        assert json.loads(error.raw) == {"city": "Paris", "temp": 99}
        assert isinstance(error.errors, ValidationError)
        assert "too hot to be true" in str(error)
        assert error.response.text == "I give up"
        # The session goes on.
        model.push(finish(city="Rome", temp=25))
        response = await agent.chat("weather?", output_type=Weather)
    assert response.output == Weather(city="Rome", temp=25)


async def test_a_text_answer_raises_with_the_text(make_agent: AgentFactory) -> None:
    agent, _ = make_agent(["sunny, 20 degrees"], configure=_structured)
    async with agent:
        with pytest.raises(OutputValidationError, match="did not call the finish tool") as caught:
            await agent.chat("weather?", output_type=Weather)
    assert caught.value.raw == "sunny, 20 degrees" and caught.value.errors is None


async def test_the_harness_gives_up_after_its_retries(make_agent: AgentFactory) -> None:
    """Measured (0.1.22): after 5 schema-invalid calls in a row (of any tool) the harness
    fails the turn, then closes the connection: the session is over. The SDK never sees
    those arguments: the harness refuses them before any hook."""
    agent, model = make_agent([finish(city="Paris")] * 5, configure=_structured)
    async with agent:
        with pytest.raises(TurnFailedError, match="do not match schema"):
            await agent.chat("weather?", output_type=Weather)
        assert len(model.requests) == 5
        await asyncio.sleep(3.0)  # it closes the connection ~0.8 s after the turn
        with pytest.raises(HarnessConnectionError):
            await agent.chat("again", output_type=Weather)


@pytest.mark.parametrize(
    "bad", [dict, int, Weather(city="x", temp=1), RootModel[list[int]], "Weather"]
)
async def test_a_bad_output_type_is_refused_before_sending(
    make_agent: AgentFactory, bad: object
) -> None:
    agent, model = make_agent([finish(city="Paris", temp=20)], configure=_structured)
    async with agent:
        with pytest.raises(TypeError, match="output_type"):
            await agent.chat("weather?", output_type=bad)  # type: ignore[arg-type]
        with pytest.raises(
            ConfigurationError, match=r"build the agent with \.output_type\(Other\)"
        ):
            await agent.chat("weather?", output_type=Other)
        assert model.requests == []  # nothing was sent
        response = await agent.chat("weather?", output_type=Weather)
    assert response.output == Weather(city="Paris", temp=20)


def test_the_builder_refuses_what_is_not_a_model() -> None:
    from antigravity_sdk import Agent

    for bad in (dict, int, RootModel[list[int]], Weather(city="x", temp=1)):
        with pytest.raises(TypeError, match="output_type"):
            Agent.builder().output_type(bad)  # type: ignore[arg-type]


async def test_without_an_output_type_there_is_no_finish_tool(make_agent: AgentFactory) -> None:
    agent, model = make_agent(
        [finish(city="Paris", temp=20), "done"], policies=[policy.allow_all()]
    )
    async with agent:
        with pytest.raises(ConfigurationError, match="no output type"):
            await agent.chat("weather?", output_type=Weather)
        response = await agent.chat("weather?")
    assert "finish" not in model.requests[0].tool_names
    assert response.output is None and response.text == "done"


async def test_a_catch_all_deny_leaves_structured_output_possible(
    make_agent: AgentFactory,
) -> None:
    agent, _ = make_agent(
        [finish(city="Paris", temp=20)], policies=[policy.deny_all()], configure=_structured
    )
    async with agent:
        response = await agent.chat("weather?", output_type=Weather)
    assert response.output == Weather(city="Paris", temp=20)


@pytest.mark.parametrize("how", ["policy", "hook"])
async def test_finish_can_still_be_denied(make_agent: AgentFactory, how: str) -> None:
    rules = [policy.deny("finish"), policy.allow_all()] if how == "policy" else None
    hooks = [Seen(deny=frozenset({"finish"}))] if how == "hook" else []
    agent, model = make_agent(
        [finish(city="Paris", temp=20), "then text"],
        policies=rules,
        hooks=hooks,
        configure=_structured,
    )
    async with agent:
        with pytest.raises(OutputValidationError, match="a hook or policy denied it") as caught:
            await agent.chat("weather?", output_type=Weather)
    assert json.loads(caught.value.raw) == {"city": "Paris", "temp": 20}
    assert "denied" in "\n".join(tool_messages(model, 1))


async def test_finish_does_not_carry_a_denied_call_along(
    make_agent: AgentFactory, env: Workspace
) -> None:
    """A denied command in the same reply as finish stays denied."""
    (env.ws / "keep").write_text("x")
    rm = {"CommandLine": "rm keep", "Cwd": str(env.ws), "WaitMsBeforeAsync": 3000}
    script = [
        tool_calls(
            ToolCallSpec("run_command", rm), ToolCallSpec("finish", {"city": "P", "temp": 1})
        )
    ]
    rules = [policy.deny("run_command"), policy.allow_all()]
    agent, _ = make_agent(script, policies=rules, configure=_structured)
    async with agent:
        response = await agent.chat("go", output_type=Weather)
    assert (env.ws / "keep").exists()
    assert response.output == Weather(city="P", temp=1)


async def test_a_host_tool_cannot_be_called_finish() -> None:
    from antigravity_sdk import Agent

    def finish_tool() -> str:
        return "x"

    finish_tool.__name__ = "finish"
    with pytest.raises(ConfigurationError, match="finish"):
        Agent.builder().tool(finish_tool).build()


async def test_structured_output_example_runs() -> None:
    assert await load_example("structured_output").main() == 0


def test_tool_call_helper_matches_finish() -> None:
    assert finish(a=1) == tool_call("finish", a=1)
