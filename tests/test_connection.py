"""The WebSocket half of the harness connection, fed server bytes directly (no socket):
fragmented messages are joined, anything but a JSON-object text message ends the
connection with ProtocolError, and nothing is delivered after that."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.protocol import State
from websockets.uri import parse_uri

from antigravity_sdk.errors import ProtocolError
from antigravity_sdk.harness.connection import RemoteConnection, _Stream


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []

    def write(self, data: Any) -> None:
        self.written.append(bytes(data))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


def open_link() -> tuple[RemoteConnection, _Stream, list[Any], list[BaseException]]:
    link = RemoteConnection("127.0.0.1", 1, "key")
    ws = ClientProtocol(parse_uri("ws://127.0.0.1:1/"), state=State.OPEN, max_size=None)
    stream = _Stream(link, ws)
    stream.connection_made(FakeTransport())
    link._stream = stream
    frames: list[Any] = []
    lost: list[BaseException] = []
    link.listen(frames.append, lost.append)
    return link, stream, frames, lost


def server(opcode: Opcode, data: bytes, fin: bool = True) -> bytes:
    return Frame(opcode, data, fin).serialize(mask=False, extensions=[])


@given(
    frame=st.dictionaries(st.text(max_size=5), st.text(max_size=20), max_size=4),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=4),
    chunk=st.integers(min_value=1, max_value=64),
)
async def test_a_fragmented_message_arrives_whole(
    frame: dict[str, str], cuts: list[int], chunk: int
) -> None:
    _, stream, frames, lost = open_link()
    text = json.dumps(frame).encode()
    edges = sorted({0, len(text), *(min(c, len(text)) for c in cuts)})
    pieces = [text[a:b] for a, b in itertools.pairwise(edges)] or [b""]
    wire = b"".join(
        server(Opcode.TEXT if n == 0 else Opcode.CONT, piece, fin=n == len(pieces) - 1)
        for n, piece in enumerate(pieces)
    ) + server(Opcode.TEXT, b'{"next":1}')
    for start in range(0, len(wire), chunk):  # bytes arrive in any split
        stream.data_received(wire[start : start + chunk])
    assert frames == [frame, {"next": 1}]
    assert lost == []


@pytest.mark.parametrize(
    ("wire", "match"),
    [
        (server(Opcode.BINARY, b'{"a":1}'), "binary"),
        (server(Opcode.TEXT, b'{"a":'), "not JSON"),
        (server(Opcode.TEXT, b'["a"]'), "not a JSON object"),
        (server(Opcode.TEXT, b'{"a":"\xff"}'), "not JSON"),
    ],
)
async def test_anything_but_a_json_object_ends_the_connection(wire: bytes, match: str) -> None:
    _, stream, frames, lost = open_link()
    stream.data_received(wire + server(Opcode.TEXT, b'{"after":1}'))
    assert frames == []  # nothing is delivered after the error
    (error,) = lost
    assert isinstance(error, ProtocolError)
    assert match in str(error)


async def test_a_frame_the_listener_cannot_read_ends_the_connection() -> None:
    link, stream, _, lost = open_link()
    error = ProtocolError("trajectoryStateUpdate is not an object")

    def refuse(frame: dict[str, Any]) -> None:
        raise error

    link._on_frame = refuse
    stream.data_received(server(Opcode.TEXT, b"{}") + server(Opcode.TEXT, b"{}"))
    assert lost == [error]  # once


async def test_a_ping_is_answered() -> None:
    _, stream, frames, lost = open_link()
    transport: Any = stream.transport
    stream.data_received(server(Opcode.PING, b"hi"))
    assert frames == [] and lost == []
    assert len(transport.written) == 1  # the pong (masked, as a client's frames are)
