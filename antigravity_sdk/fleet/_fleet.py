"""`Fleet`: submit governed agent tasks to a durable queue and run them on workers.

Submitting writes rows (the task, and DBOS's queued workflow) through a `DBOSClient`, so
any process can submit, watch and answer approvals without running tasks. A worker
(`Fleet.worker`) launches DBOS in its process and runs tasks from the queue with at most
`concurrency` harnesses. DBOS is one per process: one worker per process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final

from dbos import DBOS, DBOSClient, EnqueueOptions
from pydantic import BaseModel, ConfigDict, Field

from ..conversations import check_conversation_id
from ..errors import ConfigurationError
from ..state import KEY_BYTES, decode_key
from ..types import ChatResponse
from . import _worker
from ._spec import AgentSpec
from ._store import Approval, FleetState, Store, TaskRow, default_db_url, sqlite_path

__all__ = ["Fleet", "TaskHandle", "TaskResult", "TaskStatus", "Worker"]

logger = logging.getLogger("antigravity_sdk.fleet")

_POLL: Final = 0.25
_QUEUE_POLL: Final = 0.05
"""How often a worker's DBOS queue looks for work: a SQLite read costs little."""
_QUEUE_POLL_PG: Final = 0.2
"""With PostgreSQL, every worker polls the shared server: less often."""
_ID_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
_CONVERSATIONS: Final = uuid.UUID("6c1f7f0e-5a55-4a8e-9d0b-2f6f1a3b9c11")
"""Namespace of the conversation ids derived from task ids (uuid5: the same task id
gives the same conversation on every machine)."""
DEFAULT_APPROVAL_TIMEOUT: Final = 1800.0
"""How long an approval waits for an answer before it expires to deny (per rule: the
ask_user rule's `timeout`)."""


class TaskStatus(BaseModel):
    """Where a task is: `queued`, `running`, `waiting` (for an approval), `stopped` (held by
    `fleet stop`), `done`, `failed`, or `budget` (ended: the fleet's budget is spent)."""

    model_config = ConfigDict(frozen=True)

    task_id: str
    status: str
    conversation_id: str
    workspace: str | None = None
    worker: str | None = None
    turns_done: int = 0
    turns_total: int = 0
    error: str | None = None
    approvals: list[str] = Field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.status in ("done", "failed", "budget")


class TaskResult(BaseModel):
    """A finished task: each turn's response, and how it ended (`done`, or `budget`)."""

    model_config = ConfigDict(frozen=True)

    task_id: str
    conversation_id: str
    ended: str
    detail: str = ""
    responses: list[ChatResponse] = Field(default_factory=list)

    @property
    def text(self) -> str:
        """The last turn's answer."""
        return self.responses[-1].text if self.responses else ""


def check_id(kind: str, value: str) -> str:
    """`value`, if it may be a task's or a worker's id (1 to 100 letters, digits, '.', '_'
    or '-'); else a `ConfigurationError` naming it as `kind`. Public so that whatever
    reads ids for the fleet (the CLI's task file) refuses a bad one, in the fleet's words,
    before anything is submitted."""
    if not value or len(value) > 100 or not set(value) <= _ID_CHARS:
        raise ConfigurationError(f"{kind} {value!r}: use 1 to 100 letters, digits, '.', '_' or '-'")
    return value


class Fleet:
    """A fleet of governed agents on one database (see docs/fleet.md).

    `db_url` is a DBOS system database URL: None for the embedded default (a SQLite file,
    `fleet/fleet.sqlite` in the SDK's per-user state directory, outside every workspace:
    one machine), `postgresql://…` for workers on several machines. `save_dir` is where
    workers keep conversations, each in a directory of its own (default: next to the
    SQLite file; with PostgreSQL the SDK's default, which is per machine: share a
    directory or let each worker recover its own tasks).

    `secret` signs the answers to approvals and seals the audit table's chain (hex or
    base64 text, or bytes; at least 32 bytes). None: `$ANTIGRAVITY_FLEET_SECRET`, else
    the state directory's `fleet` key. Every process of a fleet on several machines
    needs the same one.
    """

    def __init__(
        self,
        db_url: str | None = None,
        *,
        save_dir: str | os.PathLike[str] | None = None,
        approval_timeout: float = DEFAULT_APPROVAL_TIMEOUT,
        secret: bytes | str | None = None,
    ) -> None:
        self.db_url = db_url or default_db_url()
        path = sqlite_path(self.db_url)
        if save_dir is None and path is not None:
            save_dir = path.parent / "conversations"
        self.save_dir = None if save_dir is None else Path(save_dir).resolve()
        self.approval_timeout = approval_timeout
        self.store = Store(self.db_url, key=_secret(secret))
        if self.store.key_mismatch:
            logger.warning("fleet: %s", self.store.key_mismatch)
        with self.store.schema_lock():  # DBOS's own tables, one process at a time
            DBOS.migrate(self.db_url)
        self._client: DBOSClient | None = None

    @property
    def client(self) -> DBOSClient:
        if self._client is None:
            self._client = DBOSClient(system_database_url=self.db_url, application_name=_worker.APP)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.destroy()
            self._client = None
        self.store.dispose()

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- submitting ----------------------------------------------------------------------

    def submit(
        self,
        spec: AgentSpec,
        prompt: str | Sequence[str],
        *,
        task_id: str | None = None,
        conversation_id: str | None = None,
        workspace: str | os.PathLike[str] | None = None,
        priority: int = 0,
    ) -> TaskHandle:
        """Queue a task: `prompt` (or a list of turns) for an agent built from `spec`.

        Idempotent by `task_id` (default: new): submitting an id again returns the first
        task's handle. Tasks of one `conversation_id` (default: one derived from the task
        id) never run at once. `priority` (1 to 2**31-1) orders the queue: lower runs
        first, and tasks without one (0) before any with one."""
        if not isinstance(spec, AgentSpec):
            raise TypeError(f"submit() takes an AgentSpec, got {type(spec).__name__}")
        turns = [prompt] if isinstance(prompt, str) else list(prompt)
        if not turns or not all(isinstance(t, str) and t.strip() for t in turns):
            raise ConfigurationError("a task needs a prompt (or a list of non-empty turns)")
        task_id = check_id("task id", task_id or f"task-{secrets.token_hex(6)}")
        conversation_id = check_conversation_id(
            conversation_id or str(uuid.uuid5(_CONVERSATIONS, task_id))
        )
        spec = spec.with_workspace(workspace)
        spec.check_outside(self.governed())
        spec.resolve_hooks()  # a hook that does not import fails here, not on a worker
        spec.load_policies(None)
        if not self.store.add_task(
            task_id=task_id,
            conversation_id=conversation_id,
            workspace=spec.workspace,
            spec_hash=spec.spec_hash,
            turns_total=len(turns),
        ):
            return TaskHandle(self, task_id)
        options: EnqueueOptions = {
            "workflow_name": _worker.WORKFLOW,
            "queue_name": _worker.QUEUE,
            "workflow_id": task_id,
            "app_version": _worker.APP_VERSION,
        }
        if priority:
            options["priority"] = priority
        self.client.enqueue(options, task_id, spec.model_dump_json(), turns, conversation_id)
        return TaskHandle(self, task_id)

    def map(
        self, spec: AgentSpec, prompts: Iterable[str], *, priority: int = 0
    ) -> list[TaskHandle]:
        """One task per prompt, each its own conversation."""
        return [self.submit(spec, prompt, priority=priority) for prompt in prompts]

    def task(self, task_id: str) -> TaskHandle:
        if self.store.task(task_id) is None:
            raise KeyError(f"no task {task_id!r} in this fleet")
        return TaskHandle(self, task_id)

    def governed(self) -> dict[str, Path]:
        """What governs this fleet's agents and must stay out of their reach: the SQLite
        file (with PostgreSQL, the server is elsewhere) and the conversations' directory."""
        return _worker.governed(self.db_url, self.save_dir)

    # -- watching ------------------------------------------------------------------------

    def status(self, task_id: str) -> TaskStatus:
        row = self.store.task(task_id)
        if row is None:
            raise KeyError(f"no task {task_id!r} in this fleet")
        return _status(row, self.store.approvals())

    def tasks(self) -> list[TaskStatus]:
        approvals = self.store.approvals()
        return [_status(row, approvals) for row in self.store.tasks()]

    def state(self) -> FleetState:
        return self.store.state()

    # -- governing the fleet as one --------------------------------------------------------

    def configure(
        self,
        *,
        max_tool_calls: int | None = None,
        max_tokens: int | None = None,
        turns_per_period: tuple[int, float] | None = None,
        concurrency: int | None = None,
    ) -> None:
        """The fleet's budget (tool calls and tokens across all tasks and workers), its
        rate limit (at most `n` turns start in any `period` seconds: a model quota) and
        its global concurrency (taken by workers when they start). None: no limit."""
        for name, value in (
            ("max_tool_calls", max_tool_calls),
            ("max_tokens", max_tokens),
            ("concurrency", concurrency),
        ):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
        limit, period = turns_per_period if turns_per_period is not None else (None, None)
        if turns_per_period is not None and (
            not isinstance(limit, int) or limit < 1 or not period or period <= 0
        ):
            raise ConfigurationError(
                f"turns_per_period must be (turns >= 1, seconds > 0), got {turns_per_period!r}"
            )
        self.store.configure(
            max_tool_calls=max_tool_calls,
            max_tokens=max_tokens,
            turn_limit=limit,
            turn_period=period,
            concurrency=concurrency,
        )

    def stop(self) -> None:
        """Every running agent denies every further call and ends its turn within about a
        second; no queued task starts (and no next turn) until `resume()`."""
        self.store.set_stopped(True)

    def resume(self) -> None:
        self.store.set_stopped(False)

    # -- approvals -----------------------------------------------------------------------

    def approvals(self) -> list[Approval]:
        """Approvals waiting for an answer (pending and in time), oldest first."""
        return self.store.approvals()

    def approve(self, approval_id: str, *, by: str = "") -> Approval:
        return self._answer(approval_id, True, by)

    def deny(self, approval_id: str, *, by: str = "") -> Approval:
        return self._answer(approval_id, False, by)

    def _answer(self, approval_id: str, approve: bool, by: str) -> Approval:
        self._check_key()
        answered = self.store.answer(approval_id, approve=approve, by=by or _who())
        if answered is None:
            found = self.store.approval(approval_id)
            if found is None:
                raise KeyError(f"no approval {approval_id!r}")
            state = {"used": "was granted and used", "expired": "expired unanswered"}
            status = found.effective_status
            raise ConfigurationError(
                f"approval {approval_id} {state.get(status, f'is {status}')}: "
                "it can no longer be answered"
            )
        return answered

    # -- audit ---------------------------------------------------------------------------

    def audit(self, **filters: str | None) -> Iterator[dict[str, Any]]:
        """The fleet's audit lines, oldest first, each with its `task`, `worker` and
        `spec_hash`; filters: task_id, tool, verdict, rule, since, until (ISO-8601)."""
        return (json.loads(line) for line in self.store.audit(**filters))

    def audit_lines(self, **filters: str | None) -> Iterator[str]:
        """The same lines as stored: JSONL that `antigravity audit summarize` reads and
        `antigravity audit verify` checks."""
        return self.store.audit(**filters)

    # -- working -------------------------------------------------------------------------

    def worker(self, concurrency: int = 1, *, worker_id: str | None = None) -> Worker:
        """A worker that runs this fleet's tasks in this process, at most `concurrency`
        harnesses at once. `worker_id` names it in the database (default: the host's
        name); a worker restarted under the same id recovers the tasks it was running."""
        self._check_key()
        return Worker(self, concurrency, worker_id or socket.gethostname())

    def _check_key(self) -> None:
        """Answers signed, or checked, with another fleet's secret would not count."""
        if self.store.key_mismatch:
            raise ConfigurationError(self.store.key_mismatch)


def _secret(secret: bytes | str | None) -> bytes | None:
    """The fleet secret given to `Fleet()`, checked (None: the Store finds it)."""
    if secret is None:
        return None
    if isinstance(secret, str):
        return decode_key(secret, "Fleet(secret=...)")
    if not isinstance(secret, bytes) or len(secret) < KEY_BYTES:
        raise ConfigurationError(f"Fleet(secret=...) must be at least {KEY_BYTES} bytes")
    return secret


def _who() -> str:
    try:
        user = os.getlogin()
    except OSError:
        user = os.environ.get("USER", "")
    return f"{user}@{socket.gethostname()}"


def _status(row: TaskRow, approvals: list[Approval]) -> TaskStatus:
    waiting = [a.id for a in approvals if a.task_id == row.task_id]
    status = row.status
    if waiting and status == "running":
        status = "waiting"
    return TaskStatus(
        task_id=row.task_id,
        status=status,
        conversation_id=row.conversation_id,
        workspace=row.workspace,
        worker=row.worker,
        turns_done=row.turns_done,
        turns_total=row.turns_total,
        error=row.error,
        approvals=waiting,
    )


def _reopen_dbos_console() -> None:
    """DBOS logs to the `sys.stderr` of the moment it was first set up; if that stream has
    been closed since (a redirected or captured stderr), point its handler at today's."""
    for handler in logging.getLogger("dbos").handlers:
        if isinstance(handler, logging.StreamHandler) and getattr(handler.stream, "closed", False):
            handler.stream = sys.stderr  # not setStream(): it flushes the closed one


async def _queue_polled() -> None:
    """Wait (bounded) until DBOS polls the fleet's queue: its queue manager looks for new
    queues once a second, and a task submitted before then would wait for it."""
    name = f"queue-worker-{_worker.QUEUE}"
    for _ in range(100):
        if any(t.name == name and t.is_alive() for t in threading.enumerate()):
            return
        await asyncio.sleep(0.05)
    logger.warning("fleet: DBOS has not started polling the queue after 5 s")


class TaskHandle:
    """A submitted task: `status()` now, `result()` when it ends."""

    def __init__(self, fleet: Fleet, task_id: str) -> None:
        self.fleet = fleet
        self.task_id = task_id

    def __repr__(self) -> str:
        return f"TaskHandle({self.task_id!r})"

    def status(self) -> TaskStatus:
        return self.fleet.status(self.task_id)

    def result(self, timeout: float | None = None) -> TaskResult:
        """Wait for the task to end and return its result; `TimeoutError` after `timeout`
        seconds; a task that failed raises `FleetTaskError` with its error."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            status = self.status()
            if status.finished:
                break
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(
                    f"task {self.task_id} is still {status.status} after {timeout} s"
                )
            time.sleep(_POLL)
        if status.status == "failed":
            raise _worker.FleetTaskError(f"task {self.task_id} failed: {status.error}")
        output: str = self.fleet.client.retrieve_workflow(self.task_id).get_result()
        data = json.loads(output)
        return TaskResult(
            task_id=self.task_id,
            conversation_id=status.conversation_id,
            ended=data["ended"],
            detail=data.get("detail", ""),
            responses=[ChatResponse.model_validate(r) for r in data["responses"]],
        )


class Worker:
    """Runs a fleet's tasks in this process: `run()` blocks, `serve()` is its coroutine,
    and `with fleet.worker(...):` runs it on a thread for the block."""

    def __init__(self, fleet: Fleet, concurrency: int, worker_id: str) -> None:
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigurationError(f"concurrency must be a positive integer, got {concurrency!r}")
        self.fleet = fleet
        self.concurrency = concurrency
        self.worker_id = check_id("worker id", worker_id)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def running(self) -> bool:
        """Whether the worker runs on the thread `with fleet.worker(...):` started for it:
        started, and not ended. False before the block, and for `run()` and `serve()`,
        which run on the caller's thread. Public so that whoever waits on the worker's
        tasks (`antigravity fleet run`) can tell a worker that died from a slow one."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def error(self) -> BaseException | None:
        """Why the worker's thread stopped: what it raised (a failure to launch, or an
        error while serving), None while it runs or when it stopped without one."""
        return self._error

    async def serve(
        self, stop: asyncio.Event | None = None, *, on_ready: Callable[[], None] | None = None
    ) -> None:
        """Launch DBOS here and run tasks until `stop` is set (or this is cancelled);
        `on_ready()` is called once the worker polls the queue."""
        fleet = self.fleet
        state = fleet.store.state()
        global_concurrency = state.concurrency
        per_worker = self.concurrency
        if global_concurrency is not None:
            per_worker = min(per_worker, global_concurrency)
        runtime = _worker.Runtime(
            store=fleet.store,
            worker_id=self.worker_id,
            save_dir=fleet.save_dir,
            governed=fleet.governed(),
            concurrency=per_worker,
            approval_timeout=fleet.approval_timeout,
        )
        _worker.install(runtime)
        _reopen_dbos_console()
        DBOS(
            config={
                "name": _worker.APP,
                "system_database_url": fleet.db_url,
                "executor_id": self.worker_id,
                "application_version": _worker.APP_VERSION,
                # Its warnings on a worker's stop quote each task's whole spec.
                "log_level": "ERROR",
            }
        )
        try:
            # Launched on this loop, so that DBOS runs the task workflows here too.
            DBOS.launch()
            await DBOS.register_queue_async(
                _worker.QUEUE,
                worker_concurrency=per_worker,
                global_concurrency=global_concurrency,
                polling_interval_sec=_QUEUE_POLL if sqlite_path(fleet.db_url) else _QUEUE_POLL_PG,
                on_conflict="always_update",
            )
            await _queue_polled()
            self._ready.set()
            if on_ready is not None:
                on_ready()
            await (stop or asyncio.Event()).wait()
        finally:
            await _worker.cancel_running(runtime)
            _worker.install(None)
            DBOS.destroy()

    def run(self) -> None:
        """Run until interrupted (Ctrl-C)."""
        asyncio.run(self.serve())

    def __enter__(self) -> Worker:
        def main() -> None:
            async def body() -> None:
                self._loop = asyncio.get_running_loop()
                self._stop = asyncio.Event()
                await self.serve(self._stop)

            try:
                asyncio.run(body())
            except BaseException as exc:
                self._error = exc
                self._ready.set()

        self._thread = threading.Thread(target=main, name=f"fleet-worker-{self.worker_id}")
        self._thread.start()
        try:
            if not self._ready.wait(60):
                raise TimeoutError("the fleet worker did not start within 60 s")
        except BaseException:  # Ctrl-C or the timeout: never leave the thread running
            self._ready.wait(60)
            self.__exit__()
            raise
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, *exc: object) -> None:
        loop, stop, thread = self._loop, self._stop, self._thread
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):  # its loop is closed: the worker failed
                loop.call_soon_threadsafe(stop.set)
        if thread is not None:
            thread.join(60)
            if thread.is_alive():
                logger.error("fleet worker %s did not stop within 60 s", self.worker_id)
