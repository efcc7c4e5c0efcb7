"""Progress of long steps (the harness download) on the command line: a `rich` bar with
bytes, total and rate on an interactive terminal; a few plain lines elsewhere (a pipe,
a log, CI), where a bar would only fill the log with redraws."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

__all__ = ["LineProgress", "RichProgress", "install_progress"]


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def interactive(stream: TextIO) -> bool:
    """Whether `stream` is a terminal a person watches: a TTY, and not in CI (`CI` set to
    anything but false/0, as CI services do)."""
    ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
    try:
        return stream.isatty() and not ci
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class LineProgress:
    """Plain lines: each step, the download's size when it starts, and its rate when done."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._began: float | None = None
        self._done = 0
        self._total: int | None = None

    def step(self, message: str) -> None:
        self._finish_download()
        self.stream.write(f"==> {message}\n")
        self.stream.flush()

    def download(self, done: int, total: int | None) -> None:
        if self._began is None:
            self._began = time.monotonic()
            size = _megabytes(total) if total is not None else "size unknown"
            self.stream.write(f"    {size}\n")
            self.stream.flush()
        self._done, self._total = done, total

    def close(self) -> None:
        self._finish_download()

    def _finish_download(self) -> None:
        if self._began is None:
            return
        seconds = max(time.monotonic() - self._began, 1e-6)
        self.stream.write(
            f"    downloaded {_megabytes(self._done)} in {seconds:.1f} s "
            f"({_megabytes(round(self._done / seconds))}/s)\n"
        )
        self.stream.flush()
        self._began = None


class RichProgress:
    """Steps as lines, the download as a bar: done/total bytes, rate, time left."""

    def __init__(self, stream: TextIO) -> None:
        from rich.console import Console

        self.console = Console(file=stream)
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def step(self, message: str) -> None:
        self._finish_download()
        self.console.print(f"==> {message}", highlight=False, markup=False)

    def download(self, done: int, total: int | None) -> None:
        if self._bar is None:
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )

            self._bar = Progress(
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
                console=self.console,
            )
            self._task = self._bar.add_task("download", total=total)
            self._bar.start()
        assert self._task is not None
        self._bar.update(self._task, completed=done, total=total)

    def close(self) -> None:
        self._finish_download()

    def _finish_download(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def install_progress(stream: TextIO) -> LineProgress | RichProgress:
    """The progress display for `stream`: a bar on an interactive terminal, else lines.
    Call `close()` when done."""
    return RichProgress(stream) if interactive(stream) else LineProgress(stream)
