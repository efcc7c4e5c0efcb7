"""How frames reach a harness: spawn a local one, or connect to one already running.

Both connections expose the same small surface to the agent — `open()`, `send()`,
`recv()`, `close()`, `stderr_tail()` — and hold no protocol state: that lives in the
sans-I/O `SessionCore`. Every wait here is bounded, and a spawned harness never outlives
its connection: on close it gets stdin EOF (it exits within milliseconds), then
SIGTERM, then SIGKILL; a finalizer kills it if the connection is garbage-collected open,
and because the harness exits when its stdin closes, it also dies with this process.

On Linux the harness runs under `supervisor.py`, so neither do the commands it starts
(backgrounded ones leave its process group): the supervisor kills every descendant when
the harness exits, when it is SIGTERMed (the TERM step of close()), and when this process
dies, even by SIGKILL.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import platform
import signal
import sys
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import ConfigurationError, HarnessConnectionError, ProtocolError
from . import wire
from .install import find_harness
from .wire import decode_frame

if TYPE_CHECKING:
    from websockets.asyncio.client import ClientConnection

__all__ = ["Connection", "LocalConnection", "RemoteConnection"]

_STDERR_LINES = 100
_SUPERVISOR = Path(__file__).with_name("supervisor.py")
_SUPERVISED = sys.platform == "linux"


class Connection(Protocol):
    """What the agent needs from a way of reaching a harness."""

    async def open(self, *, storage_dir: Path, home: Path) -> None: ...
    async def send(self, frame: dict[str, Any]) -> None: ...
    async def recv(self) -> dict[str, Any]: ...
    async def close(self) -> None: ...
    def stderr_tail(self) -> str: ...


class _WebSocketLink:
    """The JSON-over-WebSocket half, shared by local and remote connections."""

    def __init__(self) -> None:
        self._ws: ClientConnection | None = None
        self._streams: set[asyncio.Future[None]] = set()  # streamed sends still going

    async def _connect(self, hosts: tuple[str, ...], port: int, api_key: str) -> None:
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidHandshake

        last: BaseException | None = None
        for attempt in range(6):
            for host in hosts:
                try:
                    self._ws = await asyncio.wait_for(
                        connect(
                            f"ws://{host}:{port}/",
                            additional_headers={"x-goog-api-key": api_key},
                            max_size=None,
                            ping_interval=None,
                            compression=None,
                            open_timeout=5,
                        ),
                        timeout=6,
                    )
                    return
                except (OSError, InvalidHandshake, TimeoutError) as exc:
                    last = exc
            await asyncio.sleep(0.05 * (2**attempt))
        raise HarnessConnectionError(
            f"cannot open the harness WebSocket on port {port}: {last}",
            stderr_tail=self.stderr_tail(),
        )

    def stderr_tail(self) -> str:
        return ""

    async def send(self, frame: dict[str, Any]) -> None:
        from websockets.exceptions import ConnectionClosed

        if self._ws is None:
            raise HarnessConnectionError("the harness connection is not open")
        try:
            if isinstance(frame, wire.StreamedFrame):
                await self._send_streamed(self._ws, frame)
            else:
                await self._ws.send(json.dumps(frame, separators=(",", ":")))
        except ConnectionClosed as exc:
            raise await self._closed_error(exc) from None

    async def _send_streamed(self, ws: ClientConnection, frame: wire.StreamedFrame) -> None:
        """Send `frame` as one fragmented text message, encoding as it goes. Shielded: a
        message cut off between fragments would break the connection, so a cancelled
        caller returns at once while the message still goes out in full (the WebSocket
        holds every other send until it has)."""
        sending = asyncio.ensure_future(ws.send(wire.encode_fragments(frame), text=True))
        self._streams.add(sending)
        sending.add_done_callback(self._streams.discard)
        sending.add_done_callback(_retrieve)
        await asyncio.shield(sending)

    async def recv(self) -> dict[str, Any]:
        """The next frame; HarnessConnectionError when the harness goes away."""
        from websockets.exceptions import ConnectionClosed

        if self._ws is None:
            raise HarnessConnectionError("the harness connection is not open")
        try:
            text = await self._ws.recv()
        except ConnectionClosed as exc:
            raise await self._closed_error(exc) from None
        if isinstance(text, bytes):
            raise ProtocolError("the harness sent a binary WebSocket frame")
        return decode_frame(text)

    async def _closed_error(self, exc: BaseException) -> HarnessConnectionError:
        return HarnessConnectionError(
            f"the harness closed the connection ({exc})", stderr_tail=self.stderr_tail()
        )

    async def _close_socket(self, grace: float = 1.0) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(), timeout=grace)


def _retrieve(sending: asyncio.Future[None]) -> None:
    """Mark a streamed send's error as seen: its caller may no longer be waiting."""
    if not sending.cancelled():
        sending.exception()


def kill_process(pid: int, sig: int = signal.SIGKILL) -> None:
    """Signal `pid` (SIGKILL) if it still exists: the last resort, usable with no event loop."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


class LocalConnection(_WebSocketLink):
    """Spawns `localharness` and talks to it over its loopback WebSocket."""

    def __init__(
        self,
        harness_path: str | os.PathLike[str] | None = None,
        *,
        startup_timeout: float = 30.0,
        env: dict[str, str] | None = None,
    ) -> None:
        super().__init__()
        self._explicit_path = harness_path
        self._startup_timeout = startup_timeout
        self._extra_env = dict(env or {})
        self._proc: asyncio.subprocess.Process | None = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=_STDERR_LINES)
        self._stderr_task: asyncio.Task[None] | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._harness_pid: int | None = None  # the supervisor's child, once it says so

    @property
    def pid(self) -> int | None:
        """The harness process id while it runs (for diagnostics and tests)."""
        return self._harness_pid if self._proc is not None else None

    def stderr_tail(self) -> str:
        return "\n".join(self._stderr)

    async def open(self, *, storage_dir: Path, home: Path) -> None:
        path = find_harness(self._explicit_path)
        for directory in (storage_dir, home):
            os.makedirs(directory, exist_ok=True)
        env = {**os.environ, "HOME": str(home), **self._extra_env}
        argv = [str(path)]
        if _SUPERVISED:
            argv = [sys.executable, "-I", "-S", str(_SUPERVISOR), str(os.getpid()), *argv]
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                start_new_session=True,  # a Ctrl-C for the user's program is ours to handle
            )
        except OSError as exc:
            raise HarnessConnectionError(f"cannot start the harness {path}: {exc}") from exc
        if not _SUPERVISED:
            self._harness_pid = self._proc.pid
        # A supervisor gets SIGTERM: killed, it could not end the harness's commands.
        last = signal.SIGTERM if _SUPERVISED else signal.SIGKILL
        self._finalizer = weakref.finalize(self, kill_process, self._proc.pid, last)
        assert self._proc.stderr is not None
        self._stderr_task = asyncio.create_task(self._drain_stderr(self._proc.stderr))
        try:
            # One deadline for the whole start-up: handshake, then the WebSocket.
            await asyncio.wait_for(self._start(storage_dir), timeout=self._startup_timeout)
        except TimeoutError:
            await self.close()
            raise HarnessConnectionError(
                f"the harness did not complete its handshake in {self._startup_timeout}s",
                stderr_tail=self.stderr_tail(),
            ) from None
        except BaseException:
            await self.close()
            raise

    async def _start(self, storage_dir: Path) -> None:
        port, api_key = await self._handshake(storage_dir)
        await self._connect(("localhost", "127.0.0.1"), port, api_key)

    async def _handshake(self, storage_dir: Path) -> tuple[int, str]:
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        from .. import __version__

        config = wire.pb.InputConfig(
            storage_directory=str(storage_dir),
            client_info=wire.pb.ClientInfo(
                language="python",
                version=__version__,
                language_version=platform.python_version(),
                os=sys.platform,
                os_version=platform.release(),
            ),
        )
        try:
            proc.stdin.write(wire.encode_frame(config))
            await proc.stdin.drain()
            if _SUPERVISED:  # the harness's pid comes first, from the supervisor's fork
                pid = int.from_bytes(await proc.stdout.readexactly(4), "little")
                if pid <= 1:
                    raise ProtocolError(f"the harness supervisor reported pid {pid}")
                self._harness_pid = pid
            header = await proc.stdout.readexactly(4)
            size = int.from_bytes(header, "little")
            if size > wire.MAX_HANDSHAKE_FRAME:
                raise ProtocolError(f"handshake frame of {size} bytes is not an OutputConfig")
            body = await proc.stdout.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            await self._wait_stderr()
            who = "harness" if self._harness_pid is not None else "harness's supervisor"
            raise HarnessConnectionError(
                f"the {who} exited during the handshake ({exc})",
                stderr_tail=self.stderr_tail(),
            ) from None
        output, _ = wire.decode_length_prefixed(header + body, wire.pb.OutputConfig)
        assert output is not None  # the whole frame was read above
        if not output.port or not output.api_key:
            raise ProtocolError(f"incomplete OutputConfig from the harness: port={output.port}")
        return output.port, output.api_key

    async def _drain_stderr(self, stream: asyncio.StreamReader) -> None:
        # An undrained pipe blocks the harness; the tail explains a crash.
        while True:
            try:
                line = await stream.readline()
            except ValueError:  # an over-long line: skip it
                continue
            except OSError:  # the pipe is gone: nothing more will come
                return
            if not line:
                return
            self._stderr.append(line.decode("utf-8", "replace").rstrip())

    async def _wait_stderr(self) -> None:
        if self._stderr_task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(self._stderr_task), timeout=0.5)

    async def _closed_error(self, exc: BaseException) -> HarnessConnectionError:
        proc = self._proc
        if proc is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), timeout=0.3)
        await self._wait_stderr()
        status = ""
        if proc is not None and proc.returncode is not None:
            status = f"; harness exited with status {proc.returncode}"
        return HarnessConnectionError(
            f"the harness closed the connection ({exc}){status}", stderr_tail=self.stderr_tail()
        )

    async def close(self) -> None:
        """Close the socket and end the process: stdin EOF, then SIGTERM, then SIGKILL."""
        # Bounded to ~2 s in all (so `Agent.stop()` stays within 5 s even for a harness
        # that answers nothing): the process is killed anyway, so the WebSocket closing
        # handshake gets little time; a healthy harness exits ~10 ms after stdin EOF.
        await self._close_socket(grace=0.5)
        proc, self._proc = self._proc, None
        try:
            if proc is not None and proc.returncode is None:
                if proc.stdin is not None:
                    with contextlib.suppress(Exception):
                        proc.stdin.close()
                for step, grace in ((proc.terminate, 1.0), (proc.kill, 0.5)):
                    try:
                        await asyncio.wait_for(proc.wait(), timeout=grace)
                        break
                    except TimeoutError:
                        with contextlib.suppress(ProcessLookupError):
                            step()
                else:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(proc.wait(), timeout=1.0)
        finally:
            if proc is not None and proc.returncode is None:
                kill_process(proc.pid)
            if self._finalizer is not None:
                self._finalizer.detach()
            await self._wait_stderr()
            if self._stderr_task is not None:
                self._stderr_task.cancel()


class RemoteConnection(_WebSocketLink):
    """Connects to a harness that is already running (started by something else).

    Defaults come from `ANTIGRAVITY_HARNESS_HOST`, `ANTIGRAVITY_HARNESS_PORT` and
    `ANTIGRAVITY_API_KEY`.
    """

    def __init__(
        self,
        host: str | None = None,
        port: int | None = None,
        api_key: str | None = None,
        *,
        connect_timeout: float = 30.0,
    ) -> None:
        super().__init__()
        self._connect_timeout = connect_timeout
        self.host = host or os.environ.get("ANTIGRAVITY_HARNESS_HOST", "127.0.0.1")
        raw_port = port if port is not None else os.environ.get("ANTIGRAVITY_HARNESS_PORT")
        if raw_port is None:
            raise ConfigurationError("RemoteConnection needs a port (or ANTIGRAVITY_HARNESS_PORT)")
        self.port = int(raw_port)
        key = api_key if api_key is not None else os.environ.get("ANTIGRAVITY_API_KEY")
        if not key:
            raise ConfigurationError("RemoteConnection needs an api_key (or ANTIGRAVITY_API_KEY)")
        self.api_key = key

    async def open(self, *, storage_dir: Path, home: Path) -> None:
        del storage_dir, home  # the remote harness was configured by whoever started it
        try:
            await asyncio.wait_for(
                self._connect((self.host,), self.port, self.api_key), self._connect_timeout
            )
        except TimeoutError:
            raise HarnessConnectionError(
                f"cannot reach the harness at {self.host}:{self.port} "
                f"within {self._connect_timeout}s"
            ) from None

    async def close(self) -> None:
        await self._close_socket()
