"""`antigravity demo` / `antigravity chat` (antigravity_sdk.cli) against the REAL harness.

The demo tests need `localharness` (found by `find_harness()`); without it they are
skipped locally and FAIL under CI (env `CI` set). The run_chat error-path tests need no
harness: they fail before one would be started.
"""

from __future__ import annotations

import asyncio
import io
import os
import re
from pathlib import Path

import pytest

from antigravity_sdk.cli.chat import run_chat
from antigravity_sdk.cli.demo import NOTES_TEXT, demo_policies, demo_session, run_demo
from antigravity_sdk.cli.report import DemoReport
from antigravity_sdk.errors import HarnessNotFoundError
from antigravity_sdk.harness.install import find_harness
from antigravity_sdk.policy import enforce
from antigravity_sdk.testing import ScriptedModel, tool_call
from antigravity_sdk.types import ToolCall

ANSI = re.compile(r"\x1b\[")
EXAMPLE = str(Path(__file__).resolve().parent.parent / "examples" / "policies.toml")


def _require_harness() -> Path:
    try:
        return find_harness()
    except HarnessNotFoundError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the harness tests: {exc}")
        pytest.skip(f"no localharness: {exc}")


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No real model may be picked up from the environment."""
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)


# -- the scripted session, structurally ------------------------------------------------------


@pytest.fixture(scope="module")
def report() -> DemoReport:
    """One scripted demo session, shared by the structural tests (its own event loop)."""
    _require_harness()
    return asyncio.run(demo_session(scripted=True))


@pytest.mark.harness
class TestDemoSession:
    def test_completes_without_error(self, report: DemoReport) -> None:
        assert report.error == ""
        assert report.scripted
        assert len(report.records) == 7
        assert report.ok, report.checks

    def test_rm_rf_denied_by_destructive_rule(self, report: DemoReport) -> None:
        r = report.find("run_command", "rm -rf")
        assert (r.allow, r.verdict, r.rule, r.bucket) == (False, "DENY", "no-destructive-shell", 0)
        assert r.ran is False
        assert "build/app.bin" in report.workspace_files  # rm -rf did not run

    def test_etc_passwd_denied_by_workspace_rule(self, report: DemoReport) -> None:
        r = report.find("view_file", "/etc/passwd")
        assert (r.allow, r.rule, r.bucket, r.bucket_name) == (
            False,
            "workspace_only",
            0,
            "specific deny",
        )
        assert r.ran is False

    def test_dotdot_escape_denied_and_not_written(self, report: DemoReport) -> None:
        r = report.find("write_to_file", "../escaped.txt")
        assert (r.allow, r.rule, r.ran) == (False, "workspace_only", False)
        assert "escaped.txt" not in report.outside_files

    def test_write_allowed_and_file_exists(self, report: DemoReport) -> None:
        r = report.find("write_to_file", "notes.txt")
        assert (r.allow, r.rule, r.bucket, r.ran) == (True, "allow_all", 8, True)
        assert report.workspace_files["notes.txt"] == NOTES_TEXT

    def test_read_and_safe_command_ran(self, report: DemoReport) -> None:
        read = report.find("view_file", "README.md")
        assert (read.allow, read.ran) == (True, True)
        cat = report.find("run_command", "cat notes.txt")
        assert (cat.allow, cat.rule, cat.bucket, cat.ran) == (True, "safe-shell", 2, True)
        assert "exit 0" in cat.outcome

    def test_hook_denial_is_reported(self, report: DemoReport) -> None:
        r = report.find("write_to_file", "/.env")
        assert (r.allow, r.decided_by, r.rule, r.bucket) == (False, "hook", "SecretGuard", None)
        assert ".env" not in report.workspace_files

    def test_summary_numbers(self, report: DemoReport) -> None:
        assert (len(report.allowed), len(report.denied)) == (3, 4)
        assert report.rule_counts()["workspace_only"] == 2
        assert all(r.latency_ns > 0 for r in report.records)
        assert report.median_latency_us() > 0
        assert report.turn_seconds > 0 and report.start_seconds > 0
        events = [e["event"] for e in report.audit_events]
        assert events[0] == "session_start" and "turn_end" in events

    def test_answer_reflects_what_happened(self, report: DemoReport) -> None:
        assert "refused (policy 'no-destructive-shell')" in report.answer
        assert "refused (hook 'SecretGuard')" in report.answer
        assert "write notes.txt: done" in report.answer


# -- the printed transcript -------------------------------------------------------------------


@pytest.mark.harness
async def test_run_demo_transcript(offline: None, monkeypatch: pytest.MonkeyPatch) -> None:
    _require_harness()
    monkeypatch.setenv("COLUMNS", "140")  # wide enough for each bucket's name
    out = io.StringIO()
    code = await run_demo(out=out)
    text = out.getvalue()
    assert code == 0, text
    assert not ANSI.search(text)  # not a TTY: no colours
    lines = text.splitlines()

    def line_of(needle: str) -> str:
        return next(
            line for line in lines if needle in line and ("ALLOW" in line or "DENY" in line)
        )

    rm = line_of("$ rm -rf build")
    assert "DENY" in rm and "[0 specific deny]" in rm and "no-destructive-shell" in rm
    assert re.search(r"\d+\.\d µs", rm)
    passwd = line_of("/etc/passwd")
    assert "DENY" in passwd and "workspace_only" in passwd
    write = line_of("<ws>/notes.txt")
    assert "ALLOW" in write and "[8 * allow]" in write and "allow_all" in write
    assert "ALLOW" in line_of("$ cat notes.txt")
    assert "[hook]" in line_of("<ws>/.env") and "SecretGuard" in line_of("<ws>/.env")
    assert "↳ ran: exit 0" in text
    assert "model's answer:" in text and "Summary of the session" in text
    assert re.search(r"tool calls\s+7", text) and re.search(r"denied\s+4", text)
    assert "median time to decide" in text and "turn wall time" in text
    assert "checks: 7/7 as expected" in text
    head = next(line for line in lines if "arguments" in line)
    assert head.rstrip().endswith("decided in") and "latency" not in head


@pytest.mark.harness
async def test_deny_reasons_are_whole_at_any_width(
    offline: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A narrow terminal wraps a deny reason; it never cuts it."""
    _require_harness()
    monkeypatch.setenv("COLUMNS", "60")
    out = io.StringIO()
    assert await run_demo(out=out) == 0, out.getvalue()
    flat = " ".join(out.getvalue().split())
    assert (
        "not run: Denied by policy 'no-destructive-shell': destructive shell commands "
        "(rm -r/-f, sudo, mkfs, dd, shred) are never run." in flat
    )
    assert (
        "not run: Denied by hook 'SecretGuard': the content looks like a credential; "
        "secrets are never written to disk by the agent." in flat
    )
    assert all(len(line) <= 60 for line in out.getvalue().splitlines())


async def test_run_demo_missing_harness_exits_2(offline: None, tmp_path: Path) -> None:
    out = io.StringIO()
    code = await run_demo(out=out, harness_path=str(tmp_path / "no-such-localharness"))
    assert code == 2
    assert "error:" in out.getvalue() and "no-such-localharness" in out.getvalue()


# -- run_chat without a model -----------------------------------------------------------------


async def test_run_chat_without_model_exits_2(offline: None) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = await run_chat("hello", out=out, err=err)
    assert code == 2 and out.getvalue() == ""
    message = err.getvalue()
    assert "no model configured" in message and "GEMINI_API_KEY" in message
    assert "--base-url" in message


async def test_run_chat_base_url_needs_model(offline: None) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert await run_chat("hi", base_url="http://127.0.0.1:1/v1", out=out, err=err) == 2
    assert "--model" in err.getvalue() and out.getvalue() == ""


async def test_run_chat_gemini_model_needs_key(offline: None) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert await run_chat("hi", model="gemini-2.5-flash", out=out, err=err) == 2
    assert "GEMINI_API_KEY" in err.getvalue() and out.getvalue() == ""


# -- run_chat with a policy file, on the real harness ---------------------------------------------


@pytest.mark.harness
async def test_run_chat_with_a_policy_file_that_names_mcp_servers(
    offline: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """examples/policies.toml declares `mcp_servers = ["db"]` and has `db/...` rules; the
    chat agent has no MCP servers, so the file's declaration is what they are checked on."""
    _require_harness()
    monkeypatch.chdir(tmp_path)
    script = [tool_call("run_command", CommandLine="sudo ls", Cwd=str(tmp_path)), "refused."]
    out = io.StringIO()
    async with ScriptedModel(script) as model:
        code = await run_chat(
            "list the files",
            policies_file=EXAMPLE,
            base_url=model.base_url,
            model=model.model_name,
            out=out,
        )
        told = [str(m.get("content")) for m in model.requests[-1].messages if m["role"] == "tool"]
    text = out.getvalue()
    assert code == 0, text
    assert "error" not in text and "answer:" in text and "refused." in text
    line = next(line for line in text.splitlines() if "sudo ls" in line)
    assert "DENY" in line and "no-sudo" in line
    assert any("Commands may not escalate privileges." in t for t in told), told


# -- the demo's policy set, without a harness ---------------------------------------------------


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("rm -rf build", "no-destructive-shell"),
        ("rm -r x", "no-destructive-shell"),
        ("ls; rm -f x", "no-destructive-shell"),
        ("sudo ls", "no-destructive-shell"),
        ("/bin/rm -fr x", "no-destructive-shell"),
        ("\\rm --recursive x", "no-destructive-shell"),
        ('r""m -rf x', "no-destructive-shell"),
        ('bash -c "sudo ls"', "no-destructive-shell"),
        ("find . -delete", "no-destructive-shell"),
        ("$CMD x", "no-destructive-shell"),  # cannot be checked: denied
        ("cat notes.txt", "safe-shell"),
        ("ls -la", "safe-shell"),
        ("ls | grep x && wc -l notes.txt", "safe-shell"),
        ("cat /etc/passwd", "workspace_only"),
        ("cat ../x", "workspace_only"),
        ("cat a > /tmp/b", "workspace_only"),
        ("python -c 1", "shell-not-allow-listed"),
        ("rmdir build", "shell-not-allow-listed"),
        ("ls; curl x", "shell-not-allow-listed"),
    ],
)
async def test_demo_shell_rules(command: str, rule: str, tmp_path: Path) -> None:
    """The demo's command rules: destructive commands in any spelling and lines that cannot
    be checked are denied, the read-only allow-list holds only when every command is on it,
    and workspace_only checks the paths the line names."""
    enforcer = enforce(demo_policies(str(tmp_path)))
    call = ToolCall(name="run_command", args={"CommandLine": command, "Cwd": str(tmp_path)})
    decision = await enforcer.evaluate(call, ask=False)
    assert decision.policy is not None, command
    assert (decision.policy.label, decision.allow) == (rule, rule == "safe-shell"), command


async def test_demo_policies_decide_like_the_transcript(tmp_path: Path) -> None:
    ws = str(tmp_path)
    enforcer = enforce(demo_policies(ws))

    async def decide(name: str, **args: object) -> tuple[bool, str]:
        d = await enforcer.evaluate(ToolCall(name=name, args=args), ask=False)
        return d.allow, d.policy.label if d.policy else ""

    assert await decide("run_command", CommandLine="rm -rf /", Cwd=ws) == (
        False,
        "no-destructive-shell",
    )
    assert await decide("run_command", CommandLine="curl x", Cwd=ws) == (
        False,
        "shell-not-allow-listed",
    )
    assert await decide("run_command", CommandLine="ls", Cwd="/") == (False, "workspace_only")
    assert await decide("run_command", CommandLine="ls", Cwd=ws) == (True, "safe-shell")
    assert await decide("view_file", AbsolutePath=f"{ws}/../x") == (False, "workspace_only")
    assert await decide("view_file", AbsolutePath=f"{ws}/x") == (True, "allow_all")


@pytest.mark.harness
async def test_run_chat_default_policies(
    offline: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a policy file: the shared no-destructive-shell rule, then every other shell
    command asks the terminal (denied here: stdin is not a TTY)."""
    _require_harness()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    (tmp_path / "keep").mkdir()
    script = [
        tool_call("run_command", CommandLine="rm -rf keep", Cwd=str(tmp_path)),
        tool_call("run_command", CommandLine="ls", Cwd=str(tmp_path)),
        "done.",
    ]
    out = io.StringIO()
    async with ScriptedModel(script) as model:
        code = await run_chat("clean up", base_url=model.base_url, model=model.model_name, out=out)
        told = [str(m.get("content")) for m in model.requests[-1].messages if m["role"] == "tool"]
    text = out.getvalue()
    assert code == 0, text
    rm = next(line for line in text.splitlines() if "rm -rf keep" in line)
    assert "DENY" in rm and "no-destructive-shell" in rm
    ls = next(line for line in text.splitlines() if "$ ls" in line)
    assert "ASK" in ls and "confirm_run_command" in ls
    assert (tmp_path / "keep").is_dir()
    assert len(told) == 2 and all("denied" in t for t in told), told
    assert "no-destructive-shell" in told[0] and "confirm_run_command" in told[1], told
