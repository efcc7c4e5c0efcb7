"""Fixtures shared by the unit tests: an agent on a scripted harness connection."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pg_support import postgres_unavailable_reason, running_postgres

from antigravity_sdk import Agent, AgentBuilder

CONVERSATION = "fdf309472cb77c8949cdb2128f70545b"


class ScriptedConnection:
    """A `Connection` that plays the harness: it accepts the configuration, acknowledges
    the session end, and delivers the frames the test hands it, from a task of its own
    (an exception handed to it ends the connection, as a broken one would)."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.sending = asyncio.Event()
        self.incoming: asyncio.Queue[dict[str, Any] | BaseException] = asyncio.Queue()
        self.incoming.put_nowait({"initializeConversationResponse": {"cascadeId": CONVERSATION}})
        self._pump: asyncio.Task[None] | None = None

    async def open(self, *, storage_dir: Path, home: Path) -> None:
        return None

    def listen(
        self, on_frame: Callable[[dict[str, Any]], None], on_lost: Callable[[BaseException], None]
    ) -> None:
        async def pump() -> None:
            while True:
                item = await self.incoming.get()
                if isinstance(item, BaseException):
                    on_lost(item)
                    return
                on_frame(item)

        self._pump = asyncio.create_task(pump())

    async def send(self, frame: dict[str, Any]) -> None:
        json.dumps(frame)  # as the real connection does: it must encode
        self.sent.append(frame)
        self.sending.set()
        if "sessionEndRequest" in frame:
            self.incoming.put_nowait({"sessionEndResponse": {}})

    async def close(self) -> None:
        if self._pump is not None:
            self._pump.cancel()

    def stderr_tail(self) -> str:
        return ""

    def sent_with(self, key: str) -> list[dict[str, Any]]:
        """The frames sent so far whose one field is `key` (e.g. "toolResponse")."""
        return [frame for frame in self.sent if key in frame]

    async def wait_for(self, key: str) -> None:
        """Until a frame with `key` is sent (at most 5 s), and a little longer: room for a
        second one, should the agent wrongly send it."""
        async with asyncio.timeout(5):
            while not self.sent_with(key):
                self.sending.clear()
                await self.sending.wait()
        await asyncio.sleep(0.05)


ScriptedAgent = Callable[..., tuple[Agent, ScriptedConnection]]


@pytest.fixture
def scripted_agent(tmp_path: Path) -> ScriptedAgent:
    """Build an (unstarted) agent on a `ScriptedConnection`; `configure` adds to its builder."""

    def make(
        configure: Callable[[AgentBuilder], AgentBuilder] = lambda builder: builder,
    ) -> tuple[Agent, ScriptedConnection]:
        conn = ScriptedConnection()
        builder = (
            Agent.builder()
            .model("scripted", base_url="http://127.0.0.1:9/v1")  # never called
            .save_dir(tmp_path / "save")
            .app_data_dir(tmp_path / "app")
            .connection(conn)
        )
        return configure(builder).build(), conn

    return make


@pytest.fixture(autouse=True)
def state_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets an SDK state directory of its own (`XDG_STATE_HOME`, which the
    processes it starts inherit): no test reads or writes the user's keys or fleet."""
    state = tmp_path_factory.mktemp("xdg-state")
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    monkeypatch.delenv("ANTIGRAVITY_FLEET_SECRET", raising=False)
    return state


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The URL of database `fleet` on a throwaway PostgreSQL server, one per test session
    (`postgresql://USER@127.0.0.1:PORT/fleet`); the test is skipped, with the reason, where
    no server can be started (see `pg_support.postgres_unavailable_reason`)."""
    reason = postgres_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    with running_postgres() as url:
        yield url
