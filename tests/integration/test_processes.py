"""No process outlives its agent: the commands the harness starts — backgrounded ones
included, which leave its process group (`setsid`) — end however the agent ends: a normal
stop, a harness killed or frozen, a host process SIGTERMed or SIGKILLed. Checked in the
process table (/proc), with bounded polling."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from antigravity_sdk import Agent, policy
from antigravity_sdk.errors import HarnessConnectionError
from antigravity_sdk.harness import connection as connection_mod
from antigravity_sdk.harness.connection import LocalConnection
from antigravity_sdk.testing import tool_call

from .conftest import AgentFactory, Workspace, harness_pid, host_pid, process_alive, wait_gone

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the harness's commands are supervised on Linux"
)

ROOT = Path(__file__).resolve().parents[2]

# The shell writes its pid, then becomes `sleep`: the pid in the file is the command's.
BACKGROUNDED = "echo $$ > bg.pid; exec sleep 300"
# A daemon of the command's own, in a session of its own: the command ends at once (once
# the daemon has left its process group, which the harness kills when the command ends).
DAEMONIZED = (
    f"setsid sh -c '{BACKGROUNDED}' > /dev/null 2>&1 < /dev/null & "
    "while [ ! -s bg.pid ]; do sleep 0.02; done"
)


def run_command(ws: Path, command: str, wait_ms: int) -> Any:
    return tool_call("run_command", CommandLine=command, Cwd=str(ws), WaitMsBeforeAsync=wait_ms)


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return int(f.read().rsplit(b")", 1)[1].split()[1])


def program_of(pid: int) -> bytes:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().split(b"\0")[0]


def pid_in(path: Path) -> int | None:
    try:
        return host_pid(int(path.read_text()))
    except (FileNotFoundError, ValueError):  # not written yet, or half-written
        return None


async def read_pid(path: Path, within: float = 15.0) -> int:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        pid = pid_in(path)
        if pid is not None:
            return pid
        await asyncio.sleep(0.02)
    raise AssertionError(f"the command wrote no pid to {path} within {within}s")


def kill_if_alive(*pids: int) -> None:
    for pid in pids:
        if process_alive(pid):
            os.kill(pid, signal.SIGKILL)


async def start_backgrounded(
    make_agent: AgentFactory, env: Workspace, command: str = BACKGROUNDED, wait_ms: int = 100
) -> tuple[Agent, asyncio.Task[Any], int]:
    """A started agent whose (unfinished) turn has a command running in the background."""
    agent, _ = make_agent(
        [run_command(env.ws, command, wait_ms), "started", "done"],
        policies=[policy.allow_all()],
    )
    await agent.start()
    turn = asyncio.create_task(agent.chat("start it"))
    pid = await read_pid(env.ws / "bg.pid")
    assert process_alive(pid), "the backgrounded command is not running"
    return agent, turn, pid


async def settle(turn: asyncio.Task[Any]) -> None:
    """The turn ends with the agent (an error, as it was stopped or lost its harness)."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(turn, 5)


# -- the agent stops -------------------------------------------------------------------------


async def test_backgrounded_command_ends_with_a_normal_stop(
    make_agent: AgentFactory, env: Workspace
) -> None:
    agent, turn, pid = await start_backgrounded(make_agent, env)
    try:
        await agent.stop()
        assert await wait_gone(pid), "a backgrounded command outlived stop()"
    finally:
        kill_if_alive(pid)
        await settle(turn)


async def test_daemonized_command_ends_with_a_normal_stop(
    make_agent: AgentFactory, env: Workspace
) -> None:
    """A command's own daemon (setsid, its parent gone at once) is no longer the harness's
    descendant; the harness cannot end it, the supervisor, its subreaper, does."""
    agent, _ = make_agent(
        [run_command(env.ws, DAEMONIZED, 5000), "started"], policies=[policy.allow_all()]
    )
    await agent.start()
    assert (await asyncio.wait_for(agent.chat("start it"), 20)).text == "started"
    pid = await read_pid(env.ws / "bg.pid")
    try:
        assert process_alive(pid)
        await agent.stop()
        assert await wait_gone(pid), "a daemonized command outlived stop()"
    finally:
        kill_if_alive(pid)


# -- the harness dies or freezes ---------------------------------------------------------------


async def test_backgrounded_command_ends_when_the_harness_is_killed(
    make_agent: AgentFactory, env: Workspace
) -> None:
    agent, turn, pid = await start_backgrounded(make_agent, env)
    try:
        os.kill(harness_pid(agent), signal.SIGKILL)
        # Gone with the harness, before anyone calls stop().
        assert await wait_gone(pid), "a backgrounded command outlived its killed harness"
        await agent.stop()
    finally:
        kill_if_alive(pid)
        await settle(turn)


async def test_backgrounded_command_ends_when_the_harness_is_frozen(
    make_agent: AgentFactory, env: Workspace
) -> None:
    agent, turn, pid = await start_backgrounded(make_agent, env)
    harness = harness_pid(agent)
    os.kill(harness, signal.SIGSTOP)
    try:
        started = time.monotonic()
        await agent.stop()
        elapsed = time.monotonic() - started
        assert elapsed <= 5.0, f"stop() took {elapsed:.2f}s"
        assert await wait_gone(harness)
        assert await wait_gone(pid), "a backgrounded command outlived its frozen harness"
    finally:
        kill_if_alive(harness, pid)
        await settle(turn)


# -- the host process dies -------------------------------------------------------------------

HOST = textwrap.dedent(
    """
    import asyncio, json, sys
    from pathlib import Path
    from antigravity_sdk import Agent, policy
    from antigravity_sdk.testing import ScriptedModel, tool_call

    async def main():
        ws, root = Path(sys.argv[1]), Path(sys.argv[2])
        call = tool_call("run_command", CommandLine=sys.argv[3], Cwd=str(ws),
                         WaitMsBeforeAsync=100)
        agent = (Agent.builder().model(ScriptedModel([call, "started", "done"]))
                 .workspaces([ws]).save_dir(root / "save").app_data_dir(root / "app")
                 .policies([policy.allow_all()]).build())
        await agent.start()
        turn = asyncio.create_task(agent.chat("start it"))
        pid_file = ws / "bg.pid"
        while not pid_file.exists() or not pid_file.read_text().strip():
            await asyncio.sleep(0.02)
        harness = agent._session.conn.pid
        print(json.dumps({"harness": harness, "command": int(pid_file.read_text())}), flush=True)
        await turn  # the host is killed long before

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("frozen", [False, True], ids=["running", "frozen"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
async def test_backgrounded_command_ends_when_the_host_dies(
    env: Workspace, sig: int, frozen: bool
) -> None:
    """A healthy harness exits on the stdin EOF the host's death gives it; a frozen one
    never would (and today would stay, frozen, for good): the supervisor ends both."""
    host = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        HOST,
        str(env.ws),
        str(env.root),
        BACKGROUNDED,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    pids: dict[str, int] = {}
    try:
        assert host.stdout is not None
        line = await asyncio.wait_for(host.stdout.readline(), 30)
        pids = json.loads(line)
        pids["command"] = host_pid(pids["command"])
        parent = parent_of(pids["harness"])
        if parent != host.pid:  # the supervisor, which must go too
            pids["supervisor"] = parent
        assert process_alive(pids["command"])
        if frozen:
            os.kill(pids["harness"], signal.SIGSTOP)
        host.send_signal(sig)
        await asyncio.wait_for(host.wait(), 5)
        gone = {name: await wait_gone(pid, 5) for name, pid in pids.items()}
        assert all(gone.values()), f"outlived the host killed by {sig!r}: {gone}"
    finally:
        kill_if_alive(*pids.values())
        if host.returncode is None:
            host.kill()
            await host.wait()


# -- what it costs ---------------------------------------------------------------------------


async def test_the_harness_runs_under_its_supervisor(make_agent: AgentFactory) -> None:
    """The harness's own pid is what the connection reports; its parent is the reaper,
    pid 1 of the agent's own PID namespace, whose parent is the supervisor, a child of
    this process; all are gone after stop()."""
    agent, _ = make_agent(["hi"])
    async with agent:
        harness = harness_pid(agent)
        reaper = parent_of(harness)
        with open(f"/proc/{reaper}/status") as status:  # noqa: ASYNC230
            nspid = next(line.split()[1:] for line in status if line.startswith("NSpid:"))
        assert nspid == [str(reaper), "1"], nspid  # pid 1 of the agent's own namespace
        supervisor = parent_of(reaper)
        assert parent_of(supervisor) == os.getpid()
        assert program_of(harness).endswith(b"localharness")
        assert (await agent.chat("hi")).text == "hi"
    assert not process_alive(harness)
    assert await wait_gone(reaper, 1)
    assert await wait_gone(supervisor, 1)


def environment_of(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        entries = f.read().decode().split("\0")
    return dict(entry.split("=", 1) for entry in entries if "=" in entry)


async def test_the_harness_gets_exactly_the_environment_the_sdk_gives(
    make_agent: AgentFactory, env: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not one the supervisor's Python made: in a C locale it would add LC_CTYPE."""
    for name in ("LC_ALL", "LC_CTYPE"):
        monkeypatch.delenv(name, raising=False)
    connection = LocalConnection(env={"LANG": "C"})
    agent, _ = make_agent(["hi"], configure=lambda b: b.connection(connection))
    async with agent:
        seen = environment_of(harness_pid(agent))
    assert seen == {**os.environ, "HOME": str(env.app / "home"), "LANG": "C"}


# -- start-up failures fail closed ----------------------------------------------------------


async def test_start_fails_with_the_reason_when_the_harness_cannot_be_executed(
    make_agent: AgentFactory, env: Workspace
) -> None:
    not_a_binary = env.root / "localharness"
    not_a_binary.write_text("no shebang, not an executable format\n")
    not_a_binary.chmod(0o755)
    agent, _ = make_agent(["unused"], configure=lambda b: b.harness_path(not_a_binary))
    with pytest.raises(HarnessConnectionError) as info:
        await asyncio.wait_for(agent.start(), 10)
    assert "the harness exited during the handshake" in str(info.value)
    assert "cannot start the harness" in info.value.stderr_tail
    assert "Exec format error" in info.value.stderr_tail
    assert not agent.started


async def test_start_fails_closed_when_the_supervisor_fails(
    make_agent: AgentFactory, env: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No supervisor, no harness: the SDK does not run one it could not clean up after."""
    broken = env.root / "supervisor.py"
    broken.write_text("raise OSError('prctl(36): Invalid argument')\n")
    monkeypatch.setattr(connection_mod, "_SUPERVISOR", broken)
    agent, _ = make_agent(["unused"])
    with pytest.raises(HarnessConnectionError) as info:
        await asyncio.wait_for(agent.start(), 10)
    assert "the harness's supervisor exited during the handshake" in str(info.value)
    assert "prctl(36): Invalid argument" in info.value.stderr_tail
    assert not agent.started
