"""Structured output: the harness's `finish` tool, described by a pydantic model.

With `HarnessConfig.finish_tool_schema_json` set, the harness offers the model a tool
named `finish` whose parameters are that JSON schema; a call whose arguments do not match
the schema is refused by the harness itself, which tells the model why and lets it try
again (5 attempts in all, measured on 0.1.22), and a call that matches ends the turn with
a `finish` step holding the arguments as JSON. The schema is fixed for the session, so
the output type is the agent's (`AgentBuilder.output_type`), not a turn's.

The JSON schema cannot say everything a model checks (validators, for one), so
`OutputGuard` validates each `finish` call with pydantic before any other hook sees it,
and denies one that does not validate with pydantic's errors: the model can correct
it within the same turn. `structured_output()` then validates the finished answer.
"""

from __future__ import annotations

import json
from typing import Any, Final

from pydantic import BaseModel, RootModel, ValidationError

from .errors import OutputValidationError
from .hooks import Hook
from .types import ChatResponse, HookResult, ToolCall

__all__ = ["FINISH_TOOL", "OutputGuard", "check_output_type", "output_schema"]

FINISH_TOOL: Final = "finish"
"""The name of the harness's structured-output tool (offered only with a schema)."""

_MAX_ERRORS_SHOWN: Final = 2000  # characters of pydantic's errors in a denial


def check_output_type(output_type: object) -> type[BaseModel]:
    """`output_type` if it is a pydantic model class with fields, else a `TypeError`
    that says what is accepted."""
    if not (isinstance(output_type, type) and issubclass(output_type, BaseModel)):
        raise TypeError(
            "output_type must be a pydantic BaseModel subclass (the model's answer is "
            f"validated into it), got {output_type!r}"
        )
    if issubclass(output_type, RootModel):
        raise TypeError(
            f"output_type {output_type.__name__} is a RootModel: the finish tool's "
            "arguments are an object, so use a BaseModel with fields"
        )
    return output_type


def output_schema(output_type: object) -> str:
    """The finish tool's parameter schema for `output_type`, as a JSON string.

    Raises `TypeError` for anything but a model class whose schema is a JSON object.
    """
    model = check_output_type(output_type)
    try:
        schema = model.model_json_schema()
    except Exception as exc:  # pydantic cannot describe some field types
        raise TypeError(
            f"output_type {model.__name__} has no JSON schema for the finish tool: {exc}"
        ) from None
    if schema.get("type") != "object":
        raise TypeError(
            f"output_type {model.__name__}'s schema is not a JSON object "
            f"(type {schema.get('type')!r}); the finish tool's arguments must be one"
        )
    return json.dumps(schema)


def _summary(exc: ValidationError) -> str:
    lines = [
        f"{'.'.join(map(str, error['loc'])) or '(root)'}: {error['msg']}"
        for error in exc.errors(include_url=False)
    ]
    text = "; ".join(lines)
    return text if len(text) <= _MAX_ERRORS_SHOWN else text[:_MAX_ERRORS_SHOWN] + " …"


class OutputGuard(Hook):
    """Validates the model's `finish` calls before any other hook (the SDK puts it
    first): one that does not validate is denied with pydantic's errors, so the model
    corrects it in the same turn and no hook or policy is asked about it. It remembers
    the turn's last finish call, to explain a turn that ended without one."""

    def __init__(self, output_type: type[BaseModel]) -> None:
        self.output_type = output_type
        self._rejected: tuple[str, ValidationError] | None = None
        self._passed: str | None = None

    def begin_turn(self) -> None:
        self._rejected = self._passed = None

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        if tool_call.name != FINISH_TOOL or tool_call.server_name is not None:
            return HookResult.allowed()
        raw = json.dumps(tool_call.args)
        try:
            self.output_type.model_validate_json(raw)
        except ValidationError as exc:
            self._rejected = (raw, exc)
            return HookResult.denied(
                f"the answer does not validate as {self.output_type.__name__}: "
                f"{_summary(exc)}. Call finish again with corrected arguments."
            )
        self._passed = raw
        return HookResult.allowed()

    def structured_output(
        self, response: ChatResponse, conversation_id: str, *, required: bool
    ) -> Any:
        """The turn's answer validated into the output type, from the agent's own
        `finish` step (a subagent's does not count). Without one: None, or with
        `required` an `OutputValidationError` saying why, with the raw answer."""
        name = self.output_type.__name__
        finished = [
            step
            for step in response.steps
            if step.kind == "finish"
            and step.state == "done"
            and step.trajectory_id == conversation_id
        ]
        if finished:
            raw = finished[-1].output or ""
            try:
                return self.output_type.model_validate_json(raw)
            except ValidationError as exc:
                raise OutputValidationError(
                    f"the model's answer does not validate as {name}: {_summary(exc)}",
                    raw=raw,
                    response=response,
                    errors=exc,
                ) from exc
        if not required:
            return None
        if self._rejected is not None and self._passed is None:
            raw, errors = self._rejected
            raise OutputValidationError(
                f"the model's answer does not validate as {name} (its finish call was "
                f"refused and the turn ended without another): {_summary(errors)}",
                raw=raw,
                response=response,
                errors=errors,
            )
        if self._passed is not None:
            raise OutputValidationError(
                f"the model's finish call validated as {name} but a hook or policy denied "
                "it, and the turn ended without a structured answer",
                raw=self._passed,
                response=response,
            )
        raise OutputValidationError(
            f"the turn ended without a structured answer: the model did not call the "
            f"finish tool (it answered {response.text[:200]!r})",
            raw=response.text,
            response=response,
        )
