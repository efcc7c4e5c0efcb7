"""The CLI's event loop: uvloop when the `fast` extra is installed, asyncio otherwise or
when `ANTIGRAVITY_LOOP=asyncio` says so."""

from __future__ import annotations

import asyncio
import sys

import pytest

from antigravity_sdk.cli._commands import LOOP_ENV, event_loop_name, run_loop


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_the_cli_runs_on_uvloop_when_it_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("uvloop")
    monkeypatch.delenv(LOOP_ENV, raising=False)
    assert event_loop_name() == "uvloop"
    assert run_loop(_loop_module()).startswith("uvloop")


def test_antigravity_loop_asyncio_opts_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LOOP_ENV, " AsyncIO ")
    assert event_loop_name() == "asyncio"
    assert run_loop(_loop_module()).startswith("asyncio")


def test_without_uvloop_the_cli_uses_asyncio(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LOOP_ENV, raising=False)
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as if not installed
    assert event_loop_name() == "asyncio"
    assert run_loop(_loop_module()).startswith("asyncio")
