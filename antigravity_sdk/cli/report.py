"""The terminal report of a governed session, for `antigravity demo` and `antigravity chat`.

How the decisions are shown: `DecisionReporter` is a `Hook` registered before the
`PolicyEnforcer` (the agent registers user hooks first). It asks the enforcer to
*explain* the call (`PolicyEnforcer.evaluate`) and times that; the enforcer itself still
makes the actual decision right after. Hooks that decide before the reporter report
their own denials to it (`hook_denied`). Everything model-chosen is printed on one line
without control characters, so a model cannot drive the terminal.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TextIO

from .. import policy
from ..errors import (
    AntigravityError,
    HarnessNotFoundError,
    ModelNotConfiguredError,
    PolicyError,
    ToolExecutionError,
)
from ..hooks import Hook
from ..types import HookResult, ToolCall, ToolResult

if TYPE_CHECKING:
    from ..harness.config import ModelSettings

__all__ = [
    "DecisionRecord",
    "DecisionReporter",
    "DemoReport",
    "Style",
    "model_label",
    "print_error",
    "print_footer",
    "print_header",
    "short_args",
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

    @property
    def blocked(self) -> bool:
        """Denied outright, not left to an ask handler."""
        return not self.allow and self.verdict != "ASK"


@dataclass
class DemoReport:
    """Everything one demo session produced, for printing and for tests."""

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


class Style:
    """ANSI colours, or plain text when `enabled` is false (not a terminal)."""

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
        self.enforcer = enforcer  # known once the agent is built: the commands set it then
        self.records: list[DecisionRecord] = []
        self._by_id: dict[str, DecisionRecord] = {}
        self.style = Style(_is_tty(out) if color is None else color)

    def _record(self, tool_call: ToolCall, **decision: Any) -> None:
        """Record and print a decision on `tool_call` (`decision`: the record's other
        fields); a call denied outright is marked as not run."""
        record = DecisionRecord(
            index=len(self.records) + 1,
            tool=tool_call.qualified_name,
            args=dict(tool_call.args),
            call_id=tool_call.id,
            **decision,
        )
        if record.blocked:
            record.ran, record.outcome = False, "blocked before it ran"
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
            tool_call,
            allow=explained.allow,
            verdict="ASK" if asks else ("ALLOW" if explained.allow else "DENY"),
            decided_by="policy",
            rule=explained.policy.label if explained.policy is not None else "(no match)",
            bucket=explained.bucket,
            bucket_name=explained.bucket_name,
            message=explained.message,
            latency_ns=elapsed,
        )
        return HookResult.ALLOWED

    def hook_denied(self, hook: str, tool_call: ToolCall, message: str, latency_ns: int) -> None:
        """Record a call that a hook running before this reporter denied."""
        self._record(
            tool_call,
            allow=False,
            verdict="DENY",
            decided_by="hook",
            rule=hook,
            bucket=None,
            bucket_name="hook",
            message=message,
            latency_ns=latency_ns,
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
        if r.blocked:
            self.out.write(s.dim(f"      ↳ not run: {_clean(r.message, 90)}") + "\n")
        self.out.flush()

    def _print_outcome(self, r: DecisionRecord) -> None:
        s = self.style
        mark = s.green("ran") if r.ran else s.yellow("tool error")
        self.out.write(f"      ↳ {mark}: {_clean(r.outcome, 84)}\n")
        self.out.flush()


# -- around the decisions ----------------------------------------------------------------------


def print_header(
    out: TextIO,
    s: Style,
    report: DemoReport,
    hooks: Sequence[Hook],
    enforcer: policy.PolicyEnforcer,
) -> None:
    """The session's model, workspace, hooks and policies, then the decision table's head."""
    out.write(s.bold("antigravity demo") + f" — real harness, model: {report.model}\n")
    out.write(f"workspace: {report.workspace} (temporary)\n")
    names = ", ".join(type(hook).__name__ for hook in hooks)
    out.write(f"hooks (in order): {names}, then the policies:\n")
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


def print_footer(out: TextIO, s: Style, report: DemoReport) -> None:
    """The model's answer, the summary numbers and, for the scripted demo, its checks."""
    if report.error:
        out.write(s.red(f"\nerror: {report.error}\n"))  # the error says what failed
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


def model_label(settings: ModelSettings | None) -> str:
    """How the header names the model; None is the demo's offline script."""
    if settings is None:
        return "ScriptedModel (offline)"
    if settings.base_url is not None:
        return f"{settings.name} at {settings.base_url}"
    return f"Gemini {settings.name}"


_NOT_RUNNABLE: Final = (HarnessNotFoundError, PolicyError, ModelNotConfiguredError)

_MODEL_OPTIONS: Final = (
    "set GEMINI_API_KEY, or pass --base-url and --model for an OpenAI-compatible endpoint "
    "(e.g. --base-url http://127.0.0.1:11434/v1 --model qwen3)"
)


def print_error(out: TextIO, exc: AntigravityError) -> int:
    """Print why the session failed; return the exit code: 2 when it could not run (no
    harness, an unusable model or policy configuration), else 1."""
    out.write(f"error: {exc}\n")
    if isinstance(exc, ModelNotConfiguredError):
        out.write(f"on the command line: {_MODEL_OPTIONS}\n")
    out.flush()
    return 2 if isinstance(exc, _NOT_RUNNABLE) else 1
