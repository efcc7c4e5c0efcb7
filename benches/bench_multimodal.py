"""Memory cost of sending an image through the REAL harness (a script, not a test).

    .venv/bin/python benches/bench_multimodal.py [--mb 10] [--reps 5]

Each measurement runs in a fresh process that starts an agent (the ScriptedModel runs in
another process, so its parsing of the request is not counted), runs a small text turn,
builds the prompt, resets the kernel's peak-RSS mark (`/proc/self/clear_refs`), runs one
turn and reports VmHWM minus the RSS just before the turn: the memory the turn added at
its peak. The image is already in memory when the turn starts (it is the caller's).

Rows:
* text: a text prompt (the baseline cost of a turn);
* image: text + an `--mb` MB JPEG, sent as the SDK sends it (base64 encoded in 1 MiB
  fragments while the WebSocket message goes out);
* image, one-shot JSON: the same frame encoded as one JSON string first (base64 text,
  then `json.dumps`, then UTF-8: what a plain `json.dumps(frame)` send costs);
* image + pre_turn hook: with a `pre_turn` hook the harness echoes the whole user input,
  image included, back in its hook request, which the SDK receives and parses.

Internal modes: `--serve` serves a ScriptedModel (prints its base URL, runs until stdin
closes); `--worker MODE` runs one measurement and prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gc
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

MODES = ("text", "image", "image, one-shot JSON", "image + pre_turn hook")


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> None:
    """Reset VmHWM to the current RSS (Linux: writing 5 to clear_refs)."""
    Path("/proc/self/clear_refs").write_text("5")


async def _serve() -> None:
    from antigravity_sdk.testing import ScriptedModel

    async with ScriptedModel(lambda messages, tools: "ok") as model:
        print(model.base_url, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


async def _worker(mode: str, base_url: str, size: int) -> dict[str, Any]:
    from antigravity_sdk import Agent, Hook, HookResult, Image
    from antigravity_sdk.harness.protocol import SessionCore

    class PreTurn(Hook):
        async def pre_turn(self) -> HookResult:
            return HookResult.ALLOWED

    root = Path(tempfile.mkdtemp())
    builder = Agent.builder().model("scripted-model", base_url=base_url).workspaces([root])
    builder.save_dir(root / "save").app_data_dir(root / "app").turn_timeout(120)
    if mode == "image + pre_turn hook":
        builder.hook(PreTurn())
    agent = builder.build()
    if mode == "image, one-shot JSON":
        streamed = SessionCore.user_input

        def one_shot(self: SessionCore, prompt: Any, *, streaming: bool = True) -> Any:
            frame = streamed(self, prompt, streaming=streaming)
            for part in frame["userInput"]["parts"]:
                if "media" in part:
                    part["media"]["data"] = base64.b64encode(part["media"]["data"].data).decode()
            return dict(frame)  # a plain dict: sent as one json.dumps string

        SessionCore.user_input = one_shot  # type: ignore[method-assign]
    async with agent:
        await agent.chat("warm up")
        if mode == "text":
            prompt: Any = "describe the weather " * 10
        else:
            data = b"\xff\xd8\xff" + bytes(size - 3)
            prompt = ["describe this", Image.from_bytes(data, "image/jpeg")]
        gc.collect()
        _reset_peak()
        before = _status_kb("VmRSS")
        response = await agent.chat(prompt)
        peak = _status_kb("VmHWM")
    assert response.text == "ok", response.text
    return {"added_kb": peak - before}


def _run_worker(mode: str, base_url: str, size: int) -> int:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", mode, "--url", base_url, "--size", str(size)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"worker {mode!r} failed:\n{out.stderr[-2000:]}")
    result: dict[str, int] = json.loads(out.stdout.strip().splitlines()[-1])
    return result["added_kb"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=10.0, help="image size in MB (10^6 bytes)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve())
        return 0
    if args.worker:
        print(json.dumps(asyncio.run(_worker(args.worker, args.url, args.size))), flush=True)
        return 0

    size = int(args.mb * 1_000_000)
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().decode().strip()
        added = {
            mode: [_run_worker(mode, base_url, size) for _ in range(args.reps)] for mode in MODES
        }
    finally:
        server.communicate(timeout=10)  # closes its stdin: the model stops

    mib = 1024
    print(f"\npeak RSS added by one turn, median of {args.reps} fresh processes")
    print(f"image: {size / 1e6:.1f} MB (base64: {4 * -(-size // 3) / 1e6:.1f} MB)\n")
    header = f"{'prompt':<24} {'added (MiB)':>12} {'x image size':>13}"
    print(header)
    print("-" * len(header))
    for mode in MODES:
        median = statistics.median(added[mode])
        ratio = median * 1024 / size
        print(f"{mode:<24} {median / mib:>12.1f} {ratio:>13.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
