"""Multimodal prompts: `Image` and `Document` parts, and the checks a prompt passes before
anything is sent.

A prompt is text, one part, or a sequence of parts (`str`, `Image`, `Document`). Every
check runs before a byte reaches the harness, so a refused prompt costs nothing and the
session stays usable. What was measured against the harness (0.1.22) decides the rules:

* Images reach an OpenAI-compatible endpoint as `image_url` parts holding a base64 data
  URL, after the prompt's text (the harness concatenates the text parts as they are).
  Documents (a PDF, plain text ...) and every description are dropped there without a
  word, so the agent refuses a document for such an endpoint (`Agent` decides).
* The harness fails a turn whose media bytes plus twice its text's UTF-8 bytes exceed
  about 25 MiB ("trajectory converted to zero chat messages"), and then closes the
  session on the next input: `MAX_PROMPT_BYTES` refuses such a prompt, text alone too.
* The harness forwards any `image/*` type unchecked; the SDK accepts the types both
  Gemini and OpenAI-compatible endpoints read (PNG, JPEG, WebP), and checks that the
  bytes are what the MIME type says.
"""

from __future__ import annotations

import asyncio
import math
import mimetypes
import os
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Final, Self, TypeAlias

from .errors import PromptError

__all__ = [
    "DOCUMENT_MIME_TYPES",
    "IMAGE_MIME_TYPES",
    "MAX_PROMPT_BYTES",
    "Document",
    "Image",
    "Prompt",
    "PromptPart",
    "prompt_parts",
    "prompt_text",
]

MAX_PROMPT_BYTES: Final = 25 * 1024 * 1024 - 64 * 1024
"""The largest prompt: its media bytes plus twice its text's UTF-8 bytes, as the harness
counts them (measured), with 64 KiB left for what the harness adds to the text."""

_TOO_LARGE: Final = (
    f"more than the {MAX_PROMPT_BYTES} bytes a prompt may carry (the harness would fail "
    "the turn, then end the session)"
)

IMAGE_MIME_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/webp"})
DOCUMENT_MIME_TYPES: Final = frozenset(
    {
        "application/pdf",
        "application/json",
        "text/css",
        "text/csv",
        "text/html",
        "text/javascript",
        "text/plain",
        "text/rtf",
        "text/xml",
    }
)

_URL_TIMEOUT: Final = 10.0
_READ_CHUNK: Final = 1 << 16

# The types whose bytes say what they are: the data must agree with its MIME type.
_SNIFFED: Final = frozenset({"image/png", "image/jpeg", "image/webp", "application/pdf"})


def _sniff(data: bytes) -> str | None:
    """The MIME type the leading bytes announce (one of `_SNIFFED`), if any."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data.startswith(b"%PDF-"):
        return "application/pdf"
    return None


@dataclass(frozen=True, slots=True)
class _Media:
    """Bytes with their MIME type, checked when built (so a prompt holding one is valid)."""

    data: bytes = field(repr=False)
    mime_type: str
    description: str = ""

    MIME_TYPES: ClassVar[frozenset[str]] = frozenset()

    def __post_init__(self) -> None:
        kind = type(self).__name__
        if not isinstance(self.data, bytes):
            raise TypeError(
                f"{kind}.data must be bytes, got {type(self.data).__name__} "
                f"(use {kind}.from_bytes for a bytearray or memoryview)"
            )
        if not isinstance(self.mime_type, str) or not isinstance(self.description, str):
            raise TypeError(f"{kind}: mime_type and description must be str")
        if self.mime_type not in self.MIME_TYPES:
            raise PromptError(
                f"{kind}: unsupported MIME type {self.mime_type!r}; supported: "
                f"{', '.join(sorted(self.MIME_TYPES))}"
            )
        if not self.data:
            raise PromptError(f"{kind}: no data (the harness drops an empty part)")
        if len(self.data) > MAX_PROMPT_BYTES:
            raise PromptError(f"{kind}: {len(self.data)} bytes is {_TOO_LARGE}")
        if self.mime_type in _SNIFFED:
            found = _sniff(self.data)
            if found != self.mime_type:
                what = f"looks like {found}" if found else "has no known signature"
                raise PromptError(f"{kind}: the data is not {self.mime_type} (it {what})")

    def __repr__(self) -> str:
        described = f", description={self.description!r}" if self.description else ""
        return f"{type(self).__name__}({self.mime_type}, {len(self.data)} bytes{described})"

    @classmethod
    def from_bytes(
        cls, data: bytes | bytearray | memoryview, mime_type: str, *, description: str = ""
    ) -> Self:
        """From bytes in memory (a bytearray or memoryview is copied once into bytes,
        so the part cannot change after it was checked)."""
        if isinstance(data, bytearray | memoryview):
            data = bytes(data)
        return cls(data, mime_type, description)

    @classmethod
    def from_path(
        cls, path: str | os.PathLike[str], *, mime_type: str | None = None, description: str = ""
    ) -> Self:
        """From a regular file, read now. Without `mime_type`: the type its bytes
        announce (PNG, JPEG, WebP, PDF), else the one its extension names."""
        data = _read_file(Path(path), cls.__name__)
        if mime_type is None:
            mime_type = _sniff(data) or mimetypes.guess_type(os.fspath(path))[0]
            if mime_type is None:
                raise PromptError(
                    f"{cls.__name__}.from_path: cannot tell the MIME type of {path}; "
                    "give mime_type="
                )
        return cls(data, mime_type, description)

    @classmethod
    async def from_url(
        cls,
        url: str,
        *,
        mime_type: str | None = None,
        description: str = "",
        timeout: float = _URL_TIMEOUT,  # noqa: ASYNC109 (the worker thread's sockets need it)
    ) -> Self:
        """Download `url` (http or https) now: the harness takes bytes, not links.

        Bounded: the whole download takes at most `timeout` seconds and `MAX_PROMPT_BYTES`
        bytes, else `PromptError`. Without `mime_type`: the type the bytes announce,
        else the response's Content-Type.
        """
        if not url.lower().startswith(("http://", "https://")):
            raise PromptError(f"{cls.__name__}.from_url: only http and https URLs, got {url!r}")
        if not (isinstance(timeout, int | float) and 0 < timeout < math.inf):
            raise PromptError(
                f"{cls.__name__}.from_url: timeout must be a positive, finite number of "
                f"seconds, got {timeout!r}"
            )
        try:
            async with asyncio.timeout(timeout):
                data, served = await asyncio.to_thread(_download, url, timeout)
        except TimeoutError:
            raise PromptError(
                f"{cls.__name__}.from_url: {url} did not arrive within {timeout}s"
            ) from None
        return cls(data, mime_type or _sniff(data) or served, description)


class Image(_Media):
    """An image part of a prompt: PNG, JPEG or WebP (see `MAX_PROMPT_BYTES` for sizes).

    Build one with `Image.from_path(path)`, `Image.from_bytes(data, "image/png")` or
    `await Image.from_url(url)`. An OpenAI-compatible endpoint receives it as an
    `image_url` part with a base64 data URL.
    """

    __slots__ = ()
    MIME_TYPES: ClassVar[frozenset[str]] = IMAGE_MIME_TYPES


class Document(_Media):
    """A document part of a prompt: a PDF or a text type (plain, CSV, JSON, HTML ...).

    Only a Gemini model receives documents: the harness drops them on its way to an
    OpenAI-compatible endpoint, so the agent refuses them there.
    """

    __slots__ = ()
    MIME_TYPES: ClassVar[frozenset[str]] = DOCUMENT_MIME_TYPES


PromptPart: TypeAlias = str | Image | Document
Prompt: TypeAlias = str | Image | Document | Sequence[str | Image | Document]
"""What `Agent.chat()` and `Agent.stream()` take: text, one part, or a sequence of parts."""


def _read_file(path: Path, kind: str) -> bytes:
    """A regular file's bytes, at most MAX_PROMPT_BYTES. Only a regular file is read: a
    FIFO or a device could block or never end (O_NONBLOCK: opening a FIFO cannot block)."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise PromptError(f"{kind}.from_path: {path} is not a regular file")
            if info.st_size > MAX_PROMPT_BYTES:
                raise PromptError(
                    f"{kind}.from_path: {path} has {info.st_size} bytes, {_TOO_LARGE}"
                )
            data = f.read(MAX_PROMPT_BYTES + 1)  # a file that grew is caught by the part
    except OSError as exc:
        raise PromptError(f"{kind}.from_path: cannot read {path}: {exc.strerror or exc}") from exc
    return data


def _download(url: str, timeout: float) -> tuple[bytes, str]:
    """Runs in a worker thread. Each socket wait is bounded by `timeout`, and the read
    loop stops at the deadline, so the thread ends soon after the caller gave up."""
    import urllib.error  # only here: urllib.request is slow to import
    import urllib.request

    class HttpOnly(urllib.request.HTTPRedirectHandler):
        """Follow redirects to http and https only (urllib would follow one to ftp)."""

        def redirect_request(
            self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str
        ) -> Any:
            if not newurl.lower().startswith(("http://", "https://")):
                raise PromptError(f"from_url: refused a redirect to {newurl!r}")
            return super().redirect_request(req, fp, code, msg, headers, newurl)

    deadline = time.monotonic() + timeout
    opener = urllib.request.build_opener(HttpOnly())
    try:
        with opener.open(url, timeout=timeout) as response:
            length = response.headers.get("Content-Length")
            if length and length.isdigit() and int(length) > MAX_PROMPT_BYTES:
                raise PromptError(f"from_url: {url} has {length} bytes, {_TOO_LARGE}")
            chunks: list[bytes] = []
            size = 0
            while chunk := response.read1(_READ_CHUNK):  # what arrived: read() waits for all
                size += len(chunk)
                if size > MAX_PROMPT_BYTES:
                    raise PromptError(f"from_url: {url} has over {MAX_PROMPT_BYTES} bytes")
                if time.monotonic() > deadline:
                    raise TimeoutError
                chunks.append(chunk)
            served = response.headers.get_content_type()
    except (PromptError, TimeoutError):
        raise
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise PromptError(f"from_url: cannot download {url}: {reason}") from exc
    return b"".join(chunks), served


def prompt_parts(prompt: object) -> tuple[PromptPart, ...]:
    """`prompt` as a tuple of checked parts, or TypeError / PromptError / ValueError
    before anything is sent."""
    if isinstance(prompt, str | _Media):
        parts: tuple[Any, ...] = (prompt,)
    elif isinstance(prompt, Sequence) and not isinstance(prompt, bytes | bytearray):
        parts = tuple(prompt)
        if not parts:
            raise PromptError("the prompt is an empty sequence: give text, an Image or a Document")
    else:
        hint = " (wrap bytes in Image.from_bytes(data, mime_type))" if _bytes(prompt) else ""
        raise TypeError(
            "the prompt must be a str, an Image, a Document or a sequence of them, "
            f"got {type(prompt).__name__}{hint}"
        )
    media = text = 0
    for index, part in enumerate(parts):
        if isinstance(part, str):
            text += _text_size(part, index if len(parts) > 1 else None)
        elif isinstance(part, _Media):
            media += len(part.data)
        else:
            hint = " (wrap bytes in Image.from_bytes(data, mime_type))" if _bytes(part) else ""
            raise TypeError(
                f"prompt part {index} must be a str, an Image or a Document, "
                f"got {type(part).__name__}{hint}"
            )
    if media + 2 * text > MAX_PROMPT_BYTES:
        raise PromptError(
            f"the prompt is too large: {media} bytes of media plus twice {text} bytes of "
            f"text is {_TOO_LARGE}"
        )
    return parts


def prompt_text(parts: Sequence[PromptPart]) -> str:
    """The text the model reads: the text parts concatenated, as the harness does."""
    return "".join(part for part in parts if isinstance(part, str))


def _bytes(value: object) -> bool:
    return isinstance(value, bytes | bytearray | memoryview)


def _text_size(text: str, index: int | None) -> int:
    """The text's UTF-8 size. Not valid Unicode is an error: the harness silently drops
    such a frame, and the turn would then wait for its whole timeout."""
    if text.isascii():
        return len(text)
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:  # a lone surrogate
        where = "the prompt" if index is None else f"prompt part {index}"
        raise ValueError(
            f"{where} is not valid Unicode ({exc.reason} at index {exc.start})"
        ) from None
