"""antigravity_sdk.egress: the host matcher, the address classifier, and both proxies over
real sockets on 127.0.0.1 (and only there: every connection the proxies attempt goes
through a guard that refuses any other address, so no test sends traffic elsewhere)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import logging
import os
import re
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h11
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from antigravity_sdk.egress import (
    EgressProxy,
    Refusal,
    ReverseProxy,
    check_host_pattern,
    host_allowed,
    is_public_address,
)
from antigravity_sdk.errors import ConfigurationError

LOOPBACK = "127.0.0.1"

# ---- the guard: no connection to anything but loopback


@pytest.fixture(autouse=True)
def attempted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every host `asyncio.open_connection` is asked for; anything but 127.0.0.1 and ::1
    is refused before a socket exists (a public address the proxy picks ends as a 502)."""
    hosts: list[str] = []
    real = asyncio.open_connection

    async def guarded(host: str | None = None, port: int | None = None, **kw: Any) -> Any:
        hosts.append(str(host))
        if host not in (LOOPBACK, "::1"):
            raise ConnectionRefusedError(f"test guard: no traffic to {host}")
        return await real(host, port, **kw)

    monkeypatch.setattr(asyncio, "open_connection", guarded)
    return hosts


# ---- servers and clients used by the tests


@dataclass
class Seen:
    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes
    conn: int

    def header(self, name: str) -> list[str]:
        return [v for n, v in self.headers if n == name]


Body = bytes | Callable[[], AsyncIterator[bytes]]
Route = Callable[[Seen], Awaitable[tuple[int, list[tuple[str, str]], Body]]]


async def _ok(seen: Seen) -> tuple[int, list[tuple[str, str]], Body]:
    body = f"ok {seen.method} {seen.target}".encode()
    if seen.method == "HEAD":
        return 200, [("content-length", str(len(body)))], b""
    return 200, [("content-type", "text/plain")], body


class Drop(Exception):
    """Raised by a route: the origin closes the connection without answering."""


class Origin:
    """An HTTP/1.1 server on 127.0.0.1 (h11, keep-alive) that records what it receives."""

    def __init__(
        self, route: Route = _ok, *, tls: ssl.SSLContext | None = None, close: bool = False
    ) -> None:
        self.route, self.tls, self.close = route, tls, close
        self.seen: list[Seen] = []
        self.connections = 0
        self._writers: set[asyncio.StreamWriter] = set()

    async def __aenter__(self) -> Origin:
        self.server = await asyncio.start_server(self._serve, LOOPBACK, 0, ssl=self.tls)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        for w in list(self._writers):
            w.transport.abort()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        conn_id = self.connections
        self._writers.add(writer)
        conn = h11.Connection(h11.SERVER)

        async def event() -> Any:
            while (ev := conn.next_event()) is h11.NEED_DATA:
                conn.receive_data(await reader.read(65536))
            return ev

        try:
            while True:
                head = await event()
                if not isinstance(head, h11.Request):
                    return
                body = bytearray()
                while not isinstance(ev := await event(), h11.EndOfMessage):
                    body += ev.data
                headers = [(n.decode(), v.decode()) for n, v in head.headers]
                seen = Seen(
                    head.method.decode(), head.target.decode(), headers, bytes(body), conn_id
                )
                self.seen.append(seen)
                status, rheaders, rbody = await self.route(seen)
                if self.close:
                    rheaders = [*rheaders, ("connection", "close")]
                writer.write(conn.send(h11.Response(status_code=status, headers=rheaders)) or b"")
                if isinstance(rbody, bytes):
                    writer.write(conn.send(h11.Data(data=rbody)) or b"")
                else:
                    async for chunk in rbody():
                        writer.write(conn.send(h11.Data(data=chunk)) or b"")
                        await writer.drain()
                writer.write(conn.send(h11.EndOfMessage()) or b"")
                await writer.drain()
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                conn.start_next_cycle()
        except (OSError, h11.ProtocolError, Drop):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()


@contextlib.asynccontextmanager
async def echo_server() -> AsyncIterator[int]:
    """A TCP server on 127.0.0.1 echoing what it receives; closes on the client's EOF."""
    writers: set[asyncio.StreamWriter] = set()

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.add(writer)
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, LOOPBACK, 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        for w in writers:
            w.transport.abort()


def listening() -> socket.socket:
    sock = socket.socket()
    sock.bind((LOOPBACK, 0))
    sock.listen()
    return sock


@contextlib.asynccontextmanager
async def egress(hosts: list[str], **kw: Any) -> AsyncIterator[tuple[int, list[Refusal]]]:
    """A started EgressProxy on 127.0.0.1: its port and the refusals it reported."""
    refusals: list[Refusal] = []
    kw.setdefault("on_refusal", refusals.append)
    sock = listening()
    port = sock.getsockname()[1]
    async with EgressProxy(hosts, **kw) as proxy:
        await proxy.serve(sock)
        yield port, refusals


@contextlib.asynccontextmanager
async def reverse(upstream: str, **kw: Any) -> AsyncIterator[int]:
    sock = listening()
    port = sock.getsockname()[1]
    async with ReverseProxy(upstream, **kw) as proxy:
        await proxy.serve(sock)
        yield port


async def raw(port: int, data: bytes) -> bytes:
    """Send `data`, read until the server closes."""
    reader, writer = await asyncio.open_connection(LOOPBACK, port)
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()


async def tunnel(
    port: int, authority: str
) -> tuple[bytes, asyncio.StreamReader, asyncio.StreamWriter]:
    """A CONNECT request: the response head, and the connection (the caller closes it)."""
    reader, writer = await asyncio.open_connection(LOOPBACK, port)
    writer.write(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    return head, reader, writer


async def connect(port: int, authority: str) -> bytes:
    """A CONNECT request that is expected to be refused: the whole response."""
    return await raw(port, f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())


class Client:
    """An HTTP/1.1 client connection (h11) for keep-alive and streaming tests."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.conn = h11.Connection(h11.CLIENT)

    @classmethod
    async def open(cls, port: int) -> Client:
        return cls(*await asyncio.open_connection(LOOPBACK, port))

    async def event(self) -> Any:
        while (ev := self.conn.next_event()) is h11.NEED_DATA:
            self.conn.receive_data(await asyncio.wait_for(self.reader.read(65536), 10))
        return ev

    async def send(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes = b""
    ) -> None:
        if body and not any(
            n.lower() in ("content-length", "transfer-encoding") for n, _ in headers
        ):
            headers = [*headers, ("content-length", str(len(body)))]
        out = self.conn.send(h11.Request(method=method, target=target, headers=headers)) or b""
        if body:
            out += self.conn.send(h11.Data(data=body)) or b""
        self.writer.write(out + (self.conn.send(h11.EndOfMessage()) or b""))
        await self.writer.drain()

    async def head(self) -> h11.Response:
        ev = await self.event()
        assert isinstance(ev, h11.Response), ev
        return ev

    async def chunks(self) -> AsyncIterator[bytes]:
        while not isinstance(ev := await self.event(), h11.EndOfMessage):
            assert isinstance(ev, h11.Data), ev
            yield bytes(ev.data)
        if self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE:
            self.conn.start_next_cycle()

    async def request(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes = b""
    ) -> tuple[h11.Response, bytes]:
        await self.send(method, target, headers, body)
        head = await self.head()
        return head, b"".join([c async for c in self.chunks()])

    def close(self) -> None:
        self.writer.close()


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (openssl), as cert.pem and key.pem."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not on PATH")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=egress-test",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def server_tls(files: tuple[Path, Path]) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(*files)
    return ctx


def client_tls(files: tuple[Path, Path]) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(files[0]))


# ---- host patterns


@pytest.mark.parametrize(
    ("pattern", "normal"),
    [
        ("pypi.org", "pypi.org"),
        ("PyPI.Org.", "pypi.org"),
        ("*.GitHub.com", "*.github.com"),
        ("*.github.com.", "*.github.com"),
        ("bücher.de", "xn--bcher-kva.de"),
        ("*.Bücher.de", "*.xn--bcher-kva.de"),
        ("127.0.0.1", "127.0.0.1"),
        ("::1", "::1"),
        ("[::1]", "::1"),
        ("0:0::1", "::1"),
        ("*", "*"),
        ("db.internal", "db.internal"),
        ("my_host", "my_host"),
    ],
)
def test_patterns_are_normalised(pattern: str, normal: str) -> None:
    assert check_host_pattern(pattern) == normal


@pytest.mark.parametrize(
    "pattern",
    ["", ".", "*.", "**", "*.*.x", "a*.x", "x.*", "*x.y", "pypi.org:443", "[::1]:80", "a b",
     "a..b", "-a.com", "a-.com", "http://x", "x/y", "a@b", "a%2eb", "a\\b", "127.1", "0x7f.1",
     "1.2.3.4.5", "2130706433", "*.127.0.0.1", "*.::1", "fe80::1%eth0", "[1.2.3.4]",
     "a" * 64 + ".com", ".".join(["abc"] * 70), "x.y\n"],
)  # fmt: skip
def test_bad_patterns_are_refused_with_a_message(pattern: str) -> None:
    with pytest.raises(ValueError, match=r"host pattern .* is not valid: .*; use a host name"):
        check_host_pattern(pattern)
    with pytest.raises(ConfigurationError):
        host_allowed("x.y", [pattern])


def test_a_string_is_not_a_list_of_patterns() -> None:
    with pytest.raises(ConfigurationError, match="list of patterns"):
        EgressProxy("pypi.org")


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("api.github.com", True),
        ("a.b.c.github.com", True),
        ("API.GitHub.COM.", True),
        ("github.com", False),
        ("evilgithub.com", False),
        ("github.com.evil.com", False),
        ("api.github.com.evil.com", False),
        ("pypi.org", True),
        ("PYPI.org.", True),
        ("files.pypi.org", False),
        ("bücher.de", True),
        ("xn--bcher-kva.de", True),
        ("127.0.0.1", True),
        ("[::1]", True),
        ("0:0:0:0:0:0:0:1", True),
        ("127.0.0.2", False),
        ("localhost", False),
        ("a@api.github.com", False),
        ("api.github.com:443", False),
        ("", False),
    ],
)
def test_host_allowed(host: str, allowed: bool) -> None:
    patterns = ["*.github.com", "pypi.org", "bücher.de", "127.0.0.1", "::1"]
    assert host_allowed(host, patterns) is allowed


def test_the_any_pattern_allows_names_never_addresses() -> None:
    assert host_allowed("example.com", ["*"])
    assert host_allowed("localhost", ["*"])  # by name; its loopback address is refused later
    for literal in ["127.0.0.1", "8.8.8.8", "::1", "[2606:4700::1111]", "::ffff:127.0.0.1"]:
        assert not host_allowed(literal, ["*"]), literal
        assert host_allowed(literal, [literal.strip("[]")]), literal


_LABEL = st.from_regex(r"[a-z0-9](?:[a-z0-9_-]{0,10}[a-z0-9])?", fullmatch=True)
_DOMAIN = (
    st.lists(_LABEL, min_size=1, max_size=3)
    .map(".".join)
    .filter(lambda d: not re.fullmatch(r"0x[0-9a-f]*|[0-9]+", d.split(".")[-1]))
)


@given(sub=st.lists(_LABEL, min_size=1, max_size=4).map(".".join), domain=_DOMAIN,
       upper=st.booleans(), dot=st.booleans())  # fmt: skip
def test_every_subdomain_of_a_wildcard_is_allowed(
    sub: str, domain: str, upper: bool, dot: bool
) -> None:
    host = f"{sub}.{domain}"
    host = (host.upper() if upper else host) + ("." if dot else "")
    assert host_allowed(host, [f"*.{domain}"])
    assert not host_allowed(domain, [f"*.{domain}"])  # the domain itself is not its subdomain
    assert host_allowed(domain + ("." if dot else ""), [domain])


_SUBDOMAIN_OF_XY = re.compile(r"(?:[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?\.)+x\.y\.?", re.I)
_TRICKS = ["@", "%2e", "%", "\\", "/", ":", "#", "?", " ", "\t", "\x00", "\n", "..", ".", "[", "]"]


@settings(max_examples=500)
@given(
    st.one_of(
        st.text(alphabet="xy.ab-_@%\\/:#?[] 0X", max_size=24),
        st.tuples(
            st.text(alphabet="xyab.-", max_size=8), st.sampled_from(_TRICKS),
            st.sampled_from(["x.y", "x.y.", ".x.y", "x.y.evil.com", "evilx.y", "x.y:443"]),
            st.sampled_from(["", ".", "..", "/", ":443", "@evil.com", "%00"]),
        ).map("".join),
    )
)  # fmt: skip
def test_nothing_but_a_subdomain_matches_a_wildcard(host: str) -> None:
    expected = bool(_SUBDOMAIN_OF_XY.fullmatch(host)) and len(host.rstrip(".")) <= 253
    assert host_allowed(host, ["*.x.y"]) is expected


@pytest.mark.parametrize(
    "host",
    ["evilx.y", "x.y.evil.com", "x.y.", "x.y", "a@x.y", "a%2ex.y", "a.x.y%00", "a\\.x.y",
     "a/.x.y", "a.x.y/", "a.x.y:80", "a.x.y#", "a .x.y", "a.x.y..", "[a.x.y]", "a.x.y\n",
     "a\uff0ex.y\uff0eevil.com", "\uff41.x.y.evil"],
)  # fmt: skip
def test_wildcard_lookalikes_are_not_allowed(host: str) -> None:
    assert not host_allowed(host, ["*.x.y"])


@given(st.text(max_size=30))
def test_any_text_allowed_by_a_wildcard_is_a_plain_subdomain(host: str) -> None:
    if host_allowed(host, ["*.x.y"]):
        encoded = host.lower().encode("idna").decode() if not host.isascii() else host.lower()
        assert encoded.rstrip(".").endswith(".x.y")
        assert not set(host) & set("@%\\/:#?[] \t\r\n\x00")


@given(st.ip_addresses())
def test_addresses_match_only_literally(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> None:
    assert not host_allowed(str(ip), ["*"])
    assert host_allowed(str(ip), [str(ip)])
    assert host_allowed(str(ip).upper(), [ip.exploded])


# ---- the address classifier

NOT_PUBLIC = [
    "127.0.0.1", "127.255.0.9", "10.0.0.5", "172.16.0.1", "172.31.255.255", "192.168.1.1",
    "169.254.169.254", "100.64.0.1", "100.127.255.254", "0.0.0.0", "0.1.2.3", "255.255.255.255",
    "224.0.0.1", "239.1.1.1", "240.0.0.1", "192.0.2.1", "198.18.0.1", "::", "::1", "fe80::1",
    "fe80::1%1", "fc00::1", "fd12:3456::1", "ff02::1", "fec0::1", "::ffff:127.0.0.1",
    "::ffff:169.254.169.254", "::ffff:10.0.0.1", "::127.0.0.1", "64:ff9b::7f00:1",
    "64:ff9b::a9fe:a9fe", "64:ff9b:1::1", "2002:7f00:1::1", "2002:a00:1::1", "2001:db8::1",
    "2001::1", "100::1",
]  # fmt: skip
PUBLIC = ["8.8.8.8", "1.1.1.1", "93.184.215.14", "2606:4700:4700::1111", "::ffff:8.8.8.8",
          "64:ff9b::808:808", "2002:808:808::1", "2a00:1450:4001::200e"]  # fmt: skip


@pytest.mark.parametrize("address", NOT_PUBLIC)
def test_not_public_addresses(address: str) -> None:
    assert not is_public_address(address)
    assert not is_public_address(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses(address: str) -> None:
    assert is_public_address(address)


@given(st.ip_addresses(v=4))
def test_ipv6_forms_of_an_ipv4_address_are_judged_alike(v4: ipaddress.IPv4Address) -> None:
    public = is_public_address(v4)
    assert is_public_address(ipaddress.IPv6Address(f"::ffff:{v4}")) is public
    assert is_public_address(ipaddress.IPv6Address(f"64:ff9b::{v4}")) is public
    assert is_public_address(ipaddress.IPv6Address((0x2002 << 112) | (int(v4) << 80))) is public
    if public:  # never more permissive than the standard library
        assert v4.is_global and not v4.is_multicast


_BLOCKS = ["0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
           "172.16.0.0/12", "192.168.0.0/16", "224.0.0.0/4", "240.0.0.0/4", "::/8", "fc00::/7",
           "fe80::/10", "ff00::/8", "::ffff:127.0.0.0/104", "64:ff9b::a00:0/104"]  # fmt: skip


@given(st.sampled_from(_BLOCKS).flatmap(lambda n: st.ip_addresses(network=n)))
def test_every_address_in_a_refused_block_is_not_public(ip: Any) -> None:
    assert not is_public_address(ip)


@given(st.ip_addresses(v=6))
def test_public_ipv6_is_global_unicast(ip: ipaddress.IPv6Address) -> None:
    if is_public_address(ip) and ip.ipv4_mapped is None and ip.sixtofour is None:
        assert ip in ipaddress.IPv6Network("2000::/3") or ip in ipaddress.IPv6Network(
            "64:ff9b::/96"
        )
        assert not ip.is_multicast and not ip.is_link_local and not ip.is_private


# ---- the forward proxy: CONNECT


async def test_connect_to_a_listed_address_splices_both_ways() -> None:
    async with echo_server() as echo, egress([LOOPBACK]) as (port, refusals):
        head, reader, writer = await tunnel(port, f"{LOOPBACK}:{echo}")
        assert head.startswith(b"HTTP/1.1 200 ")
        payload = os.urandom(3_000_000)
        writer.write(payload)
        got = await asyncio.wait_for(reader.readexactly(len(payload)), 10)
        assert got == payload
        writer.write_eof()  # the client's EOF reaches the server, whose close comes back
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
    assert refusals == []


async def test_bytes_sent_with_the_connect_head_are_not_lost() -> None:
    async with echo_server() as echo, egress([LOOPBACK]) as (port, _):
        reader, writer = await asyncio.open_connection(LOOPBACK, port)
        writer.write(f"CONNECT {LOOPBACK}:{echo} HTTP/1.1\r\nHost: x\r\n\r\nearly bytes".encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200 ")
        assert await asyncio.wait_for(reader.readexactly(11), 5) == b"early bytes"
        writer.close()


EXPECTED_403 = (
    "antigravity containment: host {host} (port {port}) is not allowed: "
    "add it with Containment(hosts=[...])\n"
)


@pytest.mark.parametrize("hosts", [["*"], ["*.test"], ["other.test"], []])
async def test_loopback_by_a_name_not_listed_exactly_is_refused(
    hosts: list[str], attempted: list[str]
) -> None:
    async with (
        echo_server() as echo,
        egress(hosts, resolver={"echo.test": [LOOPBACK]}) as (port, refusals),
    ):
        head = await connect(port, f"echo.test:{echo}")
    assert head.startswith(b"HTTP/1.1 403 ")
    assert head.split(b"\r\n\r\n", 1)[1].decode() == EXPECTED_403.format(
        host="echo.test", port=echo
    )
    assert [(r.host, r.port, r.method) for r in refusals] == [("echo.test", echo, "CONNECT")]
    assert attempted.count(LOOPBACK) == 1  # only the test's own connection to the proxy


async def test_a_name_listed_exactly_reaches_its_loopback_address() -> None:
    async with (
        echo_server() as echo,
        egress(["echo.test"], resolver={"echo.test": [LOOPBACK]}) as (
            port,
            refusals,
        ),
    ):
        head, reader, writer = await tunnel(port, f"ECHO.test.:{echo}")
        assert head.startswith(b"HTTP/1.1 200 ")
        writer.write(b"ping")
        assert await asyncio.wait_for(reader.readexactly(4), 5) == b"ping"
        writer.close()
    assert refusals == []


async def test_localhost_not_listed_is_refused_without_a_lookup() -> None:
    looked_up: list[str] = []

    async def resolver(host: str, port: int) -> list[str]:
        looked_up.append(host)
        return [LOOPBACK, "::1"]

    async with echo_server() as echo:
        async with egress(["pypi.org"], resolver=resolver) as (port, refusals):
            head = await connect(port, f"localhost:{echo}")
        assert head.startswith(b"HTTP/1.1 403 ")
        assert looked_up == []  # a name nothing allows is never resolved: DNS carries nothing
        async with egress(["*"], resolver=resolver) as (port, refusals):
            head = await connect(port, f"localhost:{echo}")
        assert head.startswith(b"HTTP/1.1 403 ")
        assert "not public" in refusals[0].reason


@pytest.mark.parametrize("authority", ["127.0.0.1:{p}", "[::1]:{p}", "127.0.0.2:{p}"])
async def test_addresses_not_listed_are_refused_even_by_star(authority: str) -> None:
    async with echo_server() as echo, egress(["*", "*.com"]) as (port, refusals):
        head = await connect(port, authority.format(p=echo))
    assert head.startswith(b"HTTP/1.1 403 ")
    assert "listed as such" in refusals[0].reason


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1", "10.0.0.5", "169.254.169.254", "::ffff:127.0.0.1", "::1", "100.64.0.1",
     "0.0.0.0", "fe80::1", "fd00::1", "224.0.0.1", "64:ff9b::a9fe:a9fe", "192.168.0.1"],
)  # fmt: skip
@pytest.mark.parametrize("hosts", [["*"], ["*.example"]])
async def test_names_resolving_to_non_public_addresses_are_refused(
    address: str, hosts: list[str], attempted: list[str]
) -> None:
    async with egress(hosts, resolver={"evil.example": [address]}) as (port, refusals):
        head = await connect(port, "evil.example:443")
        status = status_of(
            await raw(port, b"GET http://evil.example/ HTTP/1.1\r\nHost: evil.example\r\n\r\n")
        )
    assert head.startswith(b"HTTP/1.1 403 ") and status == 403
    assert [r.method for r in refusals] == ["CONNECT", "GET"]
    assert all("not public" in r.reason for r in refusals)
    assert set(attempted) == {LOOPBACK}


async def test_only_public_addresses_of_a_wildcard_name_are_tried(attempted: list[str]) -> None:
    resolver = {"mixed.example": ["10.0.0.5", "93.184.215.14", "127.0.0.1", "169.254.169.254"]}
    async with egress(["*"], resolver=resolver) as (port, refusals):
        head = await connect(port, "mixed.example:443")
    # The guard stops the one public address, so the proxy answers 502 (and says nothing more).
    assert head.startswith(b"HTTP/1.1 502 ")
    assert [a for a in attempted if a != LOOPBACK] == ["93.184.215.14"]
    assert refusals == []


async def test_a_name_is_resolved_once_and_its_answer_is_what_is_connected() -> None:
    calls: list[tuple[str, int]] = []

    async def rebinding(host: str, port: int) -> list[str]:
        calls.append((host, port))
        return [LOOPBACK] if len(calls) == 1 else ["10.0.0.5"]

    async with echo_server() as echo, egress(["svc.test"], resolver=rebinding) as (port, _):
        head, reader, writer = await tunnel(port, f"svc.test:{echo}")
        assert head.startswith(b"HTTP/1.1 200 ")
        writer.write(b"x")
        assert await asyncio.wait_for(reader.readexactly(1), 5) == b"x"
        writer.close()
    assert calls == [("svc.test", echo)]


async def test_a_name_that_does_not_resolve_looks_like_one_that_is_private() -> None:
    async def failing(host: str, port: int) -> list[str]:
        raise socket.gaierror(-2, "Name or service not known /etc/resolv.conf")

    bodies = []
    for resolver in ({}, failing, {"db.corp": ["10.1.2.3"]}):
        async with egress(["*"], resolver=resolver) as (port, refusals):
            response = await connect(port, "db.corp:443")
        assert status_of(response) == 403
        bodies.append(response.split(b"\r\n\r\n", 1)[1])
        assert refusals[0].reason in ("does not resolve", "resolves to 10.1.2.3: not public, "
                                      "and only a wildcard allows it")  # fmt: skip
    assert bodies == [EXPECTED_403.format(host="db.corp", port=443).encode()] * 3


@pytest.mark.parametrize(
    ("request_line", "why"),
    [
        ("CONNECT 127.0.0.1:0 HTTP/1.1", "out of range"),
        ("CONNECT 127.0.0.1:65536 HTTP/1.1", "out of range"),
        ("CONNECT 127.0.0.1:99999999 HTTP/1.1", "not a number"),
        ("CONNECT 127.0.0.1:-1 HTTP/1.1", "not a number"),
        ("CONNECT 127.0.0.1:+80 HTTP/1.1", "not a number"),
        ("CONNECT 127.0.0.1 HTTP/1.1", "no port"),
        ("CONNECT ::1:80 HTTP/1.1", "brackets"),
        ("CONNECT a@127.0.0.1:80 HTTP/1.1", "user information"),
        ("CONNECT x%2e.y:80 HTTP/1.1", "not a host name"),
        ("CONNECT x\\y:80 HTTP/1.1", "not a host name"),
        ("GET /x HTTP/1.1", "forward proxy"),
        ("GET https://127.0.0.1/ HTTP/1.1", "CONNECT"),
        ("GET http://a@127.0.0.1/ HTTP/1.1", "user information"),
        ("GET http://127.0.0.1:0/ HTTP/1.1", "out of range"),
        ("GET http:///x HTTP/1.1", "not a host name"),
    ],
)
async def test_malformed_requests_are_400(request_line: str, why: str) -> None:
    async with egress(["127.0.0.1", "*"]) as (port, refusals):
        response = await raw(port, f"{request_line}\r\nHost: x\r\n\r\n".encode())
    assert status_of(response) == 400, response
    assert why in refusals[0].reason
    assert response.endswith(b"\n") and b"Traceback" not in response


async def test_garbage_and_a_connect_with_a_body_are_400() -> None:
    async with egress(["127.0.0.1"]) as (port, refusals):
        assert status_of(await raw(port, b"\x16\x03\x01garbage\r\n\r\n")) == 400
        body = b"CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
        assert status_of(await raw(port, body)) == 400
        chunked = (
            b"CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\n0\r\n\r\n"
        )
        assert status_of(await raw(port, chunked)) == 400
    assert "malformed" in refusals[0].reason and "no body" in refusals[1].reason


async def test_a_head_over_64_kib_is_431() -> None:
    async with egress(["127.0.0.1"]) as (port, refusals):
        big = b"GET http://127.0.0.1/ HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n"
        assert status_of(await raw(port, big)) == 431
    assert "64 KiB" in refusals[0].reason


async def test_a_slow_head_is_cut_off_in_bounded_time() -> None:
    async with egress(["127.0.0.1"], head_timeout=0.3) as (port, refusals):
        t0 = time.monotonic()
        response = await raw(port, b"CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost:")
        assert status_of(response) == 408
        assert time.monotonic() - t0 < 3
        # A connection that sends nothing is closed quietly, and is no refusal.
        assert await raw(port, b"") == b""
    assert len(refusals) == 1 and "0.3 s" in refusals[0].reason


async def test_a_failing_on_refusal_callback_is_contained(caplog: pytest.LogCaptureFixture) -> None:
    def explode(refusal: Refusal) -> None:
        raise RuntimeError("callback bug")

    with caplog.at_level(logging.ERROR, logger="antigravity_sdk.egress"):
        async with echo_server() as echo, egress([LOOPBACK], on_refusal=explode) as (port, _):
            for _ in range(2):
                head = await connect(port, f"example.com:{echo}")
                assert head.startswith(b"HTTP/1.1 403 ")
            head, _, writer = await tunnel(port, f"{LOOPBACK}:{echo}")
            assert head.startswith(b"HTTP/1.1 200 ")
            writer.close()
    assert "on_refusal callback failed" in caplog.text


async def test_many_tunnels_at_once_then_aclose_tears_them_down_promptly() -> None:
    async with echo_server() as echo:
        sock = listening()
        proxy = EgressProxy([LOOPBACK])
        await proxy.serve(sock)
        port = sock.getsockname()[1]

        async def one(i: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            head, reader, writer = await tunnel(port, f"{LOOPBACK}:{echo}")
            assert head.startswith(b"HTTP/1.1 200 ")
            data = i.to_bytes(4, "big") * 5000
            writer.write(data)
            assert await asyncio.wait_for(reader.readexactly(len(data)), 10) == data
            return reader, writer

        pairs = await asyncio.gather(*(one(i) for i in range(100)))
        t0 = time.monotonic()
        await proxy.aclose()
        assert time.monotonic() - t0 < 1.0
        for reader, writer in pairs:
            with contextlib.suppress(ConnectionError):
                assert await asyncio.wait_for(reader.read(), 2) == b""
            writer.close()
        with pytest.raises(OSError):
            await asyncio.open_connection(LOOPBACK, port)


async def test_idle_tunnels_are_closed_but_one_way_traffic_keeps_them_open() -> None:
    async def drip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(6):  # only server-to-client traffic, for 0.6 s
            writer.write(b".")
            await asyncio.sleep(0.1)
        await reader.read()
        writer.close()

    server = await asyncio.start_server(drip, LOOPBACK, 0)
    dport = server.sockets[0].getsockname()[1]
    async with egress([LOOPBACK], idle_timeout=0.25) as (port, _):
        _, reader, writer = await tunnel(port, f"{LOOPBACK}:{dport}")
        assert await asyncio.wait_for(reader.readexactly(6), 5) == b"......"
        t0 = time.monotonic()
        assert await asyncio.wait_for(reader.read(), 5) == b""
        assert time.monotonic() - t0 < 2
        writer.close()
    server.close()


# ---- the forward proxy: plain HTTP


async def test_absolute_form_get_streams_a_chunked_response() -> None:
    first_sent, go_on = asyncio.Event(), asyncio.Event()

    async def route(seen: Seen) -> tuple[int, list[tuple[str, str]], Body]:
        if not seen.target.startswith("/stream"):
            return await _ok(seen)

        async def body() -> AsyncIterator[bytes]:
            yield b"first,"
            first_sent.set()
            await asyncio.wait_for(go_on.wait(), 5)
            for i in range(100):
                yield b"chunk%d," % i

        return 200, [("content-type", "text/plain")], body

    async with Origin(route) as origin, egress([LOOPBACK]) as (port, _):
        client = await Client.open(port)
        url = f"http://{LOOPBACK}:{origin.port}/stream?q=1#frag"
        await client.send("GET", url, [("host", f"{LOOPBACK}:{origin.port}")])
        head = await client.head()
        assert head.status_code == 200
        chunks = client.chunks()
        assert await anext(chunks) == b"first,"  # before the origin has finished
        assert not go_on.is_set()
        go_on.set()
        rest = b"".join([c async for c in chunks])
        assert rest.endswith(b"chunk99,")
        # The connection is kept alive for the next request.
        head, body = await client.request(
            "GET", f"http://{LOOPBACK}:{origin.port}/2", [("host", "x")]
        )
        assert body == b"ok GET /2"
        client.close()
    assert [s.target for s in origin.seen] == ["/stream?q=1", "/2"]


async def test_absolute_form_drops_hop_by_hop_and_proxy_headers() -> None:
    async with Origin() as origin, egress([LOOPBACK]) as (port, _):
        client = await Client.open(port)
        headers = [
            ("host", "wrong.example"),
            ("proxy-authorization", "Basic c2VjcmV0"),
            ("proxy-connection", "keep-alive"),
            ("connection", "x-private, keep-alive"),
            ("x-private", "1"),
            ("keep-alive", "timeout=5"),
            ("te", "trailers"),
            ("upgrade", "websocket"),
            ("x-kept", "yes"),
        ]
        await client.request("GET", f"http://{LOOPBACK}:{origin.port}/h", headers)
        client.close()
    seen = origin.seen[0]
    names = {n for n, _ in seen.headers}
    assert names == {"host", "connection", "x-kept"}
    assert seen.header("host") == [f"{LOOPBACK}:{origin.port}"]
    assert seen.header("connection") == ["close"]


async def test_large_bodies_stream_both_ways() -> None:
    async def route(seen: Seen) -> tuple[int, list[tuple[str, str]], Body]:
        async def body() -> AsyncIterator[bytes]:
            for _ in range(80):
                yield b"z" * 65536

        digest = hashlib.sha256(seen.body).hexdigest()
        return 200, [("x-digest", digest)], body

    upload = os.urandom(5_000_000)
    async with Origin(route) as origin, egress([LOOPBACK]) as (port, _):
        client = await Client.open(port)
        url = f"http://{LOOPBACK}:{origin.port}/up"
        head, body = await client.request(
            "POST", url, [("host", "x"), ("transfer-encoding", "chunked")], upload
        )
        client.close()
    assert dict(head.headers)[b"x-digest"] == hashlib.sha256(upload).hexdigest().encode()
    assert len(body) == 80 * 65536


async def test_a_host_not_allowed_in_absolute_form_is_403() -> None:
    async with egress(["pypi.org"]) as (port, refusals):
        response = await raw(
            port,
            b"POST http://example.com:8080/x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
        )
    assert status_of(response) == 403
    assert response.endswith(EXPECTED_403.format(host="example.com", port=8080).encode())
    assert refusals == [Refusal("example.com", 8080, "POST", "no host pattern allows it")]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not on PATH")
async def test_curl_through_the_proxy(tls_files: tuple[Path, Path]) -> None:
    async def curl(*args: str, env: dict[str, str] | None = None) -> tuple[int, bytes]:
        base = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        proc = await asyncio.create_subprocess_exec(
            "curl", "-sS", "--max-time", "10", *args,
            env={**base, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        out, _ = await proc.communicate()
        return proc.returncode or 0, out

    async with Origin() as origin, Origin(tls=server_tls(tls_files)) as secure:
        async with egress([LOOPBACK]) as (port, refusals):
            proxy = f"http://{LOOPBACK}:{port}"
            assert await curl("-x", proxy, f"http://{LOOPBACK}:{origin.port}/a") == (
                0,
                b"ok GET /a",
            )
            tunnelled = await curl("-p", "-x", proxy, f"http://{LOOPBACK}:{origin.port}/b")
            assert tunnelled == (0, b"ok GET /b")
            url = f"https://{LOOPBACK}:{secure.port}/c"
            env = {"https_proxy": proxy}
            assert await curl("--cacert", str(tls_files[0]), url, env=env) == (0, b"ok GET /c")
        async with egress(["pypi.org"]) as (port, refusals):
            code, _ = await curl(
                "-x", f"http://{LOOPBACK}:{port}", f"http://{LOOPBACK}:{origin.port}/"
            )
            assert code == 0 and refusals[0].method == "GET"
            code, _ = await curl(
                "-x", f"http://{LOOPBACK}:{port}", f"https://{LOOPBACK}:{secure.port}/"
            )
            assert code != 0 and refusals[1].method == "CONNECT"


async def test_urllib_with_proxy_environment_variables(
    tls_files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)

    def fetch(url: str) -> bytes:
        handler = urllib.request.HTTPSHandler(context=client_tls(tls_files))
        with urllib.request.build_opener(handler).open(url, timeout=10) as response:
            return bytes(response.read())

    async with Origin() as origin, Origin(tls=server_tls(tls_files)) as secure:
        async with egress([LOOPBACK]) as (port, _):
            monkeypatch.setenv("http_proxy", f"http://{LOOPBACK}:{port}")
            monkeypatch.setenv("https_proxy", f"http://{LOOPBACK}:{port}")
            plain = await asyncio.to_thread(fetch, f"http://{LOOPBACK}:{origin.port}/p")
            secured = await asyncio.to_thread(fetch, f"https://{LOOPBACK}:{secure.port}/s")
        assert (plain, secured) == (b"ok GET /p", b"ok GET /s")
        async with egress(["pypi.org"]) as (port, _):
            monkeypatch.setenv("http_proxy", f"http://{LOOPBACK}:{port}")
            with pytest.raises(urllib.error.HTTPError) as refused:
                await asyncio.to_thread(fetch, f"http://{LOOPBACK}:{origin.port}/p")
            assert refused.value.code == 403
            refused.value.close()


# ---- the reverse proxy


async def test_reverse_proxy_sets_the_credential_and_strips_headers() -> None:
    async with Origin() as origin:
        upstream = f"http://{LOOPBACK}:{origin.port}/v1beta/"
        headers = {"x-goog-api-key": "REAL-KEY"}
        async with reverse(upstream, headers=headers, strip=["X-Debug"]) as port:
            client = await Client.open(port)
            sent = [("host", "proxy.local"), ("X-Goog-Api-Key", "fake"), ("x-debug", "1"),
                    ("x-other", "kept"), ("connection", "keep-alive")]  # fmt: skip
            head, body = await client.request("POST", "/models/m:stream?alt=sse", sent, b"{}")
            client.close()
    seen = origin.seen[0]
    assert (head.status_code, body) == (200, b"ok POST /v1beta/models/m:stream?alt=sse")
    assert seen.header("x-goog-api-key") == ["REAL-KEY"]
    assert seen.header("host") == [f"{LOOPBACK}:{origin.port}"]
    assert seen.header("x-debug") == [] and seen.header("x-other") == ["kept"]
    assert seen.body == b"{}"


async def test_reverse_proxy_streams_server_sent_events() -> None:
    go_on = asyncio.Event()

    async def route(seen: Seen) -> tuple[int, list[tuple[str, str]], Body]:
        async def events() -> AsyncIterator[bytes]:
            yield b'data: {"n": 0}\n\n'
            await asyncio.wait_for(go_on.wait(), 5)
            for n in range(1, 50):
                yield b'data: {"n": %d}\n\n' % n

        return 200, [("content-type", "text/event-stream")], events

    async with Origin(route) as origin, reverse(f"http://{LOOPBACK}:{origin.port}") as port:
        client = await Client.open(port)
        await client.send("GET", "/mcp", [("host", "x"), ("accept", "text/event-stream")])
        head = await client.head()
        assert dict(head.headers)[b"content-type"] == b"text/event-stream"
        chunks = client.chunks()
        assert await anext(chunks) == b'data: {"n": 0}\n\n'  # while the upstream still waits
        go_on.set()
        rest = b"".join([c async for c in chunks])
        assert rest.count(b"data:") == 49
        client.close()


@pytest.mark.parametrize("upstream_closes", [False, True])
async def test_reverse_proxy_keeps_a_client_connection_alive(upstream_closes: bool) -> None:
    async with (
        Origin(close=upstream_closes) as origin,
        reverse(f"http://{LOOPBACK}:{origin.port}", headers={"authorization": "k"}) as port,
    ):
        client = await Client.open(port)
        for i in range(3):
            body = b"x" * (i * 70_000)  # the third body does not arrive in one read
            head, data = await client.request("POST", f"/r{i}", [("host", "x")], body)
            assert (head.status_code, data) == (200, f"ok POST /r{i}".encode())
        client.close()
    assert [len(s.body) for s in origin.seen] == [0, 70_000, 140_000]
    assert origin.connections == (3 if upstream_closes else 1)


async def test_reverse_proxy_reconnects_when_a_kept_alive_upstream_went_away() -> None:
    async with Origin() as origin, reverse(f"http://{LOOPBACK}:{origin.port}") as port:
        client = await Client.open(port)
        assert (await client.request("GET", "/1", [("host", "x")]))[1] == b"ok GET /1"
        for w in list(origin._writers):  # the upstream drops its idle connection
            w.transport.abort()
        await asyncio.sleep(0.05)
        assert (await client.request("POST", "/2", [("host", "x")], b"{}"))[1] == b"ok POST /2"
        client.close()
    assert origin.connections == 2


async def test_reverse_proxy_answers_502_when_the_upstream_is_down() -> None:
    dead = listening()
    dead_port = dead.getsockname()[1]
    dead.close()
    async with reverse(f"http://{LOOPBACK}:{dead_port}", connect_timeout=2) as port:
        response = await raw(port, b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status_of(response) == 502
    reason = f"cannot reach http://{LOOPBACK}:{dead_port}: connection refused"
    assert response.endswith(f"\r\n\r\nantigravity egress: {reason}\n".encode())


async def test_reverse_proxy_refuses_proxy_requests() -> None:
    async with Origin() as origin, reverse(f"http://{LOOPBACK}:{origin.port}") as port:
        assert (
            status_of(await raw(port, b"GET http://evil.example/ HTTP/1.1\r\nHost: x\r\n\r\n"))
            == 400
        )
        assert (
            status_of(await raw(port, b"CONNECT evil.example:443 HTTP/1.1\r\nHost: x\r\n\r\n"))
            == 400
        )
    assert origin.seen == []


async def test_reverse_proxy_to_an_https_upstream(tls_files: tuple[Path, Path]) -> None:
    async with Origin(tls=server_tls(tls_files)) as origin:
        upstream = f"https://{LOOPBACK}:{origin.port}"
        async with reverse(
            upstream, headers={"x-key": "k"}, ssl_context=client_tls(tls_files)
        ) as port:
            client = await Client.open(port)
            for _ in range(2):
                _, body = await client.request("GET", "/s", [("host", "x")])
                assert body == b"ok GET /s"
            client.close()
        async with reverse(upstream) as port:  # the system's trust store: this cert fails
            assert status_of(await raw(port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")) == 502
    assert origin.seen[0].header("x-key") == ["k"] and origin.connections == 1


@pytest.mark.parametrize(
    "upstream",
    [
        "ftp://x",
        "http://",
        "127.0.0.1:80",
        "http://u:p@x",
        "http://x/?q=1",
        "http://x/#f",
        "http://x:99999",
    ],
)
def test_reverse_proxy_refuses_bad_upstreams(upstream: str) -> None:
    with pytest.raises(ConfigurationError):
        ReverseProxy(upstream)


def test_reverse_proxy_refuses_bad_headers() -> None:
    with pytest.raises(ConfigurationError):
        ReverseProxy("http://x", headers={"x-key": "a\r\nInjected: 1"})
    with pytest.raises(ConfigurationError):
        ReverseProxy("http://x", headers={"bad name": "v"})


@pytest.mark.parametrize(("method", "status"), [("GET", 200), ("HEAD", 200), ("POST", 502)])
async def test_only_safe_requests_are_sent_again_when_a_kept_alive_upstream_drops_them(
    method: str, status: int
) -> None:
    async def route(seen: Seen) -> tuple[int, list[tuple[str, str]], Body]:
        if seen.target == "/2" and seen.conn == 1:  # closes just as the request arrives
            raise Drop
        return await _ok(seen)

    async with Origin(route) as origin, reverse(f"http://{LOOPBACK}:{origin.port}") as port:
        client = await Client.open(port)
        assert (await client.request("GET", "/1", [("host", "x")]))[0].status_code == 200
        head, _ = await client.request(
            method, "/2", [("host", "x")], b"{}" if method == "POST" else b""
        )
        client.close()
    assert head.status_code == status
    assert [s.target for s in origin.seen].count("/2") == (2 if status == 200 else 1)


async def test_head_then_get_on_one_connection_through_the_forward_proxy() -> None:
    async with Origin() as origin, egress([LOOPBACK]) as (port, _):
        client = await Client.open(port)
        url = f"http://{LOOPBACK}:{origin.port}/page"
        head, body = await client.request("HEAD", url, [("host", "x")])
        assert (head.status_code, body, dict(head.headers)[b"content-length"]) == (200, b"", b"13")
        head, body = await client.request("GET", url, [("host", "x")])
        assert body == b"ok GET /page"
        client.close()


async def test_reverse_proxy_streams_large_bodies() -> None:
    async def route(seen: Seen) -> tuple[int, list[tuple[str, str]], Body]:
        async def body() -> AsyncIterator[bytes]:
            for _ in range(100):
                yield b"y" * 65536

        return 200, [("x-got", str(len(seen.body)))], body

    async with Origin(route) as origin, reverse(f"http://{LOOPBACK}:{origin.port}") as port:
        client = await Client.open(port)
        upload = b"u" * 3_000_000
        head, body = await client.request("PUT", "/big", [("host", "x")], upload)
        client.close()
    assert dict(head.headers)[b"x-got"] == b"3000000" and len(body) == 100 * 65536


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not on PATH")
async def test_curl_uploads_with_expect_100_continue(tmp_path: Path) -> None:
    async def route(seen: Seen) -> tuple[int, list[tuple[str, str]], Body]:
        return 200, [], hashlib.sha256(seen.body).hexdigest().encode()

    data = os.urandom(2_000_000)
    (tmp_path / "up.bin").write_bytes(data)
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    async with Origin(route) as origin, egress([LOOPBACK]) as (port, _):
        for extra in ([], ["-H", "Transfer-Encoding: chunked"]):
            proc = await asyncio.create_subprocess_exec(
                "curl", "-sS", "--max-time", "10", "-x", f"http://{LOOPBACK}:{port}",
                "-H", "Expect: 100-continue", *extra, "--data-binary", f"@{tmp_path / 'up.bin'}",
                f"http://{LOOPBACK}:{origin.port}/up", env=env, stdout=subprocess.PIPE,
            )  # fmt: skip
            out, _ = await proc.communicate()
            assert out == hashlib.sha256(data).hexdigest().encode()


async def test_a_silent_upstream_is_cut_off_after_the_idle_timeout() -> None:
    async def route(seen: Seen) -> tuple[int, list[tuple[str, str]], Body]:
        async def body() -> AsyncIterator[bytes]:
            yield b"data: 1\n\n"
            await asyncio.sleep(30)  # then nothing
            yield b""

        return 200, [("content-type", "text/event-stream")], body

    async with (
        Origin(route) as origin,
        reverse(f"http://{LOOPBACK}:{origin.port}", idle_timeout=0.3) as port,
    ):
        client = await Client.open(port)
        await client.send("GET", "/events", [("host", "x")])
        assert (await client.head()).status_code == 200
        chunks = client.chunks()
        assert await anext(chunks) == b"data: 1\n\n"
        t0 = time.monotonic()
        with pytest.raises((h11.RemoteProtocolError, ConnectionError)):
            await anext(chunks)
        assert time.monotonic() - t0 < 3
        client.close()


async def test_the_client_asking_to_close_is_honoured() -> None:
    async with Origin() as origin, reverse(f"http://{LOOPBACK}:{origin.port}") as port:
        response = await raw(port, b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert response.startswith(b"HTTP/1.1 200 ") and b"\r\nok GET /a\r\n0\r\n" in response
        response = await raw(port, b"GET /b HTTP/1.0\r\n\r\n")  # HTTP/1.0: close-delimited
        assert response.startswith(b"HTTP/1.1 200 ") and response.endswith(b"\r\n\r\nok GET /b")


async def test_a_closed_proxy_serves_no_more() -> None:
    proxy = EgressProxy(["pypi.org"])
    await proxy.aclose()
    sock = listening()
    with pytest.raises(RuntimeError):
        await proxy.serve(sock)
    sock.close()


# ---- the reverse proxy: scope, the credential, the connection cap

KEY = "REAL-KEY-0123456789"


async def status_through(port: int, target: str, method: str = "GET") -> bytes:
    return await raw(
        port, f"{method} {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
    )


IN_SCOPE = ["/v1beta", "/v1beta/", "/v1beta/models/m:streamGenerateContent?alt=sse",
            "/v1beta/models?next=/../../admin", "/v1beta/.well-known/x",
            "/v1beta/a...b/...", "/v1beta/m?x#/../.."]  # fmt: skip
OUT_OF_SCOPE = ["/", "/v1", "/v1betax", "/v1beta;/x", "/admin/v1beta", "/V1BETA/models",
                "//v1beta/models", "/v1beta%3f/x", "/%76%31beta/models"]  # fmt: skip
UNSAFE_PATHS = [
    "/v1beta/../admin", "/v1beta/..", "/v1beta/.", "/v1beta/./models", "/v1beta/%2e%2e/admin",
    "/v1beta/%2E%2E/admin", "/v1beta/.%2E/admin", "/v1beta/%2e./admin", "/v1beta/%2e",
    "/v1beta/%2E/models", "/v1beta/..;/admin", "/v1beta/.;x/m", "/v1beta%2f..%2fadmin",
    "/v1beta/x%2Fy", "/v1beta\\..\\admin", "/v1beta/x%5cy", "/v1beta/x%5C..%5Cadmin",
    "/v1beta/../v1beta/models", "/v1beta/m/..%2f..%2fadmin", "/v1beta/m#/../..",
]  # fmt: skip


async def test_reverse_proxy_serves_only_its_scope() -> None:
    refusals: list[Refusal] = []
    async with (
        Origin() as origin,
        reverse(f"http://{LOOPBACK}:{origin.port}", scope="/v1beta/",
                on_refusal=refusals.append) as port,
    ):  # fmt: skip
        for target in IN_SCOPE:
            assert status_of(await status_through(port, target)) == 200, target
        for target in OUT_OF_SCOPE:
            response = await status_through(port, target)
            assert status_of(response) == 403, target
            assert response.endswith(b"is outside /v1beta/, the path served here\n")
        for target in UNSAFE_PATHS:
            response = await status_through(port, target)
            assert status_of(response) == 400, target
            assert b"a dot segment, encoded slash or backslash" in response
    assert [s.target for s in origin.seen] == IN_SCOPE
    assert len(refusals) == len(OUT_OF_SCOPE) + len(UNSAFE_PATHS)
    assert all(r.host == LOOPBACK and r.port == origin.port and r.method == "GET" for r in refusals)
    assert refusals[0].reason == "/ is outside /v1beta/, the path served here"


async def test_reverse_proxy_refuses_dot_segments_whatever_the_scope() -> None:
    async with Origin() as origin, reverse(f"http://{LOOPBACK}:{origin.port}/v1") as port:
        assert status_of(await status_through(port, "/models/../../admin")) == 400
        assert status_of(await status_through(port, "/%2e%2E/admin")) == 400
        assert status_of(await status_through(port, "/models")) == 200
    assert [s.target for s in origin.seen] == ["/v1/models"]


@pytest.mark.parametrize(
    "scope", ["v1beta", "", "/a/../b", "/a/%2E%2e", "/a/.", "/a?x", "/a#b", "/a b", "/a\\b",
              "/a%2fb", "/ä", "/a\n"]
)  # fmt: skip
def test_reverse_proxy_refuses_bad_scopes(scope: str) -> None:
    with pytest.raises(ConfigurationError, match="scope"):
        ReverseProxy("http://x", scope=scope)


async def test_reverse_proxy_refuses_trace_and_connect_with_405() -> None:
    async def reflect(seen: Seen) -> tuple[int, list[tuple[str, str]], Body]:
        return 200, [("content-type", "message/http")], repr(seen.headers).encode()

    refusals: list[Refusal] = []
    async with Origin(reflect) as origin:
        upstream = f"http://{LOOPBACK}:{origin.port}"
        kw: dict[str, Any] = {"headers": {"x-goog-api-key": KEY}, "on_refusal": refusals.append}
        async with reverse(upstream, **kw) as port:
            for request in (b"TRACE / HTTP/1.1", b"TRACE /v1beta/x HTTP/1.1", b"trace / HTTP/1.1",
                            b"TRACK / HTTP/1.1", b"CONNECT /x HTTP/1.1"):  # fmt: skip
                response = await raw(port, request + b"\r\nHost: x\r\n\r\n")
                assert status_of(response) == 405, request
                assert KEY.encode() not in response
            assert KEY.encode() in (await status_through(port, "/echo"))  # the origin reflects
    assert [s.method for s in origin.seen] == ["GET"]
    methods = ["TRACE", "TRACE", "trace", "TRACK", "CONNECT"]
    assert [r.reason for r in refusals] == [f"{m} is not allowed" for m in methods]


async def test_response_headers_holding_the_credential_are_removed() -> None:
    token = "sk-token-abcdef"

    async def route(seen: Seen) -> tuple[int, list[tuple[str, str]], Body]:
        key = seen.header("x-goog-api-key")[0]
        return 302, [
            ("x-echo", key), ("x-upper", f"got {key.upper()}!"), ("location", f"/n?key={key}&a=1"),
            ("www-authenticate", f'Bearer realm="x", token="{token}"'),
            ("x-auth", seen.header("authorization")[0]), ("x-fine", "kept"),
        ], b"moved"  # fmt: skip

    headers = {"x-goog-api-key": KEY, "authorization": f"Bearer {token}", "x-short": "v1"}
    async with (
        Origin(route) as origin,
        reverse(f"http://{LOOPBACK}:{origin.port}", headers=headers) as port,
    ):
        client = await Client.open(port)
        head, body = await client.request("GET", "/m", [("host", "x")])
        client.close()
    assert (head.status_code, body) == (302, b"moved")
    names = {n for n, _ in head.headers}
    assert b"x-fine" in names
    assert not names & {b"x-echo", b"x-upper", b"location", b"www-authenticate", b"x-auth"}
    assert origin.seen[0].header("x-goog-api-key") == [KEY]


async def test_a_reason_phrase_holding_the_credential_is_dropped() -> None:
    async def bad_origin(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(f"HTTP/1.1 401 bad key {KEY}\r\ncontent-length: 2\r\n\r\nno".encode())
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(bad_origin, LOOPBACK, 0)
    upstream = f"http://{LOOPBACK}:{server.sockets[0].getsockname()[1]}"
    async with reverse(upstream, headers={"x-goog-api-key": KEY}) as port:
        response = await status_through(port, "/m")
    server.close()
    assert status_of(response) == 401 and response.endswith(b"\r\n\r\nno")
    assert KEY.encode() not in response


@pytest.mark.parametrize("proxy", ["egress", "reverse"])
async def test_malformed_headers_are_not_echoed(proxy: str) -> None:
    refusals: list[Refusal] = []
    async with Origin() as origin:
        server = (
            egress([LOOPBACK], on_refusal=refusals.append)
            if proxy == "egress"
            else reverse(f"http://{LOOPBACK}:{origin.port}", on_refusal=refusals.append)
        )
        async with server as started:
            port = started[0] if isinstance(started, tuple) else started
            request = b"GET / HTTP/1.1\r\nHost: x\r\nX-Private hush\r\n\r\n"
            response = await raw(port, request)
    assert status_of(response) == 400
    assert response.endswith(b"\r\n\r\nantigravity egress: malformed request\n")
    assert b"hush" not in response and b"X-Private" not in response
    assert "X-Private" in refusals[0].reason  # the audit has it


# The connection cap


async def knock(
    port: int, request: bytes
) -> tuple[bytes, asyncio.StreamReader, asyncio.StreamWriter]:
    """Send `request`: the response head (b"" if the proxy closed first), and the
    connection, for the caller to close."""
    reader, writer = await asyncio.open_connection(LOOPBACK, port)
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10), reader, writer
    except (asyncio.IncompleteReadError, ConnectionError):
        return b"", reader, writer


def turned_away(head: bytes) -> bool:
    return head == b"" or status_of(head) == 503


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(5):
        while not condition():  # noqa: ASYNC110 (the proxy's state has no event to wait on)
            await asyncio.sleep(0.01)


async def test_the_forward_proxy_serves_at_most_max_connections_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="antigravity_sdk.egress")
    async with echo_server() as echo, egress([LOOPBACK], max_connections=4) as (port, refusals):
        request = f"CONNECT {LOOPBACK}:{echo} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        knocks = await asyncio.gather(*(knock(port, request) for _ in range(10)))
        held = [(r, w) for h, r, w in knocks if h.startswith(b"HTTP/1.1 200 ")]
        assert len(held) == 4 and sum(turned_away(h) for h, _, _ in knocks) == 6
        # One report for the burst, not one per connection (nor a log line for each).
        assert [(r.host, r.port, r.method) for r in refusals] == [("", 0, "")]
        assert refusals[0].reason.startswith("4 connections open")
        assert caplog.text.count("connections open") == 1
        for reader, writer in held:  # the tunnels let in still work
            writer.write(b"ping")
            assert await asyncio.wait_for(reader.readexactly(4), 5) == b"ping"
        for _, _, writer in knocks:
            writer.close()
        head = b""
        async with asyncio.timeout(5):  # once they are gone, the proxy serves again
            while not head.startswith(b"HTTP/1.1 200 "):
                head, _, writer = await knock(port, request)
                writer.close()
    assert len(refusals) == 1


async def test_the_reverse_proxy_serves_at_most_max_connections_at_once() -> None:
    go_on = asyncio.Event()

    async def held(seen: Seen) -> tuple[int, list[tuple[str, str]], Body]:
        await asyncio.wait_for(go_on.wait(), 10)
        return await _ok(seen)

    refusals: list[Refusal] = []
    request = b"GET /held HTTP/1.1\r\nHost: x\r\n\r\n"
    async with Origin(held) as origin:
        proxy = ReverseProxy(
            f"http://{LOOPBACK}:{origin.port}", max_connections=4, on_refusal=refusals.append
        )
        sock = listening()
        port = sock.getsockname()[1]

        async def burst(n: int) -> None:
            go_on.clear()
            tasks = [asyncio.create_task(knock(port, request)) for _ in range(10)]
            # Six are closed at once while four reach the upstream, and wait there.
            await until(lambda: sum(t.done() for t in tasks) == 6)
            await until(lambda: len(origin.seen) == 4 * n)
            assert all(turned_away(t.result()[0]) for t in tasks if t.done())
            assert len(refusals) == n  # once per burst
            go_on.set()
            knocks = await asyncio.gather(*tasks)
            assert sum(h.startswith(b"HTTP/1.1 200 ") for h, _, _ in knocks) == 4
            for _, _, writer in knocks:
                writer.close()
            await until(lambda: not proxy._idles)  # all gone: the burst is over

        async with proxy:
            await proxy.serve(sock)
            await burst(1)
            await burst(2)
    assert len(origin.seen) == 8
    assert all(r.reason.startswith("4 connections open") for r in refusals)


@pytest.mark.parametrize("cap", [0, -1, "4", 2.5, None])
def test_max_connections_must_be_a_positive_int(cap: Any) -> None:
    with pytest.raises(ConfigurationError, match="max_connections"):
        EgressProxy([], max_connections=cap)
    with pytest.raises(ConfigurationError, match="max_connections"):
        ReverseProxy("http://x", max_connections=cap)


async def test_closing_the_agents_egress_closes_the_spliced_connections_too() -> None:
    """A connection still open through a splice (a model request in flight when the agent
    stops) is closed with it, both ends: neither waits for the other to hang up."""
    from types import SimpleNamespace

    from antigravity_sdk.agent._outside import Egress

    accepted: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()

    async def on_upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await accepted.put((reader, writer))

    upstream = await asyncio.start_server(on_upstream, "127.0.0.1", 0)
    port = upstream.sockets[0].getsockname()[1]
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    contained = SimpleNamespace(proxy_port=0, upstreams=[], forwarded=[port])
    egress = Egress(lambda refusal: None)
    await egress.start(contained, {port: listener})  # type: ignore[arg-type]
    reader, writer = await asyncio.open_connection(*listener.getsockname())
    writer.write(b"ping")
    up_reader, up_writer = await asyncio.wait_for(accepted.get(), 10)
    assert await asyncio.wait_for(up_reader.readexactly(4), 10) == b"ping"
    await egress.aclose()
    assert await asyncio.wait_for(reader.read(), 10) == b""  # the agent's end
    assert await asyncio.wait_for(up_reader.read(), 10) == b""  # the upstream's
    writer.close()
    up_writer.close()
    upstream.close()


async def test_an_unreachable_spliced_endpoint_answers_502_and_never_resets() -> None:
    """The agent's request is already in the socket when the endpoint turns out to be
    down: the splice answers 502 and reads the request away before closing. Closed with
    the request unread, the kernel would reset the connection, and the harness, told
    "connection reset" instead of 502, retries for minutes."""
    import functools

    from antigravity_sdk.agent._outside import _Downstream

    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    port = dead.getsockname()[1]
    loop = asyncio.get_running_loop()
    factory = functools.partial(_Downstream, ("127.0.0.1", port), f"http://127.0.0.1:{port}", set())
    server = await loop.create_server(factory, "127.0.0.1", 0)
    try:
        for _ in range(20):  # each a race the reset would win now and then
            reader, writer = await asyncio.open_connection(*server.sockets[0].getsockname()[:2])
            writer.write(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
            )
            answer = await asyncio.wait_for(reader.read(), 10)  # raises on a reset
            assert answer.startswith(b"HTTP/1.1 502"), answer
            assert b"connection refused" in answer.lower() or b"cannot reach" in answer
            writer.close()
    finally:
        server.close()
        dead.close()
