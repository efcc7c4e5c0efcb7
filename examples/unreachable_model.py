"""A model that cannot be reached fails fast and says why (offline).

The Gemini API is pointed at a local port nothing listens on. The harness retries as the
`RetryPolicy` says — each retry is logged as a WARNING and streamed as an `error` chunk —
then the turn fails with `TurnFailedError`, whose `cause` is the harness's own message.
Without a policy the SDK's default gives up after about 7 s; the harness alone would
retry for many minutes.

    python examples/unreachable_model.py
"""

from __future__ import annotations

import asyncio
import socket
import tempfile
import time
from pathlib import Path

from antigravity_sdk import Agent, RetryPolicy, TurnFailedError, policy


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def main() -> int:
    workspace = Path(tempfile.mkdtemp())
    agent = (
        Agent.builder()
        .model("gemini-3.8-flash", api_key="unused")
        .model_options(endpoint_url=f"http://127.0.0.1:{unused_port()}")
        .retry_policy(RetryPolicy(max_retries=2, initial_backoff=0.2))
        .policies([policy.allow_all()])
        .workspaces([workspace])
        .build()
    )
    async with agent:
        started = time.monotonic()
        try:
            async for chunk in agent.stream("hello?"):
                if chunk.type == "error":
                    print(f"{time.monotonic() - started:5.2f}s  harness: {chunk.error}")
        except TurnFailedError as exc:
            print(f"{time.monotonic() - started:5.2f}s  failed ({exc.stop_reason}): {exc.cause}")
            return 0
    return 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
