"""One `Timeouts` value: every bound an agent applies, checked once, and the same mistake
is the same error wherever it is made."""

from __future__ import annotations

import asyncio
import dataclasses
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from antigravity_sdk import Agent, AntigravityError, ConfigurationError
from antigravity_sdk.errors import ConfigurationTypeError
from antigravity_sdk.timeouts import Timeouts, is_duration

FIELDS = [field.name for field in dataclasses.fields(Timeouts)]
SETTERS = {"turn": "turn_timeout", "hook": "hook_timeout", "startup": "startup_timeout"}

bad_values = st.one_of(
    st.floats().filter(lambda x: not (math.isfinite(x) and x > 0)),
    st.integers(max_value=0),
    st.booleans(),
    st.text(max_size=3),
    st.just([1.0]),
)


@given(st.sampled_from(FIELDS), bad_values)
def test_a_bad_bound_is_refused_naming_its_field(name: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=rf"Timeouts\.{name} must be a positive"):
        Timeouts(**{name: value})  # type: ignore[arg-type]


@given(st.sampled_from(FIELDS), st.floats(min_value=1e-3, max_value=1e6))
def test_a_good_bound_is_kept(name: str, value: float) -> None:
    assert getattr(Timeouts(**{name: value}), name) == value
    assert is_duration(value)


@given(st.sampled_from(sorted(SETTERS)), bad_values)
def test_each_setter_refuses_what_timeouts_refuses_with_the_same_error(
    name: str, value: object
) -> None:
    setter = SETTERS[name]
    with pytest.raises(ConfigurationError, match=rf"{setter} must be a positive") as info:
        getattr(Agent.builder(), setter)(value)
    with pytest.raises(ConfigurationError) as direct:
        Timeouts(**{name: value})  # type: ignore[arg-type]
    assert type(info.value) is type(direct.value)


def test_only_the_hook_bound_may_be_none() -> None:
    assert Timeouts(hook=None).hook is None
    Agent.builder().hook_timeout(None)
    for name in set(FIELDS) - {"hook"}:
        with pytest.raises(ConfigurationError, match=name):
            Timeouts(**{name: None})  # type: ignore[arg-type]


def test_the_setters_and_timeouts_set_the_same_value() -> None:
    builder = Agent.builder().model("m", base_url="http://127.0.0.1:9/v1")
    agent = builder.turn_timeout(12).hook_timeout(3).startup_timeout(4).build()
    assert agent.policy_enforcer.timeout == 3  # the hook bound also bounds predicates
    chosen = Timeouts(turn=12, hook=3, startup=4)
    other = Agent.builder().model("m", base_url="http://127.0.0.1:9/v1").timeouts(chosen)
    assert other.build().policy_enforcer.timeout == 3
    # A setter after timeouts() changes its one field and keeps the rest.
    again = other.turn_timeout(99).build()
    assert again.policy_enforcer.timeout == 3


@pytest.mark.parametrize(
    "call",
    [
        lambda b: b.timeouts(30),
        lambda b: b.budget({"max_tool_calls": 1}),
        lambda b: b.retry_policy(3),
        lambda b: b.tool_output_limit(100),
        lambda b: b.containment("on"),
        lambda b: b.skills_paths("one/path"),
        lambda b: b.resume("a" * 32, create="yes"),
    ],
)
def test_a_setting_of_the_wrong_type_is_one_error_everywhere(call: object) -> None:
    with pytest.raises(ConfigurationTypeError) as info:
        call(Agent.builder())  # type: ignore[operator]
    assert isinstance(info.value, TypeError)
    assert isinstance(info.value, ConfigurationError)
    assert isinstance(info.value, AntigravityError)


async def test_the_startup_bound_ends_a_harness_that_never_answers(tmp_path: Path) -> None:
    from antigravity_sdk import HarnessConnectionError

    silent = tmp_path / "localharness"
    silent.write_text("#!/bin/sh\necho 'still thinking' >&2\nexec sleep 60\n")
    silent.chmod(0o755)
    agent = (
        Agent.builder()
        .model("m", base_url="http://127.0.0.1:9/v1")
        .harness_path(silent)
        .containment(None)
        .save_dir(tmp_path / "save")
        .app_data_dir(tmp_path / "app")
        .startup_timeout(0.5)
        .build()
    )
    with pytest.raises(HarnessConnectionError, match=r"0\.5s") as info:
        await asyncio.wait_for(agent.start(), 20)
    assert "still thinking" in info.value.stderr_tail
    assert not agent.started
