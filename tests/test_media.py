"""Prompt parts (`Image`, `Document`) and their checks, the user-input frame they make,
and the streamed encoding of its bytes."""

from __future__ import annotations

import asyncio
import base64
import http.server
import json
import math
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from antigravity_sdk import Agent, AgentStateError, Document, Image, PromptError
from antigravity_sdk.harness import wire
from antigravity_sdk.harness.protocol import SessionCore
from antigravity_sdk.media import MAX_PROMPT_BYTES, prompt_parts, prompt_text

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 16
WEBP = b"RIFF\x10\x00\x00\x00WEBPVP8 " + b"\x00" * 8
PDF = b"%PDF-1.4\n%%EOF\n"


# -- building parts ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "mime"), [(PNG, "image/png"), (JPEG, "image/jpeg"), (WEBP, "image/webp")]
)
def test_images_of_each_supported_type(data: bytes, mime: str, tmp_path: Path) -> None:
    assert Image.from_bytes(data, mime).mime_type == mime
    path = tmp_path / "picture.bin"  # the bytes say what it is, not the extension
    path.write_bytes(data)
    image = Image.from_path(path, description="a pixel")
    assert (image.data, image.mime_type, image.description) == (data, mime, "a pixel")
    assert repr(image) == f"Image({mime}, {len(data)} bytes, description='a pixel')"


def test_documents_by_signature_or_extension(tmp_path: Path) -> None:
    (tmp_path / "report").write_bytes(PDF)
    (tmp_path / "notes.csv").write_text("a,b\n1,2\n")
    assert Document.from_path(tmp_path / "report").mime_type == "application/pdf"
    assert Document.from_path(tmp_path / "notes.csv").mime_type == "text/csv"
    assert Document.from_bytes(bytearray(b"hi"), "text/plain").data == b"hi"


def test_a_part_is_frozen() -> None:
    image = Image.from_bytes(PNG, "image/png")
    with pytest.raises(AttributeError):
        image.data = b"other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: Image.from_bytes(PNG, "image/gif"), "unsupported MIME type 'image/gif'"),
        (lambda: Image.from_bytes(PNG, "application/pdf"), "unsupported MIME type"),
        (lambda: Document.from_bytes(PNG, "image/png"), "unsupported MIME type 'image/png'"),
        (lambda: Image.from_bytes(b"", "image/png"), "no data"),
        (lambda: Image.from_bytes(b"not a png", "image/png"), "not image/png .*no known"),
        (lambda: Image.from_bytes(JPEG, "image/png"), "not image/png .*image/jpeg"),
        (lambda: Document.from_bytes(b"plain", "application/pdf"), "not application/pdf"),
        (
            lambda: Image.from_bytes(JPEG + bytes(MAX_PROMPT_BYTES), "image/jpeg"),
            "more than the 26148864 bytes a prompt may carry",
        ),
    ],
)
def test_bad_parts_are_refused(build: Any, match: str) -> None:
    with pytest.raises(PromptError, match=match):
        build()


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((bytearray(PNG), "image/png", ""), "data must be bytes, got bytearray"),
        (("a string", "image/png", ""), "data must be bytes, got str"),
        ((PNG, None, ""), "mime_type and description must be str"),
        ((PNG, "image/png", None), "mime_type and description must be str"),
    ],
)
def test_wrong_field_types_are_type_errors(args: tuple[Any, ...], match: str) -> None:
    with pytest.raises(TypeError, match=match):
        Image(*args)


def test_unreadable_paths_are_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(PNG)
    os.mkfifo(tmp_path / "fifo")  # opening it would block: refused without a read
    big = tmp_path / "big.png"
    with big.open("wb") as f:
        f.truncate(MAX_PROMPT_BYTES + 1)  # sparse: refused before it is read
    (tmp_path / "blob.unknownext").write_bytes(b"data")
    cases = {
        tmp_path / "missing.png": "cannot read .*missing.png: No such file",
        tmp_path: "cannot read .*Is a directory",
        tmp_path / "file" / "below": "cannot read .*Not a directory",
        tmp_path / "fifo": "not a regular file",
        big: "26148865 bytes, more than",
        tmp_path / "blob.unknownext": "cannot tell the MIME type",
    }
    for path, match in cases.items():
        with pytest.raises(PromptError, match=match):
            if path.name == "fifo":
                _with_deadline(lambda p=path: Image.from_path(p))
            else:
                Image.from_path(path)


def _with_deadline(call: Any) -> None:
    """Run `call` in a thread that must finish in 2 s (a blocking open would hang)."""
    box: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            box.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(2)
    assert not thread.is_alive(), "from_path blocked"
    raise box[0]


# -- prompts ---------------------------------------------------------------------------------


def test_prompt_forms() -> None:
    image = Image.from_bytes(PNG, "image/png")
    assert prompt_parts("hi") == ("hi",)
    assert prompt_parts(image) == (image,)
    assert prompt_parts(["a ", image, "b"]) == ("a ", image, "b")
    assert prompt_parts(("x",)) == ("x",)
    assert prompt_text(["a ", image, "b"]) == "a b"  # what the harness shows the model


@pytest.mark.parametrize(
    ("prompt", "error", "match"),
    [
        ([], PromptError, "empty sequence"),
        (b"\x89PNG", TypeError, r"got bytes \(wrap bytes in Image.from_bytes"),
        (None, TypeError, "must be a str, an Image, a Document or a sequence"),
        ({"text": "hi"}, TypeError, "got dict"),
        (iter(["hi"]), TypeError, "got list_iterator"),
        (["ok", 3], TypeError, "prompt part 1 must be a str, an Image or a Document, got int"),
        ([PNG], TypeError, r"part 0 .* got bytes \(wrap"),
        ([["nested"]], TypeError, "part 0 .* got list"),
        (["ok", "a\ud800"], ValueError, r"prompt part 1 is not valid Unicode"),
        ("a\ud800", ValueError, r"the prompt is not valid Unicode"),
    ],
)
def test_bad_prompts_are_refused(prompt: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        prompt_parts(prompt)


_IMAGE = Image.from_bytes(PNG, "image/png")
_anything = st.one_of(
    st.text(),
    st.just(_IMAGE),
    st.binary(max_size=8),
    st.integers(),
    st.none(),
    st.lists(st.text(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.text(max_size=2), max_size=1),
)


@given(st.one_of(_anything, st.lists(_anything, max_size=5), st.tuples(_anything, _anything)))
def test_a_prompt_is_either_accepted_as_is_or_refused_with_a_clear_error(prompt: Any) -> None:
    try:
        parts = prompt_parts(prompt)
    except (TypeError, ValueError) as exc:  # PromptError is a ValueError
        assert "prompt" in str(exc)
        return
    assert parts == (tuple(prompt) if isinstance(prompt, list | tuple) else (prompt,))
    assert all(isinstance(p, str | Image) for p in parts)


def test_the_size_of_a_prompt_counts_media_once_and_text_twice() -> None:
    """As the harness counts (measured against 0.1.22): past about 25 MiB it fails the
    turn and then ends the session, so the SDK refuses first, text-only prompts too."""
    text = "é" * 1000  # 2000 bytes of UTF-8
    fits = Image.from_bytes(JPEG + bytes(MAX_PROMPT_BYTES - len(JPEG) - 4000), "image/jpeg")
    assert prompt_parts([fits, text]) == (fits, text)
    with pytest.raises(PromptError, match=r"too large: 26144864 bytes of media plus twice 2001"):
        prompt_parts([fits, text, "!"])
    half = Image.from_bytes(JPEG + bytes(MAX_PROMPT_BYTES // 2), "image/jpeg")
    with pytest.raises(PromptError, match="26148904 bytes of media plus twice 3 bytes"):
        prompt_parts([half, "and", half])
    assert prompt_parts("x" * (MAX_PROMPT_BYTES // 2))
    with pytest.raises(PromptError, match=f"more than the {MAX_PROMPT_BYTES} bytes"):
        prompt_parts("x" * (MAX_PROMPT_BYTES // 2 + 1))


# -- the frame and its encoding ----------------------------------------------------------


def test_the_user_input_frame_of_a_multimodal_prompt() -> None:
    core = SessionCore()
    assert core.user_input(("a", "b")) == {"userInput": {"parts": [{"text": "a"}, {"text": "b"}]}}
    assert not isinstance(core.user_input(("a",)), wire.StreamedFrame)
    frame = core.user_input(("see", Image.from_bytes(PNG, "image/png", description="px")))
    assert isinstance(frame, wire.StreamedFrame)
    encoded = json.loads(b"".join(wire.encode_fragments(frame)))
    media = {"mimeType": "image/png", "data": base64.b64encode(PNG).decode(), "description": "px"}
    assert encoded == {"userInput": {"parts": [{"text": "see"}, {"media": media}]}}


def test_a_document_goes_out_as_a_media_part() -> None:
    frame = SessionCore().user_input((Document.from_bytes(PDF, "application/pdf"),))
    encoded = json.loads(b"".join(wire.encode_fragments(frame)))
    media = {"mimeType": "application/pdf", "data": base64.b64encode(PDF).decode()}
    assert encoded == {"userInput": {"parts": [{"media": media}]}}


async def test_documents_are_refused_only_for_openai_compatible_endpoints() -> None:
    document = Document.from_bytes(PDF, "application/pdf")
    gemini = Agent.builder().model("gemini-2.5-flash", api_key="key").build()
    with pytest.raises(AgentStateError, match="start the agent first"):  # the prompt passed
        await gemini.chat(["read this", document])
    served = Agent.builder().model("qwen3", base_url="http://127.0.0.1:9/v1").build()
    with pytest.raises(PromptError, match="drops documents"):
        await served.chat(["read this", document])
    with pytest.raises(AgentStateError):  # images are fine there
        await served.chat(["see", Image.from_bytes(PNG, "image/png")])


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text() | st.binary().map(wire.Base64),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def _plain(value: Any) -> Any:
    """The value with each Base64 replaced by its base64 text (what the wire carries)."""
    if isinstance(value, wire.Base64):
        return base64.b64encode(value.data).decode()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(), _json, max_size=4))
def test_fragments_are_the_compact_json_of_the_frame(frame: dict[str, Any]) -> None:
    expected = json.dumps(_plain(frame), separators=(",", ":")).encode()
    assert b"".join(wire.encode_fragments(frame)) == expected


def test_large_bytes_go_out_in_bounded_fragments() -> None:
    data = os.urandom(5 * 1024 * 1024 + 7)
    pieces = list(wire.encode_fragments({"d": wire.Base64(data)}))
    assert max(map(len, pieces)) <= 1 << 20
    assert b"".join(pieces) == b'{"d":"' + base64.b64encode(data) + b'"}'


# -- from_url against a local server -----------------------------------------------------


_SLOW_CLIENT_GONE = threading.Event()


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        routes = {
            "/pixel": (200, {"Content-Type": "image/png"}, PNG),
            "/unlabelled": (200, {"Content-Type": "application/octet-stream"}, PNG),
            "/text": (200, {"Content-Type": "text/plain; charset=utf-8"}, b"hello"),
            "/missing": (404, {}, b"no"),
            "/huge": (200, {"Content-Length": str(MAX_PROMPT_BYTES + 1)}, b""),
            "/to-ftp": (302, {"Location": "ftp://127.0.0.1/x.png"}, b""),
            "/to-pixel": (302, {"Location": "/pixel"}, b""),
        }
        if self.path == "/slow":
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.end_headers()
            try:
                for _ in range(30):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:  # the client gave up
                _SLOW_CLIENT_GONE.set()
            return
        if self.path == "/endless":  # no Content-Length: the size cap must stop it
            self.send_response(200)
            self.end_headers()
            chunk = bytes(1 << 20)
            try:
                for _ in range(30):
                    self.wfile.write(chunk)
            except OSError:
                pass
            return
        status, headers, body = routes[self.path]
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        if "Content-Length" not in headers:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


async def test_from_url_downloads_and_types_the_part(server: str) -> None:
    image = await Image.from_url(f"{server}/pixel", description="remote")
    assert (image.data, image.mime_type, image.description) == (PNG, "image/png", "remote")
    assert (await Image.from_url(f"{server}/unlabelled")).mime_type == "image/png"
    assert (await Image.from_url(f"{server}/to-pixel")).data == PNG
    assert (await Document.from_url(f"{server}/text")).mime_type == "text/plain"


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("/missing", "cannot download .*Not Found"),
        ("/huge", "26148865 bytes, more than"),
        ("/endless", "over 26148864 bytes"),
        ("/to-ftp", "refused a redirect to .ftp://127.0.0.1/x.png."),
        ("/text", "unsupported MIME type 'text/plain'"),
    ],
)
async def test_from_url_refusals(server: str, url: str, match: str) -> None:
    with pytest.raises(PromptError, match=match):
        await Image.from_url(server + url)


async def test_from_url_is_bounded_in_time(server: str) -> None:
    _SLOW_CLIENT_GONE.clear()
    start = time.monotonic()
    with pytest.raises(PromptError, match=r"did not arrive within 0\.5s"):
        await Image.from_url(f"{server}/slow", timeout=0.5)
    assert time.monotonic() - start < 1.5
    # The download thread stops too (a server dripping bytes cannot keep it reading).
    assert await asyncio.to_thread(_SLOW_CLIENT_GONE.wait, 1.5)


async def test_from_url_refuses_other_schemes_and_unreachable_hosts() -> None:
    for url in ("file:///etc/passwd", "ftp://example.com/a.png", "data:image/png;base64,AA"):
        with pytest.raises(PromptError, match="only http and https"):
            await Image.from_url(url)
    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(PromptError, match=r"cannot download .*refused"):
        await Image.from_url(f"http://127.0.0.1:{port}/x.png")
    for timeout in (0, -1, math.inf, math.nan, "10"):
        with pytest.raises(PromptError, match="timeout must be a positive, finite number"):
            await Image.from_url("http://127.0.0.1/x", timeout=timeout)  # type: ignore[arg-type]
    await asyncio.sleep(0)
