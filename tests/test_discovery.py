"""Harness discovery order and installation (hermetic: no network, no real harness)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from antigravity_sdk.errors import HarnessNotFoundError
from antigravity_sdk.harness import install
from antigravity_sdk.harness.install import (
    HARNESS_VERSION,
    HarnessInstallError,
    cached_harness_path,
    default_cache_dir,
    find_harness,
    harness_version,
    install_harness,
    locate_harness,
)

FAKE_PACKAGE = "agsdk_fake_google.antigravity"


def make_exe(path: Path, body: str = "#!/bin/sh\necho fake\n", mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    path.chmod(mode)
    return path


class Layout:
    """Every discovery candidate, each created on demand."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cache = root / "cache"
        self.site = root / "site"
        self.pathbin = root / "pathbin"
        self.pathbin.mkdir()

    @property
    def cached(self) -> Path:
        return self.cache / "harness" / HARNESS_VERSION / "localharness"

    @property
    def dist_bin(self) -> Path:
        return self.site / "agsdk_fake_google" / "antigravity" / "bin" / "localharness"

    def make_cache(self, mode: int = 0o755) -> Path:
        return make_exe(self.cached, mode=mode)

    def make_dist(self, mode: int = 0o755) -> Path:
        pkg = self.site / "agsdk_fake_google" / "antigravity"
        pkg.mkdir(parents=True, exist_ok=True)
        (pkg / "__init__.py").write_text("raise RuntimeError('must not be imported')\n")
        return make_exe(self.dist_bin, mode=mode)

    def make_on_path(self) -> Path:
        return make_exe(self.pathbin / "localharness")

    def make_all(self) -> None:
        self.make_cache()
        self.make_dist()
        self.make_on_path()


def _forget_fake_package() -> None:
    # find_spec imports the (namespace) parent package; drop it so the next test's
    # sys.path is searched afresh.
    for name in [m for m in sys.modules if m.split(".")[0] == FAKE_PACKAGE.split(".")[0]]:
        del sys.modules[name]


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Layout]:
    _forget_fake_package()
    lay = Layout(tmp_path)
    monkeypatch.delenv("ANTIGRAVITY_HARNESS_PATH", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("ANTIGRAVITY_CACHE_DIR", str(lay.cache))
    monkeypatch.setenv("PATH", str(lay.pathbin))
    # A fake package name, so an installed google-antigravity cannot interfere.
    monkeypatch.setattr(install, "_PACKAGE", FAKE_PACKAGE)
    monkeypatch.syspath_prepend(str(lay.site))
    yield lay
    _forget_fake_package()


# ------------------------------------------------------------------------ discovery order


def test_explicit_path_wins(layout: Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    layout.make_all()
    env_bin = make_exe(layout.root / "env" / "localharness")
    monkeypatch.setenv("ANTIGRAVITY_HARNESS_PATH", str(env_bin))
    explicit = make_exe(layout.root / "mine" / "harness-bin")
    assert find_harness(explicit) == explicit
    assert find_harness(str(explicit)) == explicit
    assert locate_harness(explicit).source == "explicit"


def test_env_var_beats_cache_dist_and_path(layout: Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    layout.make_all()
    env_bin = make_exe(layout.root / "env" / "localharness")
    monkeypatch.setenv("ANTIGRAVITY_HARNESS_PATH", str(env_bin))
    assert find_harness() == env_bin
    assert locate_harness().source == "env"


def test_cache_beats_distribution_and_path(layout: Layout) -> None:
    layout.make_all()
    found = locate_harness()
    assert found.path == layout.cached
    assert found.source == "cache"
    assert found.version == HARNESS_VERSION


def test_distribution_beats_path_without_importing_it(layout: Layout) -> None:
    layout.make_dist()
    layout.make_on_path()
    found = locate_harness()
    assert found.path == layout.dist_bin
    assert found.source == "distribution"
    assert FAKE_PACKAGE not in sys.modules  # located, never imported


def test_other_cached_versions_come_after_path_newest_first(layout: Layout) -> None:
    """`harness install --version 0.1.21` puts a harness where only that version's
    directory names it: discovery finds it (rather than "not found"), after every other
    candidate, the newest such version first."""
    for version in ("0.1.9", "0.1.21", "0.1.3"):
        make_exe(layout.cache / "harness" / version / "localharness")
    make_exe(layout.cache / "harness" / "0.1.30" / "localharness", mode=0o644)  # not runnable
    found = locate_harness()
    assert (found.source, found.version) == ("cache", "0.1.21")
    assert found.path == layout.cache / "harness" / "0.1.21" / "localharness"
    on_path = layout.make_on_path()
    assert locate_harness().path == on_path
    layout.make_cache()
    assert locate_harness().version == HARNESS_VERSION


def test_not_found_lists_other_versions_searched(layout: Layout) -> None:
    with pytest.raises(HarnessNotFoundError, match=r"other versions in .* \(none\)"):
        locate_harness()


def test_path_is_last(layout: Layout) -> None:
    on_path = layout.make_on_path()
    found = locate_harness()
    assert found.path == on_path
    assert found.source == "path"


def test_non_executable_auto_candidates_are_skipped(layout: Layout) -> None:
    layout.make_cache(mode=0o644)
    layout.make_dist(mode=0o644)
    on_path = layout.make_on_path()
    assert find_harness() == on_path


def test_empty_env_var_and_empty_explicit_mean_unset(
    layout: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout.make_cache()
    monkeypatch.setenv("ANTIGRAVITY_HARNESS_PATH", "")
    assert find_harness("") == layout.cached


def test_not_found_says_how_to_install(layout: Layout) -> None:
    with pytest.raises(HarnessNotFoundError) as info:
        find_harness()
    message = str(info.value)
    assert "antigravity harness install" in message
    assert f"pip install google-antigravity=={HARNESS_VERSION}" in message
    assert "ANTIGRAVITY_HARNESS_PATH" in message
    assert str(layout.cached) in message  # what was searched


# ------------------------------------------------------------- explicit paths never fall through


@pytest.mark.parametrize("kind", ["missing", "not-executable", "directory"])
def test_bad_explicit_path_is_an_error_naming_it(layout: Layout, kind: str) -> None:
    layout.make_all()  # plenty to fall through to: it must not
    bad = layout.root / "bad" / "localharness"
    if kind == "not-executable":
        make_exe(bad, mode=0o644)
    elif kind == "directory":
        bad.mkdir(parents=True)
    with pytest.raises(HarnessNotFoundError) as info:
        find_harness(bad)
    assert str(bad) in str(info.value)
    assert "antigravity harness install" in str(info.value)


@pytest.mark.parametrize("kind", ["missing", "not-executable"])
def test_bad_env_path_is_an_error_naming_it(
    layout: Layout, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    layout.make_all()
    bad = layout.root / "bad" / "localharness"
    if kind == "not-executable":
        make_exe(bad, mode=0o600)
    monkeypatch.setenv("ANTIGRAVITY_HARNESS_PATH", str(bad))
    with pytest.raises(HarnessNotFoundError) as info:
        find_harness()
    assert str(bad) in str(info.value)
    assert "ANTIGRAVITY_HARNESS_PATH" in str(info.value)


def test_explicit_path_expands_user(layout: Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(layout.root))
    exe = make_exe(layout.root / "bin" / "lh")
    assert find_harness("~/bin/lh") == exe


# ---------------------------------------------------------------------------- cache dir


def test_cache_dir_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ANTIGRAVITY_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "antigravity-sdk"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "antigravity-sdk"
    monkeypatch.setenv("ANTIGRAVITY_CACHE_DIR", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine"
    assert cached_harness_path() == tmp_path / "mine" / "harness" / HARNESS_VERSION / "localharness"
    assert cached_harness_path("9.9.9", tmp_path / "x") == (
        tmp_path / "x" / "harness" / "9.9.9" / "localharness"
    )


def test_bad_version_strings_rejected(tmp_path: Path) -> None:
    for bad in ("", "../etc", "0.1.22; rm -rf /", "latest"):
        with pytest.raises(ValueError):
            install_harness(bad, tmp_path)
    with pytest.raises(ValueError, match=r"without the 'v': 0\.1\.21"):
        install_harness("v0.1.21", tmp_path)


# -------------------------------------------------------------------------------- install

BINARY = b"\x7fELF fake harness " + bytes(range(256)) * 50


def build_wheel(
    path: Path, *, binary: bytes | None = BINARY, record_hash: str | None = None
) -> Path:
    digest = base64.urlsafe_b64encode(hashlib.sha256(binary or b"").digest()).rstrip(b"=")
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("google/antigravity/__init__.py", "")
        if binary is not None:
            zf.writestr("google/antigravity/bin/localharness", binary)
        record = "google/antigravity/__init__.py,,\n"
        if binary is not None:
            h = record_hash or digest.decode()
            record += f"google/antigravity/bin/localharness,sha256={h},{len(binary)}\n"
        zf.writestr("google_antigravity-0.1.22.dist-info/RECORD", record)
    return path


class FakeDownload:
    def __init__(self, wheel: Path) -> None:
        self.wheel = wheel
        self.calls: list[tuple[str, Path, float]] = []

    def __call__(self, version: str, dest: Path, timeout: float, progress: Any) -> Path:
        self.calls.append((version, dest, timeout))
        out = dest / "google_antigravity-0.1.22-py3-none-manylinux_2_17_x86_64.whl"
        out.write_bytes(self.wheel.read_bytes())
        return out


def test_install_from_fake_wheel_and_idempotent(
    layout: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeDownload(build_wheel(layout.root / "w.whl"))
    monkeypatch.setattr(install, "_download_wheel", fake)
    path = install_harness()
    assert path == layout.cached
    assert path.read_bytes() == BINARY
    assert stat.S_IMODE(path.stat().st_mode) == 0o111  # compiled: execute only (unreadable)
    assert [c[0] for c in fake.calls] == [HARNESS_VERSION]
    assert sorted(os.listdir(path.parent)) == ["localharness"]  # no temp leftovers
    # Already installed: quick return, no download.
    assert install_harness() == path
    assert len(fake.calls) == 1
    # force re-installs.
    assert install_harness(force=True) == path
    assert len(fake.calls) == 2
    # And discovery now finds it in the cache.
    assert locate_harness().source == "cache"
    assert harness_version(path) == HARNESS_VERSION


def test_install_into_explicit_cache_dir_and_version(
    layout: Layout, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeDownload(build_wheel(layout.root / "w.whl"))
    monkeypatch.setattr(install, "_download_wheel", fake)
    path = install_harness("0.1.23", tmp_path / "other")
    assert path == tmp_path / "other" / "harness" / "0.1.23" / "localharness"
    assert fake.calls[0][0] == "0.1.23"
    assert harness_version(path) == "0.1.23"


def test_install_refuses_a_wheel_named_for_another_version(layout: Layout) -> None:
    wheel = build_wheel(layout.root / "google_antigravity-0.1.21-py3-none-any.whl")
    assert install.wheel_version(wheel) == "0.1.21"
    with pytest.raises(HarnessInstallError, match=r"is google-antigravity 0\.1\.21, not 0\.1\.22"):
        install_harness(wheel=wheel)
    assert not layout.cached.exists()
    assert install_harness("0.1.21", wheel=wheel).parent.name == "0.1.21"


def test_install_from_local_wheel(layout: Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: Any) -> Path:
        raise AssertionError("must not download")

    monkeypatch.setattr(install, "_download_wheel", no_network)
    path = install_harness(wheel=build_wheel(layout.root / "w.whl"))
    assert path.read_bytes() == BINARY


def test_install_rejects_hash_mismatch(layout: Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = build_wheel(layout.root / "w.whl", record_hash="A" * 43)
    monkeypatch.setattr(install, "_download_wheel", FakeDownload(wheel))
    with pytest.raises(HarnessInstallError, match="RECORD"):
        install_harness()
    assert not layout.cached.exists()
    assert os.listdir(layout.cached.parent) == []  # temp file cleaned up


def test_install_rejects_wheel_without_binary(
    layout: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = build_wheel(layout.root / "w.whl", binary=None)
    monkeypatch.setattr(install, "_download_wheel", FakeDownload(wheel))
    with pytest.raises(HarnessInstallError, match="does not contain"):
        install_harness()
    bad = layout.root / "bad.whl"
    bad.write_bytes(b"not a zip")
    with pytest.raises(HarnessInstallError, match=r"bad\.whl"):
        install_harness(wheel=bad)
    assert isinstance(HarnessInstallError("x"), HarnessNotFoundError)


def test_pip_download_command_and_failure(layout: Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def fake_run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        seen["cmd"], seen["kwargs"] = cmd, kwargs
        return subprocess.CompletedProcess(
            cmd,
            1,
            stdout="",
            stderr="Collecting\nERROR: No matching distribution found for google-antigravity",
        )

    monkeypatch.setattr(subprocess, "run", fake_run)
    with pytest.raises(HarnessInstallError) as info:
        install_harness(timeout=12.0)
    assert "No matching distribution found" in str(info.value)
    cmd = seen["cmd"]
    assert cmd[:6] == [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed"]
    assert "--report" in cmd and cmd[-1] == f"google-antigravity=={HARNESS_VERSION}"
    assert "--no-deps" in cmd and "--only-binary=:all:" in cmd
    assert seen["kwargs"]["timeout"] == 12.0
    assert not layout.cached.exists()


def test_pip_download_timeout(layout: Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    def slow_run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        raise subprocess.TimeoutExpired(cmd, kwargs["timeout"])

    monkeypatch.setattr(subprocess, "run", slow_run)
    with pytest.raises(HarnessInstallError, match=r"(?s)timed out.*--wheel FILE"):
        install_harness(timeout=0.5)


def test_pip_report_names_the_wheel(layout: Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    """pip resolves (a dry run with --report); the wheel at the URL it names is used."""
    wheel = build_wheel(layout.root / "w.whl")

    def fake_run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        report = {"install": [{"download_info": {"url": wheel.as_uri(), "archive_info": {}}}]}
        Path(cmd[cmd.index("--report") + 1]).write_text(json.dumps(report))
        return subprocess.CompletedProcess(cmd, 0, stdout="", stderr="")

    monkeypatch.setattr(subprocess, "run", fake_run)
    assert install_harness().read_bytes() == BINARY


def test_old_pip_without_report_downloads_with_pip(
    layout: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = build_wheel(layout.root / "w.whl")
    commands: list[str] = []

    def fake_run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        commands.append(cmd[3])
        if "--report" in cmd:
            return subprocess.CompletedProcess(cmd, 2, "", "ERROR: no such option: --report")
        dest = Path(cmd[cmd.index("-d") + 1])
        (dest / wheel.name).write_bytes(wheel.read_bytes())
        return subprocess.CompletedProcess(cmd, 0, stdout="Saved", stderr="")

    monkeypatch.setattr(subprocess, "run", fake_run)
    assert install_harness().read_bytes() == BINARY
    assert commands == ["install", "download"]


# -------------------------------------------------------------------------------- version


def test_harness_version_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert harness_version(tmp_path / "harness" / "0.1.22" / "localharness") == "0.1.22"
    other = make_exe(tmp_path / "bin" / "localharness")
    assert harness_version(other) is None
    digest = base64.urlsafe_b64encode(hashlib.sha256(other.read_bytes()).digest()).rstrip(b"=")
    monkeypatch.setitem(install._KNOWN_SHA256, digest.decode(), "0.0.7")
    assert harness_version(other) is None  # hashing is opt-in
    assert harness_version(other, by_hash=True) == "0.0.7"
