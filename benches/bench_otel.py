"""What OpenTelemetry tracing costs per tool call, and that it costs nothing when off.

A plain script (not a test): `python benches/bench_otel.py [--batch N] [--rounds N] [--base REV]`.

One tool call, as the agent dispatches it inside a turn: pre_tool_call then post_tool_call
with a fresh call id, through one hook and the PolicyEnforcer (a deny rule on another tool,
then `allow_all`). Every number is the median over `--rounds` interleaved batches of
`--batch` tool calls in one running event loop, in µs per tool call.

  off             the plain HookRunner: what an agent built without `tracing()` runs
  on, no-op API   tracing() with opentelemetry-api's no-op provider (no SDK installed)
  on, SDK         an opentelemetry-sdk TracerProvider without processors (spans made, dropped)
  on, exporter    the SDK provider with a SimpleSpanProcessor into the in-memory exporter

With `--base REV` (default: the merge base with main, when git finds it) copies of this
code and of REV's are loaded as two more packages and the "off" loop runs on each,
interleaved: the A/B that shows tracing adds nothing to the untraced path.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import itertools
import shutil
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_dispatch import Call, measure  # noqa: E402  (the same interleaved timing)
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import NoOpTracerProvider  # noqa: E402

import antigravity_sdk  # noqa: E402
from antigravity_sdk.tracing import Tracing  # noqa: E402


def runner_parts(sdk: ModuleType) -> tuple[list[Any], Any, Any]:
    """The hooks (one allowing hook, the enforcer) and the ToolCall/ToolResult classes of `sdk`."""

    class Allow(sdk.Hook):  # type: ignore[misc,name-defined]
        async def pre_tool_call(self, tool_call: Any) -> Any:
            return sdk.HookResult.ALLOWED

        async def post_tool_call(self, result: Any) -> None:
            return None

    rules = [sdk.policy.deny("run_command", name="no-shell"), sdk.policy.allow_all()]
    return [Allow(), sdk.policy.enforce(rules)], sdk.ToolCall, sdk.ToolResult


def tool_calls(runner: Any, call_cls: Any, result_cls: Any) -> Call:
    """One tool call per await, cycling through distinct ids (the real flow)."""
    items = [
        (
            call_cls(name="view_file", args={"AbsolutePath": "/tmp/x"}, id=f"c{i}"),
            result_cls(name="view_file", id=f"c{i}", result="ok"),
        )
        for i in range(256)
    ]
    cycle = itertools.cycle(items)
    dispatch = runner.dispatch

    async def run() -> None:
        call, result = next(cycle)
        await dispatch("pre_tool_call", call)
        await dispatch("post_tool_call", result)

    return run


def flat(call: Call, exporter: InMemorySpanExporter) -> Call:
    """`call`, clearing the exporter now and then: its memory stays flat."""

    async def run() -> None:
        await call()
        if len(exporter.get_finished_spans()) > 4096:
            exporter.clear()

    return run


def load_copy(source: Path, name: str) -> ModuleType:
    """A copy of the package at `source`, imported as `name`: the two sides of the A/B
    are loaded alike (measured: the package imported normally, next to OpenTelemetry, ran
    the same code some 10% slower than a copy of it)."""
    where = Path(tempfile.mkdtemp(prefix="bench_otel_"))
    shutil.copytree(source, where / name)
    sys.path.insert(0, str(where))
    return importlib.import_module(name)


def load_base(rev: str) -> ModuleType | None:
    """The package as it is at `rev`, imported as `antigravity_sdk_base`; None if git fails."""
    try:
        tar = subprocess.run(
            ["git", "archive", rev, "antigravity_sdk"],
            cwd=ROOT,
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    where = Path(tempfile.mkdtemp(prefix="bench_otel_"))
    with tarfile.open(fileobj=BytesIO(tar)) as archive:
        archive.extractall(where, filter="data")
    (where / "antigravity_sdk").rename(where / "antigravity_sdk_base")
    sys.path.insert(0, str(where))
    return importlib.import_module("antigravity_sdk_base")


def default_base() -> str:
    try:
        done = subprocess.run(
            ["git", "merge-base", "HEAD", "main"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip()


async def bench(batch: int, rounds: int, base: ModuleType | None) -> dict[str, float]:
    exporter = InMemorySpanExporter()
    exporting = TracerProvider()
    exporting.add_span_processor(SimpleSpanProcessor(exporter))
    providers = {
        "on, no-op API": NoOpTracerProvider(),
        "on, SDK": TracerProvider(),
        "on, exporter": exporting,
    }
    variants: dict[str, Call] = {}
    if base is not None:
        here = load_copy(ROOT / "antigravity_sdk", "antigravity_sdk_here")
        hooks, copy_call, copy_result = runner_parts(here)
        off = here.HookRunner(hooks)
        off.begin_turn("bench")
        variants["off, copy"] = tool_calls(off, copy_call, copy_result)
        base_hooks, base_call, base_result = runner_parts(base)
        before = base.HookRunner(base_hooks)
        before.begin_turn("bench")
        variants["off, base"] = tool_calls(before, base_call, base_result)
    hooks, call_cls, result_cls = runner_parts(antigravity_sdk)
    off = antigravity_sdk.HookRunner(hooks)
    off.begin_turn("bench")
    variants["off"] = tool_calls(off, call_cls, result_cls)
    for label, provider in providers.items():
        hooks, _, _ = runner_parts(antigravity_sdk)
        traced = Tracing(provider).hook_runner(hooks, turn_attributes={})
        traced.begin_turn("bench")
        traced.start_turn("conversation")
        call = tool_calls(traced, call_cls, result_cls)
        if label == "on, exporter":
            call = flat(call, exporter)
        variants[label] = call
    return await measure(variants, batch, rounds)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--batch", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--base", default=None, help="git revision to A/B the untraced path against")
    args = ap.parse_args()
    rev = args.base if args.base is not None else default_base()
    base = load_base(rev) if rev else None

    r = asyncio.run(bench(args.batch, args.rounds, base))
    print(
        f"python {sys.version.split()[0]}, batches of {args.batch}, median of {args.rounds}, "
        "µs per tool call (pre_tool_call + post_tool_call: one hook and the PolicyEnforcer)"
    )
    print()
    header = f"{'variant':<18}{'µs/call':>9}{'vs off':>9}{'added µs':>10}"
    print(header)
    print("-" * len(header))
    for label, value in r.items():
        added = value - r["off"]
        print(f"{label:<18}{value:>9.2f}{value / r['off']:>8.2f}x{added:>+10.2f}")
    if base is None:
        print("\noff, base: skipped (no git revision to compare with; pass --base REV)")
    else:
        print(
            f"\noff, copy / off, base: the untraced loop on copies of this code and of "
            f"{rev[:12]}, loaded alike (the A/B)"
        )


if __name__ == "__main__":
    main()
