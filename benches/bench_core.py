"""The SDK's own code per tool call, without sockets: steadier than bench_e2e, and countable.

    .venv/bin/python benches/bench_core.py [--turns 20] [--instructions]

A script, not a test. It records one 50-call turn of ours against the real harness (the
turn bench_e2e measures: `run_command true`, one allowing `pre_tool_call` hook, the
allow-all policy; bench_e2e's own recorder), then replays its frames in this process
through a whole `Agent` (core, hooks, policy, answers, replies encoded) over an in-memory
`Connection` that hands over one frame per event-loop pass and waits for each hook reply
before going on, as the harness does. Printed:

* CPU-µs per tool call over the replayed turn (median of `--turns` turns), and our code
  on one PRE_TOOL callback (bench_e2e's in-process figure);
* the turn's end in the core (`response()`, pairing each tool step with its call) for
  synthetic 50-, 500- and 2000-call turns, CPU-µs per call: flat when pairing is linear;
* with `--instructions`, the first two as instructions counted by valgrind (callgrind):
  exact and repeatable on a busy machine, where seconds drift by a third from hour to
  hour. Each is the difference of two runs (1 and 1 + N turns), so start-up cancels.

Internal mode: `--replay FILE TURNS` (one replay run, one JSON line).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_e2e import calibration_us, callback_path_us, run_json, server  # noqa: E402

from antigravity_sdk import Agent, Hook, HookResult, policy  # noqa: E402
from antigravity_sdk.harness.connection import _encode  # noqa: E402
from antigravity_sdk.harness.wire import decode_frame  # noqa: E402
from antigravity_sdk.types import ToolCall  # noqa: E402


class ReplayConnection:
    """A `Connection` playing back recorded harness frames: after the prompt, one frame
    per loop pass; after a hook request, nothing until its reply has been sent."""

    def __init__(self, frames: list[bytes], conversation: str) -> None:
        self.frames = frames
        self.conversation = conversation
        self.waiting: tuple[bytes, int] | None = None  # (request id, next frame)

    async def open(self, *, storage_dir: Path, home: Path) -> None:
        return None

    def listen(self, on_frame: Any, on_lost: Any) -> None:
        self.on_frame = on_frame
        self.loop = asyncio.get_running_loop()
        init = {"initializeConversationResponse": {"cascadeId": self.conversation}}
        self.loop.call_soon(on_frame, init)

    def _pump(self, index: int) -> None:
        frame = decode_frame(self.frames[index])
        if "callHookRequest" in frame:  # set first: the answer may be sent at once
            self.waiting = (frame["callHookRequest"]["requestId"].encode(), index + 1)
        elif index + 1 < len(self.frames):
            self.loop.call_soon(self._pump, index + 1)
        self.on_frame(frame)

    async def send(self, frame: dict[str, Any]) -> None:
        data = _encode(frame).encode()  # what the real connection encodes
        if "userInput" in frame:
            self.loop.call_soon(self._pump, 0)
        elif self.waiting is not None and self.waiting[0] in data:
            index, self.waiting = self.waiting[1], None
            if index < len(self.frames):
                self.loop.call_soon(self._pump, index)
        elif "sessionEndRequest" in frame:
            self.loop.call_soon(self.on_frame, {"sessionEndResponse": {}})

    async def close(self) -> None:
        return None

    def stderr_tail(self) -> str:
        return ""


class Allow(Hook):
    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        return HookResult.ALLOWED


def load_turn(path: Path) -> tuple[list[bytes], str, int]:
    """The recorded turn's incoming text frames (bench_e2e's format), its conversation
    id and its tool calls."""
    recorded = json.loads(path.read_text())
    frames = [
        step["frame"].encode()
        for step in recorded["steps"]
        if "frame" in step and step["text"] and "sessionEndResponse" not in step["frame"]
    ]
    conversation = next(
        json.loads(f)["stepUpdate"]["cascadeId"] for f in frames if b'"stepUpdate"' in f
    )
    return frames, conversation, recorded["calls"]


async def replay(path: Path, turns: int) -> dict[str, Any]:
    frames, conversation, calls = load_turn(path)
    with tempfile.TemporaryDirectory(prefix="bench-core-") as tmp:
        agent = (
            Agent.builder()
            .connection(ReplayConnection(frames, conversation))
            .model("replayed", base_url="http://127.0.0.1:9/v1")  # never called
            .hook(Allow())
            .policies([policy.allow_all()])
            .workspaces([tmp])
            .build()
        )
        per_call = []
        async with agent:
            await agent.chat("go")  # warm
            for _ in range(turns):
                cpu0 = time.thread_time_ns()
                response = await agent.chat("go")
                per_call.append((time.thread_time_ns() - cpu0) / calls / 1000)
            assert response.text.strip().endswith("done"), response.text
    return {"calls": calls, "frames": len(frames), "per_call_us": per_call}


def instructions(args: list[str]) -> int:
    """Instructions valgrind counts for `python bench_core.py ARGS`."""
    valgrind = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    out = subprocess.run(
        [*valgrind, sys.executable, str(HERE / "bench_core.py"), *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONHASHSEED="0"),
        check=True,
    )
    line = next(x for x in out.stderr.splitlines() if "Collected" in x)
    return int(line.split()[-1])


def record(path: Path) -> None:
    """One 50-call turn of ours against the real harness, recorded by bench_e2e."""
    from antigravity_sdk.harness.install import find_harness

    env = dict(os.environ, ANTIGRAVITY_HARNESS_PATH=str(find_harness()))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    env.pop("GEMINI_API_KEY", None)
    with server(["--serve", "50"], env) as url:
        worker = ["--worker", "ours", "asyncio", "--model-url", url, "--calls", "50"]
        run_json([*worker, "--record", str(path)], env)


TURN_END_CALLS = (50, 500, 2000)


def turn_end_us(calls: int, runs: int = 5) -> float:
    """The core's turn end on a synthetic turn of `calls` distinct commands, each asked
    at PRE_TOOL and then run as a step: `response()`, which pairs every tool step with the
    call it ran (median of `runs`, CPU-µs per call)."""
    from antigravity_sdk.harness.protocol import SessionCore

    frames = []
    for n in range(1, calls + 1):
        command = f"echo {n}"
        pre = {
            "toolName": "run_command",
            "argumentsJson": json.dumps({"CommandLine": command, "Cwd": "/ws"}),
            "callId": f"call_{n}",
            "trajectoryId": "T",
        }
        frames.append({"callHookRequest": {"preToolArgs": pre, "type": "LIFECYCLE_HOOK_PRE_TOOL"}})
        step = {"commandLine": command, "workingDir": "/ws", "exitCode": 0}
        frames.append(
            {
                "stepUpdate": {
                    "trajectoryId": "T",
                    "stepIndex": n,
                    "state": "STATE_DONE",
                    "source": "SOURCE_MODEL",
                    "target": "TARGET_ENVIRONMENT",
                    "runCommand": step,
                }
            }
        )
    samples = []
    for _ in range(runs):
        core = SessionCore()
        core.receive({"initializeConversationResponse": {"cascadeId": "T"}})
        core.user_input("go", streaming=False)
        for frame in frames:
            core.receive(frame)
        began = time.thread_time_ns()
        steps = core.response().steps
        samples.append((time.thread_time_ns() - began) / calls / 1000)
        paired = [s.tool_call.id for s in steps if s.tool_call]
        assert paired == [f"call_{n}" for n in range(1, calls + 1)]
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--instructions", action="store_true", help="count with valgrind too")
    parser.add_argument("--replay", nargs=2, metavar=("FILE", "TURNS"), help=argparse.SUPPRESS)
    parser.add_argument("--callback", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.replay:
        print(json.dumps(asyncio.run(replay(Path(args.replay[0]), int(args.replay[1])))))
        return 0
    if args.callback is not None:
        callback_path_us(args.callback)
        return 0

    with tempfile.TemporaryDirectory(prefix="bench-core-") as tmp:
        turn = Path(tmp) / "turn.json"
        record(turn)
        result = asyncio.run(replay(turn, args.turns))
        calls = result["calls"]
        print(f"machine: sum(range(1000)) takes {calibration_us():.1f} CPU-µs (a laptop: ~8-10)")
        print(f"recorded turn: {calls} tool calls, {result['frames']} frames in")
        rows = [
            ("whole stack per tool call, replayed turn", statistics.median(result["per_call_us"])),
            ("our code per PRE_TOOL callback", callback_path_us(20000)),
        ]
        counted: list[float | None] = [None, None]
        if args.instructions and shutil.which("valgrind"):
            n = 5
            base = instructions(["--replay", str(turn), "1"])
            more = instructions(["--replay", str(turn), str(1 + n)])
            counted[0] = (more - base) / (n * calls)
            base = instructions(["--callback", "10"])
            more = instructions(["--callback", "1010"])
            counted[1] = (more - base) / 5000  # 5 batches of the extra 1000 rounds
        print(f"\n{'figure':44} {'CPU-µs':>10} {'instructions':>14}")
        for (name, us), count in zip(rows, counted, strict=True):
            shown = f"{count / 1000:.0f}k" if count is not None else "-"
            print(f"{name:44} {us:10.1f} {shown:>14}")
        print("\nturn end (the response built from the turn's steps), µs per tool call")
        for n in TURN_END_CALLS:
            print(f"  {n:5d}-call turn  {turn_end_us(n):8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
