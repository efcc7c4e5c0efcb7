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

    .venv/bin/python benches/bench_containment.py --against REV [--rounds 8]

compares this tree's contained start with another revision's (issue 26: at most 15 ms
more than before it): REV is checked out in a temporary git worktree, and rounds of
subprocesses alternate between the two trees (which goes first flips every round), each
timing `--starts` contained starts on its own ScriptedModel; the table shows the medians
of all starts and the median of the per-round differences.
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


_STARTS = """
import asyncio, json, logging, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from antigravity_sdk import Agent, policy
from antigravity_sdk.testing import ScriptedModel
logging.getLogger("antigravity_sdk").setLevel(logging.ERROR)

async def main(count):
    root = Path(tempfile.mkdtemp(prefix="bench-against-")).resolve()
    (root / "ws").mkdir()
    times = []
    async with ScriptedModel(["unused"]) as model:
        for i in range(count + 1):  # the first warms caches
            agent = (Agent.builder().model(model).policies([policy.allow_all()])
                     .workspaces([root / "ws"]).save_dir(root / "save")
                     .app_data_dir(root / "app").build())
            t0 = time.perf_counter()
            await agent.start()
            times.append(time.perf_counter() - t0)
            await agent.stop()
    return times[1:]

print(json.dumps(asyncio.run(main(int(sys.argv[2])))))
"""
"""One subprocess of `against`: contained starts of the SDK in the tree `argv[1]`."""


def against(rev: str, rounds: int, starts: int) -> int:
    """This tree's contained start against `rev`'s, interleaved by subprocess rounds."""
    import json
    import subprocess

    top = HERE.parent
    with tempfile.TemporaryDirectory(prefix="bench-against-") as tmp:
        other = Path(tmp) / "tree"
        subprocess.run(
            ["git", "-C", str(top), "worktree", "add", "--detach", "-q", str(other), rev],
            check=True,
        )
        try:
            trees = {"this tree": top, rev: other}
            times: dict[str, list[float]] = {name: [] for name in trees}
            diffs = []
            for i in range(rounds):
                names = list(trees) if i % 2 == 0 else list(reversed(trees))
                medians = {}
                for name in names:
                    out = subprocess.run(
                        [sys.executable, "-c", _STARTS, str(trees[name]), str(starts)],
                        capture_output=True,
                        text=True,
                        check=True,
                    ).stdout
                    runs = json.loads(out.strip().splitlines()[-1])
                    times[name] += runs
                    medians[name] = statistics.median(runs)
                diffs.append(medians["this tree"] - medians[rev])
        finally:
            subprocess.run(
                ["git", "-C", str(top), "worktree", "remove", "--force", str(other)], check=False
            )
    print(f"contained agent start, {rounds} interleaved rounds of {starts} (ms, medians)\n")
    print(f"| this tree | {rev} | difference of medians | median per-round difference |")
    print("|---|---|---|---|")
    a, b = (statistics.median(times[n]) * 1000 for n in ("this tree", rev))
    print(f"| {a:.1f} | {b:.1f} | {a - b:+.1f} | {statistics.median(diffs) * 1000:+.1f} |")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=15)
    parser.add_argument("--against", metavar="REV", help="compare starts with a git revision")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--starts", type=int, default=5)
    args = parser.parse_args()
    if args.against:
        logging.getLogger("antigravity_sdk").setLevel(logging.ERROR)
        return against(args.against, args.rounds, args.starts)
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
