"""Network egress for a contained agent, served from the SDK's own (uncontained) process.

The agent's network namespace has only loopback; listening sockets made there are handed
to this module, so all the agent sends out passes through one of two proxies:

- `EgressProxy`, an HTTP forward proxy (`CONNECT host:port` tunnels and absolute-form
  `GET http://host/...`) that reaches the hosts of an allow-list and nothing else. The
  harness finds it through `HTTP_PROXY`/`HTTPS_PROXY` (Go's default transport).
- `ReverseProxy`, a fixed-upstream HTTP/1.1 proxy for the model endpoint and HTTP MCP
  servers: it adds the credential, so the key never enters the agent's namespace, and
  makes loopback upstreams reachable from there. It serves only its `scope`'s paths, and
  sends no response header holding the credential back.

Host patterns (`check_host_pattern`): `pypi.org` (that host), `*.github.com` (its
subdomains at any depth, *not* `github.com` itself: list both for both), an IP address
(`127.0.0.1`, `::1`: an address is reached only when listed as such) or `*` (any host
name, never an address). A pattern has no port: every port of an allowed host is allowed.
Matching ignores case and a trailing dot; Unicode names match their IDNA form.

Being named is not enough: the proxy resolves a name itself, once, and connects to the
address it got (no second lookup: no DNS rebinding), refusing loopback, private,
link-local, CGNAT, multicast and other non-public addresses (`is_public_address`) unless
the pattern that matched is that exact name or address. A name no pattern allows is never
looked up, so DNS carries nothing out either. Every wait is bounded; nothing is buffered
whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import re
import socket
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from types import MappingProxyType
from typing import Final, Literal, Self, TypeAlias
from urllib.parse import urlsplit

import h11

from .errors import ConfigurationError

__all__ = [
    "EgressProxy",
    "Refusal",
    "Resolver",
    "ReverseProxy",
    "check_host_pattern",
    "host_allowed",
    "is_public_address",
]

logger = logging.getLogger("antigravity_sdk.egress")

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver: TypeAlias = Callable[[str, int], Awaitable[Sequence[str]]]
"""`(host, port) -> addresses`: how `EgressProxy` resolves names (default `getaddrinfo`)."""
Headers: TypeAlias = list[tuple[bytes, bytes]]

_MAX_HEAD: Final = 64 * 1024  # a larger request head is refused (431)
_READ: Final = 64 * 1024
_LINGER: Final = 1.0  # after an error response, read and drop what the client still sends
_CLOSE_WAIT: Final = 2.0  # aclose(): for connections to end before they are cancelled
_HOP: Final = frozenset(
    b"connection keep-alive te trailer transfer-encoding upgrade expect".split()
)
# Requests sent again when a kept-alive upstream closed under them (Go's rule, but no TRACE).
_REPLAYABLE: Final = frozenset([b"GET", b"HEAD", b"OPTIONS"])
# A dot segment (`..;` too, Tomcat's), raw or percent-encoded; an encoded `/` or `\`; a `\`.
_UNSAFE_PATH: Final = re.compile(r"(?:^|/)(?:\.|%2e){1,2}(?:[/;]|\Z)|%2f|%5c|\\", re.I)
_NO_HEADERS: Final[Mapping[str, str]] = MappingProxyType({})

# ---- host patterns

_LABEL: Final = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_NUMBER: Final = re.compile(r"0x[0-9a-f]*|[0-9]+")  # a name ending so is an address to inet_aton
_HELP: Final = (
    "use a host name (pypi.org), '*.' and a domain (*.github.com: its subdomains), "
    "an IP address (127.0.0.1, ::1) or '*' (any host name)"
)


def _ip_literal(text: str) -> IPAddress | None:
    """`text` as an IP address (IPv6 maybe in brackets), or None; no scoped IPv6."""
    if text.startswith("[") and text.endswith("]") and ":" in text:
        text = text[1:-1]
    if "%" in text:
        return None
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _is_address(normal: str) -> bool:
    """Whether a normalised host is an IP address (a name never ends in a number)."""
    return ":" in normal or bool(_NUMBER.fullmatch(normal.rsplit(".", 1)[-1]))


def _normalize_host(host: str) -> str:
    """An IP address in compressed form, or a name lower-case, IDNA-encoded, without its
    trailing dot. Raises ValueError saying why it is neither."""
    ip = _ip_literal(host)
    if ip is not None:
        return str(ip)
    name = host.lower()
    if not name.isascii():
        try:
            name = name.encode("idna").decode("ascii").lower()
        except UnicodeError as e:
            raise ValueError(f"not a valid international domain name ({e})") from None
    name = name.removesuffix(".")
    labels = name.split(".")
    if not name or len(name) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise ValueError("not a host name (letters, digits, '-' and '_' in dot-separated labels)")
    if _NUMBER.fullmatch(labels[-1]):
        raise ValueError("ends in a number but is not an IP address")
    return name


def check_host_pattern(pattern: str) -> str:
    """`pattern` checked and normalised (see the module doc); raises `ConfigurationError`
    (a `ValueError`) saying what is wrong and what is accepted."""
    if not isinstance(pattern, str):
        raise ConfigurationError(f"host pattern {pattern!r} is not a string; {_HELP}")
    if pattern == "*":
        return pattern
    wildcard = pattern.startswith("*.")
    rest = pattern[2:] if wildcard else pattern
    why = ""
    if "*" in rest:
        why = "'*' may only come first, as '*.' or alone"
    elif wildcard and _ip_literal(rest) is not None:
        why = "a wildcard takes a domain, not an address"
    elif rest.count(":") == 1:
        why = "a pattern names a host without a port (every port of an allowed host is allowed)"
    else:
        try:
            rest = _normalize_host(rest)
        except ValueError as e:
            why = str(e)
    if why:
        raise ConfigurationError(f"host pattern {pattern!r} is not valid: {why}; {_HELP}")
    return f"*.{rest}" if wildcard else rest


class _Patterns:
    """Checked patterns, indexed for matching."""

    __slots__ = ("any", "exact", "suffixes")

    def __init__(self, patterns: Sequence[str]) -> None:
        if isinstance(patterns, str):
            raise ConfigurationError(f"hosts must be a list of patterns, not {patterns!r}")
        checked = [check_host_pattern(p) for p in patterns]
        self.exact = frozenset(p for p in checked if not p.startswith("*"))
        self.suffixes = tuple(p[1:] for p in checked if p.startswith("*."))
        self.any = "*" in checked

    def match(self, normal: str) -> Literal["exact", "wildcard"] | None:
        """How a normalised host is allowed: named exactly, by a wildcard, or not at all."""
        if normal in self.exact:
            return "exact"
        if not _is_address(normal) and (self.any or normal.endswith(self.suffixes)):
            return "wildcard"
        return None


def host_allowed(host: str, patterns: Sequence[str]) -> bool:
    """Whether some pattern allows `host` by name (a malformed host never is). The proxy
    also checks the addresses a wildcard-matched name resolves to (see the module doc)."""
    compiled = _Patterns(patterns)
    try:
        return compiled.match(_normalize_host(host)) is not None
    except ValueError:
        return False


# ---- addresses

# "This network", RFC 1918, CGNAT, loopback, link-local (cloud metadata), IETF, TEST-NETs,
# 6to4 relays, benchmarking, multicast, reserved and broadcast.
_V4_NOT_PUBLIC: Final = tuple(map(ipaddress.IPv4Network, [
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15",
    "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
]))  # fmt: skip
_V6_UNICAST: Final = ipaddress.IPv6Network("2000::/3")  # all of global unicast
_V6_NOT_PUBLIC: Final = tuple(
    map(ipaddress.IPv6Network, ["2001::/23", "2001:db8::/32", "3fff::/20"])
)
_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")


def is_public_address(address: str | IPAddress) -> bool:
    """Whether `address` is public unicast: not loopback, private (RFC 1918, fc00::/7),
    link-local, CGNAT, multicast, unspecified, broadcast, reserved or documentation.
    IPv6 forms of an IPv4 address (mapped, NAT64 64:ff9b::/96, 6to4) are judged by it;
    any other IPv6 address outside 2000::/3 is not public."""
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif ip in _NAT64:
            ip = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        elif ip.sixtofour is not None:
            ip = ip.sixtofour
        else:
            return ip in _V6_UNICAST and not any(ip in n for n in _V6_NOT_PUBLIC)
    return not any(ip in n for n in _V4_NOT_PUBLIC)


# ---- HTTP plumbing


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request a proxy refused, for the audit log: the host and port asked for
    (normalised; for a malformed request the raw target, cut, and port 0; `""` when no
    head arrived, or for connections past `max_connections`), the method, and why."""

    host: str
    port: int
    method: str
    reason: str


_OnRefusal: TypeAlias = Callable[[Refusal], None] | None


class _Refused(Exception):
    """Answer `status` with `body` and close; `refusal` is what `on_refusal` receives."""

    def __init__(self, status: int, body: str, refusal: Refusal) -> None:
        super().__init__(refusal.reason)
        self.status, self.body, self.refusal = status, body, refusal


class _UpstreamError(Exception):
    """The upstream failed (connect, I/O, protocol, timeout): 502 if nothing was sent."""


class _Idle:
    """A client connection's idle bound: once nothing was read on it or its upstream for
    `seconds`, all its transports are aborted. One lazily re-armed timer per connection
    costs less than a timeout around every read (an SSE chunk is a read)."""

    __slots__ = ("expired", "handle", "last", "loop", "seconds", "transports")

    def __init__(self, seconds: float) -> None:
        self.loop = asyncio.get_running_loop()
        self.seconds, self.last, self.expired = seconds, self.loop.time(), False
        self.transports: list[asyncio.WriteTransport] = []
        self.handle = self.loop.call_at(self.last + seconds, self._check)

    def _check(self) -> None:
        due = self.last + self.seconds
        if self.loop.time() < due:
            self.handle = self.loop.call_at(due, self._check)
            return
        self.expired = True
        self.abort()

    def abort(self) -> None:
        for transport in self.transports:
            transport.abort()

    def watch(self, writer: asyncio.StreamWriter) -> None:
        self.transports = [t for t in self.transports if not t.is_closing()]
        self.transports.append(writer.transport)


class _Stream:
    """One side of a relay: h11 over an asyncio stream pair, bounded by the connection's
    `_Idle`. The upstream side (h11's client) turns its failures into `_UpstreamError`,
    so a handler knows whose fault it was."""

    __slots__ = ("conn", "idle", "reader", "received", "upstream", "writer")

    def __init__(
        self,
        role: type[h11.CLIENT | h11.SERVER],
        r: asyncio.StreamReader,
        w: asyncio.StreamWriter,
        idle: _Idle,
    ) -> None:
        self.conn = h11.Connection(role, max_incomplete_event_size=_MAX_HEAD)
        self.reader, self.writer, self.idle = r, w, idle
        self.upstream = role is h11.CLIENT
        self.received = 0  # bytes
        idle.watch(w)

    async def next_event(self, wait: bool = True) -> h11.Event | None:
        """The next event, or None if it needs data and not `wait` (PAUSED reads as
        ConnectionClosed: nothing here pipelines)."""
        try:
            while not isinstance(event := self.conn.next_event(), h11.Event):
                if event is h11.PAUSED:
                    return h11.ConnectionClosed()
                if not wait:
                    return None
                data = await self.reader.read(_READ)
                self.received += len(data)
                self.idle.last = self.idle.loop.time()
                self.conn.receive_data(data)
            return event
        except (OSError, h11.ProtocolError) as e:
            if self.upstream:
                raise _UpstreamError(f"{type(e).__name__}: {e}") from e
            raise

    async def send(self, *events: h11.Event) -> None:
        try:
            data = b"".join([self.conn.send(e) or b"" for e in events])
            if self.writer.is_closing():
                raise ConnectionResetError("the peer went away")
            self.writer.write(data)
            if self.writer.transport.get_write_buffer_size():
                await self.writer.drain()
        except (OSError, h11.ProtocolError) as e:
            if self.upstream:
                raise _UpstreamError(f"{type(e).__name__}: {e}") from e
            raise

    async def copy_message(self, dst: _Stream) -> None:
        """Send the rest of the message being received (its body) on to `dst` as it
        arrives, what one read brought as one chunk (h11 re-frames; trailers dropped)."""
        while True:
            event, data = await self.next_event(), []
            while isinstance(event, h11.Data):
                data.append(event.data)
                event = await self.next_event(wait=False)
            out = [h11.Data(data=b"".join(data))] if data else []
            if isinstance(event, h11.EndOfMessage):
                return await dst.send(*out, h11.EndOfMessage())
            if event is not None:
                raise (_UpstreamError if self.upstream else ConnectionResetError)("cut short")
            await dst.send(*out)

    def next_cycle(self) -> bool:
        """Ready for another exchange on this connection; False when it must close."""
        if self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE:
            self.conn.start_next_cycle()
            return True
        return False


def _end_to_end(headers: Sequence[tuple[bytes, bytes]], drop: frozenset[bytes]) -> Headers:
    """`headers` without hop-by-hop ones (`Proxy-*` and those Connection names) and `drop`."""
    drop |= {t.strip() for n, v in headers if n == b"connection" for t in v.lower().split(b",")}
    return [(n, v) for n, v in headers if n not in _HOP and n not in drop and n[:6] != b"proxy-"]


async def _response(down: _Stream, up: _Stream, secrets: Sequence[bytes] = ()) -> None:
    """Relay the upstream's response (1xx are dropped), streaming its body, without the
    headers whose value contains one of `secrets` (lower-case)."""
    while not isinstance(head := await up.next_event(), h11.Response):
        if not isinstance(head, h11.InformationalResponse):
            raise _UpstreamError("the upstream closed without a response")
    kept = _end_to_end(head.headers, frozenset())
    headers = [(n, v) for n, v in kept if not any(s in v.lower() for s in secrets)]
    reason = b"" if any(s in head.reason.lower() for s in secrets) else head.reason
    await down.send(h11.Response(status_code=head.status_code, headers=headers, reason=reason))
    await up.copy_message(down)


async def _request(
    down: _Stream, head: h11.Request, target: bytes, headers: Headers
) -> h11.Request:
    """The request to send upstream: h11 frames a chunked body again, and `Expect:
    100-continue` is answered here (Expect is not forwarded)."""
    if any(n == b"transfer-encoding" for n, _ in head.headers):
        headers.append((b"transfer-encoding", b"chunked"))
    if down.conn.they_are_waiting_for_100_continue:
        await down.send(h11.InformationalResponse(status_code=100, headers=[]))
    return h11.Request(method=head.method, target=target, headers=headers)


def unreachable(endpoint: str, error: BaseException) -> str:
    """What a reverse proxy or splice answers when its endpoint cannot be reached."""
    if isinstance(error, OSError) and error.errno:
        cause = os.strerror(error.errno).lower()
    elif isinstance(error, TimeoutError):
        cause = "connect timed out"
    else:
        cause = str(error)
    return f"antigravity egress: cannot reach {endpoint}: {cause}"


def plain_response(status: int, text: str) -> bytes:
    body = text.encode("utf-8", "replace") + b"\n"
    return (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
        f"content-type: text/plain; charset=utf-8\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    ).encode() + body


class _Server:
    """What both proxies share: serving listening sockets, tracking every connection (at
    most `max_connections`), closing them all (bounded), reporting refusals, and error
    answers that say nothing of the SDK's process nor echo the request's headers."""

    def __init__(self, on_refusal: _OnRefusal, max_connections: int, *timeouts: float) -> None:
        if not isinstance(max_connections, int) or max_connections < 1:
            raise ConfigurationError(f"max_connections {max_connections!r} is not a positive int")
        self._connect_timeout, self._head_timeout, self._idle_timeout = timeouts  # in order
        self._on_refusal, self._max_connections = on_refusal, max_connections
        self._turned_away = 0  # connections closed over the cap in the current burst
        self._servers: list[asyncio.Server] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._idles: set[_Idle] = set()  # one per connection, with all its transports
        self._closing = False

    async def serve(self, sock: socket.socket) -> None:
        """Serve connections accepted on `sock`, an already-listening TCP socket (made in
        the agent's namespace); the proxy owns it now and closes it in `aclose()`.
        Returns once serving; may be called for several sockets."""
        if self._closing:
            raise RuntimeError("the proxy is closed")
        self._servers.append(await asyncio.start_server(self._on_connection, sock=sock))

    async def aclose(self) -> None:
        """Stop accepting, close every connection and tunnel; returns within seconds."""
        self._closing = True
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()
        for idle in list(self._idles):  # the handlers' reads end, and so do they
            idle.abort()
        if self._tasks:
            _, pending = await asyncio.wait(list(self._tasks), timeout=_CLOSE_WAIT)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=_CLOSE_WAIT)
        for server in servers:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(server.wait_closed(), _CLOSE_WAIT)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _refused(self, refusal: Refusal) -> None:
        """Report a refusal to `on_refusal` (its exceptions are logged and contained)."""
        r = refusal
        logger.debug("egress refused %s %s:%d: %s", r.method, r.host, r.port, r.reason)
        if self._on_refusal is not None:
            try:
                self._on_refusal(refusal)
            except Exception:
                logger.exception("egress: the on_refusal callback failed")

    def _turn_away(self, writer: asyncio.StreamWriter) -> None:
        """Past `max_connections`: answer 503 and close at once, unread (so maybe a reset).
        Reported once per burst, which ends when half as many connections are open."""
        if not self._turned_away:
            why = f"{self._max_connections} connections open: closing new ones for a while"
            self._refused(Refusal("", 0, "", why))
        self._turned_away += 1
        with contextlib.suppress(OSError):
            writer.write(plain_response(503, "antigravity egress: too many connections"))
        writer.close()

    async def _handle(self, down: _Stream) -> None:
        raise NotImplementedError

    async def _open(
        self,
        idle: _Idle,
        host: str,
        port: int,
        tls: ssl.SSLContext | None = None,
        sni: str | None = None,
    ) -> _Stream:
        """An upstream connection as an h11 client, in at most `connect_timeout`."""
        try:
            async with asyncio.timeout(self._connect_timeout):
                r, w = await asyncio.open_connection(host, port, ssl=tls, server_hostname=sni)
        except (OSError, TimeoutError) as e:
            raise _UpstreamError(f"cannot connect: {type(e).__name__}: {e}") from e
        return _Stream(h11.CLIENT, r, w, idle)

    @staticmethod
    def _release(stream: _Stream | None) -> None:
        if stream is not None:
            stream.writer.transport.abort()

    async def _read_head(self, down: _Stream) -> h11.Request | None:
        """The next request head within `head_timeout` (the wait for it on a kept-alive
        connection included); None once the client has closed. Reads stop at 64 KiB and a
        byte, so h11 sees any larger head still incomplete (431)."""
        budget = _MAX_HEAD + 1
        async with asyncio.timeout(self._head_timeout):
            while not isinstance(event := down.conn.next_event(), h11.Event):
                if event is h11.PAUSED or budget <= 0:
                    return None
                data = await down.reader.read(min(_READ, budget))
                down.idle.last = down.idle.loop.time()
                budget -= len(data)
                down.conn.receive_data(data)
        return event if isinstance(event, h11.Request) else None

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        if len(self._idles) >= self._max_connections:
            return self._turn_away(writer)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        # asyncio sets TCP_NODELAY only on sockets made with proto=IPPROTO_TCP, not on
        # those accepted from `socket.socket()`: without it each SSE event waits for an ACK.
        with contextlib.suppress(OSError, AttributeError):
            writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        down = _Stream(h11.SERVER, reader, writer, _Idle(self._idle_timeout))
        self._idles.add(down.idle)
        try:
            await self._handle(down)
        except (_Refused, h11.RemoteProtocolError, TimeoutError, _UpstreamError) as e:
            if not (down.idle.expired or self._closing):
                await self._fail(down, e)
        except (OSError, h11.ProtocolError):
            pass
        except asyncio.CancelledError:
            if not self._closing:  # only aclose() cancels these
                raise
        finally:
            down.idle.handle.cancel()
            self._idles.discard(down.idle)
            if self._turned_away and len(self._idles) <= self._max_connections // 2:
                logger.debug("egress: %d connections over the cap closed", self._turned_away)
                self._turned_away = 0
            if task is not None:
                self._tasks.discard(task)
            if self._closing:
                writer.transport.abort()
            else:
                writer.close()

    def _unreachable(self, e: _UpstreamError) -> str:
        """A 502's body: nothing of the SDK's process (the forward proxy's)."""
        del e
        return "antigravity egress: the upstream is unreachable"

    async def _fail(self, down: _Stream, e: Exception) -> None:
        """Report a refusal, and answer it unless a response has begun; then linger
        briefly: closing with unread data resets the connection, losing the answer."""
        if isinstance(e, _Refused):
            self._refused(e.refusal)
            status, text = e.status, e.body
        elif isinstance(e, _UpstreamError):
            logger.debug("egress: upstream failed: %s", e)
            status, text = 502, self._unreachable(e)
        else:
            if isinstance(e, TimeoutError):  # quiet when no byte of a head came
                if down.conn.their_state is not h11.IDLE or not down.conn.trailing_data[0]:
                    return
                status, why = 408, f"request head not received within {self._head_timeout:g} s"
            elif isinstance(e, h11.RemoteProtocolError):
                status = e.error_status_hint
                why = "request head over 64 KiB" if status == 431 else f"malformed request: {e}"
            self._refused(Refusal("", 0, "", why))
            # Not h11's message, which may quote a header line: never echo the request.
            text = f"antigravity egress: {why.split(': ', 1)[0]}"
        if down.conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        with contextlib.suppress(OSError, TimeoutError):
            down.writer.write(plain_response(status, text))
            async with asyncio.timeout(_LINGER):
                await down.writer.drain()
                down.writer.write_eof()
                while await down.reader.read(_READ):
                    pass


# ---- the forward proxy


def _authority(text: str, default_port: int | None) -> tuple[str, int]:
    """`host[:port]` (IPv6 in brackets) parsed and normalised; ValueError if malformed."""
    if "@" in text:
        raise ValueError("user information in the authority")
    host, sep, port_text = text.rpartition(":")
    if not sep or "]" in port_text:
        host, port_text = text, ""
    if not port_text and default_port is None:
        raise ValueError("no port")
    if port_text and not (port_text.isascii() and port_text.isdigit() and len(port_text) < 6):
        raise ValueError("the port is not a number")
    port = int(port_text) if port_text else default_port or 0
    if not 0 < port < 65536:
        raise ValueError(f"port {port} is out of range")
    if ":" in host and not (host.startswith("[") and host.endswith("]")):
        raise ValueError("an IPv6 address must be in brackets")
    return _normalize_host(host), port


class EgressProxy(_Server):
    """An HTTP forward proxy that reaches the hosts `hosts` allows and nothing else.

    `CONNECT host:port` opens a tunnel; an absolute-form request (`GET http://host/path`,
    any method) is forwarded in origin form without hop-by-hop and `Proxy-*` headers, on
    an upstream connection of its own. Refusals are answered 403 (a host not allowed) or
    400/408/431 (malformed, slow, oversized) and reported to `on_refusal`, whose
    exceptions are logged and contained. `resolver` replaces `getaddrinfo` (a callable or
    a host -> addresses map, for tests). `connect_timeout` bounds resolving, and then
    connecting; `head_timeout` receiving a request head; `idle_timeout` closes a tunnel
    or exchange where nothing moved either way for that long. Past `max_connections`
    client connections at once, new ones are answered 503 and closed.
    """

    def __init__(
        self,
        hosts: Sequence[str],
        *,
        on_refusal: Callable[[Refusal], None] | None = None,
        connect_timeout: float = 10.0,
        resolver: Resolver | Mapping[str, Sequence[str]] | None = None,
        head_timeout: float = 30.0,
        idle_timeout: float = 300.0,
        max_connections: int = 256,
    ) -> None:
        super().__init__(on_refusal, max_connections, connect_timeout, head_timeout, idle_timeout)
        self._patterns = _Patterns(hosts)
        self._resolver = resolver

    async def _handle(self, down: _Stream) -> None:
        while (head := await self._read_head(down)) is not None:
            method = head.method.decode("ascii", "replace")
            target = head.target.decode("ascii", "replace")
            if method == "CONNECT":
                return await self._tunnel(down, head, target)
            await self._forward(down, head, method, target)
            if not down.next_cycle():
                return

    @staticmethod
    def _bad(method: str, target: str, why: str) -> _Refused:
        refusal = Refusal(target[:300], 0, method, why)
        return _Refused(400, f"antigravity egress: bad request: {why}", refusal)

    async def _upstream(self, idle: _Idle, host: str, port: int, method: str) -> _Stream:
        """Check `host` against the patterns, resolve it once, check the addresses, and
        connect to one of them; raises `_Refused` (403) or `_UpstreamError`."""

        def refuse(why: str) -> _Refused:
            body = (
                f"antigravity containment: host {host} (port {port}) is not allowed: "
                "add it with Containment(hosts=[...])"
            )
            return _Refused(403, body, Refusal(host, port, method, why))

        how = self._patterns.match(host)
        if how is None:
            literal = "an IP address is reached only when listed as such"
            raise refuse(literal if _is_address(host) else "no host pattern allows it")
        try:
            async with asyncio.timeout(self._connect_timeout):
                found = [host] if _is_address(host) else await self._resolve(host, port)
        except (OSError, TimeoutError, UnicodeError) as e:
            logger.debug("egress: %s does not resolve: %s", host, e)
            found = []
        addresses: list[IPAddress] = []
        for text in dict.fromkeys(found):
            with contextlib.suppress(ValueError):
                addresses.append(ipaddress.ip_address(text))
        # No address and only private ones look the same to the agent: what the SDK's
        # DNS knows of internal names is not told (the reason, for the audit, says).
        allowed = [a for a in addresses if how == "exact" or is_public_address(a)]
        if not allowed:
            shown = ", ".join(map(str, addresses))
            raise refuse(
                f"resolves to {shown}: not public, and only a wildcard allows it"
                if addresses
                else "does not resolve"
            )
        # Connect to the first address that answers, each try with a share of the time.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._connect_timeout
        error = _UpstreamError("connect timed out")
        for i, address in enumerate(allowed):
            try:
                async with asyncio.timeout((deadline - loop.time()) / (len(allowed) - i)):
                    return await self._open(idle, str(address), port)
            except (_UpstreamError, TimeoutError) as e:
                error = _UpstreamError(str(e))
        raise error

    async def _resolve(self, host: str, port: int) -> list[str]:
        if self._resolver is None:
            loop = asyncio.get_running_loop()
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            return [str(info[4][0]) for info in infos]
        if isinstance(self._resolver, Mapping):
            return list(self._resolver.get(host, ()))
        return list(await self._resolver(host, port))

    async def _tunnel(self, down: _Stream, head: h11.Request, target: str) -> None:
        try:
            host, port = _authority(target, None)
        except ValueError as e:
            raise self._bad("CONNECT", target, f"CONNECT {target[:100]}: {e}") from None
        if not isinstance(down.conn.next_event(), h11.EndOfMessage):  # h11 has it if empty
            raise self._bad("CONNECT", target, "a CONNECT request has no body")
        up = await self._upstream(down.idle, host, port, "CONNECT")
        try:
            await down.send(
                h11.Response(status_code=200, headers=[], reason=b"Connection established")
            )
            up.writer.write(bytes(down.conn.trailing_data[0]))  # sent with the head
            await self._splice(down, up)
        finally:
            self._release(up)

    async def _splice(self, down: _Stream, up: _Stream) -> None:
        """Copy bytes both ways until both sides have closed (an EOF is passed on as a
        half-close) or either fails; the connection's `_Idle` bounds the rest."""
        idle = down.idle

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(_READ):
                    idle.last = idle.loop.time()
                    if dst.is_closing():
                        raise ConnectionResetError
                    dst.write(data)
                    if dst.transport.get_write_buffer_size():
                        await dst.drain()
                if dst.can_write_eof() and not dst.is_closing():
                    dst.write_eof()
            except OSError:
                down.writer.transport.abort()
                up.writer.transport.abort()

        await asyncio.gather(pump(down.reader, up.writer), pump(up.reader, down.writer))

    async def _forward(self, down: _Stream, head: h11.Request, method: str, target: str) -> None:
        """One absolute-form request, sent in origin form on an upstream connection of its
        own (`Connection: close`); the client's connection may be kept alive."""
        if target[:7].lower() != "http://":
            origin_form = target.startswith("/") or target == "*"
            why = "send absolute-form requests (http://host/path): this is a forward proxy"
            raise self._bad(method, target, why if origin_form else "https goes through CONNECT")
        rest = target[7:]
        cut = min((i for i in map(rest.find, "/?#") if i >= 0), default=len(rest))
        path = "/" + rest[cut:].split("#", 1)[0].removeprefix("/")
        try:
            host, port = _authority(rest[:cut], 80)
        except ValueError as e:
            raise self._bad(method, target, f"{target[:100]}: {e}") from None
        up = await self._upstream(down.idle, host, port, method)
        try:
            shown = f"[{host}]" if ":" in host else host
            authority = shown if port == 80 else f"{shown}:{port}"
            headers = [(b"host", authority.encode()), (b"connection", b"close")]
            headers += _end_to_end(head.headers, frozenset([b"host"]))
            await up.send(await _request(down, head, path.encode(), headers))
            await down.copy_message(up)
            await _response(down, up)
        finally:
            self._release(up)


# ---- the reverse proxy


class ReverseProxy(_Server):
    """A fixed-upstream HTTP/1.1 proxy: every request received goes to `upstream`.

    `upstream` is an origin URL (`https://generativelanguage.googleapis.com`,
    `http://127.0.0.1:11434`); a path in it prefixes every request's path (`http://h/v1`
    and `/models?x` -> `/v1/models?x`). Each request gets the upstream's Host and the
    `headers` (replacing any the client sent: the credential stays here), and loses
    `strip` and hop-by-hop headers. Responses stream as they arrive (server-sent events
    too). One upstream connection per client connection, kept alive and reopened when the
    upstream closes it; HTTPS upstreams are verified with `ssl_context` (default
    `ssl.create_default_context()`) and SNI. An unreachable upstream is a 502.

    Only paths as received (before `?`) that are `scope` or under `scope/` are relayed, else
    403; one with a dot segment (`..`, `%2e`...), an encoded `/` or a backslash is 400;
    TRACE (TRACK) and CONNECT are 405. A response header holding a `headers` value (or a
    word of 8 characters or more of one: the token of `Bearer <token>`) is removed. Refusals
    go to `on_refusal`; past `max_connections` connections at once, new ones are closed (503).
    """

    def __init__(
        self,
        upstream: str,
        *,
        headers: Mapping[str, str] = _NO_HEADERS,
        strip: Sequence[str] = (),
        connect_timeout: float = 10.0,
        head_timeout: float = 30.0,
        idle_timeout: float = 300.0,
        ssl_context: ssl.SSLContext | None = None,
        scope: str = "/",
        on_refusal: Callable[[Refusal], None] | None = None,
        max_connections: int = 256,
    ) -> None:
        super().__init__(on_refusal, max_connections, connect_timeout, head_timeout, idle_timeout)
        parts = urlsplit(upstream)
        try:
            self._port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as e:
            raise ConfigurationError(f"upstream {upstream!r}: {e}") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigurationError(f"upstream {upstream!r} is not an http:// or https:// URL")
        if parts.username is not None or parts.query or parts.fragment:
            why = "no user, query or fragment (credentials go in headers=)"
            raise ConfigurationError(f"upstream {upstream!r}: {why}")
        self._upstream = upstream
        self._host = parts.hostname
        self._sni = self._host if parts.scheme == "https" else None
        self._ssl = (ssl_context or ssl.create_default_context()) if self._sni else None
        shown = f"[{self._host}]" if ":" in self._host else self._host
        default = self._port == (443 if self._sni else 80)
        self._authority = (shown if default else f"{shown}:{self._port}").encode()
        self._prefix = parts.path.rstrip("/").encode()
        try:
            extra = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
            h11.Request(method="GET", target="/", headers=[(b"host", b"x"), *extra])
        except (h11.LocalProtocolError, UnicodeError) as e:
            raise ConfigurationError(f"headers: {e}") from None
        self._extra = extra
        self._drop = frozenset(
            [b"host", *(n for n, _ in extra), *(s.lower().encode() for s in strip)]
        )
        values = [v for _, v in extra] + [w for _, v in extra for w in v.split() if len(w) >= 8]
        self._secrets = tuple({v.lower() for v in values if v})
        if not re.fullmatch(r'/[!"$->@-~]*', scope) or _UNSAFE_PATH.search(scope):  # no ?#
            raise ConfigurationError(f"scope {scope!r} is not a path (/v1beta)")
        self._scope = scope.rstrip("/")

    def _unreachable(self, e: _UpstreamError) -> str:
        """A 502's body names the endpoint and the cause: the SDK's own endpoint, which
        the harness was told (`connection refused`, as Go would say it)."""
        return unreachable(self._upstream, e.__cause__ or e)

    def _check(self, head: h11.Request) -> None:
        """Raise `_Refused` unless `head` is an origin-form request, neither TRACE nor
        CONNECT, for a plain path in the scope."""
        method = head.method.decode("ascii", "replace")
        path = head.target.split(b"?", 1)[0].decode("latin-1")
        if not path.startswith("/"):
            status, why = 400, "send origin-form requests (/path): this proxy has a fixed upstream"
        elif head.method.upper() in (b"TRACE", b"TRACK", b"CONNECT"):
            status, why = 405, f"{method} is not allowed"
        elif _UNSAFE_PATH.search(path):
            status, why = 400, f"{path[:100]}: a dot segment, encoded slash or backslash"
        elif path != self._scope and not path.startswith(self._scope + "/"):
            status, why = 403, f"{path[:100]} is outside {self._scope}/, the path served here"
        else:
            return
        text = f"antigravity egress: {'bad request: ' if status == 400 else ''}{why}"
        raise _Refused(status, text, Refusal(self._host, self._port, method, why))

    async def _handle(self, down: _Stream) -> None:
        up: _Stream | None = None
        try:
            while (head := await self._read_head(down)) is not None:
                self._check(head)
                up = await self._exchange(down, head, up)
                if not down.next_cycle():
                    return
        finally:
            self._release(up)

    async def _exchange(
        self, down: _Stream, head: h11.Request, up: _Stream | None
    ) -> _Stream | None:
        """Relay one request and its response; returns the upstream connection to reuse.

        A kept-alive upstream may close just as a request goes out: a bodiless GET, HEAD
        or OPTIONS is then sent again, once, on a fresh connection (Go's rule)."""
        headers = [(b"host", self._authority), *_end_to_end(head.headers, self._drop)]
        request = await _request(down, head, self._prefix + head.target, headers + self._extra)
        framing = (b"content-length", b"transfer-encoding")
        replay = head.method in _REPLAYABLE and not any(n in framing for n, _ in head.headers)
        if replay:  # h11 has the (empty) body already
            await down.next_event()
        for fresh in (False, True):
            if up is None or up.conn.our_state is not h11.IDLE or up.reader.at_eof():
                self._release(up)
                up = await self._open(down.idle, self._host, self._port, self._ssl, self._sni)
                fresh = True
            before = up.received
            try:
                if replay:
                    await up.send(request, h11.EndOfMessage())
                else:
                    await up.send(request)
                    await down.copy_message(up)
                await _response(down, up, self._secrets)
            except BaseException as e:
                self._release(up)
                stale = isinstance(e, _UpstreamError) and up.received == before
                if fresh or not (replay and stale):
                    raise
                logger.debug("egress: sending again on a fresh connection: %s", e)
                up = None
                continue
            if up.next_cycle():
                return up
            self._release(up)
            return None
        raise AssertionError("unreachable")
