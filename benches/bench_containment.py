"""What containment costs: agent start, and a tool call, with and without it (a script, not
a test; the REAL harness, offline).

    .venv/bin/python benches/bench_containment.py [--pairs 15]

`--pairs` paired runs, alternating which goes first: `await agent.start()` of an agent with
the default containment and of one built with `.containment(None)` (the ScriptedModel is
already serving, so neither counts its start; both are stopped outside the timing). Then
the same pairs for a turn that runs one `run_command` (`true`), timed from `chat()` to its
answer. Also timed in process: the SDK's share of a contained start, planning the rules
(`ContainmentInForce.supervisor_rules`, which lists the directories along every credential
path) and the supervisor child putting them in force (`confine.contain`: its namespaces and
private devpts, the seccomp filter and Landlock, in a forked child).

Target (issue 19): start at most 10 ms more than without; nothing added per tool call.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from antigravity_sdk import Agent, AgentBuilder, Containment, policy  # noqa: E402
from antigravity_sdk.containment import landlock_abi, plan  # noqa: E402
from antigravity_sdk.harness import confine  # noqa: E402
from antigravity_sdk.testing import ScriptedModel, tool_call  # noqa: E402


def builder(model: ScriptedModel, root: Path, contained: bool) -> AgentBuilder:
    b = (
        Agent.builder()
        .model(model)
        .policies([policy.allow_all()])
        .workspaces([root / "ws"])
        .save_dir(root / "save")
        .app_data_dir(root / "app")
    )
    return b if contained else b.containment(None)


async def timed_start(model: ScriptedModel, root: Path, contained: bool) -> float:
    agent = builder(model, root, contained).build()
    t0 = time.perf_counter()
    await agent.start()
    elapsed = time.perf_counter() - t0
    await agent.stop()
    return elapsed


async def timed_call(root: Path, contained: bool) -> float:
    call = tool_call(
        "run_command", CommandLine="true", Cwd=str(root / "ws"), WaitMsBeforeAsync=5000
    )
    async with ScriptedModel([call, "done"]) as model:
        agent = builder(model, root, contained).build()
        async with agent:
            t0 = time.perf_counter()
            await agent.chat("run it")
            return time.perf_counter() - t0


def in_process(root: Path, reps: int) -> tuple[float, float]:
    """Medians (seconds) of planning the rules, and of a child applying them."""
    planned, applied = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        contained = plan(
            Containment(),
            workspaces=[root / "ws"],
            state=[root / "save", root / "app"],
            tmp_dir=root,
            ports=(443,),
            abi=landlock_abi(),
        )
        rules = contained.supervisor_rules()
        planned.append(time.perf_counter() - t0)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            t = time.perf_counter()
            confine.contain(rules)
            os.write(write, f"{time.perf_counter() - t}".encode())
            os._exit(0)
        os.close(write)
        applied.append(float(os.read(read, 64)))
        os.close(read)
        os.waitpid(pid, 0)
    return statistics.median(planned), statistics.median(applied)


def row(label: str, on: list[float], off: list[float]) -> str:
    a, b = statistics.median(on) * 1000, statistics.median(off) * 1000
    paired = statistics.median(x - y for x, y in zip(on, off, strict=True)) * 1000
    return f"| {label} | {a:.1f} | {b:.1f} | {a - b:+.1f} | {paired:+.1f} |"


async def measure(root: Path, pairs: int) -> None:
    starts: dict[bool, list[float]] = {True: [], False: []}
    calls: dict[bool, list[float]] = {True: [], False: []}
    async with ScriptedModel(["unused"]) as model:
        for contained in (True, False):  # warm caches and the binary's pages
            await timed_start(model, root, contained)
        for i in range(pairs):
            order = (True, False) if i % 2 == 0 else (False, True)
            for contained in order:
                starts[contained].append(await timed_start(model, root, contained))
    for i in range(pairs):
        order = (True, False) if i % 2 == 0 else (False, True)
        for contained in order:
            calls[contained].append(await timed_call(root, contained))
    planned, applied = in_process(root, 50)
    print(f"Landlock ABI {landlock_abi()}, {pairs} interleaved pairs (ms, medians)\n")
    print("| what | contained | uncontained | difference of medians | median paired difference |")
    print("|---|---|---|---|---|")
    print(row("agent start", starts[True], starts[False]))
    print(row("a turn with one run_command", calls[True], calls[False]))
    print(
        f"\nin process: planning the rules {planned * 1000:.2f} ms, putting them in force "
        f"in the child {applied * 1000:.2f} ms (medians of 50)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=15)
    args = parser.parse_args()
    if landlock_abi() < 1:
        print("this kernel offers no Landlock: nothing to measure")
        return 1
    logging.getLogger("antigravity_sdk").setLevel(logging.ERROR)  # the "off" warnings
    with tempfile.TemporaryDirectory(prefix="bench-containment-") as tmp:
        root = Path(tmp).resolve()
        (root / "ws").mkdir()
        asyncio.run(measure(root, args.pairs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
