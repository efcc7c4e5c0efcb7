"""ScriptedModel speaks enough OpenAI chat-completions for the harness (and any client)."""

from __future__ import annotations

import asyncio
import http.client
import json
import time
from typing import Any

import pytest

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
