"""The audit log without a harness: the line format, redaction (fail-closed), attribution
of each verdict, crash and concurrency safety of the file, and `summarize`."""

from __future__ import annotations

import asyncio
import builtins
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cli_policy import _cli

from antigravity_sdk import Agent, ConfigurationError, Hook, HookResult, HookRunner, ToolCall
from antigravity_sdk import policy as pol
from antigravity_sdk.audit import (
    REDACTION_FAILED,
    AuditLog,
    FileSink,
    read_entries,
    render_summary,
    summarize,
)
from antigravity_sdk.context import DecisionNote, noting
from antigravity_sdk.harness.effects import ConfirmTool, HookCall, PolicyRequest
from antigravity_sdk.testing import ScriptedModel

ROOT = Path(__file__).resolve().parents[1]
CONVERSATION = "c0ffee"


def _call(name: str = "run_command", **args: Any) -> ToolCall:
    return ToolCall(name=name, args=args or {"CommandLine": "ls"}, id="call_1", trajectory_id="t1")


class Deny(Hook):
    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        return HookResult.denied("hook says no")


class Rewrite(Hook):
    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        return HookResult.rewrite({"CommandLine": "echo safe"})


class Boom(Hook):
    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        raise RuntimeError("broken")


def _runner(*hooks: Hook, rules: Any = (), mode: Any = "enforce") -> HookRunner:
    enforcer = pol.enforce(list(rules) or [pol.allow_all()], mode=mode)
    enforcer.note_decisions()
    return HookRunner([*hooks, enforcer])


async def _decide(log: AuditLog, request: Any, runner: HookRunner) -> Any:
    return await log.decide(request, runner, None, CONVERSATION)  # type: ignore[arg-type]


def _lines(path: Path) -> list[dict[str, Any]]:
    text = path.read_text()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture
def log(tmp_path: Path) -> AuditLog:
    audit = AuditLog(tmp_path / "audit.jsonl")
    audit.open()
    audit.begin_turn()
    return audit


# -- the line format --------------------------------------------------------------------------


async def test_a_decision_line_names_the_rule_its_bucket_and_the_call(log: AuditLog) -> None:
    runner = _runner(rules=[pol.deny("run_command", name="no-shell"), pol.allow_all()])
    outcome = await _decide(log, HookCall("r1", "pre_tool_call", _call()), runner)
    assert not outcome.allow
    (line,) = _lines(log.path)
    assert line["time"].endswith("Z") and line["time"][:2] == "20"
    per_line = ("time", "latency_us", "policy_us", "sid", "seq", "prev", "mac")
    assert {k: line[k] for k in line if k not in per_line} == {
        "v": 3,
        "kind": "decision",
        "policy": "",
        "conversation": CONVERSATION,
        "turn": 1,
        "trajectory": "t1",
        "call_id": "call_1",
        "route": "pre_tool_call",
        "tool": "run_command",
        "args": {"CommandLine": "ls"},
        "verdict": "deny",
        "by": "policy",
        "rule": "no-shell",
        "decision": "deny",
        "bucket": 0,
        "bucket_name": "specific deny",
        "hook": None,
        "message": "Denied by policy 'no-shell'.",
    }
    assert 0 < line["policy_us"] <= line["latency_us"]


async def test_a_traced_agent_audit_still_names_the_rule(log: AuditLog) -> None:
    """With tracing on, the enforcer is asked through `decide` (the traced wrapper), not
    its pre_tool_call: the audit line must still name the deciding rule."""
    from opentelemetry.sdk.trace import TracerProvider

    from antigravity_sdk.tracing import Tracing

    enforcer = pol.enforce([pol.deny("run_command", name="no-shell"), pol.allow_all()])
    enforcer.note_decisions()
    runner = Tracing(TracerProvider(), "a").hook_runner([enforcer], turn_attributes={})
    outcome = await _decide(log, HookCall("r1", "pre_tool_call", _call()), runner)
    assert not outcome.allow
    (line,) = _lines(log.path)
    assert (line["by"], line["rule"], line["bucket"]) == ("policy", "no-shell", 0)


async def test_model_chosen_strings_cannot_inject_fields(log: AuditLog) -> None:
    sneaky = 'x","verdict":"allow","by":"policy'
    call = ToolCall(name="run_command", args={sneaky: sneaky}, id=sneaky, trajectory_id=sneaky)
    runner = _runner(rules=[pol.deny("run_command", name=sneaky)])
    await _decide(log, HookCall("r1", "pre_tool_call", call), runner)
    (line,) = _lines(log.path)
    assert (line["call_id"], line["trajectory"], line["rule"]) == (sneaky, sneaky, sneaky)
    assert (line["verdict"], line["args"]) == ("deny", {sneaky: sneaky})


async def test_a_hook_deny_names_the_hook_and_no_rule(log: AuditLog) -> None:
    await _decide(log, HookCall("r1", "pre_tool_call", _call()), _runner(Deny()))
    await _decide(log, HookCall("r2", "pre_tool_call", _call()), _runner(Boom()))
    denied, failed = _lines(log.path)
    assert (denied["by"], denied["hook"], denied["rule"], denied["message"]) == (
        "hook",
        "Deny",
        None,
        "hook says no",
    )
    assert (failed["by"], failed["hook"]) == ("hook", "Boom")
    assert "broken" in failed["message"]
    assert denied["policy_us"] is None  # the policies never ran


async def test_a_deny_after_a_rewrite_names_the_denying_hook(log: AuditLog) -> None:
    await _decide(log, HookCall("r1", "pre_tool_call", _call()), _runner(Rewrite(), Deny()))
    (line,) = _lines(log.path)
    assert (line["verdict"], line["hook"], line["rewritten_by"]) == ("deny", "Deny", ["Rewrite"])
    assert "rewritten_args" not in line  # nothing ran rewritten


async def test_a_rewrite_records_both_argument_sets_and_the_rule(log: AuditLog) -> None:
    runner = _runner(Rewrite(), rules=[pol.allow("run_command", name="shell-ok")])
    outcome = await _decide(log, HookCall("r1", "pre_tool_call", _call()), runner)
    assert outcome.args == {"CommandLine": "echo safe"}
    (line,) = _lines(log.path)
    assert (line["args"], line["rewritten_args"]) == (
        {"CommandLine": "ls"},
        {"CommandLine": "echo safe"},
    )
    assert (line["verdict"], line["rule"], line["rewritten_by"]) == (
        "allow",
        "shell-ok",
        ["Rewrite"],
    )


async def test_no_matching_rule_is_an_allow_by_the_policies_without_a_rule(log: AuditLog) -> None:
    runner = _runner(rules=[pol.deny("run_command", when=lambda a: False, name="never")])
    await _decide(log, HookCall("r1", "pre_tool_call", _call()), runner)
    (line,) = _lines(log.path)
    assert (line["verdict"], line["by"], line["rule"], line["bucket"]) == (
        "allow",
        "policy",
        None,
        None,
    )


async def test_sdk_refusals_and_every_decision_route_are_logged(log: AuditLog) -> None:
    runner = _runner()
    await _decide(log, HookCall("r1", "pre_tool_call", _call(), refusal="refused: nope"), runner)
    await _decide(log, PolicyRequest("r2", _call()), runner)
    await _decide(log, ConfirmTool("t9", 3, None), runner)
    # Not decisions about a tool call: passed through, no line.
    await _decide(log, HookCall("r3", "pre_turn"), runner)
    refused, policy_request, confirm = _lines(log.path)
    assert (refused["by"], refused["verdict"], refused["message"]) == (
        "sdk",
        "deny",
        "refused: nope",
    )
    assert (policy_request["route"], policy_request["verdict"]) == ("policy_request", "allow")
    assert (confirm["route"], confirm["by"], confirm["tool"], confirm["trajectory"]) == (
        "confirmation",
        "sdk",
        None,
        "t9",
    )


async def test_a_decision_that_fails_is_logged_as_the_sdks_refusal(log: AuditLog) -> None:
    class Broken(HookRunner):
        async def dispatch(self, event: str, arg: Any = None) -> Any:
            raise RuntimeError("lost")

    with pytest.raises(RuntimeError):
        await _decide(log, HookCall("r1", "pre_tool_call", _call()), Broken())
    (line,) = _lines(log.path)
    assert (line["verdict"], line["by"], line["message"]) == (
        "deny",
        "sdk",
        "the SDK could not decide: RuntimeError",
    )


async def test_shadow_mode_logs_the_allow_and_what_would_have_happened(log: AuditLog) -> None:
    runner = _runner(rules=[pol.deny("run_command", name="no-shell")], mode="shadow")
    assert (await _decide(log, HookCall("r1", "pre_tool_call", _call()), runner)).allow
    (line,) = _lines(log.path)
    assert (line["verdict"], line["rule"], line["shadow"]) == ("allow", "no-shell", "deny")


def test_a_turn_line_counts_the_turns_decisions(log: AuditLog) -> None:
    log.end_turn(CONVERSATION, None, "timeout")
    (line,) = _lines(log.path)
    assert (line["kind"], line["turn"], line["stop_reason"], line["usage"]) == (
        "turn",
        1,
        "timeout",
        None,
    )
    assert (line["decisions"], line["denied"]) == (0, 0)


# -- the enforcer's explained decision is the decision ------------------------------------------

_RULES = [
    pol.deny("run_command", when=lambda a: "rm" in a.get("CommandLine", ""), name="no-rm"),
    pol.deny("run_command", when=lambda a: a["Missing"], name="broken-deny"),
    pol.allow("view_file", when=lambda a: a["Missing"], name="broken-allow"),
    pol.ask_user("write_to_file", handler=lambda call: "yes" in str(call.args), name="ask"),
    pol.allow("view_file", name="read"),
]


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(["run_command", "view_file", "write_to_file", "search_web"]),
    text=st.sampled_from(["ls", "rm x", "yes", "no"]),
    missing=st.booleans(),
    mode=st.sampled_from(["enforce", "shadow"]),
)
def test_the_noted_enforcer_decides_exactly_as_the_plain_one(
    name: str, text: str, missing: bool, mode: Any
) -> None:
    args: dict[str, Any] = {"CommandLine": text}
    if not missing:
        args["Missing"] = False
    call = ToolCall(name=name, args=args)
    plain = pol.enforce(_RULES, mode=mode)
    noted = pol.enforce(_RULES, mode=mode)
    noted.note_decisions()

    async def both() -> tuple[HookResult, HookResult, DecisionNote]:
        note = DecisionNote()
        token = noting.set(note)
        try:
            return await plain.pre_tool_call(call), await noted.pre_tool_call(call), note
        finally:
            noting.reset(token)

    expected, got, note = asyncio.run(both())
    assert (expected.allow, expected.message) == (got.allow, got.message)
    assert note.policy_ns >= 0
    if mode == "enforce":
        assert note.policy_allow is got.allow
    explained = asyncio.run(plain.evaluate(call, ask=mode == "enforce"))
    assert (note.rule.policy if note.rule else None) is explained.policy


# -- redaction ------------------------------------------------------------------------------------


async def test_the_redactor_gets_a_copy_and_its_answer_is_logged(tmp_path: Path) -> None:
    def redact(args: dict[str, Any]) -> dict[str, Any]:
        args["CommandLine"] = "***"
        return args

    audit = AuditLog(tmp_path / "a.jsonl", redact=redact)
    audit.open()
    call = _call()
    await _decide(audit, HookCall("r1", "pre_tool_call", call), _runner(Rewrite()))
    (line,) = _lines(audit.path)
    assert line["args"] == line["rewritten_args"] == {"CommandLine": "***"}
    assert call.args == {"CommandLine": "ls"}  # the call itself is untouched


_SECRET = "hunter2-secret"


@pytest.mark.parametrize(
    "redact",
    [
        lambda args: (_ for _ in ()).throw(ValueError(f"no: {args}")),  # quotes the secret
        lambda args: f"{args}",  # not a mapping
        lambda args: {"x": {_SECRET[:0], object()}},  # not JSON
        lambda args: {"x": float("nan")},  # not JSON either
    ],
    ids=["raises", "not-a-mapping", "not-json", "nan"],
)
async def test_a_failing_redactor_leaves_the_arguments_out(tmp_path: Path, redact: Any) -> None:
    audit = AuditLog(tmp_path / "a.jsonl", redact=redact)
    audit.open()
    runner = _runner()
    outcome = await _decide(
        audit, HookCall("r1", "pre_tool_call", _call(CommandLine=_SECRET)), runner
    )
    assert outcome.allow  # the decision is not touched
    text = audit.path.read_text()
    assert _SECRET not in text
    (line,) = _lines(audit.path)
    assert line["args"] == REDACTION_FAILED


@settings(max_examples=50, deadline=None)
@given(
    args=st.dictionaries(
        st.text(min_size=1, max_size=8),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=20),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=5), inner, max_size=3)
            ),
            max_leaves=8,
        ),
        max_size=4,
    )
)
def test_any_arguments_give_exactly_one_parseable_line(
    tmp_path_factory: Any, args: dict[str, Any]
) -> None:
    path = tmp_path_factory.mktemp("prop") / "a.jsonl"
    audit = AuditLog(path)
    audit.open()
    call = ToolCall(name="run_command", args=args)
    asyncio.run(audit.decide(HookCall("r", "pre_tool_call", call), _runner(), None, ""))  # type: ignore[arg-type]
    audit.close()
    line, end = _lines(path)
    assert line["args"] == args and end["kind"] == "end"


async def test_cached_line_pieces_follow_the_turn_trajectory_and_tool(log: AuditLog) -> None:
    """The line is built from cached pieces (per conversation, turn and trajectory; per
    tool and verdict): each must change with what it describes, and the per-tool cache
    stays bounded whatever names the model makes up."""
    runner = _runner(rules=[pol.deny("view_file"), pol.allow_all()])
    for trajectory, name in (("t1", "run_command"), ("t2", "view_file"), ("t2", "list_dir")):
        call = ToolCall(name=name, args={"A": "x"}, id="c", trajectory_id=trajectory)
        await _decide(log, HookCall("r", "pre_tool_call", call), runner)
    log.begin_turn()
    many = [ToolCall(name="server/t", args={}, server_name=f"s{i}") for i in range(1100)]
    for call in many:
        await _decide(log, PolicyRequest("r", call), _runner())
    lines = _lines(log.path)
    assert [(x["turn"], x["trajectory"], x["tool"], x["verdict"]) for x in lines[:3]] == [
        (1, "t1", "run_command", "allow"),
        (1, "t2", "view_file", "deny"),
        (1, "t2", "list_dir", "allow"),
    ]
    assert [x["tool"] for x in lines[3:]] == [c.qualified_name for c in many]
    assert {x["turn"] for x in lines[3:]} == {2}
    assert len(log._heads) <= 1024


class DenyWhenAsked(Hook):
    """Denies a call whose arguments say so, with the reason they give."""

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        reason = tool_call.args.get("deny")
        return HookResult.denied(reason) if reason else HookResult.ALLOWED


class DenyAll(Hook):
    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        return HookResult.denied("no")


_STEP = st.tuples(
    st.sampled_from(["t1", "t2"]),  # trajectory
    st.sampled_from(["view_file", "list_dir"]),  # tool
    st.sampled_from([None, "s1", "s2"]),  # its MCP server
    st.sampled_from(["", "reason one", "reason two"]),  # a hook's deny reason, or allow
    st.sampled_from(["hooks", "deny-all hook", "policies only"]),  # who decides
    st.booleans(),  # a new turn first
)


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(_STEP, min_size=1, max_size=12))
def test_cached_heads_never_leak_into_the_next_line(
    tmp_path_factory: Any, steps: list[tuple[str, str, str | None, str, str, bool]]
) -> None:
    """Every line of one long-lived log (its cached heads in use) says what a fresh log
    writing that decision alone says: no field of an earlier line's head survives into a
    line it does not describe."""
    tmp = tmp_path_factory.mktemp("heads")
    rules = [pol.deny("list_dir", reason="listing is off"), pol.allow_all()]
    runners = {
        "hooks": _runner(DenyWhenAsked(), rules=rules),
        "deny-all hook": _runner(DenyAll(), rules=rules),
        "policies only": _runner(rules=rules),
    }
    cached = AuditLog(tmp / "cached.jsonl")
    cached.open()
    expected = []
    for n, (trajectory, tool, server, reason, who, new_turn) in enumerate(steps):
        if new_turn:
            cached.begin_turn()
        call = ToolCall(
            name=tool,
            server_name=server,
            args={"deny": reason},
            id=f"c{n}",
            trajectory_id=trajectory,
        )
        request = HookCall("r", "pre_tool_call", call)
        asyncio.run(cached.decide(request, runners[who], None, CONVERSATION))  # type: ignore[arg-type]
        fresh = AuditLog(tmp / f"fresh{n}.jsonl")
        fresh.open()
        fresh._turn = cached._turn
        asyncio.run(fresh.decide(request, runners[who], None, CONVERSATION))  # type: ignore[arg-type]
        fresh.close()
        expected.extend(_lines(fresh.path)[:-1])  # its end line is not one of the decisions
    cached.close()
    per_line = ("time", "latency_us", "policy_us", "sid", "seq", "prev", "mac")
    got = [{k: v for k, v in x.items() if k not in per_line} for x in _lines(cached.path)[:-1]]
    assert got == [{k: v for k, v in x.items() if k not in per_line} for x in expected]


# -- the file ------------------------------------------------------------------------------


def test_a_write_that_fails_is_counted_not_raised(tmp_path: Path, caplog: Any) -> None:
    audit = AuditLog(tmp_path / "a.jsonl")
    audit.write({"kind": "turn"})  # never opened
    audit.open()
    assert isinstance(audit._out, FileSink)
    os.close(audit._out._fd)  # the descriptor goes bad under it
    audit.write({"kind": "turn"})
    assert audit.write_errors == 2
    assert "could not write to the audit log" in caplog.text


def test_the_file_is_private_and_appended_to(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"kind":"turn","v":1}\n')
    path.chmod(0o600)
    audit = AuditLog(path)
    audit.open()
    audit.write({"kind": "turn", "v": 1})
    audit.close()
    assert [line["kind"] for line in _lines(path)] == ["turn", "turn", "end"]
    fresh = AuditLog(tmp_path / "new.jsonl")
    fresh.open()
    assert (fresh.path.stat().st_mode & 0o777) == 0o600


def test_bad_settings_are_refused_when_given(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="file path"):
        Agent.builder().audit_log(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="callable"):
        Agent.builder().audit_log(tmp_path / "a", redact="no")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bool"):
        Agent.builder().audit_log(tmp_path / "a", fsync="yes")  # type: ignore[arg-type]


async def test_an_unusable_path_fails_start_before_anything_runs(tmp_path: Path) -> None:
    model = ScriptedModel([])
    agent = (
        Agent.builder()
        .model(model)
        .save_dir(tmp_path / "s")
        .audit_log(tmp_path / "missing-dir" / "audit.jsonl")
        .build()
    )
    with pytest.raises(ConfigurationError, match="cannot open the audit log"):
        await agent.start()
    assert not agent.started and not model.started


_WRITER = """
import sys
from antigravity_sdk.context import DecisionNote, noting
from antigravity_sdk.audit import AuditLog
log = AuditLog(sys.argv[1])
log.open()
for i in range(int(sys.argv[3])):
    log.write({"kind": "turn", "writer": sys.argv[2], "i": i, "pad": "x" * 20000})
"""


def test_two_writers_appending_to_one_file_never_interleave_lines(tmp_path: Path) -> None:
    path = tmp_path / "shared.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), name, "300"], env=env)
        for name in ("a", "b")
    ]
    for writer in writers:
        assert writer.wait(timeout=60) == 0
    entries, bad = read_entries(path)
    assert bad == 0
    assert sorted((e["writer"], e["i"]) for e in entries) == sorted(
        (w, i) for w in "ab" for i in range(300)
    )


# -- reading it back ---------------------------------------------------------------------------


def _sample_log(path: Path) -> None:
    audit = AuditLog(path)
    audit.open()
    for verdict, by, rule, decision, latency in [
        ("allow", "policy", "read", "approve", 10.0),
        ("deny", "policy", "no-rm", "deny", 20.0),
        ("deny", "policy", "no-rm", "deny", 30.0),
        ("deny", "hook", None, None, 40.0),
        ("allow", "policy", "ask", "ask_user", 50.0),
    ]:
        audit.write(
            {
                "v": 1,
                "kind": "decision",
                "tool": "run_command",
                "verdict": verdict,
                "by": by,
                "rule": rule,
                "hook": "Gate" if by == "hook" else None,
                "decision": decision,
                "latency_us": latency,
            }
        )
    audit.write(
        {
            "v": 1,
            "kind": "turn",
            "conversation": "c1",
            "turn": 1,
            "stop_reason": "finished",
            "usage": {"prompt": 100, "candidates": 7, "total": 107},
            "decisions": 5,
        }
    )
    audit.close()


def test_summarize_counts_per_tool_and_per_turn(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    _sample_log(path)
    summary = summarize(path)
    stats = summary.tools["run_command"]
    assert (stats.allowed, stats.denied, stats.asked) == (2, 3, 1)
    assert stats.deny_reasons.most_common() == [("rule no-rm", 2), ("hook Gate", 1)]
    assert stats.percentile(50) == 30.0
    assert 40.0 < stats.percentile(95) <= 50.0
    assert [t["stop_reason"] for t in summary.turns] == ["finished"]
    assert summary.unreadable == 0


def test_summarize_tolerates_a_truncated_last_line(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    _sample_log(path)
    whole = path.read_bytes()
    path.write_bytes(whole + whole.splitlines(keepends=True)[0][:37])  # a crash mid-write
    summary = summarize(path)
    assert summary.unreadable == 1
    assert summary.tools["run_command"].denied == 3


@pytest.mark.parametrize("rich", [True, False])
def test_the_tables_render_with_rich_or_as_plain_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rich: bool
) -> None:
    path = tmp_path / "a.jsonl"
    _sample_log(path)
    if not rich:
        real_import = builtins.__import__

        def no_rich(name: str, *args: Any, **kwargs: Any) -> Any:
            if name.startswith("rich"):
                raise ImportError(name)
            return real_import(name, *args, **kwargs)

        monkeypatch.setattr(builtins, "__import__", no_rich)
    out = io.StringIO()
    render_summary(summarize(path), out)
    text = out.getvalue()
    assert ("┃" in text) is rich
    row = next(line for line in text.splitlines() if "run_command" in line)
    assert row.replace("│", " ").split()[:4] == ["run_command", "2", "3", "1"]
    assert "rule no-rm (2), hook Gate (1)" in text
    assert "107" in text


# -- the command line (the real console entry point, in a subprocess) ---------------------------


def test_cli_audit_summarize_prints_the_tables(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    _sample_log(path)
    with path.open("a") as f:
        f.write('{"v":1,"kind":"deci')  # the line a crash cut off
    done = _cli("audit", "summarize", str(path))
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if "run_command" in line)
    assert row.replace("│", " ").split()[:4] == ["run_command", "2", "3", "1"]
    assert "rule no-rm (2)" in done.stdout and "finished" in done.stdout
    assert "1 unreadable line(s) skipped" in done.stderr
    assert "unreadable" not in done.stdout


def test_cli_audit_summarize_reports_a_missing_file_on_stderr(tmp_path: Path) -> None:
    done = _cli("audit", "summarize", str(tmp_path / "nope.jsonl"))
    assert (done.returncode, done.stdout) == (2, "")
    assert "cannot read" in done.stderr and "nope.jsonl" in done.stderr
    usage = _cli("audit")
    assert usage.returncode == 2 and "required: COMMAND" in usage.stderr


def test_cli_chat_and_demo_take_an_audit_log() -> None:
    for command in ("chat", "demo"):
        done = _cli(command, "--help")
        assert done.returncode == 0 and "--audit-log PATH" in done.stdout
