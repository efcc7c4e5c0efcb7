"""The error tree: every public exception in it, drawn in the module docstring, with the
built-in bases that keep `except ValueError` / `TimeoutError` / `RuntimeError` working."""

from __future__ import annotations

import antigravity_sdk
from antigravity_sdk import errors


def test_every_public_error_is_in_the_tree_and_in_the_drawing() -> None:
    doc = errors.__doc__ or ""
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert name in doc, f"{name} is not drawn in the errors docstring"
        assert getattr(antigravity_sdk, name) is cls, f"{name} is not re-exported"
        if name != "ToolExecutionError":
            assert issubclass(cls, errors.AntigravityError), name


def test_built_in_bases_keep_old_handlers_working() -> None:
    assert issubclass(errors.ConfigurationError, ValueError)
    assert issubclass(errors.PolicyError, errors.ConfigurationError)
    assert issubclass(errors.TurnTimeoutError, TimeoutError)
    assert issubclass(errors.TurnTimeoutError, errors.TurnError)
    assert issubclass(errors.TurnDeniedError, errors.TurnError)
    assert issubclass(errors.AgentStateError, RuntimeError)
    assert issubclass(errors.HarnessConnectionError, errors.HarnessError)
    assert issubclass(errors.HarnessInstallError, errors.HarnessNotFoundError)
    assert not issubclass(errors.ToolExecutionError, errors.AntigravityError)


def test_turn_failed_keeps_the_cause() -> None:
    error = errors.TurnFailedError("model endpoint unreachable")
    assert error.cause == "model endpoint unreachable"
    assert str(error) == "the turn failed: model endpoint unreachable"
