"""What a contained agent's session keeps outside the agent: the SDK's own files, which
the containment holds read-only where they lie inside a writable root, and the servers of
the agent's only way out (the egress proxy, and the model's and MCP servers' endpoints,
which add the credentials the harness is never given)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import socket
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from ..audit import AuditLog
    from ..containment import ContainmentInForce
    from ..egress import EgressProxy, Refusal, ReverseProxy

logger = logging.getLogger("antigravity_sdk.egress")

_LINGER = 2.0  # a refused connection, for the agent to read the 502 and hang up


def controls(
    audit: AuditLog | None, policy_files: Iterable[str], hooks: Iterable[object]
) -> list[Path]:
    """The files whose change would change how this agent, or its next run, is governed:
    the audit log, the policy files it loaded, the modules of its hooks (with their
    bytecode caches), the SDK's own package, and the environment of the interpreter
    running it (a `.pth` file or an edited dependency in a project's `.venv` would run in
    the SDK's process, which holds the keys)."""
    import site
    import sysconfig

    found = [Path(p) for p in policy_files]
    found += [Path(sys.prefix), Path(sysconfig.get_paths()["purelib"])]
    found += [Path(p) for p in (*site.getsitepackages(), site.getusersitepackages())]
    found += [Path(p) for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]
    if audit is not None:
        found.append(audit.path)
    modules = {type(hook).__module__ for hook in hooks} | {__name__.partition(".")[0]}
    for name in modules:
        module = sys.modules.get(name)
        if module is None or name == "__main__":
            continue
        with contextlib.suppress(TypeError, OSError):
            source = Path(inspect.getfile(module)).resolve()
            if source.name == "__init__.py":  # a package: all of it
                found.append(source.parent)
            else:  # a module, and the bytecode Python would load instead of it
                found += [source, source.parent / "__pycache__"]
    return found


class Egress:
    """The agent's way out, served on the listening sockets the harness's supervisor made
    inside the agent's network (by port): the egress proxy, then per `Upstream` a reverse
    proxy that adds its credential, or a splice where there is nothing to add (a loopback
    endpoint on the same port: bytes pass as they are), and a splice per forwarded port.
    Each refusal is logged (the CLI shows it as a row) and handed to `on_refusal` (the
    audit log's line)."""

    def __init__(self, on_refusal: Callable[[Refusal], None]) -> None:
        self._on_refusal = on_refusal
        self._proxies: list[EgressProxy | ReverseProxy] = []
        self._splices: list[asyncio.Server] = []
        self._open: set[_Downstream] = set()  # spliced connections, closed with the splices

    async def start(
        self, contained: ContainmentInForce, listeners: Mapping[int, socket.socket]
    ) -> None:
        from ..egress import EgressProxy, ReverseProxy

        proxies: list[tuple[EgressProxy | ReverseProxy, socket.socket]] = []
        splices: list[tuple[tuple[str, int], str, socket.socket]] = []
        if contained.proxy_port in listeners:
            proxy = EgressProxy(contained.hosts, on_refusal=self._refused)
            proxies.append((proxy, listeners[contained.proxy_port]))
        for upstream in contained.upstreams:
            sock = listeners.get(upstream.port)
            if sock is None:  # no network of its own: the harness reaches it directly
                continue
            if upstream.spliced:
                splices.append((upstream.address, upstream.origin, sock))
            else:
                reverse = ReverseProxy(
                    upstream.origin,
                    headers=upstream.headers,
                    scope=upstream.scope,
                    on_refusal=self._refused,
                )
                proxies.append((reverse, sock))
        for port in contained.forwarded:
            if port in listeners:
                splices.append((("127.0.0.1", port), "", listeners[port]))
        loop = asyncio.get_running_loop()
        for server, sock in proxies:
            self._proxies.append(server)
            await server.serve(sock)
        for address, endpoint, sock in splices:
            factory = functools.partial(_Downstream, address, endpoint, self._open)
            self._splices.append(await loop.create_server(factory, sock=sock))

    def _refused(self, refusal: Refusal) -> None:
        logger.warning(
            "containment refused a connection to %s port %s: %s",
            refusal.host,
            refusal.port,
            refusal.reason,
            extra={"refusal": refusal},
        )
        self._on_refusal(refusal)

    async def aclose(self) -> None:
        proxies, self._proxies = self._proxies, []
        for proxy in proxies:
            with contextlib.suppress(Exception):
                await proxy.aclose()
        splices, self._splices = self._splices, []
        for splice in splices:
            splice.close()
        # Since Python 3.12 a server's wait_closed() also waits for its connections: close
        # them (a model request still in flight when the agent stops, say) rather than
        # wait for them.
        for downstream in list(self._open):
            downstream.close()
        for splice in splices:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(splice.wait_closed(), 1.0)


class _Pipe(asyncio.Protocol):
    """One end of a splice: what it receives is written to the other end as it comes
    (a transport-level copy: no parsing, no task, no buffer of its own), and each end's
    back-pressure pauses the other's reading."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: _Pipe | None = None
        self.early = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        peer = self.peer
        if peer is not None and peer.transport is not None:
            peer.transport.write(data)
        else:  # before the upstream is connected (uvloop reads despite pause_reading
            # in connection_made): held, and reading paused now that it is effective
            self.early += data
            if self.transport is not None:
                self.transport.pause_reading()

    def eof_received(self) -> bool:
        peer = self.peer
        if peer is not None and peer.transport is not None and peer.transport.can_write_eof():
            peer.transport.write_eof()
            return True  # half-closed: the other way may still carry the answer
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        peer = self.peer
        if peer is not None and peer.transport is not None:
            peer.transport.close()

    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()


class _Downstream(_Pipe):
    """A connection from the agent: it reads nothing until its upstream is connected
    (bounded), then the two ends are spliced. An `endpoint` (HTTP) that cannot be reached
    is answered with a 502 naming it and why, as a reverse proxy does."""

    def __init__(self, address: tuple[str, int], endpoint: str, live: set[_Downstream]) -> None:
        super().__init__()
        self.address = address
        self.endpoint = endpoint
        self.live = live
        self.refused = False  # answered 502: what the agent sends is dropped

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.live.add(self)
        self.transport.pause_reading()  # type: ignore[union-attr]
        self.opening = asyncio.ensure_future(self._open())  # held: a task is kept weakly

    async def _open(self) -> None:
        loop = asyncio.get_running_loop()
        up = _Pipe()
        try:
            await asyncio.wait_for(loop.create_connection(lambda: up, *self.address), 10.0)
        except (OSError, TimeoutError) as exc:
            if self.transport is not None:
                if self.endpoint:
                    from ..egress import plain_response, unreachable

                    self._refuse(plain_response(502, unreachable(self.endpoint, exc)))
                else:
                    self.transport.close()
            return
        up.peer, self.peer = self, up
        assert up.transport is not None
        if self.transport is None or self.transport.is_closing():
            up.transport.close()
            return
        if self.early:
            up.transport.write(bytes(self.early))
            self.early.clear()
        self.transport.resume_reading()

    def _refuse(self, response: bytes) -> None:
        """Answer, half-close, and read (dropping it) what the agent sent until it hangs
        up, bounded: closing with its request unread would reset the connection, and a
        client told "connection reset" retries with backoff (for minutes) where a 502 is
        reported at once."""
        transport = self.transport
        assert transport is not None
        self.early.clear()
        self.refused = True
        transport.write(response)
        if transport.can_write_eof():
            transport.write_eof()
        transport.resume_reading()
        asyncio.get_running_loop().call_later(_LINGER, transport.close)

    def data_received(self, data: bytes) -> None:
        if not self.refused:
            super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.live.discard(self)
        super().connection_lost(exc)

    def close(self) -> None:
        """Both ends, now (the upstream not yet connected is given up)."""
        self.opening.cancel()
        for end in (self, self.peer):
            if end is not None and end.transport is not None:
                end.transport.close()
