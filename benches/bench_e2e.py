"""End-to-end cost of the SDK around the REAL harness, next to the official SDK and a floor.

    .venv/bin/python benches/bench_e2e.py [--calls 50] [--reps 3] [--starts 5] [--quick]

A script, not a test. Every measurement runs in a fresh subprocess; the ScriptedModel
serves from its own process. The turn: the model asks for `run_command true` once per
reply, `--calls` times, then answers text; one `pre_tool_call` hook allows every call and
the policy is allow-all, in both SDKs. Ours and the official SDK (`google.antigravity`,
the `bench` extra) alternate run by run (the order flips every rep), on plain asyncio and
on uvloop when it is installed, `--reps` runs each; the table shows medians [min-max].

* CPU per tool call: getrusage(RUSAGE_SELF) user+sys of the SDK's process over the turn,
  divided by the tool calls.
* CPU per callback, frame in -> reply out: thread CPU time from the moment the socket
  bytes holding a harness request reach the protocol to the moment the reply with the
  same request id has been written to the transport; and the wall latency between the
  same two points. Probed where both SDKs and both loops meet and neither SDK's
  internals matter: the event loop's `create_connection` is overridden (a loop
  subclass), the protocol factory wrapped and the transport replaced by a thin proxy in
  `connection_made` (uvloop's transports are C objects that cannot be patched). While
  the turn runs the probe only appends (clock readings, bytes) per chunk in and per
  write out; it cuts WebSocket frames (server frames are unmasked; client frames are
  unmasked here) and matches requests to replies by request id after the turn, so no
  parsing lands in a measured window. What it does add (two clock reads, a tuple, a
  Python call per chunk) is measured warm and shown, not subtracted: its cold-cache
  share after a wake-up would otherwise be paid by the client's own first code.
* A replay floor: one extra turn of ours is recorded at the probe (every harness frame,
  when it arrived, which replies came back), and a loopback `websockets` server in its
  own process replays it with its timing, waiting for each recorded reply before
  sending what followed. The clients only decode each frame (`json.loads`) and answer
  the hook/policy requests with a fixed allow: a bare blocking client (socket +
  websockets' sans-I/O `ClientProtocol`) and a bare asyncio client (an asyncio Protocol
  driving the same `ClientProtocol`, probed like the SDKs, on both loops).
* Peak RSS (ru_maxrss) of the SDK's process, with bytecode caches as after a normal
  install (the bench warms a private PYTHONPYCACHEPREFIX for both SDKs first).
* Agent start (spawn, handshake, initialize), median of `--starts` in one process per
  SDK, plain asyncio; and our code alone on one callback, in process, no sockets.

`--uncontained` adds our SDK with containment off, interleaved, and prints what
containment adds per tool call (mostly the relay each model call crosses).

Internal modes: `--serve N` (the model server), `--worker SDK LOOP` (one turn, one JSON
line), `--start SDK`, `--replay-serve FILE`, `--replay-client KIND LOOP PORT`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import re
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from websockets.frames import Opcode
from websockets.http11 import Response

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

LOOPS = ("asyncio", "uvloop")
_DATA = (Opcode.TEXT, Opcode.BINARY, Opcode.CONT)
PROMPT = "Run `true` as often as you are told to."


def calibration_us() -> float:
    """CPU-µs of sum(range(1000)) on this box right now (an idle laptop: ~8-10)."""
    began = time.thread_time_ns()
    for _ in range(100):
        sum(range(1000))
    return (time.thread_time_ns() - began) / 100 / 1000


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


# -- the scripted model -------------------------------------------------------------------


def make_script(calls: int) -> Any:
    """Stateless: the reply depends only on how many tool calls the conversation holds."""
    from antigravity_sdk.testing import text, tool_call

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        done = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
        if done < calls:
            return tool_call("run_command", CommandLine="true", WaitMsBeforeAsync=5000)
        return text("done")

    return script


async def serve(calls: int) -> None:
    from antigravity_sdk.testing import ScriptedModel

    async with ScriptedModel(make_script(calls)) as model:
        print(model.base_url, flush=True)
        await asyncio.to_thread(sys.stdin.read)  # until the parent closes our stdin


# -- the probe: at the loop's socket transport --------------------------------------------

_REQ = re.compile(rb'"(callHookRequest|policyDecisionRequest)"')
_RESP = re.compile(rb'"(callHookResponse|policyDecisionResponse)"')
_ID = re.compile(rb'"requestId"\s*:\s*"([^"]*)"')


def _frames(buf: bytearray) -> list[tuple[int, bool, bytes]]:
    """Pops the complete WebSocket frames off `buf`: (opcode, fin, unmasked payload)."""
    out, pos, size = [], 0, len(buf)
    while size - pos >= 2:
        b0, b1 = buf[pos], buf[pos + 1]
        length, head = b1 & 0x7F, 2
        if length == 126:
            if size - pos < 4:
                break
            length, head = int.from_bytes(buf[pos + 2 : pos + 4], "big"), 4
        elif length == 127:
            if size - pos < 10:
                break
            length, head = int.from_bytes(buf[pos + 2 : pos + 10], "big"), 10
        mask = b""
        if b1 & 0x80:
            mask, head = bytes(buf[pos + head : pos + head + 4]), head + 4
        end = pos + head + length
        if end > size:
            break
        payload = bytes(buf[pos + head : end])
        if mask and length:
            key = (mask * (length // 4 + 1))[:length]
            payload = (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(
                length, "big"
            )
        out.append((b0 & 0x0F, bool(b0 & 0x80), payload))
        pos = end
    del buf[:pos]
    return out


class _Stream:
    """One connection's two byte streams, cut into WebSocket messages after the turn."""

    def __init__(self) -> None:
        self.websocket: bool | None = None  # decided by the first write (the HTTP upgrade)
        self.head: bytearray | None = bytearray()  # the server's HTTP response, until its end
        self.inbuf, self.outbuf = bytearray(), bytearray()
        self.parts_in: list[bytes] = []
        self.parts_out: list[bytes] = []
        self.opcode_in = 1

    def incoming(self, data: bytes) -> list[tuple[int, bytes]]:
        if not self.websocket:
            return []
        if self.head is not None:
            self.head += data
            cut = self.head.find(b"\r\n\r\n")
            if cut < 0:
                return []
            self.inbuf += self.head[cut + 4 :]
            self.head = None
        else:
            self.inbuf += data
        messages = []
        for opcode, fin, payload in _frames(self.inbuf):
            if opcode in (1, 2):
                self.opcode_in = opcode
            elif opcode != 0:
                continue  # control frames
            self.parts_in.append(payload)
            if fin:
                messages.append((self.opcode_in, b"".join(self.parts_in)))
                self.parts_in.clear()
        return messages

    def outgoing(self, data: bytes) -> list[tuple[int, bytes]]:
        if self.websocket is None:
            self.websocket = b"upgrade: websocket" in data.lower()
            return []
        if not self.websocket:
            return []
        self.outbuf += data
        messages = []
        for opcode, fin, payload in _frames(self.outbuf):
            if opcode in (0, 1, 2):
                self.parts_out.append(payload)
                if fin:
                    messages.append((opcode, b"".join(self.parts_out)))
                    self.parts_out.clear()
        return messages


class Probe:
    """Timestamps every chunk in and every write out, and does nothing else while the
    turn runs: the frames are cut, and requests matched to replies by request id,
    afterwards (`analyse`), so parsing never lands inside a measured window."""

    def __init__(self) -> None:
        # (stream, outgoing?, thread CPU ns, wall ns, bytes), in the order they happened
        self.events: list[tuple[_Stream, bool, int, int, bytes]] = []
        self.first = self.last = 0  # the turn's events: events[first:last]
        self.began_ns = 0
        self.cpu_ns: list[int] = []
        self.latency_ns: list[int] = []
        self.frames_in = self.requests = self.replies = 0
        self.record: list[tuple[str, int, Any]] = []

    def start(self) -> None:
        self.first, self.began_ns = len(self.events), time.perf_counter_ns()

    def stop(self) -> None:
        self.last = len(self.events)

    def analyse(self) -> None:
        pending: dict[tuple[bytes, bytes], tuple[int, int]] = {}
        for index, (stream, out, cpu, wall, data) in enumerate(self.events):
            inside = self.first <= index < self.last
            for opcode, message in stream.outgoing(data) if out else stream.incoming(data):
                if not inside:
                    continue
                kind = (_RESP if out else _REQ).search(message, 0, 300)
                rid = _ID.search(message) if kind else None
                key = (kind.group(1)[:4], rid.group(1)) if kind and rid else None
                if not out:
                    self.frames_in += 1
                    self.record.append(("in", wall, (opcode, message.decode("utf-8", "replace"))))
                    if key:
                        self.requests += 1
                        pending[key] = (cpu, wall)
                elif key and key in pending:
                    began = pending.pop(key)
                    self.replies += 1
                    self.cpu_ns.append(cpu - began[0])
                    self.latency_ns.append(wall - began[1])
                    self.record.append(("out", wall, key[1].decode()))


class _ProbedTransport(asyncio.Transport):
    """Forwards everything to the loop's transport; notes every write after it happened.
    An `asyncio.Transport` itself, for protocols that check what they are given."""

    def __init__(self, transport: Any, stream: _Stream, events: list[Any]) -> None:
        super().__init__()
        self._transport, self._stream, self._events = transport, stream, events

    def write(self, data: Any) -> None:
        self._transport.write(data)
        self._events.append(
            (
                self._stream,
                True,
                time.thread_time_ns(),
                time.perf_counter_ns(),
                data if type(data) is bytes else bytes(data),
            )
        )

    def writelines(self, chunks: Any) -> None:
        chunks = list(chunks)
        self._transport.writelines(chunks)
        self._events.append(
            (self._stream, True, time.thread_time_ns(), time.perf_counter_ns(), b"".join(chunks))
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def _forward(name: str) -> Any:
    def method(self: _ProbedTransport, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._transport, name)(*args, **kwargs)

    method.__name__ = name
    return method


for _name in dir(asyncio.Transport):  # the base class's stubs would shadow __getattr__
    if not _name.startswith("_") and _name not in ("write", "writelines"):
        setattr(_ProbedTransport, _name, _forward(_name))


class _Probed:
    """Sits between the loop's transport and the client's protocol."""

    def __init__(self, inner: Any, probe: Probe) -> None:
        self.inner, self.stream, self.events = inner, _Stream(), probe.events
        self.transport: _ProbedTransport | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = _ProbedTransport(transport, self.stream, self.events)
        self.inner.connection_made(self.transport)

    def eof_received(self) -> bool | None:
        result: bool | None = self.inner.eof_received()
        return result

    def connection_lost(self, exc: Exception | None) -> None:
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


class _ProbedProtocol(_Probed, asyncio.Protocol):
    def data_received(self, data: bytes) -> None:
        self.events.append(
            (self.stream, False, time.thread_time_ns(), time.perf_counter_ns(), data)
        )
        self.inner.data_received(data)


class _ProbedBufferedProtocol(_Probed, asyncio.BufferedProtocol):
    """For a client protocol that reads into its own buffer (not an asyncio.Protocol, so
    that the loop calls these two)."""

    def get_buffer(self, sizehint: int) -> Any:
        self._buffer = memoryview(self.inner.get_buffer(sizehint))
        return self._buffer

    def buffer_updated(self, nbytes: int) -> None:
        self.events.append(
            (
                self.stream,
                False,
                time.thread_time_ns(),
                time.perf_counter_ns(),
                bytes(self._buffer[:nbytes]),
            )
        )
        self.inner.buffer_updated(nbytes)


def probe_cost_us() -> float:
    """Warm CPU-µs the probe adds per chunk in or write out (what stays in the figures)."""

    class Sink(asyncio.Protocol):
        def data_received(self, data: bytes) -> None:
            pass

        def write(self, data: bytes) -> None:
            pass

    probe, rounds, data = Probe(), 20000, b"x" * 400
    protocol = _ProbedProtocol(Sink(), probe)
    protocol.connection_made(Sink())
    assert protocol.transport is not None
    cpu0 = time.thread_time_ns()
    for _ in range(rounds):
        protocol.data_received(data)
        protocol.transport.write(data)
    return (time.thread_time_ns() - cpu0) / rounds / 2 / 1000


def probed_loop_factory(loop: str, probe: Probe) -> Callable[[], asyncio.AbstractEventLoop]:
    """An event loop class whose `create_connection` puts the probe on every connection."""
    base: Any = asyncio.SelectorEventLoop
    if loop == "uvloop":
        import uvloop

        base = uvloop.Loop

    class ProbedLoop(base):  # type: ignore[misc, valid-type]
        async def create_connection(self, factory: Any, *args: Any, **kwargs: Any) -> Any:
            def wrapped() -> _Probed:
                inner = factory()
                if isinstance(inner, asyncio.BufferedProtocol):
                    return _ProbedBufferedProtocol(inner, probe)
                return _ProbedProtocol(inner, probe)

            _, outer = await super().create_connection(wrapped, *args, **kwargs)
            return outer.transport, outer.inner

    return ProbedLoop


def callback_figures(probe: Probe, calls: int, cpu_s: float) -> dict[str, Any]:
    """The turn's figures; call after `probe.stop()`."""
    events = probe.last - probe.first
    probe.analyse()
    return {
        "cpu_call_ms": cpu_s / max(1, calls) * 1000,
        "probe_call_us": events * probe_cost_us() / max(1, calls),
        "callback_cpu_us": statistics.median(probe.cpu_ns) / 1000 if probe.cpu_ns else None,
        "callback_wall_us": (
            statistics.median(probe.latency_ns) / 1000 if probe.latency_ns else None
        ),
        "frames_in": probe.frames_in,
        "requests": probe.requests,
        "replies": probe.replies,
    }


# -- the two SDKs --------------------------------------------------------------------------


def _ours_agent(
    root: Path, base_url: str, counter: dict[str, int], *, contained: bool = True
) -> Any:
    from antigravity_sdk import Agent, Containment, Hook, HookResult, policy
    from antigravity_sdk.types import ToolCall

    class Allow(Hook):
        async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
            counter["pre"] += 1
            return HookResult.ALLOWED

    (root / "ws").mkdir(exist_ok=True)
    return (
        Agent.builder()
        .hook(Allow())
        .policies([policy.allow_all()])
        .workspaces([root / "ws"])
        .save_dir(root / "save")
        .app_data_dir(root / "app")
        .model("scripted-model", base_url=base_url)
        .containment(Containment() if contained else None)
        .build()
    )


def _official_agent(root: Path, base_url: str, counter: dict[str, int]) -> Any:
    from google.antigravity import Agent, LocalOpenAIAgentConfig
    from google.antigravity.hooks import hooks as ag_hooks
    from google.antigravity.hooks import policy as ag_policy

    class Allow(ag_hooks.PreToolCallDecideHook):
        async def run(self, context: Any, data: Any) -> Any:
            counter["pre"] += 1
            return ag_hooks.HookResult(allow=True)

    for name in ("ws", "save", "app"):
        (root / name).mkdir(exist_ok=True)
    config = LocalOpenAIAgentConfig(
        model="scripted-model",
        base_url=base_url,
        hooks=[Allow()],
        policies=[ag_policy.allow_all()],
        workspaces=[str(root / "ws")],
        save_dir=str(root / "save"),
        app_data_dir=str(root / "app"),
    )
    return Agent(config)


def build_agent(sdk: str, root: Path, base_url: str, counter: dict[str, int]) -> Any:
    if sdk == "ours":
        return _ours_agent(root, base_url, counter)
    if sdk == "ours-uncontained":
        return _ours_agent(root, base_url, counter, contained=False)
    return _official_agent(root, base_url, counter)


async def turn_worker(
    sdk: str, probe: Probe, calls: int, url: str, record: str | None
) -> dict[str, Any]:
    counter = {"pre": 0}
    out: dict[str, Any] = {"calibration_us": calibration_us()}
    with tempfile.TemporaryDirectory(prefix="bench-e2e-") as tmp:
        async with build_agent(sdk, Path(tmp), url, counter) as agent:
            profiler = None
            if os.environ.get("BENCH_PROFILE_TURN"):
                import cProfile

                profiler = cProfile.Profile()
                profiler.enable()
            probe.start()
            cpu0, wall0 = cpu_seconds(), time.perf_counter()
            response = await agent.chat(PROMPT)
            answer = response.text
            if callable(answer):  # the official ChatResponse streams: await the turn's end
                answer = await answer()
            wall, cpu = time.perf_counter() - wall0, cpu_seconds() - cpu0
            probe.stop()
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(os.environ["BENCH_PROFILE_TURN"])
    out["rss_mb"] = peak_rss_mb()  # before the probe's analysis allocates anything
    out.update(
        callback_figures(probe, counter["pre"], cpu),
        wall_s=wall,
        calls=counter["pre"],
        answer_ok=str(answer).strip().endswith("done"),
    )
    if record:
        save_replay(Path(record), probe, counter["pre"])
    return out


async def start_worker(sdk: str, starts: int, url: str) -> dict[str, Any]:
    times = []
    with tempfile.TemporaryDirectory(prefix="bench-e2e-") as tmp:
        for _ in range(starts):
            agent = build_agent(sdk, Path(tmp), url, {"pre": 0})
            began = time.perf_counter()
            await agent.__aenter__()
            times.append(time.perf_counter() - began)
            await agent.__aexit__(None, None, None)
    return {"start_s": statistics.median(times)}


# -- the replay floor -------------------------------------------------------------------------


def save_replay(path: Path, probe: Probe, calls: int) -> None:
    """The recorded turn as steps: send a frame `gap` s after the previous step, or wait
    for the reply to a request id (the gap after it counts from its arrival)."""
    steps: list[dict[str, Any]] = []
    previous = probe.began_ns
    for kind, at, what in probe.record:
        if kind == "in":
            opcode, body = what
            steps.append({"gap": (at - previous) / 1e9, "text": opcode == 1, "frame": body})
        else:
            steps.append({"await": what})
        previous = at
    path.write_text(json.dumps({"calls": calls, "steps": steps}))


async def replay_serve(steps: list[dict[str, Any]]) -> None:
    from websockets.asyncio.server import serve as ws_serve

    async def handler(ws: Any) -> None:
        replied: set[str] = set()
        arrived = asyncio.Event()

        async def read() -> None:
            async for message in ws:
                rid = _ID.search(message.encode() if isinstance(message, str) else message)
                if rid:
                    replied.add(rid.group(1).decode())
                    arrived.set()

        await ws.recv()  # the client's go
        reader = asyncio.create_task(read())
        clock = time.perf_counter
        previous = clock()
        try:
            for step in steps:
                if "await" in step:
                    while step["await"] not in replied:
                        arrived.clear()
                        await asyncio.wait_for(arrived.wait(), 30)
                    previous = clock()
                    continue
                due = previous + step["gap"]
                if due > clock():
                    await asyncio.sleep(due - clock())
                frame = step["frame"]
                await ws.send(frame if step["text"] else frame.encode())
                previous = due
            await ws.close()  # the end of the turn: a close frame, no data frame
        finally:
            reader.cancel()

    async with ws_serve(handler, "127.0.0.1", 0, compression=None, max_size=None) as server:
        print(server.sockets[0].getsockname()[1], flush=True)
        await asyncio.to_thread(sys.stdin.read)


_ALLOW_TOOL = {"decision": "ALLOW"}


def fixed_answer(frame: Any) -> dict[str, Any] | None:
    """A fixed allow for hook and policy requests; nothing for any other frame."""
    request = frame.get("callHookRequest")
    if request is not None:
        body: dict[str, Any] = {"requestId": request["requestId"]}
        if "preToolArgs" in request:
            body["preToolResult"] = _ALLOW_TOOL
        else:
            body["emptyResult"] = {}
        return {"callHookResponse": body}
    request = frame.get("policyDecisionRequest")
    if request is not None:
        return {
            "policyDecisionResponse": {
                "requestId": request["requestId"],
                "outcome": "POLICY_EVALUATION_OUTCOME_ALLOW",
            }
        }
    return None


def _client_protocol(port: int) -> Any:
    from websockets.client import ClientProtocol
    from websockets.uri import parse_uri

    return ClientProtocol(parse_uri(f"ws://127.0.0.1:{port}/"), max_size=None)


OPENED = object()  # the handshake completed
CLOSED = object()  # the server closed: the recorded turn is over


def _messages(ws: Any, parts: list[bytes]) -> Any:
    """What the sans-I/O parser just produced: OPENED, CLOSED or a data message (bytes)."""
    for event in ws.events_received():
        if isinstance(event, Response):
            yield OPENED
        elif event.opcode is Opcode.CLOSE:
            yield CLOSED
        elif event.opcode in _DATA:
            parts.append(event.data)
            if event.fin:
                yield b"".join(parts)
                parts.clear()


def blocking_client(port: int, calls: int) -> dict[str, Any]:
    """Socket + sans-I/O parser, one thread, blocking recv: decode, answer, nothing else."""
    ws = _client_protocol(port)
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    ws.send_request(ws.connect())
    sock.sendall(b"".join(ws.data_to_send()))
    cpu_ns: list[int] = []
    latency_ns: list[int] = []
    frames, cpu0, closed, parts = 0, 0.0, False, list[bytes]()
    try:
        while not closed:
            data = sock.recv(1 << 18)
            cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
            if not data:
                raise RuntimeError("the replay server closed the connection early")
            ws.receive_data(data)
            for message in _messages(ws, parts):
                if message is OPENED:
                    ws.send_text(b"go")
                    cpu0 = cpu_seconds()
                elif message is CLOSED:
                    closed = True
                else:
                    frames += 1
                    reply = fixed_answer(json.loads(message))
                    if reply is not None:
                        ws.send_text(json.dumps(reply).encode())
                        sock.sendall(b"".join(ws.data_to_send()))
                        cpu_ns.append(time.thread_time_ns() - cpu)
                        latency_ns.append(time.perf_counter_ns() - wall)
            pending = ws.data_to_send()
            if pending:
                sock.sendall(b"".join(pending))
        cpu_s = cpu_seconds() - cpu0
    finally:
        sock.close()
    return {
        "cpu_call_ms": cpu_s / max(1, calls) * 1000,
        "callback_cpu_us": statistics.median(cpu_ns) / 1000 if cpu_ns else None,
        "callback_wall_us": statistics.median(latency_ns) / 1000 if latency_ns else None,
        "frames_in": frames,
        "replies": len(cpu_ns),
        "rss_mb": peak_rss_mb(),
    }


class _BareProtocol(asyncio.Protocol):
    """An asyncio Protocol driving the sans-I/O parser: decode, answer, nothing else."""

    def __init__(self, port: int, done: asyncio.Future[float]) -> None:
        self.ws, self.done, self.parts = _client_protocol(port), done, list[bytes]()
        self.cpu0 = 0.0

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.ws.send_request(self.ws.connect())
        transport.write(b"".join(self.ws.data_to_send()))

    def data_received(self, data: bytes) -> None:
        ws = self.ws
        ws.receive_data(data)
        for message in _messages(ws, self.parts):
            if message is OPENED:
                ws.send_text(b"go")
                self.cpu0 = cpu_seconds()
            elif message is CLOSED:
                if not self.done.done():
                    self.done.set_result(cpu_seconds() - self.cpu0)
            else:
                reply = fixed_answer(json.loads(message))
                if reply is not None:
                    ws.send_text(json.dumps(reply).encode())
                    self.transport.write(b"".join(ws.data_to_send()))
        pending = ws.data_to_send()
        if pending:
            self.transport.write(b"".join(pending))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(RuntimeError(f"the replay connection was lost: {exc}"))


async def asyncio_client(port: int, calls: int, probe: Probe) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[float] = loop.create_future()
    transport, _ = await loop.create_connection(
        lambda: _BareProtocol(port, done), "127.0.0.1", port
    )
    transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    probe.start()
    try:
        cpu_s = await asyncio.wait_for(done, 120)
    finally:
        transport.close()
    probe.stop()
    rss = peak_rss_mb()
    return {**callback_figures(probe, calls, cpu_s), "rss_mb": rss}


# -- our code alone ---------------------------------------------------------------------------

_PRE_TOOL_FRAME = json.dumps(
    {
        "callHookRequest": {
            "preToolArgs": {
                "toolName": "run_command",
                "argumentsJson": '{"CommandLine":"true","Cwd":"/tmp/ws","WaitMsBeforeAsync":5000}',
                "serverName": "",
                "callId": "call_2",
                "trajectoryId": "3eea33a4e35d17e07b3e21e8d0509940",
                "stepIndex": 2,
            },
            "requestId": "hook_request_2",
            "name": "PreTool",
            "type": "LIFECYCLE_HOOK_PRE_TOOL",
        },
        "seqNum": "7",
    }
)


def callback_path_us(rounds: int) -> float:
    """Our code alone on one PRE_TOOL callback, no sockets: decode, core, the allowing
    hook + the allow-all policy, reply, encode with the connection's own encoder (median
    of 5 batches, CPU-µs)."""
    from antigravity_sdk import Hook, HookResult, HookRunner, policy
    from antigravity_sdk.harness.connection import _encode
    from antigravity_sdk.harness.effects import HookCall
    from antigravity_sdk.harness.protocol import SessionCore
    from antigravity_sdk.harness.wire import decode_frame
    from antigravity_sdk.tools import ToolRunner
    from antigravity_sdk.types import ToolCall

    class Allow(Hook):
        async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
            return HookResult.ALLOWED

    runner = HookRunner([Allow(), policy.enforce([policy.allow_all()])])
    tools = ToolRunner()
    core = SessionCore()

    frame = _PRE_TOOL_FRAME.encode()  # as it comes off the socket

    async def one() -> bytes:
        (call,) = core.receive(decode_frame(frame))
        assert isinstance(call, HookCall)
        return _encode(call.reply(await call.decide(runner, tools))).encode()

    async def measure() -> float:
        for _ in range(500):
            await one()
        batches = []
        for _ in range(5):
            cpu0 = time.thread_time_ns()
            for _ in range(rounds):
                await one()
            batches.append((time.thread_time_ns() - cpu0) / rounds / 1000)
        return statistics.median(batches)

    return asyncio.run(measure())


# -- the orchestrator -------------------------------------------------------------------------


def run_json(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench_e2e", *args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"worker {args} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


@contextlib.contextmanager
def server(args: list[str], env: dict[str, str]) -> Any:
    """A helper process that prints one line (its address) and runs until stdin closes."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench_e2e", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if not line:
            raise RuntimeError(f"{args} did not start")
        yield line
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def spread(rows: list[dict[str, Any]], key: str) -> tuple[float, float, float] | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    if not values:
        return None
    return statistics.median(values), min(values), max(values)


def cell(stat: tuple[float, float, float] | None, digits: int) -> str:
    if stat is None:
        return "-"
    mid, low, high = stat
    return f"{mid:.{digits}f} [{low:.{digits}f}-{high:.{digits}f}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--starts", type=int, default=5, help="agent starts to time (0: skip)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 5 calls, 1 rep")
    parser.add_argument("--no-official", action="store_true")
    parser.add_argument("--profile", action="store_true", help="cProfile one turn per SDK")
    parser.add_argument("--dump", default=None, metavar="FILE", help="write raw results (JSON)")
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--uncontained",
        action="store_true",
        help="also run ours with containment off, interleaved: what containment adds",
    )
    parser.add_argument("--worker", nargs=2, metavar=("SDK", "LOOP"), help=argparse.SUPPRESS)
    parser.add_argument("--start", default=None, metavar="SDK", help=argparse.SUPPRESS)
    parser.add_argument("--model-url", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--record", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--replay-serve", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--replay-client", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.calls, args.reps, args.starts = 5, 1, min(args.starts, 1)

    if args.serve is not None:
        asyncio.run(serve(args.serve))
        return 0
    if args.replay_serve:
        asyncio.run(replay_serve(json.loads(Path(args.replay_serve).read_text())["steps"]))
        return 0
    if args.start:
        print(json.dumps(asyncio.run(start_worker(args.start, args.starts, args.model_url))))
        return 0
    if args.worker or args.replay_client:
        probe = Probe()
        if args.replay_client:
            kind, loop, port = args.replay_client
            if kind == "blocking":
                print(json.dumps(blocking_client(int(port), args.calls)))
                return 0
            coro: Any = asyncio_client(int(port), args.calls, probe)
        else:
            sdk, loop = args.worker
            coro = turn_worker(sdk, probe, args.calls, args.model_url, args.record)
        with asyncio.Runner(loop_factory=probed_loop_factory(loop, probe)) as runner:
            print(json.dumps(runner.run(coro)), flush=True)
        return 0
    return orchestrate(args)


def orchestrate(args: Any) -> int:
    from antigravity_sdk.harness.install import find_harness

    official = not args.no_official and importlib.util.find_spec("google.antigravity") is not None
    sdks = ["ours", *(["official"] if official else [])]
    loops = [lp for lp in LOOPS if lp == "asyncio" or importlib.util.find_spec(lp) is not None]
    calibration = [calibration_us()]
    results: dict[str, list[dict[str, Any]]] = {}

    def add(key: str, row: dict[str, Any]) -> None:
        results.setdefault(key, []).append(row)

    with tempfile.TemporaryDirectory(prefix="bench-e2e-home-") as home:
        env = dict(os.environ, HOME=home, ANTIGRAVITY_HARNESS_PATH=str(find_harness()))
        env.pop("GEMINI_API_KEY", None)
        # Measure as installed: with bytecode caches, in a private prefix. Without them
        # (this sandbox sets PYTHONDONTWRITEBYTECODE) every import compiles its source, and
        # the compiler's transient memory would inflate both SDKs' peak RSS.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(home) / "pycache")
        # Workers run as `-m bench_e2e`, from bytecode: a script run by path is compiled
        # from source every time, and that alone lifts peak RSS by megabytes.
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
        warm = "import bench_e2e, antigravity_sdk.agent, antigravity_sdk.harness.connection"
        warm += "".join(f"; import {name}" for name in loops if name != "asyncio")
        if official:
            warm += "; import google.antigravity"
        subprocess.run([sys.executable, "-c", warm], env=env, check=True)
        calls = ["--calls", str(args.calls)]
        replay = Path(home) / "replay.json"
        with server(["--serve", str(args.calls)], env) as url:
            model = ["--model-url", url]
            if args.starts > 0:
                for sdk in sdks:
                    add(
                        f"start/{sdk}",
                        run_json(["--start", sdk, "--starts", str(args.starts), *model], env),
                    )
            # the recorded turn (not measured): ours on plain asyncio
            run_json(["--worker", "ours", "asyncio", *model, *calls, "--record", str(replay)], env)
            script = json.loads(replay.read_text())
            floor_calls = ["--calls", str(script["calls"])]
            with server(["--replay-serve", str(replay)], env) as port:
                for rep in range(args.reps):
                    order = sdks if rep % 2 == 0 else sdks[::-1]
                    for loop in loops:
                        for sdk in [*order, *(["ours-uncontained"] if args.uncontained else [])]:
                            add(
                                f"{sdk}/{loop}",
                                run_json(["--worker", sdk, loop, *model, *calls], env),
                            )
                        add(
                            f"floor-asyncio/{loop}",
                            run_json(["--replay-client", "asyncio", loop, port, *floor_calls], env),
                        )
                    add(
                        "floor-blocking",
                        run_json(["--replay-client", "blocking", "-", port, *floor_calls], env),
                    )
            if args.profile:
                for sdk in sdks:
                    out = Path(tempfile.gettempdir()) / f"bench_e2e_{sdk}.prof"
                    run_json(
                        ["--worker", sdk, "asyncio", *model, *calls],
                        dict(env, BENCH_PROFILE_TURN=str(out)),
                    )
                    print(f"profile of one turn ({sdk}, asyncio): {out}")
    calibration.append(calibration_us())
    inproc = callback_path_us(2000 if args.quick else 20000)
    report(results, sdks, loops, args, calibration, inproc, script)
    for loop in loops if args.uncontained else ():
        bare = spread(results.get(f"ours-uncontained/{loop}", []), "cpu_call_ms")
        ours = spread(results.get(f"ours/{loop}", []), "cpu_call_ms")
        if bare and ours:
            print(
                f"CPU per tool call, ours uncontained ({loop}): {cell(bare, 3)} ms; "
                f"containment adds {ours[0] - bare[0]:+.3f} ms per tool call (its one model "
                "call crosses the SDK's relay between the agent's network and this machine's)"
            )
    return 0


def report(
    results: dict[str, list[dict[str, Any]]],
    sdks: list[str],
    loops: list[str],
    args: Any,
    calibration: list[float],
    inproc: float,
    script: dict[str, Any],
) -> None:
    official = "official" in sdks
    workers = [row for key, rows in results.items() if "/" in key for row in rows]
    worker_cal = [r["calibration_us"] for r in workers if "calibration_us" in r]
    print(
        f"\nmachine: sum(range(1000)) takes {calibration[0]:.1f} CPU-µs before, "
        f"{calibration[1]:.1f} after"
        + (f", {statistics.median(worker_cal):.1f} in the workers (median)" if worker_cal else "")
        + " (an idle laptop: ~8-10)"
    )
    replies = sum(1 for s in script["steps"] if "await" in s)
    print(
        f"{args.calls}-call turn (`run_command true`, one allowing pre_tool_call hook, allow-all "
        f"policy), medians of {args.reps} alternating runs [min-max]; the recorded turn: "
        f"{len(script['steps']) - replies} frames in, {replies} replies"
    )
    rows: list[tuple[str, str, int, str]] = [
        # (label, key, digits, target for ours/official or ours)
        ("CPU per tool call (ms)", "cpu_call_ms", 3, ""),
        ("CPU per callback, frame in -> reply out (µs)", "callback_cpu_us", 0, ""),
        ("wall per callback, frame in -> reply out (µs)", "callback_wall_us", 0, ""),
        ("turn wall time (s)", "wall_s", 2, ""),
        ("frames in per turn", "frames_in", 0, ""),
        ("callback replies per turn", "replies", 0, ""),
        ("probe's own CPU per tool call, warm, included (µs)", "probe_call_us", 1, ""),
        ("peak RSS (MB)", "rss_mb", 1, "ours <= 40"),
    ]
    targets = {
        ("cpu_call_ms", "asyncio"): "ratio <= 0.40",
        ("cpu_call_ms", "uvloop"): "ratio <= 0.29",
        ("callback_cpu_us", "asyncio"): "ours <= 150",
        ("callback_cpu_us", "uvloop"): "ours <= 150",
    }
    w = 26
    header = f"{'figure':<52} {'loop':<8} {'ours':>{w}}"
    if official:
        header += f" {'official':>{w}} {'ours/official':>13}"
    header += f" {'floor: asyncio Protocol':>{w}} {'floor: blocking socket':>{w}}  target"
    print()
    print(header)
    print("-" * len(header))
    for label, key, digits, target in rows:
        for loop in loops:
            ours = spread(results.get(f"ours/{loop}", []), key)
            line = f"{label:<52} {loop:<8} {cell(ours, digits):>{w}}"
            if official:
                theirs = spread(results.get(f"official/{loop}", []), key)
                ratio = f"{ours[0] / theirs[0]:.2f}" if ours and theirs and theirs[0] else "-"
                line += f" {cell(theirs, digits):>{w}} {ratio:>13}"
            floor = spread(results.get(f"floor-asyncio/{loop}", []), key)
            blocking = spread(results.get("floor-blocking", []), key) if loop == loops[0] else None
            line += f" {cell(floor, digits):>{w}} {cell(blocking, digits):>{w}}"
            print(f"{line}  {targets.get((key, loop), target)}")
    for sdk in sdks:
        start = spread(results.get(f"start/{sdk}", []), "start_s")
        if start:
            print(f"agent start, median of {args.starts} ({sdk}, asyncio): {start[0]:.3f} s")
    print(
        f"our code per PRE_TOOL callback (in process, no sockets): {inproc:.1f} CPU-µs "
        "(target <= 26)"
    )
    for key, rows_ in results.items():
        for r in rows_:
            if key.split("/")[0] in sdks and (r["calls"] != args.calls or not r["answer_ok"]):
                print(
                    f"WARNING: a {key} run saw {r['calls']} pre_tool_call hooks "
                    f"(expected {args.calls}), answer ok={r['answer_ok']}"
                )
    if args.dump:
        Path(args.dump).write_text(json.dumps(results, indent=1, default=str))
        print(f"raw results: {args.dump}")


if __name__ == "__main__":
    sys.exit(main())
