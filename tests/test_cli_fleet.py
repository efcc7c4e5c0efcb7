"""`antigravity fleet ...`: the real command, in a subprocess, on the real harness offline.

The model is a `ScriptedModel` served by this process in a thread of its own; each test
works in its own `tmp_path` and state directory (`XDG_STATE_HOME`, the `state_home`
fixture), so the fleet's default database (`fleet/fleet.sqlite` in the SDK's state
directory) is private to it. Waits are bounded by `BOUND`, generous for a
loaded machine: nothing here depends on how fast the machine is.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from cli_support import ROOT, cli_env, served_in_thread

from antigravity_sdk.errors import ConfigurationError, HarnessNotFoundError
from antigravity_sdk.harness.install import find_harness
from antigravity_sdk.testing import ScriptedModel, text, tool_call

pytest.importorskip("dbos", reason="the fleet extra is not installed")

from antigravity_sdk.cli.fleet import read_tasks
from antigravity_sdk.fleet import AgentSpec, Fleet, default_db_url

BOUND = 90  # seconds: generous, for a loaded machine; the waits under test are a few
ALLOW_ALL = '[[rule]]\ntool = "*"\ndecision = "allow"\n'
ASK_BEFORE_WRITING = (
    '[[rule]]\nname = "ask before writing"\ntool = "write_to_file"\ndecision = "ask_user"\n\n'
    + ALLOW_ALL
)
INSTALL = "pip install 'antigravity-sdk[fleet]'"


def _require_harness() -> None:
    try:
        find_harness()
    except HarnessNotFoundError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the harness tests: {exc}")
        pytest.skip(f"no localharness: {exc}")


def _env(**extra: str | None) -> dict[str, str]:
    return cli_env(**{"ANTIGRAVITY_FLEET_DB": None, "CI": "1", **extra})


def fleet(cwd: Path, *args: str, **env: str | None) -> subprocess.CompletedProcess[str]:
    """`antigravity fleet ARGS` in `cwd`, to its end (bounded)."""
    return subprocess.run(
        [sys.executable, "-m", "antigravity_sdk", "fleet", *args],
        cwd=cwd,
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=BOUND,
    )


class Lines:
    """The lines a process writes to `stream`, read by a thread, waited for with a bound."""

    def __init__(self, stream: IO[str]) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)  # the end

    def wait_for(self, pattern: str) -> re.Match[str]:
        deadline = time.monotonic() + BOUND
        while True:
            for line in self.seen:
                if found := re.search(pattern, line):
                    return found
            try:
                got = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"no line matching {pattern!r} within {BOUND} s: {self.seen}")
            if got is None:
                pytest.fail(f"no line matching {pattern!r} before the end: {self.seen}")
            self.seen.append(got)

    def text(self) -> str:
        while not self._queue.empty():
            line = self._queue.get()
            self.seen += [line] if line is not None else []
        return "".join(self.seen)


def started(
    procs: list[subprocess.Popen[str]], cwd: Path, *args: str
) -> tuple[subprocess.Popen[str], Lines, Lines]:
    """`antigravity fleet ARGS` started in `cwd` (killed at the test's end if still
    running), and its stdout and stderr lines."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "antigravity_sdk", "fleet", *args],
        cwd=cwd,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    procs.append(proc)
    assert proc.stdout is not None and proc.stderr is not None
    return proc, Lines(proc.stdout), Lines(proc.stderr)


def eventually(check: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.1)
    pytest.fail(f"{what}: not within {BOUND} s")


def finish(proc: subprocess.Popen[str], sig: int) -> int:
    proc.send_signal(sig)
    try:
        return proc.wait(BOUND)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"still running {BOUND} s after signal {sig}")


@pytest.fixture
def stopped_at_end() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _user_prompt(messages: list[dict[str, Any]]) -> str:
    """The prompt of the turn: the last user message (the harness wraps it in context)."""
    content = [m for m in messages if m.get("role") == "user"][-1].get("content")
    return json.dumps(content)


def answering(ws: Path) -> Callable[[list[dict[str, Any]], Any], Any]:
    """Reads a file (a decision for the audit), then answers with the prompt's word."""

    def script(messages: list[dict[str, Any]], tools: Any) -> Any:
        if messages[-1].get("role") == "user":
            return tool_call("view_file", AbsolutePath=str(ws / "notes.txt"))
        words = re.findall(r"(alpha|beta-one|beta-two|gamma)", _user_prompt(messages))
        return text(f"answer {words[-1] if words else '?'}")

    return script


def writing(ws: Path) -> Callable[[list[dict[str, Any]], Any], Any]:
    """Writes `<word>.txt` in the workspace, then says how that went."""

    def script(messages: list[dict[str, Any]], tools: Any) -> Any:
        last = messages[-1]
        if last.get("role") == "user":
            word = re.findall(r"write-(\w+)", _user_prompt(messages))[-1]
            return tool_call(
                "write_to_file",
                TargetFile=str(ws / f"{word}.txt"),
                CodeContent="hi",
                Overwrite=True,
            )
        return text(f"tool said: {str(last.get('content'))[:200]}")

    return script


def _workspace(tmp_path: Path, policies: str) -> Path:
    (tmp_path / "ws").mkdir()
    (tmp_path / "policies.toml").write_text(policies)
    return (tmp_path / "ws").resolve()


def _spec(tmp_path: Path, model: ScriptedModel) -> AgentSpec:
    return AgentSpec.from_files(
        tmp_path / "policies.toml",
        model=model.model_name,
        base_url=model.base_url,
        workspace=str(tmp_path / "ws"),
    )


# -- fleet run, results, status, audit ---------------------------------------------------------


@pytest.mark.harness
def test_run_three_tasks_then_results_status_and_audit(tmp_path: Path) -> None:
    _require_harness()
    ws = _workspace(tmp_path, ALLOW_ALL)
    (ws / "notes.txt").write_text("notes")
    tasks = [
        {"prompt": "alpha", "workspace": "ws", "id": "t-alpha"},
        {"turns": ["beta-one", "beta-two"], "workspace": str(ws), "id": "t-beta", "priority": 5},
        {"prompt": "gamma", "workspace": "ws"},
    ]
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    with served_in_thread(answering(ws)) as model:
        run = fleet(
            tmp_path, "run", "tasks.jsonl", "--policies", "policies.toml", "--concurrency", "2",
            "--base-url", model.base_url, "--model", model.model_name, "--worker-id", "w1",
        )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "task t-alpha: done" in run.stdout and "task t-beta: done" in run.stdout
    assert "3 tasks: 3 done" in run.stdout and "Traceback" not in run.stderr

    results = fleet(tmp_path, "results", "--json")
    assert results.returncode == 0, results.stderr
    found = {r["task_id"]: r for r in map(json.loads, results.stdout.splitlines())}
    assert found["t-alpha"] == {
        "task_id": "t-alpha", "status": "done", "text": "answer alpha", "error": None
    }  # fmt: skip
    assert found["t-beta"]["text"] == "answer beta-two"  # the last turn's answer
    (gamma,) = set(found) - {"t-alpha", "t-beta"}
    assert found[gamma]["text"] == "answer gamma"

    status = fleet(tmp_path, "status")
    assert status.returncode == 0, status.stderr
    assert re.search(r"t-beta\s+done\s+w1\s+2/2", status.stdout), status.stdout
    assert "3 tasks: 3 done" in status.stdout and ": on" in status.stdout

    audit = fleet(tmp_path, "audit", "-o", "audit.jsonl")
    assert audit.returncode == 0, audit.stderr
    lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert {line["task"] for line in lines} == set(found)
    assert all(line["worker"] == "w1" and len(line["spec_hash"]) == 64 for line in lines)
    summary = subprocess.run(
        [sys.executable, "-m", "antigravity_sdk", "audit", "summarize", "audit.jsonl"],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=BOUND,
    )  # fmt: skip
    assert summary.returncode == 0, summary.stderr
    assert "view_file" in summary.stdout and "4 turns" in summary.stdout
    verified = subprocess.run(
        [sys.executable, "-m", "antigravity_sdk", "audit", "verify", "audit.jsonl"],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=BOUND,
    )  # fmt: skip
    assert verified.returncode == 0 and "chain intact" in verified.stdout, verified.stdout

    listed = fleet(
        tmp_path, "audit", "--task", "t-beta", "--tool", "view_file", "--verdict", "allow"
    )
    decisions = [json.loads(line) for line in listed.stdout.splitlines()]
    assert len(decisions) == 2  # one per turn
    assert all(d["task"] == "t-beta" and d["tool"] == "view_file" for d in decisions)


# -- the tasks file ----------------------------------------------------------------------------


def test_a_bad_task_line_fails_before_anything_is_submitted(
    tmp_path: Path, state_home: Path
) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "policies.toml").write_text(ALLOW_ALL)
    good = json.dumps({"prompt": "fine", "workspace": "ws"})
    (tmp_path / "tasks.jsonl").write_text(f"{good}\n\n" + '{"promt": "typo", "workspace": "ws"}\n')
    run = fleet(tmp_path, "run", "tasks.jsonl", "--policies", "policies.toml")
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.startswith("error: tasks.jsonl, line 3: unknown key 'promt'"), run.stderr
    assert run.stdout == "" and not (state_home / "antigravity-sdk" / "fleet").exists()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "not valid JSON"),
        ("[1]", "expected a JSON object"),
        ('{"workspace": "ws"}', "a task needs a prompt"),
        ('{"prompt": "x", "turns": ["y"], "workspace": "ws"}', "either 'prompt'"),
        ('{"turns": [], "workspace": "ws"}', "a task needs a prompt"),
        ('{"turns": ["a", ""], "workspace": "ws"}', "a task needs a prompt"),
        ('{"prompt": "x"}', "'workspace' (a directory) is required"),
        ('{"prompt": "x", "workspace": "nowhere"}', "nowhere is not a directory"),
        ('{"prompt": "x", "workspace": "ws", "id": "a b"}', "id 'a b'"),
        ('{"prompt": "x", "workspace": "ws", "id": 7}', "id ''"),
        ('{"prompt": "x", "workspace": "ws", "conversation": "short"}', "conversation id"),
        ('{"prompt": "x", "workspace": "ws", "priority": -1}', "'priority' must be"),
        ('{"prompt": "x", "workspace": "ws", "priority": true}', "'priority' must be"),
        ('{"prompt": "x", "workspace": "ws", "id": "one"}', "id 'one' is on line 1 too"),
    ],
)
def test_read_tasks_names_the_line_and_the_problem(tmp_path: Path, line: str, message: str) -> None:
    (tmp_path / "ws").mkdir()
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"prompt": "ok", "workspace": "ws", "id": "one"}) + "\n" + line)
    with pytest.raises(ConfigurationError) as raised:
        read_tasks(path)
    assert str(raised.value).startswith(f"{path}, line 2: "), raised.value
    assert message in str(raised.value)


def test_read_tasks_resolves_workspaces_against_the_file(tmp_path: Path) -> None:
    (tmp_path / "sub" / "ws").mkdir(parents=True)
    path = tmp_path / "sub" / "tasks.jsonl"
    path.write_text('{"turns": ["a", "b"], "workspace": "ws", "priority": 3}\n\n')
    (task,) = read_tasks(path)
    assert (task.line, task.turns, task.priority) == (1, ["a", "b"], 3)
    assert task.workspace == (tmp_path / "sub" / "ws").resolve()
    path.write_text("\n")
    with pytest.raises(ConfigurationError, match="no task in it"):
        read_tasks(path)


# -- status, stop, resume (no worker needed) ----------------------------------------------------


def test_status_stop_and_resume(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, ALLOW_ALL)
    missing = fleet(tmp_path, "status")
    assert missing.returncode == 2 and "no fleet database at" in missing.stderr
    with Fleet(default_db_url()) as queued:
        spec = AgentSpec(workspace=str(ws))
        queued.submit(spec, "one", task_id="q-one")
        queued.submit(spec, ["two", "three"], task_id="q-two")
        queued.configure(max_tool_calls=50)
    status = fleet(tmp_path, "status")
    assert status.returncode == 0, status.stderr
    assert re.search(r"q-two\s+queued\s+-\s+0/2", status.stdout), status.stdout
    assert "tool calls: 0 of 50" in status.stdout and "2 tasks: 0 done" in status.stdout
    data = json.loads(fleet(tmp_path, "status", "--json").stdout)
    assert data["fleet"]["max_tool_calls"] == 50 and not data["fleet"]["stopped"]
    assert [t["task_id"] for t in data["tasks"]] == ["q-one", "q-two"]

    assert fleet(tmp_path, "stop").returncode == 0
    with Fleet(default_db_url()) as again:
        assert again.state().stopped
    assert fleet(tmp_path, "resume").returncode == 0
    with Fleet(default_db_url()) as again:
        assert not again.state().stopped


# -- approvals: a worker in this process, answers from the command line -------------------------


@pytest.mark.harness
def test_approvals_approve_and_deny_from_the_command_line(tmp_path: Path) -> None:
    _require_harness()
    ws = _workspace(tmp_path, ASK_BEFORE_WRITING)
    with served_in_thread(writing(ws)) as model, Fleet(default_db_url()) as pool:
        spec = _spec(tmp_path, model)
        with pool.worker(concurrency=2, worker_id="in-test"):
            yes = pool.submit(spec, "write-yes", task_id="t-yes")
            no = pool.submit(spec, "write-no", task_id="t-no")
            asked = eventually(lambda: len(pool.approvals()) == 2 and pool.approvals(), "2 asks")
            ids = {a.task_id: a.id for a in asked}

            listed = fleet(tmp_path, "approvals")
            assert listed.returncode == 0, listed.stderr
            for task_id, approval_id in ids.items():
                assert re.search(rf"{approval_id}\s+{task_id}\s+write_to_file", listed.stdout)
            assert "ask before writing" in listed.stdout

            approved = fleet(tmp_path, "approve", ids["t-yes"], "--by", "tester")
            assert approved.returncode == 0, approved.stderr
            assert (
                approved.stdout == f"approved {ids['t-yes']}: task t-yes may call write_to_file\n"
            )
            assert fleet(tmp_path, "deny", ids["t-no"]).returncode == 0
            assert yes.result(timeout=BOUND).ended == "done"
            denied = no.result(timeout=BOUND).text
        assert (ws / "yes.txt").read_text().strip() == "hi" and not (ws / "no.txt").exists()
        assert "Denied by policy 'ask before writing': the user refused" in denied, denied
        answered = pool.store.approval(ids["t-yes"])
        assert answered is not None and answered.answered_by == "tester"

    again = fleet(tmp_path, "approve", ids["t-yes"])
    assert again.returncode == 1 and "can no longer be answered" in again.stderr, again.stderr
    unknown = fleet(tmp_path, "deny", "nope")
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("error: no approval 'nope' in this fleet"), unknown.stderr
    assert fleet(tmp_path, "approvals").stdout == "no approval is waiting\n"


# -- Ctrl-C in fleet run; fleet worker picks the task up ----------------------------------------


@pytest.mark.harness
def test_ctrl_c_leaves_the_task_for_a_worker_that_finishes_it(
    tmp_path: Path, stopped_at_end: list[subprocess.Popen[str]]
) -> None:
    """Ctrl-C while a task waits for an approval: exit 130, the task stays in the fleet;
    `fleet worker` under the same id resumes it, the approval (answered meanwhile) lets
    it finish, and SIGTERM stops the worker with exit 0."""
    _require_harness()
    ws = _workspace(tmp_path, ASK_BEFORE_WRITING)
    (tmp_path / "tasks.jsonl").write_text(
        '{"prompt": "write-later", "workspace": "ws", "id": "t"}\n'
    )
    with served_in_thread(writing(ws)) as model:
        run, out, err = started(
            stopped_at_end, tmp_path, "run", "tasks.jsonl", "--policies", "policies.toml",
            "--worker-id", "w", "--base-url", model.base_url, "--model", model.model_name,
        )  # fmt: skip
        out.wait_for(r"^approval [0-9a-f]+: task t asks to call write_to_file")
        assert finish(run, signal.SIGINT) == 130, out.text() + err.text()
        err.wait_for(r"^interrupted \(Ctrl-C\): the worker stopped")
        with Fleet(default_db_url()) as pool:
            assert pool.status("t").status == "queued"  # for a worker, none runs it now
            (approval,) = pool.approvals()
            pool.approve(approval.id)
            worker, out, err = started(stopped_at_end, tmp_path, "worker", "--worker-id", "w")
            out.wait_for(r"^task t: done$")
            assert finish(worker, signal.SIGTERM) == 0, out.text() + err.text()
            assert pool.status("t").status == "done"
    assert (ws / "later.txt").read_text().strip() == "hi"
    err.wait_for(r"^worker w stopped")


def test_worker_stops_on_ctrl_c_with_130(
    tmp_path: Path, state_home: Path, stopped_at_end: list[subprocess.Popen[str]]
) -> None:
    """With no --db, the fleet lives in the SDK's state directory (0700), never in the
    working directory, where an agent's workspace could reach it."""
    worker, _, err = started(stopped_at_end, tmp_path, "worker", "--concurrency", "2")
    served = err.wait_for(r"serving sqlite:///(\S+) with concurrency 2")
    err.wait_for(r"^worker \S+: ready$")
    assert finish(worker, signal.SIGINT) == 130, err.text()
    err.wait_for(r"^interrupted \(Ctrl-C\): worker \S+ stopped")
    state = (state_home / "antigravity-sdk").resolve()
    assert Path(served.group(1)) == state / "fleet" / "fleet.sqlite"
    assert (state / "fleet" / "fleet.sqlite").is_file()
    assert list(tmp_path.iterdir()) == []
    for directory in (state, state / "fleet"):
        assert directory.stat().st_mode & 0o777 == 0o700, directory


# -- without the extra ------------------------------------------------------------------------


def test_without_the_fleet_extra_one_line_and_exit_2(tmp_path: Path) -> None:
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "dbos.py").write_text("raise ImportError(\"No module named 'dbos'\")\n")
    path = os.pathsep.join([str(fake), str(ROOT)])
    for args in (["status"], ["run", "tasks.jsonl", "--policies", "p.toml"]):
        result = fleet(tmp_path, *args, PYTHONPATH=path)
        assert result.returncode == 2, result.stdout + result.stderr
        assert result.stderr.count("\n") == 1 and INSTALL in result.stderr, result.stderr
    assert fleet(tmp_path, "--help", PYTHONPATH=path).returncode == 0  # imported lazily


# -- another database: --db, or ANTIGRAVITY_FLEET_DB ---------------------------------------------


def test_stop_and_resume_a_postgresql_fleet(
    tmp_path: Path, postgres_url: str, state_home: Path
) -> None:
    """The database from the environment, then from --db; no embedded fleet is made."""
    try:
        stop = fleet(tmp_path, "stop", ANTIGRAVITY_FLEET_DB=postgres_url)
        assert stop.returncode == 0, stop.stderr
        with Fleet(postgres_url) as shared:
            assert shared.state().stopped
        status = fleet(tmp_path, "status", "--db", postgres_url)
        assert status.returncode == 0, status.stderr
        assert status.stdout.startswith("fleet postgresql://") and "STOPPED" in status.stdout
        assert fleet(tmp_path, "resume", "--db", postgres_url).returncode == 0
        with Fleet(postgres_url) as shared:
            assert not shared.state().stopped
        assert list(tmp_path.iterdir()) == []
        assert not (state_home / "antigravity-sdk" / "fleet").exists()
    finally:
        with Fleet(postgres_url) as shared:
            shared.resume()
