"""Attacks on the fleet's promises without a harness: the grant binding, approvals racing
their answers and expiry, the budget under concurrency, a store that fails (the guard
and the approval handler deny), the audit chain of several tasks, ids and the spec."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
import unicodedata
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos", reason="the fleet extra (dbos) is not installed")

from fleet_support import open_approval

from antigravity_sdk import audit, policy
from antigravity_sdk.errors import ConfigurationError, PolicyError
from antigravity_sdk.fleet import AgentSpec
from antigravity_sdk.fleet._spec import with_approvals
from antigravity_sdk.fleet._store import Store
from antigravity_sdk.fleet._worker import (
    FleetGuard,
    Runtime,
    TableAudit,
    _approval_handler,
    call_key,
)
from antigravity_sdk.hooks import HookRunner
from antigravity_sdk.types import ToolCall

ASK = """
[[rule]]
name = "ask before writing"
tool = "write_to_file"
decision = "ask_user"

[[rule]]
tool = "*"
decision = "allow"
"""


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'fleet.sqlite'}")


def _key(args: dict[str, Any], name: str = "write_to_file") -> str:
    return call_key(ToolCall(name=name, args=args))[1]


def _open(store: Store, args: dict[str, Any], task: str = "t1", expires: float = 60.0) -> str:
    call = ToolCall(name="write_to_file", args=args)
    return open_approval(store, call, task=task, expires_in=expires)


# -- (1) a grant binds its exact call -----------------------------------------------------


def test_a_grant_binds_the_exact_arguments_at_every_depth() -> None:
    base = {"TargetFile": "/w/a", "Opts": {"x": 1, "y": [1, {"z": "q"}]}}
    # Key order, at any depth, is the same call.
    reordered = {"Opts": {"y": [1, {"z": "q"}], "x": 1}, "TargetFile": "/w/a"}
    assert _key(base) == _key(reordered)
    nfc = unicodedata.normalize("NFC", "/w/caf\u00e9")
    nfd = unicodedata.normalize("NFD", "/w/caf\u00e9")
    different = [
        {**base, "Opts": {"x": 1.0, "y": [1, {"z": "q"}]}},  # 1 vs 1.0
        {**base, "Opts": {"x": True, "y": [1, {"z": "q"}]}},  # 1 vs true
        {**base, "Opts": {"x": "1", "y": [1, {"z": "q"}]}},  # 1 vs "1"
        {**base, "Opts": {"x": 1, "y": [{"z": "q"}, 1]}},  # list order
        {**base, "Opts": {"x": 1, "y": [1, {"z": "q", "w": None}]}},  # a nested extra key
        {**base, "Extra": None},  # an extra key
        {"TargetFile": "/w/a"},  # a key fewer
        {**base, "TargetFile": nfc},
        {**base, "TargetFile": nfd},  # the same text, another unicode spelling
        {**base, "TargetFile": "/w/./a"},  # the same file, another spelling
    ]
    keys = {_key(base)} | {_key(args) for args in different}
    assert len(keys) == len(different) + 1  # every spelling is a call of its own
    assert _key(base) != _key(base, name="run_command")


def test_a_grant_is_never_used_by_another_call_task_or_a_later_call(store: Store) -> None:
    args = {"TargetFile": "/w/a", "CodeContent": "x"}
    granted = _open(store, args)
    assert store.answer(granted, approve=True, by="op") is not None
    assert _open(store, {**args, "Overwrite": True}) != granted  # an extra key
    assert _open(store, {**args, "CodeContent": "y"}) != granted
    assert _open(store, args, task="t2") != granted  # the same call in another task
    assert _open(store, args) == granted  # the same call of this task, not yet used
    assert store.consume(granted) is True
    assert store.consume(granted) is False  # used: never again
    again = _open(store, args)  # a turn run again finds no used grant
    assert again != granted and store.consume(again) is None


def test_an_expired_approval_can_be_neither_answered_nor_used(store: Store) -> None:
    args = {"TargetFile": "/w/a"}
    late = _open(store, args, expires=0.2)
    time.sleep(0.3)
    assert store.answer(late, approve=True, by="late") is None
    assert store.consume(late) is False
    # Approved in time but never consumed, then expired: a re-run turn does not pick it up.
    kept = _open(store, {"TargetFile": "/w/b"}, expires=0.3)
    assert store.answer(kept, approve=True, by="op") is not None
    time.sleep(0.4)
    assert _open(store, {"TargetFile": "/w/b"}) != kept


def test_approve_racing_consume_uses_a_grant_at_most_once(store: Store) -> None:
    """Answers and consumers race on many approvals near their expiry: a grant is used
    at most once, only when it was approved, and never after a denial or an expiry."""
    rounds = 40
    ids = [
        _open(store, {"TargetFile": f"/w/{i}"}, expires=0.15 + (i % 5) * 0.02)
        for i in range(rounds)
    ]
    consumed: dict[str, list[bool]] = {i: [] for i in ids}
    lock = threading.Lock()
    stop = time.monotonic() + 1.0

    def consumer() -> None:
        while time.monotonic() < stop:
            for approval in ids:
                settled = store.consume(approval)
                if settled is not None:
                    with lock:
                        consumed[approval].append(settled)

    def answerer(approve: bool) -> None:
        for n, approval in enumerate(ids):
            if n % 3 != 2:
                store.answer(approval, approve=approve, by="racer")

    threads = [threading.Thread(target=consumer) for _ in range(3)]
    threads += [threading.Thread(target=answerer, args=(flag,)) for flag in (True, False)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for approval in ids:
        found = store.approval(approval)
        assert found is not None
        assert consumed[approval].count(True) <= 1
        if True in consumed[approval]:
            assert found.status == "used" and found.answered_by == "racer"
        else:
            assert found.status in ("denied", "expired", "approved")


# -- (2) the budget and the switch ----------------------------------------------------------


def test_concurrent_calls_never_get_past_the_budget(store: Store) -> None:
    store.configure(max_tool_calls=25)
    guard = FleetGuard(store)
    allowed: list[bool] = []

    async def many() -> None:
        results = await asyncio.gather(
            *(guard.pre_tool_call(ToolCall(name="view_file", args={})) for _ in range(60))
        )
        allowed.extend(r.allow for r in results)

    threads = [threading.Thread(target=asyncio.run, args=(many(),)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(allowed) == 180 and allowed.count(True) == 25


class _Broken(Store):
    """A store whose every fleet statement fails, as a lost database would."""

    def charge_tool_call(self) -> Any:
        raise OSError("database is unreachable")

    def open_approval(self, **kwargs: Any) -> Any:
        raise OSError("database is unreachable")


def test_a_store_that_fails_denies_through_guard_and_approval(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = _Broken(f"sqlite:///{tmp_path / 'fleet.sqlite'}")
    runtime = Runtime(store=store, worker_id="w1", save_dir=None, concurrency=1, approval_timeout=5)
    policies = with_approvals(
        AgentSpec(policies=ASK).load_policies(None),
        lambda rule: _approval_handler(runtime, "t1", rule),
    )
    write = ToolCall(name="write_to_file", args={"TargetFile": "/w/a"})
    view = ToolCall(name="view_file", args={"AbsolutePath": "/w/a"})

    async def decide(hooks: list[Any], call: ToolCall) -> Any:
        return await HookRunner(hooks).dispatch("pre_tool_call", call)

    with caplog.at_level(logging.ERROR):
        guarded = asyncio.run(decide([FleetGuard(store), policy.enforce(policies)], view))
    assert not guarded.allow and "FleetGuard.pre_tool_call failed" in (guarded.message or "")
    assert "unreachable" in caplog.text
    # Past the guard (were it to let the call through), the approval cannot be opened.
    asked = asyncio.run(decide([policy.enforce(policies)], write))
    assert not asked.allow


def test_the_switch_denies_even_within_the_budget(store: Store) -> None:
    guard = FleetGuard(store)
    call = ToolCall(name="view_file", args={})
    assert asyncio.run(guard.pre_tool_call(call)).allow
    store.set_stopped(True)
    assert not asyncio.run(guard.pre_tool_call(call)).allow
    store.set_stopped(False)
    # The guard of a stopped turn keeps denying: its agent is replaced after the resume.
    assert not asyncio.run(guard.pre_tool_call(call)).allow


# -- (3) the audit table ------------------------------------------------------------------


def _chain(store: Store, task: str) -> TableAudit:
    log = TableAudit(store, task_id=task, worker="w1", spec=AgentSpec()).copy()
    log.open("policy")
    for n in range(3):
        log.write({"v": 2, "kind": "decision", "time": f"2026-01-01T00:00:0{n}Z", "tool": "x"})
    log.close()
    return log


def test_lines_of_two_tasks_cannot_be_spliced(store: Store, tmp_path: Path) -> None:
    _chain(store, "ta")
    _chain(store, "tb")
    a, b = list(store.audit(task_id="ta")), list(store.audit(task_id="tb"))
    out = tmp_path / "out.jsonl"

    def verify(lines: list[str]) -> bool:
        out.write_text("".join(line + "\n" for line in lines))
        return audit.verify(out).intact

    assert verify(a + b) and verify([x for pair in zip(a, b, strict=True) for x in pair])
    assert not verify([a[0], b[1], *a[2:]])  # a line of task b in task a's chain
    relabelled = b[1].replace('"task":"tb"', '"task":"ta"')
    assert not verify([*a, b[0], relabelled, *b[2:]])  # task b's line claimed for task a
    sid_b = json.loads(b[0])["sid"]
    moved = a[1].replace(json.loads(a[0])["sid"], sid_b)
    assert not verify([a[0], a[2], a[3], b[0], moved, *b[1:]])


def test_an_audit_line_the_table_refuses_is_logged_and_counted(
    store: Store, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(**kwargs: Any) -> None:
        raise OSError("disk I/O error")

    monkeypatch.setattr(store, "add_audit", refuse)
    log = TableAudit(store, task_id="t1", worker="w1", spec=AgentSpec())
    log.open("policy")
    with caplog.at_level(logging.ERROR, logger="antigravity_sdk.audit"):
        log.write({"v": 2, "kind": "decision", "tool": "x", "verdict": "allow"})
    assert log.write_errors == 1 and "disk I/O error" in caplog.text


# -- (4) the spec ---------------------------------------------------------------------------

RELATIVE_ROOT = (
    '[[rule]]\nworkspace_only = ["{root}"]\n\n[[rule]]\ntool = "*"\ndecision = "allow"\n'
)


@pytest.mark.parametrize("path", ["", "relative/policies.toml"])
def test_a_relative_root_without_an_absolute_policy_path_is_refused(path: str) -> None:
    """Otherwise `workspace_only = ["."]` would guard each worker's working directory (on
    a service started in `/`, the whole disk) under the same spec hash."""
    spec = AgentSpec(policies=RELATIVE_ROOT.format(root="."), policies_path=path)
    with pytest.raises(PolicyError, match="relative"):
        spec.load_policies(None)
    spec = AgentSpec(policies=RELATIVE_ROOT.format(root="src"), policies_path=path)
    with pytest.raises(PolicyError, match="relative"):
        spec.load_policies(None)


def test_roots_that_do_not_depend_on_the_workers_directory_still_load(tmp_path: Path) -> None:
    assert AgentSpec(policies=RELATIVE_ROOT.format(root=str(tmp_path))).load_policies(None)
    assert AgentSpec(policies=RELATIVE_ROOT.format(root="~/work")).load_policies(None)
    file = tmp_path / "p.toml"
    file.write_text(RELATIVE_ROOT.format(root="src"))
    assert AgentSpec.from_files(file).load_policies(None)  # relative to the file: fixed


# -- (5) ids --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "task_id",
    # ("." and ".." pass: an id never names a path; the saved conversation is a uuid5.)
    ["../escape", "a/b", "x' OR '1'='1", "t\x00", "caf\u00e9", " t", "t" * 101, ""],
)
def test_task_ids_that_could_escape_are_refused(tmp_path: Path, task_id: str) -> None:
    from antigravity_sdk.fleet import Fleet

    with Fleet(f"sqlite:///{tmp_path / 'f.sqlite'}") as fleet:
        if task_id:
            with pytest.raises(ConfigurationError):
                fleet.submit(AgentSpec(), "p", task_id=task_id)
        for conversation in ("../../etc/passwd", "a/b", "x\x00"):
            with pytest.raises(ConfigurationError):
                fleet.submit(AgentSpec(), "p", task_id="ok", conversation_id=conversation)
        with pytest.raises(ConfigurationError):
            fleet.worker(1, worker_id="../w")
        assert fleet.tasks() == []


# -- (6) answers the fleet did not sign (issue 26, finding 1) -------------------------------


def _forge(store: Store, approval: str, **values: Any) -> None:
    """What a process that reached the database does: write the answer itself, with SQL."""
    import sqlalchemy as sa

    sets = ", ".join(f"{column} = :{column}" for column in values)
    with store.engine.begin() as conn:
        conn.execute(
            sa.text(f"UPDATE antigravity_approvals SET {sets} WHERE id = :id"),
            {**values, "id": approval},
        )


def _ask(store: Store, call: ToolCall, approval_timeout: float = 5) -> Any:
    """The policy engine deciding `call` under an ask_user rule, with the fleet's handler."""
    runtime = Runtime(
        store=store, worker_id="w1", save_dir=None, concurrency=1, approval_timeout=approval_timeout
    )
    policies = with_approvals(
        AgentSpec(policies=ASK).load_policies(None),
        lambda rule: _approval_handler(runtime, "t1", rule),
    )
    return asyncio.run(HookRunner([policy.enforce(policies)]).dispatch("pre_tool_call", call))


def test_an_approval_written_with_sql_is_no_answer(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """The attack of the issue: `UPDATE antigravity_approvals SET status='approved',
    answered_by='alice'`. The held call is denied, saying why, and the row says forged."""
    call = ToolCall(name="write_to_file", args={"TargetFile": "/w/deploy"})
    approval = _open(store, call.args)

    def forge_soon() -> None:
        time.sleep(0.3)
        _forge(store, approval, status="approved", answered_by="alice")

    threading.Thread(target=forge_soon).start()
    with caplog.at_level(logging.WARNING, logger="antigravity_sdk.fleet"):
        decided = _ask(store, call)
    assert not decided.allow
    assert "not signed by the fleet's key" in (decided.message or ""), decided.message
    assert "not signed by the fleet's key" in caplog.text and approval in caplog.text
    found = store.approval(approval)
    assert found is not None and found.status == "forged"
    # The same call asked again waits for a new, real answer: the forged row is spent.
    assert _open(store, call.args) != approval


@pytest.mark.parametrize(
    "tamper",
    [
        "no mac",
        "mac of another approval",
        "answered_by changed",
        "verdict flipped",
        "another fleet's secret",
        "grant used, then reset",
    ],
)
def test_a_signed_answer_counts_only_as_signed(store: Store, tamper: str) -> None:
    import sqlalchemy as sa

    from antigravity_sdk.fleet._store import APPROVALS, UnsignedAnswerError

    def row(approval: str) -> Any:
        with store.engine.connect() as conn:
            return conn.execute(sa.select(APPROVALS).where(APPROVALS.c.id == approval)).one()

    target = _open(store, {"TargetFile": "/w/a"})
    if tamper == "no mac":
        store.answer(target, approve=True, by="op")
        _forge(store, target, mac=None)
    elif tamper == "mac of another approval":  # a real grant's signature, copied over
        other = _open(store, {"TargetFile": "/w/b"})
        store.answer(other, approve=True, by="op")
        granted = row(other)
        _forge(
            store,
            target,
            status="approved",
            answered_by=granted.answered_by,
            answered_at=granted.answered_at,
            mac=granted.mac,
        )
    elif tamper == "answered_by changed":
        store.answer(target, approve=True, by="mallory")
        _forge(store, target, answered_by="alice")
    elif tamper == "verdict flipped":
        store.answer(target, approve=False, by="op")
        _forge(store, target, status="approved")
    elif tamper == "another fleet's secret":
        other = Store(store.db_url, key=b"o" * 32)
        assert other.key_mismatch  # told so at once
        other.answer(target, approve=True, by="op")
    else:
        store.answer(target, approve=True, by="op")
        assert store.consume(target) is True
        _forge(store, target, status="approved", used_at=None)
    with pytest.raises(UnsignedAnswerError, match=target):
        store.consume(target)
    assert row(target).status == "forged"


def test_a_signed_answer_from_another_process_counts(store: Store, tmp_path: Path) -> None:
    """The fleet's answer, from a process of its own (the same state directory, so the
    same key), is honoured: granted once, then used."""
    import subprocess
    import sys

    from cli_support import cli_env

    call = ToolCall(name="write_to_file", args={"TargetFile": "/w/a"})
    approval = _open(store, call.args)
    code = (
        "import sys; from antigravity_sdk.fleet import Fleet\n"
        "with Fleet(sys.argv[1]) as f: print(f.approve(sys.argv[2], by='alice').status)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, store.db_url, approval],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == "approved", done.stderr
    assert _ask(store, call).allow
    found = store.approval(approval)
    assert found is not None and (found.status, found.answered_by) == ("used", "alice")


def test_a_process_with_another_secret_may_not_answer_or_serve(tmp_path: Path) -> None:
    from antigravity_sdk.fleet import Fleet

    url = f"sqlite:///{tmp_path / 'f.sqlite'}"
    with Fleet(url) as first:
        approval = _open(first.store, {"TargetFile": "/w/a"})
    with Fleet(url, secret=os.urandom(32).hex()) as other:
        assert "ANTIGRAVITY_FLEET_SECRET" in other.store.key_mismatch
        with pytest.raises(ConfigurationError, match="signed with another secret"):
            other.approve(approval)
        with pytest.raises(ConfigurationError, match="signed with another secret"):
            other.worker(1)
        assert other.approvals()[0].id == approval  # reading still works
    with pytest.raises(ConfigurationError, match="at least 32"):
        Fleet(url, secret=b"short")


def test_a_fleet_inside_a_tasks_workspace_is_refused(tmp_path: Path) -> None:
    """docs/fleet.md's old example, and `tasks.jsonl` with `"workspace": "."` in the
    project holding the fleet: the agent could write the database that governs it."""
    from antigravity_sdk.fleet import Fleet

    project = (tmp_path / "project").resolve()
    (project / "src").mkdir(parents=True)
    inside = Fleet(f"sqlite:///{project / 'fleet.sqlite'}", save_dir=tmp_path / "save")
    with inside, pytest.raises(ConfigurationError, match="the fleet database") as raised:
        inside.submit(AgentSpec(workspace=str(project)), "p")
    assert str(project / "fleet.sqlite") in str(raised.value)
    assert inside.tasks() == []
    saves = Fleet(f"sqlite:///{tmp_path / 'f.sqlite'}", save_dir=project / "src" / "save")
    with saves:
        with pytest.raises(ConfigurationError, match="the fleet's conversations"):
            saves.submit(AgentSpec(workspace=str(project)), "p")
        with pytest.raises(ConfigurationError, match="the fleet's conversations"):
            saves.submit(AgentSpec(workspace=str(tmp_path / "x"), allow_write=(str(project),)), "p")
        (tmp_path / "elsewhere").mkdir()
        saves.submit(AgentSpec(workspace=str(tmp_path / "elsewhere")), "p")  # outside: fine
