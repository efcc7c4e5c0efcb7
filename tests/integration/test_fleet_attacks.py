"""Attacks on the fleet's promises on the REAL harness, offline: a database that fails
under the guard, a grant sought by the same call in another task, and an audit table
that refuses lines. Each test has its own fleet under `tmp_path` and a worker on a
thread of this process; no harness may be left running after it."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import served_in_thread
from fleet_support import (
    ASK_BEFORE_WRITING,
    NO_WRITES,
    HarnessWatch,
    Requests,
    harness_env,
    tool_results,
    wait_until,
)

pytest.importorskip("dbos", reason="the fleet tests need the fleet extra")

from antigravity_sdk.fleet import AgentSpec, Fleet
from antigravity_sdk.testing import Reply, text, tool_call

TIMEOUT = 90.0
WORKER = "attacks-1"


ALLOW_ALL = """
[[rule]]
tool = "*"
decision = "allow"
"""


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fleet]:
    for key, value in harness_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    (tmp_path / "ws").mkdir()
    watch = HarnessWatch({os.getpid()}).start()
    fleet = Fleet(f"sqlite:///{tmp_path / 'fleet' / 'fleet.sqlite'}", save_dir=tmp_path / "save")
    try:
        yield fleet
    finally:
        fleet.close()
        watch.stop()
    watch.assert_none_left()


def writer(ws: Path, requests: Requests) -> Any:
    """`write NAME CONTENT` writes CONTENT to NAME in `ws`, then reports the result."""

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        request = requests.record(messages)
        words = request.prompt.split()
        results = tool_results(messages)
        if results:
            return text(f"tool said: {results[-1]}")
        return tool_call(
            "write_to_file", TargetFile=str(ws / words[1]), CodeContent=words[2], Overwrite=True
        )

    return script


def spec(model: Any, ws: Path, policies: str) -> AgentSpec:
    return AgentSpec(
        model=model.model_name, base_url=model.base_url, workspace=str(ws), policies=policies
    )


def test_a_database_that_fails_under_the_guard_denies_the_call(
    fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = (tmp_path / "ws").resolve()

    def unreachable() -> Any:
        raise OSError("the fleet database is unreachable")

    monkeypatch.setattr(fleet.store, "charge_tool_call", unreachable)
    with served_in_thread(writer(ws, Requests())) as model, fleet.worker(1, worker_id=WORKER):
        result = fleet.submit(spec(model, ws, ""), "write x.txt leaked").result(timeout=TIMEOUT)

    assert not (ws / "x.txt").exists()
    assert result.ended == "done" and "denied" in result.text
    [line] = [e for e in fleet.audit(tool="write_to_file") if e["kind"] == "decision"]
    assert (line["verdict"], line["hook"]) == ("deny", "FleetGuard")


def test_a_grant_in_one_task_is_not_used_by_the_same_call_in_another(
    fleet: Fleet, tmp_path: Path
) -> None:
    """Two tasks make the very same call (same file, same content). Approving the first
    task's approval lets only that task write; the second keeps waiting on its own,
    and its denial keeps the file as the first wrote it."""
    ws = (tmp_path / "ws").resolve()
    with served_in_thread(writer(ws, Requests())) as model, fleet.worker(2, worker_id=WORKER):
        policies = spec(model, ws, ASK_BEFORE_WRITING)
        first = fleet.submit(policies, "write same.txt one", task_id="t-first")
        [asked] = wait_until(fleet.approvals, timeout=TIMEOUT, what="the first approval")
        fleet.approve(asked.id)
        assert first.result(timeout=TIMEOUT).ended == "done"
        (ws / "same.txt").unlink()
        second = fleet.submit(policies, "write same.txt one", task_id="t-second")
        [other] = wait_until(fleet.approvals, timeout=TIMEOUT, what="the second approval")
        assert other.id != asked.id and other.args == asked.args
        time.sleep(1.0)
        assert not (ws / "same.txt").exists()
        assert second.status().status == "waiting"
        fleet.deny(other.id)
        assert "denied" in second.result(timeout=TIMEOUT).text

    assert not (ws / "same.txt").exists()
    verdicts = {
        e["task"]: e["verdict"]
        for e in fleet.audit(tool="write_to_file")
        if e["kind"] == "decision"
    }
    assert verdicts == {"t-first": "allow", "t-second": "deny"}


def test_an_audit_table_that_refuses_lines_lets_no_call_through(
    fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The table refuses every decision line: the denied write is still denied, an
    allowed one is denied too (no call runs off the record), the tasks end, and each lost
    line is logged as an error."""
    ws = (tmp_path / "ws").resolve()
    store = fleet.store
    add = store.add_audit

    def refuse_decisions(**kwargs: Any) -> None:
        if kwargs["line"].get("kind") == "decision":
            raise OSError("disk I/O error")
        add(**kwargs)

    monkeypatch.setattr(store, "add_audit", refuse_decisions)
    with (
        caplog.at_level(logging.ERROR, logger="antigravity_sdk.audit"),
        served_in_thread(writer(ws, Requests())) as model,
        fleet.worker(1, worker_id=WORKER),
    ):
        result = fleet.submit(spec(model, ws, NO_WRITES), "write y.txt no").result(timeout=TIMEOUT)
        allowed = fleet.submit(spec(model, ws, ALLOW_ALL), "write z.txt yes")
        allowed_result = allowed.result(timeout=TIMEOUT)

    assert not (ws / "y.txt").exists()
    assert result.ended == "done" and "denied" in result.text
    assert "disk I/O error" in caplog.text
    kinds = [e["kind"] for e in fleet.audit()]
    assert "decision" not in kinds and "session" in kinds
    # Fail-closed: a call its policies allow is denied when its decision cannot be stored.
    assert not (ws / "z.txt").exists()
    assert "could not record this decision" in allowed_result.text


# -- the controls out of the agent's reach (issue 26) -----------------------------------------


def test_an_approval_written_into_the_database_is_no_answer(fleet: Fleet, tmp_path: Path) -> None:
    """Finding 1: `UPDATE antigravity_approvals SET status='approved', answered_by='alice'`,
    written straight into the database while the call waits. The held write never runs: it
    is denied, saying the answer was not signed by the fleet's key. The next turn's write,
    approved with `Fleet.approve` from another process, runs."""
    import sqlite3
    import subprocess
    import sys

    from fleet_support import worker_env

    ws = (tmp_path / "ws").resolve()
    path = fleet.store.engine.url.database
    assert path is not None
    with served_in_thread(writer(ws, Requests())) as model, fleet.worker(1, worker_id=WORKER):
        handle = fleet.submit(
            spec(model, ws, ASK_BEFORE_WRITING), ["write deploy.txt forged", "write ok.txt real"]
        )
        [forged] = wait_until(fleet.approvals, timeout=TIMEOUT, what="the first approval")
        with sqlite3.connect(path) as db:
            db.execute(
                "UPDATE antigravity_approvals SET status='approved', answered_by='alice' "
                "WHERE id = ?",
                (forged.id,),
            )
        real = wait_until(
            lambda: [a for a in fleet.approvals() if a.id != forged.id],
            timeout=TIMEOUT,
            what="the second turn's approval",
        )[0]
        assert not (ws / "deploy.txt").exists()
        code = (
            "import sys; from antigravity_sdk.fleet import Fleet\n"
            "with Fleet(sys.argv[1]) as f: f.approve(sys.argv[2], by='bob')"
        )
        answered = subprocess.run(
            [sys.executable, "-c", code, fleet.db_url, real.id],
            env=worker_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert answered.returncode == 0, answered.stderr
        result = handle.result(timeout=TIMEOUT)

    assert not (ws / "deploy.txt").exists()
    assert (ws / "ok.txt").read_text().strip() == "real"
    first, second = (r.text for r in result.responses)
    assert "not signed by the fleet's key" in first and "denied" in first.lower(), first
    assert "not signed" not in second
    found = fleet.store.approval(forged.id)
    assert found is not None and found.status == "forged"
    writes = [e for e in fleet.audit(tool="write_to_file") if e["kind"] == "decision"]
    assert [(e["turn"], e["verdict"]) for e in writes] == [(1, "deny"), (2, "allow")]
    assert "not signed by the fleet's key" in writes[0]["message"]


def test_a_task_cannot_reach_another_tasks_conversation(fleet: Fleet, tmp_path: Path) -> None:
    """Each task's harness keeps its conversation in a directory of its own, and the
    others' are hidden from it: a second task can neither read nor overwrite the first
    task's saved conversation."""
    ws = (tmp_path / "ws").resolve()
    requests = Requests()
    target: list[Path] = []

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        request = requests.record(messages)
        results = tool_results(messages)
        if request.prompt == "pry" and not results:
            return tool_call("view_file", AbsolutePath=str(target[0]))
        if request.prompt == "pry" and len(results) == 1:
            return tool_call(
                "write_to_file", TargetFile=str(target[0]), CodeContent="x", Overwrite=True
            )
        if request.prompt == "pry":
            return text("results: " + " | ".join(results))
        return text("first task's answer")

    with served_in_thread(script) as model, fleet.worker(1, worker_id=WORKER):
        first = fleet.submit(spec(model, ws, ALLOW_ALL), "hello", task_id="t-first")
        first.result(timeout=TIMEOUT)
        conversation = first.status().conversation_id
        assert fleet.save_dir is not None
        saved = fleet.save_dir / conversation / f"{conversation}.db"
        assert saved.is_file(), sorted(p.name for p in fleet.save_dir.rglob("*"))
        assert not (fleet.save_dir / f"{conversation}.db").exists()
        target.append(saved)
        before = saved.read_bytes()
        result = fleet.submit(spec(model, ws, ALLOW_ALL), "pry", task_id="t-second")
        answer = result.result(timeout=TIMEOUT).text

    assert saved.read_bytes() == before
    second = fleet.status("t-second").conversation_id
    assert (fleet.save_dir / second / f"{second}.db").is_file()
    assert answer.count("permission denied") == 2, answer  # the read and the write
