"""The routes around Landlock an attacker's pass found, each closed (the real harness):
TCP Fast Open and MPTCP past the port rules, another terminal through `/dev/pts`, System
V shared memory and the kernel keyring of processes outside, a symlink in a directory the
grants were split around, and a writable directory redirected by a symlink an earlier
run planted. One allowed command runs every attempt and reports each in the workspace;
the test checks the outside (the listener, the terminal, the segment, the files)."""

from __future__ import annotations

import ctypes
import json
import os
import socket

import pytest

from antigravity_sdk import ContainmentError, policy
from antigravity_sdk.containment import landlock_abi
from antigravity_sdk.testing import tool_call

from .conftest import AgentFactory, Workspace

pytestmark = pytest.mark.skipif(landlock_abi() < 6, reason="needs Landlock ABI >= 6")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.shmat.restype = ctypes.c_void_p
MARKER = b"SHM-SECRET-outside-agent"

ATTEMPTS = r"""
import ctypes, json, os, socket, sys
port, pts, shmid, dev = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
results = {}
def attempt(name, fn):
    try:
        fn()
        results[name] = "ESCAPED"
    except OSError as exc:
        results[name] = f"refused: {exc}"
def tfo():
    with socket.socket() as s:
        s.sendto(b"TFO", 0x20000000, ("127.0.0.1", port))  # MSG_FASTOPEN
def mptcp():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262) as s:
        s.connect(("127.0.0.1", port))
def terminal():  # the same name here is one of the agent's own terminals, if any
    fd = os.open(pts, os.O_RDWR | os.O_NOCTTY)
    if os.fstat(fd).st_dev != dev:
        raise OSError(0, "another devpts: not the user's terminal")
    os.write(fd, b"INJECTED")
def shm():
    address = libc.shmat(shmid, None, 0)
    if address in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "shmat")
def keyring():
    if libc.syscall(248 if os.uname().machine == "x86_64" else 217, b"user", b"k", b"v", 1, -3) < 0:
        raise OSError(ctypes.get_errno(), "add_key")
for name, fn in [("tfo", tfo), ("mptcp", mptcp), ("terminal", terminal), ("shm", shm),
                 ("keyring", keyring)]:
    attempt(name, fn)
import pty
main, other = pty.openpty()  # the agent's own terminals still work
results["own pty"] = os.ttyname(other)
json.dump(results, open("report.json", "w"))
"""


async def test_the_routes_past_landlock_are_closed(
    make_agent: AgentFactory, env: Workspace
) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    main, other = os.openpty()  # a terminal of the user's, outside the agent
    os.set_blocking(main, False)
    shmid = _libc.shmget(0, 4096, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
    assert shmid >= 0
    address = _libc.shmat(shmid, None, 0)
    ctypes.memmove(address, MARKER, len(MARKER))
    try:
        (env.ws / "attempts.py").write_text(ATTEMPTS)
        port = listener.getsockname()[1]
        pts = os.ttyname(other)
        command = f"python3 attempts.py {port} {pts} {shmid} {os.stat(pts).st_dev}"
        call = tool_call(
            "run_command", CommandLine=command, Cwd=str(env.ws), WaitMsBeforeAsync=10000
        )
        agent, _ = make_agent([call, "done"], policies=[policy.allow_all()])
        async with agent:
            await agent.chat("go")
            assert agent.containment is not None
            assert agent.containment.private == (
                "terminals",
                "System V IPC",
                "network",
                "processes",
                "hostname",
                "/dev/shm",
            )
            assert agent.containment.filtered
        report = json.loads((env.ws / "report.json").read_text())
        for name in ("tfo", "mptcp", "terminal", "shm", "keyring"):
            assert report[name].startswith("refused"), (name, report)
        assert report["own pty"].startswith("/dev/pts/")
        with pytest.raises(BlockingIOError):
            listener.accept()
        with pytest.raises(BlockingIOError):
            os.read(main, 100)  # nothing was written to the user's terminal
        assert ctypes.string_at(address, len(MARKER)) == MARKER
    finally:
        _libc.shmdt(ctypes.c_void_p(address))
        _libc.shmctl(shmid, 0, None)  # IPC_RMID
        os.close(main)
        os.close(other)
        listener.close()


async def test_a_symlink_in_a_split_directory_grants_nothing(
    make_agent: AgentFactory, env: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The workspace holds a credential path (it is HOME), so its grants are split into
    # its entries; a link among them must not become a write grant on its target.
    from antigravity_sdk.harness.install import find_harness

    harness = find_harness()
    (env.ws / ".ssh").mkdir()
    elsewhere = env.root / "elsewhere"
    elsewhere.mkdir()
    (env.ws / "linkdir").symlink_to(elsewhere)
    monkeypatch.setenv("HOME", str(env.ws))
    command = f"echo x > linkdir/pwned; echo x > {elsewhere}/direct; echo x > proj.txt"
    call = tool_call("run_command", CommandLine=command, Cwd=str(env.ws), WaitMsBeforeAsync=5000)
    agent, _ = make_agent(
        [call, "done"], policies=[policy.allow_all()], configure=lambda b: b.harness_path(harness)
    )
    async with agent:
        await agent.chat("go")
    assert not list(elsewhere.iterdir())


async def test_a_writable_directory_redirected_by_a_planted_symlink_is_refused(
    make_agent: AgentFactory, env: Workspace
) -> None:
    # An earlier contained run can write in the workspace: a link there that a save dir
    # configured inside the workspace passes through would move this run's grant.
    other = env.root / "other-project"
    other.mkdir()
    (env.ws / ".agent").mkdir()
    (env.ws / ".agent" / "save").symlink_to(other)
    agent, _ = make_agent(
        ["unused"],
        policies=[policy.allow_all()],
        configure=lambda b: b.save_dir(env.ws / ".agent" / "save"),
    )
    with pytest.raises(ContainmentError, match="leads through the symlink"):
        await agent.start()
    assert not agent.started
    assert not list(other.iterdir())
