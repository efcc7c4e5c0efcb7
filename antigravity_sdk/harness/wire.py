"""The harness wire format: encoding outgoing messages, and the length-prefixed handshake.

Sans-I/O: every function here is pure; the connection layer owns sockets and pipes.

Only the SDK -> harness direction uses the betterproto2-generated classes in `._proto`
(a subset of the harness schema: `InputConfig`/`OutputConfig` and the
`InitializeConversationEvent` config). An incoming JSON frame is only parsed into a plain
dict here (`decode_frame`); `SessionCore` (protocol.py) reads it field by field, and the
replies are literal dicts (effects.py).

`message_to_dict` gives the canonical protobuf JSON mapping (lowerCamelCase keys, enums
by name, 64-bit integers as strings, bytes as base64, zero values omitted). It is driven
by the generated classes' field metadata rather than betterproto2's `to_dict`, which
re-resolves type hints on every call (~1.7 ms against ~15 us for a typical config).

The binary handshake uses betterproto2 directly (`bytes(msg)`, `Message.parse`), each
message framed by a 4-byte little-endian length (`encode_frame`, `read_frame`);
`decode_length_prefixed` also rejects malformed payloads that betterproto2 lets through.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import struct
import sys
import threading
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import betterproto2

from ..errors import ProtocolError
from ._proto.antigravity import localharness as pb
from .fields import loads

__all__ = [
    "MAX_HANDSHAKE_FRAME",
    "Base64",
    "StreamedFrame",
    "decode_frame",
    "decode_length_prefixed",
    "encode_fragments",
    "encode_frame",
    "message_to_dict",
    "pb",
    "read_frame",
]

M = TypeVar("M", bound=betterproto2.Message)

#: Largest length prefix `read_frame` accepts by default. The handshake messages are a
#: few hundred bytes; a bigger prefix means the harness wrote something else to stdout.
MAX_HANDSHAKE_FRAME = 1 << 20

_LEN = struct.Struct("<I")

# --------------------------------------------------------------------------------------
# Field specs, built once per message class from betterproto2's field metadata.

_K_MESSAGE, _K_ENUM, _K_INT, _K_INT64, _K_BOOL, _K_STRING, _K_BYTES, _K_FLOAT = range(8)

_INT64_TYPES = frozenset(
    {
        betterproto2.TYPE_INT64,
        betterproto2.TYPE_UINT64,
        betterproto2.TYPE_SINT64,
        betterproto2.TYPE_FIXED64,
        betterproto2.TYPE_SFIXED64,
    }
)
_INT32_TYPES = frozenset(
    {
        betterproto2.TYPE_INT32,
        betterproto2.TYPE_UINT32,
        betterproto2.TYPE_SINT32,
        betterproto2.TYPE_FIXED32,
        betterproto2.TYPE_SFIXED32,
    }
)
_SCALAR_KINDS = {
    betterproto2.TYPE_MESSAGE: _K_MESSAGE,
    betterproto2.TYPE_ENUM: _K_ENUM,
    betterproto2.TYPE_BOOL: _K_BOOL,
    betterproto2.TYPE_STRING: _K_STRING,
    betterproto2.TYPE_BYTES: _K_BYTES,
    betterproto2.TYPE_FLOAT: _K_FLOAT,
    betterproto2.TYPE_DOUBLE: _K_FLOAT,
    **dict.fromkeys(_INT64_TYPES, _K_INT64),
    **dict.fromkeys(_INT32_TYPES, _K_INT),
}


@dataclass(frozen=True, slots=True)
class _Value:
    """How one value (a singular field, a list element, a map key or a map value) is coded."""

    kind: int
    name_of: dict[int, str] | None = None  # enums: number -> proto name


@dataclass(frozen=True, slots=True)
class _Field:
    name: str  # Python attribute
    json_name: str  # lowerCamelCase, what we emit
    value: _Value
    repeated: bool
    map_key: _Value | None  # set for map fields; `value` is then the map's value
    presence: bool  # None means absent (message fields, oneof members, proto3 optional)


_specs: dict[type[betterproto2.Message], tuple[_Field, ...]] = {}
_enum_names: dict[type[betterproto2.Enum], dict[int, str]] = {}
_spec_lock = threading.Lock()


def _json_name(proto_name: str) -> str:
    """protoc's ToJsonName: drop each '_' and upper-case the character after it."""
    out: list[str] = []
    upper = False
    for ch in proto_name:
        if ch == "_":
            upper = True
        elif upper:
            out.append(ch.upper())
            upper = False
        else:
            out.append(ch)
    return "".join(out)


def _enum_name_of(cls: type[betterproto2.Enum]) -> dict[int, str]:
    names = _enum_names.get(cls)
    if names is None:
        names = _enum_names[cls] = {int(m): m.proto_name or m.name for m in cls}
    return names


def _strip_optional(tp: Any) -> Any:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return args[0] if args and type(None) in typing.get_args(tp) else tp


def _value_spec(proto_type: str, tp: Any) -> _Value:
    kind = _SCALAR_KINDS[proto_type]
    if kind == _K_ENUM:
        return _Value(kind, name_of=_enum_name_of(_strip_optional(tp)))
    return _Value(kind)


def _build_spec(cls: type[betterproto2.Message]) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    fields: list[_Field] = []
    for dc_field in dataclasses.fields(cls):  # type: ignore[arg-type]
        meta = betterproto2.FieldMetadata.get(dc_field)
        tp = hints[dc_field.name]
        map_key: _Value | None = None
        if meta.proto_type == betterproto2.TYPE_MAP:
            assert meta.map_meta is not None
            key_tp, val_tp = typing.get_args(tp)
            map_key = _value_spec(meta.map_meta[0].proto_type, key_tp)
            value = _value_spec(meta.map_meta[1].proto_type, val_tp)
        elif meta.repeated:
            value = _value_spec(meta.proto_type, typing.get_args(tp)[0])
        else:
            value = _value_spec(meta.proto_type, tp)
        proto_name = dc_field.name.rstrip("_")  # betterproto2 appends "_" to keywords
        fields.append(
            _Field(
                name=dc_field.name,
                json_name=_json_name(proto_name),
                value=value,
                repeated=bool(meta.repeated),
                map_key=map_key,
                presence=bool(meta.optional or meta.group) or value.kind == _K_MESSAGE,
            )
        )
    return tuple(fields)


def _spec(cls: type[betterproto2.Message]) -> tuple[_Field, ...]:
    spec = _specs.get(cls)
    if spec is None:
        with _spec_lock:
            spec = _specs.get(cls)
            if spec is None:
                spec = _specs[cls] = _build_spec(cls)
    return spec


# --------------------------------------------------------------------------------------
# message -> JSON


def _encode_value(spec: _Value, value: Any) -> Any:
    kind = spec.kind
    if kind == _K_MESSAGE:
        return _encode_message(value)
    if kind == _K_ENUM:
        assert spec.name_of is not None
        number = int(value)
        name = spec.name_of.get(number)
        return number if name is None else name
    if kind == _K_INT64:
        return str(int(value))
    if kind == _K_BYTES:
        return base64.b64encode(value).decode("ascii")
    if kind == _K_FLOAT:
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def _encode_map_key(spec: _Value, key: Any) -> str:
    if spec.kind == _K_BOOL:
        return "true" if key else "false"
    return str(key)


def _encode_message(msg: betterproto2.Message) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in _spec(type(msg)):
        value = getattr(msg, field.name)
        if field.map_key is not None:
            if value:
                key_spec, value_spec = field.map_key, field.value
                out[field.json_name] = {
                    _encode_map_key(key_spec, k): _encode_value(value_spec, v)
                    for k, v in value.items()
                }
        elif field.repeated:
            if value:
                value_spec = field.value
                out[field.json_name] = [_encode_value(value_spec, v) for v in value]
        elif field.presence:
            if value is not None:
                out[field.json_name] = _encode_value(field.value, value)
        elif value:  # proto3 implicit presence: zero values are not written
            out[field.json_name] = _encode_value(field.value, value)
    return out


def message_to_dict(msg: betterproto2.Message) -> dict[str, Any]:
    """The canonical protobuf-JSON object of `msg` (default values omitted)."""
    return _encode_message(msg)


# --------------------------------------------------------------------------------------
# Frames with large bytes (prompt media), encoded piece by piece while they are sent


@dataclass(frozen=True, slots=True)
class Base64:
    """Bytes that go on the wire as a base64 JSON string, encoded while being sent."""

    data: bytes


class StreamedFrame(dict[str, Any]):
    """A frame holding `Base64` values: sent as a fragmented WebSocket message from
    `encode_fragments`, so the whole base64 text (4/3 of the bytes) never exists."""


# A multiple of 3, so the base64 of consecutive chunks concatenates with no padding: each
# becomes a 1 MiB fragment (about what the WebSocket layer masks and buffers at a time).
_RAW_CHUNK = 3 << 18


def encode_fragments(frame: dict[str, Any]) -> Iterator[bytes]:
    """`frame` as compact JSON (like `json.dumps(frame, separators=(",", ":"))`, with
    each `Base64` as its base64 string), in pieces of at most about 1 MiB."""
    pending: list[str] = []
    yield from _fragments(frame, pending)
    yield "".join(pending).encode()


def _fragments(value: Any, pending: list[str]) -> Iterator[bytes]:
    """Yield bytes only around `Base64` values; other JSON gathers in `pending`."""
    if isinstance(value, Base64):
        pending.append('"')
        yield "".join(pending).encode()
        pending.clear()
        view = memoryview(value.data)
        for start in range(0, len(view), _RAW_CHUNK):
            yield base64.b64encode(view[start : start + _RAW_CHUNK])
        pending.append('"')
    elif isinstance(value, dict):
        pending.append("{")
        for n, (key, item) in enumerate(value.items()):
            pending.append(f"{',' if n else ''}{json.dumps(key)}:")
            yield from _fragments(item, pending)
        pending.append("}")
    elif isinstance(value, list | tuple):
        pending.append("[")
        for n, item in enumerate(value):
            if n:
                pending.append(",")
            yield from _fragments(item, pending)
        pending.append("]")
    else:
        pending.append(json.dumps(value, separators=(",", ":")))


# --------------------------------------------------------------------------------------
# JSON -> dict (the WebSocket session)


def decode_frame(text: str | bytes) -> dict[str, Any]:
    """Parse one WebSocket text frame into a JSON object, or raise ProtocolError."""
    try:
        frame = loads(text)
    except ValueError as exc:  # UnicodeDecodeError too
        raise ProtocolError(f"frame is not JSON: {exc}") from None
    if not isinstance(frame, dict):
        raise ProtocolError(f"frame is not a JSON object: {type(frame).__name__}")
    return frame


# --------------------------------------------------------------------------------------
# Length-prefixed binary frames (the stdin/stdout handshake)


def encode_frame(msg: betterproto2.Message | bytes) -> bytes:
    """`msg` as binary protobuf behind a 4-byte little-endian length."""
    payload = msg if isinstance(msg, bytes) else bytes(msg)
    return _LEN.pack(len(payload)) + payload


def read_frame(
    buffer: bytes | bytearray, *, max_size: int = MAX_HANDSHAKE_FRAME
) -> tuple[bytes | None, bytes]:
    """Split one length-prefixed frame off the front of `buffer`.

    Returns `(payload, rest)`, or `(None, buffer)` when `buffer` does not yet hold a
    whole frame (read more and call again). A length above `max_size` raises
    `ProtocolError`: the peer is not speaking this framing (e.g. it printed text).
    """
    data = bytes(buffer)
    if len(data) < _LEN.size:
        return None, data
    (length,) = _LEN.unpack_from(data)
    if length > max_size:
        raise ProtocolError(
            f"length-prefixed frame of {length} bytes exceeds the {max_size}-byte limit; "
            f"the peer wrote something else: {data[:64]!r}"
        )
    end = _LEN.size + length
    if len(data) < end:
        return None, data
    return data[_LEN.size : end], data[end:]


def decode_length_prefixed(
    buffer: bytes | bytearray, cls: type[M], *, max_size: int = MAX_HANDSHAKE_FRAME
) -> tuple[M | None, bytes]:
    """`read_frame`, then parse the payload as binary protobuf `cls`.

    Returns `(message, rest)` or `(None, buffer)` if incomplete; a payload that is not a
    valid `cls` raises `ProtocolError`. Unknown fields and enum values are kept.
    """
    payload, rest = read_frame(buffer, max_size=max_size)
    if payload is None:
        return None, rest
    return _parse_binary(cls, payload), rest


def _parse_binary(cls: type[M], payload: bytes) -> M:
    """Parse binary protobuf, rejecting what betterproto2's lenient parser lets through.

    betterproto2 accepts truncated fields and wrong wire types (yielding e.g. `None` in an
    int field), so the top level is checked first: well-formed tags and lengths, and
    afterwards every known scalar field holding its Python type.
    """
    name = cls.__name__
    _check_wire_format(name, payload)
    try:
        msg = cls.parse(payload)
    except Exception as err:  # betterproto2 raises assorted errors on garbage
        raise ProtocolError(f"{name}: invalid binary protobuf ({err!r})") from None
    for field in _spec(cls):
        value = getattr(msg, field.name)
        expected = _PY_TYPES.get(field.value.kind)
        if field.repeated or field.map_key is not None or expected is None:
            continue
        if (value is None and not field.presence) or (
            value is not None and not isinstance(value, expected)
        ):
            raise ProtocolError(f"{name}.{field.json_name}: wrong wire type in binary protobuf")
    return msg


_PY_TYPES: dict[int, type | tuple[type, ...]] = {
    _K_ENUM: int,
    _K_INT: int,
    _K_INT64: int,
    _K_BOOL: bool,
    _K_STRING: str,
    _K_BYTES: bytes,
    _K_FLOAT: float,
}


def _read_varint(data: bytes, pos: int) -> tuple[int, int] | None:
    result = shift = 0
    for i in range(pos, min(pos + 10, len(data))):
        byte = data[i]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, i + 1
        shift += 7
    return None


def _check_wire_format(name: str, data: bytes) -> None:
    """Walk the top-level fields of a binary message: tags, varints and lengths in bounds."""
    pos, end = 0, len(data)
    while pos < end:
        tag = _read_varint(data, pos)
        if tag is None:
            raise ProtocolError(f"{name}: truncated field tag in binary protobuf")
        key, pos = tag
        wire_type, number = key & 7, key >> 3
        if number == 0:
            raise ProtocolError(f"{name}: field number 0 in binary protobuf")
        if wire_type == 0:
            varint = _read_varint(data, pos)
            if varint is None:
                raise ProtocolError(f"{name}: truncated varint (field {number})")
            pos = varint[1]
        elif wire_type == 1:
            pos += 8
        elif wire_type == 5:
            pos += 4
        elif wire_type == 2:
            length = _read_varint(data, pos)
            if length is None:
                raise ProtocolError(f"{name}: truncated length (field {number})")
            pos = length[1] + length[0]
        else:
            raise ProtocolError(f"{name}: unsupported wire type {wire_type} (field {number})")
        if pos > end:
            raise ProtocolError(f"{name}: field {number} runs past the end of the message")
