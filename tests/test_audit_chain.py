"""The audit log's hash chain: `verify` finds every edit, deletion, insertion, reordering and
cut tail (at the line where the chain breaks), across interleaved sessions; and each line
names the policy set that decided by its content hash."""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from antigravity_sdk import HookRunner, ToolCall
from antigravity_sdk import policy as pol
from antigravity_sdk.audit import AuditLog, verify
from antigravity_sdk.harness.effects import HookCall

ROOT = Path(__file__).resolve().parents[1]


def _write_log(path: Path, writers: int, calls: list[int], policies: Any = None) -> None:
    """`writers` sessions appending to one file, decision by decision in the order `calls`
    names them (as agents sharing a log do), each opened with its session line and closed
    with its end line."""
    enforcer = pol.enforce(policies or [pol.deny("run_command", name="no-shell"), pol.allow_all()])
    enforcer.note_decisions()
    runner = HookRunner([enforcer])
    logs = [AuditLog(path) for _ in range(writers)]
    for log in logs:
        log.open(enforcer.fingerprint)
        log.session("conv", None)
        log.begin_turn()
    for n, who in enumerate(calls):
        name = "run_command" if n % 2 else "view_file"
        call = ToolCall(name=name, args={"x": str(n)}, id=f"c{n}", trajectory_id="t")
        request = HookCall(f"r{n}", "pre_tool_call", call)
        asyncio.run(logs[who % writers].decide(request, runner, None, "conv"))  # type: ignore[arg-type]
    for log in logs:
        log.close()


def _sessions(lines: list[bytes]) -> dict[str, list[int]]:
    by_sid: dict[str, list[int]] = {}
    for i, raw in enumerate(lines):
        by_sid.setdefault(json.loads(raw)["sid"], []).append(i)
    return by_sid


def test_an_untouched_log_of_interleaved_sessions_is_intact(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    _write_log(path, writers=3, calls=[0, 1, 2, 0, 0, 2, 1])
    report = verify(path)
    assert report.intact, report.problems
    assert (report.lines, report.sessions) == (7 + 3 * 2, 3)


_TAMPER = st.sampled_from(["edit", "delete", "duplicate", "swap", "cut", "drop_tail", "reseal"])


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    writers=st.integers(1, 3),
    calls=st.lists(st.integers(0, 2), min_size=2, max_size=12),
    how=_TAMPER,
    where=st.integers(0, 10_000),
    byte=st.integers(0, 10_000),
)
def test_every_kind_of_tampering_is_found_where_it_happened(
    tmp_path_factory: pytest.TempPathFactory,
    writers: int,
    calls: list[int],
    how: str,
    where: int,
    byte: int,
) -> None:
    path = tmp_path_factory.mktemp("chain") / "a.jsonl"
    _write_log(path, writers, calls)
    lines = path.read_bytes().splitlines(keepends=True)
    i = where % len(lines)
    sessions = _sessions(lines)
    expect: set[int] = set()  # 1-based line numbers a report may name
    if how == "edit":  # one byte of one line changed (never into the same byte)
        raw = bytearray(lines[i])
        k = byte % (len(raw) - 1)  # not the newline
        raw[k] = ord("#") if raw[k] != ord("#") else ord("%")
        lines[i] = bytes(raw)
        expect = {i + 1}
    elif how == "delete":  # found at its session's next line, or where the session stops
        own = next(v for v in sessions.values() if i in v)
        later = [k for k in own if k > i]
        del lines[i]
        expect = {later[0]} if later else {own[own.index(i) - 1] + 1}
    elif how == "duplicate":
        lines.insert(i, lines[i])
        expect = {i + 1, i + 2}
    elif how == "swap":  # two lines of one session trade places
        own = next(v for v in sessions.values() if i in v)
        if len(own) < 2:
            return
        j = own[(own.index(i) + 1) % len(own)]
        lines[i], lines[j] = lines[j], lines[i]
        expect = {i + 1, j + 1, min(i, j) + 1, max(i, j) + 1}
    elif how == "cut":  # the file cut at any byte of its last line
        last = lines[-1]
        lines[-1] = last[: byte % (len(last) - 1) + 1] if len(last) > 1 else b""
        expect = {len(lines), len(lines) - 1}
    elif how == "drop_tail":  # whole lines removed at the end
        del lines[i + 1 if i + 1 < len(lines) else i :]
        expect = set(range(1, len(lines) + 1))  # where its session stops
    elif how == "reseal":  # a line edited and its own hash recomputed: the next breaks
        own = next(v for v in sessions.values() if i in v)
        if own[-1] == i:
            return  # a session's last line resealed: documented as not detectable alone
        entry = lines[i].rstrip(b"\n")
        body = entry[: entry.rindex(b',"hash":"')].replace(b'"conv"', b'"evil"', 1)
        if body == entry[: entry.rindex(b',"hash":"')]:
            body = body.replace(b'"t"', b'"u"', 1)
        digest = hashlib.sha256(body).hexdigest()[:32].encode()
        lines[i] = body + b',"hash":"' + digest + b'"}\n'
        expect = {own[own.index(i) + 1] + 1}
    path.write_bytes(b"".join(lines))
    report = verify(path)
    assert not report.intact, (how, i)
    assert {line for line, _ in report.problems} & expect, (how, i, report.problems, expect)


def test_the_report_says_what_broke(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    _write_log(path, writers=1, calls=[0, 0, 0])
    lines = path.read_bytes().splitlines(keepends=True)
    cases = {
        "edited": [*lines[:1], lines[1].replace(b"view_file", b"view_fil3"), *lines[2:]],
        "deleted": lines[:1] + lines[2:],
        "partial": [*lines[:-1], lines[-1][:10]],
        "without its end line": lines[:-1],
        "older SDK": [*lines[:2], b'{"v":1,"kind":"turn"}\n', *lines[2:]],
    }
    for words, content in cases.items():
        path.write_bytes(b"".join(content))
        problems = " ".join(p for _, p in verify(path).problems)
        assert words in problems, (words, problems)


def test_lines_name_the_policy_set_by_its_content(tmp_path: Path) -> None:
    same = [pol.deny("run_command", name="no-shell"), pol.allow_all()]
    other = [pol.deny("run_command", name="no-shell", reason="not here"), pol.allow_all()]
    a, b, c = (tmp_path / n for n in ("a.jsonl", "b.jsonl", "c.jsonl"))
    _write_log(a, 1, [0], same)
    _write_log(b, 1, [0], list(same))
    _write_log(c, 1, [0], other)

    def hashes(path: Path) -> set[str]:
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        return {x["policy"] for x in lines if x["kind"] in ("session", "decision")}

    assert hashes(a) == hashes(b) == {pol.enforce(same).fingerprint}
    assert hashes(c) == {pol.enforce(other).fingerprint} != hashes(a)
    assert len(next(iter(hashes(a)))) == 32


def test_the_fingerprint_is_the_same_in_another_process(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text(
        '[[rule]]\ntool = "run_command"\ndecision = "deny"\nname = "no-rm"\n'
        'when = {arg = "CommandLine", contains = ["rm "]}\n'
        '[[rule]]\ntool = "*"\ndecision = "allow"\n'
    )
    code = (
        "import sys; from antigravity_sdk import policy\n"
        "print(policy.enforce(policy.load(sys.argv[1])).fingerprint)"
    )
    seen = {
        subprocess.run(
            [sys.executable, "-c", code, str(rules)], capture_output=True, text=True, check=True
        ).stdout.strip()
        for _ in range(2)
    }
    assert seen == {pol.enforce(pol.load(rules)).fingerprint}
    assert pol.enforce(pol.load(rules), mode="shadow").fingerprint not in seen


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "antigravity_sdk", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )


def test_audit_verify_exit_codes(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    _write_log(path, writers=2, calls=[0, 1, 0])
    done = _cli("audit", "verify", str(path))
    assert done.returncode == 0, done.stderr
    assert "7 line(s), 2 session(s): chain intact" in done.stdout
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:2] + lines[3:]))
    done = _cli("audit", "verify", str(path))
    assert done.returncode == 1
    # The first session's next line (now line 4) shows the gap.
    assert "line 4: session " in done.stdout and "were deleted" in done.stdout
    assert "BROKEN" in done.stdout
    done = _cli("audit", "verify", str(tmp_path / "missing.jsonl"))
    assert done.returncode == 2 and "cannot read" in done.stderr and not done.stdout
