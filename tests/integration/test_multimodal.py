"""Multimodal prompts against the real harness: what reaches an OpenAI-compatible model,
what hooks see, and every refused prompt refused before anything is sent."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from antigravity_sdk import (
    Agent,
    Document,
    HarnessConnectionError,
    Hook,
    HookResult,
    Image,
    PromptError,
    TurnDeniedError,
    TurnFailedError,
    current_context,
)
from antigravity_sdk import media as media_module
from antigravity_sdk.harness import wire
from antigravity_sdk.media import MAX_PROMPT_BYTES

from .conftest import AgentFactory, Workspace
from .test_examples import load_example

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
JPEG = b"\xff\xd8\xff\xe0" + bytes(16)
PDF = b"%PDF-1.4\n%%EOF\n"


def _sent_frames(agent: Agent) -> list[dict[str, Any]]:
    """Record every frame the agent sends from now on."""
    conn = agent._session.conn
    assert conn is not None
    sent: list[dict[str, Any]] = []
    send = conn.send

    async def recording(frame: dict[str, Any]) -> None:
        sent.append(frame)
        await send(frame)

    conn.send = recording  # type: ignore[method-assign]
    return sent


async def test_images_from_a_path_and_from_bytes_reach_the_model(
    make_agent: AgentFactory, env: Workspace
) -> None:
    (env.ws / "pixel.png").write_bytes(PNG)
    agent, model = make_agent(["a pixel and a photo", "streamed"])
    async with agent:
        image = Image.from_path(env.ws / "pixel.png")
        photo = Image.from_bytes(JPEG, "image/jpeg", description="a photo")
        response = await agent.chat(["Compare ", image, "and ", photo])
        assert response.text == "a pixel and a photo"
        chunks = [c.text async for c in agent.stream([image, "again"])]
    first, second = model.requests
    assert first.images == [("image/png", PNG), ("image/jpeg", JPEG)]
    assert first.image_urls[0].startswith("data:image/png;base64,iVBOR")
    # The harness puts the text parts together as they are, then the images.
    user = first.messages[-1]["content"]
    assert "Compare and " in user[0]["text"]
    assert [part["type"] for part in user] == ["text", "image_url", "image_url"]
    assert "".join(chunks) == "streamed"
    # The history keeps the earlier images; the new turn's image comes last.
    assert second.images == [("image/png", PNG), ("image/jpeg", JPEG), ("image/png", PNG)]


class _SeesPrompts(Hook):
    """Denies a prompt carrying an image larger than `limit` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.seen: list[tuple[str, tuple[Any, ...]]] = []

    async def pre_turn(self) -> HookResult:
        ctx = current_context()
        parts = ctx.get("prompt_parts")
        self.seen.append((ctx.get("prompt"), parts))
        if any(isinstance(p, Image) and len(p.data) > self.limit for p in parts):
            return HookResult(allow=False, message="images over the limit are not allowed")
        return HookResult.ALLOWED


async def test_pre_turn_hooks_see_the_text_and_the_parts_and_can_deny_media(
    make_agent: AgentFactory,
) -> None:
    hook = _SeesPrompts(limit=1000)
    agent, model = make_agent(["small is fine", "text is fine"], hooks=[hook])
    small = Image.from_bytes(PNG, "image/png")
    large = Image.from_bytes(JPEG + bytes(5000), "image/jpeg")
    async with agent:
        assert (await agent.chat(["look at ", small, "this"])).text == "small is fine"
        with pytest.raises(TurnDeniedError, match="images over the limit"):
            await agent.chat(["and this ", large])
        assert (await agent.chat("plain")).text == "text is fine"
    assert hook.seen == [
        ("look at this", ("look at ", small, "this")),
        ("and this ", ("and this ", large)),
        ("plain", ("plain",)),
    ]
    assert [r.images for r in model.requests] == [[("image/png", PNG)], [("image/png", PNG)]]


def _bad_prompts(ws: Path) -> Iterator[tuple[str, Callable[[], Any], type[Exception], str]]:
    """(what, prompt builder, error, message): the builder may raise itself."""
    image = Image.from_bytes(PNG, "image/png")
    half = Image.from_bytes(JPEG + bytes(MAX_PROMPT_BYTES // 2), "image/jpeg")
    yield "an int part", lambda: ["x", 42], TypeError, "prompt part 1 .* got int"
    yield "raw bytes", lambda: PNG, TypeError, "got bytes .*Image.from_bytes"
    yield "bytes part", lambda: ["x", PNG], TypeError, "part 1 .* got bytes"
    yield "a dict", lambda: {"text": "x"}, TypeError, "got dict"
    yield "nested list", lambda: [[image]], TypeError, "part 0 .* got list"
    yield "None", lambda: None, TypeError, "got NoneType"
    yield "empty sequence", lambda: [], PromptError, "empty sequence"
    yield "missing file", lambda: [Image.from_path(ws / "nope.png")], PromptError, "No such"
    yield "directory", lambda: [Image.from_path(ws)], PromptError, "Is a directory"
    yield "unsupported MIME", lambda: [Image.from_bytes(PNG, "image/gif")], PromptError, "gif"
    yield "mislabelled", lambda: [Image.from_bytes(PNG, "image/jpeg")], PromptError, "not image"
    yield "empty data", lambda: [Image.from_bytes(b"", "image/png")], PromptError, "no data"
    yield (
        "one oversize part",
        lambda: [Image.from_bytes(JPEG + bytes(MAX_PROMPT_BYTES), "image/jpeg")],
        PromptError,
        "more than the 26148864 bytes",
    )
    yield "oversize in total", lambda: [half, half], PromptError, "too large"
    yield (
        "oversize text",
        lambda: "x" * (MAX_PROMPT_BYTES // 2 + 1),
        PromptError,
        "too large: 0 bytes of media",
    )
    yield (
        "a document for an OpenAI-compatible endpoint",
        lambda: ["read", Document.from_bytes(PDF, "application/pdf")],
        PromptError,
        "drops documents",
    )
    yield "a lone surrogate", lambda: [image, "a\ud800"], ValueError, "part 1 is not valid"


async def test_bad_prompts_are_refused_before_anything_is_sent(
    make_agent: AgentFactory, env: Workspace
) -> None:
    agent, model = make_agent(["after the refusals"], turn_timeout=5.0)
    async with agent:
        sent = _sent_frames(agent)
        for what, build, error, match in _bad_prompts(env.ws):
            start = time.monotonic()
            with pytest.raises(error, match=match):
                await agent.chat(build())
            try:
                prompt = build()
            except error:
                continue  # refused as it was built
            with pytest.raises(error, match=match):
                async for _ in agent.stream(prompt):
                    pass
            assert time.monotonic() - start < 1.0, what
        assert sent == []
        response = await agent.chat([Image.from_bytes(PNG, "image/png"), "still usable?"])
    assert response.text == "after the refusals"
    assert len(model.requests) == 1 and model.requests[0].images == [("image/png", PNG)]


async def test_the_size_cap_keeps_the_session_alive(
    make_agent: AgentFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prompt at the cap reaches the model intact. Past about 25 MiB (media plus twice
    the text) the harness fails the turn and then closes the session: that is what the
    cap prevents, shown here with the SDK's check lifted."""
    text = "big " * 1000
    exact = JPEG + bytes(MAX_PROMPT_BYTES - 2 * len(text) - len(JPEG))
    agent, model = make_agent(["all of it", "never"], turn_timeout=60.0)
    async with agent:
        assert (await agent.chat([text, Image.from_bytes(exact, "image/jpeg")])).text
        assert model.requests[0].images == [("image/jpeg", exact)]
        with pytest.raises(PromptError, match="too large"):
            await agent.chat([text + "!", Image.from_bytes(exact, "image/jpeg")])
        assert (await agent.chat("small")).text == "never"

    agent, model = make_agent(["never"], turn_timeout=60.0)
    over = JPEG + bytes(25 * 1024 * 1024 - len(JPEG))
    monkeypatch.setattr(media_module, "MAX_PROMPT_BYTES", 1 << 30)
    async with agent:
        with pytest.raises(TurnFailedError, match="zero chat messages"):
            await agent.chat(["over", Image.from_bytes(over, "image/jpeg")])
        with pytest.raises(HarnessConnectionError, match="closed the connection"):
            await agent.chat("the session is gone")
    assert model.requests == []


async def test_cancelling_while_an_image_is_sent_keeps_the_session(
    make_agent: AgentFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The caller is cancelled between two fragments of the user input: the message
    still goes out whole (a cut one would end the connection), and the session goes on."""
    agent, model = make_agent(["first", "second"])
    mid_send = asyncio.Event()
    encode = wire.encode_fragments

    def announcing(frame: dict[str, Any]) -> Iterator[bytes]:
        for n, piece in enumerate(encode(frame)):
            if n == 2:
                mid_send.set()
            yield piece

    monkeypatch.setattr(wire, "encode_fragments", announcing)
    image = Image.from_bytes(JPEG + bytes(8_000_000), "image/jpeg")
    async with agent:
        stream: Any = agent._session.conn._stream  # type: ignore[union-attr]
        drain = stream.drain

        async def slow_reader() -> None:  # as over a real network: each fragment waits
            await asyncio.sleep(0.01)
            await drain()

        stream.drain = slow_reader
        turn = asyncio.create_task(agent.chat(["one", image]))
        await asyncio.wait_for(mid_send.wait(), 10)
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await turn
        start = time.monotonic()
        response = await agent.chat(["two", image])
        assert time.monotonic() - start < 5.0
    assert response.text in ("first", "second")
    assert all(r.images[-1] == ("image/jpeg", image.data) for r in model.requests)


async def test_multimodal_prompt_example_runs() -> None:
    assert await load_example("multimodal_prompt").main() == 0
