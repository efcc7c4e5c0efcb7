"""The terminal report of a governed session, for `antigravity demo` and `antigravity chat`.

How the decisions are shown: `DecisionReporter` is a `Hook` registered before the
`PolicyEnforcer` (the agent registers user hooks first). It asks the enforcer to
*explain* the call (`PolicyEnforcer.evaluate`) and times that; the enforcer itself still
makes the actual decision right after. Hooks that decide before the reporter report
their own denials to it (`hook_denied`), and an ask handler wrapped by `asking` reports
the user's answer. Rendering is `rich`'s (the `cli` extra): rows fit the terminal's width,
and a deny reason is printed whole, wrapped. Everything model-chosen goes through
`interactive.escape_for_terminal` first (control and format characters shown as escapes), so a
model cannot drive the terminal.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TextIO

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from .. import policy
from ..errors import (
    AntigravityError,
    HarnessNotFoundError,
    ModelNotConfiguredError,
    PolicyError,
    ToolExecutionError,
)
from ..hooks import Hook
from ..interactive import escape_for_terminal
from ..types import HookResult, ToolCall, ToolResult

if TYPE_CHECKING:
    from ..harness.config import ModelSettings

__all__ = [
    "DecisionRecord",
    "DecisionReporter",
    "DemoReport",
    "make_console",
    "model_label",
    "policy_table",
    "print_error",
    "print_footer",
    "print_header",
    "printable",
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
    """How long the deciding policies took (`PolicyEnforcer.evaluate`, timed by the
    reporter), or a denying hook: the row's `decided in`, an audit line's `policy_us`."""
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
    containment: list[str] = field(default_factory=list)
    """What the harness ran in, as printed at start."""

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


def make_console(out: TextIO, *, color: bool | None = None) -> Console:
    """A rich console writing to `out`: colours and the terminal's width on a terminal,
    plain text (`COLUMNS` or 80 wide) otherwise; `color` forces either way."""
    return Console(
        file=out,
        force_terminal=color,
        no_color=color is False,
        highlight=False,
        markup=False,
        emoji=False,
    )


def printable(text: str) -> str:
    """Model-chosen text as it may reach the terminal: line breaks kept, tabs as spaces,
    every other character that could drive the terminal shown as an escape."""
    return "\n".join(escape_for_terminal(line) for line in text.replace("\t", "    ").split("\n"))


def _one_line(text: str) -> str:
    """Model-chosen text on one line (a line break shown as ⏎), nothing escaped away."""
    return escape_for_terminal(text.replace("\r\n", "\n").replace("\n", " ⏎ "))


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
        return value
    return "done"


_VERDICT_STYLE: Final = {"ALLOW": "green", "ASK": "yellow", "DENY": "red"}


_WIDE: Final = 110
"""From this console width on, rows name each bucket; narrower, only its number."""


def _row_grid(width: int, terminal: bool = True) -> Table:
    """The decision table's columns. On a terminal only the arguments give way on a
    narrow one (cut with …, they are the call's summary); rule names wrap, whole. Off a
    terminal (a pipe, a log: what is kept) the arguments are whole too, wrapped at words
    in their column."""
    grid = Table.grid(padding=(0, 1), expand=True)
    grid.add_column(justify="right", width=3, no_wrap=True)  # #
    grid.add_column(width=14, overflow="fold")  # tool
    if terminal:
        grid.add_column(ratio=1, no_wrap=True, overflow="ellipsis")  # arguments
    else:
        grid.add_column(ratio=1, overflow="fold")
    grid.add_column(width=5, no_wrap=True)  # verdict
    grid.add_column(width=18 if width >= _WIDE else 6, overflow="fold")  # bucket
    grid.add_column(width=22, overflow="fold")  # rule
    grid.add_column(width=10, justify="right", no_wrap=True)  # decided in
    return grid


def _nothing() -> None:
    pass


class _RefusalRows(logging.Handler):
    def __init__(self, reporter: DecisionReporter) -> None:
        super().__init__(logging.WARNING)
        self.reporter = reporter

    def emit(self, record: logging.LogRecord) -> None:
        refusal = getattr(record, "refusal", None)
        if refusal is not None:
            record.shown_as_row = True  # the warnings' handler leaves it out
            self.reporter.network_refused(refusal.host, refusal.port, refusal.reason)


# -- hooks -------------------------------------------------------------------------------------


class DecisionReporter(Hook):
    """Shows each tool call as it is decided, and what became of it.

    Register it before the `PolicyEnforcer` (the `Agent` does: user hooks come first).
    `pre_tool_call` asks the enforcer to explain the call, times that, records and prints
    it, and allows: the enforcer, which runs next, makes the real decision. Hooks that
    decide earlier call `hook_denied` so their denials are shown too, and an ask handler
    wrapped by `asking` reports the user's answer.
    """

    def __init__(
        self,
        out: TextIO | Console,
        *,
        workspace: str = "",
        enforcer: policy.PolicyEnforcer | None = None,
        color: bool | None = None,
    ) -> None:
        self.console = out if isinstance(out, Console) else make_console(out, color=color)
        self.workspace = workspace
        self.enforcer = enforcer  # known once the agent is built: the commands set it then
        self.records: list[DecisionRecord] = []
        self._by_id: dict[str, DecisionRecord] = {}
        self._last_row: DecisionRecord | None = None  # the row the next line goes under
        self.mid_line = False  # streamed text left the cursor mid-line
        self._paragraph = ""  # the streamed line so far (escaped), unwrapped
        self._shown = ("", "")  # what of it is printed: (its text, as wrapped)
        self._head_shown = False
        self.activity: Callable[[], None] = _nothing
        """Called before anything is printed (`waiting.ModelWait` hides its indicator)."""
        self.accepting = True
        """False between the turns of an interactive session: a tool call then is a
        leftover of a cancelled turn, denied without a row (nothing of the cancelled
        turn may print after the next prompt)."""

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
        if not self.accepting:
            return HookResult(allow=False, message="the turn was cancelled")
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

    def network_refused(self, host: str, port: int, reason: str) -> None:
        """Record a connection the containment's egress proxy refused: no tool call, a
        command (or the harness) reaching for a host that is not allowed."""
        self._record(
            ToolCall(name="network", args={"host": host, "port": port}),
            allow=False,
            verdict="DENY",
            decided_by="containment",
            rule="egress: host not allowed",
            bucket=None,
            bucket_name="containment",
            message=reason,
            latency_ns=0,
        )

    @contextlib.contextmanager
    def showing_refusals(self) -> Iterator[None]:
        """While inside: each connection the containment refuses is a row (logged by the
        SDK on `antigravity_sdk.egress`; shown here, not again as a warning line)."""
        handler = _RefusalRows(self)
        egress = logging.getLogger("antigravity_sdk.egress")
        egress.addHandler(handler)
        try:
            yield
        finally:
            egress.removeHandler(handler)

    def asking(self, handler: policy.AskHandler) -> policy.AskHandler:
        """`handler`, reporting each answer under its call's ASK row as it is given."""

        async def ask(tool_call: ToolCall) -> bool:
            approved = False
            try:
                answer = handler(tool_call)
                approved = bool(await answer if inspect.isawaitable(answer) else answer)
            finally:  # a handler that raises or is cancelled refuses (fail closed)
                self.answered(tool_call, approved)
            return approved

        return ask

    def answered(self, tool_call: ToolCall, approved: bool) -> None:
        """The user's answer to an ASK decision: approved (it runs) or not (it does not)."""
        record = self._by_id.get(tool_call.id)
        if record is None or record.verdict != "ASK" or not self.accepting:
            return
        record.allow = approved
        if approved:
            self._print_note(record, Text("approved", style="green"), "by you; it runs")
        else:
            record.ran, record.outcome = False, "not approved"
            self._print_note(record, Text("not approved", style="yellow"), "not run")

    async def post_tool_call(self, result: ToolResult) -> None:
        record = self._by_id.get(result.id)
        if record is None or not self.accepting:
            return
        record.ran = True
        record.outcome = _describe_result(result)
        if record.verdict == "ASK":
            record.allow = True
        self._print_note(record, Text("ran", style="green"), record.outcome)

    async def on_tool_error(self, error: Exception) -> tuple[HookResult, Any | None]:
        call = error.tool_call if isinstance(error, ToolExecutionError) else None
        record = self._by_id.get(call.id) if call is not None else None
        if record is not None and self.accepting:
            record.ran = False
            record.outcome = f"failed: {error}"
            self._print_note(record, Text("tool error", style="yellow"), record.outcome)
        return HookResult(allow=False, message=str(error)), None

    def finish(self) -> None:
        """After the turn: an ASK decision nobody answered was not approved (and is shown)."""
        for record in self.records:
            if record.verdict == "ASK" and record.ran is None and record.outcome == "":
                record.allow, record.ran, record.outcome = False, False, "not approved"
                self._print_note(record, Text("not approved", style="yellow"), "not run")

    # -- printing

    def stream_text(self, text: str) -> None:
        """A streamed text delta, as it arrives (escaped: the model chooses it), wrapped
        at word boundaries: a word is printed once it is whole (or the line ends)."""
        if not text:
            return
        self.activity()
        *ended, self._paragraph = (self._paragraph + printable(text)).split("\n")
        for line in ended:
            self._wrap_out(line, whole=True)
            self.console.print()
            self._shown = ("", "")
        self._wrap_out(self._paragraph, whole=False)
        self.mid_line = bool(self._shown[0])
        self.console.file.flush()

    def _wrap_out(self, line: str, *, whole: bool) -> None:
        """Print what is new of streamed `line`, as rich wraps it at the console's width
        (its whole words only, unless `whole`). Wrapping is greedy, so what is printed
        already stays a prefix of the new wrapping, and only the rest is printed."""
        if not whole:
            cut = max(line.rfind(" "), 0)  # the last word may not be whole yet
            line = line[:cut].rstrip()
        shown, wrapped_before = self._shown
        if len(line) <= len(shown):
            return
        lines = Text(line).wrap(self.console, self.console.width, overflow="fold")
        wrapped = "\n".join(part.plain for part in lines)
        if wrapped.startswith(wrapped_before):
            new = wrapped[len(wrapped_before) :]
        else:  # not as expected: go on unwrapped rather than print anything twice
            new, wrapped = line[len(shown) :], wrapped_before + line[len(shown) :]
        self.console.print(Text(new), end="", soft_wrap=True)
        self._shown = (line, wrapped)

    def line_break(self) -> None:
        """End streamed text's line (its last word included), so what follows starts on
        its own."""
        if self._paragraph:
            self._wrap_out(self._paragraph, whole=True)
            self._paragraph = ""
            self.mid_line = bool(self._shown[0])
        self._shown = ("", "")
        if self.mid_line:
            self.console.print()
            self.mid_line = False

    def _put(self, renderable: Any) -> None:
        """Print `renderable`; off a terminal (a pipe, a log) without the spaces that pad
        its lines to the table's width."""
        self.activity()
        if self.console.is_terminal:
            self.console.print(renderable, overflow="fold")
            return
        options = self.console.options.update(overflow="fold")
        lines = self.console.render_lines(renderable, options, pad=False)
        text = ("".join(segment.text for segment in line).rstrip() for line in lines)
        self.console.file.write("".join(f"{line}\n" for line in text))

    def print_table_head(self) -> None:
        """The columns' names (once: the first row prints them if nothing did)."""
        self._head_shown = True
        grid = _row_grid(self.console.width, self.console.is_terminal)
        grid.add_row("#", "tool", "arguments", "", "bucket", "rule", "decided in", style="dim")
        self._put(grid)

    def _print_decision(self, r: DecisionRecord) -> None:
        self.line_break()
        if not self._head_shown:
            self.print_table_head()
        if r.bucket is None:
            where = f"[{r.bucket_name}]"
        elif self.console.width >= _WIDE:
            where = f"[{r.bucket} {r.bucket_name}]"
        else:
            where = f"[{r.bucket}]"
        grid = _row_grid(self.console.width, self.console.is_terminal)
        grid.add_row(
            str(r.index),
            Text(_one_line(r.tool), style="bold"),
            Text(_one_line(short_args(r.tool, r.args, self.workspace))),
            Text(r.verdict, style=_VERDICT_STYLE[r.verdict]),
            where,
            Text(_one_line(r.rule)),
            Text(f"{r.latency_us:.1f} µs", style="dim"),
        )
        self._put(grid)
        self._last_row = r
        if r.blocked:
            self._print_note(r, Text("not run", style="red"), r.message)
        self.console.file.flush()

    def _print_note(self, r: DecisionRecord, mark: Text, text: str) -> None:
        """A line under `r`'s row; when other rows came in between, it names its row."""
        self.line_break()
        if self._last_row is not r:
            mark = Text(f"#{r.index} ") + mark
        line = Text("↳ ", style="dim") + mark + Text(": " + _one_line(text), style="dim")
        self._put(Padding(line, (0, 0, 0, 5), expand=False))
        self.console.file.flush()


# -- around the decisions ----------------------------------------------------------------------


def tools_label(rules: Sequence[policy.Policy]) -> str:
    """The tools of one rule's policies, as a row of `policy_table` names them: built-in
    tools by name, MCP tools after their server (`db: drop_table, delete_rows`), patterns
    as written; `workspace_only`'s policies (a path check each) as `N path-taking tools`."""
    tools = list(dict.fromkeys(p.tool for p in rules))
    if len(tools) > 2 and all(policy.is_workspace_check(p.predicate) for p in rules):
        return f"{len(tools)} path-taking tools"
    plain: list[str] = []  # built-in tools, and patterns (`*`, `db/*`) as written
    servers: dict[str, list[str]] = {}
    for tool in tools:
        server, slash, name = tool.partition("/")
        if slash and name != "*":
            servers.setdefault(server, []).append(name)
        else:
            plain.append(tool)
    parts = [", ".join(plain)] if plain else []
    parts += [f"{server}: {', '.join(names)}" for server, names in servers.items()]
    return "; ".join(parts)


def policy_table(enforcer: policy.PolicyEnforcer) -> Table:
    """The policies in evaluation order, one row per rule (a rule over several tools,
    like `workspace_only` or a file rule listing tools, is one row: `tools_label`)."""
    table = Table.grid(padding=(0, 1))
    for _ in range(4):
        table.add_column(overflow="fold")
    ranked = sorted(enumerate(enforcer.policies), key=lambda p: (p[1].bucket, p[0]))
    seen: set[tuple[str, int]] = set()
    for _, p in ranked:
        bucket = p.bucket
        if (p.label, bucket) in seen:  # one row for the rule's other policies too
            continue
        seen.add((p.label, bucket))
        same = [q for q in enforcer.policies if q.label == p.label and q.bucket == bucket]
        shown = tools_label(same)
        table.add_row(
            f"  [{bucket} {policy.BUCKETS[bucket]}]", p.label, p.decision.name, shown, style="dim"
        )
    return table


def print_header(
    console: Console,
    report: DemoReport,
    hooks: Sequence[Hook],
    enforcer: policy.PolicyEnforcer,
) -> None:
    """The session's model, workspace, hooks and policies."""
    title = Text("antigravity demo", style="bold")
    console.print(title + f" — real harness, model: {report.model}")
    console.print(f"workspace: {report.workspace} (temporary)")
    names = ", ".join(type(hook).__name__ for hook in hooks)
    console.print(f"hooks (in order): {names}, then the policies:")
    console.print(policy_table(enforcer))
    console.print()


def print_footer(console: Console, report: DemoReport) -> None:
    """The model's answer, the summary numbers and, for the scripted demo, its checks."""
    if report.error:
        console.print(Text(f"\nerror: {report.error}", style="red"))  # it says what failed
    if report.answer:
        console.print("\n" + "model's answer:", style="bold")
        console.print(Padding(Text(printable(report.answer.strip())), (0, 0, 0, 2), expand=False))
    records = report.records
    console.print("\nsummary", style="bold")
    summary = Table.grid(padding=(0, 1))
    summary.add_column(min_width=28)
    summary.add_column()
    rows = [
        ("tool calls", str(len(records))),
        ("allowed", str(len(report.allowed))),
        ("denied", str(len(report.denied))),
        ("ran", str(sum(1 for r in records if r.ran))),
        ("median time to decide", f"{report.median_latency_us():.1f} µs"),
        ("agent start", f"{report.start_seconds * 1000:.0f} ms"),
        ("turn wall time", f"{report.turn_seconds * 1000:.0f} ms"),
        ("audit events", str(len(report.audit_events))),
    ]
    for label, value in rows:
        summary.add_row(f"  {label}", value)
    console.print(summary)
    counts = report.rule_counts()
    if counts:
        console.print("  decisions per rule:")
        for rule, n in counts.most_common():
            console.print(f"    {rule:<24} {n}")
    if report.checks:
        passed = sum(1 for _, ok in report.checks if ok)
        console.print(f"  checks: {passed}/{len(report.checks)} as expected")
        for label, ok in report.checks:
            if not ok:
                console.print(f"    FAILED: {label}", style="red")
    console.file.flush()


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
