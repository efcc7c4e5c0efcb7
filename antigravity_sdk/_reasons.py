"""`StopReason`, apart so that `errors` (imported with the package) stays light."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["StopReason"]


class StopReason(StrEnum):
    """Why a turn ended. A returned `ChatResponse` carries `FINISHED`, a budget's reason
    or `UNKNOWN`; a `TurnError` carries one of the others (`exc.stop_reason`)."""

    FINISHED = "finished"  # the model answered
    MAX_MODEL_CALLS = "max_model_calls"  # the Budget ran out (the harness stopped the turn)
    MAX_TOOL_CALLS = "max_tool_calls"
    MAX_INPUT_TOKENS = "max_input_tokens"
    MAX_OUTPUT_TOKENS = "max_output_tokens"
    MAX_TOTAL_TOKENS = "max_total_tokens"
    UNKNOWN = "unknown"  # a stop reason this SDK does not know (a newer harness)
    QUOTA_EXHAUSTED = "quota_exhausted"  # the model API's quota (with TurnFailedError)
    ERROR = "error"  # TurnFailedError: the harness ended the turn with an error
    CANCELLED = "cancelled"  # TurnCancelledError: Agent.cancel()
    TIMEOUT = "timeout"  # TurnTimeoutError: past turn_timeout
    DENIED = "denied"  # TurnDeniedError: a pre_turn hook
