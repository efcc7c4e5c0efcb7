"""Policy decision cost vs rule count, against the official SDK when it is installed.

Run: python benches/bench_policy.py [--quick]

For N rules (N-2 specific rules for unrelated tools, one predicate rule, one `*` rule) it
reports the median µs per `await pre_tool_call(call)` inside one event loop, for a call
that only the wildcard matches, a call with its own specific rule, and a call whose
specific rule has a predicate; and `enforce()` µs per rule. With `google-antigravity`
importable (the `bench` extra) the same rule sets go through its policy API too.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from antigravity_sdk import ToolCall, policy

SIZES = (10, 100, 1_000, 10_000, 100_000)
BATCHES = 7
BATCH_NS = 40_000_000  # aim each batch at ~40 ms


def in_workspace(args: dict[str, Any]) -> bool:
    return str(args.get("path", "")).startswith("/ws/")


CASES = {
    "wildcard only": ("unrelated_tool", {}),
    "specific": ("tool_1", {}),
    "specific+predicate": ("guarded", {"path": "/ws/a.txt"}),
}


def rule_specs(n: int) -> list[tuple[str, str, bool]]:
    """(tool, decision, has predicate) — the same set for both SDKs."""
    specs = [(f"tool_{i}", "allow" if i % 2 else "deny", False) for i in range(n - 2)]
    return [*specs, ("guarded", "allow", True), ("*", "allow", False)]


def host_tools(specs: list[tuple[str, str, bool]]) -> list[str]:
    """The made-up tool names stand for host-side tools, which `enforce()` must be told."""
    return [tool for tool, _, _ in specs if tool != "*"]


def ours(specs: list[tuple[str, str, bool]]) -> list[policy.Policy]:
    make = {"allow": policy.allow, "deny": policy.deny}
    return [make[d](t, when=in_workspace if p else None) for t, d, p in specs]  # type: ignore[operator]


async def per_call_us(decide: Callable[[Any], Awaitable[Any]], call: Any) -> float:
    """Median over batches of the mean µs per awaited decision."""
    start = time.perf_counter_ns()
    await decide(call)
    once = max(time.perf_counter_ns() - start, 1)
    loops = max(1, min(200_000, BATCH_NS // once))
    results = []
    for _ in range(BATCHES):
        start = time.perf_counter_ns()
        for _ in range(loops):
            await decide(call)
        results.append((time.perf_counter_ns() - start) / loops / 1000)
    return statistics.median(results)


def enforce_us_per_rule(build: Callable[[], Any], n: int) -> float:
    runs = 5 if n <= 10_000 else 3
    times = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        build()
        times.append((time.perf_counter_ns() - start) / n / 1000)
    return statistics.median(times)


def official() -> Any | None:
    try:
        from google.antigravity import types as ag_types
        from google.antigravity.hooks import policy as ag_policy
    except ImportError:
        return None
    return ag_policy, ag_types


async def main(sizes: tuple[int, ...]) -> None:
    ref = official()
    header = f"{'rules':>7} | {'case':<19} | {'ours µs':>8}"
    if ref:
        header += f" | {'official µs':>11} | {'ratio':>7}"
    print(header)
    print("-" * len(header))
    enforce_rows = []
    for n in sizes:
        specs = rule_specs(n)
        built = ours(specs)
        names = host_tools(specs)
        enforcer = policy.enforce(built, tools=names)
        ref_hook = None
        if ref:
            ag_policy = ref[0]
            make = {"allow": ag_policy.allow, "deny": ag_policy.deny}
            ref_rules = [make[d](t, when=in_workspace if p else None) for t, d, p in specs]
            ref_hook = ag_policy.enforce(ref_rules)
        for case, (name, args) in CASES.items():
            mine = await per_call_us(enforcer.pre_tool_call, ToolCall(name=name, args=args))
            row = f"{n:>7} | {case:<19} | {mine:>8.2f}"
            if ref and ref_hook is not None:
                ag_call = ref[1].ToolCall(name=name, args=args)
                hook = ref_hook

                async def ref_decide(call: Any, hook: Any = hook) -> Any:
                    return await hook.run(None, call)

                theirs = await per_call_us(ref_decide, ag_call)
                row += f" | {theirs:>11.2f} | {theirs / mine:>6.0f}x"
            print(row, flush=True)
        ours_enforce = enforce_us_per_rule(
            lambda built=built, names=names: policy.enforce(built, tools=names), n
        )
        theirs_enforce = None
        if ref:
            theirs_enforce = enforce_us_per_rule(lambda rules=ref_rules: ref[0].enforce(rules), n)
        enforce_rows.append((n, ours_enforce, theirs_enforce))
    print()
    print(f"{'rules':>7} | {'enforce() µs/rule':>17}" + (" | official µs/rule" if ref else ""))
    for n, mine_e, theirs_e in enforce_rows:
        line = f"{n:>7} | {mine_e:>17.2f}"
        if theirs_e is not None:
            line += f" | {theirs_e:>17.2f}"
        print(line)
    if not ref:
        print("\nofficial SDK not installed; skipped")


if __name__ == "__main__":
    asyncio.run(main(SIZES[:3] if "--quick" in sys.argv else SIZES))
