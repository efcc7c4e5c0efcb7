"""Finding and installing the `localharness` binary.

The harness ships inside the `google-antigravity` wheels on PyPI
(`google/antigravity/bin/localharness`). The SDK is tested against exactly one version,
`HARNESS_VERSION`, recorded here and nowhere else.

Discovery order (`find_harness`):

1. the explicit path given by the caller;
2. `$ANTIGRAVITY_HARNESS_PATH`;
3. the SDK's cache, where `antigravity harness install` puts it:
   `<cache>/harness/<HARNESS_VERSION>/localharness`, with `<cache>` =
   `$ANTIGRAVITY_CACHE_DIR`, else `$XDG_CACHE_HOME/antigravity-sdk`, else
   `~/.cache/antigravity-sdk`;
4. an installed `google-antigravity` distribution (located without importing it);
5. `localharness` on `PATH`;
6. another version in the SDK's cache (`antigravity harness install --version X`), the
   newest first: `doctor` warns that the SDK is tested with `HARNESS_VERSION`.

An explicit path or `$ANTIGRAVITY_HARNESS_PATH` naming a missing or non-executable file
is an error naming that path, never a fall-through to another binary. Candidates 3-6
are skipped when absent or not executable.

The binary has no `--version` flag (0.1.22 reads its stdin for the handshake whatever
the arguments), so `harness_version` infers the version from where the binary lives
(cache layout or distribution metadata) or, on request, from its SHA-256.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import hashlib
import importlib.metadata
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from ..errors import ConfigurationError, HarnessInstallError, HarnessNotFoundError

__all__ = [
    "BINARY_NAME",
    "DISTRIBUTION",
    "ENV_CACHE_DIR",
    "ENV_HARNESS_PATH",
    "HARNESS_VERSION",
    "HarnessInstallError",
    "HarnessLocation",
    "InstallProgress",
    "cached_harness_path",
    "default_cache_dir",
    "find_harness",
    "harness_version",
    "install_harness",
    "locate_harness",
    "wheel_version",
]

#: The harness version this SDK speaks to and is tested with.
HARNESS_VERSION = "0.1.22"

DISTRIBUTION = "google-antigravity"
BINARY_NAME = "localharness"
ENV_HARNESS_PATH = "ANTIGRAVITY_HARNESS_PATH"
ENV_CACHE_DIR = "ANTIGRAVITY_CACHE_DIR"
_PACKAGE = "google.antigravity"
_WHEEL_MEMBER = "google/antigravity/bin/localharness"

#: SHA-256 of the Linux x86-64 binary per release (from the wheel's RECORD).
_KNOWN_SHA256 = {
    "ZalqKhHJFp8_HMmi2nFxgRKjWgqL5D5_KGYz1I7l7NM": "0.1.22",
}

_VERSION_RE = re.compile(r"^[0-9][0-9A-Za-z.+!_-]*$")
_PIP_TIMEOUT = 600.0

Source = Literal["explicit", "env", "cache", "distribution", "path"]


@dataclass(frozen=True)
class HarnessLocation:
    """Where `locate_harness` found the binary, and by which rule."""

    path: Path
    source: Source
    version: str | None  # when known without running or hashing the binary


def default_cache_dir() -> Path:
    """The SDK's cache root (not created): $ANTIGRAVITY_CACHE_DIR, $XDG_CACHE_HOME/..., ~/..."""
    explicit = os.environ.get(ENV_CACHE_DIR)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "antigravity-sdk"


def cached_harness_path(
    version: str = HARNESS_VERSION, cache_dir: str | os.PathLike[str] | None = None
) -> Path:
    """Where `install_harness` puts (or put) `version` of the binary."""
    _check_version(version)
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    return root / "harness" / version / BINARY_NAME


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _check_version(version: str) -> None:
    if not _VERSION_RE.match(version):
        hint = f" (write it without the 'v': {version[1:]})" if version[:1] in "vV" else ""
        raise ConfigurationError(f"not a version number: {version!r}{hint}")


def wheel_version(wheel: str | os.PathLike[str]) -> str | None:
    """The version in a `google-antigravity` wheel's file name (`<name>-<version>-...whl`),
    or None for a name that is not one."""
    parts = Path(wheel).name.split("-")
    if len(parts) < 5 or not parts[-1].endswith(".whl"):
        return None
    if parts[0].lower().replace("_", "-") != DISTRIBUTION:
        return None
    return parts[1] if _VERSION_RE.match(parts[1]) else None


def _install_hint() -> str:
    return (
        "Install it with one of:\n"
        f"  antigravity harness install        "
        f"(downloads {DISTRIBUTION}=={HARNESS_VERSION} into {cached_harness_path().parent})\n"
        f"  pip install {DISTRIBUTION}=={HARNESS_VERSION}\n"
        f"or set {ENV_HARNESS_PATH} to the path of a localharness binary."
    )


def _must_be_executable(path: Path, what: str) -> Path:
    if not path.exists():
        problem = "does not exist"
    elif not path.is_file():
        problem = "is not a file"
    elif not os.access(path, os.X_OK):
        problem = f"is not executable (chmod +x {path})"
    else:
        return path
    raise HarnessNotFoundError(f"The harness binary {what} {path} {problem}.\n{_install_hint()}")


def _distribution_binary() -> Path | None:
    """`google/antigravity/bin/localharness` of an installed google-antigravity, unimported."""
    try:
        spec = importlib.util.find_spec(_PACKAGE)  # imports the `google` namespace only
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    for location in spec.submodule_search_locations or ():
        candidate = Path(location) / "bin" / BINARY_NAME
        if candidate.exists():
            return candidate
    return None


def _distribution_version(path: Path) -> str | None:
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
    try:
        located = Path(str(dist.locate_file(_WHEEL_MEMBER))).resolve()
    except OSError:  # pragma: no cover - defensive
        return None
    return dist.version if located == path.resolve() else None


def locate_harness(explicit: str | os.PathLike[str] | None = None) -> HarnessLocation:
    """Like `find_harness`, also telling which rule matched and the version if known."""
    if explicit is not None and os.fspath(explicit) != "":
        path = _must_be_executable(Path(explicit).expanduser(), "given explicitly,")
        return HarnessLocation(path, "explicit", harness_version(path))
    from_env = os.environ.get(ENV_HARNESS_PATH)
    if from_env:
        path = _must_be_executable(Path(from_env).expanduser(), f"named by ${ENV_HARNESS_PATH},")
        return HarnessLocation(path, "env", harness_version(path))

    searched: list[str] = []
    cached = cached_harness_path()
    searched.append(f"{cached} (SDK cache)")
    if _is_executable(cached):
        return HarnessLocation(cached, "cache", HARNESS_VERSION)

    dist_bin = _distribution_binary()
    searched.append(
        f"{dist_bin} (installed {DISTRIBUTION})"
        if dist_bin is not None
        else f"an installed {DISTRIBUTION} (none)"
    )
    if dist_bin is not None and _is_executable(dist_bin):
        return HarnessLocation(dist_bin, "distribution", _distribution_version(dist_bin))

    on_path = shutil.which(BINARY_NAME)
    searched.append(f"{BINARY_NAME} on PATH ({on_path or 'none'})")
    if on_path is not None:
        path = Path(on_path)
        return HarnessLocation(path, "path", harness_version(path))

    others = _other_cached_versions(cached.parent.parent)
    searched.append(f"other versions in {cached.parent.parent} ({', '.join(others) or 'none'})")
    if others:
        version = others[0]
        return HarnessLocation(cached.parent.parent / version / BINARY_NAME, "cache", version)

    raise HarnessNotFoundError(
        f"The Antigravity harness binary ({BINARY_NAME}) was not found.\n"
        f"{_install_hint()}\n"
        f"${ENV_HARNESS_PATH} is not set. Searched:\n" + "\n".join(f"  {s}" for s in searched)
    )


def _other_cached_versions(root: Path) -> list[str]:
    """The versions `antigravity harness install --version` put under `root` besides the
    pinned one, newest first: used only when nothing else is found."""
    try:
        names = [entry.name for entry in os.scandir(root) if entry.name != HARNESS_VERSION]
    except OSError:
        return []
    found = [n for n in names if _VERSION_RE.match(n) and _is_executable(root / n / BINARY_NAME)]

    def order(version: str) -> list[tuple[int, str]]:
        return [(int(p), "") if p.isdigit() else (-1, p) for p in re.split(r"[.+!_-]", version)]

    return sorted(found, key=order, reverse=True)


def find_harness(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The `localharness` to run, by the discovery order in the module docstring.

    Raises `HarnessNotFoundError` (whose message says how to install the harness) when
    none is found, or when `explicit` / `$ANTIGRAVITY_HARNESS_PATH` names a missing or
    non-executable file.
    """
    return locate_harness(explicit).path


def harness_version(path: str | os.PathLike[str], *, by_hash: bool = False) -> str | None:
    """The version of the harness binary at `path`, or None if it cannot be told.

    Known from the SDK cache layout (`harness/<version>/localharness`) or from the
    metadata of the `google-antigravity` distribution the binary belongs to. With
    `by_hash=True`, also recognises known releases by SHA-256 (reads the whole ~128 MB
    file). The binary itself has no version flag.
    """
    p = Path(path)
    parent = p.parent
    if p.name == BINARY_NAME and parent.parent.name == "harness" and _VERSION_RE.match(parent.name):
        return parent.name
    version = _distribution_version(p) if p.exists() else None
    if version is None and by_hash and p.is_file():
        digest = hashlib.sha256()
        with p.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        version = _KNOWN_SHA256.get(_record_digest(digest.digest()))
    return version


def execute_only(path: Path) -> Path:
    """`path`, or a copy of it, that nobody can read, only execute: the kernel makes a
    process started from such a binary non-dumpable, so the commands a contained harness
    runs (same uid, same Landlock domain, no capabilities) cannot open its memory in
    /proc. The SDK's own install is made so in place; another binary is copied once into
    the SDK's cache (keyed by its path, size and time). Where neither can be done, `path`
    as it is (the containment then reports the harness's memory as readable)."""
    info = path.stat()
    if not info.st_mode & 0o444 or not _is_elf(path):  # a script's interpreter must read it
        return path
    root = default_cache_dir() / "harness"
    if root in path.parents and info.st_uid == os.getuid():
        with contextlib.suppress(OSError):
            os.chmod(path, 0o111)
            return path
    key = hashlib.sha256(f"{path.resolve()}\0{info.st_size}\0{info.st_mtime_ns}".encode())
    copy = root / "execute-only" / key.hexdigest()[:24] / BINARY_NAME
    if copy.exists():
        return copy
    try:
        copy.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{BINARY_NAME}-", dir=copy.parent)
        try:
            with os.fdopen(fd, "wb") as out, path.open("rb") as src:
                shutil.copyfileobj(src, out, 1 << 20)
            os.chmod(tmp, 0o111)
            os.replace(tmp, copy)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError:
        return path
    return copy


def _is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def _record_digest(digest: bytes) -> str:
    """A digest as wheel RECORD files write it: urlsafe base64, no padding."""
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


# --------------------------------------------------------------------------- install


class InstallProgress(Protocol):
    """What `install_harness` reports while it works (the command line shows a bar on a
    terminal, plain lines elsewhere): each step as it starts, and the download's bytes."""

    def step(self, message: str) -> None: ...

    def download(self, done: int, total: int | None) -> None: ...


class _Silent:
    def step(self, message: str) -> None:
        del message

    def download(self, done: int, total: int | None) -> None:
        del done, total


def install_harness(
    version: str = HARNESS_VERSION,
    cache_dir: str | os.PathLike[str] | None = None,
    *,
    wheel: str | os.PathLike[str] | None = None,
    force: bool = False,
    timeout: float = _PIP_TIMEOUT,
    progress: InstallProgress | None = None,
) -> Path:
    """Install the harness binary into the SDK cache and return its path.

    Asks pip which `google-antigravity==<version>` wheel fits this platform (a dry run
    with `--no-deps --only-binary=:all:`: pip's index settings apply) and downloads that
    URL itself, reporting the bytes to `progress` and checking the index's SHA-256; an
    older pip without `--report` downloads the wheel itself. Or it uses the local `wheel`
    given (whose file name must not say another version). Then it extracts only
    `google/antigravity/bin/localharness` (checked against the wheel's RECORD hash) and
    moves it into place atomically with mode 0755. All of it is bounded by `timeout`
    seconds. Idempotent: an installed binary is returned at once unless `force`.
    Raises `HarnessInstallError` (a `HarnessNotFoundError`) on failure.
    """
    target = cached_harness_path(version, cache_dir)
    if wheel is not None:
        named = wheel_version(wheel)
        if named is not None and named != version:
            raise HarnessInstallError(
                f"{Path(wheel).name} is {DISTRIBUTION} {named}, not {version}: "
                f"install it as version {named}"
            )
    if not force and _is_executable(target):
        return target
    shown = progress or _Silent()
    target.parent.mkdir(parents=True, exist_ok=True)
    if wheel is not None:
        shown.step(f"extracting the harness from {Path(wheel).name}")
        _extract_binary(Path(wheel), target)
        return target
    with tempfile.TemporaryDirectory(prefix="antigravity-harness-") as tmp:
        downloaded = _download_wheel(version, Path(tmp), timeout, shown)
        shown.step(f"extracting the harness (about 130 MB) into {target.parent}")
        _extract_binary(downloaded, target)
    return target


def _pip(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run this interpreter's pip, bounded; a missing pip or a timeout is a clear error
    that offers `--wheel` (the download can then be done by hand)."""
    requirement = args[-1]
    try:
        result = subprocess.run(
            [sys.executable, "-m", "pip", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise HarnessInstallError(
            f"Downloading {requirement} timed out after {timeout:.0f}s.\n"
            f"Retry, or download the wheel yourself and run: "
            f"antigravity harness install --wheel FILE"
        ) from None
    except OSError as err:
        raise HarnessInstallError(f"Could not run pip ({sys.executable}): {err}") from None
    if result.returncode != 0 and "No module named pip" in result.stderr:
        raise HarnessInstallError(
            f"pip is not installed for {sys.executable}, and the harness is downloaded "
            "with it. Install pip (python -m ensurepip), or download the "
            f"{requirement} wheel for this platform yourself and run: "
            "antigravity harness install --wheel FILE"
        )
    return result


def _pip_failed(requirement: str, result: subprocess.CompletedProcess[str]) -> HarnessInstallError:
    tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
    return HarnessInstallError(
        f"pip could not get {requirement} (exit {result.returncode}).\n"
        f"The harness wheels are published for Linux x86-64.\n"
        f"--- pip output (last lines) ---\n{tail}"
    )


_PIP_OPTIONS = ["--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "--no-input"]


def _download_wheel(version: str, dest: Path, timeout: float, progress: InstallProgress) -> Path:
    """The wheel of `version` for this platform, downloaded into `dest` (see
    `install_harness`)."""
    requirement = f"{DISTRIBUTION}=={version}"
    deadline = time.monotonic() + timeout
    progress.step(f"asking pip for the {requirement} wheel for this platform")
    report = dest / "report.json"
    dry_run = ["install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report)]
    result = _pip([*dry_run, *_PIP_OPTIONS, requirement], timeout)
    if result.returncode != 0 and "no such option" in result.stderr:  # pip < 22.2
        progress.step(f"downloading {requirement} (about 44 MB) with pip")
        return _pip_download(requirement, dest, max(deadline - time.monotonic(), 1.0))
    if result.returncode != 0:
        raise _pip_failed(requirement, result)
    url, sha256 = _report_url(report, requirement)
    if url.startswith("file:"):
        return Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path))
    name = Path(urllib.parse.unquote(urllib.parse.urlsplit(url).path)).name
    if not name.endswith(".whl"):
        raise HarnessInstallError(f"pip chose {url} for {requirement}, which is not a wheel")
    progress.step(f"downloading {name}")
    wheel = dest / name
    _fetch(url, wheel, deadline, progress)
    if sha256 is not None:
        digest = hashlib.sha256()
        with wheel.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        if digest.hexdigest() != sha256.lower():
            raise HarnessInstallError(
                f"{name} does not match the SHA-256 the package index gives for it"
            )
    return wheel


def _report_url(report: Path, requirement: str) -> tuple[str, str | None]:
    """The wheel's URL and SHA-256 (if the index gave one) from pip's installation report."""
    try:
        data = json.loads(report.read_text(encoding="utf-8"))
        info = data["install"][0]["download_info"]
        url = info["url"]
        hashes = info.get("archive_info", {}).get("hashes", {})
    except (OSError, ValueError, LookupError, TypeError, AttributeError) as exc:
        raise HarnessInstallError(
            f"pip's report does not say where {requirement} is ({exc!r})"
        ) from None
    if not isinstance(url, str) or not isinstance(hashes, dict):
        raise HarnessInstallError(f"pip's report does not say where {requirement} is")
    sha256 = hashes.get("sha256")
    return url, sha256 if isinstance(sha256, str) else None


_READ_TIMEOUT = 30.0


def _fetch(url: str, path: Path, deadline: float, progress: InstallProgress) -> None:
    """Stream `url` into `path`, reporting the bytes; each read bounded, the whole by
    `deadline` (a `time.monotonic()` value)."""
    try:
        with (
            urllib.request.urlopen(url, timeout=_READ_TIMEOUT) as response,
            path.open("wb") as out,
        ):
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            done = 0
            progress.download(done, total)
            while chunk := response.read(1 << 16):
                out.write(chunk)
                done += len(chunk)
                progress.download(done, total)
                if time.monotonic() > deadline:
                    raise HarnessInstallError(
                        f"Downloading {url} did not finish in time.\n"
                        "Retry, or download the wheel yourself and run: "
                        "antigravity harness install --wheel FILE"
                    )
    except (OSError, ValueError) as err:  # URLError, HTTPError, timeouts are OSErrors
        raise HarnessInstallError(f"Could not download {url}: {err}") from None
    if total is not None and done != total:
        raise HarnessInstallError(f"Downloading {url} stopped at {done} of {total} bytes")


def _pip_download(requirement: str, dest: Path, timeout: float) -> Path:
    """`pip download` the wheel into `dest`: for a pip too old to report what it would
    install (no progress then)."""
    result = _pip(["download", *_PIP_OPTIONS, "-d", str(dest), requirement], timeout)
    if result.returncode != 0:
        raise _pip_failed(requirement, result)
    wheels = sorted(dest.glob("*.whl"))
    if len(wheels) != 1:
        found = ", ".join(w.name for w in wheels) or "nothing"
        raise HarnessInstallError(f"pip download {requirement} produced {found}, not one wheel")
    return wheels[0]


def _expected_digest(archive: zipfile.ZipFile) -> str | None:
    """The sha256 RECORD lists for the binary, if the wheel has a RECORD."""
    records = [n for n in archive.namelist() if n.endswith(".dist-info/RECORD")]
    if len(records) != 1:
        return None
    with archive.open(records[0]) as raw:
        for row in csv.reader(io.TextIOWrapper(raw, encoding="utf-8")):
            if len(row) >= 2 and row[0] == _WHEEL_MEMBER and row[1].startswith("sha256="):
                return row[1][len("sha256=") :]
    return None


def _extract_binary(wheel: Path, target: Path) -> None:
    """Stream `_WHEEL_MEMBER` out of `wheel` into `target`, atomically: mode 0111 for a
    compiled binary (execute only: see `execute_only`), 0755 for a script."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            try:
                info = archive.getinfo(_WHEEL_MEMBER)
            except KeyError:
                raise HarnessInstallError(
                    f"{wheel.name} does not contain {_WHEEL_MEMBER} "
                    f"(not a {DISTRIBUTION} wheel for this platform?)"
                ) from None
            expected = _expected_digest(archive)
            fd, tmp_name = tempfile.mkstemp(prefix=f".{BINARY_NAME}-", dir=target.parent)
            tmp = Path(tmp_name)
            try:
                digest = hashlib.sha256()
                with os.fdopen(fd, "wb") as out, archive.open(info) as src:
                    for chunk in iter(lambda: src.read(1 << 20), b""):
                        digest.update(chunk)
                        out.write(chunk)
                    out.flush()
                    os.fsync(out.fileno())
                if expected is not None and _record_digest(digest.digest()) != expected:
                    raise HarnessInstallError(
                        f"{_WHEEL_MEMBER} in {wheel.name} does not match the wheel's RECORD hash"
                    )
                os.chmod(tmp, 0o111 if _is_elf(tmp) else 0o755)
                os.replace(tmp, target)
            except BaseException:
                with contextlib.suppress(OSError):
                    tmp.unlink()
                raise
    except (OSError, zipfile.BadZipFile) as err:
        raise HarnessInstallError(f"Could not extract the harness from {wheel}: {err}") from None
