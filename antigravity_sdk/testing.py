"""Offline testing helpers: a scripted, OpenAI-compatible model server.

The harness runs the agent loop itself and only needs *some* chat-completions
endpoint to talk to. :class:`ScriptedModel` is that endpoint, served on
``127.0.0.1`` with an ephemeral port, answering from a script instead of a
neural network. Point the harness's ``gemmaEndpoint.baseUrl`` (or
``Agent.builder().model(scripted_model)``) at :attr:`ScriptedModel.base_url`
and a whole session — tool calls, hooks, policy decisions — runs without a
network or an API key, deterministically.

A script is either a list of replies, consumed one per model request, or a
function ``(messages, tools) -> reply`` (sync or async). A reply is a ``str``
(assistant text), a :class:`TextReply`, or a :class:`ToolCallReply` (build one
with :func:`tool_call` / :func:`tool_calls`, or :func:`finish` for a structured answer)::

    async with ScriptedModel([
        tool_call("run_command", CommandLine="echo hi", Cwd=ws, WaitMsBeforeAsync=5000),
        "done",
    ]) as model:
        ...  # run the agent against model.base_url
        assert "denied" in model.requests[1].text

Every request is recorded in :attr:`ScriptedModel.requests`. When a list
script runs out the model answers :data:`EXHAUSTED_TEXT` (and counts it in
:attr:`ScriptedModel.exhausted_count`) instead of failing, because an HTTP
error would only make the harness retry and obscure the real test failure.

The server is asyncio streams with h11 (a small, pure-Python, sans-I/O HTTP/1.1
parser) doing the HTTP: keep-alive, ``Content-Length`` and chunked request bodies,
SSE responses; a malformed request is answered 400 (431 for a head over 64 KiB, 413
for a body over 64 MiB) and its connection closed.

pytest: the :func:`scripted_model` fixture yields a started, empty
``ScriptedModel``; fill it with :meth:`ScriptedModel.push` or
:meth:`ScriptedModel.set_script`. Enable it with
``pytest_plugins = ["antigravity_sdk.testing"]`` in ``conftest.py`` (or in the
test module); importing ``scripted_model`` works too but trips linters' F811.
It needs ``pytest`` and ``pytest-asyncio``; the rest of this module does not.
PYTEST_DONT_REWRITE: the module has no asserts, and the marker keeps pytest from
warning when a test file imports it before loading it as a plugin.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import inspect
import itertools
import json
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from types import TracebackType
from typing import Any, Final, TypeAlias

import h11

__all__ = [
    "EXHAUSTED_TEXT",
    "GeminiStub",
    "HttpErrorReply",
    "RecordedRequest",
    "Reply",
    "ScriptFunction",
    "ScriptedModel",
    "TextReply",
    "ToolCallReply",
    "ToolCallSpec",
    "finish",
    "http_error",
    "scripted_model",
    "text",
    "tool_call",
    "tool_calls",
]

EXHAUSTED_TEXT: Final = "(script exhausted)"
"""What the model says once a list script has no replies left."""

_MAX_HEADER_BYTES: Final = 64 * 1024  # a larger request head is answered 431
_READ_BYTES: Final = 64 * 1024
_MAX_BODY_BYTES: Final = 64 * 1024 * 1024
_IDLE_TIMEOUT: Final = 120.0  # keep-alive connections idle longer than this are closed
_IO_TIMEOUT: Final = 30.0  # reading one request / writing one response
_STOP_TIMEOUT: Final = 5.0
_LINGER_TIMEOUT: Final = 1.0  # draining a client's input after an error response


# --------------------------------------------------------------------------- replies


@dataclass(frozen=True, slots=True)
class TextReply:
    """The assistant answers with plain text (ends the harness's turn)."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallSpec:
    """One function call the scripted model asks for.

    ``id`` is generated (``call_<n>``) when left empty, so a script does not
    have to invent unique ids.
    """

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    id: str = ""


@dataclass(frozen=True, slots=True)
class ToolCallReply:
    """The assistant asks for one or more tool calls, optionally with text."""

    calls: tuple[ToolCallSpec, ...]
    text: str = ""

    def __post_init__(self) -> None:
        if not self.calls:
            raise ValueError("ToolCallReply needs at least one call")


@dataclass(frozen=True, slots=True)
class HttpErrorReply:
    """The endpoint fails the request with HTTP ``status`` (429, 500, 503 ...): what a
    rate-limited or broken model server does, to see how the harness retries."""

    status: int
    message: str = "scripted failure"

    def __post_init__(self) -> None:
        if not 400 <= self.status <= 599:
            raise ValueError(f"an HTTP error status is 400-599, got {self.status}")


Reply: TypeAlias = str | TextReply | ToolCallReply | HttpErrorReply
"""Anything a script may answer with; a bare ``str`` is assistant text."""

ScriptFunction: TypeAlias = Callable[
    [list[dict[str, Any]], list[dict[str, Any]]], Reply | Awaitable[Reply]
]
"""``(messages, tools) -> reply``; may be a coroutine function."""


def text(content: str) -> TextReply:
    """A text reply (same as passing the bare string)."""
    return TextReply(content)


def tool_call(name: str, /, **arguments: Any) -> ToolCallReply:
    """A reply with a single tool call, e.g. ``tool_call("view_file", AbsolutePath=p)``."""
    return ToolCallReply((ToolCallSpec(name, dict(arguments)),))


def finish(**data: Any) -> ToolCallReply:
    """A call to the harness's `finish` tool with `data` as the structured answer
    (offered only to an agent with an output type, `AgentBuilder.output_type`)."""
    return ToolCallReply((ToolCallSpec("finish", dict(data)),))


def tool_calls(*calls: ToolCallSpec, text: str = "") -> ToolCallReply:
    """A reply with several parallel tool calls (and optional accompanying text)."""
    return ToolCallReply(tuple(calls), text)


def http_error(status: int, message: str = "scripted failure") -> HttpErrorReply:
    """A reply that fails the request with HTTP ``status``, e.g. ``http_error(429)``."""
    return HttpErrorReply(status, message)


# --------------------------------------------------------------------------- recording


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One chat-completions request as the model server saw it."""

    path: str
    headers: Mapping[str, str]
    body: Mapping[str, Any]
    reply: Reply | None
    """What the script answered (``None`` if the script function raised)."""
    usage: Mapping[str, int] = field(default_factory=dict)
    """The token counts the model reported for this request (OpenAI ``usage``:
    ``prompt_tokens``, ``completion_tokens``, ``total_tokens``); empty for a failed one."""

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The ``messages`` array (system, user, assistant, tool …)."""
        msgs = self.body.get("messages")
        return [m for m in msgs if isinstance(m, dict)] if isinstance(msgs, list) else []

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The ``tools`` array the harness offered the model."""
        tools = self.body.get("tools")
        return [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []

    @property
    def tool_names(self) -> list[str]:
        """Names of the offered functions, for quick ``in`` checks."""
        names: list[str] = []
        for t in self.tools:
            fn = t.get("function")
            if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                names.append(fn["name"])
        return names

    @property
    def stream(self) -> bool:
        """Whether the harness asked for an SSE stream."""
        return bool(self.body.get("stream"))

    @property
    def tool_results(self) -> list[dict[str, Any]]:
        """The ``role: tool`` messages: what the harness reported back from tools."""
        return [m for m in self.messages if m.get("role") == "tool"]

    @property
    def text(self) -> str:
        """All message contents joined by newlines, for substring assertions."""
        return "\n".join(_content_text(m.get("content")) for m in self.messages)

    @property
    def image_urls(self) -> list[str]:
        """The URL of every ``image_url`` content part, in message order (the harness
        sends a prompt's images as base64 ``data:`` URLs)."""
        urls: list[str] = []
        for m in self.messages:
            content = m.get("content")
            for p in content if isinstance(content, list) else ():
                image = p.get("image_url") if isinstance(p, dict) else None
                url = image.get("url") if isinstance(image, dict) else None
                if isinstance(url, str):
                    urls.append(url)
        return urls

    @property
    def images(self) -> list[tuple[str, bytes]]:
        """``(mime_type, data)`` of every image sent as a base64 data URL, decoded: the
        bytes the model received."""
        found = []
        for url in self.image_urls:
            head, sep, payload = url.partition(",")
            if sep and head.startswith("data:") and head.endswith(";base64"):
                found.append((head[5:-7], base64.b64decode(payload)))
        return found

    @property
    def last_message(self) -> dict[str, Any] | None:
        """The final message of the conversation the model was shown."""
        msgs = self.messages
        return msgs[-1] if msgs else None


def _content_text(content: Any) -> str:
    """Flatten OpenAI message content (a string or a list of parts) to text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, dict) and isinstance(p.get("text"), str):
                parts.append(p["text"])
            elif isinstance(p, str):
                parts.append(p)
        return "\n".join(parts)
    return ""


# --------------------------------------------------------------------------- HTTP


class _HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(slots=True)
class _Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


_REASONS: Final = {s.value: s.phrase.encode() for s in HTTPStatus}


def _sse(payload: Any) -> bytes:
    """One server-sent event carrying ``payload`` as JSON."""
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


class _Http:
    """One HTTP/1.1 server connection: h11's state machine over asyncio streams.

    h11 parses and frames (keep-alive, ``Content-Length`` and chunked bodies,
    ``Connection: close``, HTTP/1.0 peers, ``Expect: 100-continue``) and rejects what is
    not HTTP; this class only moves the bytes, with every read bounded in time and a
    request's body in size.
    """

    __slots__ = ("_conn", "_head_only", "_reader", "_writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._conn = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEADER_BYTES)
        self._head_only = False  # the request is a HEAD: its response has no body

    async def _next_event(self) -> h11.Event:
        while True:
            try:
                event = self._conn.next_event()
            except h11.RemoteProtocolError as e:
                status = e.error_status_hint
                why = "request head too large" if status == 431 else f"malformed request: {e}"
                raise _HttpError(status, why) from e
            if isinstance(event, h11.Event):
                return event
            # NEED_DATA (never PAUSED: the next request is read only after next_cycle()).
            self._conn.receive_data(await self._reader.read(_READ_BYTES))

    async def read_request(self) -> _Request | None:
        """The next request with its whole body; ``None`` once the client has closed the
        connection, or left it idle for :data:`_IDLE_TIMEOUT`, between requests."""
        self._head_only = False
        try:
            async with asyncio.timeout(_IDLE_TIMEOUT):
                head = await self._next_event()
        except TimeoutError:
            return None
        if not isinstance(head, h11.Request):
            return None  # ConnectionClosed
        self._head_only = head.method == b"HEAD"
        headers: dict[str, str] = {}
        for raw_name, raw_value in head.headers:
            name, value = raw_name.decode("latin-1"), raw_value.decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        # h11 has checked that a Content-Length is one decimal number.
        if int(headers.get("content-length", "0")) > _MAX_BODY_BYTES:
            raise _HttpError(413, "request body too large")
        if self._conn.they_are_waiting_for_100_continue:
            go_on = h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue")
            await self._write(self._conn.send(go_on))
        body = bytearray()
        async with asyncio.timeout(_IO_TIMEOUT):
            while not isinstance(event := await self._next_event(), h11.EndOfMessage):
                if isinstance(event, h11.Data):
                    body += event.data
                    if len(body) > _MAX_BODY_BYTES:
                        raise _HttpError(413, "request body too large")
        path = head.target.decode("latin-1").split("?", 1)[0]
        return _Request(head.method.decode("latin-1").upper(), path, headers, bytes(body))

    async def send_json(self, status: int, payload: Any, *, close: bool = False) -> None:
        """A whole JSON response (with a ``Content-Length``)."""
        data = json.dumps(payload).encode()
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
        await self._respond(status, headers, (data,), close)

    async def send_events(self, events: Sequence[bytes]) -> None:
        """A 200 server-sent-events stream, written at once as one chunk: chunk boundaries
        mean nothing to an HTTP client, and each chunk costs h11 a framing pass."""
        headers = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")]
        await self._respond(200, headers, (b"".join(events),), False)

    async def _respond(
        self, status: int, headers: list[tuple[str, str]], body: Sequence[bytes], close: bool
    ) -> None:
        # h11 rewrites keep-alive to close when the request asked for it (or was HTTP/1.0).
        headers.append(("Connection", "close" if close else "keep-alive"))
        send = self._conn.send
        head = h11.Response(status_code=status, headers=headers, reason=_REASONS.get(status, b""))
        parts = [send(head)]
        if not self._head_only:
            parts += [send(h11.Data(data=b)) for b in body]
        parts.append(send(h11.EndOfMessage()))
        await self._write(b"".join(parts))

    async def linger(self) -> None:
        """Before closing after an error response: stop writing, then read and drop what
        the client is still sending, for at most :data:`_LINGER_TIMEOUT`. Closing a socket
        with unread data resets the connection, and the client would lose the response."""
        with contextlib.suppress(OSError, TimeoutError):
            self._writer.write_eof()
            async with asyncio.timeout(_LINGER_TIMEOUT):
                while await self._reader.read(_READ_BYTES):
                    pass

    def next_cycle(self) -> bool:
        """Get ready for the connection's next request; ``False`` when it must close."""
        if self._conn.our_state is h11.DONE and self._conn.their_state is h11.DONE:
            self._conn.start_next_cycle()
            return True
        return False

    async def _write(self, data: bytes) -> None:
        """Write and drain, refusing to write into a connection the client dropped.

        Writing to a lost transport makes asyncio log "socket.send() raised
        exception" warnings; the harness drops connections when a turn is halted.
        """
        if self._writer.is_closing():
            raise ConnectionResetError("client went away")
        self._writer.write(data)
        await self._writer.drain()


def _estimate_tokens(s: str) -> int:
    return max(1, len(s) // 4)


# --------------------------------------------------------------------------- server


class ScriptedModel:
    """An OpenAI-compatible chat-completions server that answers from a script.

    Serves ``POST /v1/chat/completions`` (and ``/chat/completions``), streaming
    or not, and ``GET /v1/models``. Use it as ``async with ScriptedModel(...)``
    or call :meth:`start` / :meth:`stop` yourself.
    """

    def __init__(
        self,
        script: Sequence[Reply] | ScriptFunction = (),
        *,
        model_name: str = "scripted-model",
        host: str = "127.0.0.1",
    ) -> None:
        self.model_name = model_name
        self._host = host
        self._queue: list[Reply] = []
        self._fn: ScriptFunction | None = None
        self.set_script(script)
        self.requests: list[RecordedRequest] = []
        """Every chat-completions request, in arrival order."""
        self.exhausted_count = 0
        """How many requests arrived after a list script ran out."""
        self.errors: list[str] = []
        """Script-function exceptions and malformed requests (each answered 4xx/5xx)."""
        self._server: asyncio.Server | None = None
        self._port: int | None = None
        self._conn_tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._in_script: set[asyncio.Task[Any]] = set()  # awaiting a script function
        self._ids = itertools.count(1)

    # ---- script management

    def set_script(self, script: Sequence[Reply] | ScriptFunction) -> None:
        """Replace the script (a reply list or a ``(messages, tools)`` function)."""
        if callable(script):
            self._fn = script
            self._queue = []
        else:
            self._fn = None
            self._queue = [self._check_reply(r) for r in script]

    def push(self, *replies: Reply) -> None:
        """Append replies to a list script."""
        if self._fn is not None:
            raise TypeError("push() needs a list script; this model uses a function")
        self._queue.extend(self._check_reply(r) for r in replies)

    @property
    def remaining(self) -> int:
        """Replies left in a list script (0 for a function script)."""
        return len(self._queue)

    @staticmethod
    def _check_reply(reply: Any) -> Reply:
        if not isinstance(reply, str | TextReply | ToolCallReply | HttpErrorReply):
            raise TypeError(
                f"not a reply: {reply!r} (use str, TextReply, ToolCallReply or HttpErrorReply)"
            )
        return reply

    # ---- lifecycle

    @property
    def port(self) -> int:
        """The bound port; only valid after :meth:`start`."""
        if self._port is None:
            raise RuntimeError("ScriptedModel is not started")
        return self._port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:{port}/v1`` — what ``gemmaEndpoint.baseUrl`` wants."""
        return f"http://{self._host}:{self.port}/v1"

    @property
    def started(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self._server is not None

    async def start(self) -> None:
        """Bind an ephemeral port and start serving (idempotent)."""
        if self._server is not None:
            return
        server = await asyncio.start_server(self._on_connection, self._host, 0)
        self._server = server
        self._port = int(server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        """Close the listener and every open connection, bounded in time."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        # Closing the transports wakes handlers blocked in a read with EOF, so they
        # finish normally; cancelling is only the fallback for a stuck script function.
        for writer in list(self._writers):
            writer.close()
        # A script function still working on a request (waiting on a test's event, say)
        # answers a connection now closed: it is cancelled at once, not waited for.
        for task in list(self._in_script):
            task.cancel()
        tasks = list(self._conn_tasks)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=_STOP_TIMEOUT)
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending, timeout=_STOP_TIMEOUT)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(server.wait_closed(), _STOP_TIMEOUT)

    async def __aenter__(self) -> ScriptedModel:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @contextlib.contextmanager
    def in_thread(self) -> Iterator[ScriptedModel]:
        """Serve from an event loop on a thread of its own for the block: for synchronous
        code, a fleet worker or another process to call. Stopped, and its loop closed, on
        the way out (bounded)."""
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="scripted-model", daemon=True)
        thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.start(), loop).result(_STOP_TIMEOUT)
            yield self
        finally:
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self.stop(), loop).result(4 * _STOP_TIMEOUT)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(_STOP_TIMEOUT)
            if not thread.is_alive():
                loop.close()

    def __repr__(self) -> str:
        where = self.base_url if self._port is not None else "not started"
        return f"ScriptedModel({self.model_name!r}, {where}, requests={len(self.requests)})"

    # ---- connection handling

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._conn_tasks.add(task)
        self._writers.add(writer)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        except asyncio.CancelledError:
            # Only stop() cancels these tasks. Ending normally matters: asyncio's
            # start_server callback calls task.exception(), which raises on a
            # cancelled task (Python 3.11) and logs a spurious traceback.
            if self._server is not None:
                raise
        finally:
            if task is not None:
                self._conn_tasks.discard(task)
            self._writers.discard(writer)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        http = _Http(reader, writer)
        while True:
            try:
                req = await http.read_request()
            except _HttpError as e:
                # The connection cannot be trusted to frame another request: answer, close.
                self.errors.append(e.message)
                error = http.send_json(e.status, _error_body(e.message), close=True)
                await asyncio.wait_for(error, _IO_TIMEOUT)
                await http.linger()
                return
            if req is None:
                return
            await asyncio.wait_for(self._dispatch(req, http), _IO_TIMEOUT)
            if not http.next_cycle():
                return

    async def _dispatch(self, req: _Request, http: _Http) -> None:
        path = req.path.rstrip("/")
        if path in ("/v1/chat/completions", "/chat/completions"):
            if req.method == "POST":
                await self._chat(req, http)
            else:
                await http.send_json(405, _error_body("use POST"))
        elif path in ("/v1/models", "/models"):
            if req.method == "GET":
                await http.send_json(200, self._models_body())
            else:
                await http.send_json(405, _error_body("use GET"))
        else:
            await http.send_json(404, _error_body(f"no route {req.path}"))

    def _models_body(self) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": self.model_name, "object": "model", "created": 0, "owned_by": "test"}],
        }

    async def _chat(self, req: _Request, http: _Http) -> None:
        try:
            body = json.loads(req.body or b"{}")
            if not isinstance(body, dict):
                raise ValueError("body is not a JSON object")
        except ValueError as e:
            self.errors.append(f"bad JSON body: {e}")
            await http.send_json(400, _error_body(self.errors[-1]))
            return

        # No lock: a list script is popped without an await in between, and a function
        # script may legitimately be slow while the harness (e.g. a subagent) calls again.
        try:
            reply: Reply | None = await self._next_reply(body)
        except Exception as e:
            reply = None
            self.errors.append(f"script raised {type(e).__name__}: {e}")
        if reply is None or isinstance(reply, HttpErrorReply):
            self.requests.append(RecordedRequest(req.path, dict(req.headers), body, reply))
            if reply is None:
                status, why = 500, self.errors[-1]
            else:
                status, why = reply.status, reply.message
            await http.send_json(status, _error_body(why))
            return

        completion_id = f"chatcmpl-{next(self._ids)}"
        calls = self._materialize_calls(reply)
        content = reply if isinstance(reply, str) else reply.text
        prompt_tokens = _estimate_tokens(json.dumps(body.get("messages", [])))
        completion_tokens = _estimate_tokens(
            content + "".join(json.dumps(c["function"]) for c in calls)
        )
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        self.requests.append(RecordedRequest(req.path, dict(req.headers), body, reply, usage))
        finish = "tool_calls" if calls else "stop"
        if body.get("stream"):
            await self._write_stream(http, completion_id, content, calls, finish, usage)
        else:
            message: dict[str, Any] = {"role": "assistant", "content": content or None}
            if calls:
                message["tool_calls"] = calls
            payload = {
                "id": completion_id,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": self.model_name,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
            await http.send_json(200, payload)

    async def _next_reply(self, body: Mapping[str, Any]) -> Reply:
        if self._fn is not None:
            rec = RecordedRequest("", {}, body, None)
            result = self._fn(rec.messages, rec.tools)
            if inspect.isawaitable(result):
                task = asyncio.current_task()
                assert task is not None  # a connection's handler
                self._in_script.add(task)
                try:
                    result = await result
                finally:
                    self._in_script.discard(task)
            return self._check_reply(result)
        if self._queue:
            return self._queue.pop(0)
        self.exhausted_count += 1
        return EXHAUSTED_TEXT

    def _materialize_calls(self, reply: Reply) -> list[dict[str, Any]]:
        if not isinstance(reply, ToolCallReply):
            return []
        return [
            {
                "id": c.id or f"call_{next(self._ids)}",
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(dict(c.arguments))},
            }
            for c in reply.calls
        ]

    async def _write_stream(
        self,
        http: _Http,
        completion_id: str,
        content: str,
        calls: list[dict[str, Any]],
        finish: str,
        usage: dict[str, int],
    ) -> None:
        parts = []
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            return {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": self.model_name,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }

        parts.append(_sse(chunk({"role": "assistant", "content": ""})))
        for piece in _split_text(content):
            parts.append(_sse(chunk({"content": piece})))
        for i, c in enumerate(calls):
            fn = c["function"]
            name_delta = {"index": i, "id": c["id"], "type": "function"}
            name_delta["function"] = {"name": fn["name"], "arguments": ""}
            args_delta = {"index": i, "function": {"arguments": fn["arguments"]}}
            parts.append(_sse(chunk({"tool_calls": [name_delta]})))
            parts.append(_sse(chunk({"tool_calls": [args_delta]})))
        final = chunk({}, finish)
        final["usage"] = usage
        parts.append(_sse(final))
        parts.append(b"data: [DONE]\n\n")
        await http.send_events(parts)


def _split_text(s: str, pieces: int = 3) -> list[str]:
    """Split text into a few deltas so streaming consumers see more than one."""
    if not s:
        return []
    size = max(1, -(-len(s) // pieces))
    return [s[i : i + size] for i in range(0, len(s), size)]


def _error_body(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "scripted_model_error"}}


# --------------------------------------------------------------------------- Gemini


class _GeminiServer(ScriptedModel):
    """ScriptedModel's server answering the Gemini API's generateContent routes."""

    async def _dispatch(self, req: _Request, http: _Http) -> None:
        method = req.path.rpartition(":")[2]
        if req.method != "POST" or method not in ("generateContent", "streamGenerateContent"):
            await http.send_json(404, _error_body(f"no route {req.path}"))
            return
        try:
            body = json.loads(req.body or b"{}")
        except ValueError as e:
            body = {}
            self.errors.append(f"bad JSON body: {e}")
        reply = await self._next_reply(body)
        self.requests.append(RecordedRequest(req.path, dict(req.headers), body, reply))
        if isinstance(reply, HttpErrorReply):
            await http.send_json(reply.status, _error_body(reply.message))
            return
        text = reply if isinstance(reply, str) else reply.text
        payload = {
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}
            ],
            "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1},
        }
        if method == "generateContent":
            await http.send_json(200, payload)
            return
        await http.send_events([_sse(payload)])


class GeminiStub:
    """A loopback stand-in for the Gemini API (and Vertex AI) that answers text replies
    and records each request: its path, headers and JSON body (`generationConfig`, ...).

    Point `AgentBuilder.model_options(endpoint_url=stub.url)` at it to see offline what
    the harness sends for a Gemini model. Unlike `ScriptedModel` it is not a model the
    agent starts: start it yourself (`async with GeminiStub([...]) as stub`).
    """

    def __init__(self, replies: Sequence[str] = ()) -> None:
        self._server = _GeminiServer([TextReply(r) for r in replies])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:{port}``: the API root (the harness adds the version)."""
        return f"http://127.0.0.1:{self._server.port}"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every generateContent request, in arrival order."""
        return self._server.requests

    async def __aenter__(self) -> GeminiStub:
        await self._server.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._server.stop()


# --------------------------------------------------------------------------- pytest


async def _scripted_model_fixture() -> AsyncIterator[ScriptedModel]:
    async with ScriptedModel() as model:
        yield model


try:
    import pytest_asyncio as _pytest_asyncio
except ImportError:  # pragma: no cover - only without the test extras
    scripted_model: Any = None
else:
    scripted_model = _pytest_asyncio.fixture(_scripted_model_fixture, name="scripted_model")
    """pytest fixture: a started, empty :class:`ScriptedModel` (``push`` replies into it)."""
