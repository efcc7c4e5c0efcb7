"""Get a typed answer instead of text: `output_type` (offline).

`.output_type(Model)` makes the harness offer the model a `finish` tool whose arguments
are `Model`'s JSON schema; `chat(prompt, output_type=Model)` returns the answer validated
into `response.output`. An answer that does not validate is refused with the reasons,
and the model tries again within the same turn; a turn that ends without a valid answer
raises `OutputValidationError` with the raw answer attached.

    python examples/structured_output.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from pydantic import BaseModel, field_validator

from antigravity_sdk import Agent, OutputValidationError
from antigravity_sdk.testing import ScriptedModel, finish


class Forecast(BaseModel):
    city: str
    celsius: int

    @field_validator("celsius")
    @classmethod
    def plausible(cls, value: int) -> int:
        if not -90 <= value <= 60:
            raise ValueError("no city on Earth is that hot or cold")
        return value


async def main() -> int:
    workspace = Path(tempfile.mkdtemp())
    model = ScriptedModel(
        [
            finish(city="Paris", celsius=451),  # refused: the validator rejects it
            finish(city="Paris", celsius=21),  # the model corrects it in the same turn
            "It is warm in Paris.",  # a text answer: no structured output
        ]
    )
    agent = Agent.builder().model(model).output_type(Forecast).workspaces([workspace]).build()
    async with agent:
        response = await agent.chat("What is the weather in Paris?", output_type=Forecast)
        forecast = response.output
        print(f"{forecast!r} (type {type(forecast).__name__})")
        try:
            await agent.chat("And tomorrow?", output_type=Forecast)
        except OutputValidationError as exc:
            print(f"no structured answer: {exc} (raw: {exc.raw!r})")
            failed = exc.raw == "It is warm in Paris."
        else:
            failed = False
    ok = isinstance(forecast, Forecast) and forecast.celsius == 21 and failed
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
