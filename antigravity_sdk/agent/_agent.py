"""`Agent`: the facade users hold. It builds, starts and delegates.

The agent keeps what outlives a session (its settings, compiled policies, host-side
tools, hooks, audit log) and makes a `Session` at each `start()`, which owns everything
about the live conversation: its state, its record (`conversation_id`, `history`,
`turn_count`, `last_stop_reason`, the containment in force, the hook runner), the
connection, and each turn. The last session stays readable after `stop()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..conversations import conversation_file, default_save_dir
from ..errors import (
    AgentStateError,
    AntigravityError,
    ConfigurationError,
    PromptError,
    TurnDeniedError,
)
from ..harness.effects import Chunk, TurnEnded
from ..hooks import Hook, HookRunner
from ..media import Document, Prompt, PromptPart, prompt_parts
from ..types import ChatResponse, Step, StopReason, StreamChunk, UsageMetadata
from ._builder import AgentBuilder
from ._lifecycle import SessionState
from ._session import Session, SessionDeps, abandon, not_found
from ._settings import Settings

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ..containment import ContainmentInForce
    from ..policy import PolicyEnforcer
    from ..structured import OutputGuard
    from ..tools import ToolRunner

__all__ = ["Agent"]

_trigger_logger = logging.getLogger("antigravity_sdk.triggers")


class Agent:
    """A running conversation with the harness, governed by hooks and policies.

    Use `async with agent:` (or `await agent.start()` / `await agent.stop()`), then
    `await agent.chat(prompt)` or `async for chunk in agent.stream(prompt)`.
    """

    def __init__(self, settings: Settings, enforcer: PolicyEnforcer, tools: ToolRunner) -> None:
        self._settings = settings
        self.policy_enforcer = enforcer
        self._hooks: list[Hook] = list(settings.governance.hooks)
        self._tools = tools
        self._session: Session | None = None  # a new one at each start; the last stays
        self._finalizer: weakref.finalize[..., Agent] | None = None
        self._turn_lock = asyncio.Lock()
        self._output_guard: OutputGuard | None = None
        if settings.prompt.output_type is not None:
            from ..structured import OutputGuard

            self._output_guard = OutputGuard(settings.prompt.output_type)
        # The harness drops documents on their way to an OpenAI-compatible endpoint.
        self._documents_reach_model = not settings.model.served
        audit = settings.governance.audit
        self._audit = audit.copy() if audit is not None else None  # this agent's own

    @staticmethod
    def builder() -> AgentBuilder:
        return AgentBuilder()

    # -- what the session knows ---------------------------------------------------------

    @property
    def started(self) -> bool:
        session = self._session
        return session is not None and session.state is not SessionState.CLOSED

    @property
    def state(self) -> SessionState | None:
        """Where the conversation is in its life (`SessionState`); None before the first
        `start()`. After `stop()` it is `CLOSED`."""
        return self._session.state if self._session is not None else None

    @property
    def conversation_id(self) -> str:
        """The conversation's id, from `start()` on ("" before)."""
        return self._session.conversation_id if self._session is not None else ""

    @property
    def history(self) -> list[Step]:
        """The conversation's steps: a resumed conversation's earlier ones, then each
        turn's."""
        return self._session.history if self._session is not None else []

    @property
    def turn_count(self) -> int:
        """How many turns completed in this session."""
        return self._session.turn_count if self._session is not None else 0

    @property
    def last_stop_reason(self) -> StopReason | None:
        """Why the last turn ended (also for `stream()` and a turn that raised)."""
        return self._session.last_stop_reason if self._session is not None else None

    @property
    def hook_runner(self) -> HookRunner | None:
        """The hooks of the running session (the user's, then the `PolicyEnforcer`), from
        `start()` on."""
        return self._session.hook_runner if self._session is not None else None

    @hook_runner.setter
    def hook_runner(self, runner: HookRunner) -> None:
        if self._session is None:
            raise AgentStateError("the hook runner is made at start(); register hooks instead")
        self._session.hook_runner = runner

    @property
    def usage(self) -> UsageMetadata:
        """What the conversation has cost so far, all turns and trajectories (a resumed
        conversation's earlier turns included)."""
        return self._session.usage if self._session is not None else UsageMetadata()

    @property
    def usage_by_trajectory(self) -> dict[str, UsageMetadata]:
        """`usage` by trajectory id: the conversation's id, and each subagent's."""
        return self._session.usage_by_trajectory if self._session is not None else {}

    @property
    def harness_pid(self) -> int | None:
        """The process id of the harness this agent spawned, from `start()` to `stop()`;
        None for a remote harness (`RemoteConnection`) or an agent that is not started."""
        conn = self._session.conn if self._session is not None else None
        pid = getattr(conn, "pid", None)
        return pid if isinstance(pid, int) else None

    @property
    def containment(self) -> ContainmentInForce | None:
        """The containment the harness runs in, from `start()` on (it stays readable
        after `stop()`); None before the first start and when the agent is uncontained
        (switched off, or unavailable here: `build()` warned)."""
        return self._session.containment if self._session is not None else None

    def register_hook(self, hook: Hook) -> None:
        """Add a hook (before the PolicyEnforcer); only before `start()`."""
        if self.started:
            raise AgentStateError("register hooks before the agent starts")
        self._hooks.append(hook)

    # -- lifecycle ----------------------------------------------------------------------

    async def __aenter__(self) -> Agent:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Spawn (or connect to) the harness, configure the session, run session_start."""
        if self.started:
            raise AgentStateError("the agent is already started")
        save_dir = (self._settings.storage.save_dir or default_save_dir()).resolve()
        self._check_resumable(save_dir)
        deps = SessionDeps(
            settings=self._settings,
            enforcer=self.policy_enforcer,
            tools=self._tools,
            hooks=tuple(self._hooks),
            audit=self._audit,
            output=self._output_guard,
        )
        session = self._session = Session(deps)
        try:
            await session.open(save_dir, self._trigger_send)
        except BaseException:
            await self._shutdown(session)
            raise
        if session.conn is not None:
            # Nothing the event loop holds refers to the agent (the connection holds the
            # session weakly), so an agent dropped without stop() is collected, and this
            # ends its harness.
            self._finalizer = weakref.finalize(
                self, abandon, asyncio.get_running_loop(), session.conn, session.owned_model
            )

    def _check_resumable(self, save_dir: Path) -> None:
        """Before anything starts: a conversation to resume must be saved. Only a harness
        the agent spawns reads this save dir; a remote one answers for its own."""
        storage = self._settings.storage
        if not storage.resume or storage.create_if_missing or self._settings.process.connection:
            return
        if not conversation_file(save_dir, storage.resume).is_file():
            raise not_found(storage.resume, save_dir)

    async def stop(self) -> None:
        """End the session (bounded: at most a few seconds even if the harness ignores it)."""
        session = self._session
        if session is None or session.state is SessionState.CLOSED:
            return
        try:
            await session.end()
        finally:
            await self._shutdown(session)

    async def _shutdown(self, session: Session) -> None:
        finalizer, self._finalizer = self._finalizer, None
        if finalizer is not None:
            finalizer.detach()
        try:
            await session.wind_down()
        finally:
            await session.close()

    # -- turns --------------------------------------------------------------------------

    async def chat(
        self, prompt: Prompt, *, output_type: type[BaseModel] | None = None
    ) -> ChatResponse:
        """Run one turn; raises TurnDeniedError when a pre_turn hook denies it.

        `prompt`: text, an `Image` / `Document`, or a sequence of them; checked before
        anything is sent (TypeError, ValueError or `PromptError`). With an output type
        (`AgentBuilder.output_type`) the response's `output` is the model's answer
        validated into it, or None if the model gave none. Passing `output_type` (which
        must be the agent's) requires one: a turn without an answer that validates raises
        `OutputValidationError`, with the raw answer attached.
        """
        parts = self._prompt_parts(prompt)
        self._check_output_type(output_type)
        session = self._live_session()
        turn = session.run_turn(parts, streaming=False)
        output = self._output_guard
        async with self._turn_lock, contextlib.aclosing(turn):
            if output is not None:
                output.begin_turn()
            async for item in turn:
                if isinstance(item, TurnEnded):
                    response = session.finish(item)
                    if output is not None:
                        response.output = output.structured_output(
                            response, session.conversation_id, required=output_type is not None
                        )
                    return response
        raise AssertionError("unreachable: a turn always ends with TurnEnded")

    def _check_output_type(self, output_type: object) -> None:
        """Before anything is sent: the finish tool's schema is fixed when the session
        starts, so a turn can only ask for the agent's own output type."""
        if output_type is None:
            return
        from ..structured import check_output_type

        name = check_output_type(output_type).__name__
        configured = self._settings.prompt.output_type
        if output_type is not configured:
            has = f"the output type {configured.__name__}" if configured else "no output type"
            raise ConfigurationError(
                f"chat(output_type={name}): this agent has {has}; the harness fixes the "
                "finish tool's schema when the session starts, so build the agent with "
                f".output_type({name})"
            )

    async def stream(
        self, prompt: Prompt, *, subagents: bool = False
    ) -> AsyncIterator[StreamChunk]:
        """Run one turn, yielding text, thought and tool-call chunks as they arrive.

        Only the agent's own chunks (its trajectory is the conversation's), unless
        `subagents`: then subagents' chunks too, told apart by `chunk.trajectory_id`.
        `prompt` is checked as for `chat()`.
        """
        parts = self._prompt_parts(prompt)
        session = self._live_session()
        turn = session.run_turn(parts, streaming=True)
        async with self._turn_lock, contextlib.aclosing(turn):
            async for item in turn:
                if isinstance(item, Chunk):
                    chunk = item.chunk
                    if subagents or chunk.trajectory_id == session.conversation_id:
                        yield chunk
                elif isinstance(item, TurnEnded):
                    session.finish(item)

    def _prompt_parts(self, prompt: object) -> tuple[PromptPart, ...]:
        """The checked parts; a document only for a model that receives documents."""
        parts = prompt_parts(prompt)
        if not self._documents_reach_model and any(isinstance(p, Document) for p in parts):
            raise PromptError(
                "this model is served on an OpenAI-compatible endpoint, and the harness "
                "drops documents on the way there (only text and images arrive): use a "
                "Gemini model, or put the document's text in the prompt"
            )
        return parts

    async def cancel(self) -> bool:
        """End the running turn now, from any task: its `chat()` (or `stream()`) raises
        `TurnCancelledError`, requests still pending are answered fail-closed, and the
        harness halts the turn. The session stays usable: the next turn starts once the
        harness confirms. Returns whether a turn was running."""
        session = self._session
        return session is not None and session.cancel()

    def _live_session(self) -> Session:
        session = self._session
        if session is None or not self.started:
            raise AgentStateError("start the agent first (async with agent: ...)")
        return session

    async def _trigger_send(self, text: str) -> None:
        """A trigger's message as a turn. A denied or failed turn is logged and the trigger
        goes on: a rate limit or one bad turn must not silence it for good. A dead
        session still raises (and ends the trigger): every later turn would fail too."""
        try:
            await self.chat(text)
        except (AntigravityError, TimeoutError) as exc:
            if self._session is not None and self._session.failure is not None:
                raise
            what = "was denied" if isinstance(exc, TurnDeniedError) else "failed"
            _trigger_logger.warning("a trigger's turn %s: %s", what, exc)
