"""The fleet embedded (SQLite, a worker in this process) on the REAL harness, offline.

Each test gets its own fleet database and conversation directory under `tmp_path`, a
ScriptedModel served from a thread (the harness calls it over HTTP), and a worker on a
thread of this process (`with fleet.worker(...)`). The harness's state lives under
`tmp_path` too (`fleet_support.harness_env`). After each test, no harness this process
started may still run.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cli_support import served_in_thread
from fleet_support import (
    BROKEN_HOOK_ENV,
    NO_WRITES,
    HarnessWatch,
    Requests,
    assistant_texts,
    check_stopped,
    harness_env,
    prompts_in,
    tool_results,
    wait_until,
)

pytest.importorskip("dbos", reason="the fleet tests need the fleet extra")

from antigravity_sdk.errors import ConfigurationError
from antigravity_sdk.fleet import AgentSpec, Fleet, FleetTaskError
from antigravity_sdk.testing import Reply, http_error, text, tool_call

RESULT_TIMEOUT = 90.0  # generous: a turn takes well under a second here
WORKER = "embedded-1"

ASK_BEFORE_WRITING = """
[[rule]]
name = "ask before writing"
tool = "write_to_file"
decision = "ask_user"
{timeout}

[[rule]]
name = "everything else"
tool = "*"
decision = "allow"
"""


@dataclass
class Setup:
    fleet: Fleet
    ws: Path
    root: Path
    watch: HarnessWatch

    def spec(self, model: Any, policies: str = "", **fields: Any) -> AgentSpec:
        return AgentSpec(
            model=model.model_name,
            base_url=model.base_url,
            workspace=str(self.ws),
            policies=policies,
            **fields,
        )


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Setup]:
    for key, value in harness_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv(BROKEN_HOOK_ENV, raising=False)
    ws = tmp_path / "ws"
    ws.mkdir()
    watch = HarnessWatch({os.getpid()}).start()
    fleet = Fleet(f"sqlite:///{tmp_path / 'fleet' / 'fleet.sqlite'}", save_dir=tmp_path / "save")
    try:
        yield Setup(fleet, ws.resolve(), tmp_path, watch)
    finally:
        fleet.close()
        watch.stop()
    watch.assert_none_left()


def writer(ws: Path, requests: Requests) -> Any:
    """A script: the prompt `write NAME CONTENT` writes CONTENT to NAME in `ws`, then
    answers with the tool's result; any other prompt is answered at once."""

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        request = requests.record(messages)
        words = request.prompt.split()
        results = tool_results(messages)
        if words[:1] == ["write"] and not results:
            return tool_call(
                "write_to_file",
                TargetFile=str(ws / words[1]),
                CodeContent=words[2],
                Overwrite=True,
            )
        if results:
            return text(f"tool said: {results[-1]}")
        return text(f"answer to {request.prompt}")

    return script


def decisions(fleet: Fleet, **filters: str) -> list[dict[str, Any]]:
    return [e for e in fleet.audit(**filters) if e["kind"] == "decision"]


# -- submitting and results ----------------------------------------------------------------


def test_submit_result_status_and_map(setup: Setup) -> None:
    requests = Requests()
    fleet = setup.fleet
    with served_in_thread(writer(setup.ws, requests)) as model, fleet.worker(2, worker_id=WORKER):
        spec = setup.spec(model)
        handle = fleet.submit(spec, "hello there", task_id="t-hello")
        result = handle.result(timeout=RESULT_TIMEOUT)
        mapped = fleet.map(spec, ["alpha", "beta", "gamma"])
        answers = [h.result(timeout=RESULT_TIMEOUT).text for h in mapped]

    assert handle.task_id == "t-hello"
    assert (result.ended, result.text) == ("done", "answer to hello there")
    assert len(result.responses) == 1
    status = handle.status()
    assert (status.status, status.worker, status.turns_done, status.turns_total) == (
        "done",
        WORKER,
        1,
        1,
    )
    assert status.finished and status.error is None and status.workspace == str(setup.ws)
    assert answers == ["answer to alpha", "answer to beta", "answer to gamma"]
    tasks = {t.task_id: t for t in fleet.tasks()}
    assert set(tasks) == {"t-hello", *(h.task_id for h in mapped)}
    assert all(t.status == "done" for t in tasks.values())
    # Each task its own conversation.
    assert len({t.conversation_id for t in tasks.values()}) == 4
    assert fleet.task("t-hello").task_id == "t-hello"
    assert setup.watch.harnesses_seen() >= 1  # (the check that none is left is not idle)
    with pytest.raises(KeyError):
        fleet.task("no-such-task")


def test_the_turns_of_a_task_continue_one_conversation(setup: Setup) -> None:
    requests = Requests()
    fleet = setup.fleet
    turns = ["remember the word kiwi", "which word was it?", "and now?"]
    with served_in_thread(writer(setup.ws, requests)) as model, fleet.worker(2, worker_id=WORKER):
        result = fleet.submit(setup.spec(model), turns).result(timeout=RESULT_TIMEOUT)

    assert [r.text for r in result.responses] == [f"answer to {t}" for t in turns]
    assert requests.prompts() == turns  # each turn asked the model once, in order
    second = requests.for_prompt(turns[1])[0].messages
    assert prompts_in(second) == turns[:2]
    assert "answer to remember the word kiwi" in assistant_texts(second)
    third = requests.for_prompt(turns[2])[0].messages
    assert prompts_in(third) == turns
    assert fleet.status(result.task_id).turns_done == 3


def test_submit_is_idempotent_by_task_id(setup: Setup) -> None:
    requests = Requests()
    fleet = setup.fleet
    with served_in_thread(writer(setup.ws, requests)) as model:
        spec = setup.spec(model)
        first = fleet.submit(spec, "the first prompt", task_id="same-id")
        again = fleet.submit(spec, "another prompt", task_id="same-id")
        assert again.task_id == first.task_id == "same-id"
        assert [t.task_id for t in fleet.tasks()] == ["same-id"]
        with fleet.worker(2, worker_id=WORKER):
            result = again.result(timeout=RESULT_TIMEOUT)
            third = fleet.submit(spec, "a third prompt", task_id="same-id")
            assert third.result(timeout=RESULT_TIMEOUT).text == "answer to the first prompt"

    assert result.text == "answer to the first prompt"
    assert requests.prompts() == ["the first prompt"]
    assert len(fleet.tasks()) == 1


def test_tasks_of_one_conversation_never_run_at_once(setup: Setup) -> None:
    """Two slow tasks on one conversation id, two slots: one starts after the other has
    ended, and continues its conversation. (Which runs first is not asserted: on SQLite,
    DBOS orders a partition by a creation time in whole seconds, then by task id.)"""
    requests = Requests()
    fleet = setup.fleet
    replied: dict[str, float] = {}

    async def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        request = requests.record(messages)
        if request.prompt.startswith("slow"):
            await asyncio.sleep(1.5)  # room for the other task to start, were it allowed
        replied[request.prompt] = time.time()
        return text(f"answer to {request.prompt}")

    conversation = "b0a7c1e2-0000-4000-8000-00000000c0de"
    with served_in_thread(script) as model, fleet.worker(2, worker_id=WORKER):
        spec = setup.spec(model)
        one = fleet.submit(spec, "slow one", conversation_id=conversation)
        two = fleet.submit(spec, "slow two", conversation_id=conversation)
        other = fleet.submit(spec, "another conversation")
        for handle in (one, two, other):
            handle.result(timeout=RESULT_TIMEOUT)

    [earlier, later] = sorted(
        (r for r in requests.all() if r.prompt.startswith("slow")), key=lambda r: r.at
    )
    assert later.at > replied[earlier.prompt]
    assert prompts_in(later.messages) == [earlier.prompt, later.prompt]
    assert f"answer to {earlier.prompt}" in assistant_texts(later.messages)
    assert prompts_in(requests.for_prompt("another conversation")[0].messages) == [
        "another conversation"
    ]
    assert one.status().conversation_id == two.status().conversation_id == conversation


def test_priority_orders_the_queue(setup: Setup) -> None:
    """Concurrency 1: tasks queued before the worker starts run by priority, lowest
    first, tasks without one before any with one (whatever the submission order)."""
    requests = Requests()
    fleet = setup.fleet
    priorities = [5, 3, 0, 1, 4, 0, 2]
    with served_in_thread(writer(setup.ws, requests)) as model:
        spec = setup.spec(model)
        handles = [
            fleet.submit(spec, f"task {i} priority {p}", priority=p)
            for i, p in enumerate(priorities)
        ]
        with fleet.worker(1, worker_id=WORKER):
            for handle in handles:
                handle.result(timeout=RESULT_TIMEOUT)

    ran = [int(prompt.split()[-1]) for prompt in requests.prompts()]
    assert ran == sorted(priorities), requests.prompts()
    # Equal priorities keep their submission order.
    unprioritised = [p for p in requests.prompts() if p.endswith("priority 0")]
    assert unprioritised == ["task 2 priority 0", "task 5 priority 0"]


# -- approvals -----------------------------------------------------------------------------


def test_an_ask_user_rule_waits_for_an_approval(setup: Setup) -> None:
    requests = Requests()
    fleet = setup.fleet
    with served_in_thread(writer(setup.ws, requests)) as model, fleet.worker(2, worker_id=WORKER):
        spec = setup.spec(model, ASK_BEFORE_WRITING.format(timeout=""))
        granted = fleet.submit(spec, "write granted.txt yes", task_id="t-granted")
        refused = fleet.submit(spec, "write refused.txt no", task_id="t-refused")
        pending = wait_until(
            lambda: len(fleet.approvals()) == 2 and fleet.approvals(),
            timeout=RESULT_TIMEOUT,
            what="two approvals",
        )
        by_task = {a.task_id: a for a in pending}
        for handle in (granted, refused):
            status = handle.status()
            assert status.status == "waiting"
            assert status.approvals == [by_task[handle.task_id].id]
        approval = by_task["t-granted"]
        assert (approval.tool, approval.rule, approval.status) == (
            "write_to_file",
            "ask before writing",
            "pending",
        )
        assert approval.worker == WORKER
        assert approval.args["TargetFile"] == str(setup.ws / "granted.txt")
        assert approval.args["CodeContent"] == "yes"
        # Nothing is written while the approval waits.
        time.sleep(1.0)
        assert not (setup.ws / "granted.txt").exists()

        answered = fleet.approve(approval.id, by="tester")
        # (read back after the answer: the worker may have used it already)
        assert answered.status in ("approved", "used") and answered.answered_by == "tester"
        fleet.deny(by_task["t-refused"].id)
        granted_result = granted.result(timeout=RESULT_TIMEOUT)
        refused_result = refused.result(timeout=RESULT_TIMEOUT)
        # An answered approval cannot be answered again.
        with pytest.raises(ConfigurationError):
            fleet.deny(approval.id)

    assert (setup.ws / "granted.txt").read_text().strip() == "yes"
    assert not (setup.ws / "refused.txt").exists()
    assert refused_result.ended == "done" and "refused" in refused_result.text
    assert "denied" in refused_result.text
    assert granted_result.ended == "done"
    assert fleet.approvals() == []
    [allowed] = decisions(fleet, task_id="t-granted", tool="write_to_file")
    assert (allowed["verdict"], allowed["rule"]) == ("allow", "ask before writing")
    [denied] = decisions(fleet, task_id="t-refused", tool="write_to_file")
    assert (denied["verdict"], denied["rule"]) == ("deny", "ask before writing")


def test_a_grant_is_bound_to_its_call_and_used_once(setup: Setup) -> None:
    requests = Requests()
    fleet = setup.fleet
    target = setup.ws / "twice.txt"
    with served_in_thread(writer(setup.ws, requests)) as model, fleet.worker(2, worker_id=WORKER):
        spec = setup.spec(model, ASK_BEFORE_WRITING.format(timeout=""))
        handle = fleet.submit(spec, ["write twice.txt same", "write twice.txt same"])
        first = wait_until(fleet.approvals, timeout=RESULT_TIMEOUT, what="the first approval")[0]
        fleet.approve(first.id)
        wait_until(target.exists, timeout=RESULT_TIMEOUT, what="the first write")
        target.unlink()
        # The same call in the next turn: the grant was used, a new approval is needed.
        second = wait_until(
            lambda: [a for a in fleet.approvals() if a.id != first.id],
            timeout=RESULT_TIMEOUT,
            what="a second approval",
        )[0]
        assert (second.tool, second.args) == (first.tool, first.args)
        assert handle.status().status == "waiting"
        assert fleet.store.approval(first.id).status == "used"
        time.sleep(1.0)
        assert not target.exists()  # the first grant does not cover it
        fleet.approve(second.id)
        result = handle.result(timeout=RESULT_TIMEOUT)

    assert target.read_text().strip() == "same"
    assert result.ended == "done" and len(result.responses) == 2
    assert fleet.store.approval(second.id).status == "used"
    allowed = decisions(fleet, task_id=handle.task_id, tool="write_to_file")
    assert [(d["verdict"], d["turn"]) for d in allowed] == [("allow", 1), ("allow", 2)]


def test_an_unanswered_approval_expires_to_deny(setup: Setup) -> None:
    requests = Requests()
    fleet = setup.fleet
    with served_in_thread(writer(setup.ws, requests)) as model, fleet.worker(2, worker_id=WORKER):
        spec = setup.spec(model, ASK_BEFORE_WRITING.format(timeout="timeout = 2"))
        handle = fleet.submit(spec, "write late.txt never")
        approval = wait_until(fleet.approvals, timeout=RESULT_TIMEOUT, what="the approval")[0]
        assert approval.expires_at - approval.created_at == pytest.approx(2.0, abs=0.01)
        result = handle.result(timeout=RESULT_TIMEOUT)
        # Expired: it can no longer be answered.
        with pytest.raises(ConfigurationError, match="expired"):
            fleet.approve(approval.id)

    assert not (setup.ws / "late.txt").exists()
    assert result.ended == "done" and "denied" in result.text
    assert fleet.store.approval(approval.id).status == "expired"
    assert fleet.approvals() == []
    [denied] = decisions(fleet, task_id=handle.task_id, tool="write_to_file")
    assert (denied["verdict"], denied["rule"]) == ("deny", "ask before writing")


# -- the fleet's switch and budget ---------------------------------------------------------


def looping(ws: Path, requests: Requests, calls: int) -> Any:
    """A script: the prompt `loop` views a file `calls` times in its turn (whatever the
    answers), then answers; any other prompt is answered at once."""
    (ws / "a.txt").write_text("A")

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        request = requests.record(messages)
        results = tool_results(messages)
        if request.prompt.startswith("loop") and len(results) < calls:
            return tool_call("view_file", AbsolutePath=str(ws / "a.txt"))
        return text(f"{request.prompt}: {len(results)} calls")

    return script


def test_stop_ends_running_turns_and_holds_the_queue(setup: Setup) -> None:
    requests = Requests()
    fleet = setup.fleet
    with (
        served_in_thread(looping(setup.ws, requests, calls=60)) as model,
        fleet.worker(2, worker_id=WORKER),
    ):
        spec = setup.spec(model)
        running = fleet.submit(spec, "loop", task_id="t-loop")
        # The turn is cut at a random point of the switch's poll, and a call may or may
        # not fall between the stop and the cut: stop again (bounded) until one has, and
        # at least twice (a turn stopped twice is not a turn cut off by crashes).
        denied_after_stop: list[dict[str, Any]] = []
        for attempt in range(6):
            if attempt:
                fleet.resume()
            seen = len(requests.for_prompt("loop"))
            wait_until(
                lambda seen=seen: len(requests.for_prompt("loop")) >= seen + 3,
                timeout=RESULT_TIMEOUT,
                what="the looping turn's calls",
            )
            before = len(decisions(fleet, task_id="t-loop"))
            stopped_at = time.time()
            fleet.stop()
            began = time.monotonic()
            wait_until(
                lambda: running.status().status == "stopped",
                timeout=30,
                what="the running task to stop",
            )
            assert time.monotonic() - began < 10, "the turn did not end within a few seconds"
            since = decisions(fleet, task_id="t-loop")[before:]
            denied_after_stop += check_stopped(since, stopped_at)
            if denied_after_stop and attempt >= 1:
                break
        assert denied_after_stop, "no call fell between a stop and the end of the turn"

        # Stopped: a queued task does not start.
        queued = fleet.submit(spec, "later", task_id="t-later")
        time.sleep(2.0)
        assert queued.status().status in ("queued", "stopped")
        assert running.status().status == "stopped"
        assert requests.for_prompt("later") == []
        calls = len(requests.for_prompt("loop"))
        time.sleep(0.5)
        assert len(requests.for_prompt("loop")) == calls  # and the stopped one waits

        fleet.resume()
        assert queued.result(timeout=RESULT_TIMEOUT).text == "later: 0 calls"
        result = running.result(timeout=RESULT_TIMEOUT)

    # The cut turn ran again after the resume, to its end.
    assert result.ended == "done" and result.text == "loop: 60 calls"
    assert len(result.responses) == 1
    assert not fleet.state().stopped


def test_the_fleet_budget_holds_across_tasks(setup: Setup) -> None:
    """Two tasks of three calls each, at once, against a fleet budget of four calls:
    four are allowed, the rest denied by the fleet's guard; a task submitted after that
    ends at once with `budget`."""
    requests = Requests()
    fleet = setup.fleet
    fleet.configure(max_tool_calls=4)
    with (
        served_in_thread(looping(setup.ws, requests, calls=3)) as model,
        fleet.worker(2, worker_id=WORKER),
    ):
        spec = setup.spec(model)
        handles = [fleet.submit(spec, f"loop {i}", task_id=f"t-{i}") for i in range(2)]
        results = [h.result(timeout=RESULT_TIMEOUT) for h in handles]
        late = fleet.submit(spec, "loop late")
        late_result = late.result(timeout=RESULT_TIMEOUT)

    views = decisions(fleet, tool="view_file")
    allowed = [d for d in views if d["verdict"] == "allow"]
    denied = [d for d in views if d["verdict"] == "deny"]
    assert (len(allowed), len(denied)) == (4, 2)
    assert {d["task"] for d in allowed} == {"t-0", "t-1"}  # one budget across the tasks
    for line in denied:
        assert (line["by"], line["hook"]) == ("hook", "FleetGuard")
        assert "tool-call budget (4) is spent" in line["message"]
    assert denied == decisions(fleet, verdict="deny")
    assert all(r.ended == "done" for r in results)
    assert fleet.state().tool_calls == 6
    assert (late_result.ended, late_result.responses) == ("budget", [])
    assert "tool-call budget (4)" in late_result.detail
    assert late.status().status == "budget"
    assert requests.for_prompt("loop late") == []


# -- the audit table -----------------------------------------------------------------------


def test_the_audit_table_filters_and_names_task_worker_and_spec(setup: Setup) -> None:
    requests = Requests()
    fleet = setup.fleet
    (setup.ws / "seen.txt").write_text("seen")

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        request = requests.record(messages)
        done = len(tool_results(messages))
        if request.prompt == "view and write" and done == 0:
            return tool_call("view_file", AbsolutePath=str(setup.ws / "seen.txt"))
        if request.prompt == "view and write" and done == 1:
            return tool_call(
                "write_to_file",
                TargetFile=str(setup.ws / "x.txt"),
                CodeContent="x",
                Overwrite=True,
            )
        if request.prompt == "view only" and done == 0:
            return tool_call("view_file", AbsolutePath=str(setup.ws / "seen.txt"))
        return text("ok")

    with served_in_thread(script) as model, fleet.worker(2, worker_id=WORKER):
        spec = setup.spec(model, NO_WRITES)
        a = fleet.submit(spec, "view and write", task_id="t-a")
        b = fleet.submit(spec, "view only", task_id="t-b")
        a.result(timeout=RESULT_TIMEOUT)
        b.result(timeout=RESULT_TIMEOUT)

    lines = list(fleet.audit())
    assert {line["task"] for line in lines} == {"t-a", "t-b"}
    for line in lines:
        assert line["worker"] == WORKER
        assert line["spec_hash"] == spec.spec_hash
    policies = {line["policy"] for line in lines if line["kind"] in ("session", "decision")}
    assert len(policies) == 1 and policies != {""}
    assert {line["kind"] for line in lines} >= {"session", "decision", "turn", "end"}
    only_a = list(fleet.audit(task_id="t-a"))
    assert only_a and all(line["task"] == "t-a" for line in only_a)
    views = list(fleet.audit(tool="view_file"))
    assert sorted(line["task"] for line in views) == ["t-a", "t-b"]
    assert all(line["verdict"] == "allow" for line in views)
    [denied] = list(fleet.audit(verdict="deny"))
    assert (denied["task"], denied["tool"], denied["rule"]) == ("t-a", "write_to_file", "no writes")
    assert list(fleet.audit(task_id="t-b", verdict="deny")) == []
    assert [line["task"] for line in fleet.audit(rule="no writes")] == ["t-a"]
    assert not (setup.ws / "x.txt").exists()
    # The stored lines are the JSONL an audit file holds.
    stored = list(fleet.audit_lines(task_id="t-b"))
    assert [json.loads(line) for line in stored] == list(fleet.audit(task_id="t-b"))


# -- refusals and failures -----------------------------------------------------------------


def test_a_hook_that_does_not_import_is_refused_at_submit(setup: Setup) -> None:
    spec = AgentSpec(workspace=str(setup.ws), hooks=("no_such_module_for_fleet_tests:Hook",))
    with pytest.raises(ConfigurationError, match="no_such_module_for_fleet_tests"):
        setup.fleet.submit(spec, "never runs", task_id="t-bad-hook")
    not_a_hook = AgentSpec(workspace=str(setup.ws), hooks=("os:getcwd",))
    with pytest.raises(ConfigurationError, match="expected a Hook"):
        setup.fleet.submit(not_a_hook, "never runs")
    assert setup.fleet.tasks() == []
    with pytest.raises(KeyError):
        setup.fleet.task("t-bad-hook")


def test_a_turn_that_fails_fails_the_task(setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    requests = Requests()
    fleet = setup.fleet

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        request = requests.record(messages)
        if request.prompt == "the model fails":
            return http_error(500, "the model server broke")
        return text(f"answer to {request.prompt}")

    with served_in_thread(script) as model:
        spec = setup.spec(model)
        model_fails = fleet.submit(spec, ["the model fails", "never sent"])
        # Submitted where the hook imports; the worker's environment lacks it.
        broken = setup.spec(model, hooks=("fleet_support:hook_missing_on_worker",))
        cannot_build = fleet.submit(broken, "never sent either")
        no_workspace = fleet.submit(spec, "nor this", workspace=setup.root / "missing")
        monkeypatch.setenv(BROKEN_HOOK_ENV, "1")
        fine = fleet.submit(spec, "this one is fine")
        with fleet.worker(2, worker_id=WORKER):
            with pytest.raises(FleetTaskError, match="500") as failed:
                model_fails.result(timeout=RESULT_TIMEOUT)
            assert "the model server broke" in str(failed.value)
            with pytest.raises(FleetTaskError, match="only_on_the_submitter"):
                cannot_build.result(timeout=RESULT_TIMEOUT)
            with pytest.raises(FleetTaskError, match="missing"):
                no_workspace.result(timeout=RESULT_TIMEOUT)
            assert fine.result(timeout=RESULT_TIMEOUT).text == "answer to this one is fine"

    status = model_fails.status()
    assert status.status == "failed" and "500" in (status.error or "")
    assert status.turns_done == 0
    assert "does not build" in (cannot_build.status().error or "")
    assert no_workspace.status().status == "failed"
    assert requests.prompts().count("the model fails") >= 1
    assert "never sent" not in requests.prompts()
    assert "never sent either" not in requests.prompts()
    assert "nor this" not in requests.prompts()


def test_a_recovered_task_never_starts_its_conversation_over(setup: Setup) -> None:
    """A worker stops mid-task (turn 2 of 2 running); the same worker id comes back with
    another save dir, as a worker on another machine would without a shared one. The
    recovered turn 2 must not resume an empty conversation: the task fails, saying why."""
    requests = Requests()

    async def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        request = requests.record(messages)
        if request.prompt == "second" and len(requests.for_prompt("second")) == 1:
            await asyncio.sleep(30)  # cut off by the worker's stop below
        return text(f"answer to {request.prompt}")

    db = setup.fleet.db_url
    with served_in_thread(script) as model:
        spec = setup.spec(model)
        handle = setup.fleet.submit(spec, ["first", "second"], task_id="moved")
        with setup.fleet.worker(1, worker_id=WORKER):
            wait_until(
                lambda: len(requests.for_prompt("second")) == 1,
                timeout=RESULT_TIMEOUT,
                what="turn 2 to reach the model",
            )
        assert handle.status().status == "queued"  # pending, for its worker to recover
        elsewhere = Fleet(db, save_dir=setup.root / "another-machine")
        try:
            with (
                elsewhere.worker(1, worker_id=WORKER),
                pytest.raises(FleetTaskError, match="is not in this worker's save dir"),
            ):
                elsewhere.task("moved").result(timeout=RESULT_TIMEOUT)
        finally:
            elsewhere.close()
    assert len(requests.for_prompt("second")) == 1  # never sent again on an empty history
    assert handle.status().turns_done == 1
