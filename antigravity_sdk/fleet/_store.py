"""The fleet's own tables, beside DBOS's in the same database (SQLite file or PostgreSQL).

DBOS keeps the queue and what each workflow and step returned; these tables keep what
governs the fleet as one: its switch and budget (`antigravity_fleet`), the tasks' progress
(`antigravity_tasks`) and which task holds each conversation (`antigravity_conversations`),
approvals waiting for an answer (`antigravity_approvals`), every
decision of every worker (`antigravity_audit`) and the turns started, for the rate limit
and the retry rule (`antigravity_turns`). SQLAlchemy Core, so one code path serves both
databases; every read-modify-write is one statement or one locked transaction.

An answer to an approval is signed (HMAC-SHA256 under the fleet's secret, which no agent
holds): a row a contained process wrote, even one that got into the table, is no answer.
On PostgreSQL the tables are made under an advisory lock, so that workers starting
together on a new database do not race to create them.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import secrets
import sqlite3
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import sqlalchemy as sa

from ..errors import AntigravityError
from ..state import fleet_secret, state_dir

__all__ = [
    "Approval",
    "FleetState",
    "Store",
    "TaskRow",
    "UnsignedAnswerError",
    "default_db_url",
    "sqlalchemy_url",
]

logger = logging.getLogger("antigravity_sdk.fleet")

_META = sa.MetaData()

FLEET = sa.Table(
    "antigravity_fleet",
    _META,
    sa.Column("name", sa.String(32), primary_key=True),
    sa.Column("stopped", sa.Integer, nullable=False, default=0),
    sa.Column("tool_calls", sa.BigInteger, nullable=False, default=0),
    sa.Column("tokens", sa.BigInteger, nullable=False, default=0),
    sa.Column("max_tool_calls", sa.BigInteger),
    sa.Column("max_tokens", sa.BigInteger),
    sa.Column("turn_limit", sa.Integer),
    sa.Column("turn_period", sa.Float),
    sa.Column("concurrency", sa.Integer),
    sa.Column("lock", sa.BigInteger, nullable=False, default=0),
    sa.Column("key_id", sa.String(32)),
)

TASKS = sa.Table(
    "antigravity_tasks",
    _META,
    sa.Column("task_id", sa.String(128), primary_key=True),
    sa.Column("conversation_id", sa.String(128), nullable=False),
    sa.Column("workspace", sa.Text),
    sa.Column("spec_hash", sa.String(64), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("worker", sa.String(128)),
    sa.Column("turns_total", sa.Integer, nullable=False),
    sa.Column("turns_done", sa.Integer, nullable=False, default=0),
    sa.Column("submitted_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Column("error", sa.Text),
    sa.Column("answer", sa.Text),
)

APPROVALS = sa.Table(
    "antigravity_approvals",
    _META,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("task_id", sa.String(128), nullable=False, index=True),
    sa.Column("worker", sa.String(128)),
    sa.Column("tool", sa.String(256), nullable=False),
    sa.Column("args", sa.Text, nullable=False),
    sa.Column("call_key", sa.String(64), nullable=False),
    sa.Column("rule", sa.Text, nullable=False),
    sa.Column("reason", sa.Text, nullable=False, default=""),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
    sa.Column("answered_at", sa.Float),
    sa.Column("answered_by", sa.Text),
    sa.Column("used_at", sa.Float),
    sa.Column("mac", sa.String(64)),
)

AUDIT = sa.Table(
    "antigravity_audit",
    _META,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("task_id", sa.String(128), nullable=False, index=True),
    sa.Column("worker", sa.String(128), nullable=False),
    sa.Column("spec_hash", sa.String(64), nullable=False),
    sa.Column("policy", sa.String(64), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("time", sa.String(40), nullable=False),
    sa.Column("tool", sa.String(256)),
    sa.Column("verdict", sa.String(16)),
    sa.Column("rule", sa.Text),
    sa.Column("line", sa.Text, nullable=False),
)

TURNS = sa.Table(
    "antigravity_turns",
    _META,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("task_id", sa.String(128), nullable=False, index=True),
    sa.Column("turn", sa.Integer, nullable=False),
    sa.Column("worker", sa.String(128), nullable=False),
    sa.Column("started_at", sa.Float, nullable=False, index=True),
)

CONVERSATIONS = sa.Table(
    "antigravity_conversations",
    _META,
    sa.Column("conversation_id", sa.String(200), primary_key=True),
    sa.Column("task_id", sa.String(128), nullable=False),
    sa.Column("since", sa.Float, nullable=False),
)

_ROW: Final = "fleet"
PENDING: Final = "pending"
APPROVED: Final = "approved"
DENIED: Final = "denied"
EXPIRED: Final = "expired"
USED: Final = "used"
FORGED: Final = "forged"
"""An answer whose signature did not verify: no answer (its call was denied)."""
_SCHEMA_LOCK: Final = 0x616E_7469_6772_6176  # "antigrav": the fleet's schema, PostgreSQL
_SCHEMA_LOCK_WAIT: Final = 300.0
_MAC_DOMAIN: Final = "antigravity-fleet approval answer v1"


class UnsignedAnswerError(AntigravityError):
    """An approval's answer is not signed by the fleet's key: written by someone without
    it (a process that reached the database), or signed with another fleet secret."""


def key_id(key: bytes) -> str:
    """What names a fleet secret without giving it away (stored in the fleet's row, so a
    process with another secret is told so)."""
    return hmac.new(key, b"antigravity-fleet key id", hashlib.sha256).hexdigest()[:16]


def answer_mac(
    key: bytes,
    *,
    approval_id: str,
    task_id: str,
    tool: str,
    args: str,
    verdict: str,
    answered_by: str,
    answered_at: float,
) -> str:
    """HMAC-SHA256, under the fleet's secret, of an answer: which approval of which task,
    the call (tool and canonical arguments), the verdict, who answered and when."""
    message = json.dumps(
        [_MAC_DOMAIN, approval_id, task_id, tool, args, verdict, answered_by, answered_at],
        separators=(",", ":"),
    )
    return hmac.new(key, message.encode(), hashlib.sha256).hexdigest()


def sqlalchemy_url(db_url: str) -> str:
    """DBOS's URL as SQLAlchemy's: PostgreSQL through psycopg 3 (DBOS's own driver)."""
    for scheme in ("postgresql://", "postgres://"):
        if db_url.startswith(scheme):
            return "postgresql+psycopg://" + db_url[len(scheme) :]
    return db_url


def sqlite_path(db_url: str) -> Path | None:
    """The file of a `sqlite:///` URL, None for another database. Public so that a
    command given a fleet's URL can check that its file exists before opening it (opening
    a SQLite URL creates an empty fleet)."""
    if not db_url.startswith("sqlite:///"):
        return None
    return Path(db_url[len("sqlite:///") :])


@dataclass(frozen=True, slots=True)
class FleetState:
    """The fleet's switch, counters and limits (one row, shared by every worker)."""

    stopped: bool
    tool_calls: int
    tokens: int
    max_tool_calls: int | None
    max_tokens: int | None
    turn_limit: int | None
    turn_period: float | None
    concurrency: int | None

    @property
    def budget_spent(self) -> str:
        """Which fleet budget is spent ("" if none)."""
        if self.max_tokens is not None and self.tokens >= self.max_tokens:
            return f"the fleet's token budget ({self.max_tokens}) is spent"
        if self.max_tool_calls is not None and self.tool_calls >= self.max_tool_calls:
            return f"the fleet's tool-call budget ({self.max_tool_calls}) is spent"
        return ""


@dataclass(frozen=True, slots=True)
class TaskRow:
    """A task's progress as `fleet status` shows it."""

    task_id: str
    conversation_id: str
    workspace: str | None
    spec_hash: str
    status: str
    worker: str | None
    turns_total: int
    turns_done: int
    submitted_at: float
    updated_at: float
    error: str | None
    answer: str | None


@dataclass(frozen=True, slots=True)
class Approval:
    """A call an ask_user rule holds until someone answers (`Fleet.approve`/`deny`)."""

    id: str
    task_id: str
    worker: str | None
    tool: str
    args: dict[str, Any]
    rule: str
    reason: str
    status: str
    created_at: float
    expires_at: float
    answered_by: str | None

    @property
    def effective_status(self) -> str:
        """`expired` for a pending approval past its deadline, else the stored status."""
        if self.status == PENDING and time.time() >= self.expires_at:
            return EXPIRED
        return self.status


def _approval(row: Any) -> Approval:
    return Approval(
        id=row.id,
        task_id=row.task_id,
        worker=row.worker,
        tool=row.tool,
        args=json.loads(row.args),
        rule=row.rule,
        reason=row.reason,
        status=row.status,
        created_at=row.created_at,
        expires_at=row.expires_at,
        answered_by=row.answered_by,
    )


class Store:
    """The fleet tables over one SQLAlchemy engine (created on first use). `key` is the
    fleet's secret, which signs and checks answers to approvals (None:
    `state.fleet_secret()`). `key_mismatch` says, when the fleet was made with another
    secret, what is wrong ("" when the secrets agree)."""

    def __init__(self, db_url: str, *, key: bytes | None = None) -> None:
        self.db_url = db_url
        self.key = key if key is not None else fleet_secret()
        self.key_id = key_id(self.key)
        self.key_mismatch = ""
        self._used: set[str] = set()  # grants this process has used: never again
        path = sqlite_path(db_url)
        if path is not None:
            _private_parent(path)
            self.engine = sa.create_engine(sqlalchemy_url(db_url), connect_args={"timeout": 60})
            sa.event.listen(self.engine, "connect", _sqlite_pragmas)
        else:
            self.engine = sa.create_engine(sqlalchemy_url(db_url), pool_pre_ping=True)
        with self.schema_lock():
            _META.create_all(self.engine)
            with self.engine.begin() as conn:
                row = conn.execute(
                    sa.select(FLEET.c.name, FLEET.c.key_id).where(FLEET.c.name == _ROW)
                ).first()
                if row is None:
                    conn.execute(
                        FLEET.insert().values(
                            name=_ROW, stopped=0, tool_calls=0, tokens=0, lock=0, key_id=self.key_id
                        )
                    )
                elif row.key_id is None:
                    conn.execute(
                        FLEET.update().where(FLEET.c.name == _ROW).values(key_id=self.key_id)
                    )
                elif row.key_id != self.key_id:
                    self.key_mismatch = (
                        f"this fleet's approvals are signed with another secret (key id "
                        f"{row.key_id}; this process has {self.key_id}): give every machine "
                        "and every process that answers approvals the same "
                        "ANTIGRAVITY_FLEET_SECRET"
                    )

    @contextlib.contextmanager
    def schema_lock(self) -> Iterator[None]:
        """Held while the schema is made: on PostgreSQL a session advisory lock on a
        connection of its own, so that processes starting together on a new database
        make it one after the other (nothing on SQLite, whose writes are serialised).

        Taken by polling `pg_try_advisory_lock`, never by waiting in `pg_advisory_lock`:
        DBOS builds indexes `CONCURRENTLY`, which waits for every open transaction, and a
        session waiting for the lock would be one (the two would wait for each other)."""
        if self.engine.dialect.name != "postgresql":
            yield
            return
        deadline = time.monotonic() + _SCHEMA_LOCK_WAIT
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            take = sa.text("SELECT pg_try_advisory_lock(:key)")
            while not conn.execute(take, {"key": _SCHEMA_LOCK}).scalar():
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"another process has been making the fleet's tables for "
                        f"{_SCHEMA_LOCK_WAIT:.0f} s (it holds advisory lock {_SCHEMA_LOCK})"
                    )
                time.sleep(0.05 + secrets.randbelow(100) / 1000)
            try:
                yield
            finally:
                conn.execute(sa.text("SELECT pg_advisory_unlock(:key)"), {"key": _SCHEMA_LOCK})

    @staticmethod
    def _lock(conn: sa.Connection) -> None:
        """Write first in a transaction that reads, then writes: it takes SQLite's write
        lock (a reader that later writes could fail on a busy database) and locks the
        fleet row in PostgreSQL, so such transactions run one at a time."""
        conn.execute(FLEET.update().where(FLEET.c.name == _ROW).values(lock=FLEET.c.lock + 1))

    def dispose(self) -> None:
        self.engine.dispose()

    # -- the fleet row -------------------------------------------------------------------

    def state(self) -> FleetState:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(FLEET).where(FLEET.c.name == _ROW)).one()
        return _state(row)

    def configure(
        self,
        *,
        max_tool_calls: int | None = None,
        max_tokens: int | None = None,
        turn_limit: int | None = None,
        turn_period: float | None = None,
        concurrency: int | None = None,
    ) -> None:
        """Set the fleet's budget, turn rate and concurrency (None: no limit)."""
        with self.engine.begin() as conn:
            conn.execute(
                FLEET.update()
                .where(FLEET.c.name == _ROW)
                .values(
                    max_tool_calls=max_tool_calls,
                    max_tokens=max_tokens,
                    turn_limit=turn_limit,
                    turn_period=turn_period,
                    concurrency=concurrency,
                )
            )

    def set_stopped(self, stopped: bool) -> None:
        with self.engine.begin() as conn:
            conn.execute(FLEET.update().where(FLEET.c.name == _ROW).values(stopped=int(stopped)))

    def charge_tool_call(self) -> FleetState:
        """Count one tool call against the fleet's budget (one atomic statement) and
        return the state after it: the caller denies if the fleet is stopped or over."""
        with self.engine.begin() as conn:
            row = conn.execute(
                FLEET.update()
                .where(FLEET.c.name == _ROW)
                .values(tool_calls=FLEET.c.tool_calls + 1)
                .returning(*FLEET.c)
            ).one()
        return _state(row)

    def start_turn(self, task_id: str, turn: int, worker: str) -> tuple[int, float]:
        """Record that `turn` of `task_id` starts, under the fleet's turn rate.

        Returns (how many times this turn had started before, 0.0) when it may start, or
        (-1, seconds to wait) when the rate limit is reached. The fleet row is updated
        first, which locks it (PostgreSQL) or takes the write lock (SQLite): two workers
        never both take the last slot."""
        now = time.time()
        with self.engine.begin() as conn:
            row = conn.execute(
                FLEET.update()
                .where(FLEET.c.name == _ROW)
                .values(lock=FLEET.c.lock + 1)
                .returning(FLEET.c.turn_limit, FLEET.c.turn_period)
            ).one()
            if row.turn_limit is not None and row.turn_period:
                since = now - row.turn_period
                recent = conn.execute(
                    sa.select(TURNS.c.started_at)
                    .where(TURNS.c.started_at > since)
                    .order_by(TURNS.c.started_at)
                ).all()
                if len(recent) >= row.turn_limit:
                    oldest = recent[len(recent) - row.turn_limit].started_at
                    return -1, max(0.05, oldest + row.turn_period - now)
            before = conn.execute(
                sa.select(sa.func.count())
                .select_from(TURNS)
                .where(TURNS.c.task_id == task_id, TURNS.c.turn == turn)
            ).scalar_one()
            conn.execute(
                TURNS.insert().values(task_id=task_id, turn=turn, worker=worker, started_at=now)
            )
            conn.execute(
                TASKS.update()
                .where(TASKS.c.task_id == task_id)
                .values(status="running", worker=worker, updated_at=now)
            )
        return int(before), 0.0

    def finish_turn(self, task_id: str, turns_done: int, tokens: int) -> None:
        """A turn ended: the task's progress and the fleet's token count, one commit."""
        with self.engine.begin() as conn:
            conn.execute(
                TASKS.update()
                .where(TASKS.c.task_id == task_id)
                .values(turns_done=turns_done, updated_at=time.time())
            )
            if tokens > 0:
                conn.execute(
                    FLEET.update()
                    .where(FLEET.c.name == _ROW)
                    .values(tokens=FLEET.c.tokens + tokens)
                )

    def forget_turn_start(self, task_id: str, turn: int) -> None:
        """Take back the last start of `turn`: `fleet stop` cut it, which is no crash, so
        it must not count towards the retry rule (a turn stopped twice would fail)."""
        with self.engine.begin() as conn:
            self._lock(conn)
            last = conn.execute(
                sa.select(sa.func.max(TURNS.c.id)).where(
                    TURNS.c.task_id == task_id, TURNS.c.turn == turn
                )
            ).scalar_one()
            if last is not None:
                conn.execute(TURNS.delete().where(TURNS.c.id == last))

    def claim_conversation(self, conversation_id: str, task_id: str) -> str | None:
        """Hold `conversation_id` for `task_id`: None once held (again, for the same task),
        else the task that holds it. A task holds its conversation from its start until it
        ends, across its worker's crash and recovery."""
        with self.engine.begin() as conn:
            self._lock(conn)
            holder = conn.execute(
                sa.select(CONVERSATIONS.c.task_id).where(
                    CONVERSATIONS.c.conversation_id == conversation_id
                )
            ).scalar_one_or_none()
            if holder is None:
                conn.execute(
                    CONVERSATIONS.insert().values(
                        conversation_id=conversation_id, task_id=task_id, since=time.time()
                    )
                )
                return None
        return None if holder == task_id else str(holder)

    def release_conversation(self, conversation_id: str, task_id: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                CONVERSATIONS.delete().where(
                    CONVERSATIONS.c.conversation_id == conversation_id,
                    CONVERSATIONS.c.task_id == task_id,
                )
            )

    # -- tasks ---------------------------------------------------------------------------

    def add_task(
        self,
        *,
        task_id: str,
        conversation_id: str,
        workspace: str | None,
        spec_hash: str,
        turns_total: int,
    ) -> bool:
        """Record a submitted task; False if the id is taken (the submission is idempotent)."""
        now = time.time()
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    TASKS.insert().values(
                        task_id=task_id,
                        conversation_id=conversation_id,
                        workspace=workspace,
                        spec_hash=spec_hash,
                        status="queued",
                        turns_total=turns_total,
                        turns_done=0,
                        submitted_at=now,
                        updated_at=now,
                    )
                )
        except sa.exc.IntegrityError:
            return False
        return True

    def update_task(self, task_id: str, **values: Any) -> None:
        values["updated_at"] = time.time()
        with self.engine.begin() as conn:
            conn.execute(TASKS.update().where(TASKS.c.task_id == task_id).values(**values))

    def task(self, task_id: str) -> TaskRow | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(TASKS).where(TASKS.c.task_id == task_id)).first()
        return None if row is None else TaskRow(**row._mapping)

    def tasks(self) -> list[TaskRow]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(TASKS).order_by(TASKS.c.submitted_at, TASKS.c.task_id))
            return [TaskRow(**row._mapping) for row in rows]

    # -- approvals -----------------------------------------------------------------------

    def open_approval(
        self,
        *,
        task_id: str,
        worker: str,
        tool: str,
        args_json: str,
        call_key: str,
        rule: str,
        reason: str,
        expires_in: float,
    ) -> Approval:
        """The approval this task's call waits on: an earlier one still pending or
        granted and unused for the same call (a turn run again after a restart finds its
        approval), else a new pending one."""
        now = time.time()
        with self.engine.begin() as conn:
            self._lock(conn)
            row = conn.execute(
                sa.select(APPROVALS)
                .where(
                    APPROVALS.c.task_id == task_id,
                    APPROVALS.c.call_key == call_key,
                    APPROVALS.c.status.in_((PENDING, APPROVED)),
                    APPROVALS.c.expires_at > now,
                )
                .order_by(APPROVALS.c.created_at)
            ).first()
            if row is not None:
                conn.execute(
                    APPROVALS.update().where(APPROVALS.c.id == row.id).values(worker=worker)
                )
                return _approval(row)
            values = {
                "id": secrets.token_hex(4),
                "task_id": task_id,
                "worker": worker,
                "tool": tool,
                "args": args_json,
                "call_key": call_key,
                "rule": rule,
                "reason": reason,
                "status": PENDING,
                "created_at": now,
                "expires_at": now + expires_in,
            }
            conn.execute(APPROVALS.insert().values(**values))
            row = conn.execute(sa.select(APPROVALS).where(APPROVALS.c.id == values["id"])).one()
        return _approval(row)

    def approval(self, approval_id: str) -> Approval | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(APPROVALS).where(APPROVALS.c.id == approval_id)).first()
        return None if row is None else _approval(row)

    def approvals(self, *, pending_only: bool = True) -> list[Approval]:
        query = sa.select(APPROVALS).order_by(APPROVALS.c.created_at)
        if pending_only:
            query = query.where(APPROVALS.c.status == PENDING)
        with self.engine.connect() as conn:
            found = [_approval(row) for row in conn.execute(query)]
        if pending_only:
            return [a for a in found if a.effective_status == PENDING]
        return found

    def answer(self, approval_id: str, *, approve: bool, by: str) -> Approval | None:
        """Answer a pending approval that has not expired, signed with the fleet's key;
        None if there is none."""
        now = time.time()
        verdict = APPROVED if approve else DENIED
        with self.engine.begin() as conn:
            self._lock(conn)
            row = conn.execute(
                sa.select(APPROVALS).where(
                    APPROVALS.c.id == approval_id,
                    APPROVALS.c.status == PENDING,
                    APPROVALS.c.expires_at > now,
                )
            ).first()
            if row is None:
                return None
            mac = self._mac(row, verdict, by, now)
            done = conn.execute(
                APPROVALS.update()
                .where(APPROVALS.c.id == approval_id, APPROVALS.c.status == PENDING)
                .values(status=verdict, answered_at=now, answered_by=by, mac=mac)
            )
            if done.rowcount != 1:
                return None
        return self.approval(approval_id)

    def signed(self, row: Any) -> bool:
        """Whether an answered row's answer carries the fleet's signature."""
        if not row.mac or row.answered_at is None or row.answered_by is None:
            return False
        expected = self._mac(row, row.status, row.answered_by, row.answered_at)
        return hmac.compare_digest(expected, row.mac)

    def _mac(self, row: Any, verdict: str, by: str, at: Any) -> str:
        """The signature of an answer (`verdict` by `by` at `at`) to the approval `row`."""
        return answer_mac(
            self.key,
            approval_id=row.id,
            task_id=row.task_id,
            tool=row.tool,
            args=row.args,
            verdict=verdict,
            answered_by=by,
            answered_at=at,
        )

    def consume(self, approval_id: str) -> bool | None:
        """Settle a waited-on approval: True once for a signed grant (marking it used),
        False for a signed denial or an expiry (recorded), None while it is pending and
        in time. An answer that is not signed by the fleet's key (or a grant this process
        used already) is no answer: the row is marked `forged`, a warning logged, and
        `UnsignedAnswerError` raised (the call is denied, saying so)."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(APPROVALS).where(APPROVALS.c.id == approval_id)).first()
        if row is not None and row.status == PENDING and row.expires_at > time.time():
            return None  # the usual poll: read only
        now = time.time()
        with self.engine.begin() as conn:
            self._lock(conn)
            row = conn.execute(sa.select(APPROVALS).where(APPROVALS.c.id == approval_id)).first()
            if row is None or row.status not in (PENDING, APPROVED, DENIED):
                return False  # unknown, used, expired or forged
            if row.status == PENDING:
                if row.expires_at > now:
                    return None
                conn.execute(
                    APPROVALS.update()
                    .where(APPROVALS.c.id == approval_id)
                    .values(status=EXPIRED, answered_at=now, answered_by="expired", mac=None)
                )
                return False
            replayed = row.status == APPROVED and row.id in self._used
            if not replayed and self.signed(row):
                if row.status == DENIED:
                    return False
                conn.execute(
                    APPROVALS.update()
                    .where(APPROVALS.c.id == approval_id)
                    .values(status=USED, used_at=now)
                )
                self._used.add(row.id)
                return True
            conn.execute(
                APPROVALS.update().where(APPROVALS.c.id == approval_id).values(status=FORGED)
            )
        what = "a grant used already" if replayed else "not signed by the fleet's key"
        logger.warning(
            "fleet: approval %s of task %s reads %s by %r, but the answer is %s: no answer, "
            "the call is denied",
            row.id,
            row.task_id,
            row.status,
            row.answered_by,
            what,
        )
        raise UnsignedAnswerError(
            f"approval {row.id}: its answer ({row.status} by {row.answered_by!r}) is {what}, "
            "so it is no answer; the call did not run"
        )

    # -- audit ---------------------------------------------------------------------------

    def add_audit(
        self, *, task_id: str, worker: str, spec_hash: str, line: Mapping[str, Any], text: str
    ) -> None:
        rule = line.get("rule")
        with self.engine.begin() as conn:
            conn.execute(
                AUDIT.insert().values(
                    task_id=task_id,
                    worker=worker,
                    spec_hash=spec_hash,
                    policy=str(line.get("policy", "")),
                    kind=str(line.get("kind", "")),
                    time=str(line.get("time", "")),
                    tool=line.get("tool"),
                    verdict=line.get("verdict"),
                    rule=None if rule is None else str(rule),
                    line=text,
                )
            )

    def audit(
        self,
        *,
        task_id: str | None = None,
        tool: str | None = None,
        verdict: str | None = None,
        rule: str | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> Iterator[str]:
        """Audit lines as stored (the text `audit verify` checks), oldest first, filtered
        (times compare as ISO-8601 text)."""
        query = sa.select(AUDIT).order_by(AUDIT.c.id)
        for column, value in (
            (AUDIT.c.task_id, task_id),
            (AUDIT.c.tool, tool),
            (AUDIT.c.verdict, verdict),
            (AUDIT.c.rule, rule),
        ):
            if value is not None:
                query = query.where(column == value)
        if since is not None:
            query = query.where(AUDIT.c.time >= since)
        if until is not None:
            query = query.where(AUDIT.c.time < until)
        with self.engine.connect() as conn:
            for row in conn.execute(query):
                yield row.line


def _state(row: Any) -> FleetState:
    return FleetState(
        stopped=bool(row.stopped),
        tool_calls=int(row.tool_calls),
        tokens=int(row.tokens),
        max_tool_calls=row.max_tool_calls,
        max_tokens=row.max_tokens,
        turn_limit=row.turn_limit,
        turn_period=row.turn_period,
        concurrency=row.concurrency,
    )


def _unixepoch(*args: Any) -> float | int | None:
    """SQLite's `unixepoch()`, for the forms DBOS uses: `unixepoch('subsec')` (float
    seconds) and `unixepoch()` / `unixepoch('now')`; None (SQL NULL) for any other."""
    if args == ("subsec",) or args == ("now", "subsec"):
        return time.time()
    if args in ((), ("now",)):
        return int(time.time())
    return None


def _add_unixepoch(dbapi_connection: Any, _record: Any) -> None:
    if isinstance(dbapi_connection, sqlite3.Connection):
        dbapi_connection.create_function("unixepoch", -1, _unixepoch)


if sys.version_info >= (3, 12) and sqlite3.sqlite_version_info < (3, 42, 0):
    # DBOS 3.4 stamps rows with `unixepoch('subsec')` on Python 3.12+, which SQLite has
    # only from 3.42 (before, it is NULL and every insert fails a NOT NULL constraint).
    # Python builds linked to an older SQLite (Debian 12 has 3.40) get the function
    # from here, on every SQLite connection SQLAlchemy opens: DBOS's and its client's.
    sa.event.listen(sa.engine.Engine, "connect", _add_unixepoch)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=60000")
    # WAL with NORMAL: a commit survives the process being killed (what recovery is
    # for); a power cut may lose the last ones (docs/fleet.md says so).
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def default_db_url() -> str:
    """The embedded default: `fleet/fleet.sqlite` in the SDK's state directory (per user,
    outside every workspace: `$XDG_STATE_HOME/antigravity-sdk`, see `state.state_dir`).
    Public: what `Fleet(None)` opens, for a command to name, check or reopen."""
    return f"sqlite:///{state_dir() / 'fleet' / 'fleet.sqlite'}"


def _private_parent(path: Path) -> None:
    """Make the SQLite file's directory: 0700 (the file holds every task's prompts)."""
    with contextlib.suppress(FileExistsError):
        path.parent.mkdir(mode=0o700, parents=True)
