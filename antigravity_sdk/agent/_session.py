"""`Session`: one live conversation with the harness, from `Agent.start()` to `stop()`.

The session owns everything that lives as long as the harness does: its state
(`SessionState`, moved only through `_lifecycle`'s table), the conversation record (id,
history, counters, the containment in force, the hook runner), the connection and the
`SessionCore` reading it, the tasks answering the harness, the turn in progress, and the
agent's way out. Its only input is `SessionDeps`, a frozen value the agent builds at
`start()`; it refers to no agent, so an agent dropped without `stop()` can be collected:
the connection's listener holds the session only weakly, and the agent's finalizer ends
the harness (`abandon`).

Arrows run one way: the agent calls the session, the session makes a `Turn` per turn
(`_turn`) and hands each harness request to the answer path (`_answers`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..conversations import default_save_dir
from ..errors import (
    AgentStateError,
    AntigravityError,
    ConversationNotFoundError,
    HarnessConnectionError,
    ProtocolError,
    TurnCancelledError,
    TurnDeniedError,
    TurnFailedError,
    TurnTimeoutError,
)
from ..harness.catalog import ToolGuard, tools_enabled_by
from ..harness.effects import (
    HALT,
    SESSION_END,
    Chunk,
    Effect,
    Frame,
    HookCall,
    Initialized,
    Request,
    SessionEnded,
    TurnEnded,
)
from ..harness.protocol import SessionCore
from ..hooks import HookRunner
from ..types import ChatResponse, HookResult, Step, StopReason, ToolCall, ToolResult, UsageMetadata
from ._answers import answer
from ._lifecycle import Lifecycle, SessionState
from ._outside import Egress, controls
from ._settings import ModelGroup, ServedModel, Settings, is_served_model
from ._turn import Turn

if TYPE_CHECKING:
    from ..audit import AuditLog
    from ..containment import ContainmentInForce
    from ..egress import Refusal
    from ..harness.config import ModelSettings
    from ..harness.connection import Connection
    from ..hooks import Hook
    from ..media import PromptPart
    from ..policy import PolicyEnforcer
    from ..structured import OutputGuard
    from ..tools import ToolRunner
    from ..tracing import TracedHookRunner
    from ..triggers import TriggerRunner

logger = logging.getLogger("antigravity_sdk.agent")
_containment_logger = logging.getLogger("antigravity_sdk.containment")

_CANCEL_GRACE = 1.0  # for cancelled tasks to unwind (each pending answer sends its refusal)

# Cleanups of agents that were garbage-collected while started (asyncio keeps only weak
# references to tasks, so these hold them until they finish).
_CLEANUPS: set[asyncio.Task[None]] = set()

_S = SessionState


@dataclass(frozen=True)
class SessionDeps:
    """What a session is given, and all it is given: the agent's settings and what
    `build()` made of them. Frozen: a session never changes its agent's configuration."""

    settings: Settings
    enforcer: PolicyEnforcer
    tools: ToolRunner
    hooks: tuple[Hook, ...]  # the user's, in order; the enforcer runs after them
    audit: AuditLog | None  # the agent's own log: the session opens and closes it
    output: OutputGuard | None  # structured output's check of the finish call


class Session:
    """One live conversation: its state, its record, and what it runs on."""

    def __init__(self, deps: SessionDeps) -> None:
        self.deps = deps
        self._life = Lifecycle()
        self._changed = asyncio.Event()  # replaced at each state change (see `_until`)
        # The conversation record: readable after the session closes.
        self.conversation_id = ""
        self.history: list[Step] = []
        self.turn_count = 0
        self.last_stop_reason: StopReason | None = None
        """Why the last turn ended (also for `stream()` and a turn that raised)."""
        self.containment: ContainmentInForce | None = None
        self.hook_runner: HookRunner | None = None
        self.failure: BaseException | None = None  # why the session is over, if it is
        # What the session runs on.
        self.core: SessionCore | None = None
        self.conn: Connection | None = None
        self.traced: TracedHookRunner | None = None  # the hook runner, when tracing
        self.triggers: TriggerRunner | None = None
        self.owned_model: ServedModel | None = None  # started by this session, stopped too
        self.egress: Egress | None = None  # the contained agent's way out
        self.tasks: set[asyncio.Task[None]] = set()
        self.answers: set[asyncio.Task[None]] = set()  # answers the harness waits for
        self.turn: Turn | None = None  # the turn in progress
        self.halt: asyncio.Task[None] | None = None  # the last given-up turn's halt
        self._initialized: asyncio.Future[None] | None = None  # the harness's replies
        self._ended: asyncio.Future[None] | None = None

    # -- state ---------------------------------------------------------------------------

    @property
    def state(self) -> SessionState:
        return self._life.state

    @property
    def listening(self) -> bool:
        """Frames from the connection are handled (until the session closes)."""
        return self._life.state is not _S.CLOSED

    @property
    def audit(self) -> AuditLog | None:
        return self.deps.audit

    @property
    def tools(self) -> ToolRunner:
        return self.deps.tools

    @property
    def usage(self) -> UsageMetadata:
        core = self.core
        return core.usage if core is not None else UsageMetadata()

    @property
    def usage_by_trajectory(self) -> dict[str, UsageMetadata]:
        core = self.core
        return core.usage_by_trajectory if core is not None else {}

    def _move(self, to: SessionState) -> None:
        self._life.move(to)
        self._notify()

    def _notify(self) -> None:
        """Wake every `_until` waiter (they re-check their condition)."""
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def _until(self, done: Callable[[], bool], seconds: float, what: str) -> None:
        """Wait until `done()` (re-checked at each state change), or the session fails
        (its failure is raised), or `seconds` pass (`HarnessConnectionError`)."""
        try:
            async with asyncio.timeout(seconds):
                while not done() and self.failure is None:
                    await self._changed.wait()
        except TimeoutError:
            raise self._timed_out(seconds, what) from None
        if self.failure is not None:
            raise self.failure

    async def _reply(self, reply: asyncio.Future[None], seconds: float, what: str) -> None:
        """Wait for one of the harness's replies (resolved by the listener, or by `fail`)."""
        try:
            await asyncio.wait_for(asyncio.shield(reply), seconds)
        except TimeoutError:
            raise self._timed_out(seconds, what) from None

    def _timed_out(self, seconds: float, what: str) -> BaseException:
        if self.failure is not None:
            return self.failure
        tail = self.conn.stderr_tail() if self.conn is not None else ""
        return HarnessConnectionError(
            f"the harness did not {what} within {seconds}s", stderr_tail=tail
        )

    def fail(self, exc: BaseException) -> None:
        """The session is over (`exc` says why): everything waiting on it is told, and
        every later turn raises `exc`."""
        if (
            isinstance(exc, HarnessConnectionError)
            and self.conversation_id
            and self.deps.settings.process.connection is None
        ):
            # The harness ends its session after a failed turn (a model error, say); the
            # conversation is saved, so say how to go on.
            exc.add_note(
                f"the conversation is saved: an agent built with "
                f".resume({self.conversation_id!r}) over the same save_dir continues it"
            )
        self.failure = exc
        if self.turn is not None:
            self.turn.put(exc)
        for reply in (self._initialized, self._ended):
            if reply is not None and not reply.done():
                reply.set_result(None)  # the waiter finds `failure`
        if self._life.can(_S.FAILED):
            self._move(_S.FAILED)
        else:  # ending or closed already: only the waiters need to know
            self._notify()

    # -- start ---------------------------------------------------------------------------

    async def open(self, save_dir: Path, send: Callable[[str], Awaitable[None]]) -> None:
        """Spawn (or connect to) the harness, configure the conversation and wait until it
        is initialized; then run the session_start hooks and start the triggers (which
        send their messages with `send`). On failure the caller shuts the session down."""
        from ..containment import for_agent, harness_endpoints, trace_attributes
        from ..harness.config import harness_config
        from ..harness.connection import LocalConnection

        deps = self.deps
        settings = deps.settings
        governance, storage, process = settings.governance, settings.storage, settings.process
        timeouts = settings.limits.timeouts
        if deps.audit is not None:
            deps.audit.open(deps.enforcer.fingerprint)
        model = await self._model_settings(settings.model)
        root = _default_root()
        app_data = (storage.app_data_dir or root / "app-data").resolve()
        # The output guard first: a finish call that does not validate is refused
        # before any hook or policy is asked (like the SDK's other refusals).
        output = [deps.output] if deps.output is not None else []
        tools = deps.tools
        host_tools = frozenset(tools.tools)
        finish = frozenset({"finish"}) if output else frozenset()
        guard = ToolGuard(
            enabled=tools_enabled_by(governance.capabilities.enabled_tools) | host_tools | finish,
            mcp_servers=frozenset(server.name for server in governance.mcp_servers),
            any_subagent="subagents" in governance.ungoverned,
            subagent_workspaces="subagent_workspaces" in governance.ungoverned,
            scheduled_wakes="schedule" in governance.ungoverned,
        )
        self.core = core = SessionCore(host_tools, guard, host_args=_host_args(tools))
        hooks = [*output, *deps.hooks, deps.enforcer]
        hook_runner: HookRunner
        if governance.tracing is None:
            hook_runner = HookRunner(hooks, timeout=timeouts.hook, check_rewrite=core.check_rewrite)
        else:
            hook_runner = self.traced = governance.tracing.hook_runner(
                hooks,
                turn_attributes=_model_attributes(settings.model),
                timeout=timeouts.hook,
                check_rewrite=core.check_rewrite,
            )
        self.hook_runner = hook_runner
        workspaces = governance.workspaces or [Path.cwd()]
        if process.containment is not None:
            self.containment = planned = for_agent(
                process.containment,
                abi=process.landlock_abi,
                workspaces=workspaces,
                state=(
                    storage.save_dir or default_save_dir(),
                    storage.app_data_dir or root / "app-data",
                ),
                model=model,
                mcp_servers=governance.mcp_servers,
                controls=controls(deps.audit, governance.policy_files, hooks),
            )
            _warn_of(planned)
        self.conn = conn = process.connection or LocalConnection(
            process.harness_path, startup_timeout=timeouts.startup, containment=self.containment
        )
        await conn.open(storage_dir=save_dir, home=app_data / "home")
        if isinstance(conn, LocalConnection) and conn.containment is not None:
            self.containment = contained = conn.containment  # what the kernel put in force
            self.egress = Egress(_refusal_recorder(self))
            listeners, conn.listeners = conn.listeners, {}
            await self.egress.start(contained, listeners)
        harness_model, mcp_servers = harness_endpoints(
            model, governance.mcp_servers, self.containment
        )
        if self.traced is not None:
            self.traced.turn_attributes.update(trace_attributes(self.containment))
        loop = asyncio.get_running_loop()
        self._initialized = loop.create_future()
        _listen(weakref.ref(self), conn, core)
        prompt, limits = settings.prompt, settings.limits
        await conn.send(
            harness_config(
                model=harness_model,
                workspaces=workspaces,
                app_data_dir=app_data,
                capabilities=governance.capabilities,
                hook_events=hook_runner.subscribed_events(),
                system_instructions=prompt.system_instructions,
                custom_instructions=prompt.custom_instructions,
                section_overrides=prompt.section_overrides,
                skills_paths=prompt.skills_paths,
                skills=prompt.skills,
                tools=tools.declarations(),
                mcp_servers=mcp_servers,
                resume=storage.resume,
                create_if_missing=storage.create_if_missing,
                output_schema=prompt.output_schema,
                budget=limits.budget,
                retry=limits.retry,
                tool_output=limits.tool_output,
            )
        )
        _build_turn_models()  # while the harness initializes the conversation
        await self._wait_initialized(save_dir)
        if deps.audit is not None:
            deps.audit.session(self.conversation_id, self.containment)
        self._move(_S.READY)
        await session_hooks(
            hook_runner.dispatch_session_start, "on_session_start", timeouts.session_hooks
        )
        if governance.triggers:
            from ..triggers import TriggerRunner

            self.triggers = TriggerRunner(governance.triggers)
            await self.triggers.start(send)

    async def _model_settings(self, chosen: ModelGroup) -> ModelSettings:
        """The model the harness calls; a served model not yet running is started here
        (and stopped with the session)."""
        from ..harness.config import DEFAULT_GEMINI_MODEL, ModelSettings, resolve_model

        model = chosen.model
        if is_served_model(model):
            if not model.started:
                await model.start()
                self.owned_model = model
            return resolve_model(model.model_name, base_url=model.base_url)
        name = cast("str | None", model)
        if chosen.vertex is not None:
            return ModelSettings(
                name=name or DEFAULT_GEMINI_MODEL, vertex=chosen.vertex, options=chosen.options
            )
        resolved = resolve_model(name, base_url=chosen.base_url, api_key=chosen.api_key)
        return replace(resolved, options=chosen.options)

    async def _wait_initialized(self, save_dir: Path) -> None:
        settings = self.deps.settings
        resume = settings.storage.resume
        assert self._initialized is not None
        try:
            await self._reply(
                self._initialized,
                settings.limits.timeouts.startup,
                "initialize the conversation",
            )
            if self.failure is not None:
                raise self.failure
        except HarnessConnectionError as exc:
            # Removed since the check, or a remote harness's own save dir: the harness
            # says so on stderr and exits.
            if resume and "cannot resume" in exc.stderr_tail:
                raise not_found(resume, save_dir) from exc
            raise

    # -- what the harness says -----------------------------------------------------------

    def receive(self, effect: Effect) -> None:
        """Route one effect of this session's core (called by the connection's listener):
        a request to the answer path, the rest to the turn in progress or the record."""
        if isinstance(effect, Chunk):  # only built when the turn streams
            if self.turn is not None:
                self.turn.put(effect)
        elif isinstance(effect, TurnEnded):
            if self._life.state is _S.IN_TURN or self._life.state is _S.HALTING:
                self._move(_S.READY)
            if self.turn is not None:
                self.turn.put(effect)
        elif isinstance(effect, Initialized):
            self.conversation_id = effect.conversation_id
            self.history.extend(effect.history)
            self.deps.tools.context.conversation_id = effect.conversation_id
            if self._initialized is not None and not self._initialized.done():
                self._initialized.set_result(None)
        elif isinstance(effect, SessionEnded):
            if self._ended is not None and not self._ended.done():
                self._ended.set_result(None)
        else:
            answer(self, effect)

    # The answer path's view of the session (`_answers.Answering`).

    def track_answer(self, task: asyncio.Task[None]) -> None:
        self.track(task)
        self.answers.add(task)
        task.add_done_callback(self.answers.discard)

    def deny_turn(self, outcome: HookResult) -> None:
        """A denial that ends the turn in progress: its `chat()` raises `TurnDeniedError`."""
        if self.turn is not None:
            self.turn.denial = outcome

    def note_denial(self, request: Request, outcome: Any) -> None:
        """A denied tool call, for the turn's `denied` step (`Step.kind`)."""
        if (
            isinstance(request, HookCall)
            and request.event == "pre_tool_call"
            and isinstance(request.arg, ToolCall)
            and not outcome.allow
            and self.core is not None
        ):
            self.core.note_denial(request.arg, outcome.message)

    # -- turns ---------------------------------------------------------------------------

    async def run_turn(
        self, parts: tuple[PromptPart, ...], *, streaming: bool
    ) -> AsyncGenerator[Effect, None]:
        """One turn: send `parts`, yield its effects until it ends. A turn that does not
        end (error, timeout, cancellation, its consumer gone) is halted on the harness,
        after every request still pending is answered fail-closed."""
        state = self._life.state
        if state is _S.CLOSED or state is _S.ENDING or self.conn is None or self.core is None:
            raise AgentStateError("start the agent first (async with agent: ...)")
        if self.failure is not None:
            raise self.failure
        timeouts = self.deps.settings.limits.timeouts
        if self.halt is not None:
            # Its HALT must reach the harness before this turn's input, or it halts this
            # turn instead (nothing else orders them: the wait below may not yield at all).
            await asyncio.wait([self.halt], timeout=timeouts.previous_turn)
            self.halt = None
        await self._until(
            lambda: self._life.state is not _S.HALTING,
            timeouts.previous_turn,
            "finish the previous turn",
        )
        if self._life.state is not _S.READY:  # stopped while waiting
            raise AgentStateError("start the agent first (async with agent: ...)")
        hooks = self.hook_runner
        assert hooks is not None
        turn = Turn(hooks, self.traced, self.deps.audit, timeouts.turn)
        self.turn = turn
        self._move(_S.IN_TURN)
        turn.begin(parts, self.conversation_id)
        self.last_stop_reason = None
        conn, core = self.conn, self.core
        try:
            try:
                await conn.send(core.user_input(parts, streaming=streaming))
            except HarnessConnectionError as exc:
                self.fail(exc)  # the session is over: every later call says so too
                raise
            while True:
                try:
                    item = await turn.next()
                except TimeoutError:
                    self.last_stop_reason = StopReason.TIMEOUT
                    raise TurnTimeoutError(
                        f"the turn did not finish within {turn.timeout}s (halted)"
                    ) from None
                if isinstance(item, TurnCancelledError):
                    self.last_stop_reason = StopReason.CANCELLED
                    raise item  # not finished: the clean-up below halts the harness's turn
                if isinstance(item, BaseException):
                    turn.error = item
                    raise item
                turn.saw(item)
                yield item
                if turn.finished:
                    return
        except BaseException as exc:
            turn.failed(exc)
            raise
        finally:
            turn.close(self.conversation_id, self.last_stop_reason)
            # Closed by the caller's `aclosing` before the turn lock is released. Even so,
            # clear only this turn's state: a generator closed late (by the garbage
            # collector) must never end the turn that came after it.
            if self.turn is turn:
                self.turn = None
            if not turn.finished and self.failure is None and self.conn is not None:
                # Given up (error, timeout, cancellation, consumer gone).
                self._give_up_turn()

    def _give_up_turn(self) -> None:
        """Halt the harness's turn; the listener makes the session ready when it confirms."""
        if self._life.state is _S.IN_TURN:
            self._move(_S.HALTING)
        self.halt = self.spawn(self._halt())

    async def _halt(self) -> None:
        """Answer every pending request fail-closed, then halt the harness's turn. In that
        order: on a halt the harness drops its pending hook requests, and an answer to a
        request it no longer knows ends the whole session."""
        pending = [task for task in self.answers if not task.done()]
        for task in pending:
            task.cancel()  # each answers fail-closed as it unwinds
        if pending:
            await asyncio.wait(pending, timeout=_CANCEL_GRACE)
        await self.send_quietly(HALT)

    def finish(self, ended: TurnEnded) -> ChatResponse:
        """The response of a turn that ended, or the error it ended with."""
        turn = self.turn
        denial = turn.denial if turn is not None else None
        if ended.cancelled and denial is not None:
            self.last_stop_reason = StopReason.DENIED
            raise TurnDeniedError(denial)
        reason = ended.response.stop_reason
        if ended.error:
            failed = TurnFailedError(
                ended.error, StopReason.ERROR if reason is StopReason.FINISHED else reason
            )
            self.last_stop_reason = failed.stop_reason
            raise failed
        self.last_stop_reason = reason
        self.turn_count += 1
        self.history.extend(ended.response.steps)
        return ended.response

    def cancel(self) -> bool:
        """End the turn in progress (its consumer raises `TurnCancelledError`)."""
        turn = self.turn
        if turn is None:
            return False
        turn.put(TurnCancelledError("the turn was cancelled (Agent.cancel())"))
        return True

    # -- stop ----------------------------------------------------------------------------

    async def end(self) -> None:
        """Stop the triggers, run the session_end hooks and ask the harness to end the
        session, waiting a bounded time for it to say so. Once: a second call returns."""
        if not self._life.can(_S.ENDING):
            return
        self._move(_S.ENDING)
        timeouts = self.deps.settings.limits.timeouts
        if self.triggers is not None:
            await self.triggers.stop()
        if self.hook_runner is not None:
            await session_hooks(
                self.hook_runner.dispatch_session_end, "on_session_end", timeouts.session_hooks
            )
        initialized = self._initialized is not None and self._initialized.done()
        if self.conn is not None and self.failure is None and initialized:
            self._ended = asyncio.get_running_loop().create_future()
            with contextlib.suppress(Exception):
                await self.conn.send(SESSION_END)
                await self._reply(self._ended, timeouts.session_end, "end the session")

    async def wind_down(self) -> None:
        """Close (nothing is listened to from now on), tell a waiting turn, and cancel
        every task (bounded wait)."""
        if self._life.can(_S.CLOSED):
            self._move(_S.CLOSED)
        if self.turn is not None:  # a turn still waiting must not wait for its timeout
            self.turn.put(AntigravityError("the agent was stopped during the turn"))
        tasks = [t for t in self.tasks if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=_CANCEL_GRACE)

    async def close(self) -> None:
        """Release what the session runs on: the connection (ending a spawned harness),
        the agent's way out, the model it started, the audit log and the containment's
        temp dir (saying what the agent planted where a protected path was missing)."""
        conn, self.conn = self.conn, None
        egress, self.egress = self.egress, None
        model, self.owned_model = self.owned_model, None
        try:
            try:
                if conn is not None:
                    await conn.close()
            finally:
                if egress is not None:
                    await egress.aclose()
            if model is not None:
                await model.stop()
        finally:
            if self.deps.audit is not None:
                self.deps.audit.close()
            contained = self.containment
            if contained is not None:
                contained.remove_tmp_dir()
                for planted in contained.planted():
                    _containment_logger.warning(
                        "containment: the agent made %s, which is protected but did not "
                        "exist when it started (a read-only mount needs something to "
                        "hold): check it before git, an editor or a shell runs it",
                        planted,
                    )

    # -- tasks ---------------------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        self.track(task)
        return task

    def track(self, task: asyncio.Task[None]) -> None:
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def send_quietly(self, frame: Frame) -> None:
        conn = self.conn
        if conn is None:
            return
        try:
            await conn.send(frame)
        except Exception as exc:  # the reader reports a dead connection; nothing to add
            logger.debug("could not send %s: %s", next(iter(frame)), exc)


async def session_hooks(
    dispatch: Callable[[], Awaitable[None]], event: str, seconds: float
) -> None:
    """Session hooks are Inspect hooks, but start() and stop() must not wait forever on
    them: past the bound they are cancelled (and logged), and the session goes on."""
    try:
        async with asyncio.timeout(seconds):
            await dispatch()
    except TimeoutError:
        logger.warning("%s hooks did not finish within %ss; going on", event, seconds)


def not_found(conversation_id: str, save_dir: Path) -> ConversationNotFoundError:
    return ConversationNotFoundError(
        f"no conversation {conversation_id!r} is saved in {str(save_dir)!r}: "
        "list_conversations(save_dir) lists the saved ones, and resume(id, create=True) "
        "starts a new conversation under an id that is not saved"
    )


def _warn_of(planned: ContainmentInForce) -> None:
    """What the containment gives up, said once at start."""
    if planned.unprotected:
        _containment_logger.warning(
            "containment: %s given up (Containment(unprotect=...)): the agent can "
            "write there what git, an editor or a shell runs later, outside it",
            ", ".join(planned.unprotected),
        )
    for listed in planned.listing_only:
        _containment_logger.warning(
            "containment: %s holds a credential path, so no file can be made "
            "directly in it (its subdirectories are writable); use a project "
            "directory as the workspace",
            listed,
        )


def _refusal_recorder(session: Session) -> Callable[[Refusal], None]:
    """Each refused connection: a decision line in the session's audit log (held weakly:
    the egress proxy must not keep a dropped session alive)."""
    ref = weakref.ref(session)

    def record(refusal: Refusal) -> None:
        alive = ref()
        if alive is not None and alive.deps.audit is not None:
            alive.deps.audit.refused_connection(
                alive.conversation_id, refusal.host, refusal.port, refusal.method, refusal.reason
            )

    return record


def _default_root() -> Path:
    from ..harness.install import default_cache_dir

    return default_cache_dir()


def _model_attributes(model: ModelGroup) -> dict[str, Any]:
    """The turn span's model attributes (tracing)."""
    from ..harness.config import DEFAULT_GEMINI_MODEL
    from ..tracing import model_attributes

    return model_attributes(
        model.model,
        served=model.served,
        vertex=model.vertex is not None,
        default_model=DEFAULT_GEMINI_MODEL,
    )


def _host_args(tools: ToolRunner) -> dict[str, frozenset[str]]:
    """Each host-side tool -> the arguments its schema names (what a rewrite may set); a
    schema without a `properties` object, or one that admits others
    (`additionalProperties` other than false), is left out: its arguments are open."""
    known: dict[str, frozenset[str]] = {}
    for name, t in tools.tools.items():
        schema = t.parameters_json_schema
        properties = schema.get("properties")
        if isinstance(properties, dict) and schema.get("additionalProperties", False) is False:
            known[name] = frozenset(properties)
    return known


def _build_turn_models() -> None:
    """Build the validators of the types every turn makes (deferred at import, see
    `types._Model`) at start, while the harness is busy anyway, not inside the first
    turn: there their ~7 ms, and the caches they leave cold, cost a 50-call turn about
    0.2 ms of CPU per tool call (measured on harness 0.1.22)."""
    for model in (ToolCall, ToolResult, UsageMetadata, Step, ChatResponse):
        model.model_rebuild()


# -- module-level so that nothing the event loop holds keeps a session alive --------------


def _listen(session_ref: weakref.ref[Session], conn: Connection, core: SessionCore) -> None:
    """Have `conn` feed every frame to the core and its effects to the session, and its
    end to `Session.fail`; both only while the session is there and listening."""
    receive = core.receive

    def on_frame(frame: dict[str, Any]) -> None:
        session = session_ref()  # a strong reference only while this frame is handled
        if session is not None and session.listening:
            for effect in receive(frame):
                session.receive(effect)

    def on_lost(exc: BaseException) -> None:
        session = session_ref()
        if session is None or not session.listening:
            return
        session.fail(exc)
        if isinstance(exc, ProtocolError):
            session.spawn(conn.close())  # a peer we cannot understand is a peer we stop

    conn.listen(on_frame, on_lost)


def abandon(loop: asyncio.AbstractEventLoop, conn: Connection, model: ServedModel | None) -> None:
    """Finalizer of an agent collected (or left at exit) while started: end its harness.

    On a running loop the connection is closed properly (stdin EOF, then TERM, then KILL);
    with no loop left to run that, a local harness is killed outright.
    """
    logger.warning("an Agent was garbage-collected without stop(); ending its harness")

    def start_cleanup() -> None:
        task = loop.create_task(_close_abandoned(conn, model))
        _CLEANUPS.add(task)
        task.add_done_callback(_CLEANUPS.discard)

    if loop.is_running():
        try:
            loop.call_soon_threadsafe(start_cleanup)
            return
        except RuntimeError:  # closed in the meantime
            pass
    pid = getattr(conn, "pid", None)
    if isinstance(pid, int):
        from ..harness.connection import kill_process

        kill_process(pid)


async def _close_abandoned(conn: Connection, model: ServedModel | None) -> None:
    try:
        await conn.close()
    finally:
        if model is not None:
            await model.stop()
