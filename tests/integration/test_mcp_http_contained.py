"""An HTTP MCP server behind the containment: the harness reaches it only through a port of
its own loopback that the SDK serves, and the server's credential (its headers) stays in
the SDK's process, added on the way out. The server here is a minimal streamable-HTTP
MCP server on this machine's loopback, which the agent's own network cannot reach
directly."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from antigravity_sdk import policy
from antigravity_sdk.containment import landlock_abi
from antigravity_sdk.testing import tool_call
from antigravity_sdk.types import McpHttpServer

from .conftest import AgentFactory, tool_messages

pytestmark = pytest.mark.skipif(landlock_abi() < 4, reason="needs Landlock ABI >= 4")

TOKEN = "Bearer MCP-SECRET-out-of-reach-5a1c"


class _Mcp(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]]
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # no server-initiated stream
        self.send_response(405)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_DELETE(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
        type(self).seen.append({"auth": self.headers.get("authorization"), "body": body})
        if "id" not in body:  # a notification
            self.send_response(202)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        method = body.get("method")
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": body["params"].get("protocolVersion", "2025-03-26"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "docs", "version": "1"},
            }
        elif method == "tools/list":
            result = {
                "tools": [
                    {
                        "name": "lookup",
                        "description": "Look a word up.",
                        "inputSchema": {
                            "type": "object",
                            "properties": {"word": {"type": "string"}},
                            "required": ["word"],
                        },
                    }
                ]
            }
        elif method == "tools/call":
            arguments = body["params"]["arguments"]  # the harness passes the model's text on
            word = (json.loads(arguments) if isinstance(arguments, str) else arguments)["word"]
            result = {"content": [{"type": "text", "text": f"{word} means MCP-ANSWER"}]}
        else:
            result = {}
        data = json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": result}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("mcp-session-id", "s1")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def mcp_server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []
    handler = type("Handler", (_Mcp,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/mcp", seen
    server.shutdown()
    server.server_close()


async def test_an_http_mcp_server_is_reached_through_the_sdk_with_its_credential(
    make_agent: AgentFactory, mcp_server: tuple[str, list[dict[str, Any]]]
) -> None:
    url, seen = mcp_server
    server = McpHttpServer(name="docs", url=url, headers={"Authorization": TOKEN})
    call = tool_call(
        "call_mcp_tool", ServerName="docs", ToolName="lookup", Arguments='{"word": "x"}'
    )
    agent, model = make_agent(
        [call, "done"],
        policies=[policy.allow_all()],
        configure=lambda b: b.mcp_server(server),
    )
    async with agent:
        contained = agent.containment
        assert contained is not None
        (upstream,) = [u for u in contained.upstreams if u.what == "mcp:docs"]
        assert upstream.headers == {"Authorization": TOKEN}
        pid = agent.harness_pid
        assert pid is not None
        await agent.chat("look it up")
        from .test_out_of_reach import _memory_holds

        assert not _memory_holds(pid, TOKEN.encode()), "the harness holds the MCP credential"
    calls = [s for s in seen if s["body"].get("method") == "tools/call"]
    assert calls, seen
    assert all(s["auth"] == TOKEN for s in seen)  # added by the SDK to every request
    assert any("MCP-ANSWER" in m for m in tool_messages(model, 1)), tool_messages(model, 1)
