"""Quickstart: four hooks deciding a simulated session, no harness or model needed.

    python examples/quickstart.py

An `Agent` dispatches these events for you; here a few are dispatched by hand through a
`HookRunner` so every decision is visible:

* LoggingHook        logs every event.
* RateLimitHook      allows at most N turns (pre_turn denies the rest).
* AuditHook          records tool calls and results in an in-memory audit log, keeping
                     per-call state in the operation context (`current_context()`).
* ErrorRecoveryHook  recovers from one known tool error with a fallback value.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from antigravity_sdk import (
    AskQuestionEntry,
    ChatResponse,
    Hook,
    HookResult,
    HookRunner,
    QuestionHookResult,
    ToolCall,
    ToolExecutionError,
    ToolResult,
    current_context,
)

log = logging.getLogger("quickstart")


class LoggingHook(Hook):
    """Inspect every event. Inspect hooks cannot change anything; failures are contained."""

    async def on_session_start(self) -> None:
        log.info("session started")

    async def on_session_end(self) -> None:
        log.info("session ended")

    async def pre_turn(self) -> HookResult:
        log.info("turn: %r", current_context().get("prompt"))
        return HookResult.allowed()

    async def post_turn(self, response: ChatResponse) -> None:
        log.info("turn done: %r", response.text)

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        log.info("tool call: %s %s", tool_call.qualified_name, tool_call.args)
        return HookResult.allowed()

    async def post_tool_call(self, result: ToolResult) -> None:
        log.info("tool result: %s -> %r", result.name, result.error or result.result)

    async def on_tool_error(self, error: Exception) -> tuple[HookResult, Any | None]:
        log.info("tool error: %s", error)
        return HookResult(allow=False, message=str(error)), None  # leave it to others

    async def on_interaction(
        self, questions: Sequence[AskQuestionEntry]
    ) -> QuestionHookResult | None:
        log.info("questions: %s", [q.question for q in questions])
        return None

    async def on_compaction(self, summary: str) -> None:
        log.info("compacted: %s", summary)


class RateLimitHook(Hook):
    """Decide: at most `max_turns` turns per session."""

    def __init__(self, max_turns: int) -> None:
        self.max_turns = max_turns

    async def pre_turn(self) -> HookResult:
        session = current_context()
        while session.parent is not None:  # the turn context's root is the session
            session = session.parent
        used = session.get("turns_used", 0)
        if used >= self.max_turns:
            return HookResult.denied(f"turn limit reached ({self.max_turns} per session)")
        session.set("turns_used", used + 1)
        return HookResult.allowed()


class AuditHook(Hook):
    """Inspect tool calls and results into an audit log; per-call state in the op context."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        op = current_context()  # one operation context per tool call id
        op.set("audit", {"id": tool_call.id, "tool": tool_call.qualified_name})
        return HookResult.allowed()

    async def post_tool_call(self, result: ToolResult) -> None:
        entry = dict(current_context().get("audit") or {"id": result.id, "tool": result.name})
        entry["prompt"] = current_context().get("prompt")  # walks up to the turn
        entry["outcome"] = "error" if result.error else "ok"
        self.records.append(entry)


class ErrorRecoveryHook(Hook):
    """Transform: recover from one known error with a fallback value."""

    def __init__(self, tool: str, fallback: Any) -> None:
        self.tool, self.fallback = tool, fallback

    async def on_tool_error(self, error: Exception) -> tuple[HookResult, Any | None]:
        if isinstance(error, ToolExecutionError) and error.tool_call.name == self.tool:
            return HookResult.allowed(f"used cached {self.tool} result"), self.fallback
        return HookResult(allow=False, message=str(error)), None


class DenyDangerousHook(Hook):
    """Decide: refuse `rm -rf` (what a policy from antigravity_sdk.policy would do).

    The harness's own argument key is `CommandLine` (hooks always get it in that
    spelling); a missing or non-string command is refused too, never waved through.
    """

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        if tool_call.name != "run_command" or tool_call.server_name:
            return HookResult.allowed()
        command = tool_call.args.get("CommandLine")
        if not isinstance(command, str) or "rm -rf" in command:
            return HookResult.denied("destructive commands are not allowed")
        return HookResult.allowed()


async def tool_call(runner: HookRunner, call: ToolCall, fail: str | None = None) -> None:
    """What an agent does for one tool call: decide, run (simulated), report."""
    decision = await runner.dispatch_pre_tool_call(call)
    if not decision.allow:
        print(f"  {call.name:<12} DENIED    {decision.message}")
        return
    if fail is None:
        output: Any = f"<output of {call.name}>"
        print(f"  {call.name:<12} ALLOWED   ran, returned {output!r}")
        await runner.dispatch_post_tool_call(ToolResult(name=call.name, id=call.id, result=output))
        return
    recovery, value = await runner.dispatch_on_tool_error(ToolExecutionError(fail, call))
    if recovery.allow:
        print(f"  {call.name:<12} RECOVERED {recovery.message}: {value!r}")
        result = ToolResult(name=call.name, id=call.id, result=value)
    else:
        print(f"  {call.name:<12} FAILED    {recovery.message}")
        result = ToolResult(name=call.name, id=call.id, error=recovery.message)
    await runner.dispatch_post_tool_call(result)


async def main() -> int:
    logging.basicConfig(level=logging.INFO, format="    [log] %(message)s", stream=sys.stdout)
    audit = AuditHook()
    runner = HookRunner(
        [
            LoggingHook(),
            RateLimitHook(max_turns=2),
            DenyDangerousHook(),
            audit,
            ErrorRecoveryHook("read_url_content", fallback="<cached page>"),
        ],
        timeout=5.0,
    )

    await runner.dispatch_session_start()
    script = [
        ("List the repo and remove the build dir", [
            (ToolCall(name="list_dir", args={"DirectoryPath": "/repo"}, id="t1-1"), None),
            (ToolCall(name="run_command", args={"CommandLine": "rm -rf build"}, id="t1-2"),
             None),
        ]),
        ("Summarise the docs page", [
            (ToolCall(name="read_url_content", args={"Url": "https://example.com"}, id="t2-1"),
             "HTTP 503 from example.com"),
            (ToolCall(name="view_file", args={"AbsolutePath": "/repo/missing.txt"}, id="t2-2"),
             "file not found: missing.txt"),
        ]),
        ("One more turn, please", []),
    ]  # fmt: skip
    for prompt, calls in script:
        print(f"\nturn: {prompt!r}")
        runner.begin_turn(prompt)
        verdict = await runner.dispatch_pre_turn()
        if not verdict.allow:
            print(f"  turn DENIED: {verdict.message}")
            runner.end_turn()
            continue
        for call, failure in calls:
            await tool_call(runner, call, failure)
        await runner.dispatch_post_turn(ChatResponse(text=f"done: {prompt}"))
    await runner.dispatch_session_end()

    print("\naudit log:")
    for record in audit.records:
        print(f"  {record}")
    expected = [("t1-1", "ok"), ("t2-1", "ok"), ("t2-2", "error")]
    got = [(r["id"], r["outcome"]) for r in audit.records]
    if got != expected:
        print(f"unexpected audit log: {got} != {expected}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
