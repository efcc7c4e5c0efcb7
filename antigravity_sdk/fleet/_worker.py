"""What a worker runs: the task workflow, one durable step per turn, and the governance
the fleet adds to each agent (its switch, budget, approvals and audit table).

The workflow and step names are a persisted contract: DBOS finds a task's code by them
when it recovers the task, so renaming one strands every task in flight. They carry a
version (`.v1`) that changes only with a migration note in the CHANGELOG.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from dbos import DBOS

from ..audit import AuditLog
from ..conversations import check_conversation_id, default_save_dir
from ..errors import AntigravityError, ConversationNotFoundError, TurnCancelledError
from ..hooks import Hook
from ..policy import Policy
from ..types import ChatResponse, HookResult, ToolCall
from ._spec import AgentSpec
from ._store import Store, sqlite_path

if TYPE_CHECKING:
    from ..agent import Agent
    from ..harness.effects import HookDispatch, Request, ToolRun

__all__ = ["QUEUE", "STEP", "WORKFLOW", "FleetTaskError", "Runtime"]

logger = logging.getLogger("antigravity_sdk.fleet")

WORKFLOW: Final = "antigravity.fleet.task.v1"
"""The task workflow's name (a persisted contract, see the module docstring)."""
STEP: Final = "antigravity.fleet.turn.v1"
"""The turn step's name (a persisted contract)."""
QUEUE: Final = "antigravity-fleet"
APP: Final = "antigravity-fleet"
APP_VERSION: Final = "antigravity-fleet-1"
"""DBOS recovers only workflows of its own application version; every worker of this
contract shares this one, whatever SDK release runs it."""

_STOP_POLL: Final = 0.5
_APPROVAL_POLL: Final = 0.5
_MAX_STARTS: Final = 2
_CANCEL_WAIT: Final = 30.0


class FleetTaskError(AntigravityError):
    """A task the fleet gave up on: a turn cut off twice, or a spec that cannot build."""


@dataclass
class Runtime:
    """This process's worker: set while `Fleet.worker()` runs (DBOS is one per process)."""

    store: Store
    worker_id: str
    save_dir: Path | None
    concurrency: int
    approval_timeout: float
    governed: dict[str, Path] = field(default_factory=dict)
    slots: asyncio.Semaphore = field(init=False)
    live: dict[str, LiveAgent] = field(default_factory=dict)
    running: set[asyncio.Task[Any]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.slots = asyncio.Semaphore(self.concurrency)


_runtime: Runtime | None = None


def install(runtime: Runtime | None) -> None:
    global _runtime
    _runtime = runtime


async def cancel_running(runtime: Runtime) -> None:
    """Cut this worker's tasks off (their harnesses stop). DBOS records nothing for a
    cancelled workflow: they stay pending, and this worker recovers them when it starts
    again under the same id."""
    tasks = list(runtime.running)
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=_CANCEL_WAIT)
        # Their rows would say "running on" this worker for good: they wait for a worker.
        for row in await asyncio.to_thread(runtime.store.tasks):
            if row.worker == runtime.worker_id and row.status in ("running", "stopped"):
                await asyncio.to_thread(runtime.store.update_task, row.task_id, status="queued")


def _current() -> Runtime:
    if _runtime is None:
        raise FleetTaskError("no fleet worker runs in this process")
    return _runtime


# -- the workflow --------------------------------------------------------------------------


@DBOS.workflow(name=WORKFLOW)
async def task_workflow(
    task_id: str, spec_json: str, turns: list[str], conversation_id: str
) -> str:
    """Run a task's turns in order, each a durable step; the output is the responses as
    JSON. Recovery re-runs this function: finished turns return their recorded output,
    the turn that was cut off runs again (resumed from the saved conversation).

    The agent (a harness) is started by the first turn this execution runs and kept for
    the next ones; it stops when the task ends, fails, is cut off or the fleet stops."""
    runtime = _current()
    store = runtime.store
    this = asyncio.current_task()
    if this is not None:
        runtime.running.add(this)
        this.add_done_callback(runtime.running.discard)
    try:
        await _hold_conversation(runtime, task_id, conversation_id)
        try:
            output = await _run_task(runtime, task_id, spec_json, turns, conversation_id)
        except asyncio.CancelledError:
            raise  # the worker stops: the task stays pending and keeps its conversation
        except BaseException:
            await asyncio.to_thread(store.release_conversation, conversation_id, task_id)
            raise
        await asyncio.to_thread(store.release_conversation, conversation_id, task_id)
        return output
    finally:
        live = runtime.live.pop(task_id, None)
        if live is not None:
            await live.close()


async def _hold_conversation(runtime: Runtime, task_id: str, conversation_id: str) -> None:
    """Wait until no other task runs this conversation (a task pending on a dead worker
    keeps it until that worker recovers it)."""
    while True:
        holder = await asyncio.to_thread(runtime.store.claim_conversation, conversation_id, task_id)
        if holder is None:
            return
        await asyncio.sleep(_STOP_POLL)


async def _run_task(
    runtime: Runtime, task_id: str, spec_json: str, turns: list[str], conversation_id: str
) -> str:
    store = runtime.store
    responses: list[dict[str, Any]] = []
    index = 0
    while index < len(turns):
        state = await _wait_while_stopped(runtime, task_id)
        if state:
            await asyncio.to_thread(store.update_task, task_id, status="budget", error=state)
            return json.dumps({"responses": responses, "ended": "budget", "detail": state})
        outcome = json.loads(
            await turn_step(task_id, spec_json, conversation_id, index, turns[index])
        )
        if outcome.get("stopped"):
            continue  # the fleet was stopped mid-turn: wait for resume, run it again
        responses.append(outcome["response"])
        index += 1
    answer = responses[-1].get("text", "") if responses else ""
    live = runtime.live.pop(task_id, None)
    if live is not None:  # its audit session ends (its `end` line) before the task is done
        await live.close()
    await asyncio.to_thread(store.update_task, task_id, status="done", answer=answer)
    return json.dumps({"responses": responses, "ended": "done", "detail": ""})


async def _wait_while_stopped(runtime: Runtime, task_id: str) -> str:
    """Hold the task while the fleet is stopped; return why it may not go on ("" if it
    may): a fleet budget that is spent."""
    marked = False
    while True:
        state = await asyncio.to_thread(runtime.store.state)
        if not state.stopped:
            if marked:
                await asyncio.to_thread(runtime.store.update_task, task_id, status="queued")
            return state.budget_spent
        if not marked:
            await asyncio.to_thread(runtime.store.update_task, task_id, status="stopped")
            marked = True
        await asyncio.sleep(_STOP_POLL)


@dataclass
class LiveAgent:
    """A task's running agent in this execution, and the slot (harness) it holds."""

    agent: Agent
    guard: FleetGuard
    slots: asyncio.Semaphore

    async def close(self) -> None:
        try:
            await self.agent.stop()
        finally:
            self.slots.release()


@DBOS.step(name=STEP)
async def turn_step(
    task_id: str, spec_json: str, conversation_id: str, index: int, prompt: str
) -> str:
    """One turn on the task's agent: started (from the spec, resuming the conversation)
    if this execution has none yet. At-least-once: a turn cut off by a crash runs again
    once (tool calls included)."""
    runtime = _current()
    store = runtime.store
    while True:
        before, wait = await asyncio.to_thread(store.start_turn, task_id, index, runtime.worker_id)
        if before >= 0:
            break
        await asyncio.sleep(min(wait, 5.0))
    if before >= _MAX_STARTS:
        error = f"turn {index + 1} was cut off {before} times; not running it again"
        await asyncio.to_thread(store.update_task, task_id, status="failed", error=error)
        raise FleetTaskError(error)
    live = runtime.live.get(task_id)
    if live is None:
        live = await _start_agent(runtime, task_id, spec_json, conversation_id, index)
        runtime.live[task_id] = live
    try:
        response = await _run_turn(runtime, live, prompt)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        await asyncio.to_thread(store.update_task, task_id, status="failed", error=error)
        raise
    if response is None:
        await runtime.live.pop(task_id, live).close()  # a fresh agent after `resume`
        await asyncio.to_thread(store.forget_turn_start, task_id, index)  # not a crash
        return json.dumps({"stopped": True})
    tokens = response.usage.total_token_count or 0 if response.usage is not None else 0
    await asyncio.to_thread(store.finish_turn, task_id, index + 1, tokens)
    return json.dumps({"response": response.model_dump(mode="json")})


async def _start_agent(
    runtime: Runtime, task_id: str, spec_json: str, conversation_id: str, turn: int
) -> LiveAgent:
    """Take a slot and start the task's agent; a spec that does not build fails the task.

    From the second turn on the conversation must be in this worker's save dir: starting
    an empty one would silently lose the task's earlier turns."""
    store = runtime.store
    save_dir = conversation_dir(runtime.save_dir, conversation_id)
    await runtime.slots.acquire()
    try:
        spec = AgentSpec.model_validate_json(spec_json)
        guard = FleetGuard(store)
        try:
            spec.check_outside(runtime.governed)  # this worker's: its own save dir, its file
            save_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            builder = spec.builder(
                conversation_id=conversation_id,
                save_dir=save_dir,
                approvals=lambda policy: _approval_handler(runtime, task_id, policy),
                extra_hooks=[guard],
                create=turn == 0,
                hide=[save_dir.parent],  # the other tasks' conversations
            )
            audit = TableAudit(store, task_id=task_id, worker=runtime.worker_id, spec=spec)
            agent = builder.audit_log(audit).build()
        except Exception as exc:
            error = f"the spec does not build: {exc}"
            await asyncio.to_thread(store.update_task, task_id, status="failed", error=error)
            raise FleetTaskError(error) from exc
        try:
            await agent.start()
        except ConversationNotFoundError:
            error = (
                f"turn {turn + 1}: conversation {conversation_id} is not in this worker's "
                f"save dir ({save_dir}); workers on several machines must share one "
                "(Fleet(save_dir=...))"
            )
            await asyncio.to_thread(store.update_task, task_id, status="failed", error=error)
            raise FleetTaskError(error) from None
        except Exception as exc:  # the task ends here too: say so, or it shows "running"
            error = f"the agent does not start: {type(exc).__name__}: {exc}"
            await asyncio.to_thread(store.update_task, task_id, status="failed", error=error)
            raise FleetTaskError(error) from exc
    except BaseException:
        runtime.slots.release()
        raise
    return LiveAgent(agent, guard, runtime.slots)


def governed(db_url: str, save_dir: Path | None) -> dict[str, Path]:
    """What governs a fleet's agents, by what it is: the SQLite file (none for PostgreSQL)
    and the directory of the conversations (the SDK's default when `save_dir` is None)."""
    found = {"the fleet's conversations": save_dir or default_save_dir()}
    path = sqlite_path(db_url)
    if path is not None:
        found["the fleet database"] = path
    return found


def conversation_dir(save_dir: Path | None, conversation_id: str) -> Path:
    """The directory a task's harness keeps its conversation in: one per conversation,
    under the fleet's save dir (the SDK's default when None), so that no task's harness
    can open another task's conversation. The id is a safe path component (32 to 200 of
    A-Z, a-z, 0-9 and '-', checked at submit)."""
    return (save_dir or default_save_dir()) / check_conversation_id(conversation_id)


async def _run_turn(runtime: Runtime, live: LiveAgent, prompt: str) -> ChatResponse | None:
    """`agent.chat(prompt)` while watching the fleet's switch; None if a stop cut it."""
    watcher = asyncio.create_task(_watch_switch(runtime.store, live.agent, live.guard))
    try:
        return await live.agent.chat(prompt)
    except TurnCancelledError:
        if live.guard.stopped:
            return None
        raise
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


async def _watch_switch(store: Store, agent: Agent, guard: FleetGuard) -> None:
    """End the turn within a poll of `fleet stop` (the guard denies every call from then)."""
    while True:
        await asyncio.sleep(_STOP_POLL)
        try:
            state = await asyncio.to_thread(store.state)
        except Exception as exc:  # a database hiccup: keep watching
            logger.warning("fleet: cannot read the fleet's switch: %s", exc)
            continue
        if state.stopped:
            guard.stopped = True
            await agent.cancel()
            return


# -- governance the fleet adds ---------------------------------------------------------------


class FleetGuard(Hook):
    """Before the policies: deny every call while the fleet is stopped or over budget.

    Each call is counted against the fleet's tool-call budget in one atomic statement,
    before it is decided (a call the policies then deny still counts: the budget errs on
    the side of stopping). A database that cannot be reached denies (fail-closed)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.stopped = False

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        if self.stopped:
            return HookResult.denied("The fleet is stopped (antigravity fleet stop).")
        state = await asyncio.to_thread(self.store.charge_tool_call)
        if state.stopped:
            self.stopped = True
            return HookResult.denied("The fleet is stopped (antigravity fleet stop).")
        if state.max_tool_calls is not None and state.tool_calls > state.max_tool_calls:
            return HookResult.denied(
                f"The fleet's tool-call budget ({state.max_tool_calls}) is spent."
            )
        if state.max_tokens is not None and state.tokens >= state.max_tokens:
            return HookResult.denied(f"The fleet's token budget ({state.max_tokens}) is spent.")
        return HookResult.allowed()


def call_key(call: ToolCall) -> tuple[str, str]:
    """The call's canonical arguments and the key a grant is bound to."""
    args = json.dumps(call.args, sort_keys=True, separators=(",", ":"), default=str)
    key = hashlib.sha256(f"{call.qualified_name}\0{args}".encode()).hexdigest()
    return args, key


def _approval_handler(
    runtime: Runtime, task_id: str, policy: Policy
) -> Callable[[ToolCall], Awaitable[bool]]:
    """An ask_user rule's handler in a fleet task: wait for an answer from anywhere."""
    expires_in = policy.timeout or runtime.approval_timeout
    rule = policy.name or policy.origin or f"{policy.decision.value} {policy.tool}"

    async def ask(call: ToolCall) -> bool:
        args, key = call_key(call)
        store = runtime.store
        approval = await asyncio.to_thread(
            lambda: store.open_approval(
                task_id=task_id,
                worker=runtime.worker_id,
                tool=call.qualified_name,
                args_json=args,
                call_key=key,
                rule=rule,
                reason=policy.reason,
                expires_in=expires_in,
            )
        )
        logger.info(
            "fleet: task %s waits for approval %s (%s)", task_id, approval.id, call.qualified_name
        )
        while True:
            settled = await asyncio.to_thread(store.consume, approval.id)
            if settled is not None:
                return settled
            await asyncio.sleep(_APPROVAL_POLL)

    return ask


class TableAudit(AuditLog):
    """The agent's audit lines, chained and sealed (with the fleet's secret) as in a file,
    carrying the task, the worker and the spec's hash inside the seal, and stored in the
    fleet's audit table (`TableSink`)."""

    def __init__(self, store: Store, *, task_id: str, worker: str, spec: AgentSpec) -> None:
        self.store = store
        self.task_id = task_id
        self.worker = worker
        self.spec = spec
        self.spec_hash = spec.spec_hash
        super().__init__(
            f"fleet:{task_id}",
            key=store.key,
            sink=lambda: TableSink(store, task_id=task_id, worker=worker, spec_hash=self.spec_hash),
            fields={"task": task_id, "worker": worker, "spec_hash": self.spec_hash},
        )

    def copy(self) -> TableAudit:
        return TableAudit(self.store, task_id=self.task_id, worker=self.worker, spec=self.spec)

    async def decide(
        self, request: Request, hooks: HookDispatch, tools: ToolRun, conversation: str
    ) -> Any:
        """As a file log decides, but fail-closed: a call allowed while its decision line
        could not be stored is denied (the fleet promises every decision is on record)."""
        errors = self.write_errors
        outcome = await super().decide(request, hooks, tools, conversation)
        if self.write_errors != errors and isinstance(outcome, HookResult) and outcome.allow:
            return HookResult.denied(
                "Denied: the fleet could not record this decision in its audit table."
            )
        return outcome


class TableSink:
    """An `AuditSink` that stores each sealed line as a row of the fleet's audit table."""

    def __init__(self, store: Store, *, task_id: str, worker: str, spec_hash: str) -> None:
        self.store = store
        self.task_id = task_id
        self.worker = worker
        self.spec_hash = spec_hash

    def write(self, line: bytes) -> None:
        text = line.decode("ascii").rstrip("\n")
        self.store.add_audit(
            task_id=self.task_id,
            worker=self.worker,
            spec_hash=self.spec_hash,
            line=json.loads(text),
            text=text,
        )

    def close(self) -> None:
        pass
