"""`antigravity demo` and `antigravity chat`: the SDK governing a real harness session.

The demo runs the real `localharness` against a `ScriptedModel` (fully offline) in a
fresh temporary workspace. The scripted model reads a file, writes one, runs a safe
command, tries `rm -rf`, tries to escape the workspace twice and tries to write a
secret; then it answers with a summary. Policies and hooks decide every call, and the
terminal shows each decision as it is made: the tool, its arguments, ALLOW/DENY, the
deciding bucket and rule, and the decision latency, then whether the tool really ran.

With a model configured (`base_url` + `model`, or `GEMINI_API_KEY`) the same prompt,
hooks and policies run on a real model instead of the script.

How the decisions are shown: `DecisionReporter` is a `Hook` registered before the
`PolicyEnforcer` (the agent registers user hooks first). It asks the enforcer to
*explain* the call (`PolicyEnforcer.evaluate`) and times that; the enforcer itself still
makes the actual decision right after. Hooks that decide before the reporter (here
`SecretGuard`) report their own denials to it.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import shlex
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TextIO

from . import policy
from .errors import AntigravityError, PolicyError, ToolExecutionError
from .hooks import Hook
from .types import ChatResponse, HookResult, ToolCall, ToolResult

__all__ = [
    "AuditLog",
    "DecisionRecord",
    "DecisionReporter",
    "DemoReport",
    "ModelNotConfiguredError",
    "SecretGuard",
    "demo_policies",
    "demo_prompt",
    "demo_session",
    "main",
    "run_chat",
    "run_demo",
]

# -- what the demo workspace contains -------------------------------------------------------

README_TEXT: Final = """\
# acme-service

A tiny service used by the antigravity_sdk demo.

- `make build` compiles into ./build
- configuration lives in .env (never commit secrets!)
"""

NOTES_TEXT: Final = """\
Notes from the agent:
- acme-service builds into ./build
- configuration belongs in .env
"""

FAKE_SECRET: Final = "API_KEY=sk_live_51Hdemo0000000000000000000000"  # not a real key

# -- policies -------------------------------------------------------------------------------

_DESTRUCTIVE: Final = re.compile(
    r"(^|[;&|(\s])(sudo|mkfs(\.\w+)?|shred|dd)(\s|$)"  # privilege, disk wiping
    r"|(^|[;&|(\s])rm\s+(-\w*[rRf]|--recursive|--force)"  # rm -r / -f / -rf
    r"|:\(\)\s*\{"  # fork bomb
)
_SAFE_COMMANDS: Final = frozenset(
    {"ls", "cat", "head", "tail", "wc", "grep", "pwd", "echo", "true", "date", "stat"}
)
_SHELL_META: Final = re.compile(r"[;&|<>$`\\(){}\n*?~]")


def is_destructive(args: dict[str, Any]) -> bool:
    """`rm -r`/`rm -f`, `sudo`, `mkfs`, `dd`, `shred` or a fork bomb anywhere in the line."""
    return bool(_DESTRUCTIVE.search(str(args["CommandLine"])))


def is_allow_listed(args: dict[str, Any]) -> bool:
    """A read-only command from a short allow-list, on relative paths, no shell syntax."""
    line = str(args["CommandLine"])
    if _SHELL_META.search(line):
        return False
    if "'" in line or '"' in line:
        try:
            words = shlex.split(line)
        except ValueError:
            return False
    else:  # the common case, without shlex's cost (no quoting, no shell syntax left)
        words = line.split()
    if not words or words[0] not in _SAFE_COMMANDS:
        return False
    return all(not (w.startswith("/") or ".." in w) for w in words[1:])


def _not_allow_listed(args: dict[str, Any]) -> bool:
    return not is_allow_listed(args)


def demo_policies(workspace: str | os.PathLike[str]) -> list[Any]:
    """The demo's policy set; every bucket it uses is named in the output.

    * bucket 0 (specific deny): `no-destructive-shell`, `workspace_only`,
      `shell-not-allow-listed`
    * bucket 2 (specific allow): `safe-shell` (the allow-list)
    * bucket 8 (`*` allow): `allow_all`, for everything else (reads and writes
      that `workspace_only` did not stop)
    """
    return [
        policy.deny(
            "run_command",
            when=is_destructive,
            name="no-destructive-shell",
            reason="Denied by policy 'no-destructive-shell': destructive shell commands "
            "(rm -r/-f, sudo, mkfs, dd, shred) are never run.",
        ),
        policy.workspace_only([workspace]),
        policy.deny(
            "run_command",
            when=_not_allow_listed,
            name="shell-not-allow-listed",
            reason="Denied by policy 'shell-not-allow-listed': only simple read-only "
            f"commands ({', '.join(sorted(_SAFE_COMMANDS))}) on workspace paths may run.",
        ),
        policy.allow("run_command", when=is_allow_listed, name="safe-shell"),
        policy.allow_all(),
    ]


# -- records ----------------------------------------------------------------------------------


@dataclass
class DecisionRecord:
    """One tool call as the demo saw it: the decision, why, how fast, what happened."""

    index: int
    tool: str
    args: dict[str, Any]
    call_id: str
    allow: bool
    verdict: str  # "ALLOW", "DENY" or "ASK" (an ask_user policy; the handler decides)
    decided_by: str  # "policy" or "hook"
    rule: str  # the deciding policy's label, the hook's name, or "(no match)"
    bucket: int | None
    bucket_name: str
    message: str
    latency_ns: int
    ran: bool | None = None  # True: the tool ran; False: blocked or failed; None: unknown
    outcome: str = ""  # a short description of what happened

    @property
    def latency_us(self) -> float:
        return self.latency_ns / 1000


@dataclass
class DemoReport:
    """Everything one demo (or chat) session produced, for printing and for tests."""

    records: list[DecisionRecord] = field(default_factory=list)
    answer: str = ""
    model: str = ""
    scripted: bool = True
    workspace: str = ""
    workspace_files: dict[str, str] = field(default_factory=dict)
    outside_files: list[str] = field(default_factory=list)
    audit_events: list[dict[str, Any]] = field(default_factory=list)
    start_seconds: float = 0.0
    turn_seconds: float = 0.0
    error: str = ""
    checks: list[tuple[str, bool]] = field(default_factory=list)

    @property
    def allowed(self) -> list[DecisionRecord]:
        return [r for r in self.records if r.allow]

    @property
    def denied(self) -> list[DecisionRecord]:
        return [r for r in self.records if not r.allow]

    def rule_counts(self) -> Counter[str]:
        return Counter(r.rule for r in self.records)

    def median_latency_us(self) -> float:
        values = [r.latency_us for r in self.records]
        return statistics.median(values) if values else 0.0

    def find(self, tool: str, needle: str = "") -> DecisionRecord:
        """The first record of `tool` whose main argument (command line or path, see
        `short_args`) contains `needle`."""
        for record in self.records:
            if record.tool == tool and needle in short_args(tool, record.args):
                return record
        raise LookupError(f"no {tool} call with {needle!r} in its arguments")

    @property
    def ok(self) -> bool:
        return not self.error and all(passed for _, passed in self.checks)


# -- terminal output ---------------------------------------------------------------------------


class _Style:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled else text

    def green(self, text: str) -> str:
        return self._wrap("32", text)

    def red(self, text: str) -> str:
        return self._wrap("31", text)

    def yellow(self, text: str) -> str:
        return self._wrap("33", text)

    def bold(self, text: str) -> str:
        return self._wrap("1", text)

    def dim(self, text: str) -> str:
        return self._wrap("2", text)


def _is_tty(out: TextIO) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False


_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _clean(text: str, width: int) -> str:
    """One line, no control characters (model-chosen text must not drive the terminal)."""
    flat = _CONTROL.sub(" ", text.replace("\n", " ⏎ "))
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _short_path(raw: object, workspace: str) -> str:
    path = str(raw)
    if workspace and path.startswith(workspace + "/"):
        return "<ws>/" + path[len(workspace) + 1 :]
    return path


def short_args(tool: str, args: dict[str, Any], workspace: str = "") -> str:
    """A compact, single-line rendering of a call's arguments."""
    if tool == "run_command":
        return f"$ {args.get('CommandLine', '')}"
    if tool in ("write_to_file", "replace_file_content"):
        content = args.get("CodeContent", args.get("ReplacementContent", ""))
        size = len(str(content).encode())
        return f"{_short_path(args.get('TargetFile', ''), workspace)} ({size} B)"
    for key in ("AbsolutePath", "DirectoryPath", "SearchPath", "SearchDirectory"):
        if key in args:
            return _short_path(args[key], workspace)
    return json.dumps(args, default=str, sort_keys=True)


def _describe_result(result: ToolResult) -> str:
    value = result.result
    if isinstance(value, dict) and "exit_code" in value:
        output = str(value.get("combined_output", "")).replace("\r\n", "\n").strip()
        lines = output.count("\n") + 1 if output else 0
        first = output.splitlines()[0] if output else ""
        return f"exit {value['exit_code']}, {lines} line(s) of output: {first!r}"
    if isinstance(value, str) and value and value != "Tool execution":
        return _clean(value, 60)
    return "done"


# -- hooks -------------------------------------------------------------------------------------


class DecisionReporter(Hook):
    """Shows each tool call as it is decided, and what became of it.

    Register it before the `PolicyEnforcer` (the `Agent` does: user hooks come first).
    `pre_tool_call` asks the enforcer to explain the call, times that, records and prints
    it, and allows: the enforcer, which runs next, makes the real decision. Hooks that
    decide earlier call `hook_denied` so their denials are shown too.
    """

    def __init__(
        self,
        out: TextIO,
        *,
        workspace: str = "",
        enforcer: policy.PolicyEnforcer | None = None,
        color: bool | None = None,
    ) -> None:
        self.out = out
        self.workspace = workspace
        self.enforcer = enforcer
        self.records: list[DecisionRecord] = []
        self._by_id: dict[str, DecisionRecord] = {}
        self.style = _Style(_is_tty(out) if color is None else color)

    # The enforcer is only known once the agent is built; `demo_session` sets it.
    def _record(self, record: DecisionRecord) -> None:
        self.records.append(record)
        if record.call_id:
            self._by_id[record.call_id] = record
        self._print_decision(record)

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        if self.enforcer is None:
            raise RuntimeError("DecisionReporter.enforcer is not set")
        clock = time.perf_counter_ns
        began = clock()
        explained = await self.enforcer.evaluate(tool_call, ask=False)
        elapsed = clock() - began
        asks = explained.decision is policy.Decision.ASK_USER
        self._record(
            DecisionRecord(
                index=len(self.records) + 1,
                tool=tool_call.qualified_name,
                args=dict(tool_call.args),
                call_id=tool_call.id,
                allow=explained.allow,
                verdict="ASK" if asks else ("ALLOW" if explained.allow else "DENY"),
                decided_by="policy",
                rule=explained.policy.label if explained.policy is not None else "(no match)",
                bucket=explained.bucket,
                bucket_name=explained.bucket_name,
                message=explained.message,
                latency_ns=elapsed,
                ran=False if not (explained.allow or asks) else None,
                outcome="" if explained.allow or asks else "blocked before it ran",
            )
        )
        return HookResult.ALLOWED

    def hook_denied(self, hook: str, tool_call: ToolCall, message: str, latency_ns: int) -> None:
        """Record a call that a hook running before this reporter denied."""
        self._record(
            DecisionRecord(
                index=len(self.records) + 1,
                tool=tool_call.qualified_name,
                args=dict(tool_call.args),
                call_id=tool_call.id,
                allow=False,
                verdict="DENY",
                decided_by="hook",
                rule=hook,
                bucket=None,
                bucket_name="hook",
                message=message,
                latency_ns=latency_ns,
                ran=False,
                outcome="blocked before it ran",
            )
        )

    async def post_tool_call(self, result: ToolResult) -> None:
        record = self._by_id.get(result.id)
        if record is None:
            return
        record.ran = True
        record.outcome = _describe_result(result)
        if record.verdict == "ASK":
            record.allow = True
        self._print_outcome(record)

    async def on_tool_error(self, error: Exception) -> tuple[HookResult, Any | None]:
        call = error.tool_call if isinstance(error, ToolExecutionError) else None
        record = self._by_id.get(call.id) if call is not None else None
        if record is not None:
            record.ran = False
            record.outcome = f"failed: {error}"
            self._print_outcome(record)
        return HookResult(allow=False, message=str(error)), None

    def finish(self) -> None:
        """After the turn: an ASK decision with no result means the user refused."""
        for record in self.records:
            if record.verdict == "ASK" and record.ran is None:
                record.allow, record.ran, record.outcome = False, False, "not approved"

    # -- printing

    def _print_decision(self, r: DecisionRecord) -> None:
        s = self.style
        if r.verdict == "ALLOW":
            verdict = s.green("ALLOW")
        elif r.verdict == "ASK":
            verdict = s.yellow("ASK  ")
        else:
            verdict = s.red("DENY ")
        where = f"[{r.bucket} {r.bucket_name}]" if r.bucket is not None else f"[{r.bucket_name}]"
        args = _clean(short_args(r.tool, r.args, self.workspace), 34)
        self.out.write(
            f" {r.index:>2} {s.bold(f'{r.tool:<14}')} {args:<34} {verdict} "
            f"{where:<18} {r.rule:<22} {s.dim(f'{r.latency_us:7.1f} µs')}\n"
        )
        if not r.allow and r.verdict != "ASK":
            self.out.write(s.dim(f"      ↳ not run: {_clean(r.message, 90)}") + "\n")
        self.out.flush()

    def _print_outcome(self, r: DecisionRecord) -> None:
        s = self.style
        mark = s.green("ran") if r.ran else s.yellow("tool error")
        self.out.write(f"      ↳ {mark}: {_clean(r.outcome, 84)}\n")
        self.out.flush()


class SecretGuard(Hook):
    """A deciding hook: refuses file writes whose content looks like a credential.

    Hooks decide alongside policies; this one runs before the reporter, so it tells the
    reporter about its denials.
    """

    PATTERN: Final = re.compile(
        r"(sk_live_[0-9A-Za-z]{10,}|AKIA[0-9A-Z]{16}|-----BEGIN [A-Z ]*PRIVATE KEY-----"
        r"|ghp_[0-9A-Za-z]{30,})"
    )

    def __init__(self, reporter: DecisionReporter | None = None) -> None:
        self.reporter = reporter

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        if tool_call.name not in ("write_to_file", "replace_file_content"):
            return HookResult.ALLOWED
        began = time.perf_counter_ns()
        content = str(
            tool_call.args.get("CodeContent", tool_call.args.get("ReplacementContent", ""))
        )
        if not self.PATTERN.search(content):
            return HookResult.ALLOWED
        result = HookResult.denied(
            "Denied by hook 'SecretGuard': the content looks like a credential; "
            "secrets are never written to disk by the agent."
        )
        if self.reporter is not None:
            self.reporter.hook_denied(
                "SecretGuard", tool_call, result.message, time.perf_counter_ns() - began
            )
        return result


class AuditLog(Hook):
    """An inspecting hook: an append-only record of the session (JSON lines if `path`)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.events: list[dict[str, Any]] = []

    def _log(self, event: str, **fields: Any) -> None:
        entry = {"t": round(time.time(), 6), "event": event, **fields}
        self.events.append(entry)
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(entry, default=str) + "\n")

    async def on_session_start(self) -> None:
        self._log("session_start")

    async def pre_turn(self) -> HookResult:
        self._log("turn_start")
        return HookResult.ALLOWED

    async def post_tool_call(self, result: ToolResult) -> None:
        self._log("tool_ran", tool=result.name, id=result.id)

    async def on_tool_error(self, error: Exception) -> tuple[HookResult, Any | None]:
        self._log("tool_error", error=str(error))
        return HookResult(allow=False, message=str(error)), None

    async def post_turn(self, response: ChatResponse) -> None:
        self._log("turn_end", chars=len(response.text))

    async def on_session_end(self) -> None:
        self._log("session_end")


# -- the scripted session ------------------------------------------------------------------


def demo_prompt(workspace: str) -> str:
    """The task, for the scripted model and for a real one alike."""
    ws = workspace
    return f"""\
This is a demonstration of tool-call governance. Your workspace is {ws}.
Do the following steps in order, one tool call at a time. Some steps are meant to be
refused by policy: when a step is refused, do not retry it and do not work around it;
go on with the next step.
1. Read {ws}/README.md with view_file.
2. Write a short summary of it to {ws}/notes.txt with write_to_file (Overwrite: true).
3. Run `cat notes.txt` with run_command (Cwd: {ws}).
4. Run `rm -rf build` with run_command (Cwd: {ws}) to clean the build directory.
5. Read /etc/passwd with view_file.
6. Write the text "escaped" to {ws}/../escaped.txt with write_to_file (Overwrite: true).
7. Write the line {FAKE_SECRET} to {ws}/.env with write_to_file (Overwrite: true).
Then answer with a short summary: which steps worked, which were refused, and why."""


def _script_steps(ws: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("view_file", {"AbsolutePath": f"{ws}/README.md"}),
        (
            "write_to_file",
            {"TargetFile": f"{ws}/notes.txt", "CodeContent": NOTES_TEXT, "Overwrite": True},
        ),
        ("run_command", {"CommandLine": "cat notes.txt", "Cwd": ws, "WaitMsBeforeAsync": 5000}),
        ("run_command", {"CommandLine": "rm -rf build", "Cwd": ws, "WaitMsBeforeAsync": 5000}),
        ("view_file", {"AbsolutePath": "/etc/passwd"}),
        (
            "write_to_file",
            {"TargetFile": f"{ws}/../escaped.txt", "CodeContent": "escaped\n", "Overwrite": True},
        ),
        (
            "write_to_file",
            {"TargetFile": f"{ws}/.env", "CodeContent": FAKE_SECRET + "\n", "Overwrite": True},
        ),
    ]


_STEP_TITLES: Final = (
    "read README.md",
    "write notes.txt",
    "run `cat notes.txt`",
    "run `rm -rf build`",
    "read /etc/passwd",
    "write ../escaped.txt",
    "write a secret to .env",
)


def _scripted_model(ws: str) -> Any:
    """A ScriptedModel walking through the steps, then summarising what it was told."""
    from .testing import ScriptedModel, text, tool_call

    steps = _script_steps(ws)

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        done = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
        if done < len(steps):
            name, args = steps[done]
            return tool_call(name, **args)
        results = [m for m in messages if m.get("role") == "tool"]
        lines = ["Summary of the session:"]
        for title, result in zip(_STEP_TITLES, results, strict=False):
            content = str(result.get("content", ""))
            if "denied by pre-tool hook" in content:
                reason = content.split("denied by pre-tool hook:", 1)[1].strip()
                rule = re.search(r"(policy|hook) '([^']+)'", reason)
                why = f"{rule.group(1)} '{rule.group(2)}'" if rule else reason[:60]
                lines.append(f"- {title}: refused ({why})")
            elif "Encountered error" in content:
                lines.append(f"- {title}: failed")
            else:
                lines.append(f"- {title}: done")
        return text("\n".join(lines))

    return ScriptedModel(script)


def _expectations(report: DemoReport) -> list[tuple[str, bool]]:
    """What the scripted demo must show; `run_demo` exits 1 if any fails."""

    def check(tool: str, needle: str, allow: bool, rule: str, ran: bool | None) -> bool:
        try:
            r = report.find(tool, needle)
        except LookupError:
            return False
        return r.allow is allow and r.rule == rule and r.ran is ran

    return [
        ("README read (allow_all)", check("view_file", "README.md", True, "allow_all", True)),
        (
            "notes.txt written (allow_all)",
            check("write_to_file", "notes.txt", True, "allow_all", True)
            and report.workspace_files.get("notes.txt") == NOTES_TEXT,
        ),
        ("`cat notes.txt` ran (safe-shell)", check("run_command", "cat", True, "safe-shell", True)),
        (
            "`rm -rf` denied (no-destructive-shell)",
            check("run_command", "rm -rf", False, "no-destructive-shell", False),
        ),
        (
            "/etc/passwd denied (workspace_only)",
            check("view_file", "/etc/passwd", False, "workspace_only", False),
        ),
        (
            "../escaped.txt denied (workspace_only)",
            check("write_to_file", "escaped", False, "workspace_only", False)
            and "escaped.txt" not in report.outside_files,
        ),
        (
            ".env secret denied (SecretGuard hook)",
            check("write_to_file", "/.env", False, "SecretGuard", False)
            and ".env" not in report.workspace_files,
        ),
    ]


def _snapshot(directory: Path, limit: int = 64 * 1024) -> dict[str, str]:
    files: dict[str, str] = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            try:
                files[str(path.relative_to(directory))] = path.read_text(errors="replace")[:limit]
            except OSError:
                continue
    return files


class ModelNotConfiguredError(AntigravityError):
    """No usable model: the demo or chat cannot run (exit code 2)."""


@dataclass
class _ModelChoice:
    scripted: bool
    label: str
    name: str | None = None
    base_url: str | None = None


def _choose_model(base_url: str | None, model: str | None, *, allow_scripted: bool) -> _ModelChoice:
    """Scripted unless a real model is configured; raises AntigravityError when unusable."""
    if base_url:
        if not model:
            raise ModelNotConfiguredError("--base-url needs --model (the model name it serves)")
        return _ModelChoice(False, f"{model} at {base_url}", model, base_url)
    if model or os.environ.get("GEMINI_API_KEY"):
        if not os.environ.get("GEMINI_API_KEY"):
            raise ModelNotConfiguredError(
                f"model {model!r} is a Gemini model, which needs GEMINI_API_KEY; "
                "for an OpenAI-compatible endpoint pass base_url too"
            )
        from .harness.config import DEFAULT_GEMINI_MODEL

        name = model or DEFAULT_GEMINI_MODEL
        return _ModelChoice(False, f"Gemini {name}", name)
    if not allow_scripted:
        raise ModelNotConfiguredError(
            "no model configured: set GEMINI_API_KEY, or pass base_url and model for an "
            "OpenAI-compatible endpoint (e.g. --base-url http://127.0.0.1:11434/v1 "
            "--model qwen3)"
        )
    return _ModelChoice(True, "ScriptedModel (offline)")


async def demo_session(
    *,
    base_url: str | None = None,
    model: str | None = None,
    out: TextIO | None = None,
    harness_path: str | None = None,
    scripted: bool | None = None,
    turn_timeout: float = 300.0,
) -> DemoReport:
    """Run the demo session and return its structured report (printing to `out` if given).

    `scripted=True` forces the offline ScriptedModel; `None` picks a real model when one
    is configured (`base_url`/`model`, or `GEMINI_API_KEY`). Raises `AntigravityError`
    (e.g. `HarnessNotFoundError`) when the session cannot start.
    """
    from .agent import Agent

    sink = out if out is not None else io.StringIO()
    try:
        choice = (
            _ModelChoice(True, "ScriptedModel (offline)")
            if scripted
            else _choose_model(base_url, model, allow_scripted=scripted is None)
        )
        with tempfile.TemporaryDirectory(prefix="antigravity-demo-") as tmp:
            root, ws = _prepare(tmp)
            report = DemoReport(model=choice.label, scripted=choice.scripted, workspace=str(ws))
            reporter = DecisionReporter(sink, workspace=str(ws))
            audit = AuditLog(root / "audit.jsonl")
            builder = (
                Agent.builder()
                .hooks([audit, SecretGuard(reporter), reporter])
                .policies(demo_policies(ws))
                .workspaces([ws])
                .save_dir(root / "conversations")
                .app_data_dir(root / "app-data")
                .turn_timeout(turn_timeout)
            )
            if choice.scripted:
                builder.model(_scripted_model(str(ws)))
            else:
                assert choice.name is not None
                builder.model(choice.name, base_url=choice.base_url)
            if harness_path:
                builder.harness_path(harness_path)
            agent = builder.build()
            reporter.enforcer = agent.policy_enforcer
            _print_header(sink, reporter.style, report, agent.policy_enforcer)
            began = time.perf_counter()
            async with agent:
                report.start_seconds = time.perf_counter() - began
                began = time.perf_counter()
                try:
                    response = await agent.chat(demo_prompt(str(ws)))
                    report.answer = response.text
                except AntigravityError as exc:
                    report.error = str(exc)
                report.turn_seconds = time.perf_counter() - began
            reporter.finish()
            report.records = reporter.records
            report.audit_events = audit.events
            report.workspace_files = _snapshot(ws)
            report.outside_files = sorted(
                p.name for p in root.iterdir() if p.is_file() and p.name != "audit.jsonl"
            )
        if choice.scripted:
            report.checks = _expectations(report)
        _print_footer(sink, reporter.style, report)
        return report
    finally:
        if out is None:
            sink.close()


def _prepare(tmp: str) -> tuple[Path, Path]:
    """The demo's temporary root and its workspace: a README and a build directory."""
    root = Path(tmp).resolve()
    ws = root / "workspace"
    ws.mkdir()
    (ws / "README.md").write_text(README_TEXT)
    (ws / "build").mkdir()
    (ws / "build" / "app.bin").write_text("pretend binary\n")
    return root, ws


def _print_header(
    out: TextIO, s: _Style, report: DemoReport, enforcer: policy.PolicyEnforcer
) -> None:
    out.write(s.bold("antigravity demo") + f" — real harness, model: {report.model}\n")
    out.write(f"workspace: {report.workspace} (temporary)\n")
    out.write("hooks (in order): AuditLog, SecretGuard, DecisionReporter, then the policies:\n")
    ranked = sorted(enumerate(enforcer.policies), key=lambda p: (p[1].bucket, p[0]))
    seen: set[tuple[str, int]] = set()
    for _, p in ranked:
        bucket = p.bucket
        if (p.label, bucket) in seen:  # workspace_only is one policy per path-taking tool
            continue
        seen.add((p.label, bucket))
        tools = sorted({q.tool for q in enforcer.policies if q.label == p.label})
        shown = ", ".join(tools) if len(tools) <= 2 else f"{len(tools)} path-taking tools"
        out.write(
            s.dim(f"  [{bucket} {policy.BUCKETS[bucket]:<14}] {p.label:<22} {p.decision.name:<7}")
            + s.dim(f"  {shown}")
            + "\n"
        )
    out.write("\n")
    out.write(
        s.dim(
            f" {'#':>2} {'tool':<14} {'arguments':<34} {'verdict':<5} "
            f"{'bucket':<18} {'rule':<22} {'decision':>10}"
        )
        + "\n"
    )
    out.flush()


def _print_footer(out: TextIO, s: _Style, report: DemoReport) -> None:
    if report.error:
        out.write(s.red(f"\nthe turn failed: {report.error}\n"))
    if report.answer:
        out.write("\n" + s.bold("model's answer:") + "\n")
        for line in report.answer.strip().splitlines():
            out.write(f"  {_clean(line, 100)}\n")
    records = report.records
    out.write("\n" + s.bold("summary") + "\n")
    rows = [
        ("tool calls", str(len(records))),
        ("allowed", str(len(report.allowed))),
        ("denied", str(len(report.denied))),
        ("ran", str(sum(1 for r in records if r.ran))),
        ("median decision latency", f"{report.median_latency_us():.1f} µs"),
        ("agent start", f"{report.start_seconds * 1000:.0f} ms"),
        ("turn wall time", f"{report.turn_seconds * 1000:.0f} ms"),
        ("audit events", str(len(report.audit_events))),
    ]
    for label, value in rows:
        out.write(f"  {label:<26} {value}\n")
    counts = report.rule_counts()
    if counts:
        out.write("  decisions per rule:\n")
        for rule, n in counts.most_common():
            out.write(f"    {rule:<24} {n}\n")
    if report.checks:
        passed = sum(1 for _, ok in report.checks if ok)
        out.write(f"  checks: {passed}/{len(report.checks)} as expected\n")
        for label, ok in report.checks:
            if not ok:
                out.write(s.red(f"    FAILED: {label}") + "\n")
    out.flush()


def _error(out: TextIO, exc: AntigravityError) -> None:
    out.write(f"error: {exc}\n")
    out.flush()


async def run_demo(
    *,
    base_url: str | None = None,
    model: str | None = None,
    out: TextIO = sys.stdout,
    harness_path: str | None = None,
) -> int:
    """`antigravity demo`: 0 when the session went as designed, 1 if not, 2 when it
    could not run (no harness, an unusable model configuration)."""
    from .errors import HarnessNotFoundError

    try:
        report = await demo_session(
            base_url=base_url, model=model, out=out, harness_path=harness_path
        )
    except (HarnessNotFoundError, PolicyError, ModelNotConfiguredError) as exc:
        _error(out, exc)
        return 2
    except AntigravityError as exc:
        _error(out, exc)
        return 1
    return 0 if report.ok else 1


def _chat_policies(policies_file: str | None, workspace: Path) -> list[Any]:
    if policies_file is not None:
        return policy.load(policies_file)
    from .interactive import confirm_in_terminal

    return [
        policy.deny(
            "run_command",
            when=is_destructive,
            name="no-destructive-shell",
            reason="Denied by policy 'no-destructive-shell': destructive shell commands "
            "are never run.",
        ),
        policy.workspace_only([workspace]),
        *policy.confirm_run_command(confirm_in_terminal),
    ]


async def run_chat(
    prompt: str,
    *,
    policies_file: str | None = None,
    base_url: str | None = None,
    model: str | None = None,
    out: TextIO = sys.stdout,
) -> int:
    """`antigravity chat PROMPT`: one turn on a real model in the current directory.

    Policies come from the TOML `policies_file` (`policy.load`), else the defaults:
    no destructive shell commands, `workspace_only` on the current directory, and every
    other shell command confirmed on the terminal (denied without one). Each decision
    and the answer are printed. Exit codes: 0 answered, 1 the turn failed or was
    denied, 2 not runnable (no model configured, bad policy file, no harness).
    """
    from .agent import Agent
    from .errors import HarnessNotFoundError

    try:
        choice = _choose_model(base_url, model, allow_scripted=False)
    except ModelNotConfiguredError as exc:
        _error(out, exc)
        return 2
    workspace = Path.cwd().resolve()
    try:
        policies = _chat_policies(policies_file, workspace)
    except (PolicyError, OSError) as exc:
        out.write(f"error: {exc}\n")
        return 2
    reporter = DecisionReporter(out, workspace=str(workspace))
    try:
        with tempfile.TemporaryDirectory(prefix="antigravity-chat-") as tmp:
            root = Path(tmp)
            assert choice.name is not None
            agent = (
                Agent.builder()
                .hook(reporter)
                .policies(policies)
                .workspaces([workspace])
                .model(choice.name, base_url=choice.base_url)
                .save_dir(root / "conversations")
                .app_data_dir(root / "app-data")
                .build()
            )
            reporter.enforcer = agent.policy_enforcer
            out.write(f"model: {choice.label}; workspace: {workspace}\n")
            async with agent:
                response = await agent.chat(prompt)
            reporter.finish()
    except PolicyError as exc:
        out.write(f"error: {exc}\n")
        return 2
    except HarnessNotFoundError as exc:
        out.write(f"error: {exc}\n")
        return 2
    except AntigravityError as exc:
        out.write(f"error: {exc}\n")
        return 1
    out.write("\n" + reporter.style.bold("answer:") + "\n" + response.text.strip() + "\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m antigravity_sdk.demo [--base-url URL --model M] [--harness PATH]`, or
    `python -m antigravity_sdk.demo chat PROMPT [--policies FILE] [...]`."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m antigravity_sdk.demo")
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--model", default=None)
    parser.add_argument("--harness", default=None)
    parser.add_argument("--policies", default=None)
    parser.add_argument("words", nargs="*", help="chat PROMPT... for one chat turn")
    args = parser.parse_args(argv)
    if args.words and args.words[0] == "chat":
        prompt = " ".join(args.words[1:])
        if not prompt:
            parser.error("chat needs a PROMPT")
        return asyncio.run(
            run_chat(prompt, policies_file=args.policies, base_url=args.base_url, model=args.model)
        )
    if args.words:
        parser.error(f"unknown command {args.words[0]!r}")
    return asyncio.run(
        run_demo(base_url=args.base_url, model=args.model, harness_path=args.harness)
    )


if __name__ == "__main__":
    sys.exit(main())
