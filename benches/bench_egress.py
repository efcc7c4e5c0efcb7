"""What the egress proxies cost (a script, not a test; loopback only).

    .venv/bin/python benches/bench_egress.py [--rounds 15] [--requests 200]

The proxies run in a child process of their own, so `time.process_time()` there is the
proxy's CPU alone; the origin servers (h11) and the client (h11, one kept-alive connection)
run in this process. Each round runs every case directly and through the proxy, in
alternating order; the table gives medians over rounds:

- `json 2k`: a POST answered with a 2 kB JSON body (a model call without streaming);
- `sse 50`: a POST answered with 50 server-sent events, one chunk each (a streamed turn);
- `bulk`: an 8 MB response in 64 KiB chunks (per-MB cost);
- `connect`: a CONNECT tunnel set up through `EgressProxy` and one byte echoed, against
  a plain TCP connection and one byte echoed.

`ReverseProxy` is the h11 relay; `raw splice` is the same route through a byte splice
that changes nothing (what a fast path could at best save: it cannot add a header).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import socket
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection
from pathlib import Path

import h11

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from antigravity_sdk.egress import EgressProxy, ReverseProxy  # noqa: E402

LOOPBACK = "127.0.0.1"
JSON_2K = json.dumps({"candidates": [{"text": "x" * 1900}], "usage": {"total": 42}}).encode()
EVENT = (
    b"data: "
    + json.dumps({"candidates": [{"content": {"parts": [{"text": "y" * 120}]}}]}).encode()
    + b"\n\n"
)
BULK_CHUNK = b"z" * 65536
BULK_CHUNKS = 128  # 8 MiB


# ---- the origins (this process)


async def origin(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """h11 server: /json, /sse, /bulk; keep-alive."""
    conn = h11.Connection(h11.SERVER)
    try:
        while True:
            route = b""
            while not isinstance(ev := conn.next_event(), h11.EndOfMessage):
                if ev is h11.NEED_DATA:
                    conn.receive_data(await reader.read(65536))
                elif isinstance(ev, h11.Request):
                    route = bytes(ev.target)
                elif isinstance(ev, h11.ConnectionClosed):
                    return
            if route == b"/json":
                headers = [
                    ("content-type", "application/json"),
                    ("content-length", str(len(JSON_2K))),
                ]
                writer.write(conn.send(h11.Response(status_code=200, headers=headers)) or b"")
                writer.write(conn.send(h11.Data(data=JSON_2K)) or b"")
            elif route == b"/sse":
                headers = [("content-type", "text/event-stream")]
                writer.write(conn.send(h11.Response(status_code=200, headers=headers)) or b"")
                for _ in range(50):
                    writer.write(conn.send(h11.Data(data=EVENT)) or b"")
                    await writer.drain()
            else:
                size = str(len(BULK_CHUNK) * BULK_CHUNKS)
                writer.write(
                    conn.send(h11.Response(status_code=200, headers=[("content-length", size)]))
                    or b""
                )
                for _ in range(BULK_CHUNKS):
                    writer.write(conn.send(h11.Data(data=BULK_CHUNK)) or b"")
                    await writer.drain()
            writer.write(conn.send(h11.EndOfMessage()) or b"")
            await writer.drain()
            conn.start_next_cycle()
    except (OSError, h11.ProtocolError):
        pass
    finally:
        writer.close()


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (OSError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


# ---- the proxies (the child process)


def proxies_main(upstream_port: int, control: Connection, socks: list[socket.socket]) -> None:
    async def main() -> None:
        reverse = ReverseProxy(
            f"http://{LOOPBACK}:{upstream_port}", headers={"x-goog-api-key": "k" * 39}
        )
        await reverse.serve(socks[0])
        forward = EgressProxy([LOOPBACK])
        await forward.serve(socks[1])

        async def splice(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")  # as the proxies do
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            ur, uw = await asyncio.open_connection(LOOPBACK, upstream_port)

            async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
                try:
                    while data := await src.read(65536):
                        dst.write(data)
                        await dst.drain()
                except OSError:
                    pass
                finally:
                    dst.close()

            await asyncio.gather(pump(reader, uw), pump(ur, writer))

        raw = await asyncio.start_server(splice, sock=socks[2])
        loop = asyncio.get_running_loop()
        while True:
            command = await loop.run_in_executor(None, control.recv)
            if command == "cpu":
                control.send(time.process_time())
            else:
                break
        raw.close()
        await reverse.aclose()
        await forward.aclose()

    asyncio.run(main())


# ---- the client (this process)


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.conn = h11.Connection(h11.CLIENT)

    async def request(self, route: bytes) -> int:
        body = b'{"contents": []}'
        headers = [("host", "x"), ("content-length", str(len(body))), ("x-goog-api-key", "fake")]
        out = self.conn.send(h11.Request(method="POST", target=route, headers=headers)) or b""
        self.writer.write(
            out
            + (self.conn.send(h11.Data(data=body)) or b"")
            + (self.conn.send(h11.EndOfMessage()) or b"")
        )
        got = 0
        while True:
            ev = self.conn.next_event()
            if ev is h11.NEED_DATA:
                self.conn.receive_data(await self.reader.read(65536))
            elif isinstance(ev, h11.Data):
                got += len(ev.data)
            elif isinstance(ev, h11.EndOfMessage):
                self.conn.start_next_cycle()
                return got


async def run_requests(port: int, route: bytes, n: int) -> None:
    client = Client(*await asyncio.open_connection(LOOPBACK, port))
    for _ in range(n):
        await client.request(route)
    client.writer.close()


async def run_connects(port: int, target: int, n: int, via_proxy: bool) -> None:
    for _ in range(n):
        reader, writer = await asyncio.open_connection(LOOPBACK, port)
        if via_proxy:
            writer.write(f"CONNECT {LOOPBACK}:{target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            await reader.readuntil(b"\r\n\r\n")
        writer.write(b"!")
        await reader.readexactly(1)
        writer.close()
        await writer.wait_closed()


# ---- measuring


def proxy_cpu(control: Connection) -> float:
    control.send("cpu")
    return float(control.recv())


async def measure(
    control: Connection, work: Callable[[], Awaitable[None]]
) -> tuple[float, float, float]:
    """Wall, this process's CPU (client + origin), the proxy process's CPU: seconds."""
    p0, c0, w0 = proxy_cpu(control), time.process_time(), time.perf_counter()
    await work()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return wall, cpu, proxy_cpu(control) - p0


def listening(proto: int = 0) -> socket.socket:
    """proto 0, as `socket.socket()` and `socket.create_server` make them: asyncio then
    leaves TCP_NODELAY to the server (the proxies set it; the origins get proto 6)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
    sock.bind((LOOPBACK, 0))
    sock.listen(128)
    return sock


def port_of(sock: socket.socket) -> int:
    return int(sock.getsockname()[1])


async def bench(
    rounds: int, requests: int, parent: Connection, origin_sock: socket.socket,
    echo_sock: socket.socket, proxy_ports: list[int],
) -> None:  # fmt: skip
    origin_server = await asyncio.start_server(origin, sock=origin_sock)
    echo_server = await asyncio.start_server(echo, sock=echo_sock)
    origin_port, echo_port = port_of(origin_sock), port_of(echo_sock)
    reverse_port, forward_port, raw_port = proxy_ports
    n_bulk = max(4, requests // 20)
    cases: dict[str, list[tuple[str, Callable[[], Awaitable[None]], int]]] = {
        "json 2k": [
            ("direct", lambda: run_requests(origin_port, b"/json", requests), requests),
            ("ReverseProxy", lambda: run_requests(reverse_port, b"/json", requests), requests),
            ("raw splice", lambda: run_requests(raw_port, b"/json", requests), requests),
        ],
        "sse 50": [
            ("direct", lambda: run_requests(origin_port, b"/sse", requests), requests),
            ("ReverseProxy", lambda: run_requests(reverse_port, b"/sse", requests), requests),
            ("raw splice", lambda: run_requests(raw_port, b"/sse", requests), requests),
        ],
        "bulk 8MB": [
            ("direct", lambda: run_requests(origin_port, b"/bulk", n_bulk), n_bulk),
            ("ReverseProxy", lambda: run_requests(reverse_port, b"/bulk", n_bulk), n_bulk),
            ("raw splice", lambda: run_requests(raw_port, b"/bulk", n_bulk), n_bulk),
        ],
        "connect": [
            ("direct", lambda: run_connects(echo_port, 0, requests, False), requests),
            (
                "EgressProxy",
                lambda: run_connects(forward_port, echo_port, requests, True),
                requests,
            ),
        ],
    }
    results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for r in range(rounds):
        for case, variants in cases.items():
            order = variants if r % 2 == 0 else variants[::-1]
            for name, work, n in order:
                wall, cpu, pcpu = await measure(parent, work)
                results.setdefault((case, name), []).append((wall / n, cpu / n, pcpu / n))

    print(f"{rounds} rounds x {requests} requests (bulk: {n_bulk}); medians; us per request")
    head = ("case", "path", "wall", "cli+orig CPU", "proxy CPU", "total CPU", "CPU x", "wall x")
    print("{:10} {:13} {:>9} {:>13} {:>10} {:>10} {:>6} {:>7}".format(*head))
    for case, variants in cases.items():
        base_wall = statistics.median(w for w, _, _ in results[(case, "direct")])
        base_cpu = statistics.median(c + p for _, c, p in results[(case, "direct")])
        for name, _, _ in variants:
            rows = results[(case, name)]
            wall = statistics.median(w for w, _, _ in rows)
            cpu = statistics.median(c for _, c, _ in rows)
            pcpu = statistics.median(p for _, _, p in rows)
            total = statistics.median(c + p for _, c, p in rows)
            print(
                f"{case:10} {name:13} {wall * 1e6:9.1f} {cpu * 1e6:13.1f} {pcpu * 1e6:10.1f}"
                f" {total * 1e6:10.1f} {total / base_cpu:6.2f} {wall / base_wall:7.2f}"
            )
    mb = len(BULK_CHUNK) * BULK_CHUNKS / 1e6
    for name in ("ReverseProxy", "raw splice"):
        pcpu = statistics.median(p for _, _, p in results[("bulk 8MB", name)])
        print(f"proxy CPU per MB, {name}: {pcpu / mb * 1e3:.3f} ms")
    origin_server.close()
    echo_server.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, asyncio default loop")
    socks = [listening(socket.IPPROTO_TCP) for _ in range(2)] + [listening() for _ in range(3)]
    proxy_ports = [port_of(s) for s in socks[2:]]
    parent, child = multiprocessing.Pipe()
    proc = multiprocessing.get_context("fork").Process(
        target=proxies_main, args=(port_of(socks[0]), child, socks[2:]), daemon=True
    )
    proc.start()  # before this process has an event loop
    for s in socks[2:]:
        s.close()
    proxy_cpu(parent)  # the proxies are serving
    try:
        asyncio.run(bench(args.rounds, args.requests, parent, socks[0], socks[1], proxy_ports))
    finally:
        parent.send("stop")
        proc.join(5)


if __name__ == "__main__":
    main()
