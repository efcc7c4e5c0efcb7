"""ScriptedModel's HTTP: the h11 server against the hand-written parser it replaced.

A plain script (not a test): `python benches/bench_scripted_model.py [--batch N] [--rounds N]`.

The old server is `antigravity_sdk/testing.py` as of commit `OLD_COMMIT` (the last one with
the hand-written parser), read with `git show` into a temporary module: the package keeps
no copy of it. Without git (or that commit) only the h11 server is measured.

Both servers run in this process's event loop (the main thread) and answer the same
script; a client in a worker thread sends batches of `--batch` requests with blocking
sockets, the batches of every variant interleaving so drift hits them alike. Per batch:
requests per second (the client's wall clock) and the server's CPU per request (the
event-loop thread's `thread_time`, so the client's own work is not counted). The table
shows medians over `--rounds` batches and the ratio h11/old.

Requests are what the harness sends: a chat completion with a `--body-kb` JSON body
(system prompt, messages, tool schemas), streamed (SSE) or not, on a keep-alive
connection or a new connection each.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from antigravity_sdk import testing as new_testing  # noqa: E402

OLD_COMMIT = "dd2ee40"
REPLY = "Sure. I read the file and the tests pass; nothing else to change here."


def load_old() -> ModuleType | None:
    """`antigravity_sdk/testing.py` at OLD_COMMIT as a standalone module, or None."""
    try:
        source = subprocess.run(
            ["git", "show", f"{OLD_COMMIT}:antigravity_sdk/testing.py"],
            cwd=ROOT,
            capture_output=True,
            check=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    with tempfile.TemporaryDirectory(prefix="bench-scripted-") as tmp:
        path = Path(tmp) / "old_scripted_model.py"
        path.write_bytes(source)
        spec = importlib.util.spec_from_file_location("old_scripted_model", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up by name
        spec.loader.exec_module(module)
    return module


def request_body(stream: bool, body_kb: int) -> bytes:
    tools = [
        {
            "type": "function",
            "function": {
                "name": f"tool_{i}",
                "description": "Does one thing to the workspace. " * 8,
                "parameters": {
                    "type": "object",
                    "properties": {"Path": {"type": "string"}, "Text": {"type": "string"}},
                },
            },
        }
        for i in range(20)
    ]
    body: dict[str, Any] = {
        "model": "scripted-model",
        "messages": [
            {"role": "system", "content": ""},
            {"role": "user", "content": "Check that the tests pass."},
        ],
        "tools": tools,
        "stream": stream,
    }
    pad = body_kb * 1024 - len(json.dumps(body))
    body["messages"][0]["content"] = "You are a careful coding agent. " * max(0, pad // 32)
    return json.dumps(body).encode()


def http_request(body: bytes) -> bytes:
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/json\r\nAccept-Encoding: gzip\r\n"
        f"Content-Length: {len(body)}\r\nConnection: keep-alive\r\n\r\n"
    )
    return head.encode() + body


def read_response(sock: socket.socket, buf: bytearray) -> None:
    """Read one whole response (Content-Length or chunked) off `sock`; leftovers stay in buf."""
    while (end := buf.find(b"\r\n\r\n")) < 0:
        buf += sock.recv(65536)
    head = bytes(buf[:end]).lower()
    del buf[: end + 4]
    if not head.startswith(b"http/1.1 200"):
        raise RuntimeError(f"unexpected response {head[:60]!r}")
    marker = b"content-length:"
    if marker in head:
        length = int(head.split(marker, 1)[1].split(b"\r\n", 1)[0])
        while len(buf) < length:
            buf += sock.recv(65536)
        del buf[:length]
        return
    while (end := buf.find(b"\r\n0\r\n\r\n")) < 0:
        buf += sock.recv(65536)
    del buf[: end + 7]


def client_batch(port: int, payload: bytes, batch: int, keep_alive: bool) -> float:
    """Send `batch` requests, each read back whole; the wall time in seconds."""
    start = time.perf_counter()
    sock: socket.socket | None = None
    buf = bytearray()
    for i in range(batch):
        if sock is None:
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            buf.clear()
        last = i == batch - 1
        sock.sendall(payload if keep_alive and not last else payload_close(payload))
        read_response(sock, buf)
        if not keep_alive or last:
            sock.close()
            sock = None
    return time.perf_counter() - start


def payload_close(payload: bytes) -> bytes:
    return payload.replace(b"Connection: keep-alive", b"Connection: close", 1)


async def bench(
    impls: dict[str, ModuleType], batch: int, rounds: int, body_kb: int
) -> dict[str, tuple[float, float]]:
    servers = {}
    for name, module in impls.items():
        server = module.ScriptedModel(lambda messages, tools: REPLY)
        await server.start()
        servers[name] = server
    variants: dict[str, Callable[[], float]] = {}
    for scenario, stream, keep_alive in (
        ("stream, keep-alive", True, True),
        ("json, keep-alive", False, True),
        ("stream, new connection", True, False),
    ):
        payload = http_request(request_body(stream, body_kb))
        for name, server in servers.items():
            port = server.port
            variants[f"{scenario}|{name}"] = lambda p=port, d=payload, k=keep_alive: client_batch(
                p, d, batch, k
            )
    samples: dict[str, list[tuple[float, float]]] = {k: [] for k in variants}
    try:
        for run in variants.values():  # warm up
            await asyncio.to_thread(run)
        for _ in range(rounds):
            for key, run in variants.items():
                cpu = time.thread_time()
                wall = await asyncio.to_thread(run)
                cpu = time.thread_time() - cpu
                samples[key].append((batch / wall, cpu / batch * 1e6))
    finally:
        for server in servers.values():
            await server.stop()
    return {
        k: (statistics.median(s[0] for s in v), statistics.median(s[1] for s in v))
        for k, v in samples.items()
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--batch", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--body-kb", type=int, default=32)
    args = ap.parse_args()

    impls: dict[str, ModuleType] = {}
    old = load_old()
    if old is None:
        print(f"(no git or no commit {OLD_COMMIT}: measuring the h11 server only)")
    else:
        impls["old"] = old
    impls["h11"] = new_testing
    r = asyncio.run(bench(impls, args.batch, args.rounds, args.body_kb))

    print(
        f"python {sys.version.split()[0]}, batches of {args.batch} requests "
        f"({args.body_kb} KiB JSON body), median of {args.rounds}; req/s = client wall "
        "clock, CPU = the server's event-loop thread, µs per request"
    )
    print()
    header = f"{'scenario':<26}{'req/s':>8}{'CPU µs':>8}"
    if old is not None:
        header = f"{'scenario':<26}{'old req/s':>10}{'h11 req/s':>10}{'ratio':>7}"
        header += f"{'old CPU':>9}{'h11 CPU':>9}{'ratio':>7}"
    print(header)
    for scenario in dict.fromkeys(k.split("|")[0] for k in r):
        new_rps, new_cpu = r[f"{scenario}|h11"]
        if old is None:
            print(f"{scenario:<26}{new_rps:>8.0f}{new_cpu:>8.0f}")
            continue
        old_rps, old_cpu = r[f"{scenario}|old"]
        print(
            f"{scenario:<26}{old_rps:>10.0f}{new_rps:>10.0f}{new_rps / old_rps:>7.2f}"
            f"{old_cpu:>9.0f}{new_cpu:>9.0f}{new_cpu / old_cpu:>7.2f}"
        )


if __name__ == "__main__":
    main()
