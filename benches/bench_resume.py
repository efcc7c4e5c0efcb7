"""Time to `start()` an agent that resumes a long conversation, against a fresh start
(a script, not a test; the REAL harness, offline).

    .venv/bin/python benches/bench_resume.py [--calls 198] [--pairs 9]

Setup: one agent runs a turn in which the ScriptedModel asks for a cheap host-side tool
`--calls` times (a tool step each), then answers: with the prompt and the answer, 198
calls make a 200-step conversation, which is saved. Then `--pairs` paired runs,
alternating which goes first: `await agent.start()` of a fresh agent, and of an agent
built with `.resume(id)` over the same save dir (the model is already serving, so neither
counts its start). Both are stopped outside the timing. The table shows medians, the
ratio of medians and the median of the per-pair ratios, and how much of a resumed start
is the SDK turning the harness's history into `Step`s.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from antigravity_sdk import Agent, AgentBuilder, policy  # noqa: E402
from antigravity_sdk.harness import protocol  # noqa: E402
from antigravity_sdk.testing import ScriptedModel, text, tool_call  # noqa: E402


def noop(n: int) -> str:
    """Return ok."""
    return "ok"


def make_script(calls: int) -> Any:
    """Stateless: the reply depends only on how many tool calls the conversation holds."""

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        done = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
        return tool_call("noop", n=done) if done < calls else text("done")

    return script


def builder(model: ScriptedModel, root: Path) -> AgentBuilder:
    return (
        Agent.builder()
        .model(model)
        .tool(noop)
        .policies([policy.allow_all()])
        .workspaces([root])
        .save_dir(root / "save")
        .app_data_dir(root / "app")
        .turn_timeout(300)
    )


async def timed_start(agent: Agent) -> float:
    t0 = time.perf_counter()
    await agent.start()
    elapsed = time.perf_counter() - t0
    await agent.stop()
    return elapsed


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=198)
    parser.add_argument("--pairs", type=int, default=9)
    args = parser.parse_args()

    # The SDK's own share of a resumed start: turning the initialize response into Steps.
    parse_times: list[float] = []  # of initialize responses that carry a history
    receive = protocol.SessionCore.receive

    def timed_receive(self: protocol.SessionCore, frame: dict[str, Any]) -> Any:
        if not frame.get("initializeConversationResponse", {}).get("history"):
            return receive(self, frame)
        t0 = time.perf_counter()
        try:
            return receive(self, frame)
        finally:
            parse_times.append(time.perf_counter() - t0)

    protocol.SessionCore.receive = timed_receive  # type: ignore[method-assign]

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        async with ScriptedModel(make_script(args.calls)) as model:
            first = builder(model, root).build()
            async with first:
                await first.chat("call the tool")
            conversation = first.conversation_id
            probe = builder(model, root).resume(conversation).build()
            async with probe:
                steps = len(probe.history)
            fresh_times: list[float] = []
            resume_times: list[float] = []
            parse_times.clear()
            for pair in range(args.pairs):
                fresh = builder(model, root).build()
                resumed = builder(model, root).resume(conversation).build()
                if pair % 2:
                    resume_times.append(await timed_start(resumed))
                    fresh_times.append(await timed_start(fresh))
                else:
                    fresh_times.append(await timed_start(fresh))
                    resume_times.append(await timed_start(resumed))
    fresh_ms = statistics.median(fresh_times) * 1e3
    resume_ms = statistics.median(resume_times) * 1e3
    per_pair = statistics.median(r / f for r, f in zip(resume_times, fresh_times, strict=True))
    print(f"conversation: {steps} steps ({args.calls} tool calls), {args.pairs} paired starts")
    print(f"{'start()':<34}{'median ms':>10}")
    print(f"{'fresh conversation':<34}{fresh_ms:>10.1f}")
    print(f"{'resume (' + str(steps) + ' steps)':<34}{resume_ms:>10.1f}")
    print(f"{'  of which: SDK parses history':<34}{statistics.median(parse_times) * 1e3:>10.1f}")
    print(f"ratio of medians resume/fresh: {resume_ms / fresh_ms:.2f}")
    print(f"median of per-pair ratios:     {per_pair:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
