"""A newcomer's first hour on the command line (issue 11): each test runs the REAL
`antigravity` entry point in a subprocess and checks the exit code, what goes to stdout
and what to stderr, and the message. Tests marked `harness` need `localharness`."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import http.server
import io
import os
import re
import socket
import subprocess
import sys
import threading
import time
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import cli_env

from antigravity_sdk import Agent, Hook, HookResult, ToolCall, policy
from antigravity_sdk.cli.progress import LineProgress, interactive
from antigravity_sdk.cli.report import DemoReport, make_console, print_footer
from antigravity_sdk.errors import HarnessInstallError, HarnessNotFoundError, TurnFailedError
from antigravity_sdk.harness import install
from antigravity_sdk.harness.install import HARNESS_VERSION, find_harness
from antigravity_sdk.testing import ScriptedModel, http_error, tool_call

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = str(ROOT / "examples" / "policies.toml")
NO_DISTRIBUTION = (
    "import sys; from antigravity_sdk.harness import install; "
    "install._distribution_binary = lambda: None; "
    "from antigravity_sdk.cli import main; sys.exit(main(sys.argv[1:]))"
)
"""The console script, except that the google-antigravity installed in the test venv is
not found (so the SDK cache decides, as on a machine without it)."""


_env = cli_env


def run_cli(
    *args: str, env: dict[str, str] | None = None, hide_distribution: bool = False, **kw: Any
) -> subprocess.CompletedProcess[str]:
    entry = ["-c", NO_DISTRIBUTION] if hide_distribution else ["-m", "antigravity_sdk"]
    return subprocess.run(
        [sys.executable, *entry, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env or _env(),
        stdin=subprocess.DEVNULL,
        **kw,
    )


async def run_cli_async(*args: str, cwd: Path) -> tuple[int, str, str, float]:
    """The CLI while this event loop serves a ScriptedModel: (code, stdout, stderr, seconds)."""
    began = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "antigravity_sdk",
        *args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
        cwd=cwd,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 120)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode(), time.monotonic() - began


def _require_harness() -> Path:
    try:
        return find_harness()
    except HarnessNotFoundError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the harness tests: {exc}")
        pytest.skip(f"no localharness: {exc}")


# -- 5. CLI edges ---------------------------------------------------------------------------------


def test_version_flag() -> None:
    from antigravity_sdk import __version__

    proc = run_cli("--version")
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout.strip() == f"antigravity-sdk {__version__}"


def test_install_version_with_a_v_is_a_clear_usage_error(tmp_path: Path) -> None:
    proc = run_cli(
        "harness", "install", "--version", "v0.1.21", env=_env(ANTIGRAVITY_CACHE_DIR=str(tmp_path))
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert "Traceback" not in proc.stderr
    assert "not a version number: 'v0.1.21' (write it without the 'v': 0.1.21)" in proc.stderr
    assert not (tmp_path / "harness").exists()


def _wheel(path: Path, binary: bytes) -> Path:
    digest = base64.urlsafe_b64encode(hashlib.sha256(binary).digest()).rstrip(b"=").decode()
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("google/antigravity/__init__.py", "")
        zf.writestr("google/antigravity/bin/localharness", binary)
        info = path.name.split("-")[1]
        zf.writestr(
            f"google_antigravity-{info}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: google-antigravity\nVersion: {info}\n",
        )
        zf.writestr(
            f"google_antigravity-{info}.dist-info/WHEEL",
            "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        zf.writestr(
            f"google_antigravity-{info}.dist-info/RECORD",
            f"google/antigravity/bin/localharness,sha256={digest},{len(binary)}\n",
        )
    return path


@pytest.mark.harness
def test_wheel_flag_then_path_and_doctor_find_the_other_version(tmp_path: Path) -> None:
    """`harness install --wheel FILE` (the flag the timeout message offers) installs the
    version the wheel's name says; `harness path` and `doctor` then find it instead of
    saying "not found", and doctor warns that it is not the tested version."""
    real = _require_harness()
    body = f'#!/bin/sh\nexec "{real}" "$@"\n'.encode()
    wheel = _wheel(tmp_path / "google_antigravity-0.1.21-py3-none-any.whl", body)
    env = _env(
        ANTIGRAVITY_CACHE_DIR=str(tmp_path / "cache"),
        ANTIGRAVITY_HARNESS_PATH=None,
        PATH="/usr/bin:/bin",
        XDG_CACHE_HOME=None,
    )
    installed = tmp_path / "cache" / "harness" / "0.1.21" / "localharness"
    proc = run_cli("harness", "install", "--wheel", str(wheel), env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{installed}\n"
    assert f"tested with harness {HARNESS_VERSION}" in proc.stderr
    proc = run_cli("harness", "path", env=env, hide_distribution=True)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"{installed}\n", "")
    proc = run_cli("doctor", env=env, hide_distribution=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"[ OK ] harness: {installed} (from cache, version 0.1.21)" in proc.stdout
    assert f"[WARN] the SDK is tested with harness {HARNESS_VERSION}" in proc.stdout
    assert "[ OK ] harness starts" in proc.stdout


def test_install_without_pip_says_so_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv.EnvBuilder(with_pip=False).create(tmp_path / "nopip")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "nopip" / "bin" / "python"))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    with pytest.raises(HarnessInstallError) as info:
        install.install_harness("0.1.99", tmp_path / "cache")
    message = str(info.value)
    assert message.startswith(f"pip is not installed for {sys.executable}")
    assert "ensurepip" in message and "--wheel FILE" in message
    assert "Linux x86-64" not in message


# -- 3. progress of the harness download ----------------------------------------------------------


@pytest.fixture
def index(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A package index on loopback (a find-links page) serving a 3 MB fake wheel whose
    link carries its SHA-256: (the page's URL, the wheel)."""
    served = tmp_path / "index"
    served.mkdir()
    wheel = _wheel(served / "google_antigravity-0.1.99-py3-none-any.whl", os.urandom(3_000_000))
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (served / "index.html").write_text(
        f'<html><body><a href="{wheel.name}#sha256={digest}">{wheel.name}</a></body></html>'
    )

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(served), **kwargs)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", wheel
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _index_env(url: str, cache: Path, **extra: str | None) -> dict[str, str]:
    return _env(
        ANTIGRAVITY_CACHE_DIR=str(cache),
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=url,
        PIP_NO_CACHE_DIR="1",
        PIP_CONFIG_FILE=os.devnull,
        **extra,
    )


def test_download_outside_a_terminal_prints_plain_steps(
    index: tuple[str, Path], tmp_path: Path
) -> None:
    url, wheel = index
    env = _index_env(url, tmp_path / "cache", CI=None)
    proc = run_cli("harness", "install", "--version", "0.1.99", env=env)
    installed = tmp_path / "cache" / "harness" / "0.1.99" / "localharness"
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{installed}\n"  # stdout: the result only
    lines = proc.stderr.splitlines()
    assert lines[0] == "==> asking pip for the google-antigravity==0.1.99 wheel for this platform"
    assert f"==> downloading {wheel.name}" in lines
    assert "    3.0 MB" in lines
    assert any(line.startswith("    downloaded 3.0 MB in ") for line in lines), lines
    assert any(line.startswith("==> extracting the harness") for line in lines), lines
    assert "\r" not in proc.stderr and "\x1b" not in proc.stderr  # no bar redraws in a log
    with zipfile.ZipFile(wheel) as zf:
        assert installed.read_bytes() == zf.read("google/antigravity/bin/localharness")


def test_download_hash_mismatch_is_refused(
    index: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index's SHA-256 is checked on what was downloaded: a wheel swapped on the
    way (here: after pip resolved it) is refused, and nothing is installed."""
    url, wheel = index
    for key, value in _index_env(url, tmp_path / "cache").items():
        monkeypatch.setenv(key, value)
    real_pip = install._pip

    def pip_then_swap(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        result = real_pip(args, timeout)
        wheel.write_bytes(wheel.read_bytes()[:-1] + b"!")
        return result

    monkeypatch.setattr(install, "_pip", pip_then_swap)
    with pytest.raises(HarnessInstallError, match="does not match the SHA-256"):
        install.install_harness("0.1.99")
    assert not (tmp_path / "cache" / "harness" / "0.1.99" / "localharness").exists()


def _pty_install(url: str, cache: Path, **extra: str | None) -> str:
    pexpect = pytest.importorskip("pexpect")
    child = pexpect.spawn(
        sys.executable,
        ["-m", "antigravity_sdk", "harness", "install", "--version", "0.1.99"],
        env=_index_env(url, cache, TERM="xterm", COLUMNS="100", **extra),
        encoding="utf-8",
        timeout=120,
    )
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    return str(child.before)


def test_download_on_a_terminal_shows_a_bar_with_bytes_and_rate(
    index: tuple[str, Path], tmp_path: Path
) -> None:
    url, _ = index
    shown = _pty_install(url, tmp_path / "cache", CI=None)
    assert "/3.0 MB" in shown, shown  # done/total
    # the rate, in whatever unit the speed of this machine's loopback gives it
    assert re.search(r"\d ?(bytes|[kMGTP]B)/s", shown), shown
    assert "━" in shown


def test_download_in_ci_stays_plain_even_on_a_terminal(
    index: tuple[str, Path], tmp_path: Path
) -> None:
    url, _ = index
    shown = _pty_install(url, tmp_path / "cache", CI="true")
    assert "━" not in shown and "==> downloading" in shown and "downloaded 3.0 MB" in shown


def test_interactive_needs_a_tty_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("CI", raising=False)
    assert interactive(Tty()) and not interactive(io.StringIO())
    for value, plain in (("true", True), ("1", True), ("false", False), ("0", False)):
        monkeypatch.setenv("CI", value)
        assert interactive(Tty()) is not plain
    stream = io.StringIO()
    progress = LineProgress(stream)
    progress.step("a")
    progress.close()  # no download: no rate line
    assert stream.getvalue() == "==> a\n"


# -- 1, 4 and 2: antigravity chat -----------------------------------------------------------------


def test_chat_reports_a_missing_policy_file_before_the_model(tmp_path: Path) -> None:
    proc = run_cli("chat", "hi", "--policies", str(tmp_path / "missing.toml"))
    assert proc.returncode == 2 and proc.stdout == ""
    assert "missing.toml: cannot read the file" in proc.stderr
    assert "model" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "says", "never"),
    [
        ((), "no model configured", "is a Gemini model"),
        (("--model", "qwen3"), "model 'qwen3' needs the base_url", "is a Gemini model"),
        (("--model", "gemini-3.8-flash"), "'gemini-3.8-flash' is a Gemini model", "no model"),
    ],
)
def test_chat_model_errors_go_to_stderr_and_fit_the_model(
    args: tuple[str, ...], says: str, never: str
) -> None:
    proc = run_cli("chat", "hi", *args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(f"error: {says}") or f"error: model {says}" in proc.stderr, (
        proc.stderr
    )
    assert says in proc.stderr and never not in proc.stderr
    assert "on the command line: set GEMINI_API_KEY, or pass --base-url" in proc.stderr


@pytest.mark.harness
async def test_readme_chat_with_the_example_policy_file(tmp_path: Path) -> None:
    """The README's `antigravity chat "..." --policies examples/policies.toml`: the file's
    `db/...` rules are checked against its own `mcp_servers`; the answer on stdout."""
    _require_harness()
    script = [tool_call("run_command", CommandLine="sudo ls", Cwd=str(tmp_path)), "refused."]
    async with ScriptedModel(script) as model:
        code, out, err, _ = await run_cli_async(
            "chat",
            "list the files",
            "--policies",
            EXAMPLE,
            "--base-url",
            model.base_url,
            "--model",
            model.model_name,
            cwd=tmp_path,
        )
    assert code == 0, out + err
    assert err == "" and "answer:" in out and "refused." in out
    line = next(line for line in out.splitlines() if "sudo ls" in line)
    assert "DENY" in line and "no-sudo" in line


@pytest.mark.harness
@pytest.mark.parametrize("failure", ["http_error", "dead_port"])
async def test_chat_model_failure_is_reported_on_stderr_quickly(
    tmp_path: Path, failure: str
) -> None:
    """The harness's error reaches stderr as it happens (a WARNING line), then a clear
    final error and exit 1, within seconds; stdout keeps only the header."""
    _require_harness()
    if failure == "http_error":
        async with ScriptedModel([http_error(500, "the model is down")]) as model:
            code, out, err, seconds = await run_cli_async(
                "chat", "hi", "--base-url", model.base_url, "--model", "m", cwd=tmp_path
            )
    else:
        with socket.socket() as probe:  # a loopback port nothing listens on
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        base = f"http://127.0.0.1:{port}/v1"
        code, out, err, seconds = await run_cli_async(
            "chat", "hi", "--base-url", base, "--model", "m", cwd=tmp_path
        )
    assert code == 1, out + err
    assert seconds < 60
    assert "WARNING: the harness reports an error" in err
    assert "error: the turn failed:" in err
    assert err.index("WARNING") < err.index("error: the turn failed")
    assert "error" not in out and out.startswith("model: m at ")


# -- 7. policies ----------------------------------------------------------------------------------


def test_policy_errors_name_the_rule_as_the_file_does(tmp_path: Path) -> None:
    """Rule #1 expands into many policies; an error in rule #3 still says rule #3."""
    bad = tmp_path / "p.toml"
    bad.write_text(
        'mcp_servers = ["db"]\n'
        '[[rule]]\nworkspace_only = "."\n'
        '[[rule]]\nname = "db"\ntool = "db/*"\ndecision = "allow"\n'
        '[[rule]]\nname = "typo"\ntool = "veiw_file"\ndecision = "allow"\n'
    )
    proc = run_cli("policy", "check", str(bad))
    assert proc.returncode == 2 and proc.stdout == ""
    assert f"{bad}: rule #3 ('typo'): no tool is called 'veiw_file'" in proc.stderr
    assert "did you mean 'view_file'?" in proc.stderr
    assert "policy #" not in proc.stderr


def test_file_rules_keep_their_origin_in_python_errors(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        'mcp_servers = ["db"]\n[[rule]]\nname = "db"\ntool = "db/*"\ndecision = "allow"\n'
    )
    rules = policy.load(path)
    with pytest.raises(Exception, match=r"rule #1 \('db'\): MCP pattern .*rules\.mcp_servers"):
        policy.enforce(list(rules))
    assert policy.enforce(rules, rules.mcp_servers).policies == tuple(rules)
    with pytest.raises(
        Exception, match=r"^policy #2 \('x'\): MCP pattern .*mcp_servers=\[\.\.\.\]"
    ):
        policy.enforce([policy.allow("view_file"), policy.allow("db/x", name="x")])


def test_empty_policy_file_says_everything_is_allowed(tmp_path: Path) -> None:
    empty = tmp_path / "empty.toml"
    empty.write_text("# nothing yet\n")
    proc = run_cli("policy", "check", str(empty))
    assert proc.returncode == 0 and proc.stderr == ""
    assert (
        proc.stdout == f"{empty}: OK, but it has no rules: on its own it allows every tool call\n"
    )


def test_a_sync_hook_method_fails_at_hook_not_at_start() -> None:
    class Sync(Hook):
        def pre_tool_call(self, call: ToolCall) -> HookResult:  # type: ignore[override]
            return HookResult.ALLOWED

    with pytest.raises(TypeError, match=r"Sync\.pre_tool_call must be defined with 'async def'"):
        Agent.builder().hook(Sync())
    with pytest.raises(TypeError, match="expected a Hook instance"):
        Agent.builder().hooks([object()])  # type: ignore[list-item]


# -- 4. the demo's error line ---------------------------------------------------------------------


def test_demo_error_is_not_prefixed_twice() -> None:
    out = io.StringIO()
    report = DemoReport(error=str(TurnFailedError("model unreachable")))
    print_footer(make_console(out, color=False), report)
    assert out.getvalue().count("the turn failed") == 1
    assert "error: the turn failed: model unreachable" in out.getvalue()


# -- 8. conversations and the venv ----------------------------------------------------------------


def test_conversations_list_and_clean(tmp_path: Path) -> None:
    save = tmp_path / "save"
    save.mkdir()
    old, new = "a" * 32, "b" * 32
    for cid, age_days in ((old, 10), (new, 0)):
        db = save / f"{cid}.db"
        db.write_bytes(b"x" * 2048)
        stamp = time.time() - age_days * 86400
        os.utime(db, (stamp, stamp))
    (save / f"{old}.db-journal").write_bytes(b"j")
    (save / "notes.txt").write_text("not a conversation")

    proc = run_cli("conversations", "list", "--dir", str(save))
    assert proc.returncode == 0 and proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert lines[0] == f"2 saved in {save} (most recent first):"
    assert lines[1].split()[0] == new and lines[2].split()[0] == old
    assert "2 KB" in lines[1]

    proc = run_cli("conversations", "clean", "--dir", str(save), "--older-than", "7")
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout == f"removed 1 conversation(s) from {save}; 1 kept\n"
    assert sorted(p.name for p in save.iterdir()) == [f"{new}.db", "notes.txt"]

    proc = run_cli("conversations", "clean", "--dir", str(save), "--older-than", "-1")
    assert proc.returncode == 2 and "expected a finite number of days >= 0" in proc.stderr
    proc = run_cli("conversations", "clean", "--dir", str(save))
    assert proc.returncode == 0 and sorted(p.name for p in save.iterdir()) == ["notes.txt"]
    proc = run_cli("conversations", "list", "--dir", str(tmp_path / "none"))
    assert (
        proc.returncode == 0 and proc.stdout == f"no saved conversations in {tmp_path / 'none'}\n"
    )


def test_venv_script_refuses_an_old_python_at_once(tmp_path: Path) -> None:
    """`make demo PYTHON=python3.10`: refused before pip runs, and no venv is made."""
    fake = tmp_path / "python3.10"
    fake.write_text('#!/bin/sh\necho "3.10"\n')
    fake.chmod(0o755)
    began = time.monotonic()
    proc = subprocess.run(
        ["scripts/venv.sh", str(fake), str(tmp_path / "venv"), "dev"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert f"{fake} is Python 3.10; antigravity-sdk needs Python 3.11 or newer" in proc.stderr
    assert time.monotonic() - began < 5
    assert not (tmp_path / "venv").exists()
