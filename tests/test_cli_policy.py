"""`antigravity policy check|explain`, and the terminal ASK_USER handler."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from antigravity_sdk import ToolCall, cli
from antigravity_sdk.interactive import confirm_in_terminal

EXAMPLE = str(Path(__file__).resolve().parent.parent / "examples" / "policies.toml")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_check_lists_rules_in_evaluation_order(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "policy", "check", EXAMPLE)
    assert code == 0
    assert "OK, 20 policies" in out
    lines = [line for line in out.splitlines() if line.startswith("  [")]
    buckets = [int(line[3]) for line in lines]
    assert buckets == sorted(buckets) and buckets[0] == 0 and buckets[-1] == 8
    assert "no-rm-rf" in lines[0] and "allow_all" in lines[-1]


def test_check_reports_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[[rule]]\nname = 'oops'\ntool = 'run_*'\ndecision = 'deny'\n")
    code, out, err = run(capsys, "policy", "check", str(bad))
    assert code == 1 and out == ""
    assert "rule #1 ('oops'): tool: malformed" in err
    code, _, err = run(capsys, "policy", "check", str(tmp_path / "missing.toml"))
    assert code == 1 and "missing.toml" in err


def test_explain_prints_decision_and_trace(capsys: pytest.CaptureFixture[str]) -> None:
    args = json.dumps({"CommandLine": "sudo ls", "Cwd": "."})
    code, out, _ = run(capsys, "policy", "explain", EXAMPLE, "run_command", args)
    assert code == 1
    assert "run_command: DENIED by policy 'no-sudo'" in out
    assert "Commands may not escalate privileges." in out
    assert "no-rm-rf" in out and "predicate false" in out and "<- decides" in out
    code, out, _ = run(capsys, "policy", "explain", EXAMPLE, "db/list_tables")
    assert code == 0 and "ALLOWED by policy 'db'" in out and "server/* allow" in out
    code, out, _ = run(capsys, "policy", "explain", EXAMPLE, "db/execute", '{"sql": "drop x"}')
    assert code == 1 and "ASKS THE USER" in out


def test_explain_rejects_bad_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "policy", "explain", EXAMPLE, "run_command", "{nope")
    assert code == 2 and "not valid JSON" in err
    code, _, err = run(capsys, "policy", "explain", EXAMPLE, "run_command", "[1]")
    assert code == 2 and "JSON object" in err


def test_usage_errors_return_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert cli.main(["policy"]) == 2
    assert cli.main(["policy", "check"]) == 2
    assert cli.main(["--help"]) == 0
    assert "policy" in capsys.readouterr().out


def test_python_dash_m_entry_point() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "antigravity_sdk", "policy", "check", EXAMPLE],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "OK, 20 policies" in proc.stdout


# -- confirm_in_terminal -------------------------------------------------------------------------


class FakeTTY(io.StringIO):
    def __init__(self, text: str, tty: bool = True) -> None:
        super().__init__(text)
        self.tty = tty
        self.reader: threading.Thread | None = None

    def isatty(self) -> bool:
        return self.tty

    def readline(self, size: int | None = -1) -> str:
        self.reader = threading.current_thread()
        return super().readline()


@pytest.mark.parametrize(
    ("answer", "expected"),
    [("y\n", True), ("YES\n", True), ("\n", False), ("n\n", False), ("", False)],
)
async def test_confirm_in_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], answer: str, expected: bool
) -> None:
    stdin = FakeTTY(answer)
    monkeypatch.setattr(sys, "stdin", stdin)
    call = ToolCall(name="run_command", args={"CommandLine": "ls \x1b[2J\u202e", "Cwd": "/w"})
    assert await confirm_in_terminal(call) is expected
    assert stdin.reader is not threading.main_thread(), "the prompt must run in a thread"
    prompt = capsys.readouterr().err
    assert "$ ls \\u001b[2J\\u202e" in prompt and "(in /w)" in prompt and "[y/N]" in prompt


async def test_confirm_in_terminal_denies_without_tty(monkeypatch: pytest.MonkeyPatch) -> None:
    stdin = FakeTTY("y\n", tty=False)
    monkeypatch.setattr(sys, "stdin", stdin)
    assert await confirm_in_terminal(ToolCall(name="x", server_name="db")) is False
    assert stdin.reader is None, "without a terminal nothing is read"
