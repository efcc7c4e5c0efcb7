"""Gemini model options, and Vertex AI, seen from the endpoint's side (offline).

`model_options()` sets how much a Gemini model thinks, its output limit and tier, extra
HTTP headers, and another API root (`endpoint_url`: a proxy or gateway). `vertex_ai()`
calls the model on Vertex AI instead of the Gemini API. Here the API is a loopback
`GeminiStub`, which records what the harness sends.

    python examples/model_options.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from antigravity_sdk import Agent, ThinkingLevel
from antigravity_sdk.testing import GeminiStub


async def main() -> int:
    workspace = Path(tempfile.mkdtemp())
    async with GeminiStub(["Paris."]) as gemini, GeminiStub(["Paris."]) as vertex:
        on_gemini = (
            Agent.builder()
            .model("gemini-3.8-flash", api_key="demo-key")
            .model_options(
                thinking_level=ThinkingLevel.LOW,
                max_output_tokens=1024,
                headers={"X-Team": "geo"},
                endpoint_url=gemini.url,
            )
            .workspaces([workspace])
            .build()
        )
        on_vertex = (
            Agent.builder()
            .vertex_ai("my-project", "europe-west4")
            .model_options(thinking_level="high", endpoint_url=vertex.url)
            .workspaces([workspace])
            .build()
        )
        for agent in (on_gemini, on_vertex):
            async with agent:
                print("answer:", (await agent.chat("Capital of France?")).text)
    sent = gemini.requests[0]
    print("Gemini API:", sent.path)
    print("  generationConfig:", sent.body["generationConfig"])
    print("  X-Team header:", sent.headers.get("x-team"))
    print("Vertex AI: ", vertex.requests[0].path)
    ok = (
        sent.body["generationConfig"]["maxOutputTokens"] == 1024
        and sent.headers.get("x-team") == "geo"
        and "/projects/my-project/locations/europe-west4/" in vertex.requests[0].path
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
