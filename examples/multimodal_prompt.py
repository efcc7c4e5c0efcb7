"""Send text with images, let a hook govern what goes out, and see a bad prompt refused
before anything is sent (offline).

A prompt is text, an `Image` / `Document`, or a sequence of them. Parts come from a file
(`Image.from_path`), from bytes (`Image.from_bytes(data, "image/png")`) or from a URL
(`await Image.from_url(url)`, downloaded by the SDK, bounded in time and size). A
`pre_turn` hook finds the prompt's text under `"prompt"` and its parts under
`"prompt_parts"` in `current_context()`.

    python examples/multimodal_prompt.py
"""

from __future__ import annotations

import asyncio
import base64
import tempfile
from pathlib import Path
from typing import Any

from antigravity_sdk import (
    Agent,
    Document,
    Hook,
    HookResult,
    Image,
    PromptError,
    TurnDeniedError,
    current_context,
)
from antigravity_sdk.testing import ScriptedModel

# A 1x1 PNG.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def describe(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """The scripted model answers with what it received in the last user message."""
    content = messages[-1].get("content")
    parts = content if isinstance(content, list) else []
    images = [p for p in parts if p.get("type") == "image_url"]
    return f"I received {len(images)} image(s)."


class ImageBudget(Hook):
    """Denies a turn whose images add up to more than `limit` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    async def pre_turn(self) -> HookResult:
        parts = current_context().get("prompt_parts", ())
        size = sum(len(p.data) for p in parts if isinstance(p, Image))
        if size > self.limit:
            return HookResult(allow=False, message=f"{size} bytes of images, over budget")
        return HookResult.ALLOWED


async def main() -> int:
    workspace = Path(tempfile.mkdtemp())
    (workspace / "pixel.png").write_bytes(PIXEL)
    agent = (
        Agent.builder()
        .model(ScriptedModel(describe))
        .hook(ImageBudget(limit=100_000))
        .workspaces([workspace])
        .build()
    )
    outcomes = []
    async with agent:
        from_file = Image.from_path(workspace / "pixel.png", description="a pixel")
        from_bytes = Image.from_bytes(PIXEL, "image/png")
        response = await agent.chat(["What are these?", from_file, from_bytes])
        print("model:", response.text)
        outcomes.append(response.text)

        big = Image.from_bytes(b"\xff\xd8\xff" + bytes(200_000), "image/jpeg")
        try:
            await agent.chat(["And this one?", big])
        except TurnDeniedError as exc:
            print("denied by the hook:", exc)
            outcomes.append("denied")

        # Refused before sending: this endpoint is OpenAI-compatible, and the harness
        # drops documents on the way there.
        try:
            await agent.chat(["Summarise", Document.from_bytes(b"%PDF-1.4", "application/pdf")])
        except PromptError as exc:
            print("refused:", exc)
            outcomes.append("refused")

        response = await agent.chat("Still there?")
        print("model:", response.text)
        outcomes.append(response.text)
    expected = ["I received 2 image(s).", "denied", "refused", "I received 0 image(s)."]
    return 0 if outcomes == expected else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
