"""Triggers: background jobs that push messages into a running agent.

A `Trigger` is anything with ``async run(ctx)``; it runs as its own asyncio task for as
long as the agent runs and calls ``await ctx.send(text)`` whenever it wants the agent to
hear something (a timer fired, a file changed, a queue delivered).

`TriggerRunner` owns those tasks. A trigger that raises is logged on
`antigravity_sdk.triggers` and is not restarted: a trigger that fails once would most
likely fail again, and a restart loop would flood the agent and the log. Catch inside
your trigger whatever it should survive. Returning from `run` simply ends the trigger.

In an `Agent`, a turn that a message starts and that is denied (a pre_turn hook, such
as a rate limit) or fails does not raise from `ctx.send`: it is logged as a WARNING on
`antigravity_sdk.triggers` and the trigger keeps running. Only a session that is gone
raises, since every later message would fail the same way.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import os
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Protocol, runtime_checkable

from .errors import AgentStateError, ConfigurationError

__all__ = ["FileChange", "Trigger", "TriggerContext", "TriggerRunner", "every", "on_file_change"]

logger = logging.getLogger("antigravity_sdk.triggers")

SendFn = Callable[[str], Awaitable[None]]
Callback = Callable[[], str | Awaitable[str | None] | None]


class TriggerContext:
    """What a trigger gets: a way to push a message into the agent."""

    __slots__ = ("_send",)

    def __init__(self, send: SendFn) -> None:
        self._send = send

    async def send(self, text: str) -> None:
        """Push `text` into the agent as a user message."""
        if not isinstance(text, str):
            raise TypeError(f"a trigger can only send str, got {type(text).__name__}")
        await self._send(text)


@runtime_checkable
class Trigger(Protocol):
    """A background job; subclass it or just provide ``async run(ctx)``.

    `run` is cancelled when the runner stops, so it may loop forever.
    """

    async def run(self, ctx: TriggerContext) -> None: ...


class _Every:
    """The trigger `every()` returns."""

    def __init__(self, seconds: float, action: str | Callback) -> None:
        self.seconds = seconds
        self.action = action

    async def run(self, ctx: TriggerContext) -> None:
        loop = asyncio.get_running_loop()
        next_at = loop.time() + self.seconds
        while True:
            await asyncio.sleep(max(0.0, next_at - loop.time()))
            message = await self._message()
            if message is not None:
                await ctx.send(message)
            # Fixed rate without drift; if a tick overran, skip the missed ones (no burst).
            next_at += self.seconds
            now = loop.time()
            if next_at <= now:
                next_at = now + self.seconds

    async def _message(self) -> str | None:
        if isinstance(self.action, str):
            return self.action
        if inspect.iscoroutinefunction(self.action):
            result = await self.action()
        else:
            # A sync callback runs in a worker thread so it cannot stall the event loop.
            result = await asyncio.to_thread(self.action)
            if inspect.isawaitable(result):
                result = await result
        if result is not None and not isinstance(result, str):
            raise TypeError(
                f"every() callback {self.action!r} returned {type(result).__name__}; "
                "expected str or None"
            )
        return result

    def __repr__(self) -> str:
        return f"every({self.seconds!r}, {self.action!r})"


def every(seconds: float, callback_or_message: str | Callback) -> Trigger:
    """A trigger that fires every `seconds`, the first time `seconds` after start.

    With a string it sends that message each time. With a callback (sync or async, no
    arguments) it sends what the callback returns, or nothing when it returns None; a sync
    callback runs in a worker thread. The schedule is fixed-rate: a slow tick does not
    shift later ones, and ticks missed while busy are skipped rather than bunched up.
    A callback that raises ends the trigger (see the module docs).
    """
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise TypeError(f"every(): seconds must be a number, got {seconds!r}")
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigurationError(f"every(): seconds must be positive and finite, got {seconds!r}")
    if isinstance(callback_or_message, str):
        if not callback_or_message:
            raise ConfigurationError("every(): the message must not be empty")
    elif not callable(callback_or_message):
        raise TypeError(f"every(): expected a message or a callable, got {callback_or_message!r}")
    return _Every(float(seconds), callback_or_message)


@dataclass(frozen=True, slots=True)
class FileChange:
    """One change `on_file_change` saw: `kind` is "added", "modified" or "deleted"."""

    kind: str
    path: Path


FileCallback = Callable[[list[FileChange]], str | Awaitable[str | None] | None]

_WATCH_MISSING = (
    "on_file_change() needs the 'watchfiles' package: pip install 'antigravity-sdk[watch]'"
)


class _OnFileChange:
    """The trigger `on_file_change()` returns."""

    def __init__(
        self, paths: tuple[Path, ...], action: str | FileCallback, debounce_ms: int, recursive: bool
    ) -> None:
        self.paths = paths
        self.action = action
        self.debounce_ms = debounce_ms
        self.recursive = recursive

    async def run(self, ctx: TriggerContext) -> None:
        import watchfiles

        # Cancelling the task sets awatch's stop event, which ends its watcher thread.
        async for raw in watchfiles.awatch(
            *self.paths, debounce=self.debounce_ms, recursive=self.recursive
        ):
            changes = sorted(
                (FileChange(change.name, Path(path)) for change, path in raw),
                key=lambda c: (str(c.path), c.kind),
            )
            message = await self._message(changes)
            if message is not None:
                await ctx.send(message)

    async def _message(self, changes: list[FileChange]) -> str | None:
        if isinstance(self.action, str):
            listed = "\n".join(f"- {c.kind}: {c.path}" for c in changes)
            return f"{self.action}\n\nChanged files:\n{listed}"
        if inspect.iscoroutinefunction(self.action):
            result = await self.action(changes)
        else:
            result = await asyncio.to_thread(self.action, changes)
            if inspect.isawaitable(result):
                result = await result
        if result is not None and not isinstance(result, str):
            raise TypeError(
                f"on_file_change() callback {self.action!r} returned "
                f"{type(result).__name__}; expected str or None"
            )
        return result

    def __repr__(self) -> str:
        return f"on_file_change({[str(p) for p in self.paths]!r}, {self.action!r})"


def on_file_change(
    paths: Sequence[str | os.PathLike[str]],
    callback_or_message: str | FileCallback,
    *,
    debounce: float = 0.5,
    recursive: bool = True,
) -> Trigger:
    """A trigger that fires when files under `paths` change, once per burst of changes.

    Changes are gathered until none has come for `debounce` seconds (a save that writes
    several files is one message). With a string it sends that text followed by the list
    of changed files; with a callback (sync or async, given the `FileChange`s) it sends
    what the callback returns, or nothing for None. Built on `watchfiles` (the `watch`
    extra), which skips the usual noise (`.git`, `__pycache__`, editor swap files).

    Files the agent itself writes under `paths` fire it too: watch what the agent does
    not write, or return None from the callback for its own changes.
    """
    try:
        import watchfiles  # noqa: F401
    except ImportError:
        raise ConfigurationError(_WATCH_MISSING) from None
    if isinstance(paths, str | os.PathLike):
        raise TypeError("on_file_change(): paths must be a list of paths, not one path")
    resolved = tuple(Path(p).expanduser().resolve() for p in paths)
    if not resolved:
        raise ConfigurationError("on_file_change(): give at least one path to watch")
    missing = [str(p) for p in resolved if not p.exists()]
    if missing:
        raise ConfigurationError(f"on_file_change(): no such file or directory: {missing}")
    if isinstance(debounce, bool) or not isinstance(debounce, int | float):
        raise TypeError(f"on_file_change(): debounce must be a number, got {debounce!r}")
    if not math.isfinite(debounce) or debounce <= 0:
        raise ConfigurationError(
            f"on_file_change(): debounce must be positive and finite, got {debounce!r}"
        )
    if isinstance(callback_or_message, str):
        if not callback_or_message:
            raise ConfigurationError("on_file_change(): the message must not be empty")
    elif not callable(callback_or_message):
        raise TypeError(
            f"on_file_change(): expected a message or a callable, got {callback_or_message!r}"
        )
    return _OnFileChange(resolved, callback_or_message, max(1, round(debounce * 1000)), recursive)


class TriggerRunner:
    """Runs each trigger as its own task, from `start()` until `stop()`.

    Usable as ``async with TriggerRunner(triggers, send=send):`` as well as through
    `start(send)` / `stop()`.
    """

    def __init__(
        self,
        triggers: Iterable[Trigger] = (),
        *,
        send: SendFn | None = None,
        stop_timeout: float = 5.0,
    ) -> None:
        self._triggers: list[Trigger] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._ctx: TriggerContext | None = None
        self._send = send
        self.stop_timeout = stop_timeout
        for t in triggers:
            self.add(t)

    @property
    def triggers(self) -> tuple[Trigger, ...]:
        return tuple(self._triggers)

    @property
    def running(self) -> bool:
        """True between `start()` and `stop()`, even if every trigger has ended."""
        return self._ctx is not None

    def add(self, trigger: Trigger) -> None:
        """Add a trigger; if the runner is already running, the trigger starts now."""
        if not isinstance(trigger, Trigger):
            raise TypeError(f"not a trigger (no async run(ctx) method): {trigger!r}")
        self._triggers.append(trigger)
        if self._ctx is not None:
            self._spawn(trigger, self._ctx)

    async def start(self, send: SendFn | None = None) -> None:
        """Start one task per trigger; `send` delivers their messages to the agent."""
        if self._ctx is not None:
            raise AgentStateError("TriggerRunner is already running")
        send = send if send is not None else self._send
        if send is None:
            raise TypeError("TriggerRunner.start() needs a send function")
        self._ctx = TriggerContext(send)
        for trigger in self._triggers:
            self._spawn(trigger, self._ctx)

    async def stop(self) -> None:
        """Cancel every trigger task and wait for them, at most `stop_timeout` seconds.

        A trigger that ignores cancellation past the timeout is logged and abandoned, so
        shutting an agent down never hangs on a misbehaving trigger.
        """
        self._ctx = None
        tasks, self._tasks = self._tasks, set()
        if not tasks:
            return
        for task in tasks:
            task.cancel()
        _, pending = await asyncio.wait(tasks, timeout=self.stop_timeout)
        for task in pending:
            logger.warning(
                "trigger task %s did not stop within %.1f s; abandoning it",
                task.get_name(),
                self.stop_timeout,
            )

    def _spawn(self, trigger: Trigger, ctx: TriggerContext) -> None:
        task = asyncio.create_task(_run_trigger(trigger, ctx), name=f"trigger {trigger!r}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def __aenter__(self) -> TriggerRunner:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


async def _run_trigger(trigger: Trigger, ctx: TriggerContext) -> None:
    try:
        await trigger.run(ctx)
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.exception("trigger %r failed; it will not be restarted", trigger)
    else:
        logger.debug("trigger %r finished", trigger)
