"""A throwaway PostgreSQL server for the tests: `running_postgres()` initdb's a fresh data
directory in a temporary directory, runs the server on 127.0.0.1 and a free port (as the
`postgres` OS user when the tests run as root, which the server refuses to run as; as the
current user otherwise), creates a database `fleet` and yields its URL; on exit it stops the
server (`pg_ctl stop -m immediate`) and removes the directory, whatever the body did.
`postgres_unavailable_reason()` says why no server can be started here (None if one can)."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

START_TIMEOUT = 30.0  # seconds for the server to accept connections
STOP_TIMEOUT = 15.0  # seconds for `pg_ctl stop` (then SIGKILL)
PORT_ATTEMPTS = 3  # a freed port may be taken again before the server binds it
DATABASE = "fleet"
_BINARIES = ("initdb", "postgres", "pg_ctl", "createdb")
_SETTINGS = (  # loopback only; durability traded for speed
    "listen_addresses=127.0.0.1",
    "fsync=off",
    "synchronous_commit=off",
    "full_page_writes=off",
)


def _pg_bindir() -> Path | None:
    pg_config = shutil.which("pg_config")
    if pg_config is None:
        return None
    try:
        out = subprocess.run(
            [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(out.stdout.strip())


def _as_root() -> bool:
    return os.geteuid() == 0


def _superuser() -> str:
    """The server's OS user and its superuser role (initdb names the role after the user)."""
    import pwd

    return "postgres" if _as_root() else pwd.getpwuid(os.geteuid()).pw_name


@functools.cache
def postgres_unavailable_reason() -> str | None:
    """None when `running_postgres()` can start a server here, else why it cannot."""
    if os.name != "posix" or not hasattr(os, "geteuid"):
        return "PostgreSQL tests need a POSIX system"
    if shutil.which("pg_config") is None:
        return "PostgreSQL server not installed: no `pg_config` on PATH"
    bindir = _pg_bindir()
    if bindir is None or not bindir.is_dir():
        return f"`pg_config --bindir` gave no usable directory ({bindir})"
    for name in _BINARIES:
        if not os.access(bindir / name, os.X_OK):
            return f"PostgreSQL server binaries incomplete: no `{name}` in {bindir}"
    if _as_root():
        import pwd

        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root (PostgreSQL refuses to) and there is no `postgres` OS user"
        if shutil.which("runuser") is None and shutil.which("su") is None:
            return "running as root and neither `runuser` nor `su` is there to run as `postgres`"
    return None


def _as_server_user(argv: list[str]) -> list[str]:
    """`argv` run as the server's OS user: itself unless we are root."""
    if not _as_root():
        return argv
    runuser = shutil.which("runuser")
    if runuser is not None:
        return [runuser, "-u", "postgres", "--", *argv]
    import shlex

    return ["su", "postgres", "-s", "/bin/sh", "-c", shlex.join(argv)]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _postmaster_pid(data: Path) -> int | None:
    try:
        return int((data / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None


def _is_ready(data: Path) -> bool:
    """The postmaster says it accepts connections (line 8 of postmaster.pid, PostgreSQL 10+)."""
    try:
        lines = (data / "postmaster.pid").read_text().splitlines()
    except OSError:
        return False
    return len(lines) >= 8 and lines[7].strip() == "ready"


def _log_tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no server log)"


def _run(argv: list[str], *, cwd: Path, env: dict[str, str], what: str, timeout: float) -> None:
    try:
        done = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"{what} took more than {timeout:.0f} s") from exc
    if done.returncode != 0:
        raise RuntimeError(
            f"{what} failed (exit {done.returncode}):\n{done.stdout}{done.stderr}".rstrip()
        )


def _stop(
    server: subprocess.Popen[bytes], data: Path, bindir: Path, cwd: Path, env: dict[str, str]
) -> None:
    """Stop the server, bounded, leaving no process behind: `pg_ctl stop -m immediate`,
    then SIGKILL for whatever still runs. The launched process (runuser/su, or the
    postmaster itself) is our child, and is reaped here."""
    if server.poll() is not None:
        return
    pid = _postmaster_pid(data)
    pg_ctl = [str(bindir / "pg_ctl"), "stop", "-D", str(data), "-m", "immediate", "-w"]
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            _as_server_user([*pg_ctl, "-t", str(int(STOP_TIMEOUT))]),
            cwd=cwd,
            env=env,
            capture_output=True,
            timeout=STOP_TIMEOUT + 5,
        )
    try:
        server.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        pid = pid or _postmaster_pid(data)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        server.terminate()  # runuser/su pass SIGTERM on to their child
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=STOP_TIMEOUT)


@contextlib.contextmanager
def running_postgres() -> Iterator[str]:
    """A fresh PostgreSQL server for the duration of the block; yields the URL of its
    database `fleet` (`postgresql://USER@127.0.0.1:PORT/fleet`, trust auth), USER being
    `postgres` when run as root, else the current user. Raises RuntimeError (with the
    server log's tail) if the server cannot be started."""
    reason = postgres_unavailable_reason()
    if reason is not None:
        raise RuntimeError(f"cannot start PostgreSQL: {reason}")
    bindir = _pg_bindir()
    assert bindir is not None
    user = _superuser()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C"
    root = Path(tempfile.mkdtemp(prefix="fleet-pg-", dir="/tmp" if os.path.isdir("/tmp") else None))
    try:
        if _as_root():
            shutil.chown(root, "postgres")  # data dir, socket and log all go in here
        data, log = root / "data", root / "server.log"
        initdb = [str(bindir / "initdb"), "-D", str(data), "-U", user, "-A", "trust"]
        initdb += ["-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"]
        _run(_as_server_user(initdb), cwd=root, env=env, what="initdb", timeout=120)
        for attempt in range(1, PORT_ATTEMPTS + 1):
            port = _free_port()
            postgres = [str(bindir / "postgres"), "-D", str(data), "-p", str(port), "-k", str(root)]
            for setting in _SETTINGS:
                postgres += ["-c", setting]
            with log.open("ab") as log_file:
                server = subprocess.Popen(
                    _as_server_user(postgres),
                    cwd=root,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                )
            try:
                deadline = time.monotonic() + START_TIMEOUT
                while not _is_ready(data) and server.poll() is None:
                    if time.monotonic() > deadline:
                        raise RuntimeError(
                            f"PostgreSQL did not accept connections within {START_TIMEOUT:.0f} s;"
                            f" last lines of its log:\n{_log_tail(log)}"
                        )
                    time.sleep(0.05)
                if server.poll() is not None:  # it exited: most likely the port was taken
                    if attempt < PORT_ATTEMPTS:
                        continue
                    raise RuntimeError(
                        f"PostgreSQL exited (code {server.returncode}) on each of"
                        f" {PORT_ATTEMPTS} ports; last lines of its log:\n{_log_tail(log)}"
                    )
                createdb = [str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port)]
                createdb += ["-U", user, DATABASE]
                _run(createdb, cwd=root, env=env, what="createdb", timeout=START_TIMEOUT)
                yield f"postgresql://{user}@127.0.0.1:{port}/{DATABASE}"
                return
            finally:
                _stop(server, data, bindir, root, env)
    finally:
        shutil.rmtree(root, ignore_errors=True)
