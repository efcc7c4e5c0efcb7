"""A fleet of governed agents: durable, across machines, on DBOS (extra `fleet`).

`Fleet(db_url)` queues tasks (an `AgentSpec` and a prompt) in a DBOS system database, a
SQLite file by default or PostgreSQL for several machines; `fleet.worker(concurrency=N)`
runs them. Each turn is a durable step; approvals wait in the database for an answer from
anywhere; every decision of every worker lands in one audit table. See docs/fleet.md.
"""

from __future__ import annotations

try:
    import dbos as _dbos  # noqa: F401
    import sqlalchemy as _sqlalchemy  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        f"antigravity_sdk.fleet needs the fleet extra: pip install 'antigravity-sdk[fleet]' ({exc})"
    ) from exc

from ._fleet import Fleet, TaskHandle, TaskResult, TaskStatus, Worker, check_id
from ._spec import AgentSpec
from ._store import Approval, FleetState, default_db_url, sqlite_path
from ._worker import QUEUE, STEP, WORKFLOW, FleetTaskError

__all__ = [
    "QUEUE",
    "STEP",
    "WORKFLOW",
    "AgentSpec",
    "Approval",
    "Fleet",
    "FleetState",
    "FleetTaskError",
    "TaskHandle",
    "TaskResult",
    "TaskStatus",
    "Worker",
    "check_id",
    "default_db_url",
    "sqlite_path",
]
