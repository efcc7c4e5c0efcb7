"""`Agent`: a governed conversation with the harness, and what users call on it.

The agent holds what outlives a session (its settings, compiled policies, host-side
tools, hooks, audit log, and the public record of the conversation: `conversation_id`,
`history`, `turn_count`, `last_stop_reason`) and hands the rest to its collaborators:
`Session` for start and stop, `_turn.run` for each turn, `_answers` for every request
the harness makes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..conversations import conversation_file, default_save_dir
from ..errors import (
    AgentStateError,
    AntigravityError,
    ConfigurationError,
    HarnessConnectionError,
    PromptError,
    TurnCancelledError,
    TurnDeniedError,
)
from ..harness.effects import Chunk, TurnEnded
from ..hooks import Hook, HookRunner
from ..media import Document, Prompt, PromptPart, prompt_parts
from ..types import ChatResponse, Step, StopReason, StreamChunk, UsageMetadata
from . import _turn
from ._builder import AgentBuilder
from ._session import Session, not_found
from ._settings import Settings

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ..containment import ContainmentInForce
    from ..policy import PolicyEnforcer
    from ..structured import OutputGuard
    from ..tools import ToolRunner

__all__ = ["Agent"]

_trigger_logger = logging.getLogger("antigravity_sdk.triggers")
logger = logging.getLogger("antigravity_sdk.containment")


class Agent:
    """A running conversation with the harness, governed by hooks and policies.

    Use `async with agent:` (or `await agent.start()` / `await agent.stop()`), then
    `await agent.chat(prompt)` or `async for chunk in agent.stream(prompt)`.
    """

    def __init__(self, settings: Settings, enforcer: PolicyEnforcer, tools: ToolRunner) -> None:
        self._settings = settings
        self.policy_enforcer = enforcer
        self._hooks: list[Hook] = list(settings.governance.hooks)
        self.hook_runner: HookRunner | None = None
        self.conversation_id = ""
        self.history: list[Step] = []
        self.turn_count = 0
        self._tools = tools
        self._session = Session()  # a new one at each start; the last one stays readable
        self._turn_lock = asyncio.Lock()
        self._output_guard: OutputGuard | None = None
        if settings.prompt.output_type is not None:
            from ..structured import OutputGuard

            self._output_guard = OutputGuard(settings.prompt.output_type)
        # The harness drops documents on their way to an OpenAI-compatible endpoint.
        self._documents_reach_model = not settings.model.served
        self._started = False
        self.last_stop_reason: StopReason | None = None
        """Why the last turn ended (also for `stream()` and a turn that raised)."""
        audit = settings.governance.audit
        self._audit = audit.copy() if audit is not None else None
        self._containment: ContainmentInForce | None = None

    @staticmethod
    def builder() -> AgentBuilder:
        return AgentBuilder()

    @property
    def started(self) -> bool:
        return self._started

    @property
    def usage(self) -> UsageMetadata:
        """What the conversation has cost so far, all turns and trajectories (a resumed
        conversation's earlier turns included)."""
        core = self._session.core
        return core.usage if core is not None else UsageMetadata()

    @property
    def usage_by_trajectory(self) -> dict[str, UsageMetadata]:
        """`usage` by trajectory id: the conversation's id, and each subagent's."""
        core = self._session.core
        return core.usage_by_trajectory if core is not None else {}

    @property
    def harness_pid(self) -> int | None:
        """The process id of the harness this agent spawned, from `start()` to `stop()`;
        None for a remote harness (`RemoteConnection`) or an agent that is not started."""
        pid = getattr(self._session.conn, "pid", None)
        return pid if isinstance(pid, int) else None

    @property
    def containment(self) -> ContainmentInForce | None:
        """The containment the harness runs in, from `start()` on (it stays readable
        after `stop()`); None before the first start and when the agent is uncontained
        (switched off, or unavailable here: `build()` warned)."""
        return self._containment

    def register_hook(self, hook: Hook) -> None:
        """Add a hook (before the PolicyEnforcer); only before `start()`."""
        if self._started:
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
        if self._started:
            raise AgentStateError("the agent is already started")
        save_dir = (self._settings.storage.save_dir or default_save_dir()).resolve()
        self._check_resumable(save_dir)
        if self._audit is not None:
            self._audit.open(self.policy_enforcer.fingerprint)
        self._started = True
        self.conversation_id = ""
        self.history = []
        self.turn_count = 0
        self.last_stop_reason = None
        self._session = Session()
        try:
            await self._session.open(self, save_dir)
        except BaseException:
            await self._shutdown()
            raise

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
        if not self._started:
            return
        try:
            await self._session.end(self.hook_runner)
        finally:
            await self._shutdown()

    async def _shutdown(self) -> None:
        session = self._session
        try:
            await session.wind_down()
        finally:
            await session.close()
            if self._audit is not None:
                self._audit.close()
            if self._containment is not None:
                self._containment.remove_tmp_dir()
                for planted in self._containment.planted():
                    logger.warning(
                        "containment: the agent made %s, which is protected but did not exist "
                        "when it started (a read-only mount needs something to hold): check it "
                        "before git, an editor or a shell runs it",
                        planted,
                    )
            self._started = False

    def _fail(self, exc: BaseException) -> None:
        """The session is over: `exc` is what every call waiting on it, or made later, raises."""
        if (
            isinstance(exc, HarnessConnectionError)
            and self.conversation_id
            and self._settings.process.connection is None
        ):
            # The harness ends its session after a failed turn (a model error, say); the
            # conversation is saved, so say how to go on.
            exc.add_note(
                f"the conversation is saved: an agent built with "
                f".resume({self.conversation_id!r}) over the same save_dir continues it"
            )
        self._session.fail(exc)

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
        turn = _turn.run(self, parts, streaming=False)
        output = self._output_guard
        async with self._turn_lock, contextlib.aclosing(turn):
            if output is not None:
                output.begin_turn()
            async for item in turn:
                if isinstance(item, TurnEnded):
                    response = _turn.finish(self, item)
                    if output is not None:
                        response.output = output.structured_output(
                            response, self.conversation_id, required=output_type is not None
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
        turn = _turn.run(self, parts, streaming=True)
        async with self._turn_lock, contextlib.aclosing(turn):
            async for item in turn:
                if isinstance(item, Chunk):
                    chunk = item.chunk
                    if subagents or chunk.trajectory_id == self.conversation_id:
                        yield chunk
                elif isinstance(item, TurnEnded):
                    _turn.finish(self, item)

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
        turn = self._session.turn
        if turn is None:
            return False
        turn.put(TurnCancelledError("the turn was cancelled (Agent.cancel())"))
        return True

    async def _trigger_send(self, text: str) -> None:
        """A trigger's message as a turn. A denied or failed turn is logged and the trigger
        goes on: a rate limit or one bad turn must not silence it for good. A dead
        session still raises (and ends the trigger): every later turn would fail too."""
        try:
            await self.chat(text)
        except (AntigravityError, TimeoutError) as exc:
            if self._session.failure is not None:
                raise
            what = "was denied" if isinstance(exc, TurnDeniedError) else "failed"
            _trigger_logger.warning("a trigger's turn %s: %s", what, exc)
