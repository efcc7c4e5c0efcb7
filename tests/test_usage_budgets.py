"""Stop reasons, usage by trajectory, budgets, retry policy and tool-output limits: the
settings checked before anything is sent, and the frames decoded (unit level; the
behaviour against the real harness is in tests/integration/test_usage_budgets.py)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from antigravity_sdk import (
    Agent,
    Budget,
    BudgetScope,
    CapabilitiesConfig,
    ConfigurationError,
    RetryPolicy,
    StopReason,
    ToolOutputLimit,
    TurnCancelledError,
    TurnDeniedError,
    TurnFailedError,
    TurnTimeoutError,
    UsageMetadata,
)
from antigravity_sdk.harness.config import ModelSettings, harness_config
from antigravity_sdk.harness.effects import Chunk, TurnEnded
from antigravity_sdk.harness.protocol import SessionCore

MAIN = "fdf309472cb77c8949cdb2128f70545b"
SUB = "8df7a1b2c3d4e5f60718293a4b5c254d"


def core() -> SessionCore:
    c = SessionCore()
    c.receive({"initializeConversationResponse": {"cascadeId": MAIN}})
    return c


def idle(trajectory: str = MAIN, **extra: Any) -> dict[str, Any]:
    return {
        "trajectoryStateUpdate": {"trajectoryId": trajectory, "state": "STATE_FULLY_IDLE", **extra}
    }


def usage(prompt: int, candidates: int) -> dict[str, Any]:
    counts = {
        "promptTokenCount": str(prompt),
        "candidatesTokenCount": str(candidates),
        "totalTokenCount": str(prompt + candidates),
    }
    return {"usageUpdate": {"agents": [{"trajectoryId": MAIN, "usage": counts}], "total": counts}}


def error_step(index: int, message: str, text: str) -> dict[str, Any]:
    return {
        "stepUpdate": {
            "trajectoryId": MAIN,
            "stepIndex": index,
            "state": "STATE_ERROR",
            "source": "SOURCE_SYSTEM",
            "target": "TARGET_USER",
            "errorMessage": message,
            "text": text,
        }
    }


def _config(**kwargs: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "model": ModelSettings(name="m", base_url="http://127.0.0.1:1/v1"),
        "workspaces": [Path("/tmp")],
        "app_data_dir": Path("/tmp/app"),
        "capabilities": CapabilitiesConfig(),
        "hook_events": (),
    }
    return harness_config(**(base | kwargs))["config"]


# -- settings ------------------------------------------------------------------------------


@given(st.integers(max_value=0))
def test_budget_limits_must_be_positive(value: int) -> None:
    with pytest.raises(ValidationError):
        Budget(max_total_tokens=value)


def test_budget_rejects_unknown_fields_and_scopes() -> None:
    with pytest.raises(ValidationError):
        Budget(max_tokens=5)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        Budget(scope="per_turn")  # type: ignore[arg-type]


def test_budget_goes_on_the_wire_with_its_scope() -> None:
    budget = Budget(max_tool_calls=2, max_input_tokens=10, scope=BudgetScope.FORWARD_LOOKING)
    assert _config(budget=budget)["budgetConfig"] == {
        "maxToolCalls": 2,
        "maxInputTokens": "10",
        "scope": "BUDGET_SCOPE_FORWARD_LOOKING",
    }


def test_capabilities_call_limits_merge_into_the_budget() -> None:
    wire = _config(
        capabilities=CapabilitiesConfig(max_model_calls=3), budget=Budget(max_total_tokens=9)
    )["budgetConfig"]
    assert wire == {"maxModelCalls": 3, "maxTotalTokens": "9", "scope": "BUDGET_SCOPE_LIFETIME"}


def test_a_limit_set_twice_differently_is_refused_at_build() -> None:
    builder = (
        Agent.builder()
        .model("m", base_url="http://127.0.0.1:1/v1")
        .capabilities(CapabilitiesConfig(max_tool_calls=3))
        .budget(Budget(max_tool_calls=4))
    )
    with pytest.raises(ConfigurationError, match="max_tool_calls"):
        builder.build()
    builder.budget(Budget(max_tool_calls=3)).build()  # the same value is fine


def test_builder_type_checks() -> None:
    builder = Agent.builder()
    with pytest.raises(TypeError):
        builder.budget({"max_tool_calls": 1})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        builder.retry_policy(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        builder.tool_output_limit(100)  # type: ignore[arg-type]


@given(st.floats(allow_nan=True, allow_infinity=True).filter(lambda x: not 0.001 <= x <= 4e6))
def test_retry_backoff_out_of_range_is_refused(value: float) -> None:
    with pytest.raises(ValidationError):
        RetryPolicy(initial_backoff=value)


def test_retry_policy_wire_sends_zero_explicitly() -> None:
    assert _config(retry=RetryPolicy())["retryConfig"] == {
        "apiRetry": {"maxRetries": 3, "initialSleepDurationMs": 1000}
    }
    none = RetryPolicy(max_retries=0, initial_backoff=None, max_output_retries=0)
    assert _config(retry=none)["retryConfig"] == {
        "apiRetry": {"maxRetries": 0},
        "modelOutputRetry": {"maxRetries": 0},
    }
    assert "retryConfig" not in _config(retry=None)


def test_default_agent_sends_the_bounded_retry_policy() -> None:
    assert Agent.builder()._settings.limits.retry == RetryPolicy()
    assert math.isclose(RetryPolicy().initial_backoff or 0, 1.0)


def test_tool_output_limit_strategies() -> None:
    assert _config(tool_output=ToolOutputLimit(max_tokens=5, save_full_output=True))[
        "toolOutputTruncation"
    ] == {"truncate": {"maxTokens": 5, "saveFullOutput": True}}
    error = ToolOutputLimit(max_tokens=5, on_exceed="error", error_message="no")
    assert _config(tool_output=error)["toolOutputTruncation"] == {
        "error": {"maxTokens": 5, "errorMessage": "no"}
    }
    with pytest.raises(ValidationError):
        ToolOutputLimit(max_tokens=5, on_exceed="error", save_full_output=True)
    with pytest.raises(ValidationError):
        ToolOutputLimit(max_tokens=5, error_message="only with error")
    with pytest.raises(ValidationError):
        ToolOutputLimit(max_tokens=0)


# -- frames --------------------------------------------------------------------------------


def _end(c: SessionCore, **extra: Any) -> TurnEnded:
    (ended,) = c.receive(idle(**extra))
    assert isinstance(ended, TurnEnded)
    return ended


@pytest.mark.parametrize(
    ("wire", "reason"),
    [
        (None, StopReason.FINISHED),
        ("STOP_REASON_UNSPECIFIED", StopReason.FINISHED),
        ("STOP_REASON_MAX_TOOL_CALLS_EXCEEDED", StopReason.MAX_TOOL_CALLS),
        ("STOP_REASON_QUOTA_EXHAUSTED", StopReason.QUOTA_EXHAUSTED),
        ("STOP_REASON_FROM_A_NEWER_HARNESS", StopReason.UNKNOWN),
    ],
)
def test_stop_reason_of_the_main_trajectory(wire: str | None, reason: StopReason) -> None:
    c = core()
    c.user_input("hi")
    c.receive(idle(SUB, stopReason="STOP_REASON_MAX_MODEL_CALLS_EXCEEDED", parentTrajectoryId=MAIN))
    extra = {"stopReason": wire} if wire else {}
    assert _end(c, **extra).response.stop_reason is reason
    c.user_input("again")  # a new turn starts without the old reason
    assert _end(c).response.stop_reason is StopReason.FINISHED


def test_usage_by_trajectory_per_turn_and_for_the_session() -> None:
    c = core()
    c.user_input("hi")
    c.receive(usage(100, 10))
    c.user_input("again")
    both = usage(300, 30)
    sub = {"promptTokenCount": "50", "candidatesTokenCount": "5", "totalTokenCount": "55"}
    both["usageUpdate"]["agents"].append({"trajectoryId": SUB, "usage": sub})
    c.receive(both)
    turn = _end(c).response
    assert turn.usage == UsageMetadata(
        prompt_token_count=200, candidates_token_count=20, total_token_count=220
    )
    assert turn.usage_by_trajectory[SUB].total_token_count == 55
    assert turn.usage_by_trajectory[MAIN].total_token_count == 220
    assert c.usage_by_trajectory[MAIN].total_token_count == 330


def test_resumed_conversation_starts_from_its_cumulative_usage() -> None:
    counts = {"promptTokenCount": "7", "totalTokenCount": "7"}
    c = SessionCore()
    c.receive(
        {
            "initializeConversationResponse": {
                "cascadeId": MAIN,
                "cumulativeUsage": counts,
                "trajectoryUsage": [{"trajectoryId": MAIN, "usage": counts}],
            }
        }
    )
    assert c.usage.total_token_count == 7
    assert c.usage_by_trajectory[MAIN].prompt_token_count == 7


def test_error_steps_are_logged_and_streamed_once(caplog: pytest.LogCaptureFixture) -> None:
    c = core()
    c.user_input("hi", streaming=True)
    frame = error_step(
        1, "Encountered retryable error", "Encountered retryable error (dial tcp: refused)"
    )
    (chunk,) = c.receive(frame)
    assert isinstance(chunk, Chunk) and chunk.chunk.type == "error"
    assert chunk.chunk.error == "Encountered retryable error"
    assert "refused" in chunk.chunk.text
    assert c.receive(frame) == []  # the same step again: no second chunk or warning
    assert [r.levelname for r in caplog.records] == ["WARNING"]


def test_turn_errors_carry_their_stop_reason() -> None:
    assert TurnTimeoutError("x").stop_reason is StopReason.TIMEOUT
    assert TurnCancelledError("x").stop_reason is StopReason.CANCELLED
    assert TurnDeniedError.stop_reason is StopReason.DENIED
    assert TurnFailedError("x").stop_reason is StopReason.ERROR
    assert (
        TurnFailedError("x", StopReason.QUOTA_EXHAUSTED).stop_reason is StopReason.QUOTA_EXHAUSTED
    )
