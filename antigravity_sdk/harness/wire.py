"""The harness wire format: protobuf-JSON WebSocket frames and the length-prefixed handshake.

Sans-I/O: every function here is pure; the connection layer owns sockets and pipes.

JSON frames use the canonical protobuf JSON mapping (lowerCamelCase keys, enums by
name, 64-bit integers as strings, bytes as base64). The codec here is driven by the
field metadata of the betterproto2-generated classes in `._proto`, but does not use
betterproto2's own `to_dict`/`from_dict`:

* Decoding is tolerant, as a client of a newer harness must be: unknown keys are
  skipped at every depth; an enum value given by number is kept even when unknown
  (an "UNKNOWN(n)" member that re-encodes as `n`); an unknown enum *name* cannot be
  kept in an int enum, so it reads as the field's default (0, the UNSPECIFIED value)
  and is dropped from repeated fields, exactly what the protobuf JSON spec prescribes
  for parsers that ignore unknown values. `null` means "absent", and both the
  lowerCamelCase and the original snake_case key are accepted. betterproto2's
  `from_dict` raises on unknown keys (unless `ignore_unknown_fields=True`) and on
  unknown enum names (always).
* Decoding is strict about shape: a frame that is not JSON, not an object, or has a
  value of the wrong JSON type for a known field raises `ProtocolError` naming the
  path (`callHookRequest.preToolArgs.stepIndex: ...`). betterproto2 raises assorted
  built-in errors there, or silently keeps the wrong type.
* It is fast: decode and encode of a typical `callHookRequest`/`callHookResponse`
  frame take ~10-20 us, where betterproto2's `from_json` takes ~120 us and `to_json`
  ~500-900 us (it re-resolves type hints on every call). Both run once per tool call.

Binary protobuf (the `InputConfig`/`OutputConfig` handshake on stdin/stdout) uses
betterproto2 directly: `bytes(msg)` and `Message.parse(data)`; each message there is
framed by a 4-byte little-endian length (`encode_frame`, `read_frame`).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import math
import struct
import sys
import threading
import typing
from dataclasses import dataclass
from typing import Any, TypeVar

import betterproto2

from ..errors import ProtocolError
from ._proto.antigravity import localharness as pb

__all__ = [
    "MAX_HANDSHAKE_FRAME",
    "decode_json",
    "decode_length_prefixed",
    "decode_output_event",
    "encode_frame",
    "encode_input_event",
    "encode_json",
    "message_from_dict",
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
class _EnumSpec:
    cls: type[betterproto2.Enum]
    by_name: dict[str, betterproto2.Enum]
    name_of: dict[int, str]


@dataclass(frozen=True, slots=True)
class _Value:
    """How one value (a singular field, a list element, a map key or a map value) is coded."""

    kind: int
    message: type[betterproto2.Message] | None = None
    enum: _EnumSpec | None = None


@dataclass(frozen=True, slots=True)
class _Field:
    name: str  # Python attribute
    json_name: str  # lowerCamelCase, what we emit
    value: _Value
    repeated: bool
    map_key: _Value | None  # set for map fields; `value` is then the map's value
    presence: bool  # None means absent (message fields, oneof members, proto3 optional)
    group: str | None


@dataclass(frozen=True, slots=True)
class _MessageSpec:
    cls: type[betterproto2.Message]
    fields: tuple[_Field, ...]
    by_key: dict[str, _Field]  # json_name and proto name -> field


_specs: dict[type[betterproto2.Message], _MessageSpec] = {}
_enum_specs: dict[type[betterproto2.Enum], _EnumSpec] = {}
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


def _enum_spec(cls: type[betterproto2.Enum]) -> _EnumSpec:
    spec = _enum_specs.get(cls)
    if spec is None:
        name_of = {int(m): m.proto_name or m.name for m in cls}
        by_name = {name_of[int(m)]: m for m in cls}
        spec = _enum_specs[cls] = _EnumSpec(cls, by_name, name_of)
    return spec


def _strip_optional(tp: Any) -> Any:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return args[0] if args and type(None) in typing.get_args(tp) else tp


def _value_spec(proto_type: str, tp: Any) -> _Value:
    kind = _SCALAR_KINDS[proto_type]
    if kind == _K_MESSAGE:
        return _Value(kind, message=_strip_optional(tp))
    if kind == _K_ENUM:
        return _Value(kind, enum=_enum_spec(_strip_optional(tp)))
    return _Value(kind)


def _build_spec(cls: type[betterproto2.Message]) -> _MessageSpec:
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    fields: list[_Field] = []
    by_key: dict[str, _Field] = {}
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
        spec_field = _Field(
            name=dc_field.name,
            json_name=_json_name(proto_name),
            value=value,
            repeated=bool(meta.repeated),
            map_key=map_key,
            presence=bool(meta.optional or meta.group) or value.kind == _K_MESSAGE,
            group=meta.group,
        )
        fields.append(spec_field)
        by_key[spec_field.json_name] = spec_field
        by_key.setdefault(proto_name, spec_field)
    return _MessageSpec(cls, tuple(fields), by_key)


def _spec(cls: type[betterproto2.Message]) -> _MessageSpec:
    spec = _specs.get(cls)
    if spec is None:
        with _spec_lock:
            spec = _specs.get(cls)
            if spec is None:
                spec = _specs[cls] = _build_spec(cls)
    return spec


# --------------------------------------------------------------------------------------
# JSON -> message


class _DecodeError(Exception):
    """Internal: collects the path while unwinding; surfaced as ProtocolError."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.path: list[str] = []


_DROP = object()  # an unknown enum name: leave the field at its default


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _decode_int(raw: Any) -> int:
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, str):
        try:
            return int(raw)
        except ValueError:
            try:
                number = float(raw)
            except ValueError:
                number = math.nan
            if number.is_integer():
                return int(number)
    raise _DecodeError(f"expected an integer, got {_type_name(raw)} {raw!r:.60}")


def _decode_value(spec: _Value, raw: Any) -> Any:
    kind = spec.kind
    if kind == _K_STRING:
        if isinstance(raw, str):
            return raw
        raise _DecodeError(f"expected a string, got {_type_name(raw)}")
    if kind == _K_MESSAGE:
        if isinstance(raw, dict):
            assert spec.message is not None
            return _decode_message(spec.message, raw)
        raise _DecodeError(f"expected an object, got {_type_name(raw)}")
    if kind == _K_ENUM:
        enum = spec.enum
        assert enum is not None
        if isinstance(raw, str):
            return enum.by_name.get(raw, _DROP)
        if isinstance(raw, int) and not isinstance(raw, bool):
            return enum.cls(raw)  # unknown numbers are kept (betterproto2 _missing_)
        raise _DecodeError(f"expected an enum name or number, got {_type_name(raw)}")
    if kind in (_K_INT, _K_INT64):
        return _decode_int(raw)
    if kind == _K_BOOL:
        if isinstance(raw, bool):
            return raw
        raise _DecodeError(f"expected true or false, got {_type_name(raw)}")
    if kind == _K_FLOAT:
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            return float(raw)
        if isinstance(raw, str):
            try:
                return float(raw)  # also "NaN", "Infinity", "-Infinity"
            except ValueError:
                pass
        raise _DecodeError(f"expected a number, got {_type_name(raw)} {raw!r:.60}")
    if kind == _K_BYTES:
        if isinstance(raw, str):
            text = raw.replace("-", "+").replace("_", "/")
            try:
                return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
            except (binascii.Error, ValueError):
                pass
        raise _DecodeError(f"expected base64 bytes, got {_type_name(raw)} {raw!r:.60}")
    raise AssertionError(kind)  # pragma: no cover


def _decode_map_key(spec: _Value, raw: str) -> Any:
    if spec.kind == _K_STRING:
        return raw
    if spec.kind == _K_BOOL:
        if raw in ("true", "false"):
            return raw == "true"
        raise _DecodeError(f"bad map key {raw!r}")
    return _decode_int(raw)


def _decode_field(field: _Field, raw: Any) -> Any:
    if field.map_key is not None:
        if not isinstance(raw, dict):
            raise _DecodeError(f"expected an object (map), got {_type_name(raw)}")
        out: dict[Any, Any] = {}
        for key, item in raw.items():
            try:
                value = _decode_value(field.value, item)
            except _DecodeError as err:
                err.path.append(f"[{key!r}]")
                raise
            if value is not _DROP:
                out[_decode_map_key(field.map_key, key)] = value
        return out
    if field.repeated:
        if not isinstance(raw, list):
            raise _DecodeError(f"expected an array, got {_type_name(raw)}")
        items: list[Any] = []
        for index, item in enumerate(raw):
            try:
                value = _decode_value(field.value, item)
            except _DecodeError as err:
                err.path.append(f"[{index}]")
                raise
            if value is not _DROP:
                items.append(value)
        return items
    return _decode_value(field.value, raw)


def _decode_message(cls: type[M], raw: dict[str, Any]) -> M:
    spec = _spec(cls)
    by_key = spec.by_key
    kwargs: dict[str, Any] = {}
    oneofs: dict[str, str] | None = None  # group -> the member already set
    for key, item in raw.items():
        field = by_key.get(key)
        if field is None or item is None:
            continue  # unknown field (a newer harness), or null (= absent)
        try:
            value = _decode_field(field, item)
        except _DecodeError as err:
            err.path.append(key)
            raise
        if value is _DROP:
            continue
        if field.group is not None:
            if oneofs is None:
                oneofs = {}
            other = oneofs.setdefault(field.group, field.name)
            if other != field.name:
                raise _DecodeError(f"oneof {field.group!r} has both {other!r} and {field.name!r}")
        kwargs[field.name] = value
    return cls(**kwargs)


def message_from_dict(cls: type[M], obj: Any) -> M:
    """Build a `cls` from a decoded JSON object, tolerantly (see the module docstring)."""
    if not isinstance(obj, dict):
        raise ProtocolError(f"{cls.__name__}: expected a JSON object, got {_type_name(obj)}")
    try:
        return _decode_message(cls, obj)
    except _DecodeError as err:
        path = ".".join(reversed(err.path)).replace(".[", "[")
        where = f"{cls.__name__}.{path}" if path else cls.__name__
        raise ProtocolError(f"{where}: {err.message}") from None
    except RecursionError:
        raise ProtocolError(f"{cls.__name__}: frame nested too deeply") from None


def decode_json(cls: type[M], data: str | bytes | bytearray) -> M:
    """Decode one JSON text frame as a `cls`. Raises `ProtocolError` on a bad frame."""
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError) as err:  # JSONDecodeError, UnicodeDecodeError
        preview = data[:80] if isinstance(data, str) else bytes(data[:80])
        raise ProtocolError(f"{cls.__name__}: frame is not JSON ({err}): {preview!r}") from None
    return message_from_dict(cls, obj)


def decode_output_event(data: str | bytes | bytearray) -> pb.OutputEvent:
    """Decode one harness -> SDK WebSocket frame."""
    return decode_json(pb.OutputEvent, data)


# --------------------------------------------------------------------------------------
# message -> JSON


def _encode_value(spec: _Value, value: Any) -> Any:
    kind = spec.kind
    if kind == _K_MESSAGE:
        return _encode_message(value)
    if kind == _K_ENUM:
        assert spec.enum is not None
        number = int(value)
        name = spec.enum.name_of.get(number)
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
    for field in _spec(type(msg)).fields:
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


def encode_json(msg: betterproto2.Message) -> str:
    """One JSON text frame for `msg` (compact, ASCII)."""
    return json.dumps(_encode_message(msg), separators=(",", ":"))


def encode_input_event(event: pb.InputEvent | pb.InitializeConversationEvent) -> str:
    """One SDK -> harness WebSocket frame. `InitializeConversationEvent` is sent bare."""
    return encode_json(event)


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
    for field in _spec(cls).fields:
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
