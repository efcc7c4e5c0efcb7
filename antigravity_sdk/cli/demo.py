"""`antigravity demo`: the SDK governing a real harness session, offline by default.

The demo runs the real `localharness` against a `ScriptedModel` (fully offline) in a
fresh temporary workspace. The scripted model reads a file, writes one, runs a safe
command, tries `rm -rf`, tries to escape the workspace twice and tries to write a
secret; then it answers with a summary. Policies and hooks decide every call, and the
terminal shows each decision as it is made (`report.DecisionReporter`): the tool, its
arguments, ALLOW/DENY, the deciding bucket and rule, and the decision latency, then
whether the tool really ran. A self-check then compares the session with what the script
must produce.

With a model configured (`base_url` + `model`, or `GEMINI_API_KEY`) the same prompt,
hooks and policies run on a real model instead of the script.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

from rich.text import Text

from .. import policy
from ..containment import DEFAULT_CONTAINMENT, Containment
from ..errors import AntigravityError, ModelNotConfiguredError
from ..hooks import Hook
from ..types import ChatResponse, HookResult, ToolCall, ToolResult
from .containment import containment_lines
from .report import (
    DecisionReporter,
    DemoReport,
    model_label,
    print_error,
    print_footer,
    print_header,
)
from .shell import no_destructive_shell, safe_shell

if TYPE_CHECKING:
    from ..harness.config import ModelSettings

__all__ = [
    "AuditLog",
    "SecretGuard",
    "demo_policies",
    "demo_prompt",
    "demo_session",
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


def demo_policies(workspace: str | os.PathLike[str]) -> list[Any]:
    """The demo's policy set; every bucket it uses is named in the output.

    * bucket 0 (specific deny): `no-destructive-shell`, `workspace_only`,
      `shell-not-allow-listed`
    * bucket 2 (specific allow): `safe-shell` (the allow-list)
    * bucket 8 (`*` allow): `allow_all`, for everything else (reads and writes
      that `workspace_only` did not stop)
    """
    return [
        no_destructive_shell(),
        policy.workspace_only([workspace]),
        *safe_shell(),
        policy.allow_all(),
    ]


# -- the demo's own hooks -------------------------------------------------------------------


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
    from ..testing import ScriptedModel, text, tool_call

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


def _configured_model(
    base_url: str | None, model: str | None, *, required: bool
) -> ModelSettings | None:
    """The real model configured (`resolve_model`), or None (the offline script) when
    none is and none is `required`."""
    from ..harness.config import resolve_model

    try:
        return resolve_model(model, base_url=base_url)
    except ModelNotConfiguredError:
        if required or base_url or model:
            raise
        return None


async def demo_session(
    *,
    base_url: str | None = None,
    model: str | None = None,
    out: TextIO | None = None,
    harness_path: str | None = None,
    scripted: bool | None = None,
    turn_timeout: float = 300.0,
    audit_log: str | None = None,
    containment: Containment | None = DEFAULT_CONTAINMENT,
) -> DemoReport:
    """Run the demo session and return its structured report (printing to `out` if given).

    `scripted=True` forces the offline ScriptedModel; `None` picks a real model when one
    is configured (`base_url`/`model`, or `GEMINI_API_KEY`). `audit_log`: a path for
    `AgentBuilder.audit_log`; `containment` for `AgentBuilder.containment`. Raises
    `AntigravityError` (e.g. `HarnessNotFoundError`) when the session cannot start.
    """
    from ..agent import Agent

    sink = out if out is not None else io.StringIO()
    try:
        settings = (
            None if scripted else _configured_model(base_url, model, required=scripted is False)
        )
        with tempfile.TemporaryDirectory(prefix="antigravity-demo-") as tmp:
            root, ws = _prepare(tmp)
            report = DemoReport(
                model=model_label(settings), scripted=settings is None, workspace=str(ws)
            )
            reporter = DecisionReporter(sink, workspace=str(ws))
            audit = AuditLog(root / "audit.jsonl")
            hooks = [audit, SecretGuard(reporter), reporter]
            builder = (
                Agent.builder()
                .hooks(hooks)
                .policies(demo_policies(ws))
                .workspaces([ws])
                .save_dir(root / "conversations")
                .app_data_dir(root / "app-data")
                .turn_timeout(turn_timeout)
                .audit_log(audit_log)
                .containment(containment)
            )
            if settings is None:
                builder.model(_scripted_model(str(ws)))
            else:
                builder.model(settings.name, base_url=settings.base_url, api_key=settings.api_key)
            if harness_path:
                builder.harness_path(harness_path)
            agent = builder.build()
            reporter.enforcer = agent.policy_enforcer
            print_header(reporter.console, report, hooks, agent.policy_enforcer)
            began = time.perf_counter()
            async with agent:
                report.start_seconds = time.perf_counter() - began
                report.containment = containment_lines(agent.containment)
                for line in report.containment:
                    reporter.console.print(Text(line), style="dim")
                reporter.print_table_head()
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
        if report.scripted:
            report.checks = _expectations(report)
        print_footer(reporter.console, report)
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


async def run_demo(
    *,
    base_url: str | None = None,
    model: str | None = None,
    out: TextIO = sys.stdout,
    harness_path: str | None = None,
    audit_log: str | None = None,
    containment: Containment | None = DEFAULT_CONTAINMENT,
) -> int:
    """`antigravity demo`: 0 when the session went as designed, 1 if not, 2 when it
    could not run (no harness, an unusable model configuration)."""
    try:
        report = await demo_session(
            base_url=base_url,
            model=model,
            out=out,
            harness_path=harness_path,
            audit_log=audit_log,
            containment=containment,
        )
    except AntigravityError as exc:
        return print_error(out, exc)
    return 0 if report.ok else 1
