"""`antigravity fleet run|worker|status|results|approvals|approve|deny|audit|stop|resume`:
governed agents as durable tasks on a fleet database (the `fleet` extra; docs/fleet.md).

Every command takes `--db URL` (default `$ANTIGRAVITY_FLEET_DB`, else the embedded SQLite
file `fleet/fleet.sqlite` in the SDK's per-user state directory, outside every workspace:
`$XDG_STATE_HOME/antigravity-sdk`). Answers to approvals are signed with the fleet's
secret (`$ANTIGRAVITY_FLEET_SECRET`, else the state directory's key). `antigravity_sdk.fleet`
(DBOS) is imported only when a fleet command runs; without the extra the command says how
to install it and exits 2. Exit codes as for every command (`_common.EXIT_CODES`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import signal
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Final, TextIO

from ._common import EXIT_CODES

if TYPE_CHECKING:
    from ..fleet import AgentSpec, Approval, Fleet, FleetState, TaskStatus, Worker
    from ._common import Subparsers

__all__ = ["DB_ENV", "TaskLine", "add_fleet", "read_tasks"]

DB_ENV: Final = "ANTIGRAVITY_FLEET_DB"
"""The fleet database when `--db` is not given."""
INSTALL: Final = "pip install 'antigravity-sdk[fleet]'"
_POLL: Final = 0.5
_KEYS: Final = ("prompt", "turns", "workspace", "id", "conversation", "priority")
_ANSWER: Final = "answer it from another terminal: antigravity fleet approve ID (or deny ID)"
_FINISHED: Final = ("done", "failed", "budget")


class _Fail(Exception):
    """Stop the command: `error: <message>` on stderr, exit `code`."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def _command(body: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """`body` with the command's errors as one line on stderr and their exit code."""

    def run(args: argparse.Namespace) -> int:
        from ..errors import AntigravityError, ConfigurationError
        from .report import print_error

        try:
            return body(args)
        except _Fail as exc:
            print(f"error: {exc}", file=sys.stderr)
            return exc.code
        except AntigravityError as exc:  # bad input, no model, no harness: 2; else 1
            code = print_error(sys.stderr, exc)
            return 2 if isinstance(exc, ConfigurationError) else code
        except KeyboardInterrupt:
            print("interrupted (Ctrl-C)", file=sys.stderr)
            return 130

    return run


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _require_extra() -> None:
    try:
        import antigravity_sdk.fleet  # noqa: F401
    except ImportError as exc:
        reason = _first_line(exc.__cause__ or exc)
        raise _Fail(f"antigravity fleet needs the fleet extra: {INSTALL} ({reason})") from None


def _open(args: argparse.Namespace, *, must_exist: bool = True, **options: Any) -> Fleet:
    """The fleet of `--db`; `must_exist`: a SQLite file that is not there is an error (a
    command run in the wrong directory must not answer for a new, empty fleet)."""
    _require_extra()
    from ..errors import ConfigurationError
    from ..fleet import Fleet, default_db_url, sqlite_path

    url = args.db or os.environ.get(DB_ENV) or default_db_url()
    path = sqlite_path(url)
    if must_exist and path is not None and not path.is_file():
        raise _Fail(
            f"no fleet database at {path}: run 'antigravity fleet run' or 'fleet worker' "
            f"first, or give --db URL (or set {DB_ENV})"
        )
    try:
        return Fleet(url, **options)
    except ConfigurationError:  # the fleet's secret, the state directory: as they say
        raise
    except Exception as exc:  # the database's own errors, whichever driver
        raise _Fail(f"cannot open the fleet database {_shown(url)}: {_first_line(exc)}") from None


def _shown(url: str) -> str:
    """`url` without its password."""
    try:
        import sqlalchemy

        return sqlalchemy.make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.rpartition("@")[2]


def _short(value: object, width: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return text if len(text) <= width else text[: width - 3] + "..."


def _expires_in(approval: Approval) -> str:
    minutes, seconds = divmod(max(0, round(approval.expires_at - time.time())), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {seconds:02d}s" if minutes else f"{seconds}s"


def _table(out: TextIO, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows]:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")


# -- the tasks file ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TaskLine:
    """One task of a TASKS.jsonl file, checked."""

    line: int
    turns: list[str]
    workspace: Path
    task_id: str | None = None
    conversation: str | None = None
    priority: int = 0


def read_tasks(path: str | os.PathLike[str]) -> list[TaskLine]:
    """Every task of a JSON-lines file, checked before any is submitted: `ConfigurationError`
    naming the line of the first bad one. Blank lines are skipped; relative workspaces are
    relative to the file's directory."""
    from ..conversations import check_conversation_id
    from ..errors import ConfigurationError
    from ..fleet import check_id

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"cannot read {path}: {exc}") from None
    base = Path(path).resolve().parent
    tasks: list[TaskLine] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            try:
                data = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ConfigurationError(f"not valid JSON ({exc.msg})") from None
            if not isinstance(data, dict):
                raise ConfigurationError(f"expected a JSON object, got {_short(data, 40)}")
            unknown = [key for key in data if key not in _KEYS]
            if unknown:
                raise ConfigurationError(f"unknown key {unknown[0]!r} (keys: {', '.join(_KEYS)})")
            prompt, turns = data.get("prompt"), data.get("turns")
            turns = [prompt] if turns is None else turns
            if not (prompt is None or "turns" not in data) or not isinstance(turns, list):
                raise ConfigurationError("give either 'prompt' (a string) or 'turns' (a list)")
            if not turns or not all(isinstance(t, str) and t.strip() for t in turns):
                raise ConfigurationError("a task needs a prompt, or a list of non-empty turns")
            workspace, task_id = data.get("workspace"), data.get("id")
            if not isinstance(workspace, str) or not workspace:
                raise ConfigurationError("'workspace' (a directory) is required")
            folder = (base / Path(workspace).expanduser()).resolve()
            if not folder.is_dir():
                raise ConfigurationError(f"workspace {folder} is not a directory")
            if task_id is not None:
                check_id("id", task_id if isinstance(task_id, str) else "")
                if task_id in seen:
                    raise ConfigurationError(f"id {task_id!r} is on line {seen[task_id]} too")
                seen[task_id] = number
            if (conversation := data.get("conversation")) is not None:
                check_conversation_id(conversation if isinstance(conversation, str) else "")
            priority = data.get("priority", 0)
            if type(priority) is not int or not 0 <= priority < 2**31:
                raise ConfigurationError(f"'priority' must be 0 to 2**31-1, got {priority!r}")
        except ConfigurationError as exc:
            raise ConfigurationError(f"{path}, line {number}: {exc}") from None
        tasks.append(TaskLine(number, turns, folder, task_id, conversation, priority))
    if not tasks:
        raise ConfigurationError(f"{path}: no task in it (one JSON object per line)")
    return tasks


# -- watching tasks --------------------------------------------------------------------------


def _describe(task: TaskStatus) -> str:
    turn = f" (turn {task.turns_done + 1}/{task.turns_total})" if task.turns_total > 1 else ""
    what = {
        "running": f"running on {task.worker}{turn}",
        "waiting": f"waiting for approval {', '.join(task.approvals)} on {task.worker}{turn}",
        "stopped": "held, the fleet is stopped",
        "failed": f"failed: {task.error}",
        "budget": f"ended, {task.error}",
    }
    return f"task {task.task_id}: {what.get(task.status, task.status)}"


def _approval_line(approval: Approval) -> str:
    return (
        f"approval {approval.id}: task {approval.task_id} asks to call {approval.tool} "
        f"{_short(approval.args)} (rule {approval.rule!r}); expires in {_expires_in(approval)}"
    )


def _counts(tasks: Sequence[TaskStatus]) -> str:
    n = {s: sum(t.status == s for t in tasks) for s in (*_FINISHED, "running", "waiting")}
    n["queued"] = sum(t.status == "queued" for t in tasks)
    parts = [f"{n['done']} done", f"{n['running']} running", f"{n['failed']} failed"]
    parts += [f"{n['waiting']} waiting for approval", f"{n['queued']} queued"]
    if stopped := sum(t.status == "stopped" for t in tasks):
        parts.append(f"{stopped} held (fleet stopped)")
    if n["budget"]:
        parts.append(f"{n['budget']} out of budget")
    return f"{len(tasks)} task{'s' if len(tasks) != 1 else ''}: " + ", ".join(parts)


class _Lines:
    """Progress as plain lines (CI, a pipe): one per change of a task's state."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.seen: dict[str, tuple[object, ...]] = {}
        self.asked: set[str] = set()
        self.stopped = False

    def update(
        self, tasks: Sequence[TaskStatus], asks: Sequence[Approval], state: FleetState
    ) -> None:
        lines = []
        if state.stopped != self.stopped:
            self.stopped = state.stopped
            lines.append(
                "fleet: stopped (antigravity fleet resume)" if self.stopped else "fleet: on"
            )
        for task in tasks:
            key = (task.status, task.worker, task.turns_done, tuple(task.approvals))
            if self.seen.get(task.task_id) != key:
                self.seen[task.task_id] = key
                lines.append(_describe(task))
        for approval in asks:
            if approval.id not in self.asked:
                self.asked.add(approval.id)
                lines.append(f"{_approval_line(approval)}; {_ANSWER.replace('ID', approval.id)}")
        self.out.write("".join(f"{line}\n" for line in lines))
        self.out.flush()

    def close(self) -> None:
        pass


class _Live:
    """Progress on a terminal: counts, failures, and each approval waiting, redrawn."""

    def __init__(self, out: TextIO) -> None:
        from rich.console import Console
        from rich.live import Live

        self.live = Live(console=Console(file=out), auto_refresh=False)
        self.live.start()
        self.began = time.monotonic()

    def update(
        self, tasks: Sequence[TaskStatus], asks: Sequence[Approval], state: FleetState
    ) -> None:
        from rich.console import Group
        from rich.text import Text

        minutes, seconds = divmod(round(time.monotonic() - self.began), 60)
        lines = [Text(f"{_counts(tasks)}  ({minutes}:{seconds:02d})", style="bold")]
        if state.stopped:
            lines.append(Text("the fleet is stopped: antigravity fleet resume", style="yellow"))
        lines += [Text(f"  {_describe(t)}", "red") for t in tasks if t.status in _FINISHED[1:]]
        lines += [Text(_ANSWER, style="cyan")] if asks else []
        lines += [Text(f"  {_approval_line(approval)}") for approval in asks]
        self.live.update(Group(*lines), refresh=True)

    def close(self) -> None:
        self.live.stop()


def _watch(
    fleet: Fleet, ids: Sequence[str], view: _Lines | _Live, gone: Callable[[], str]
) -> list[TaskStatus]:
    """Show the progress of tasks `ids` until every one is finished; how they ended.
    `gone()`: why the worker running them is gone ("" while it runs)."""
    order = {task_id: i for i, task_id in enumerate(ids)}
    while True:
        tasks = sorted(
            (t for t in fleet.tasks() if t.task_id in order), key=lambda t: order[t.task_id]
        )
        view.update(tasks, [a for a in fleet.approvals() if a.task_id in order], fleet.state())
        if len(tasks) == len(order) and all(t.finished for t in tasks):
            return tasks
        if reason := gone():
            raise _Fail(f"the worker stopped, its tasks unfinished: {reason}", 1)
        time.sleep(_POLL)


@contextlib.contextmanager
def _quiet_dbos() -> Iterator[None]:
    """DBOS warns, with the task's whole spec, of each task a stopping worker cuts off:
    that is how a worker stops (the task stays pending), not news."""

    def keep(record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Asyncio task cancelled")

    dbos = logging.getLogger("dbos")
    dbos.addFilter(keep)
    try:
        yield
    finally:
        dbos.removeFilter(keep)


# -- fleet run -------------------------------------------------------------------------------


class _CtrlC:
    """SIGINT as one `KeyboardInterrupt`, later ones ignored while the clean-up (bounded)
    runs. While `deferred` (the worker is starting: it must be up to be stopped) it is
    only noted, and raised by `check()`."""

    def __init__(self) -> None:
        self.came = self.deferred = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if not self.came:
            self.came = True
            if not self.deferred:
                raise KeyboardInterrupt

    def check(self) -> None:
        self.deferred = False
        if self.came:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def installed(self) -> Iterator[_CtrlC]:
        try:
            previous = signal.signal(signal.SIGINT, self)
        except ValueError:  # not the main thread
            previous = None
        try:
            yield self
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)


def _spec(args: argparse.Namespace) -> AgentSpec:
    """The agent every task runs: the policy file (checked as `policy check` does), the
    model (none configured is exit 2), containment; and a harness must be here."""
    from ..fleet import AgentSpec
    from ..harness.config import resolve_model
    from ..harness.install import locate_harness
    from .chat import load_policy_file

    load_policy_file(args.policies)
    settings = resolve_model(args.model, base_url=args.base_url)
    locate_harness()
    return AgentSpec.from_files(
        args.policies,
        model=settings.name,
        base_url=settings.base_url,
        containment=not args.no_containment,
    )


def _configure(fleet: Fleet, args: argparse.Namespace) -> None:
    """Set the limits given on the command line, keep the fleet's others."""
    if args.max_tool_calls is None and args.max_tokens is None and args.turns_per_minute is None:
        return
    state = fleet.state()
    rate = None if state.turn_limit is None else (state.turn_limit, state.turn_period or 60.0)
    fleet.configure(
        max_tool_calls=args.max_tool_calls or state.max_tool_calls,
        max_tokens=args.max_tokens or state.max_tokens,
        turns_per_period=(args.turns_per_minute, 60.0) if args.turns_per_minute else rate,
        concurrency=state.concurrency,
    )


def _run(args: argparse.Namespace) -> int:
    from .progress import interactive

    _require_extra()
    tasks = read_tasks(args.tasks)
    spec = _spec(args)
    with _open(args, must_exist=False, approval_timeout=args.approval_timeout) as fleet:
        _configure(fleet, args)
        worker = fleet.worker(args.concurrency, worker_id=args.worker_id)
        with _CtrlC().installed() as ctrl_c, _quiet_dbos():
            try:
                return _run_tasks(fleet, worker, spec, tasks, ctrl_c, interactive(sys.stdout))
            except KeyboardInterrupt:
                sys.stdout.flush()
                print(
                    "interrupted (Ctrl-C): the worker stopped; the unfinished tasks stay in "
                    "the fleet ('antigravity fleet worker' runs them)",
                    file=sys.stderr,
                )
                return 130


def _run_tasks(
    fleet: Fleet,
    worker: Worker,
    spec: AgentSpec,
    tasks: Sequence[TaskLine],
    ctrl_c: _CtrlC,
    live: bool,
) -> int:
    out = sys.stdout
    known = {row.task_id for row in fleet.store.tasks()}
    ids: list[str] = []
    ctrl_c.deferred = True
    with worker:  # a start that does not come within 60 s raises TimeoutError
        ctrl_c.check()
        for task in tasks:
            handle = fleet.submit(
                spec,
                task.turns,
                task_id=task.task_id,
                conversation_id=task.conversation,
                workspace=task.workspace,
                priority=task.priority,
            )
            if handle.task_id in known:
                out.write(f"task {handle.task_id}: submitted before; following that task\n")
            ids.append(handle.task_id)
        out.write(
            f"{len(ids)} task(s) in the fleet; worker {worker.worker_id} runs them here "
            f"(concurrency {worker.concurrency}); Ctrl-C stops it\n"
        )
        out.flush()

        def gone() -> str:
            return "" if worker.running else repr(worker.error)

        view = _Live(out) if live else _Lines(out)
        try:
            ended = _watch(fleet, ids, view, gone)
        finally:
            view.close()
    bad = [t for t in ended if t.status != "done"]
    lines = [_describe(t) for t in bad] if live else [_counts(ended)]  # live: shown already
    lines.append("answers: antigravity fleet results")
    out.write("".join(f"{line}\n" for line in lines))
    return 1 if bad else 0


# -- fleet worker ----------------------------------------------------------------------------


def _worker(args: argparse.Namespace) -> int:
    from ._output import warnings_to

    with _open(args, must_exist=False) as fleet:
        worker = fleet.worker(args.concurrency, worker_id=args.worker_id)
        name = worker.worker_id
        try:  # a Ctrl-C as soon as this line is out is caught too
            print(
                f"worker {name}: serving {_shown(fleet.db_url)} with concurrency "
                f"{worker.concurrency}; Ctrl-C or SIGTERM stops it",
                file=sys.stderr,
                flush=True,
            )
            with warnings_to(sys.stderr), _quiet_dbos():
                code = asyncio.run(_serve(fleet, worker))
        except KeyboardInterrupt:  # before the loop took SIGINT over
            code = 130
    note = f"worker {name} stopped; what it was running resumes on a worker --worker-id {name}"
    print(f"interrupted (Ctrl-C): {note}" if code == 130 else note, file=sys.stderr)
    return code


async def _serve(fleet: Fleet, worker: Worker) -> int:
    """`worker.serve()` until SIGINT (130) or SIGTERM (0); meanwhile a line per change of
    a task this worker runs."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    came: list[int] = []

    def on_signal(signum: int) -> None:
        came.append(signum)
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)

    def report() -> None:
        view, old = _Lines(sys.stdout), {t.task_id for t in fleet.tasks() if t.finished}
        while not stop.is_set():
            try:
                mine = [t for t in fleet.tasks() if t.worker == worker.worker_id]
                mine = [t for t in mine if t.task_id not in old]
                open_ = {t.task_id for t in mine if not t.finished}
                view.update(
                    mine, [a for a in fleet.approvals() if a.task_id in open_], fleet.state()
                )
            except Exception as exc:  # a database hiccup: the worker goes on, and so do we
                print(f"warning: cannot read the fleet: {_first_line(exc)}", file=sys.stderr)
            time.sleep(_POLL)

    def ready() -> None:
        print(f"worker {worker.worker_id}: ready", file=sys.stderr, flush=True)

    reporter = asyncio.create_task(asyncio.to_thread(report))
    try:
        await worker.serve(stop, on_ready=ready)
    finally:
        stop.set()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        with contextlib.suppress(Exception):
            await reporter
    return 130 if came[:1] == [signal.SIGINT] else 0


# -- reading and governing the fleet ---------------------------------------------------------


def _status(args: argparse.Namespace) -> int:
    with _open(args) as fleet:
        tasks, state, url = fleet.tasks(), fleet.state(), _shown(fleet.db_url)
    out = sys.stdout
    if args.json:
        data = {
            "fleet": dataclasses.asdict(state),
            "tasks": [t.model_dump(mode="json") for t in tasks],
        }
        out.write(json.dumps(data) + "\n")
        return 0

    def spent(used: int, limit: int | None) -> str:
        return f"{used} of {limit}" if limit is not None else f"{used} (no limit)"

    lines = [f"fleet {url}: {'STOPPED (antigravity fleet resume)' if state.stopped else 'on'}"]
    lines.append(
        f"tool calls: {spent(state.tool_calls, state.max_tool_calls)}; "
        f"tokens: {spent(state.tokens, state.max_tokens)}"
    )
    if state.turn_limit is not None:
        lines.append(f"turn rate: at most {state.turn_limit} per {state.turn_period:g} s")
    if state.concurrency is not None:
        lines.append(f"concurrency: at most {state.concurrency} tasks across workers")
    lines += [state.budget_spent] if state.budget_spent else []
    out.write(
        "".join(f"{line}\n" for line in lines) + ("\n" if tasks else "no task in this fleet\n")
    )
    if tasks:
        header = ["TASK", "STATUS", "WORKER", "TURNS", "APPROVALS"]
        rows = [
            [
                t.task_id,
                t.status,
                t.worker or "-",
                f"{t.turns_done}/{t.turns_total}",
                ", ".join(t.approvals) or "-",
            ]
            for t in tasks
        ]
        _table(out, header, rows)
        out.write("".join(f"{_describe(t)}\n" for t in tasks if t.error) + _counts(tasks) + "\n")
    return 0


def _budget_answer(fleet: Fleet, task_id: str) -> str:
    """The last answer of a task that ended on the fleet's budget ("" if none)."""
    try:
        handle: Any = fleet.client.retrieve_workflow(task_id)
        if handle.get_status().status != "SUCCESS":
            return ""
        responses = json.loads(handle.get_result())["responses"]
    except Exception:  # no recorded output (yet): no answer to show
        return ""
    return str(responses[-1].get("text", "")) if responses else ""


def _results(args: argparse.Namespace) -> int:
    with _open(args) as fleet:
        found = [
            (
                row,
                _budget_answer(fleet, row.task_id) if row.status == "budget" else row.answer or "",
            )
            for row in fleet.store.tasks()
            if row.status in _FINISHED
        ]
    if not found:
        print("no finished task yet (antigravity fleet status)", file=sys.stderr)
    for row, text in found:
        if args.json:
            entry = {"task_id": row.task_id, "status": row.status, "text": text, "error": row.error}
            sys.stdout.write(json.dumps(entry, ensure_ascii=False) + "\n")
        else:
            error = f"error: {row.error}\n" if row.error else ""
            body = f"{text.strip()}\n" if text.strip() else ""
            sys.stdout.write(f"== task {row.task_id}: {row.status}\n{error}{body}\n")
    return 0


def _approvals(args: argparse.Namespace) -> int:
    with _open(args) as fleet:
        pending = fleet.approvals()
    if args.json:
        sys.stdout.write("".join(json.dumps(dataclasses.asdict(a)) + "\n" for a in pending))
    elif not pending:
        print("no approval is waiting")
    else:
        rows = [
            [a.id, a.task_id, a.tool, _short(a.args, 48), a.rule, _expires_in(a)] for a in pending
        ]
        _table(sys.stdout, ["ID", "TASK", "TOOL", "ARGS", "RULE", "EXPIRES IN"], rows)
        print(_ANSWER)
    return 0


def _answer(args: argparse.Namespace) -> int:
    from ..errors import ConfigurationError

    approve = args.fleet_command == "approve"
    with _open(args) as fleet:
        if fleet.store.key_mismatch:  # an answer this process signs would not count
            raise _Fail(fleet.store.key_mismatch)
        try:
            answered = (fleet.approve if approve else fleet.deny)(args.id, by=args.by or "")
        except KeyError:
            message = f"no approval {args.id!r} in this fleet (see: antigravity fleet approvals)"
            raise _Fail(message, 1) from None
        except ConfigurationError as exc:  # answered, or expired, already
            raise _Fail(str(exc), 1) from None
    verb = "may" if approve else "may not"
    print(f"{answered.status} {answered.id}: task {answered.task_id} {verb} call {answered.tool}")
    return 0


def _audit(args: argparse.Namespace) -> int:
    filters = {"task_id": args.task, "tool": args.tool, "verdict": args.verdict, "rule": args.rule}
    with _open(args) as fleet, contextlib.ExitStack() as stack:
        out: TextIO = sys.stdout
        if args.output:
            try:
                out = stack.enter_context(open(args.output, "w", encoding="utf-8"))
            except OSError as exc:
                raise _Fail(f"cannot write {args.output}: {exc.strerror or exc}") from None
        count = 0
        for line in fleet.audit_lines(**filters, since=args.since, until=args.until):
            out.write(line + "\n")  # as stored: `antigravity audit verify` checks it
            count += 1
    if args.output:
        print(f"{count} audit line(s) written to {args.output}", file=sys.stderr)
    return 0


def _switch(args: argparse.Namespace) -> int:
    with _open(args) as fleet:
        if args.fleet_command == "stop":
            fleet.stop()
            print(
                "the fleet is stopped: running agents deny every further call and end their "
                "turn; no task starts until 'antigravity fleet resume'"
            )
        else:
            fleet.resume()
            print("the fleet is on again")
    return 0


# -- the parser ------------------------------------------------------------------------------


def _given(value: str) -> str | None:
    return value or None


def _positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value!r}")
    return int(value)


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {value!r}")
    return seconds


def _iso_time(value: str) -> str:
    """An ISO-8601 time as the audit lines write it (UTC, `...Z`); no zone means UTC."""
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        message = f"expected an ISO-8601 time (2025-06-01 or 2025-06-01T12:00:00Z), got {value!r}"
        raise argparse.ArgumentTypeError(message) from None
    when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def add_fleet(subparsers: Subparsers) -> None:
    """`antigravity fleet ...`: governed agents as durable tasks (the `fleet` extra)."""
    parser = subparsers.add_parser(
        "fleet",
        help=f"run governed agents as durable tasks on a fleet database ({INSTALL})",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="fleet_command", required=True, metavar="COMMAND")
    db_help = (
        f"sqlite:///FILE or postgresql://... (default ${DB_ENV}, else fleet/fleet.sqlite in the "
        "SDK's state directory, $XDG_STATE_HOME/antigravity-sdk)"
    )

    def command(name: str, run: Callable[[argparse.Namespace], int], about: str) -> Any:
        sub = commands.add_parser(name, help=about, description=textwrap.fill(about, 88))
        sub.add_argument("--db", metavar="URL", type=_given, help=db_help)
        sub.set_defaults(run=_command(run))
        return sub

    def serving(sub: Any) -> None:
        help = "at most N tasks at once here (default 1)"
        sub.add_argument("--concurrency", type=_positive, default=1, metavar="N", help=help)
        help = "this worker's name (default the host's); restarted under it, it resumes its tasks"
        sub.add_argument("--worker-id", type=_given, metavar="ID", help=help)

    about = "run a JSON-lines file's tasks here, showing their progress (exit 0 all done, 1 any "
    about += "failed or out of budget, 130 Ctrl-C: the rest stay queued for 'fleet worker')"
    run = command("run", _run, about)
    help = 'a task per line: {"prompt": "..." or "turns": [...], "workspace": DIR}, and '
    help += 'optionally "id", "conversation", "priority"'
    run.add_argument("tasks", metavar="TASKS.jsonl", help=help)
    run.add_argument("--policies", metavar="FILE", required=True, help="a TOML policy file")
    run.add_argument("--base-url", type=_given, help="an OpenAI-compatible /v1 endpoint")
    run.add_argument("--model", type=_given, help="the model (Gemini, or served at --base-url)")
    serving(run)
    help = "the fleet's tool-call budget, across tasks and workers"
    run.add_argument("--max-tool-calls", type=_positive, metavar="N", help=help)
    run.add_argument("--max-tokens", type=_positive, metavar="N", help="its token budget")
    help = "at most N turns start in any minute, across workers"
    run.add_argument("--turns-per-minute", type=_positive, metavar="N", help=help)
    help = (
        "seconds an approval waits before it expires to deny (default 1800; a rule's timeout wins)"
    )
    run.add_argument("--approval-timeout", type=_seconds, default=1800.0, metavar="S", help=help)
    run.add_argument("--no-containment", action="store_true", help="run the harnesses uncontained")
    serving(
        command("worker", _worker, "run the fleet's tasks until SIGINT (exit 130) or SIGTERM (0)")
    )
    status = command("status", _status, "the tasks, and the fleet's switch and budget")
    status.add_argument("--json", action="store_true", help="one JSON object")
    results = command("results", _results, "each finished task's answer")
    help = "one JSON object per line: task_id, status, text, error"
    results.add_argument("--json", action="store_true", help=help)
    approvals = command("approvals", _approvals, "the approvals waiting for an answer")
    approvals.add_argument("--json", action="store_true", help="one JSON object per line")
    for name, verb in (("approve", "let"), ("deny", "refuse")):
        about = f"{verb} the call an approval holds (exit 1: unknown, answered or expired)"
        answer = command(name, _answer, about)
        answer.add_argument("id", metavar="ID", help="the approval's id (fleet approvals)")
        answer.add_argument("--by", metavar="NAME", help="who answers (default user@host)")
    about = "the fleet's audit lines, as JSON lines (antigravity audit summarize reads them)"
    audit = command("audit", _audit, about)
    audit.add_argument("--task", metavar="T", help="task T's only")
    audit.add_argument("--tool", metavar="X", help="tool X's only")
    audit.add_argument("--verdict", choices=("allow", "deny"), help="this verdict only")
    audit.add_argument("--rule", metavar="R", help="decided by rule R only")
    audit.add_argument("--since", type=_iso_time, metavar="ISO", help="from this time on")
    audit.add_argument("--until", type=_iso_time, metavar="ISO", help="before this time")
    audit.add_argument("-o", "--output", metavar="FILE", help="write to FILE, not stdout")
    command(
        "stop", _switch, "stop every agent: calls denied, turns ended, none starts until resume"
    )
    command("resume", _switch, "let the fleet run again")
