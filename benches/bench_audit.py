"""What the audit log (`AgentBuilder.audit_log`) adds: per decision, and to a 50-call turn.

A plain script (not a test): `python benches/bench_audit.py [--batch N] [--rounds N] [--turns N]`.

1. Per decision, in process: one PRE_TOOL request decided by a `HookRunner` holding the
   default policies' enforcer, without and with the audit log (which also switches the
   enforcer to noting its decision, and writes the line). The two run interleaved,
   batch by batch, in one event loop; medians over `--rounds` batches of `--batch`
   decisions, µs per decision. The target: at most 20 µs added. `fsync=True` and the
   bare `write()` of one line are timed the same way, for the docs, and so is a floor: the
   plain decision followed by the least any per-decision line can cost (a constant head,
   the five per-call fields formatted, one `os.write`), with nothing noted about the
   decision, so without the rule, bucket or hook a real line names. "floor+chain" is
   that floor sealed into the chain as every line is (`AuditLog._append`: session,
   number, previous MAC, its own MAC, an HMAC-SHA256 under the audit key): its
   difference from "floor" is what the chain adds per decision (target: at most 5 µs).
2. A 50-call turn against the real harness, offline (ScriptedModel: five replies of ten
   parallel reads): two agents, one with the audit log, their turns alternating; median
   wall time of `--turns` turns each. The target: unchanged within noise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from antigravity_sdk import Agent, HookRunner, ToolCall, policy  # noqa: E402
from antigravity_sdk.agent import default_policies  # noqa: E402
from antigravity_sdk.audit import AuditLog, _flat_json, _iso  # noqa: E402
from antigravity_sdk.harness.effects import HookCall  # noqa: E402
from antigravity_sdk.testing import ScriptedModel, ToolCallSpec, text, tool_calls  # noqa: E402

TARGET_US = 20.0
CHAIN_TARGET_US = 5.0
CALLS = 50
PER_REPLY = 10  # parallel calls per model reply: 5 model calls, then the answer


async def _batch(fn: Callable[[], Awaitable[Any]], n: int) -> tuple[float, float]:
    """µs per call: wall time, and this thread's CPU time (steadier on a busy machine)."""
    began, cpu = time.perf_counter_ns(), time.thread_time_ns()
    for _ in range(n):
        await fn()
    return (time.perf_counter_ns() - began) / n / 1000, (time.thread_time_ns() - cpu) / n / 1000


async def per_decision(batch: int, rounds: int, tmp: Path) -> dict[str, tuple[float, float]]:
    ws = tmp / "ws"
    ws.mkdir()
    call = ToolCall(
        name="view_file",
        args={"AbsolutePath": str(ws / "notes.txt")},
        id="call_1",
        trajectory_id="t" * 32,
    )
    request = HookCall("r1", "pre_tool_call", call)
    plain = HookRunner([policy.enforce(default_policies([ws]))])
    noted_enforcer = policy.enforce(default_policies([ws]))
    noted_enforcer.note_decisions()
    noted = HookRunner([noted_enforcer])
    logs = {}
    for name, fsync in (("audit", False), ("audit+fsync", True)):
        log = AuditLog(tmp / f"{name}.jsonl", fsync=fsync)
        log.open()
        logs[name] = log
    line = {"v": 1, "kind": "decision", "tool": "view_file", "args": call.args, "verdict": "allow"}

    cases: dict[str, Callable[[], Awaitable[Any]]] = {
        "without": lambda: request.decide(plain, None),  # type: ignore[arg-type]
        "audit": lambda: logs["audit"].decide(request, noted, None, "c" * 32),  # type: ignore[arg-type]
        "audit+fsync": lambda: logs["audit+fsync"].decide(request, noted, None, "c" * 32),  # type: ignore[arg-type]
    }

    async def write_only() -> None:
        logs["audit"].write(line)

    cases["write() alone"] = write_only
    floor_fd = os.open(tmp / "floor.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    head = (await _one_line(logs["audit"], request, noted))[: -len('"args":{}}')]

    async def floor() -> Any:
        began = time.perf_counter_ns()
        outcome = await request.decide(plain, None)  # type: ignore[arg-type]
        latency = (time.perf_counter_ns() - began) / 1000
        line = (
            f'{head}"time":"{_iso(time.time_ns())}","call_id":{encode_basestring_ascii(call.id)},'
            f'"latency_us":{latency:.1f},"policy_us":{latency:.1f},'
            f'"args":{_flat_json(call.args)}}}\n'
        )
        os.write(floor_fd, line.encode("ascii"))
        return outcome

    cases["floor"] = floor
    chained = AuditLog(tmp / "chained.jsonl")
    chained.open("p" * 32)

    async def floor_chained() -> Any:
        began = time.perf_counter_ns()
        outcome = await request.decide(plain, None)  # type: ignore[arg-type]
        latency = (time.perf_counter_ns() - began) / 1000
        chained._append(
            f'{head}"time":"{_iso(time.time_ns())}","call_id":{encode_basestring_ascii(call.id)},'
            f'"latency_us":{latency:.1f},"policy_us":{latency:.1f},'
            f'"args":{_flat_json(call.args)}'
        )
        return outcome

    cases["floor+chain"] = floor_chained
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    for fn in cases.values():  # warm up
        await _batch(fn, 10)
    for _ in range(rounds):
        for name, fn in cases.items():
            n = batch if "fsync" not in name else max(1, batch // 20)
            samples[name].append(await _batch(fn, n))
    for log in (*logs.values(), chained):
        log.close()
    os.close(floor_fd)
    return {
        name: (statistics.median(v[0] for v in values), statistics.median(v[1] for v in values))
        for name, values in samples.items()
    }


async def _one_line(log: AuditLog, request: HookCall, runner: HookRunner) -> str:
    """The line `log` writes for `request`, its per-call fields and arguments left out: the
    floor's constant head (as long as a real line's)."""
    await log.decide(request, runner, None, "c" * 32)  # type: ignore[arg-type]
    line: dict[str, Any] = json.loads(log.path.read_text().splitlines()[-1])
    for key in ("time", "call_id", "latency_us", "policy_us", "args"):
        del line[key]
    return json.dumps(line, separators=(",", ":"))[:-1] + ',"args":{}}'


def _script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    """`CALLS` reads, `PER_REPLY` parallel calls per model reply, then an answer; counted
    within the turn."""
    last_user = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    done = sum(
        len(m.get("tool_calls") or ()) for m in messages[last_user:] if m.get("role") == "assistant"
    )
    if done < CALLS:
        read = ToolCallSpec("view_file", {"AbsolutePath": str(_NOTES)})
        return tool_calls(*[read] * PER_REPLY)
    return text("done")


_NOTES = Path()


async def per_turn(turns: int, tmp: Path) -> dict[str, list[float]]:
    global _NOTES
    ws = (tmp / "turn-ws").resolve()
    ws.mkdir()
    _NOTES = ws / "notes.txt"
    _NOTES.write_text("hello\n")
    agents = {}
    for name in ("without", "audit"):
        builder = (
            Agent.builder()
            .model(ScriptedModel(_script))
            .workspaces([ws])
            .save_dir(tmp / name / "save")
            .app_data_dir(tmp / name / "app")
        )
        if name == "audit":
            builder.audit_log(tmp / "turns.jsonl")
        agents[name] = builder.build()
    times: dict[str, list[float]] = {name: [] for name in agents}
    try:
        for agent in agents.values():
            await agent.start()
        for agent in agents.values():  # warm up
            await agent.chat("read")
        for _ in range(turns):
            for name, agent in agents.items():
                began = time.perf_counter()
                response = await agent.chat("read")
                times[name].append(time.perf_counter() - began)
                steps = sum(1 for s in response.steps if s.kind == "tool_call")
                assert steps == CALLS, f"{name}: {steps} tool steps, not {CALLS}"
    finally:
        for agent in agents.values():
            await agent.stop()
    lines = (tmp / "turns.jsonl").read_text().count('"kind":"decision"')
    assert lines == CALLS * (turns + 1), f"{lines} decision lines"
    return times


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--turns", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-audit-") as tmp_name:
        tmp = Path(tmp_name)
        began = time.thread_time_ns()
        for _ in range(100):
            sum(range(1000))
        calibration = (time.thread_time_ns() - began) / 100 / 1000
        print(f"machine: sum(range(1000)) takes {calibration:.1f} CPU-µs (an idle laptop: ~8-10)")
        costs = await per_decision(args.batch, args.rounds, tmp)
        base_wall, base_cpu = costs["without"]
        print(f"Per decision (medians of {args.rounds} interleaved batches), µs")
        print(f"  {'case':<16}{'wall':>10}{'added':>10}{'CPU':>10}{'added':>10}{'ratio':>8}")
        for name, (wall, cpu) in costs.items():
            alone = name == "write() alone"
            added_wall = wall if alone else wall - base_wall
            added_cpu = cpu if alone else cpu - base_cpu
            print(
                f"  {name:<16}{wall:>10.2f}{added_wall:>10.2f}{cpu:>10.2f}{added_cpu:>10.2f}"
                f"{cpu / base_cpu:>8.2f}x"
            )
        added = costs["audit"][1] - base_cpu
        verdict = "OK" if added <= TARGET_US else "OVER"
        print(f"  added by the audit log: {added:.2f} CPU-µs (target ≤ {TARGET_US} µs): {verdict}")
        floor = costs["floor"][1] - base_cpu
        print(f"  the floor (a bare line and its write, nothing noted): {floor:.2f} CPU-µs")
        chain = costs["floor+chain"][1] - costs["floor"][1]
        verdict = "OK" if chain <= CHAIN_TARGET_US else "OVER"
        print(
            f"  added by the hash chain: {chain:.2f} CPU-µs (target ≤ {CHAIN_TARGET_US}): {verdict}"
        )
        print()
        if args.turns < 1:  # the per-decision figures only
            return 0 if added <= TARGET_US else 1
        times = await per_turn(args.turns, tmp)
    without, audit = (statistics.median(times[k]) for k in ("without", "audit"))
    spread = {k: (min(v), max(v)) for k, v in times.items()}
    print(f"A {CALLS}-call turn on the real harness (median of {args.turns} alternating turns), ms")
    for name, value in (("without", without), ("audit", audit)):
        low, high = spread[name]
        print(f"  {name:<16}{value * 1000:>10.1f}   (min {low * 1000:.1f}, max {high * 1000:.1f})")
    print(f"  ratio audit/without: {audit / without:.3f}")
    return 0 if added <= TARGET_US else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
