"""The audit log's sealed chain: `verify` finds every edit, deletion, insertion, reordering
and cut tail (at the line where the chain breaks), across interleaved sessions, and a log
rewritten and resealed by someone without the key (issue 26, finding 6); it still reads
an older SDK's unkeyed chain, and says it proves nothing. Each line names the policy set
that decided by its content hash."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from antigravity_sdk import HookRunner, ToolCall
from antigravity_sdk import policy as pol
from antigravity_sdk.audit import UNKEYED, AuditLog, verify
from antigravity_sdk.harness.effects import HookCall
from antigravity_sdk.state import secret

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
    elif how == "reseal":  # a line edited and its seal recomputed without the key
        entry = lines[i].rstrip(b"\n")
        body = entry[: entry.rindex(b',"mac":"')].replace(b'"conv"', b'"evil"', 1)
        if body == entry[: entry.rindex(b',"mac":"')]:
            body = body.replace(b'"t"', b'"u"', 1)
        digest = hashlib.sha256(body).hexdigest()[:32].encode()
        lines[i] = body + b',"mac":"' + digest + b'"}\n'
        expect = {i + 1}  # the line itself, even a session's last
    path.write_bytes(b"".join(lines))
    report = verify(path)
    assert not report.intact, (how, i)
    assert {line for line, _ in report.problems} & expect, (how, i, report.problems, expect)


def _seal_with(key: bytes | None, field: str = "mac") -> Any:
    def seal(body: bytes) -> bytes:
        if key is None:
            digest = hashlib.sha256(body).hexdigest()[:32]
        else:
            digest = hmac.new(key, body, hashlib.sha256).hexdigest()[:32]
        return body + f',"{field}":"{digest}"}}\n'.encode()

    return seal


def _rewrite(lines: list[bytes], drop: int, seal: Any) -> list[bytes]:
    """What an attacker with write access does: delete line `drop` and rebuild its
    session's chain after it (seq, prev and seal of every later line), as `seal` seals."""
    sid = json.loads(lines[drop])["sid"]
    kept = lines[:drop] + lines[drop + 1 :]
    out: list[bytes] = []
    prev = ""
    for raw in kept:
        entry = json.loads(raw)
        if entry["sid"] != sid:
            out.append(raw)
            continue
        entry.pop("mac", None)
        entry.pop("hash", None)
        entry["seq"], entry["prev"] = sum(json.loads(x)["sid"] == sid for x in out), prev
        line = seal(json.dumps(entry, separators=(",", ":"))[:-1].encode())
        prev = json.loads(line)["mac" if b'"mac":' in line[-45:] else "hash"]
        out.append(line)
    return out


@pytest.mark.parametrize("how", ["sha256 as mac", "sha256 as hash", "another key"])
def test_a_log_rewritten_and_resealed_without_the_key_fails_verify(
    tmp_path: Path, how: str
) -> None:
    """Finding 6: a command deletes a recorded denial and rebuilds the chain. Without the
    key (recomputing with plain SHA-256, in either seal field, or with a key of its own)
    the rewrite is found; with the key (the control) it would not be."""
    path = tmp_path / "a.jsonl"
    _write_log(path, writers=2, calls=[0, 1, 0, 0, 1])
    lines = path.read_bytes().splitlines(keepends=True)
    [denial] = [i for i, x in enumerate(lines) if b'"verdict":"deny"' in x and b'"sid"' in x][:1]
    control = _rewrite(lines, denial, _seal_with(secret("audit")))
    path.write_bytes(b"".join(control))
    assert verify(path).intact  # the rewrite is well formed: only the key tells it apart
    attacker = {
        "sha256 as mac": _seal_with(None, "mac"),
        "sha256 as hash": _seal_with(None, "hash"),
        "another key": _seal_with(os.urandom(32)),
    }[how]
    rewritten = _rewrite(lines, denial, attacker)
    denials = sum(b'"verdict":"deny"' in x for x in lines)
    assert sum(b'"verdict":"deny"' in x for x in rewritten) == denials - 1
    path.write_bytes(b"".join(rewritten))
    report = verify(path)
    assert not report.intact
    problems = " ".join(p for _, p in report.problems)
    if how == "sha256 as hash":
        assert UNKEYED in problems or "without a key" in problems, problems
    else:
        assert "MAC does not match" in problems, problems


def test_an_unkeyed_log_of_an_older_sdk_is_read_and_said_to_prove_nothing(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    _write_log(path, writers=2, calls=[0, 1, 0])
    lines = path.read_bytes().splitlines(keepends=True)
    old: list[bytes] = []
    prev: dict[str, str] = {}
    for raw in lines:  # the same lines as SDK 2 sealed them: a plain SHA-256 "hash"
        entry = json.loads(raw)
        del entry["mac"]
        entry["v"], entry["prev"] = 2, prev.get(entry["sid"], "")
        line = _seal_with(None, "hash")(json.dumps(entry, separators=(",", ":"))[:-1].encode())
        prev[entry["sid"]] = json.loads(line)["hash"]
        old.append(line)
    path.write_bytes(b"".join(old))
    report = verify(path, os.urandom(32))  # no key needed to read it
    assert (report.lines, report.sessions, report.unkeyed, report.keyed) == (7, 2, 2, 0)
    assert [p for _, p in report.problems] == [
        f"session {json.loads(old[0])['sid']} (from line 1) is {UNKEYED}",
        f"session {json.loads(old[1])['sid']} (from line 2) is {UNKEYED}",
    ]
    old[3] = old[3].replace(b'"v":2', b'"v":9')  # and still finds an edit in it
    path.write_bytes(b"".join(old))
    assert (4, "its hash does not match its content: the line was edited") in verify(path).problems


def test_a_log_is_verified_with_the_key_it_was_sealed_with(tmp_path: Path) -> None:
    key = os.urandom(32)
    path = tmp_path / "a.jsonl"
    log = AuditLog(path, key=key)
    log.open("p")
    log.write({"v": 3, "kind": "session"})
    log.close()
    assert verify(path, key).intact
    assert verify(path, [os.urandom(32), key]).intact  # one of several
    secret("audit")
    report = verify(path)  # this machine's keys: not that one
    assert not report.intact and report.wrong_key
    assert "under any key tried" in report.problems[0][1]


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


def test_audit_verify_takes_the_key_from_a_file_and_says_when_it_is_the_wrong_one(
    tmp_path: Path, state_home: Path
) -> None:
    key = os.urandom(32)
    path = tmp_path / "a.jsonl"
    log = AuditLog(path, key=key)
    log.open("p")
    log.close()
    done = _cli("audit", "verify", str(path))  # no key here at all: not runnable
    assert done.returncode == 2 and "none to check it with" in done.stderr, done.stderr
    raw, text = tmp_path / "raw.key", tmp_path / "hex.key"
    raw.write_bytes(key)
    text.write_text(key.hex() + "\n")
    for key_file in (raw, text):
        done = _cli("audit", "verify", str(path), "--key-file", str(key_file))
        assert done.returncode == 0 and "chain intact" in done.stdout, done.stdout + done.stderr
    secret("audit")  # this machine's key, which did not seal it
    done = _cli("audit", "verify", str(path))
    assert done.returncode == 1 and "no keyed line verifies with the keys tried" in done.stdout
    assert str(state_home) in done.stdout  # names the key it tried
    short = tmp_path / "short.key"
    short.write_text("abcd")
    done = _cli("audit", "verify", str(path), "--key-file", str(short))
    assert done.returncode == 2 and "at least 32 are needed" in done.stderr, done.stderr
