"""The throwaway PostgreSQL server of `pg_support`: it works, it is shared as committed
data should be, and it leaves no process or directory behind."""

from __future__ import annotations

import os
import re
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pg_support
import psycopg
import pytest
from pg_support import postgres_unavailable_reason, running_postgres

_REASON = postgres_unavailable_reason()
pytestmark = pytest.mark.skipif(_REASON is not None, reason=_REASON or "")


def _postmaster(url: str) -> tuple[int, Path]:
    """The postmaster's pid (from postmaster.pid in its data directory) and that directory."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SHOW data_directory").fetchone()
    assert row is not None
    data = Path(row[0])
    pid = int((data / "postmaster.pid").read_text().split("\n", 1)[0])
    os.kill(pid, 0)  # alive
    return pid, data


def _assert_gone(pid: int, data: Path) -> None:
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not data.exists()
    assert not data.parent.exists()


def test_server_round_trip(postgres_url: str) -> None:
    assert re.fullmatch(r"postgresql://[\w.-]+@127\.0\.0\.1:\d+/fleet", postgres_url)
    with psycopg.connect(postgres_url) as conn:
        conn.execute("CREATE TABLE round_trip (id integer PRIMARY KEY, name text NOT NULL)")
        conn.execute("INSERT INTO round_trip VALUES (1, 'one'), (2, 'two')")
        rows = conn.execute("SELECT id, name FROM round_trip ORDER BY id").fetchall()
        assert conn.execute("SELECT current_database()").fetchone() == ("fleet",)
    assert rows == [(1, "one"), (2, "two")]


def test_two_connections_see_committed_writes(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as setup:
        setup.execute("CREATE TABLE shared (value text)")
    with psycopg.connect(postgres_url) as writer, psycopg.connect(postgres_url) as reader:
        writer.execute("INSERT INTO shared VALUES ('from writer')")
        reader.autocommit = True
        assert reader.execute("SELECT value FROM shared").fetchall() == []  # not committed
        writer.commit()
        assert reader.execute("SELECT value FROM shared").fetchall() == [("from writer",)]
        reader.execute("INSERT INTO shared VALUES ('from reader')")
        writer.rollback()  # a fresh snapshot
        rows = writer.execute("SELECT value FROM shared ORDER BY value").fetchall()
    assert rows == [("from reader",), ("from writer",)]


def test_nothing_left_after_exit() -> None:
    started = time.monotonic()
    with running_postgres() as url:
        pid, data = _postmaster(url)
    assert time.monotonic() - started < 30
    _assert_gone(pid, data)


def test_nothing_left_when_the_body_raises() -> None:
    with pytest.raises(RuntimeError, match="body failed"), running_postgres() as url:
        pid, data = _postmaster(url)
        raise RuntimeError("body failed")
    _assert_gone(pid, data)


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_another_port_when_one_is_taken(taken_port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    free = pg_support._free_port
    ports = iter([taken_port])
    monkeypatch.setattr(pg_support, "_free_port", lambda: next(ports, None) or free())
    with running_postgres() as url:
        assert f":{taken_port}/" not in url
        pid, data = _postmaster(url)
    _assert_gone(pid, data)


def test_a_server_that_cannot_start_is_reported_with_its_log(
    taken_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_support, "_free_port", lambda: taken_port)
    made: list[str] = []
    mkdtemp = tempfile.mkdtemp

    def recording_mkdtemp(**kwargs: Any) -> str:
        made.append(mkdtemp(**kwargs))
        return made[-1]

    monkeypatch.setattr(tempfile, "mkdtemp", recording_mkdtemp)
    expected = r"(?s)exited .* on each of 3 ports.*its log:.*could not bind"
    with pytest.raises(RuntimeError, match=expected), running_postgres():
        pytest.fail("no server should have started")  # pragma: no cover
    assert len(made) == 1
    assert not Path(made[0]).exists()
