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
