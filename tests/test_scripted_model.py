"""ScriptedModel speaks enough OpenAI chat-completions for the harness (and any client)."""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
import socket
import struct
import time
from typing import Any

import h11
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from antigravity_sdk import testing
from antigravity_sdk.testing import (
    EXHAUSTED_TEXT,
    ScriptedModel,
    TextReply,
    ToolCallReply,
    ToolCallSpec,
    text,
    tool_call,
    tool_calls,
)

# The documented way to get the `scripted_model` fixture (a conftest.py may do the same).
pytest_plugins = ["antigravity_sdk.testing"]

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
TOOLS = [
    {
        "type": "function",
        "function": {"name": "run_command", "parameters": {"type": "object"}},
    }
]


def _request(
    model: ScriptedModel,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", model.port, timeout=10)
    try:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


async def post(
    model: ScriptedModel, body: dict[str, Any], path: str = "/v1/chat/completions"
) -> tuple[int, dict[str, str], bytes]:
    return await asyncio.to_thread(_request, model, "POST", path, body)


def sse_events(raw: bytes) -> list[Any]:
    events: list[Any] = []
    for line in raw.decode().splitlines():
        if line.startswith("data: "):
            payload = line[len("data: ") :]
            events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def chat(stream: bool = False, **extra: Any) -> dict[str, Any]:
    return {
        "model": "scripted-model",
        "messages": MESSAGES,
        "tools": TOOLS,
        "stream": stream,
        **extra,
    }


async def test_non_streaming_text_reply() -> None:
    async with ScriptedModel(["Hello there"]) as model:
        status, headers, raw = await post(model, chat())
    assert status == 200
    assert headers["content-type"] == "application/json"
    body = json.loads(raw)
    assert body["object"] == "chat.completion"
    assert body["model"] == "scripted-model"
    choice = body["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "Hello there"}
    assert choice["finish_reason"] == "stop"
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


async def test_streaming_text_reply_is_split_into_deltas() -> None:
    async with ScriptedModel([text("Hello from the stream")]) as model:
        status, headers, raw = await post(model, chat(stream=True))
    assert status == 200
    assert headers["content-type"] == "text/event-stream"
    events = sse_events(raw)
    assert events[-1] == "[DONE]"
    chunks = [e for e in events if e != "[DONE]"]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    pieces = [c["choices"][0]["delta"].get("content", "") for c in chunks]
    assert "".join(pieces) == "Hello from the stream"
    assert sum(1 for p in pieces if p) > 1
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["usage"]["completion_tokens"] > 0


async def test_non_streaming_tool_calls() -> None:
    reply = tool_calls(
        ToolCallSpec("run_command", {"CommandLine": "echo hi"}),
        ToolCallSpec("view_file", {"AbsolutePath": "/x"}, id="my-id"),
        text="Doing two things",
    )
    async with ScriptedModel([reply]) as model:
        _, _, raw = await post(model, chat())
    choice = json.loads(raw)["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    msg = choice["message"]
    assert msg["content"] == "Doing two things"
    calls = msg["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["run_command", "view_file"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"CommandLine": "echo hi"}
    assert calls[0]["id"].startswith("call_")
    assert calls[1]["id"] == "my-id"
    assert all(c["type"] == "function" for c in calls)


async def test_streaming_tool_calls_reassemble_in_openai_delta_format() -> None:
    reply = tool_calls(
        ToolCallSpec("run_command", {"CommandLine": "echo hi", "Cwd": "/ws"}),
        ToolCallSpec("view_file", {"AbsolutePath": "/ws/a"}),
    )
    async with ScriptedModel([reply]) as model:
        _, _, raw = await post(model, chat(stream=True))
    chunks = [e for e in sse_events(raw) if e != "[DONE]"]
    assembled: dict[int, dict[str, str]] = {}
    for c in chunks:
        for tc in c["choices"][0]["delta"].get("tool_calls", []):
            slot = assembled.setdefault(tc["index"], {"id": "", "name": "", "arguments": ""})
            slot["id"] += tc.get("id", "")
            slot["name"] += tc.get("function", {}).get("name", "")
            slot["arguments"] += tc.get("function", {}).get("arguments", "")
    assert [assembled[i]["name"] for i in sorted(assembled)] == ["run_command", "view_file"]
    assert json.loads(assembled[0]["arguments"]) == {"CommandLine": "echo hi", "Cwd": "/ws"}
    assert assembled[0]["id"] != assembled[1]["id"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


async def test_tool_call_helper_builds_single_call() -> None:
    reply = tool_call("write_to_file", TargetFile="/ws/a.txt", Overwrite=False)
    assert reply == ToolCallReply(
        (ToolCallSpec("write_to_file", {"TargetFile": "/ws/a.txt", "Overwrite": False}),)
    )
    with pytest.raises(ValueError):
        ToolCallReply(())


async def test_sync_function_script_sees_messages_and_tools() -> None:
    seen: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        seen.append((messages, tools))
        return f"you said {messages[-1]['content']}"

    async with ScriptedModel(script) as model:
        _, _, raw = await post(model, chat())
    assert json.loads(raw)["choices"][0]["message"]["content"] == "you said hi"
    assert seen == [(MESSAGES, TOOLS)]


async def test_async_function_script() -> None:
    async def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ToolCallReply:
        await asyncio.sleep(0)
        return tool_call(tools[0]["function"]["name"], CommandLine="ls")

    async with ScriptedModel(script) as model:
        _, _, raw = await post(model, chat())
        assert model.remaining == 0
    call = json.loads(raw)["choices"][0]["message"]["tool_calls"][0]
    assert call["function"]["name"] == "run_command"


async def test_requests_are_recorded_with_helpers() -> None:
    followup = [
        *MESSAGES,
        {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function"}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "denied by pre-tool hook: nope"},
    ]
    async with ScriptedModel([tool_call("run_command", CommandLine="rm -rf /"), "ok"]) as model:
        await post(model, chat(stream=True))
        await post(
            model, {"messages": followup, "tools": TOOLS, "stream": False}, "/chat/completions"
        )
    first, second = model.requests
    assert first.path == "/v1/chat/completions"
    assert first.stream is True and second.stream is False
    assert first.messages == MESSAGES
    assert first.tool_names == ["run_command"]
    assert isinstance(first.reply, ToolCallReply)
    assert second.path == "/chat/completions"
    assert second.reply == "ok"
    assert second.tool_results == [followup[-1]]
    assert "denied by pre-tool hook" in second.text
    assert second.last_message == followup[-1]
    assert second.body["stream"] is False
    assert second.headers["content-type"] == "application/json"


async def test_exhausted_list_answers_fixed_text_and_counts() -> None:
    async with ScriptedModel(["only one"]) as model:
        await post(model, chat())
        _, _, raw = await post(model, chat(stream=True))
        await post(model, chat())
    chunks = [e for e in sse_events(raw) if e != "[DONE]"]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == EXHAUSTED_TEXT
    assert model.exhausted_count == 2
    assert len(model.requests) == 3
    assert model.requests[-1].reply == EXHAUSTED_TEXT


async def test_push_and_set_script() -> None:
    async with ScriptedModel() as model:
        model.push("a", TextReply("b"))
        assert model.remaining == 2
        _, _, raw = await post(model, chat())
        assert json.loads(raw)["choices"][0]["message"]["content"] == "a"
        model.set_script(lambda messages, tools: "from function")
        with pytest.raises(TypeError):
            model.push("x")
        _, _, raw = await post(model, chat())
        assert json.loads(raw)["choices"][0]["message"]["content"] == "from function"
    with pytest.raises(TypeError):
        ScriptedModel([42])  # type: ignore[list-item]


async def test_script_function_error_is_a_500_and_recorded() -> None:
    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        raise RuntimeError("boom")

    async with ScriptedModel(script) as model:
        status, _, raw = await post(model, chat())
    assert status == 500
    assert "boom" in json.loads(raw)["error"]["message"]
    assert model.errors == ["script raised RuntimeError: boom"]
    assert model.requests[0].reply is None


async def test_models_endpoint_and_unknown_routes() -> None:
    async with ScriptedModel(model_name="my-model") as model:
        status, _, raw = await asyncio.to_thread(_request, model, "GET", "/v1/models")
        assert status == 200
        assert [m["id"] for m in json.loads(raw)["data"]] == ["my-model"]
        status, _, _ = await asyncio.to_thread(_request, model, "GET", "/models")
        assert status == 200
        status, _, _ = await asyncio.to_thread(_request, model, "GET", "/v1/chat/completions")
        assert status == 405
        status, _, _ = await asyncio.to_thread(_request, model, "GET", "/nope")
        assert status == 404
        assert model.requests == []


async def test_bad_json_body_is_a_400() -> None:
    async with ScriptedModel(["unused"]) as model:
        reader, writer = await asyncio.open_connection("127.0.0.1", model.port)
        body = b"{not json"
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), 5)
        writer.close()
    assert raw.startswith(b"HTTP/1.1 400 ")
    assert model.remaining == 1
    assert model.errors and model.errors[0].startswith("bad JSON body")


async def test_keep_alive_serves_several_requests_on_one_connection() -> None:
    def run(model: ScriptedModel) -> list[str]:
        conn = http.client.HTTPConnection("127.0.0.1", model.port, timeout=10)
        out = []
        try:
            for stream in (False, True, False):
                conn.request("POST", "/v1/chat/completions", body=json.dumps(chat(stream=stream)))
                resp = conn.getresponse()
                data = resp.read()
                out.append(data.decode())
                assert resp.getheader("Connection") == "keep-alive"
            sock = conn.sock
            assert sock is not None  # still the same, open connection
        finally:
            conn.close()
        return out

    async with ScriptedModel(["one", "two", "three"]) as model:
        bodies = await asyncio.to_thread(run, model)
    assert json.loads(bodies[0])["choices"][0]["message"]["content"] == "one"
    assert "[DONE]" in bodies[1]
    assert json.loads(bodies[2])["choices"][0]["message"]["content"] == "three"


async def test_chunked_request_body() -> None:
    payload = json.dumps(chat()).encode()
    half = len(payload) // 2
    async with ScriptedModel(["chunked ok"]) as model:
        reader, writer = await asyncio.open_connection("127.0.0.1", model.port)
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
            b"Connection: close\r\n\r\n"
        )
        for part in (payload[:half], payload[half:]):
            writer.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), 5)
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    assert json.loads(body)["choices"][0]["message"]["content"] == "chunked ok"
    assert model.requests[0].messages == MESSAGES


async def test_stop_is_bounded_with_idle_keep_alive_connection() -> None:
    model = ScriptedModel(["x"])
    await model.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", model.port)
    started = time.monotonic()
    await model.stop()
    assert time.monotonic() - started < 2
    assert await asyncio.wait_for(reader.read(), 2) == b""  # server closed it
    writer.close()
    assert not model.started
    await model.stop()  # idempotent


async def test_stop_cancels_a_script_function_still_answering(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A script waiting on something that never comes (a test's event) answers a
    connection stop() closes: it is cancelled, and stop() does not wait for it."""
    entered, cancelled = asyncio.Event(), asyncio.Event()

    async def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    monkeypatch.setattr(testing, "_STOP_TIMEOUT", 60.0)  # the fallback cancel comes too late
    model = ScriptedModel(script)
    await model.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", model.port)
    body = json.dumps(chat()).encode()
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + b"Content-Length: %d\r\n\r\n" % len(body)
        + body
    )
    await asyncio.wait_for(entered.wait(), 10)
    stopping = asyncio.create_task(model.stop())
    await asyncio.wait_for(cancelled.wait(), 10)
    await asyncio.wait_for(stopping, 10)
    assert await asyncio.wait_for(reader.read(), 2) == b""
    writer.close()


async def test_base_url_and_lifecycle() -> None:
    model = ScriptedModel()
    with pytest.raises(RuntimeError):
        _ = model.base_url
    async with model:
        assert model.started
        assert model.base_url == f"http://127.0.0.1:{model.port}/v1"
        assert "127.0.0.1" in repr(model)
    assert not model.started


async def test_fixture_yields_started_empty_model(scripted_model: ScriptedModel) -> None:
    assert scripted_model.started
    assert scripted_model.remaining == 0
    scripted_model.push("from fixture")
    _, _, raw = await post(scripted_model, chat())
    assert json.loads(raw)["choices"][0]["message"]["content"] == "from fixture"


# ---- HTTP/1.1 edge cases (the server is h11; these pin what a client sees)


async def exchange(model: ScriptedModel, data: bytes, *, half_close: bool = True) -> bytes:
    """Send raw bytes on a fresh connection and read until the server closes it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", model.port)
    try:
        writer.write(data)
        await writer.drain()
        if half_close:
            writer.write_eof()
        return await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()


def responses(raw: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """Parse every response in ``raw`` (a client's view, with h11's client side)."""
    client = h11.Connection(h11.CLIENT)
    out: list[tuple[int, dict[str, str], bytes]] = []
    client.receive_data(raw)
    client.receive_data(b"")
    while client.trailing_data[0]:  # bytes left to parse
        client.send(h11.Request(method="POST", target="/", headers=[("Host", "x")]))
        client.send(h11.EndOfMessage())
        event = client.next_event()
        while isinstance(event, h11.InformationalResponse):
            event = client.next_event()
        assert isinstance(event, h11.Response), event
        body = b""
        while not isinstance(data := client.next_event(), h11.EndOfMessage):
            assert isinstance(data, h11.Data), data
            body += data.data
        headers = {k.decode(): v.decode() for k, v in event.headers}
        out.append((event.status_code, headers, body))
        if client.our_state is h11.MUST_CLOSE or client.their_state is h11.MUST_CLOSE:
            break
        client.start_next_cycle()
    assert not client.trailing_data[0]  # nothing after a closing response
    return out


def raw_post(body: bytes, *headers: str, path: str = "/v1/chat/completions") -> bytes:
    head = [f"POST {path} HTTP/1.1", "Host: x", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


CHAT = json.dumps(chat()).encode()

MALFORMED = {
    "not HTTP at all (a TLS hello)": b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n\r\n",
    "truncated head": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Le",
    "truncated body": raw_post(CHAT[:10], f"Content-Length: {len(CHAT)}"),
    "no Host header": b"GET /v1/models HTTP/1.1\r\n\r\n",
    "space before a header's colon": b"GET /v1/models HTTP/1.1\r\nHost : x\r\n\r\n",
    "two Content-Lengths": raw_post(CHAT, "Content-Length: 2", f"Content-Length: {len(CHAT)}"),
    "negative Content-Length": raw_post(CHAT, "Content-Length: -1"),
    "chunk size not hex": raw_post(b"zz\r\n{}\r\n0\r\n\r\n", "Transfer-Encoding: chunked"),
    # A chunk must end in CRLF; reading any two bytes there lets a request be smuggled
    # (h11 0.16 closed exactly this, CVE-2025-43859).
    "chunk not ended by CRLF": raw_post(
        f"{len(CHAT):x}\r\n".encode() + CHAT + b"XX0\r\n\r\n", "Transfer-Encoding: chunked"
    ),
    "unsupported Transfer-Encoding": raw_post(CHAT, "Transfer-Encoding: gzip"),
}


@pytest.mark.parametrize("data", MALFORMED.values(), ids=list(MALFORMED))
async def test_malformed_request_is_a_400_and_the_server_keeps_serving(data: bytes) -> None:
    async with ScriptedModel(["still serving"]) as model:
        raw = await exchange(model, data)
        [(status, headers, body)] = responses(raw)  # then the connection was closed
        assert status == (501 if b"gzip" in data else 400)
        assert headers["connection"] == "close"
        assert json.loads(body)["error"]["message"] == model.errors[0]
        assert model.errors[0].startswith("malformed request")
        assert model.requests == [] and model.remaining == 1  # the script is untouched
        status, _, raw = await post(model, chat())
    assert status == 200
    assert json.loads(raw)["choices"][0]["message"]["content"] == "still serving"


async def test_oversized_head_is_a_431_and_oversized_body_a_413() -> None:
    async with ScriptedModel(["still serving"]) as model:
        big_head = b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 300_000
        [(status, _, _)] = responses(await exchange(model, big_head))
        assert status == 431
        too_long = raw_post(b"", f"Content-Length: {64 * 1024 * 1024 + 1}")
        [(status, _, _)] = responses(await exchange(model, too_long))
        assert status == 413
        assert model.errors == ["request head too large", "request body too large"]
        status, _, _ = await post(model, chat())
    assert status == 200


async def test_pipelined_requests_are_answered_in_order_on_one_connection() -> None:
    stream = json.dumps(chat(stream=True)).encode()
    pipelined = (
        raw_post(CHAT, f"Content-Length: {len(CHAT)}")
        + raw_post(stream, f"Content-Length: {len(stream)}")
        + raw_post(
            f"{len(CHAT):x}\r\n".encode() + CHAT + b"\r\n0\r\n\r\n", "Transfer-Encoding: chunked"
        )
        + b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    async with ScriptedModel(["one", "two", "three"]) as model:
        answers = responses(await exchange(model, pipelined, half_close=False))
    assert [status for status, _, _ in answers] == [200, 200, 200, 200]
    assert [h["connection"] for _, h, _ in answers] == ["keep-alive"] * 3 + ["close"]
    assert json.loads(answers[0][2])["choices"][0]["message"]["content"] == "one"
    deltas = [e for e in sse_events(answers[1][2]) if e != "[DONE]"]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in deltas) == "two"
    assert answers[1][1]["transfer-encoding"] == "chunked"
    assert json.loads(answers[2][2])["choices"][0]["message"]["content"] == "three"
    assert json.loads(answers[3][2])["data"][0]["id"] == "scripted-model"
    assert [r.messages for r in model.requests] == [MESSAGES] * 3


async def test_head_request_gets_no_body_and_the_connection_stays_usable() -> None:
    data = (
        b"HEAD /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
        b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    async with ScriptedModel() as model:
        raw = await exchange(model, data, half_close=False)
    first, second = raw.split(b"HTTP/1.1 ")[1:]
    assert first.endswith(b"\r\n\r\n")  # the head only
    assert second.startswith(b"200 ")
    assert json.loads(second.partition(b"\r\n\r\n")[2])["object"] == "list"


async def test_expect_100_continue_is_answered_before_the_body() -> None:
    async with ScriptedModel(["after continue"]) as model:
        reader, writer = await asyncio.open_connection("127.0.0.1", model.port)
        try:
            writer.write(raw_post(b"", f"Content-Length: {len(CHAT)}", "Expect: 100-continue"))
            interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            assert interim.startswith(b"HTTP/1.1 100 ")
            writer.write(CHAT)
            writer.write_eof()
            raw = await asyncio.wait_for(reader.read(), 5)
        finally:
            writer.close()
    [(status, _, body)] = responses(raw)
    assert status == 200
    assert json.loads(body)["choices"][0]["message"]["content"] == "after continue"


async def test_client_that_disconnects_mid_stream_is_contained(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The harness drops connections when a turn is halted; a stream cut off half-way
    must cost nothing but that stream: no traceback, no warning, the next request served."""
    write_failures: list[BaseException] = []
    write = testing._Http._write

    async def recording_write(self: testing._Http, data: bytes) -> None:
        try:
            await write(self, data)
        except ConnectionError as e:
            write_failures.append(e)
            raise

    monkeypatch.setattr(testing._Http, "_write", recording_write)
    loop_errors: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: loop_errors.append(context))
    # A small receive window and a reply far larger than the server's send buffer (4 MiB
    # at most): the server is still writing when the client goes.
    long_text = "x" * 12_000_000
    try:
        with caplog.at_level(logging.WARNING, logger="asyncio"):
            async with ScriptedModel([long_text, "next one"]) as model:
                sock = socket.socket()
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.setblocking(False)
                await loop.sock_connect(sock, ("127.0.0.1", model.port))
                reader, writer = await asyncio.open_connection(sock=sock)
                stream = json.dumps(chat(stream=True)).encode()
                writer.write(raw_post(stream, f"Content-Length: {len(stream)}"))
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
                assert head.startswith(b"HTTP/1.1 200 ")
                assert len(await asyncio.wait_for(reader.read(1000), 5)) > 0
                # Linger 0: closing resets the connection, as a killed client does.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.transport.abort()
                for _ in range(50):  # until the server has noticed
                    if write_failures:
                        break
                    await asyncio.sleep(0.05)
                assert write_failures, "the server finished writing: the test proves nothing"
                status, _, raw = await post(model, chat())
                assert status == 200
                assert json.loads(raw)["choices"][0]["message"]["content"] == "next one"
                assert model.errors == []
    finally:
        loop.set_exception_handler(None)
    assert loop_errors == []
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


VALID = raw_post(CHAT, f"Content-Length: {len(CHAT)}", "Connection: close")


@st.composite
def mangled_requests(draw: st.DrawFn) -> bytes:
    """A valid request with one slice replaced by random bytes, or random bytes."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=300))
    start = draw(st.integers(0, len(VALID)))
    end = draw(st.integers(start, min(len(VALID), start + 40)))
    return VALID[:start] + draw(st.binary(max_size=40)) + VALID[end:]


@settings(max_examples=120, deadline=None)
@given(mangled_requests())
def test_any_bytes_get_an_http_answer_or_a_close_and_never_break_the_server(data: bytes) -> None:
    async def run() -> None:
        loop_errors: list[dict[str, Any]] = []
        asyncio.get_running_loop().set_exception_handler(lambda _, c: loop_errors.append(c))
        async with ScriptedModel(lambda messages, tools: "ok") as model:
            raw = await exchange(model, data)
            for status, _, _ in responses(raw):  # a parseable response, or none at all
                assert status in (200, 400, 404, 405, 413, 431, 501)
            status, _, _ = await post(model, chat())
            assert status == 200
        assert loop_errors == []

    asyncio.run(run())
