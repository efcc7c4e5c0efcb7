"""How long `antigravity chat` waits for the model, and what it shows meanwhile.

A turn waits for the model from when it starts, and again each time something the model
asked for is settled (a tool ran, was denied or not approved), until the model shows
something: streamed text, a tool call, the turn's end. While a tool runs or an ASK
question is open, the turn is not waiting for the model, and the clock stops.

`ModelWait` bounds each of those waits (`--timeout`, default `DEFAULT_TIMEOUT`): past it,
the turn is cancelled (`Agent.cancel()`) and the command says that the model, named by
its endpoint, did not answer. The whole turn stays bounded by the agent's `turn_timeout`
too. Meanwhile, on an interactive terminal, a live `waiting for the model … 12 s` line
(erased when the wait ends); elsewhere (a pipe, a log, CI, a dumb terminal) a plain line
every `LINE_EVERY` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Final, TextIO, cast

from rich.live import Live
from rich.text import Text

from ..errors import TurnTimeoutError
from .progress import interactive

if TYPE_CHECKING:
    from rich.console import Console

    from ..harness.config import ModelSettings
    from .report import DecisionReporter

__all__ = [
    "DEFAULT_TIMEOUT",
    "LINE_EVERY",
    "ModelTimeoutError",
    "ModelWait",
    "model_endpoint",
    "turn_timeout",
]

DEFAULT_TIMEOUT: Final = 120.0
"""Seconds to wait for the model each time it is called, when `--timeout` is not given."""

LINE_EVERY: Final = 30.0
"""Off a terminal: a plain `still waiting` line this often."""

_SHOW_AFTER: Final = 1.0  # a model that answers at once shows no indicator
_TICK: Final = 0.2


class ModelTimeoutError(TurnTimeoutError):
    """The model did not answer within `--timeout`; the turn was stopped."""


def turn_timeout(timeout: float) -> float:
    """The agent's `turn_timeout` for a command waiting up to `timeout` for each model
    call: its default, or longer when one wait may take longer."""
    from ..timeouts import Timeouts

    return max(Timeouts().turn, timeout)


def model_endpoint(settings: ModelSettings) -> str:
    """How errors name where the model is: its base URL, or the Gemini API."""
    if settings.base_url is not None:
        return f"the model {settings.name!r} at {settings.base_url}"
    return f"the Gemini API (model {settings.name!r})"


class ModelWait:
    """Bounds, and shows, each wait for the model in one command's turns.

    `reporter` tells it what happens: it calls `activity()` for everything it prints (a
    decision row, a line under one, streamed text), and its records say whether a tool
    call is still unsettled (`ran is None`: running, or its question open). The indicator
    goes to `console`: live on an interactive terminal, plain lines elsewhere.
    """

    def __init__(
        self,
        reporter: DecisionReporter,
        endpoint: str,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        console: Console,
    ) -> None:
        self.reporter = reporter
        self.endpoint = endpoint
        self.timeout = timeout
        self.console = console
        self.live = interactive(cast("TextIO", console.file)) and not console.is_dumb_terminal
        self.expired = False  # the last turn was cancelled for want of an answer
        self._since: float | None = None  # the last sign of the model; None: no turn
        self._first = 0  # the turn's first record
        self._lines = 0  # plain lines shown in this wait
        self._display: Live | None = None
        reporter.activity = self.activity

    def activity(self) -> None:
        """Something came (or is about to be printed): hide the indicator; a wait that
        follows starts from now."""
        self.hide()
        if self._since is not None:
            self._since = time.monotonic()
            self._lines = 0

    def waited(self) -> float | None:
        """Seconds this turn has been waiting for the model; None when it is not (no
        turn, a tool running, a question open)."""
        if self._since is None:
            return None
        if any(r.ran is None for r in self.reporter.records[self._first :]):
            return None
        return time.monotonic() - self._since

    def error(self) -> ModelTimeoutError:
        return ModelTimeoutError(
            f"no answer from {self.endpoint} within {self.timeout:g} s, so the turn was "
            "stopped; check that the endpoint is up and serves the model, or give it "
            "longer with --timeout SECONDS"
        )

    @contextlib.asynccontextmanager
    async def turn(self, cancel: Callable[[], Awaitable[bool]]) -> AsyncIterator[None]:
        """While inside, a turn runs: watch it, and past the bound call `cancel`
        (`Agent.cancel`) until it returns True. `expired` then says why it ended."""
        self.expired = False
        self._first = len(self.reporter.records)
        self._since = time.monotonic()
        self._lines = 0
        watcher = asyncio.get_running_loop().create_task(self._watch(cancel))
        try:
            yield
        finally:
            self._since = None
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([watcher], timeout=1.0)
            self.hide()

    async def _watch(self, cancel: Callable[[], Awaitable[bool]]) -> None:
        while True:
            await asyncio.sleep(_TICK)
            waited = self.waited()
            if self.expired or (waited is not None and waited >= self.timeout):
                self.hide()
                self.expired = True
                if await cancel():  # False: no turn to cancel yet; try again
                    return
            elif waited is None:
                self.hide()
            else:
                self._show(waited)

    def _label(self, waited: float) -> Text:
        return Text(f"waiting for {self.endpoint} … {waited:.0f} s", style="dim")

    def _show(self, waited: float) -> None:
        if waited < _SHOW_AFTER:
            return
        if not self.live:
            shown = int(waited // LINE_EVERY)
            if shown > self._lines:
                self._lines = shown
                self.console.print(
                    Text(
                        f"still waiting for {self.endpoint}: {shown * LINE_EVERY:.0f} s "
                        f"(--timeout {self.timeout:g})",
                        style="dim",
                    )
                )
            return
        if self.reporter.mid_line:  # streamed text ends mid-line: no room for it
            return
        if self._display is None:
            self._display = Live(
                self._label(waited),
                console=self.console,
                transient=True,
                auto_refresh=False,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._display.start(refresh=True)
        else:
            self._display.update(self._label(waited), refresh=True)

    def hide(self) -> None:
        """Erase the live indicator, if shown."""
        display, self._display = self._display, None
        if display is not None:
            display.stop()
            self.console.file.flush()
