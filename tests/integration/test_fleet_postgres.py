"""The fleet on PostgreSQL with three worker PROCESSES, on the REAL harness, offline.

Each test gets a database of its own on the session's throwaway PostgreSQL server (the
`postgres_url` fixture; skipped with its reason where none can start), three workers
(`python -c "...Fleet(url, save_dir=...).worker(...).run()"`, distinct worker ids, one
conversation directory they share) and a ScriptedModel served from a thread of this
process, which every worker's harness calls over HTTP. After each test the workers are
stopped (Ctrl-C) and no harness any of them ran may still run.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cli_support import served_in_thread
from fleet_support import (
    ASK_BEFORE_WRITING,
    Gate,
    HarnessWatch,
    Requests,
    WorkerProcess,
    assistant_texts,
    check_stopped,
    fresh_database,
    prompts_in,
    tool_results,
    wait_until,
    worker_env,
)

pytest.importorskip("dbos", reason="the fleet tests need the fleet extra")
pytest.importorskip("psycopg", reason="the PostgreSQL fleet tests need psycopg")

from antigravity_sdk.fleet import AgentSpec, Fleet
from antigravity_sdk.testing import Reply, text, tool_call

RESULT_TIMEOUT = 90.0


@dataclass
class Cluster:
    url: str
    fleet: Fleet
    root: Path
    ws: Path
    save: Path
    env: dict[str, str]
    watch: HarnessWatch
    workers: dict[str, WorkerProcess] = field(default_factory=dict)

    def start(self, worker_id: str, concurrency: int) -> WorkerProcess:
        worker = self.workers.get(worker_id)
        if worker is None:
            worker = WorkerProcess(
                self.url,
                self.save,
                worker_id,
                concurrency=concurrency,
                env=self.env,
                log_dir=self.root,
            )
            self.workers[worker_id] = worker
        worker.start()
        self.watch.add_host(worker.pid)
        return worker

    def start_all(self, concurrency: int, count: int = 3) -> list[WorkerProcess]:
        return [self.start(f"w{i + 1}", concurrency) for i in range(count)]

    def stop_all(self) -> None:
        """Ctrl-C every worker at once, then wait for each (SIGKILL if it hangs)."""
        for worker in self.workers.values():
            if worker.running():
                assert worker.proc is not None
                worker.proc.send_signal(signal.SIGINT)
        for worker in self.workers.values():
            worker.stop(timeout=60)

    def spec(self, model: Any, policies: str = "", **fields: Any) -> AgentSpec:
        return AgentSpec(
            model=model.model_name,
            base_url=model.base_url,
            workspace=str(self.ws),
            policies=policies,
            **fields,
        )

    def logs(self) -> str:
        return "\n".join(
            f"--- worker {w.worker_id} ---\n{w.log_tail()}" for w in self.workers.values()
        )


@pytest.fixture
def cluster(postgres_url: str, tmp_path: Path) -> Iterator[Cluster]:
    ws = tmp_path / "ws"
    ws.mkdir()
    watch = HarnessWatch().start()
    with fresh_database(postgres_url) as url:
        save = tmp_path / "save"
        fleet = Fleet(url, save_dir=save)
        cluster = Cluster(url, fleet, tmp_path, ws.resolve(), save, worker_env(tmp_path), watch)
        try:
            yield cluster
        finally:
            cluster.stop_all()
            fleet.close()
            watch.stop()
            print(cluster.logs())  # shown when the test fails
    watch.assert_none_left()


def decisions(fleet: Fleet, **filters: str) -> list[dict[str, Any]]:
    return [e for e in fleet.audit(**filters) if e["kind"] == "decision"]


def looping(ws: Path, requests: Requests, calls: int, gate: Gate | None = None) -> Any:
    """An async script: the prompt `loop …` views a file `calls` times in its turn,
    its first request held at `gate`; any other prompt is answered at once."""
    (ws / "a.txt").write_text("A")

    async def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        request = requests.record(messages)
        results = tool_results(messages)
        if gate is not None and request.prompt.startswith("loop") and not results:
            await gate.wait(request.prompt)
        if request.prompt.startswith("loop") and len(results) < calls:
            return tool_call("view_file", AbsolutePath=str(ws / "a.txt"))
        return text(f"{request.prompt}: {len(results)} calls")

    return script


# -- spreading, and surviving a killed worker ------------------------------------------------


def test_tasks_spread_and_a_killed_worker_resumes_its_task(cluster: Cluster) -> None:
    requests = Requests()
    fleet = cluster.fleet
    spread = Gate(needed=3, timeout=25)  # three tasks in flight at once: on two workers at least
    cut = threading.Event()  # the worker running "[k] two" is dead
    released: list[bool] = []

    async def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        request = requests.record(messages)
        prompt = request.prompt
        if prompt.startswith("spread"):
            await spread.wait(prompt)
        if prompt == "[k] two" and not released:
            released.append(True)
            # Mid-turn: the test kills this request's worker, then sets `cut`.
            await asyncio.to_thread(cut.wait, 25)
            return text("never read: its harness is gone")
        return text(f"answer to {prompt}")

    with served_in_thread(script) as model:
        spec = cluster.spec(model)
        cluster.start_all(concurrency=2)
        killed_task = fleet.submit(spec, ["[k] one", "[k] two", "[k] three"], task_id="t-kill")
        handles = [fleet.submit(spec, f"spread {i}", task_id=f"t-spread-{i}") for i in range(6)]

        wait_until(lambda: requests.for_prompt("[k] two"), timeout=RESULT_TIMEOUT, what="turn two")
        victim = wait_until(
            lambda: killed_task.status().worker, timeout=30, what="the task's worker"
        )
        assert killed_task.status().status == "running"
        worker = cluster.workers[victim]
        killed_pid = worker.pid
        assert cluster.watch.harnesses_seen(killed_pid) >= 1
        worker.kill()
        cut.set()
        # Its harnesses die with it (the supervisor's parent-death signal).
        cluster.watch.assert_none_left(host=killed_pid, within=15)
        # Nobody else takes the dead worker's task: it waits for that worker's id.
        time.sleep(2.0)
        assert len(requests.for_prompt("[k] two")) == 1
        assert killed_task.status().status == "running"
        # Restarted under the same id, the worker recovers its tasks: DBOS puts them
        # back on the queue, and any worker may run them (the conversations are shared).
        cluster.start(victim, concurrency=2)

        results = {h.task_id: h.result(timeout=RESULT_TIMEOUT) for h in [killed_task, *handles]}

    assert all(r.ended == "done" for r in results.values())
    for i in range(6):
        assert results[f"t-spread-{i}"].text == f"answer to spread {i}"
    spread_workers = {fleet.status(f"t-spread-{i}").worker for i in range(6)}
    assert len(spread_workers) >= 2, spread_workers
    assert {s.worker for s in fleet.tasks()} <= set(cluster.workers)

    # The killed task resumed: turn one ran once, turn two again in the same
    # conversation (its request carries turn one), then turn three.
    assert [r.text for r in results["t-kill"].responses] == [
        "answer to [k] one",
        "answer to [k] two",
        "answer to [k] three",
    ]
    assert len(requests.for_prompt("[k] one")) == 1
    again = requests.for_prompt("[k] two")
    assert len(again) == 2
    rerun = again[1].messages
    assert prompts_in(rerun)[0] == "[k] one" and prompts_in(rerun)[-1] == "[k] two"
    assert "answer to [k] one" in assistant_texts(rerun)
    third = requests.for_prompt("[k] three")[0].messages
    assert prompts_in(third)[0] == "[k] one"
    status = killed_task.status()
    assert (status.status, status.turns_done) == ("done", 3)
    assert status.worker in cluster.workers


# -- approvals from anywhere ------------------------------------------------------------------


APPROVE = """
import sys
from antigravity_sdk.fleet import Fleet
with Fleet(sys.argv[1]) as fleet:
    approval = fleet.approve(sys.argv[2], by="another-process")
    print(approval.status, approval.answered_by)
"""


def test_an_approval_is_answered_from_another_process(cluster: Cluster) -> None:
    """An answer written into the approvals table with SQL (issue 26: a contained process
    that reached the database) is no answer: the held write is denied. The next turn's,
    answered with `Fleet.approve` in another process, runs."""
    import psycopg

    requests = Requests()
    fleet = cluster.fleet
    target = cluster.ws / "approved.txt"
    forged_target = cluster.ws / "forged.txt"

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        request = requests.record(messages)
        results = tool_results(messages)
        if not results:
            where = forged_target if request.prompt == "write forged" else target
            return tool_call(
                "write_to_file", TargetFile=str(where), CodeContent="ok", Overwrite=True
            )
        return text(f"tool said: {results[-1]}")

    with served_in_thread(script) as model:
        cluster.start_all(concurrency=1)
        handle = fleet.submit(cluster.spec(model, ASK_BEFORE_WRITING), ["write forged", "write it"])
        [forged] = wait_until(fleet.approvals, timeout=RESULT_TIMEOUT, what="the first approval")
        with psycopg.connect(cluster.url, autocommit=True) as conn:
            conn.execute(
                "UPDATE antigravity_approvals SET status='approved', answered_by='alice' "
                "WHERE id = %s",
                (forged.id,),
            )
        [approval] = wait_until(
            lambda: [a for a in fleet.approvals() if a.id != forged.id],
            timeout=RESULT_TIMEOUT,
            what="the second approval",
        )
        assert handle.status().status == "waiting"
        assert approval.worker == handle.status().worker
        assert approval.rule == "ask before writing"
        assert not target.exists()
        answered = subprocess.run(
            [sys.executable, "-c", APPROVE, cluster.url, approval.id],
            env=cluster.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert answered.returncode == 0, answered.stderr
        status, by = answered.stdout.split()
        assert status in ("approved", "used") and by == "another-process"
        result = handle.result(timeout=RESULT_TIMEOUT)

    assert result.ended == "done"
    assert target.read_text().strip() == "ok"
    assert not forged_target.exists()
    assert "not signed by the fleet's key" in result.responses[0].text
    assert fleet.store.approval(forged.id).status == "forged"
    assert fleet.store.approval(approval.id).answered_by == "another-process"
    denied, allowed = decisions(fleet, tool="write_to_file")
    assert (denied["verdict"], denied["turn"]) == ("deny", 1)
    assert (allowed["verdict"], allowed["rule"]) == ("allow", "ask before writing")
    assert allowed["worker"] == handle.status().worker


# -- the fleet's budget and switch across workers ---------------------------------------------


def test_the_fleet_budget_holds_across_workers(cluster: Cluster) -> None:
    requests = Requests()
    fleet = cluster.fleet
    fleet.configure(max_tool_calls=5)
    gate = Gate(needed=3, timeout=25)  # the three tasks run at once, one per worker
    with served_in_thread(looping(cluster.ws, requests, calls=4, gate=gate)) as model:
        cluster.start_all(concurrency=1)
        spec = cluster.spec(model)
        handles = [fleet.submit(spec, f"loop {i}", task_id=f"t-{i}") for i in range(3)]
        results = [h.result(timeout=RESULT_TIMEOUT) for h in handles]
        late = fleet.submit(spec, "loop late")
        late_result = late.result(timeout=RESULT_TIMEOUT)

    views = decisions(fleet, tool="view_file")
    allowed = [d for d in views if d["verdict"] == "allow"]
    denied = [d for d in views if d["verdict"] == "deny"]
    assert (len(allowed), len(denied)) == (5, 7)
    assert len({d["worker"] for d in views}) == 3  # every worker called, one budget
    for line in denied:
        assert (line["by"], line["hook"]) == ("hook", "FleetGuard")
        assert "tool-call budget (5) is spent" in line["message"]
    assert all(r.ended == "done" for r in results)
    assert fleet.state().tool_calls == 12
    assert late_result.ended == "budget" and late.status().status == "budget"
    assert requests.for_prompt("loop late") == []


def test_the_stop_switch_holds_across_workers(cluster: Cluster) -> None:
    requests = Requests()
    fleet = cluster.fleet
    gate = Gate(needed=3, timeout=25)  # three loops in flight at once: on two workers at least
    with served_in_thread(looping(cluster.ws, requests, calls=60, gate=gate)) as model:
        cluster.start_all(concurrency=2)
        spec = cluster.spec(model)
        loops = [fleet.submit(spec, f"loop {i}", task_id=f"t-loop-{i}") for i in range(3)]
        wait_until(
            lambda: all(len(requests.for_prompt(f"loop {i}")) >= 3 for i in range(3)),
            timeout=RESULT_TIMEOUT,
            what="three looping turns",
        )
        running_on = {h.status().worker for h in loops}
        assert len(running_on) >= 2, running_on
        before = len(decisions(fleet))
        stopped_at = time.time()
        fleet.stop()
        began = time.monotonic()
        wait_until(
            lambda: all(h.status().status == "stopped" for h in loops),
            timeout=30,
            what="every running task to stop",
        )
        assert time.monotonic() - began < 10, "the turns did not end within a few seconds"
        queued = fleet.submit(spec, "later", task_id="t-later")
        time.sleep(2.0)
        assert queued.status().status in ("queued", "stopped")
        assert requests.for_prompt("later") == []
        calls = len(requests.all())
        time.sleep(0.5)
        assert len(requests.all()) == calls
        check_stopped(decisions(fleet)[before:], stopped_at)

        fleet.resume()
        assert queued.result(timeout=RESULT_TIMEOUT).text == "later: 0 calls"
        results = [h.result(timeout=RESULT_TIMEOUT) for h in loops]

    assert [r.text for r in results] == [f"loop {i}: 60 calls" for i in range(3)]
    assert not fleet.state().stopped


# -- start-up: many workers at once on a new database (issue 26, finding 10) ----------------


def test_workers_starting_together_on_a_new_database_all_serve(
    postgres_url: str, tmp_path: Path
) -> None:
    """Six `antigravity fleet worker` processes started at once on a database nobody has
    used: none fails making the schema (it used to race: UniqueViolation, DuplicateTable),
    each says it is ready, and six tasks held in flight together run one on each."""
    workers = 6
    ws = tmp_path / "ws"
    ws.mkdir()
    env = worker_env(tmp_path)
    watch = HarnessWatch().start()
    procs: list[subprocess.Popen[bytes]] = []
    logs = [tmp_path / f"w{i}.log" for i in range(workers)]
    try:
        with fresh_database(postgres_url) as url:
            for i, log in enumerate(logs):
                with open(log, "wb") as out:
                    procs.append(
                        subprocess.Popen(
                            [
                                sys.executable,
                                "-m",
                                "antigravity_sdk",
                                "fleet",
                                "worker",
                                "--db",
                                url,
                                "--worker-id",
                                f"w{i}",
                            ],
                            env=env,
                            cwd=tmp_path,
                            stdin=subprocess.DEVNULL,
                            stdout=out,
                            stderr=subprocess.STDOUT,
                        )
                    )
            for proc in procs:
                watch.add_host(proc.pid)

            def ready() -> bool:
                exited = [(i, p.returncode) for i, p in enumerate(procs) if p.poll() is not None]
                assert not exited, (exited, [log.read_text() for log in logs])
                return all(f"worker w{i}: ready" in log.read_text() for i, log in enumerate(logs))

            wait_until(ready, timeout=RESULT_TIMEOUT, what="six workers ready")
            requests = Requests()
            gate = Gate(needed=workers, timeout=30)

            async def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
                request = requests.record(messages)
                await gate.wait(request.prompt)
                return text(f"answer to {request.prompt}")

            with served_in_thread(script) as model, Fleet(url) as fleet:
                spec = AgentSpec(model=model.model_name, base_url=model.base_url, workspace=str(ws))
                handles = [fleet.submit(spec, f"task {i}", task_id=f"t{i}") for i in range(workers)]
                results = [h.result(timeout=RESULT_TIMEOUT) for h in handles]
                ran_on = {fleet.status(f"t{i}").worker for i in range(workers)}
            assert [r.text for r in results] == [f"answer to task {i}" for i in range(workers)]
            assert len(gate.arrived) == workers  # all six in flight at once
            assert ran_on == {f"w{i}" for i in range(workers)}, ran_on  # one per worker
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            codes = [proc.wait(60) for proc in procs]
            assert codes == [0] * workers, [log.read_text()[-2000:] for log in logs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        watch.stop()
    watch.assert_none_left()
