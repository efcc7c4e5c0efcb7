"""on_file_change(): one debounced message per burst of changes, bounded shutdown, clear
errors for bad input and for a missing `watchfiles`."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from antigravity_sdk import ConfigurationError
from antigravity_sdk.triggers import FileChange, TriggerRunner, on_file_change


class Inbox:
    def __init__(self) -> None:
        self.messages: list[str] = []
        self.event = asyncio.Event()

    async def __call__(self, text: str) -> None:
        self.messages.append(text)
        self.event.set()


async def settle() -> None:
    """Give the watcher thread time to start watching before a test writes."""
    await asyncio.sleep(0.3)


async def test_a_burst_of_changes_is_one_message_listing_them(tmp_path: Path) -> None:
    inbox = Inbox()
    trigger = on_file_change([tmp_path], "files changed", debounce=0.3)
    async with TriggerRunner([trigger], send=inbox):
        await settle()
        for name in ("a.txt", "b.txt", "c.txt"):
            (tmp_path / name).write_text("x")
            await asyncio.sleep(0.02)
        async with asyncio.timeout(5):
            await inbox.event.wait()
        await asyncio.sleep(0.6)  # nothing more comes for this burst
    assert len(inbox.messages) == 1
    message = inbox.messages[0]
    assert message.startswith("files changed\n\nChanged files:\n")
    for name in ("a.txt", "b.txt", "c.txt"):
        assert f"added: {tmp_path / name}" in message


async def test_callback_gets_the_changes_and_none_sends_nothing(tmp_path: Path) -> None:
    inbox = Inbox()
    seen: list[list[FileChange]] = []
    called = asyncio.Event()

    async def callback(changes: list[FileChange]) -> str | None:
        seen.append(changes)
        called.set()
        kept = [c for c in changes if c.path.suffix == ".py"]
        return f"{len(kept)} python file(s) changed" if kept else None

    async with TriggerRunner([on_file_change([tmp_path], callback, debounce=0.2)], send=inbox):
        await settle()
        (tmp_path / "notes.md").write_text("x")
        async with asyncio.timeout(5):
            await called.wait()
        (tmp_path / "main.py").write_text("x")
        async with asyncio.timeout(5):
            await inbox.event.wait()
    assert seen[0] == [FileChange("added", tmp_path / "notes.md")]
    assert inbox.messages == ["1 python file(s) changed"]


async def test_stop_ends_the_watcher_thread_promptly(tmp_path: Path) -> None:
    before = threading.active_count()
    runner = TriggerRunner([on_file_change([tmp_path], "x")], send=Inbox())
    await runner.start()
    await settle()
    loop = asyncio.get_running_loop()
    started = loop.time()
    await runner.stop()
    assert loop.time() - started < 2.0
    assert threading.active_count() <= before + 1  # at most anyio's idle worker thread


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        ((["/nonexistent/dir"], "x"), {}, ConfigurationError, "no such file"),
        (([], "x"), {}, ConfigurationError, "at least one path"),
        (("/tmp", "x"), {}, TypeError, "list of paths"),
        ((["/tmp"], ""), {}, ConfigurationError, "must not be empty"),
        ((["/tmp"], 3), {}, TypeError, "a message or a callable"),
        ((["/tmp"], "x"), {"debounce": 0}, ConfigurationError, "positive"),
        ((["/tmp"], "x"), {"debounce": float("nan")}, ConfigurationError, "positive"),
        ((["/tmp"], "x"), {"debounce": True}, TypeError, "a number"),
    ],
)
def test_bad_arguments_are_refused(
    args: tuple[Any, ...], kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        on_file_change(*args, **kwargs)


def test_missing_watchfiles_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "watchfiles", None)
    with pytest.raises(ConfigurationError, match=r"pip install 'antigravity-sdk\[watch\]'"):
        on_file_change(["/tmp"], "x")
