"""How frames reach a harness: spawn a local one, or connect to one already running.

Both connections expose the same small surface to the agent — `open()`, `listen()`,
`send()`, `close()`, `stderr_tail()` — and hold no session state: that lives in the
sans-I/O `SessionCore`. The WebSocket itself is websockets' sans-I/O `ClientProtocol` driven
by an asyncio `Protocol`: each frame is parsed and handed to the agent inside the
transport's `data_received`, and a reply is written when it is sent.

Every wait here is bounded, and a spawned harness never outlives its connection: on close
it gets stdin EOF (it exits within milliseconds), then SIGTERM, then SIGKILL; a finalizer
kills it if the connection is garbage-collected open, and because the harness exits when
its stdin closes, it also dies with this process.

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
import socket
import sys
import weakref
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from websockets.client import ClientProtocol
from websockets.exceptions import InvalidHandshake, InvalidState
from websockets.frames import CloseCode, Frame, Opcode
from websockets.http11 import USER_AGENT
from websockets.protocol import State
from websockets.uri import parse_uri

from ..errors import ConfigurationError, ContainmentError, HarnessConnectionError, ProtocolError
from . import wire
from .install import execute_only, find_harness
from .supervisor import CONTAINMENT_FAILED
from .wire import decode_frame

if TYPE_CHECKING:
    from ..containment import ContainmentInForce

__all__ = ["Connection", "LocalConnection", "RemoteConnection"]

_STDERR_LINES = 100
_SUPERVISOR = Path(__file__).with_name("supervisor.py")
_SUPERVISED = sys.platform == "linux"
SUPERVISED: bool = _SUPERVISED
"""Whether a local harness runs under the supervisor (and so can be contained)."""


class Connection(Protocol):
    """What the agent needs from a way of reaching a harness.

    Incoming frames are pushed, not pulled: after `listen(on_frame, on_lost)` every
    frame goes to `on_frame` synchronously, as it is parsed, and a broken connection or
    a frame that cannot be understood goes to `on_lost` (once; no frame follows it).
    """

    async def open(self, *, storage_dir: Path, home: Path) -> None: ...
    def listen(
        self, on_frame: Callable[[dict[str, Any]], None], on_lost: Callable[[BaseException], None]
    ) -> None: ...
    async def send(self, frame: dict[str, Any]) -> None: ...
    async def close(self) -> None: ...
    def stderr_tail(self) -> str: ...


# One encoder for every frame: `json.dumps(frame, separators=...)` builds a new one per call.
_encode = json.JSONEncoder(separators=(",", ":")).encode
_FRAME, _TEXT, _CONT, _BINARY, _CLOSE = Frame, Opcode.TEXT, Opcode.CONT, Opcode.BINARY, Opcode.CLOSE
_OPEN_TIMEOUT = 5.0  # one attempt at TCP connect + opening handshake
_CLOSE_TIMEOUT = 2.0  # from the harness's close frame to its closing the TCP connection


class _Stream(asyncio.Protocol):
    """websockets' sans-I/O client (`ClientProtocol`) driven by asyncio's transport
    callbacks: bytes in, whole text messages out to the link, all synchronously, with no
    queue, future or task switch per frame."""

    def __init__(self, link: _WebSocketLink, ws: ClientProtocol) -> None:
        self.link = link
        self.ws = ws
        loop = asyncio.get_running_loop()
        self.opened: asyncio.Future[None] = loop.create_future()  # handshake answered or failed
        self.lost: asyncio.Future[None] = loop.create_future()  # the TCP connection is gone
        self.paused = False  # flow control: the transport's buffer is over its high mark
        self._resumed: asyncio.Future[None] | None = None
        self._parts: list[bytes] | None = None  # a fragmented text message, so far
        self._close_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are its own classes, not subclasses of asyncio's.
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:  # asyncio sets it already; uvloop's pseudo-socket too, maybe
            with contextlib.suppress(OSError, AttributeError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        ws = self.ws
        ws.receive_data(data)
        events = ws.events_received()
        writes = ws.data_to_send()  # pongs, the close echo
        if writes:
            self.write(writes)
        message = self.link._message
        for event in events:
            if type(event) is not _FRAME:  # the handshake response (or its failure)
                if not self.opened.done():
                    self.opened.set_result(None)
                continue
            payload: Any = event.data
            opcode = event.opcode
            if opcode is _TEXT:
                if event.fin:
                    message(payload)
                else:
                    self._parts = [payload]
            elif opcode is _CONT:
                parts = self._parts
                if parts is not None:  # None: the rest of a binary message, already refused
                    parts.append(payload)
                    if event.fin:
                        self._parts = None
                        message(b"".join(parts))
            elif opcode is _BINARY:
                self.link._fail(ProtocolError("the harness sent a binary WebSocket frame"))
            elif opcode is _CLOSE and self._close_timer is None:
                # The protocol echoed it; the harness closes the TCP connection next.
                loop = asyncio.get_running_loop()
                self._close_timer = loop.call_later(_CLOSE_TIMEOUT, self.transport.abort)
            # ping and pong: the protocol answered them itself

    def eof_received(self) -> None:
        self.ws.receive_eof()
        self.write(self.ws.data_to_send())
        # None: close the transport; WebSocket peers never write after their EOF.

    def connection_lost(self, exc: Exception | None) -> None:
        self.ws.receive_eof()  # idempotent; the protocol is CLOSED now
        if self._close_timer is not None:
            self._close_timer.cancel()
        self.resume_writing()  # a pending drain returns; the next send says closed
        for future in (self.opened, self.lost):
            if not future.done():
                future.set_result(None)
        self.link._connection_lost(self)

    def pause_writing(self) -> None:
        self.paused = True
        self._resumed = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        self.paused = False
        if self._resumed is not None and not self._resumed.done():
            self._resumed.set_result(None)

    async def drain(self) -> None:
        """Until the transport takes more (flow control); at once when it does now."""
        if self.paused and self._resumed is not None:
            await asyncio.shield(self._resumed)

    def write(self, writes: list[bytes]) -> None:
        """What the protocol has to send; an empty chunk means half-close."""
        transport = self.transport
        for data in writes:
            if data:
                transport.write(data)
            elif transport.can_write_eof():
                with contextlib.suppress(Exception):  # uvloop may raise RuntimeError
                    transport.write_eof()
            else:
                transport.close()


class _WebSocketLink:
    """The JSON-over-WebSocket half, shared by local and remote connections."""

    def __init__(self) -> None:
        self._stream: _Stream | None = None
        self._on_frame: Callable[[dict[str, Any]], None] | None = None
        self._on_lost: Callable[[BaseException], None] | None = None
        self._early: list[dict[str, Any]] = []  # frames before listen()
        self._failure: BaseException | None = None  # reported (or to report) to on_lost
        self._closing = False  # we close it: nothing to report
        self._reporter: asyncio.Task[None] | None = None
        self._sending: asyncio.Future[None] | None = None  # a fragmented message going out
        self._streams: set[asyncio.Future[None]] = set()  # streamed sends still going

    async def _connect(
        self,
        hosts: tuple[str, ...],
        port: int,
        api_key: str,
        dial: list[socket.socket] | None = None,
    ) -> None:
        """Open the WebSocket, retrying with backoff; through `dial` (sockets made inside
        the agent's own network, where the harness listens) when given, one per try."""
        self._stream, self._on_frame, self._on_lost = None, None, None
        self._early, self._failure, self._closing = [], None, False
        last: BaseException | None = None
        tries: list[tuple[str, socket.socket | None]] = [("127.0.0.1", s) for s in dial or ()]
        if not tries:
            tries = [(host, cast("socket.socket | None", None)) for host in hosts] * 6
        for attempt, (host, sock) in enumerate(tries):
            try:
                async with asyncio.timeout(_OPEN_TIMEOUT):
                    self._stream = await self._open(host, port, api_key, sock)
                if sock is not None and dial is not None:
                    dial.remove(sock)  # the transport's now
                return
            except (OSError, InvalidHandshake, TimeoutError) as exc:
                last = exc
                if sock is not None:
                    sock.close()
            if (attempt + 1) % len(hosts) == 0 or sock is not None:
                await asyncio.sleep(0.05 * (2 ** min(attempt, 5)))
        raise HarnessConnectionError(
            f"cannot open the harness WebSocket on port {port}: {last}",
            stderr_tail=self.stderr_tail(),
        )

    async def _open(
        self, host: str, port: int, api_key: str, sock: socket.socket | None = None
    ) -> _Stream:
        """TCP connect and the opening handshake: no extensions (so no compression), no
        message size limit, no pings (the harness sends none and expects none)."""
        ws = ClientProtocol(parse_uri(f"ws://{host}:{port}/"), max_size=None)
        loop = asyncio.get_running_loop()
        if sock is None:
            transport, stream = await loop.create_connection(lambda: _Stream(self, ws), host, port)
        else:
            sock.setblocking(False)
            await loop.sock_connect(sock, (host, port))
            transport, stream = await loop.create_connection(lambda: _Stream(self, ws), sock=sock)
        try:
            request = ws.connect()
            request.headers["x-goog-api-key"] = api_key
            request.headers["User-Agent"] = USER_AGENT
            ws.send_request(request)
            stream.write(ws.data_to_send())
            await asyncio.shield(stream.opened)
            if ws.handshake_exc is not None:
                raise ws.handshake_exc
        except BaseException:
            transport.abort()
            raise
        return stream

    def stderr_tail(self) -> str:
        return ""

    def listen(
        self, on_frame: Callable[[dict[str, Any]], None], on_lost: Callable[[BaseException], None]
    ) -> None:
        """Deliver every frame to `on_frame` from now on (those already here first), and
        the connection's end or a protocol error to `on_lost`, once."""
        self._on_frame, self._on_lost = on_frame, on_lost
        early, self._early = self._early, []
        for frame in early:
            self._message_frame(frame)
        if self._failure is not None:
            on_lost(self._failure)

    def _message(self, data: bytes) -> None:
        """One whole text message: parsed and handed on before the next is looked at."""
        if self._failure is not None:
            return  # nothing is delivered after an error
        try:
            frame = decode_frame(data)
        except ProtocolError as exc:
            self._fail(exc)
            return
        self._message_frame(frame)

    def _message_frame(self, frame: dict[str, Any]) -> None:
        on_frame = self._on_frame
        if on_frame is None:
            self._early.append(frame)
            return
        try:
            on_frame(frame)
        except Exception as exc:  # e.g. a frame the core cannot read: the session is over
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        if self._failure is not None or self._closing:
            return
        self._failure = exc
        if self._on_lost is not None:
            self._on_lost(exc)

    def _connection_lost(self, stream: _Stream) -> None:
        if stream is self._stream and not self._closing and self._failure is None:
            self._reporter = asyncio.get_running_loop().create_task(self._report_lost(stream))

    async def _report_lost(self, stream: _Stream) -> None:
        self._fail(await self._closed_error(stream.ws.close_exc))

    async def send(self, frame: dict[str, Any]) -> None:
        """Encode and write `frame` now; wait only while the transport is full (or a
        streamed message is still going out)."""
        stream = self._stream
        if stream is None:
            raise HarnessConnectionError("the harness connection is not open")
        if isinstance(frame, wire.StreamedFrame):
            await self._send_streamed(stream, frame)
            return
        while self._sending is not None:  # a fragmented message is never interleaved
            await asyncio.shield(self._sending)
        ws = stream.ws
        try:
            ws.send_text(_encode(frame).encode())
        except InvalidState:
            raise await self._closed(stream) from None
        transport = stream.transport
        for data in ws.data_to_send():
            transport.write(data)
        if stream.paused:
            await stream.drain()

    async def _send_streamed(self, stream: _Stream, frame: wire.StreamedFrame) -> None:
        """Send `frame` as one fragmented text message, encoding as it goes. Shielded: a
        message cut off between fragments would break the connection, so a cancelled
        caller returns at once while the message still goes out in full (every other
        send waits until it has)."""
        sending = asyncio.ensure_future(self._fragments(stream, frame))
        self._streams.add(sending)
        sending.add_done_callback(self._streams.discard)
        sending.add_done_callback(_retrieve)
        await asyncio.shield(sending)

    async def _fragments(self, stream: _Stream, frame: wire.StreamedFrame) -> None:
        while self._sending is not None:
            await asyncio.shield(self._sending)
        self._sending = done = asyncio.get_running_loop().create_future()
        ws = stream.ws
        try:
            first = True
            for piece in wire.encode_fragments(frame):
                if first:
                    ws.send_text(piece, fin=False)
                    first = False
                else:
                    ws.send_continuation(piece, fin=False)
                stream.write(ws.data_to_send())
                await stream.drain()
            ws.send_continuation(b"", fin=True)
            stream.write(ws.data_to_send())
            await stream.drain()
        except InvalidState:
            raise await self._closed(stream) from None
        except Exception:
            if ws.state is State.OPEN:  # half a message makes the connection unusable
                ws.fail(CloseCode.INTERNAL_ERROR, "error in fragmented message")
                stream.write(ws.data_to_send())
            raise
        finally:
            self._sending = None
            done.set_result(None)

    async def _closed(self, stream: _Stream) -> HarnessConnectionError:
        """The error for a send on a connection that is closing or closed."""
        with contextlib.suppress(TimeoutError):  # closing: let the handshake finish
            await asyncio.wait_for(asyncio.shield(stream.lost), 1.0)
        ws = stream.ws
        reason = ws.close_exc if ws.state is State.CLOSED else "the connection is closing"
        return await self._closed_error(reason)

    async def _closed_error(self, exc: object) -> HarnessConnectionError:
        return HarnessConnectionError(
            f"the harness closed the connection ({exc})", stderr_tail=self.stderr_tail()
        )

    async def _close_socket(self, grace: float = 1.0) -> None:
        """The closing handshake, bounded by `grace`; then the TCP connection is aborted."""
        stream, self._stream = self._stream, None
        self._closing = True
        if self._reporter is not None:
            self._reporter.cancel()
        if stream is None:
            return
        ws = stream.ws
        try:
            with contextlib.suppress(Exception):  # a timeout or a broken transport: abort
                if ws.state is State.OPEN:
                    if self._sending is not None:
                        ws.fail(CloseCode.INTERNAL_ERROR, "close during fragmented message")
                    else:
                        ws.send_close(CloseCode.NORMAL_CLOSURE)
                    stream.write(ws.data_to_send())
                await asyncio.wait_for(asyncio.shield(stream.lost), timeout=grace)
        finally:
            if not stream.lost.done():
                stream.transport.abort()


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
        containment: ContainmentInForce | None = None,
    ) -> None:
        super().__init__()
        self._explicit_path = harness_path
        self._startup_timeout = startup_timeout
        self._extra_env = dict(env or {})
        self._containment = containment
        self._proc: asyncio.subprocess.Process | None = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=_STDERR_LINES)
        self._stderr_task: asyncio.Task[None] | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._harness_pid: int | None = None  # the supervisor's child, once it says so
        self._channel: socket.socket | None = None  # the sockets come back on it
        self._dial: list[socket.socket] = []  # inside the agent's network: the WebSocket's
        self.listeners: dict[int, socket.socket] = {}
        """The listening sockets the agent serves, by port: the egress proxy's, the
        upstreams' and the forwarded ports', made inside the agent's own network; where it
        has none, the proxy's and the reverse proxies', made here."""

    @property
    def containment(self) -> ContainmentInForce | None:
        """The containment asked for, with what the kernel put in force once started."""
        return self._containment

    @property
    def pid(self) -> int | None:
        """The harness process id while it runs (for diagnostics and tests)."""
        return self._harness_pid if self._proc is not None else None

    def stderr_tail(self) -> str:
        return "\n".join(self._stderr)

    async def open(self, *, storage_dir: Path, home: Path) -> None:
        path = find_harness(self._explicit_path)
        if self._containment is not None:  # its commands must not open its memory
            path = execute_only(path)
            private = not path.stat().st_mode & 0o444
            self._containment = replace(self._containment, harness_memory_private=private)
        for directory in (storage_dir, home):
            os.makedirs(directory, exist_ok=True)
        env = {**os.environ, "HOME": str(home), **self._extra_env}
        argv = [str(path)]
        contained = self._containment
        theirs: socket.socket | None = None
        if contained is not None:
            if not _SUPERVISED:
                raise ContainmentError(f"containment needs Landlock (Linux), not {sys.platform}")
            env = {**contained.environment(env), "HOME": str(home), **self._extra_env}
            self._channel, theirs = socket.socketpair()
            argv += [*contained.supervisor_rules(), f"channel:{theirs.fileno()}"]
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
                pass_fds=(theirs.fileno(),) if theirs is not None else (),
            )
        except OSError as exc:
            raise HarnessConnectionError(f"cannot start the harness {path}: {exc}") from exc
        finally:
            if theirs is not None:
                theirs.close()
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
        dial, self._dial = self._dial, []
        await self._connect(("localhost", "127.0.0.1"), port, api_key, dial)
        for sock in dial:  # what the WebSocket did not need
            sock.close()

    async def _receive_sockets(self, contained: ContainmentInForce) -> None:
        """The listening and dial sockets the supervisor's child made inside the agent's
        own network (`b"AGSOCK" + count`, the descriptors as SCM_RIGHTS), sent before it
        announced itself; where it has no network of its own, listening sockets made here
        on the same ports."""
        channel = self._channel
        assert channel is not None
        channel.setblocking(False)
        loop = asyncio.get_running_loop()
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(channel, 64, 64)
                break
            except BlockingIOError:
                ready = loop.create_future()
                loop.add_reader(channel, ready.set_result, None)
                try:
                    await ready
                finally:
                    loop.remove_reader(channel)
        channel.close()
        self._channel = None
        received = [socket.socket(fileno=fd) for fd in fds]
        ports = contained.listening
        if data[:6] != b"AGSOCK" or len(received) != (data[6] if len(data) > 6 else -1):
            for sock in received:
                sock.close()
            raise ProtocolError("the harness supervisor sent no sockets it could name")
        if received:
            self.listeners = dict(zip(ports, received, strict=False))
            self._dial = received[len(ports) :]
            return
        # No network of its own: the proxy and the reverse proxies listen here, bounded by
        # Landlock's port rules; a spliced endpoint and a forwarded port are reached
        # directly (they are granted by port).
        here = [contained.proxy_port] + [u.port for u in contained.upstreams if not u.spliced]
        for port in here:
            self.listeners[port] = socket.create_server(("127.0.0.1", port), backlog=128)

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
            # The harness's pid comes first, from the supervisor's fork, before its stdin
            # is written: a harness that fails to exec breaks the pipe, and the error must
            # still say the harness (not its supervisor) exited.
            if _SUPERVISED:
                pid = int.from_bytes(await proc.stdout.readexactly(4), "little")
                if pid <= 1:
                    raise ProtocolError(f"the harness supervisor reported pid {pid}")
                self._harness_pid = pid
                if self._containment is not None:  # and what the kernel put in force
                    bits = int.from_bytes(await proc.stdout.readexactly(2), "little")
                    self._containment = self._containment.confined(bits)
                    await self._receive_sockets(self._containment)
            proc.stdin.write(wire.encode_frame(config))
            await proc.stdin.drain()
            header = await proc.stdout.readexactly(4)
            size = int.from_bytes(header, "little")
            if size > wire.MAX_HANDSHAKE_FRAME:
                raise ProtocolError(f"handshake frame of {size} bytes is not an OutputConfig")
            body = await proc.stdout.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            await self._wait_stderr()
            failed = [line for line in self._stderr if line.startswith(CONTAINMENT_FAILED)]
            if failed:
                raise ContainmentError(
                    "the harness could not be contained: "
                    + failed[-1].removeprefix(CONTAINMENT_FAILED).strip()
                    + " (Containment(required=False) runs it uncontained with a warning "
                    "where the kernel offers none; AgentBuilder.containment(None) turns it off)"
                ) from None
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

    async def _closed_error(self, exc: object) -> HarnessConnectionError:
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
            for sock in (*self._dial, *self.listeners.values(), self._channel):
                if sock is not None:
                    sock.close()
            self._dial, self.listeners, self._channel = [], {}, None
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
