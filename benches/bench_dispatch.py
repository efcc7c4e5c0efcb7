"""Dispatch overhead of `HookRunner`, and import cost of `antigravity_sdk`.

A plain script (not a test): `python benches/bench_dispatch.py [--batch N] [--rounds N]`.

Every number is the median over `--rounds` batches of `--batch` awaits of one dispatch
inside one running event loop, timed with `perf_counter_ns`, in µs per dispatch.

`ours` runs hooks whose body is the official SDK bench's (return a prebuilt result), so the
two runners are compared like for like and the targets apply to it; `allowed()` runs hooks
that call `HookResult.allowed()`, which adds pydantic's class-attribute lookup to each hook.

When `google.antigravity` (the official SDK, the project's `bench` extra) is importable,
the same loops run against its `HookRunner` and the ratio official/ours is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from antigravity_sdk import Hook, HookResult, HookRunner, ToolCall, ToolResult  # noqa: E402

TARGETS_PRE = {1: 1.5, 10: 4.0, 100: 30.0}
OFFICIAL_PUBLISHED_PRE = {1: 5.8, 10: 10.7, 100: 60.0}
HOOK_COUNTS = (1, 10, 100)


# -- our hooks ------------------------------------------------------------------------------

_OK = HookResult.allowed()


class AllowHook(Hook):
    """What the targets assume: `return HookResult.allowed()`."""

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        return HookResult.allowed()

    async def post_tool_call(self, result: ToolResult) -> None:
        return None


class ConstHook(Hook):
    """Returns a prebuilt result: the runner's own cost (the official bench hooks do this)."""

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        return _OK

    async def post_tool_call(self, result: ToolResult) -> None:
        return None


class CompactionOnlyHook(Hook):
    """Overrides neither pre_tool_call nor post_tool_call: must cost nothing for them."""

    async def on_compaction(self, summary: str) -> None:
        return None


class NothingHook(Hook):
    """Overrides nothing at all."""


# -- timing ---------------------------------------------------------------------------------

Call = Callable[[], Awaitable[Any]]


async def measure(variants: dict[str, Call], batch: int, rounds: int) -> dict[str, float]:
    """Median µs per await of each variant; batches of the variants interleave, so drift
    (other load on the machine) hits them alike."""
    samples: dict[str, list[float]] = {k: [] for k in variants}
    perf = time.perf_counter_ns
    for call in variants.values():  # warm up
        for _ in range(batch // 4):
            await call()
    for _ in range(rounds):
        for key, call in variants.items():
            start = perf()
            for _ in range(batch):
                await call()
            samples[key].append((perf() - start) / batch / 1000)
    return {k: statistics.median(v) for k, v in samples.items()}


def pair(
    pre: Callable[[Any], Awaitable[Any]],
    post: Callable[[Any], Awaitable[Any]],
    items: list[tuple[Any, Any]],
) -> Call:
    """One pre+post pair of one tool call, cycling through distinct call ids (real flow)."""
    cycle = itertools.cycle(items)

    async def run() -> None:
        call, result = next(cycle)
        await pre(call)
        await post(result)

    return run


IDS = [
    (ToolCall(name="view_file", id=f"c{i}"), ToolResult(name="view_file", id=f"c{i}"))
    for i in range(256)
]


def ours(n: int, cls: type[Hook]) -> tuple[HookRunner, ToolCall, ToolResult]:
    runner = HookRunner([cls() for _ in range(n)])
    runner.begin_turn("bench")
    return (
        runner,
        ToolCall(name="view_file", args={"path": "/tmp/x"}),
        ToolResult(name="view_file", result="ok"),
    )


def official_variants(n: int) -> dict[str, Call]:
    from google.antigravity import types as gtypes
    from google.antigravity.hooks import hooks as ghooks
    from google.antigravity.hooks.hook_runner import HookRunner as GRunner

    ok = gtypes.HookResult(allow=True)

    class GPre(ghooks.PreToolCallDecideHook):  # type: ignore[misc]
        async def run(self, context: Any, data: Any) -> Any:
            return ok

    class GPost(ghooks.PostToolCallHook):  # type: ignore[misc]
        async def run(self, context: Any, data: Any) -> None:
            return None

    runner = GRunner([h for _ in range(n) for h in (GPre(), GPost())])
    turn = ghooks.TurnContext(runner.session_context)
    op = ghooks.OperationContext(turn)
    tc = gtypes.ToolCall(name="view_file", args={"path": "/tmp/x"})
    tr = gtypes.ToolResult(name="view_file", result="ok")

    async def pair_run() -> None:
        _, _, opctx = await runner.dispatch_pre_tool_call(turn, tc)
        await runner.dispatch_post_tool_call(opctx, tr)

    return {
        "pre": lambda: runner.dispatch_pre_tool_call(turn, tc),
        "post": lambda: runner.dispatch_post_tool_call(op, tr),
        "pair": pair_run,
    }


async def bench(batch: int, rounds: int, with_official: bool) -> dict[str, float]:
    out: dict[str, float] = {}
    for n in HOOK_COUNTS:
        variants: dict[str, Call] = {}
        for label, cls in (("allowed", AllowHook), ("const", ConstHook)):
            runner, tc, tr = ours(n, cls)
            variants[f"pre/{n}/{label}"] = lambda r=runner, t=tc: r.dispatch_pre_tool_call(t)
            variants[f"post/{n}/{label}"] = lambda r=runner, t=tr: r.dispatch_post_tool_call(t)
            variants[f"pair/{n}/{label}"] = pair(
                runner.dispatch_pre_tool_call,
                runner.dispatch_post_tool_call,
                IDS,
            )
        if with_official:
            for kind, call in official_variants(n).items():
                variants[f"{kind}/{n}/official"] = call
        out.update(await measure(variants, batch if n < 100 else batch // 4, rounds))

    tc = ToolCall(name="view_file")
    base = HookRunner([AllowHook()])
    padded = HookRunner([AllowHook(), *(CompactionOnlyHook() for _ in range(50))])
    for _ in range(50):
        padded.register(NothingHook())
    empty = HookRunner()
    idle = await measure(
        {
            "base": lambda: base.dispatch_pre_tool_call(tc),
            "padded": lambda: padded.dispatch_pre_tool_call(tc),
            "empty": lambda: empty.dispatch_pre_tool_call(tc),
        },
        batch,
        rounds * 2,
    )
    out["idle100"] = idle["padded"] - idle["base"]
    out["pre/0"] = idle["empty"]
    return out


def official_available() -> bool:
    try:
        import google.antigravity.hooks.hook_runner  # noqa: F401
    except Exception:
        return False
    return True


# -- import time ----------------------------------------------------------------------------

IMPORT_SNIPPETS = {
    "import antigravity_sdk": "import antigravity_sdk",
    "from antigravity_sdk import Hook, HookRunner, HookResult, ToolCall, policy": (
        "from antigravity_sdk import Hook, HookRunner, HookResult, ToolCall, policy"
    ),
}


def import_ms(stmt: str, runs: int = 7) -> float:
    code = (
        "import time, sys\n"
        "t = time.perf_counter()\n"
        f"{stmt}\n"
        "sys.stdout.write(str(time.perf_counter() - t))\n"
    )
    samples = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        samples.append(float(done.stdout) * 1000)
    return statistics.median(samples)


# -- report ---------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--batch", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--no-import", action="store_true", help="skip the import-time rows")
    args = ap.parse_args()

    with_official = official_available()
    r = asyncio.run(bench(args.batch, args.rounds, with_official))

    print(
        f"python {sys.version.split()[0]}, batches of {args.batch} (100 hooks: "
        f"{args.batch // 4}), median of {args.rounds}, µs per dispatch"
    )
    print(
        "ours, official = hooks return a prebuilt result (like for like); "
        "allowed() = hooks call HookResult.allowed()"
    )
    print()
    header = f"{'dispatch':<26}{'ours':>8}{'target':>8}{'allowed()':>10}"
    if with_official:
        header += f"{'official':>10}{'off/ours':>10}"
    print(header)
    print("-" * len(header))
    labels = {"pre": "pre_tool_call", "post": "post_tool_call", "pair": "pre+post, fresh id"}
    for kind in ("pre", "post", "pair"):
        for n in HOOK_COUNTS:
            mine, allowed = r[f"{kind}/{n}/const"], r[f"{kind}/{n}/allowed"]
            target = f"{TARGETS_PRE[n]:.1f}" if kind == "pre" else "-"
            line = f"{labels[kind] + f', {n:>3}':<26}{mine:>8.2f}{target:>8}{allowed:>10.2f}"
            if with_official:
                off = r[f"{kind}/{n}/official"]
                line += f"{off:>10.2f}{off / mine:>9.1f}x"
            print(line)
    print(f"{'pre_tool_call, 0 hooks':<26}{r['pre/0']:>8.3f}")
    print(f"{'+100 non-overriding hooks':<26}{r['idle100']:>+8.3f}{'0.1':>8}")
    if not with_official:
        print(
            "\nofficial SDK: skipped (google.antigravity is not importable; "
            "pip install -e '.[bench]')"
        )
    else:
        print(
            "\nofficial: google-antigravity HookRunner, hooks returning a prebuilt result; "
            "its published pre: " + " / ".join(map(str, OFFICIAL_PUBLISHED_PRE.values()))
        )

    missed = [n for n in HOOK_COUNTS if r[f"pre/{n}/const"] > TARGETS_PRE[n]]
    if r["idle100"] > 0.1:
        print("MISSED: 100 non-overriding hooks add more than 0.1 µs")
    if missed:
        print("MISSED: pre_tool_call target for " + ", ".join(map(str, missed)) + " hooks")

    if not args.no_import:
        print()
        print(f"{'import (fresh process, median of 7)':<76}{'ms':>6}")
        for label, stmt in IMPORT_SNIPPETS.items():
            print(f"{label:<76}{import_ms(stmt):>6.1f}")


if __name__ == "__main__":
    main()
