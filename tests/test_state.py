"""The SDK's per-user state directory and its keys (`antigravity_sdk.state`): where it is,
that it is private, that a key is made once, whole, and refused when it could have been
read by others or is damaged."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest

from antigravity_sdk.errors import ConfigurationError
from antigravity_sdk.state import (
    FLEET_SECRET_ENV,
    decode_key,
    fleet_secret,
    protected_state,
    read_key_file,
    secret,
    state_dir,
)

ROOT = Path(__file__).resolve().parents[1]


def test_the_state_directory_follows_xdg_and_is_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    found = state_dir()
    assert found == (tmp_path / "xdg" / "antigravity-sdk").resolve()
    assert found.stat().st_mode & 0o777 == 0o700
    assert protected_state() == (found,)
    # A relative XDG_STATE_HOME is ignored, as the specification says: ~/.local/state.
    monkeypatch.setenv("XDG_STATE_HOME", "relative/dir")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert state_dir() == (tmp_path / "home" / ".local" / "state" / "antigravity-sdk").resolve()
    monkeypatch.delenv("XDG_STATE_HOME")
    assert state_dir() == (tmp_path / "home" / ".local" / "state" / "antigravity-sdk").resolve()


def test_a_key_is_made_once_private_and_read_back(state_home: Path) -> None:
    key = secret("audit")
    path = state_home / "antigravity-sdk" / "keys" / "audit.key"
    assert len(key) == 32 and path.read_bytes() == key
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    assert secret("audit") == key and secret("fleet") != key
    assert sorted(p.name for p in path.parent.iterdir()) == ["audit.key", "fleet.key"]
    with pytest.raises(ConfigurationError, match="no key at"):
        secret("other", create=False)
    with pytest.raises(ValueError, match="key name"):
        secret("../escape")


def test_processes_making_a_key_at_once_all_get_the_same_one(state_home: Path) -> None:
    code = "from antigravity_sdk.state import secret; print(secret('race').hex())"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(8)
    ]
    keys = {proc.communicate(timeout=60)[0].strip() for proc in procs}
    assert len(keys) == 1 and len(next(iter(keys))) == 64
    assert secret("race").hex() in keys
    leftovers = [p.name for p in (state_home / "antigravity-sdk" / "keys").iterdir()]
    assert leftovers == ["race.key"]  # no temporary file left behind


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda p: p.chmod(0o640), "readable by others"),
        (lambda p: p.chmod(0o604), "readable by others"),
        (lambda p: p.write_bytes(b"short"), "holds 5 bytes, not 32"),
        (lambda p: p.write_bytes(b"x" * 64), "holds 33 bytes, not 32"),
    ],
)
def test_a_key_others_could_read_or_a_damaged_one_is_refused_naming_it(
    state_home: Path, damage: object, words: str
) -> None:
    secret("audit")
    path = state_home / "antigravity-sdk" / "keys" / "audit.key"
    damage(path)  # type: ignore[operator]
    with pytest.raises(ConfigurationError, match=words) as raised:
        secret("audit")
    assert str(path) in str(raised.value)


def test_a_key_that_is_a_link_is_refused(state_home: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "planted.key"
    elsewhere.write_bytes(b"k" * 32)
    elsewhere.chmod(0o600)
    keys = state_dir() / "keys"
    keys.mkdir(mode=0o700)
    (keys / "audit.key").symlink_to(elsewhere)
    with pytest.raises(ConfigurationError, match="not a link"):
        secret("audit")


def test_keys_written_as_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = os.urandom(40)
    assert decode_key(key.hex(), "x") == key
    assert decode_key(base64.b64encode(key).decode(), "x") == key
    assert decode_key(base64.urlsafe_b64encode(key).decode().rstrip("="), "x") == key
    with pytest.raises(ConfigurationError, match=r"^\$V: 16 bytes, at least 32"):
        decode_key(os.urandom(16).hex(), "$V")
    with pytest.raises(ConfigurationError, match="not hex or base64"):
        decode_key("not a key!", "$V")
    monkeypatch.setenv(FLEET_SECRET_ENV, key.hex())
    assert fleet_secret() == key
    monkeypatch.setenv(FLEET_SECRET_ENV, "abcd")
    with pytest.raises(ConfigurationError, match=FLEET_SECRET_ENV) as raised:
        fleet_secret()
    assert "abcd" not in str(raised.value)  # the value is never shown
    monkeypatch.delenv(FLEET_SECRET_ENV)
    assert fleet_secret(create=False) is None
    assert fleet_secret() == secret("fleet")
    raw = tmp_path / "raw.key"
    raw.write_bytes(key[:32])
    assert read_key_file(raw) == key[:32]
    (tmp_path / "b64.key").write_text(base64.b64encode(key).decode() + "\n")
    assert read_key_file(tmp_path / "b64.key") == key
