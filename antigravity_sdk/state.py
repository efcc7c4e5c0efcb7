"""The SDK's per-user state: a directory outside every workspace, and the keys kept in it.

`state_dir()` is `$XDG_STATE_HOME/antigravity-sdk` (`~/.local/state/antigravity-sdk`
when the variable is unset or not absolute), made 0700 on first use. It holds what
governs the agents and must stay out of their reach: the embedded fleet (`fleet/`) and
the keys (`keys/<name>.key`) that seal the audit chain and sign the fleet's approvals.
`protected_state()` lists it for the containment, which hides it from every contained
process.

`secret(name)` is a 32-byte random key, made on first use (readable by its owner only)
and read back afterwards. A key file of the wrong size, or readable by anyone but its
owner, is refused with an error naming it: a key others could read seals nothing.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
from pathlib import Path
from typing import Final, Literal, overload

from .errors import ConfigurationError

__all__ = [
    "FLEET_SECRET_ENV",
    "KEY_BYTES",
    "STATE_ENV",
    "decode_key",
    "fleet_secret",
    "key_path",
    "protected_state",
    "read_key_file",
    "secret",
    "state_dir",
]

STATE_ENV: Final = "XDG_STATE_HOME"
KEY_BYTES: Final = 32
_NAME: Final = "antigravity-sdk"
_KEY_NAME: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def _base() -> Path:
    """The XDG state home: the variable when it is an absolute path (the specification
    says to ignore a relative one), else `~/.local/state`."""
    value = os.environ.get(STATE_ENV, "")
    if value and os.path.isabs(value):
        return Path(value)
    return Path.home() / ".local" / "state"


def _private_dir(path: Path) -> Path:
    """`path` made (0700, its parents as usual) if missing; a `ConfigurationError` naming
    it if it cannot be, or is not a directory."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot make the SDK's state directory {path}: {exc.strerror or exc}"
        ) from None
    if not path.is_dir():
        raise ConfigurationError(f"the SDK's state directory {path} is not a directory")
    return path


def state_dir() -> Path:
    """The SDK's per-user state directory (made 0700 on first use), resolved."""
    return _private_dir(_base() / _NAME).resolve()


def protected_state() -> tuple[Path, ...]:
    """What no contained process may read or write: the state directory (made now, so
    that it exists before any agent starts and an agent cannot plant it)."""
    return (state_dir(),)


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not _KEY_NAME.fullmatch(name):
        raise ValueError(f"key name {name!r}: use 1 to 64 of a-z, 0-9, '_' and '-'")
    return name


def key_path(name: str) -> Path:
    """Where `secret(name)` keeps its key (the state directory is made; the file not)."""
    return _private_dir(state_dir() / "keys") / f"{_check_name(name)}.key"


def secret(name: str, *, create: bool = True) -> bytes:
    """The 32-byte key `name`, from `state_dir()/keys/<name>.key`: made (random, 0600,
    published whole: a reader never sees half a key) on first use when `create`, read
    afterwards. A missing key with `create=False`, a file of the wrong size, or one that
    its owner is not alone in being able to read, is a `ConfigurationError` naming it."""
    path = key_path(name)
    try:
        return _read(path)
    except FileNotFoundError:
        if not create:
            raise ConfigurationError(f"no key at {path}") from None
    _publish(path, secrets.token_bytes(KEY_BYTES))
    return _read(path)


def _read(path: Path) -> bytes:
    """The key at `path`, checked (FileNotFoundError when there is none)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ConfigurationError(
            f"cannot read the key {path}: {exc.strerror or exc} (a key file must be a "
            "regular file, not a link)"
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigurationError(f"the key {path} is not a regular file")
        if info.st_mode & 0o077:
            raise ConfigurationError(
                f"the key {path} is readable by others (mode {stat.S_IMODE(info.st_mode):04o}):"
                " it can no longer be trusted; remove it (what it sealed or signed will no "
                "longer verify) or make it 0600 if nobody else could have read it"
            )
        if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
            raise ConfigurationError(f"the key {path} belongs to another user (uid {info.st_uid})")
        data = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) != KEY_BYTES:
        raise ConfigurationError(
            f"the key {path} holds {len(data)} bytes, not {KEY_BYTES}: damaged or not a key"
        )
    return data


def _write_new(path: Path, key: bytes, flags: int) -> None:
    """Create `path` (`flags` hold O_EXCL) with `key`, on disk before it returns."""
    fd = os.open(path, flags, 0o600)
    try:
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)


def _publish(path: Path, key: bytes) -> None:
    """Write `key` to a new file beside `path` (O_EXCL, 0600), then link it in place: the
    key appears whole or not at all, and of two processes making it at once, the first
    link wins and both read that one."""
    temp = path.with_name(f".{path.name}.{secrets.token_hex(6)}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        _write_new(temp, key, flags)
        try:
            os.link(temp, path)
        except FileExistsError:
            pass  # made meanwhile by another process: that one is the key
        except OSError:  # no hard links here: create in place, exclusively
            _write_new(path, key, flags)
    except FileExistsError:
        pass
    except OSError as exc:
        raise ConfigurationError(f"cannot make the key {path}: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)


# -- keys given as text: the fleet's secret, a --key-file ---------------------------------------

FLEET_SECRET_ENV: Final = "ANTIGRAVITY_FLEET_SECRET"
"""The fleet's secret as hex or base64 (at least 32 bytes): the same on every machine of
a fleet, else approvals answered on one do not verify on another."""
_HEX: Final = re.compile(r"(?:[0-9a-fA-F]{2})+")


def decode_key(text: str, source: str) -> bytes:
    """A key written as hex or base64 (standard or URL-safe), at least 32 bytes; a
    `ConfigurationError` naming `source` (never the value) otherwise."""
    import base64
    import binascii

    value = text.strip()
    key: bytes | None = None
    if _HEX.fullmatch(value):
        key = bytes.fromhex(value)
    else:
        standard = value.replace("-", "+").replace("_", "/")  # URL-safe too
        try:
            key = base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
        except (binascii.Error, ValueError):
            key = None
    if key is None:
        raise ConfigurationError(f"{source}: not hex or base64")
    if len(key) < KEY_BYTES:
        raise ConfigurationError(
            f"{source}: {len(key)} bytes, at least {KEY_BYTES} are needed (make one with: "
            "python -c 'import secrets; print(secrets.token_hex(32))')"
        )
    return key


def read_key_file(path: str | os.PathLike[str]) -> bytes:
    """A key from a file: exactly 32 raw bytes (as `secret()` keeps them), or hex or base64
    text of at least 32 bytes (as `ANTIGRAVITY_FLEET_SECRET` holds it)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigurationError(
            f"cannot read the key file {path}: {exc.strerror or exc}"
        ) from None
    if len(data) == KEY_BYTES:
        return data
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise ConfigurationError(
            f"the key file {path}: {len(data)} bytes, neither a raw {KEY_BYTES}-byte key "
            "nor hex or base64 text"
        ) from None
    return decode_key(text, f"the key file {path}")


@overload
def fleet_secret(*, create: Literal[True] = True) -> bytes: ...


@overload
def fleet_secret(*, create: bool) -> bytes | None: ...


def fleet_secret(*, create: bool = True) -> bytes | None:
    """The fleet's secret: `$ANTIGRAVITY_FLEET_SECRET` when set (checked), else the state
    directory's `fleet` key (made on first use when `create`; None when missing and not)."""
    value = os.environ.get(FLEET_SECRET_ENV)
    if value:
        return decode_key(value, f"${FLEET_SECRET_ENV}")
    try:
        return secret("fleet", create=create)
    except ConfigurationError:
        if create or key_path("fleet").exists():
            raise
        return None
