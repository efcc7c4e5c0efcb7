"""One harness session, from `Agent.start()` to `Agent.stop()`.

`Session` holds everything that lives only as long as the harness does (the connection,
the `SessionCore`, the tasks answering it, the events start and stop wait on), so a new
start begins from a new one instead of resetting the old one by hand. Here too is the
weak-reference discipline that lets an agent dropped without `stop()` be collected: the
connection's listener holds the agent only weakly, nothing the session holds refers back
to the agent, and a finalizer ends the harness of a collected agent (`_abandon`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..conversations import default_save_dir
from ..errors import (
    AntigravityError,
    ConversationNotFoundError,
    HarnessConnectionError,
    ProtocolError,
)
from ..harness.catalog import ToolGuard, tools_enabled_by
from ..harness.effects import SESSION_END, Frame
from ..harness.protocol import SessionCore
from ..hooks import HookRunner
from ..types import ChatResponse, Step, ToolCall, ToolResult, UsageMetadata
from ._answers import handle
from ._outside import Egress, controls
from ._settings import ModelGroup, ServedModel, is_served_model

if TYPE_CHECKING:
    from ..egress import Refusal
    from ..harness.config import ModelSettings
    from ..harness.connection import Connection
    from ..tools import ToolRunner
    from ..tracing import TracedHookRunner
    from ..triggers import TriggerRunner
    from ._agent import Agent
    from ._turn import Turn

logger = logging.getLogger("antigravity_sdk.agent")

_SESSION_END_TIMEOUT = 2.0
_SESSION_HOOKS_TIMEOUT = 10.0  # on_session_start / on_session_end hooks, all together

# Cleanups of agents that were garbage-collected while started (asyncio keeps only weak
# references to tasks, so these hold them until they finish).
_CLEANUPS: set[asyncio.Task[None]] = set()


class Session:
    """The state of one session. It refers to no agent: the agent passes itself to the
    steps that need it (`open`, and the listener, which holds it weakly)."""

    def __init__(self) -> None:
        self.core: SessionCore | None = None
        self.conn: Connection | None = None
        self.traced: TracedHookRunner | None = None  # the hook runner, when tracing
        self.triggers: TriggerRunner | None = None
        self.owned_model: ServedModel | None = None  # started by this session, stopped too
        self.listening = False  # frames from the connection reach `_answers.handle`
        self.finalizer: weakref.finalize[Any, Any] | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.answers: set[asyncio.Task[None]] = set()  # answers the harness waits for
        self.abandoning: asyncio.Task[None] | None = None  # the last abandoned turn's halt
        self.turn: Turn | None = None  # the turn in progress
        self.idle = asyncio.Event()
        self.initialized = asyncio.Event()
        self.ended = asyncio.Event()
        self.end_dispatched = False  # on_session_end hooks
        self.failure: BaseException | None = None
        self.egress: Egress | None = None  # the contained agent's way out

    # -- start ---------------------------------------------------------------------------

    async def open(self, agent: Agent, save_dir: Path) -> None:
        """Spawn (or connect to) the harness, configure the conversation and wait until it
        is initialized; then run the session_start hooks and start the triggers. On
        failure the caller shuts the session down."""
        from ..containment import for_agent, harness_endpoints, trace_attributes
        from ..harness.config import harness_config
        from ..harness.connection import LocalConnection

        settings = agent._settings
        governance, storage, process = settings.governance, settings.storage, settings.process
        model = await self._model_settings(settings.model)
        root = _default_root()
        app_data = (storage.app_data_dir or root / "app-data").resolve()
        # The output guard first: a finish call that does not validate is refused
        # before any hook or policy is asked (like the SDK's other refusals).
        output = [agent._output_guard] if agent._output_guard is not None else []
        tools = agent._tools
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
        hooks = [*output, *agent._hooks, agent.policy_enforcer]
        timeout = settings.limits.hook_timeout
        hook_runner: HookRunner
        if governance.tracing is None:
            hook_runner = HookRunner(hooks, timeout=timeout, check_rewrite=core.check_rewrite)
        else:
            hook_runner = self.traced = governance.tracing.hook_runner(
                hooks,
                turn_attributes=_model_attributes(settings.model),
                timeout=timeout,
                check_rewrite=core.check_rewrite,
            )
        agent.hook_runner = hook_runner
        workspaces = governance.workspaces or [Path.cwd()]
        if process.containment is not None:
            agent._containment = for_agent(
                process.containment,
                abi=process.landlock_abi,
                workspaces=workspaces,
                state=(
                    storage.save_dir or default_save_dir(),
                    storage.app_data_dir or root / "app-data",
                ),
                model=model,
                mcp_servers=governance.mcp_servers,
                controls=controls(agent._audit, governance.policy_files, hooks),
            )
            if agent._containment.unprotected:
                logger.warning(
                    "containment: %s given up (Containment(unprotect=...)): the agent can "
                    "write there what git, an editor or a shell runs later, outside it",
                    ", ".join(agent._containment.unprotected),
                )
            for listed in agent._containment.listing_only:
                logger.warning(
                    "containment: %s holds a credential path, so no file can be made "
                    "directly in it (its subdirectories are writable); use a project "
                    "directory as the workspace",
                    listed,
                )
        self.conn = conn = process.connection or LocalConnection(
            process.harness_path,
            startup_timeout=settings.limits.startup_timeout,
            containment=agent._containment,
        )
        await conn.open(storage_dir=save_dir, home=app_data / "home")
        if isinstance(conn, LocalConnection) and conn.containment is not None:
            agent._containment = contained = conn.containment  # what the kernel put in force
            self.egress = Egress(self._refusal_recorder(agent))
            listeners, conn.listeners = conn.listeners, {}
            await self.egress.start(contained, listeners)
        harness_model, mcp_servers = harness_endpoints(
            model, governance.mcp_servers, agent._containment
        )
        if self.traced is not None:
            self.traced.turn_attributes.update(trace_attributes(agent._containment))
        # The connection holds the agent only weakly, so an agent dropped without
        # stop() can be collected; its finalizer then ends the harness (see `_abandon`).
        self.listening = True
        _listen(weakref.ref(agent), conn, core)
        self.finalizer = weakref.finalize(
            agent, _abandon, asyncio.get_running_loop(), conn, self.owned_model
        )
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
        await self._wait_initialized(agent, save_dir)
        if agent._audit is not None:
            agent._audit.session(agent.conversation_id, agent._containment)
        self.idle.set()
        await session_hooks(hook_runner.dispatch_session_start, "on_session_start")
        if governance.triggers:
            from ..triggers import TriggerRunner

            self.triggers = TriggerRunner(governance.triggers)
            await self.triggers.start(agent._trigger_send)

    @staticmethod
    def _refusal_recorder(agent: Agent) -> Callable[[Refusal], None]:
        """Each refused connection: a decision line in the agent's audit log (held
        weakly: the egress proxy must not keep a dropped agent alive)."""
        ref = weakref.ref(agent)

        def record(refusal: Refusal) -> None:
            alive = ref()
            if alive is not None and alive._audit is not None:
                alive._audit.refused_connection(
                    alive.conversation_id,
                    refusal.host,
                    refusal.port,
                    refusal.method,
                    refusal.reason,
                )

        return record

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

    async def _wait_initialized(self, agent: Agent, save_dir: Path) -> None:
        settings = agent._settings
        resume = settings.storage.resume
        try:
            await self.wait(
                self.initialized, settings.limits.startup_timeout, "initialize the conversation"
            )
        except HarnessConnectionError as exc:
            # Removed since the check, or a remote harness's own save dir: the harness
            # says so on stderr and exits.
            if resume and "cannot resume" in exc.stderr_tail:
                raise not_found(resume, save_dir) from exc
            raise

    # -- stop ----------------------------------------------------------------------------

    async def end(self, hooks: HookRunner | None) -> None:
        """Stop the triggers, run the session_end hooks (once) and ask the harness to end
        the session, waiting a bounded time for it to say so."""
        if self.triggers is not None:
            await self.triggers.stop()
        if not self.end_dispatched and hooks is not None:
            self.end_dispatched = True
            await session_hooks(hooks.dispatch_session_end, "on_session_end")
        if self.conn is not None and self.failure is None and self.initialized.is_set():
            with contextlib.suppress(Exception):
                await self.conn.send(SESSION_END)
                await self.wait(self.ended, _SESSION_END_TIMEOUT, "end the session")

    async def wind_down(self) -> None:
        """Stop listening, tell a waiting turn, and cancel every task (bounded wait)."""
        self.listening = False  # nothing new starts while the session winds down
        if self.turn is not None:  # a turn still waiting must not wait for its timeout
            self.turn.put(AntigravityError("the agent was stopped during the turn"))
        if self.finalizer is not None:
            self.finalizer.detach()
            self.finalizer = None
        tasks = [t for t in self.tasks if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)

    async def close(self) -> None:
        """Close the connection (ending a spawned harness) and the agent's way out, then
        stop the model started."""
        conn, self.conn = self.conn, None
        egress, self.egress = self.egress, None
        try:
            if conn is not None:
                await conn.close()
        finally:
            if egress is not None:
                await egress.aclose()
        model, self.owned_model = self.owned_model, None
        if model is not None:
            await model.stop()

    # -- while it runs -------------------------------------------------------------------

    def fail(self, exc: BaseException) -> None:
        """The session is over (`exc` says why): everything waiting on it is told."""
        self.failure = exc
        if self.turn is not None:
            self.turn.put(exc)
        self.initialized.set()
        self.ended.set()
        self.idle.set()

    async def wait(self, event: asyncio.Event, seconds: float, what: str) -> None:
        try:
            await asyncio.wait_for(event.wait(), seconds)
        except TimeoutError:
            if self.failure is not None:
                raise self.failure from None
            tail = self.conn.stderr_tail() if self.conn is not None else ""
            raise HarnessConnectionError(
                f"the harness did not {what} within {seconds}s", stderr_tail=tail
            ) from None
        if self.failure is not None and event is not self.ended:
            raise self.failure

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


async def session_hooks(dispatch: Callable[[], Awaitable[None]], event: str) -> None:
    """Session hooks are Inspect hooks, but start() and stop() must not wait forever on
    them: past the bound they are cancelled (and logged), and the session goes on."""
    try:
        async with asyncio.timeout(_SESSION_HOOKS_TIMEOUT):
            await dispatch()
    except TimeoutError:
        logger.warning(
            "%s hooks did not finish within %ss; going on", event, _SESSION_HOOKS_TIMEOUT
        )


def not_found(conversation_id: str, save_dir: Path) -> ConversationNotFoundError:
    return ConversationNotFoundError(
        f"no conversation {conversation_id!r} is saved in {str(save_dir)!r}: "
        "list_conversations(save_dir) lists the saved ones, and resume(id, create=True) "
        "starts a new conversation under an id that is not saved"
    )


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


# -- module-level so that nothing the event loop holds keeps an Agent alive ---------------


def _listen(agent_ref: weakref.ref[Agent], conn: Connection, core: SessionCore) -> None:
    """Have `conn` feed every frame to the core and its effects to the agent, and its end
    to `Agent._fail`; both only while the agent is there and its session listening."""
    receive = core.receive

    def on_frame(frame: dict[str, Any]) -> None:
        agent = agent_ref()  # a strong reference only while this frame is handled
        if agent is not None:
            session = agent._session
            if session.listening and session.core is core:  # this connection's session
                for effect in receive(frame):
                    handle(agent, session, effect)

    def on_lost(exc: BaseException) -> None:
        agent = agent_ref()
        if agent is None:
            return
        session = agent._session
        if not session.listening or session.core is not core:
            return
        agent._fail(exc)
        if isinstance(exc, ProtocolError):
            session.spawn(conn.close())  # a peer we cannot understand is a peer we stop

    conn.listen(on_frame, on_lost)


def _abandon(loop: asyncio.AbstractEventLoop, conn: Connection, model: ServedModel | None) -> None:
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
