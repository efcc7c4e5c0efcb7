"""What the fleet's integration tests share (tests/integration/test_fleet_*.py).

* The environment a fleet worker gets: the real harness (`ANTIGRAVITY_HARNESS_PATH`) and
  an SDK cache under the test's directory (`ANTIGRAVITY_CACHE_DIR`: the harness's app
  data, never the user's), with this repository and `tests/` importable (hooks by import
  path live here).
* Reading a model request: which prompt it answers (`prompt_of`), the tool results since
  that prompt (`tool_results`), and a thread-safe log of every request (`Requests`).
* `HarnessWatch`: every harness (and its supervisor, and what it started) that a set of
  host processes ran during the test, sampled from /proc, and the check that none is
  left at the end.
* `WorkerProcess`: a `python -c` fleet worker, killed with SIGKILL or stopped with
  SIGINT (Ctrl-C), its output kept in a log file.
* `fresh_database`: a database of its own on the session's PostgreSQL server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from cli_support import ROOT, cli_env

from antigravity_sdk.harness.install import find_harness
from antigravity_sdk.hooks import Hook

TESTS = Path(__file__).resolve().parent
T = TypeVar("T")

BROKEN_HOOK_ENV = "FLEET_TEST_BROKEN_HOOK"
"""Set in a worker's environment, `fleet_support:hook_missing_on_worker` cannot be built:
a hook that imports where the task is submitted but not on the worker that runs it."""


# -- environment ---------------------------------------------------------------------------


def harness_env(root: Path) -> dict[str, str]:
    """The variables a fleet worker needs to run the real harness offline, its state
    under `root`."""
    return {
        "ANTIGRAVITY_HARNESS_PATH": str(find_harness()),
        "ANTIGRAVITY_CACHE_DIR": str(root / "sdk-cache"),
    }


def worker_env(root: Path, **extra: str | None) -> dict[str, str]:
    """A worker process's environment: `cli_env` (the repo importable, no Gemini key),
    `tests/` importable too, the harness variables, and `extra`."""
    env = cli_env(**harness_env(root), **extra)
    env["PYTHONPATH"] = os.pathsep.join((str(ROOT), str(TESTS)))
    return env


def wait_until(check: Callable[[], T], *, timeout: float, what: str, interval: float = 0.05) -> T:
    """Poll `check` until it returns something true and return that; AssertionError
    naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


# -- model requests ------------------------------------------------------------------------

_PROMPT = re.compile(r"<USER_REQUEST>\n(.*?)\n</USER_REQUEST>", re.DOTALL)


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def prompts_in(messages: list[dict[str, Any]]) -> list[str]:
    """The user prompts of a request's messages, oldest first (without the harness's
    wrapping and metadata)."""
    found = []
    for message in messages:
        if message.get("role") == "user":
            match = _PROMPT.search(_text(message))
            found.append(match.group(1) if match else _text(message))
    return found


def prompt_of(messages: list[dict[str, Any]]) -> str:
    """The prompt a request answers: the last user prompt."""
    prompts = prompts_in(messages)
    return prompts[-1] if prompts else ""


def tool_results(messages: list[dict[str, Any]]) -> list[str]:
    """The tool results since the last user prompt (this turn's, so far)."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    return [_text(m) for m in messages[last_user + 1 :] if m.get("role") == "tool"]


def assistant_texts(messages: list[dict[str, Any]]) -> list[str]:
    return [_text(m) for m in messages if m.get("role") == "assistant" and _text(m)]


@dataclass(frozen=True)
class Request:
    prompt: str
    messages: list[dict[str, Any]]
    at: float


class Requests:
    """Every model request a script saw, from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._all: list[Request] = []

    def record(self, messages: list[dict[str, Any]]) -> Request:
        request = Request(prompt_of(messages), messages, time.time())
        with self._lock:
            self._all.append(request)
        return request

    def all(self) -> list[Request]:
        with self._lock:
            return list(self._all)

    def for_prompt(self, prompt: str) -> list[Request]:
        return [r for r in self.all() if r.prompt == prompt]

    def prompts(self) -> list[str]:
        return [r.prompt for r in self.all()]


def audit_time(seconds: float) -> str:
    """An epoch time as the audit lines write theirs (UTC, microseconds, `Z`): such
    strings compare as the times do."""
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{whole}.{int(seconds % 1 * 1_000_000):06d}Z"


def check_stopped(
    decisions: list[dict[str, Any]], stopped_at: float, slack: float = 1.0
) -> list[dict[str, Any]]:
    """Check the decision lines made since `fleet stop` (at epoch `stopped_at`): once a
    task had a call denied for the stop, none of its calls is allowed; and no call at all
    is allowed more than `slack` seconds after the stop (one decided as the switch
    flipped may end just after it). Returns the calls the fleet's guard denied for it."""
    cutoff = audit_time(stopped_at + slack)
    denied: list[dict[str, Any]] = []
    for line in decisions:
        if line["verdict"] == "allow":
            assert line["task"] not in {d["task"] for d in denied}, f"allowed after: {line}"
            assert line["time"] < cutoff, f"allowed {slack} s after the stop: {line}"
        elif line.get("hook") == "FleetGuard" and "stopped" in str(line.get("message")):
            denied.append(line)
    return denied


# -- harness processes ---------------------------------------------------------------------


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of a live process, None if it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[1]), int(fields[19])


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [part.decode(errors="replace") for part in f.read().split(b"\0") if part]
    except OSError:
        return []


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


class HarnessWatch:
    """The harnesses run for a set of host processes (this one, worker processes): a
    thread samples /proc every 50 ms and records each harness supervisor whose host pid
    (its first argument) is one of `hosts`, and everything below it (the harness and
    what the harness started), by pid and start time (a reused pid is not a leftover).

    `leftovers()` is what of that still runs, plus any supervisor of a host found now;
    `assert_none_left()` waits (bounded) for it to be empty."""

    def __init__(self, hosts: set[int] | None = None) -> None:
        self.hosts: set[int] = set(hosts or ())
        self.seen: dict[tuple[int, int], tuple[str, int]] = {}
        self.harness_exe = str(find_harness().resolve())
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add_host(self, pid: int) -> None:
        with self._lock:
            self.hosts.add(pid)

    def _scan(self) -> dict[tuple[int, int], tuple[str, int]]:
        """Our supervisors and their descendants alive now: {(pid, start): (what, host)}."""
        with self._lock:
            hosts = {str(pid) for pid in self.hosts}
        parents: dict[int, int] = {}
        starts: dict[int, int] = {}
        roots: dict[int, int] = {}
        for pid in _pids():
            stat = _stat(pid)
            if stat is None:
                continue
            parents[pid], starts[pid] = stat
            argv = _cmdline(pid)
            for i, arg in enumerate(argv[:-1]):
                if arg.endswith("supervisor.py") and argv[i + 1] in hosts:
                    roots[pid] = int(argv[i + 1])
                    break
        found: dict[tuple[int, int], tuple[str, int]] = {}
        frontier = [(pid, host) for pid, host in roots.items()]
        while frontier:
            pid, host = frontier.pop()
            if (pid, starts[pid]) in found:
                continue
            what = "supervisor" if pid in roots else "harness"
            try:
                if pid not in roots and os.readlink(f"/proc/{pid}/exe") != self.harness_exe:
                    what = "harness descendant"
            except OSError:
                pass
            found[(pid, starts[pid])] = (what, host)
            frontier.extend((child, host) for child, parent in parents.items() if parent == pid)
        return found

    def sample(self) -> dict[tuple[int, int], tuple[str, int]]:
        found = self._scan()
        with self._lock:
            self.seen.update(found)
        return found

    def harnesses_seen(self, host: int | None = None) -> int:
        with self._lock:
            return sum(
                1 for what, of in self.seen.values() if what == "harness" and host in (None, of)
            )

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            with contextlib.suppress(Exception):  # a process vanished mid-read
                self.sample()

    def start(self) -> HarnessWatch:
        self._thread = threading.Thread(target=self._run, name="harness-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def leftovers(self, host: int | None = None) -> dict[tuple[int, int], tuple[str, int]]:
        left = self._scan()
        with self._lock:
            for (pid, start), seen in self.seen.items():
                stat = _stat(pid)
                if stat is not None and stat[1] == start:
                    left[(pid, start)] = seen
        return {key: seen for key, seen in left.items() if host in (None, seen[1])}

    def assert_none_left(self, host: int | None = None, within: float = 20.0) -> None:
        """Every harness process seen (for `host`, or any) is gone within `within` s."""
        self.sample()
        deadline = time.monotonic() + within
        while (left := self.leftovers(host)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not left, "harness processes left behind: " + ", ".join(
            f"{what} {pid} of host {of} ({' '.join(_cmdline(pid))[:200]})"
            for (pid, _), (what, of) in left.items()
        )


class Gate:
    """For an async script (on the model's loop): hold each caller until `needed`
    distinct keys have arrived, or `timeout` seconds (then let them go: the test's own
    assertions say what was missing). Keeps requests in flight at once."""

    def __init__(self, needed: int, timeout: float = 20.0) -> None:
        self.needed = needed
        self.timeout = timeout
        self.arrived: set[str] = set()
        self._open: asyncio.Event | None = None

    async def wait(self, key: str) -> None:
        if self._open is None:
            self._open = asyncio.Event()
        self.arrived.add(key)
        if len(self.arrived) >= self.needed:
            self._open.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._open.wait(), self.timeout)


# -- worker processes ----------------------------------------------------------------------

WORKER_CODE = """
import logging, sys
from antigravity_sdk.fleet import Fleet
logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
url, save_dir, worker_id, concurrency = sys.argv[1:5]
print("worker", worker_id, "pid", __import__("os").getpid(), flush=True)
try:
    Fleet(url, save_dir=save_dir).worker(int(concurrency), worker_id=worker_id).run()
except KeyboardInterrupt:
    print("worker", worker_id, "stopped", flush=True)
"""


class WorkerProcess:
    """`Fleet(url, save_dir=...).worker(concurrency, worker_id=...).run()` in a process of
    its own; its output goes to `log`."""

    def __init__(
        self,
        url: str,
        save_dir: Path,
        worker_id: str,
        *,
        concurrency: int,
        env: dict[str, str],
        log_dir: Path,
    ) -> None:
        self.url = url
        self.save_dir = save_dir
        self.worker_id = worker_id
        self.concurrency = concurrency
        self.env = env
        self.log = log_dir / f"worker-{worker_id}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.pids: list[int] = []

    def start(self) -> WorkerProcess:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        with open(self.log, "ab") as out:
            out.write(f"--- start {time.strftime('%X')}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    WORKER_CODE,
                    self.url,
                    str(self.save_dir),
                    self.worker_id,
                    str(self.concurrency),
                ],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.pids.append(self.proc.pid)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: nothing of the worker runs on (its harnesses die with it)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self, timeout: float = 60.0) -> int | None:
        """Ctrl-C (SIGINT), as a user stops `fleet worker`; SIGKILL after `timeout`."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


# -- hooks by import path (a spec names them as "fleet_support:NAME") ----------------------


class Nothing(Hook):
    """A hook that does nothing (a spec's hooks must name a Hook)."""


def hook_missing_on_worker() -> Hook:
    """Builds where the task is submitted; fails on a worker whose environment has
    `BROKEN_HOOK_ENV` set (a dependency that machine does not have)."""
    if os.environ.get(BROKEN_HOOK_ENV):
        raise ModuleNotFoundError("No module named 'only_on_the_submitter'")
    return Nothing()


# -- PostgreSQL ----------------------------------------------------------------------------


@contextlib.contextmanager
def fresh_database(server_url: str) -> Iterator[str]:
    """A new, empty database on the server of `server_url` (its URL); dropped after."""
    import psycopg

    name = f"fleet_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = server_url.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        with contextlib.suppress(Exception), psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


ASK_BEFORE_WRITING = """
[[rule]]
name = "ask before writing"
tool = "write_to_file"
decision = "ask_user"

[[rule]]
tool = "*"
decision = "allow"
"""
"""A policy file: writes wait for an approval, everything else is allowed."""

NO_WRITES = """
[[rule]]
name = "no writes"
tool = "write_to_file"
decision = "deny"

[[rule]]
name = "everything else"
tool = "*"
decision = "allow"
"""
"""A policy file: writes are denied, everything else is allowed."""


def open_approval(store: Any, call: Any, *, task: str = "t1", expires_in: float = 60.0) -> str:
    """Open (or find) the approval `call` of `task` waits on, as a worker's handler does;
    its id."""
    from antigravity_sdk.fleet._worker import call_key

    args, key = call_key(call)
    return str(
        store.open_approval(
            task_id=task,
            worker="w1",
            tool=call.qualified_name,
            args_json=args,
            call_key=key,
            rule="ask before writing",
            reason="",
            expires_in=expires_in,
        ).id
    )
