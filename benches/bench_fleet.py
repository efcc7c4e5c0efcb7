"""What the fleet costs: durable tasks on a queue against plain `Agent`s in one process
(a script, not a test; the REAL harness, offline, with a ScriptedModel).

    .venv/bin/python benches/bench_fleet.py [--quick] [--rounds 3] [--conc 1,2,4]
        [--turns 10] [--per-slot 2] [--model-ms 0] [--slow-ms 500] [--slow-conc 2]

Workload: a task is `--turns` turns (default 10); each turn is one model reply, and every
third turn the model first asks for the harness's `view_file` on a small file in the
workspace (a 10-turn task is 13 model calls and 3 governed tool calls). The model is a
ScriptedModel served from a thread of its own, shared by every arm; it answers at once
(`--model-ms` delays each reply, asleep, so concurrent requests are still served). At each
concurrency c, the arms run interleaved (their order rotates every round), `--rounds`
times:

  plain    what a user writes: one `Agent` per task, `--turns` `chat()` calls on it,
           asyncio.gather under a semaphore of c; `--per-slot` x c tasks.
  fleet    `Fleet` on an embedded SQLite file (a fresh one per run), as the package
           opens it (a pooled engine, `PRAGMA synchronous=NORMAL`, the queue polled every
           0.05 s), a worker in this process (`with fleet.worker(concurrency=c)`, which
           returns once DBOS polls its queue) started before the clock; the same tasks
           `submit`ted and waited for. Times come from the fleet's rows (submitted, first
           turn started, done) and the worker's last `Agent.stop` of each task, so the
           client's 0.25 s result poll is not counted.
  rebuild  the first fleet design's shape without the fleet: every turn a new agent
           `.resume(conversation, create=True)`, started, one chat, stopped (a harness
           start per turn); no database, no queue. At the lowest c only, one task per
           slot (it is slow): the floor of a design that restarts the harness every turn.

Reported per c (medians over rounds): tasks per minute (tasks / makespan, queueing
included), the run time of a task (its start to its end) and the ratios against plain.
The target: the fleet adds at most 5 % to a task's wall time and keeps throughput within
10 % of plain agents at the same concurrency. Then where a task's time goes (Agent.start,
chat and stop, timed in every arm; the rest per turn); the queue's own cost (submit, the
pickup of a task by an idle worker, the SQL statements the worker side issued per turn
on the fleet's tables and DBOS's, each `Store` call it made, and each `Store` operation
alone on a fresh file: as the fleet opens SQLite (pooled, synchronous=NORMAL) and, built
by this script for comparison, the first design's engine (a new connection per operation,
synchronous=FULL: an fsync per commit) and a pooled one with FULL); plain against fleet
with a model that takes `--slow-ms` per reply;
and memory: the harness process tree of each running agent (sampled from /proc while the
arms run), and a fresh child process per kind running c agents (the worker's share:
DBOS, SQLAlchemy, the worker's threads). The box's load average is printed: other work
on it moves every number, which is why the arms are interleaved and ratios taken per round.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import logging
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import sqlalchemy as sa  # noqa: E402

from antigravity_sdk import Agent, AgentBuilder  # noqa: E402
from antigravity_sdk.fleet import AgentSpec, Fleet, _fleet, _worker  # noqa: E402
from antigravity_sdk.fleet._store import TASKS, TURNS, Store, default_db_url  # noqa: E402
from antigravity_sdk.testing import ScriptedModel, text, tool_call  # noqa: E402

TOOL_EVERY = 3  # every third turn asks for one tool call first


# -- the model --------------------------------------------------------------------------


DELAY = [0.0]  # seconds each model reply takes (set per section)


def make_script(workspace: Path) -> Callable[..., Any]:
    """Stateless (a resumed conversation gets the same replies): the reply depends on how
    many user turns the conversation holds and whether the last message is a tool result.
    Each reply waits `DELAY[0]` first (asleep: other requests are served meanwhile)."""
    target = str(workspace / "notes.txt")

    async def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if DELAY[0]:
            await asyncio.sleep(DELAY[0])
        users = sum(1 for m in messages if m.get("role") == "user")
        if users % TOOL_EVERY == 0 and messages and messages[-1].get("role") == "user":
            return tool_call("view_file", AbsolutePath=target)
        return text(f"answer to turn {users}")

    return script


@contextlib.contextmanager
def served_in_thread(script: Any) -> Iterator[ScriptedModel]:
    """A ScriptedModel on its own loop in a thread: every arm calls the same server."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True, name="scripted-model")
    thread.start()
    model = ScriptedModel(script)
    asyncio.run_coroutine_threadsafe(model.start(), loop).result(10)
    try:
        yield model
    finally:
        asyncio.run_coroutine_threadsafe(model.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def model_calls_per_task(turns: int) -> int:
    return turns + sum(1 for t in range(1, turns + 1) if t % TOOL_EVERY == 0)


# -- instrumentation (the bench's own wrappers; nothing in the package is changed) -------


class Counters:
    """Thread-safe sums: count and seconds per key."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count: dict[str, int] = defaultdict(int)
        self.secs: dict[str, float] = defaultdict(float)

    def add(self, key: str, seconds: float, n: int = 1) -> None:
        with self.lock:
            self.count[key] += n
            self.secs[key] += seconds

    def reset(self) -> None:
        with self.lock:
            self.count.clear()
            self.secs.clear()

    def snapshot(self) -> tuple[dict[str, int], dict[str, float]]:
        with self.lock:
            return dict(self.count), dict(self.secs)


STORE_CALLS = Counters()  # Store methods called off the main thread (the worker side)
SQL = Counters()  # statements: "<engine>:<read|write|commit>", worker side only
AGENT = Counters()  # Agent.start / chat / stop on the worker side
STOPPED_AT: dict[str, float] = {}  # conversation id -> when its agent last stopped (worker)
FLEET_ENGINES: set[int] = set()
_MAIN = threading.main_thread()
ON_LOOP = "audit lines on the event loop"
_STORE_METHODS = (
    "state", "start_turn", "update_task", "finish_turn", "charge_tool_call", "add_audit",
    "forget_turn_start", "open_approval", "consume", "task", "tasks", "approvals",
)  # fmt: skip


def instrument() -> None:
    for name in _STORE_METHODS:
        original = getattr(Store, name)

        def wrapped(*args: Any, __original: Any = original, __name: str = name, **kw: Any) -> Any:
            if threading.current_thread() is _MAIN:
                return __original(*args, **kw)
            t0 = time.perf_counter()
            try:
                return __original(*args, **kw)
            finally:
                STORE_CALLS.add(__name, time.perf_counter() - t0)

        functools.update_wrapper(wrapped, original)
        setattr(Store, name, wrapped)

    emit = _worker.TableAudit._emit

    def timed_emit(self: Any, data: bytes) -> None:
        t0 = time.perf_counter()
        try:
            emit(self, data)
        finally:
            STORE_CALLS.add(ON_LOOP, time.perf_counter() - t0)

    _worker.TableAudit._emit = timed_emit  # type: ignore[method-assign]

    # The agent's share of the worker's time, whatever the worker's shape: Agent.start,
    # chat and stop called off the main thread (the plain arms run on the main thread).
    for name in ("start", "chat", "stop"):
        original_method = getattr(Agent, name)

        async def timed(self: Any, *args: Any, __m: Any = original_method, __n: str = name,
                        **kw: Any) -> Any:  # fmt: skip
            if threading.current_thread() is _MAIN:
                return await __m(self, *args, **kw)
            t0 = time.perf_counter()
            try:
                return await __m(self, *args, **kw)
            finally:
                AGENT.add(__n, time.perf_counter() - t0)
                if __n == "stop":
                    STOPPED_AT[self.conversation_id] = time.time()

        functools.update_wrapper(timed, original_method)
        setattr(Agent, name, timed)

    starts: dict[int, float] = {}

    def before(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        starts[id(cursor)] = time.perf_counter()

    def after(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        t0 = starts.pop(id(cursor), None)
        if t0 is None or threading.current_thread() is _MAIN:
            return
        which = "fleet" if id(conn.engine) in FLEET_ENGINES else "dbos"
        verb = statement.lstrip().split(None, 1)[0].upper() if statement.strip() else ""
        kind = "write" if verb in ("INSERT", "UPDATE", "DELETE", "REPLACE") else "read"
        SQL.add(f"{which}:{kind}", time.perf_counter() - t0)

    def commit(conn: Any) -> None:
        if threading.current_thread() is not _MAIN:
            which = "fleet" if id(conn.engine) in FLEET_ENGINES else "dbos"
            SQL.add(f"{which}:commit", 0.0)

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", before)
    sa.event.listen(sa.engine.Engine, "after_cursor_execute", after)
    sa.event.listen(sa.engine.Engine, "commit", commit)


# -- memory ------------------------------------------------------------------------------


def vm_rss_kb(pid: int | str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def process_tree() -> dict[int, list[int]]:
    """ppid -> children, from /proc."""
    children: dict[int, list[int]] = defaultdict(list)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children[ppid].append(int(entry))
    return children


class RssSampler:
    """Samples, every `period` s, the RSS of each agent's process tree: each child of
    this process (the harness's supervisor) with everything under it (the harness).
    Only trees that have grown past the supervisor (a harness is up) are kept."""

    def __init__(self, period: float = 0.1) -> None:
        self.period = period
        self.samples: list[tuple[int, int, int]] = []  # (tree kB, harness kB, processes)
        self.own: list[int] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> RssSampler:
        self._thread = threading.Thread(target=self._run, daemon=True, name="rss-sampler")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.wait(self.period):
            tree = process_tree()
            self.own.append(vm_rss_kb(me))
            for top in tree.get(me, []):
                pids, stack = [], [top]
                while stack:
                    pid = stack.pop()
                    pids.append(pid)
                    stack.extend(tree.get(pid, []))
                if len(pids) < 2:
                    continue
                sizes = [vm_rss_kb(p) for p in pids]
                self.samples.append((sum(sizes), max(sizes[1:]), len(pids)))


# -- the arms ----------------------------------------------------------------------------


def plain_builder(model: ScriptedModel, workspace: Path, save: Path) -> AgentBuilder:
    return (
        Agent.builder()
        .model(model.model_name, base_url=model.base_url)
        .workspaces([workspace])
        .save_dir(save)
        .turn_timeout(300)
    )


def prompts(turns: int) -> list[str]:
    return [f"step {i + 1}: carry on with the task" for i in range(turns)]


async def run_plain(
    model: ScriptedModel, workspace: Path, save: Path, tasks: int, conc: int, turns: int
) -> dict[str, Any]:
    gate = asyncio.Semaphore(conc)
    runs: list[float] = []
    parts: dict[str, list[float]] = defaultdict(list)

    async def one() -> float:
        async with gate:
            t0 = time.time()
            a = time.perf_counter()
            agent = plain_builder(model, workspace, save).build()
            await agent.start()
            parts["start"].append(time.perf_counter() - a)
            for prompt in prompts(turns):
                b = time.perf_counter()
                await agent.chat(prompt)
                parts["chat"].append(time.perf_counter() - b)
            c = time.perf_counter()
            await agent.stop()
            parts["stop"].append(time.perf_counter() - c)
            end = time.time()
            runs.append(end - t0)
            return end

    t0 = time.time()
    ends = await asyncio.gather(*(one() for _ in range(tasks)))
    return {"makespan": max(ends) - t0, "runs": runs, "parts": dict(parts), "tasks": tasks}


async def run_rebuild(
    model: ScriptedModel, workspace: Path, save: Path, tasks: int, conc: int, turns: int
) -> dict[str, Any]:
    gate = asyncio.Semaphore(conc)
    runs: list[float] = []
    parts: dict[str, list[float]] = defaultdict(list)

    async def one() -> float:
        conversation = str(uuid.uuid4())
        async with gate:
            t0 = time.time()
            for prompt in prompts(turns):
                a = time.perf_counter()
                builder = plain_builder(model, workspace, save).resume(conversation, create=True)
                agent = builder.build()
                await agent.start()
                b = time.perf_counter()
                await agent.chat(prompt)
                c = time.perf_counter()
                await agent.stop()
                d = time.perf_counter()
                parts["start"].append(b - a)
                parts["chat"].append(c - b)
                parts["stop"].append(d - c)
            end = time.time()
            runs.append(end - t0)
            return end

    t0 = time.time()
    ends = await asyncio.gather(*(one() for _ in range(tasks)))
    return {"makespan": max(ends) - t0, "runs": runs, "parts": dict(parts), "tasks": tasks}


WORKER_START: list[float] = []  # `with fleet.worker()` entered: DBOS up, its queue polled


def run_fleet(
    model: ScriptedModel,
    workspace: Path,
    home: Path,
    tasks: int,
    conc: int,
    turns: int,
) -> dict[str, Any]:
    spec = AgentSpec(
        model=model.model_name, base_url=model.base_url, workspace=str(workspace), turn_timeout=300
    )
    with Fleet(default_db_url(home)) as fleet:
        FLEET_ENGINES.add(id(fleet.store.engine))
        w0 = time.perf_counter()
        with fleet.worker(concurrency=conc):
            WORKER_START.append(time.perf_counter() - w0)
            STORE_CALLS.reset()
            SQL.reset()
            AGENT.reset()
            STOPPED_AT.clear()
            submit_times = []
            t0 = time.time()
            handles = []
            for _ in range(tasks):
                s = time.perf_counter()
                handles.append(fleet.submit(spec, prompts(turns)))
                submit_times.append(time.perf_counter() - s)
            for handle in handles:
                # returns once DBOS has the workflow's output: its agent is stopped too
                result = handle.result(timeout=600)
                assert len(result.responses) == turns, result
            store_calls = STORE_CALLS.snapshot()
            sql = SQL.snapshot()
            agent = AGENT.snapshot()
        # The fleet's own rows (DBOS's SQLite timestamps have a resolution of a second):
        # submitted, first turn started, done; and when the task's last agent stopped (the
        # worker stops it after marking the task done).
        with fleet.store.engine.connect() as conn:
            rows = {r.task_id: r for r in conn.execute(sa.select(TASKS))}
            first_turn = {
                r.task_id: r.started_at
                for r in conn.execute(sa.select(TURNS).where(TURNS.c.turn == 0))
            }
    order = [h.task_id for h in handles]
    ends = [max(rows[t].updated_at, STOPPED_AT.get(rows[t].conversation_id, 0.0)) for t in order]
    runs = [end - first_turn[t] for t, end in zip(order, ends, strict=True)]
    # submitted -> first turn started, of the c tasks that started first (all were
    # submitted within a few ms, to an idle worker with c free slots)
    first_wave = sorted(order, key=lambda t: first_turn[t])[:conc]
    pickup = [first_turn[t] - rows[t].submitted_at for t in first_wave]
    return {
        "makespan": max(ends) - t0,
        "runs": runs,
        "pickup": pickup,
        "submit": submit_times,
        "agent": agent,
        "store_calls": store_calls,
        "sql": sql,
        "tasks": tasks,
        "turns": tasks * turns,
    }


# -- the Store alone -----------------------------------------------------------------------


def _synchronous_full(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.execute("PRAGMA synchronous=FULL")


def store_ops(home: Path, n: int) -> dict[str, dict[str, float]]:
    """Median ms of each Store operation a turn makes, on a fresh file: with the fleet's
    engine (pooled, `PRAGMA synchronous=NORMAL`: in WAL mode no fsync per commit; a commit
    survives a killed process, not a power cut) and, swapped in here for comparison, the
    first design's (NullPool: a new SQLite connection and its PRAGMAs per operation, and
    synchronous=FULL: an fsync per commit) and a pooled engine with FULL."""
    from antigravity_sdk.fleet._store import _sqlite_pragmas, sqlalchemy_url

    line = {"v": 1, "kind": "decision", "time": "2026-01-01T00:00:00Z", "tool": "view_file",
            "verdict": "allow", "policy": "p", "rule": "r"}  # fmt: skip
    labels = ("NullPool+FULL", "pooled+FULL", "fleet (NORMAL)")
    stores, keepers = {}, []
    for i, label in enumerate(labels):
        url = default_db_url(home / f"v{i}")
        store = Store(url)
        # In a worker, DBOS's engine keeps connections to the file open; without one, each
        # NullPool close is the file's last and checkpoints the WAL (far slower).
        keeper = sqlite3.connect(url[len("sqlite:///") :])
        keeper.execute("SELECT count(*) FROM antigravity_fleet").fetchall()
        keepers.append(keeper)
        if label != "fleet (NORMAL)":
            store.engine.dispose()
            pool = {"poolclass": sa.pool.NullPool} if label.startswith("NullPool") else {}
            store.engine = sa.create_engine(
                sqlalchemy_url(url), connect_args={"timeout": 60}, **pool
            )
            sa.event.listen(store.engine, "connect", _sqlite_pragmas)
            sa.event.listen(store.engine, "connect", _synchronous_full)  # after NORMAL
        store.add_task(
            task_id="t", conversation_id="c" * 32, workspace=None, spec_hash="h", turns_total=n
        )
        stores[label] = store

    def ops(store: Store) -> dict[str, Callable[[int], Any]]:
        return {
            "state": lambda i: store.state(),
            "start_turn": lambda i: store.start_turn("t", i, "w"),
            "update_task": lambda i: store.update_task("t", turns_done=i),
            "finish_turn": lambda i: store.finish_turn("t", i + 1, 100),
            "charge_tool_call": lambda i: store.charge_tool_call(),
            "add_audit": lambda i: store.add_audit(
                task_id="t", worker="w", spec_hash="h", line=line, text=json.dumps(line)
            ),
        }

    table = {label: ops(stores[label]) for label in labels}
    times: dict[tuple[str, str], list[float]] = defaultdict(list)
    for i in range(n):  # the variants interleaved (the disk's load moves), ops as in a turn
        for label in labels:
            for name, op in table[label].items():
                t0 = time.perf_counter()
                op(i)
                times[(label, name)].append(time.perf_counter() - t0)
    for store in stores.values():
        store.dispose()
    for keeper in keepers:
        keeper.close()
    return {
        label: {name: statistics.median(times[(label, name)]) * 1e3 for name in table[label]}
        for label in labels
    }


# -- memory in a child process ---------------------------------------------------------------


def rss_child(kind: str, conc: int, turns: int) -> None:
    """Run `conc` tasks of `kind` in this (fresh) process; print RSS phases as JSON."""
    logging.basicConfig(level=logging.WARNING)
    phases: dict[str, Any] = {"start": vm_rss_kb("self")}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        workspace = root / "ws"
        workspace.mkdir()
        (workspace / "notes.txt").write_text("a short note\n")
        with served_in_thread(make_script(workspace)) as model:
            phases["model up"] = vm_rss_kb("self")
            with RssSampler(0.05) as sampler:
                if kind == "plain":
                    asyncio.run(run_plain(model, workspace, root / "save", conc, conc, turns))
                    phases["after run"] = vm_rss_kb("self")
                else:
                    spec = AgentSpec(
                        model=model.model_name, base_url=model.base_url, workspace=str(workspace)
                    )
                    with Fleet(default_db_url(root / "fleet")) as fleet:
                        phases["fleet open"] = vm_rss_kb("self")
                        with fleet.worker(concurrency=conc):
                            phases["worker up"] = vm_rss_kb("self")
                            handles = [fleet.submit(spec, prompts(turns)) for _ in range(conc)]
                            for h in handles:
                                h.result(timeout=600)
                            phases["after run"] = vm_rss_kb("self")
            phases["peak during run"] = max(sampler.own) if sampler.own else 0
            phases["trees"] = sampler.samples
    print(json.dumps(phases))


def measure_rss(kind: str, conc: int, turns: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--rss-child", kind]
    command += ["--conc", str(conc), "--turns", str(turns)]
    out = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
    phases: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return phases


# -- main ------------------------------------------------------------------------------------


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 round, c = 1,2, 1 task per slot")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--conc", default="1,2,4")
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--per-slot", type=int, default=2, help="tasks per concurrency slot")
    parser.add_argument("--model-ms", type=float, default=0.0, help="delay of each model reply")
    parser.add_argument(
        "--slow-ms", type=float, default=500.0,
        help="the slow-model section's delay per reply (0: skip the section)",
    )  # fmt: skip
    parser.add_argument("--slow-conc", type=int, default=2)
    parser.add_argument("--rss-child", choices=("plain", "fleet"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    concs = [int(c) for c in args.conc.split(",")]
    if args.rss_child:
        rss_child(args.rss_child, concs[0], args.turns)
        return 0
    if args.quick:
        args.rounds, args.per_slot = 1, 1
        concs = [c for c in concs if c <= 2] or concs[:1]
    logging.basicConfig(level=logging.WARNING)
    instrument()
    load_start = os.getloadavg()[0]
    started = time.perf_counter()
    calls = model_calls_per_task(args.turns)

    arms = ("plain", "rebuild", "fleet")
    slow_arms = ("plain", "fleet")
    results: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    tree_rss: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        workspace = root / "ws"
        workspace.mkdir()
        (workspace / "notes.txt").write_text("a short note\n")
        with served_in_thread(make_script(workspace)) as model:
            DELAY[0] = args.model_ms / 1e3
            # warm-up (page cache, imports, DBOS's first launch): not counted
            asyncio.run(run_plain(model, workspace, root / "warm", 1, 1, 2))
            run_fleet(model, workspace, root / "warm-fleet", 1, 1, 2)
            run_id = 0

            def run_arm(arm: str, conc: int, tasks: int) -> dict[str, Any]:
                nonlocal run_id
                run_id += 1
                before = len(model.requests)
                with RssSampler() as sampler:
                    if arm == "fleet":
                        r = run_fleet(
                            model, workspace, root / f"fleet-{run_id}", tasks, conc, args.turns
                        )
                    else:
                        fn = run_plain if arm == "plain" else run_rebuild
                        r = asyncio.run(
                            fn(model, workspace, root / f"save-{run_id}", tasks, conc, args.turns)
                        )
                made = len(model.requests) - before
                if made != tasks * calls:
                    raise SystemExit(
                        f"{arm} c={conc}: {made} model calls, expected {tasks * calls}"
                    )
                del model.requests[:]
                tree_rss[arm].extend(sampler.samples)
                return r

            for rnd in range(args.rounds):
                for conc in concs:
                    # the rebuild arm (the first design's shape, 3-4x slower) runs at the
                    # lowest c only, one task per slot, to keep the run short
                    here = [a for a in arms if a != "rebuild" or conc == concs[0]]
                    shift = (rnd + concs.index(conc)) % len(here)
                    for arm in here[shift:] + here[:shift]:
                        tasks = conc if arm == "rebuild" else args.per_slot * conc
                        results[(arm, conc)].append(run_arm(arm, conc, tasks))
            slow: dict[str, list[dict[str, Any]]] = defaultdict(list)
            if args.slow_ms > 0:
                DELAY[0] = args.slow_ms / 1e3
                for rnd in range(args.rounds):
                    shift = rnd % len(slow_arms)
                    for arm in slow_arms[shift:] + slow_arms[:shift]:
                        slow[arm].append(run_arm(arm, args.slow_conc, args.slow_conc))
                DELAY[0] = args.model_ms / 1e3
            full_runs = time.perf_counter() - started
            ops = store_ops(root / "store", 60 if args.quick else 200)
    rss_conc = max(concs)
    rss = {kind: measure_rss(kind, rss_conc, args.turns) for kind in ("plain", "fleet")}
    total = time.perf_counter() - started

    # -- report ------------------------------------------------------------------------
    print(
        f"fleet vs plain agents: {args.turns}-turn tasks ({calls} model calls, "
        f"{calls - args.turns} tool calls each), {args.per_slot} task(s) per slot, "
        f"{args.rounds} round(s), arms interleaved; model delay {args.model_ms:g} ms; "
        f"{os.cpu_count()} CPUs"
    )
    print("target: fleet adds <= 5 % to a task's wall time, throughput within 10 % of plain")
    print(f"load average (1 min) at start {load_start:.2f}, at end {os.getloadavg()[0]:.2f}")
    print()
    head = (
        f"{'c':>2} {'arm':<8}{'tasks':>6}{'tasks/min':>10}{'task s':>8}{'ms/turn':>9}"
        f"{'thru ratio':>11}{'time ratio':>11}{'per round':>10}  verdict"
    )
    print(
        "throughput (tasks / makespan) and run time of a task (start to end, without queueing);"
        " medians over rounds;\nratios against plain at the same c: of the medians, and "
        "'per round' the median of each round's time ratio"
    )
    print(head)

    def tpm_of(r: dict[str, Any]) -> float:
        return float(r["tasks"] / r["makespan"] * 60)

    summary: dict[int, dict[str, float]] = {}
    for conc in concs:
        plain_rs = results[("plain", conc)]
        base_tpm = med([tpm_of(r) for r in plain_rs])
        base_run = med([x for r in plain_rs for x in r["runs"]])
        summary[conc] = {"plain_run": base_run}
        for arm in arms:
            rs = results[(arm, conc)]
            if not rs:
                continue
            tpm = med([tpm_of(r) for r in rs])
            run = med([x for r in rs for x in r["runs"]])
            per_round = med(
                [med(r["runs"]) / med(p["runs"]) for r, p in zip(rs, plain_rs, strict=True)]
            )
            summary[conc][f"{arm}_run"] = run
            summary[conc][f"{arm}_tpm"] = tpm
            verdict = ""
            if arm == "fleet":
                ok = run <= base_run * 1.05 and tpm >= base_tpm * 0.90
                verdict = "meets target" if ok else "MISSES target"
            print(
                f"{conc:>2} {arm:<8}{rs[0]['tasks']:>6}{tpm:>10.1f}{run:>8.2f}"
                f"{run / args.turns * 1e3:>9.0f}{tpm / base_tpm:>11.2f}{run / base_run:>11.2f}"
                f"{per_round:>10.2f}  {verdict}"
            )
    print()

    print("where a task's time goes (ms, medians over rounds)")
    print(
        f"{'c':>2} {'arm':<8}{'starts/task':>12}{'start':>7}{'chat':>7}{'stop':>7}"
        f"{'other/turn':>11}{'total/turn':>11}"
    )
    for conc in concs:
        for arm in arms:
            if not results[(arm, conc)]:
                continue
            rows_ = []
            for r in results[(arm, conc)]:
                if arm == "fleet":
                    count, secs = r["agent"]
                    starts = count.get("start", 0)
                    start = secs.get("start", 0.0) / max(starts, 1)
                    chat = secs.get("chat", 0.0) / max(count.get("chat", 0), 1)
                    stop = secs.get("stop", 0.0) / max(count.get("stop", 0), 1)
                    agent_total = sum(secs.get(k, 0.0) for k in ("start", "chat", "stop"))
                else:
                    p = r["parts"]
                    starts = len(p["start"])
                    start, chat, stop = (statistics.mean(p[k]) for k in ("start", "chat", "stop"))
                    agent_total = sum(sum(p[k]) for k in ("start", "chat", "stop"))
                turns_ = r["tasks"] * args.turns
                rows_.append(
                    (starts / r["tasks"], start, chat, stop,
                     (sum(r["runs"]) - agent_total) / turns_, sum(r["runs"]) / turns_)
                )  # fmt: skip
            cols = [med([row[i] for row in rows_]) for i in range(6)]
            print(
                f"{conc:>2} {arm:<8}{cols[0]:>12.1f}{cols[1] * 1e3:>7.0f}{cols[2] * 1e3:>7.1f}"
                f"{cols[3] * 1e3:>7.0f}{cols[4] * 1e3:>11.1f}{cols[5] * 1e3:>11.1f}"
            )
    print(
        "  start/chat/stop: mean ms of one Agent.start (spawn + handshake + resume), one chat, "
        "one stop; other/turn: the rest of the task's run\n  time per turn (fleet: its "
        "database rows, DBOS step checkpoints, spec parse and build, thread hops)"
    )
    for conc in concs:
        extra = (summary[conc]["fleet_run"] - summary[conc]["plain_run"]) / args.turns
        plain_turn = summary[conc]["plain_run"] / args.turns
        need = extra / 0.05 - plain_turn
        tail = (
            f"5 % of a turn whose model time is {need:.2f} s or more (if the added cost "
            "does not change with the model's speed)"
            if need > 0
            else "within 5 % already"
        )
        print(f"  c={conc}: fleet adds {extra * 1e3:4.0f} ms per turn: {tail}")
    print()

    print("the queue's own cost (fleet arm, all runs)")
    fl_all = [r for c in concs for r in results[("fleet", c)]]
    n_turns = sum(r["turns"] for r in fl_all)
    submit_ms = med([x for r in fl_all for x in r["submit"]]) * 1e3
    pickup = [x for r in fl_all for x in r["pickup"]]
    print(f"  submit() per task (client: task row + DBOS enqueue): {submit_ms:.1f} ms")
    print(
        f"  submit -> first turn started, idle worker:   {med(pickup) * 1e3:.0f} ms median, "
        f"{max(pickup) * 1e3:.0f} ms max (the worker's DBOS queue polls every "
        f"{_fleet._QUEUE_POLL:g} s on SQLite)"
    )
    print(
        f"  worker start (`with fleet.worker()`: DBOS launched, its queue polled), once per "
        f"worker: {med(WORKER_START) * 1e3:.0f} ms median, {max(WORKER_START) * 1e3:.0f} ms max"
        " (DBOS's queue manager looks for new queues every 1 s)"
    )

    def summed(rs: list[dict[str, Any]], key: str) -> tuple[dict[str, int], dict[str, float]]:
        count: dict[str, int] = defaultdict(int)
        secs: dict[str, float] = defaultdict(float)
        for r in rs:
            for k, v in r[key][0].items():
                count[k] += v
            for k, v in r[key][1].items():
                secs[k] += v
        return count, secs

    sql_count, _ = summed(fl_all, "sql")
    print(f"  worker-side SQL per turn ({n_turns} turns; DBOS's include its queue polls):")
    for which in ("fleet", "dbos"):
        w, rd, cm = (sql_count.get(f"{which}:{k}", 0) for k in ("write", "read", "commit"))
        print(
            f"    {which + ' tables':<13}{w / n_turns:>6.1f} writes {rd / n_turns:>6.1f} reads "
            f"{cm / n_turns:>6.1f} commits"
        )
    per_c = {c: summed(results[("fleet", c)], "store_calls") for c in concs}
    turns_c = {c: sum(r["turns"] for r in results[("fleet", c)]) for c in concs}
    all_count, _ = summed(fl_all, "store_calls")
    names = sorted((k for k in all_count if k != ON_LOOP), key=lambda k: -all_count[k])
    print(
        "  Store calls per turn (worker side, each in a thread: the turn waits for it);"
        " ms each (wall, median run) at c ="
    )
    print(f"    {'call':<18}{'per turn':>9}" + "".join(f"{'c=' + str(c):>8}" for c in concs))
    for name in [*names, ON_LOOP]:
        each = []
        for c in concs:
            count, secs = per_c[c]
            each.append(secs.get(name, 0.0) / count[name] * 1e3 if count.get(name) else 0.0)
        label = "  on the loop" if name == ON_LOOP else name
        print(
            f"    {label:<18}{all_count.get(name, 0) / n_turns:>9.2f}"
            + "".join(f"{x:>8.2f}" for x in each)
        )
    total_ms = [
        sum(v for k, v in per_c[c][1].items() if k != ON_LOOP) / turns_c[c] * 1e3 for c in concs
    ]
    print(f"    {'sum, ms per turn':<27}" + "".join(f"{x:>8.1f}" for x in total_ms))
    print(
        "    (on the loop: the audit lines TableAudit writes, each an add_audit above, called"
        " on the worker's event loop: every agent of the worker waits)"
    )
    print("  each Store operation alone, fresh file, sequential (median ms):")
    labels = list(ops)
    print(f"    {'op':<18}" + "".join(f"{k:>15}" for k in labels))
    for name in ops[labels[0]]:
        print(f"    {name:<18}" + "".join(f"{ops[k][name]:>15.2f}" for k in labels))
    print()

    if slow:
        tasks = args.slow_conc
        print(
            f"with a model that takes {args.slow_ms:g} ms per reply (c={args.slow_conc}, "
            f"{tasks} tasks, {args.rounds} round(s), arms interleaved)"
        )
        print(
            f"{'arm':<8}{'tasks/min':>10}{'task s':>8}{'thru ratio':>11}{'time ratio':>11}", end=""
        )
        print("  verdict")
        base_tpm = med([tasks / r["makespan"] * 60 for r in slow["plain"]])
        base_run = med([x for r in slow["plain"] for x in r["runs"]])
        for arm in slow_arms:
            tpm = med([tasks / r["makespan"] * 60 for r in slow[arm]])
            run = med([x for r in slow[arm] for x in r["runs"]])
            verdict = ""
            if arm == "fleet":
                ok = run <= base_run * 1.05 and tpm >= base_tpm * 0.90
                verdict = "meets target" if ok else "MISSES target"
            print(
                f"{arm:<8}{tpm:>10.1f}{run:>8.2f}{tpm / base_tpm:>11.2f}{run / base_run:>11.2f}"
                f"  {verdict}"
            )
        print()

    print("memory")
    for arm in arms:
        trees = tree_rss.get(arm, [])
        if not trees:
            continue
        tree_mb = [t[0] / 1024 for t in trees]
        harness_mb = med([t[1] / 1024 for t in trees])
        print(
            f"  {arm:<8} per running agent, harness tree (supervisor + harness): median "
            f"{med(tree_mb):.0f} MB, max {max(tree_mb):.0f} MB; harness alone median "
            f"{harness_mb:.0f} MB ({len(trees)} samples)"
        )
    for kind, p in rss.items():
        keys = [k for k in p if k != "trees"]
        shown = ", ".join(f"{k} {p[k] / 1024:.0f}" for k in keys)
        print(f"  python process, {kind} c={rss_conc} in a fresh child (MB): {shown}")
    share = (rss["fleet"]["peak during run"] - rss["plain"]["peak during run"]) / 1024
    print(
        f"  worker's Python share: {share:.0f} MB more than plain at c={rss_conc} "
        f"({share / rss_conc:.1f} MB per agent slot)"
    )
    print()
    print(f"wall: {total:.0f} s ({full_runs:.0f} s of arms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
