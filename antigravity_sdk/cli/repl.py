"""`antigravity chat` without a prompt: an interactive, governed session on a real model.

Input is `prompt_toolkit`'s, rendering `rich`'s (the `cli` extra). Each turn streams
(`Agent.stream`): text as it arrives, each tool call as a decision row (rule, bucket,
decided in; `report.DecisionReporter`) with what became of it, and each error the harness
reports as it happens. ASK rules are answered at a y/N prompt. Ctrl-C cancels the turn
(`Agent.cancel()`: the session goes on), Ctrl-D or /exit ends the session.

The harness ends its session after a failed turn (a model it cannot reach, say). The
conversation is saved, so the next prompt resumes it on a new harness
(`AgentBuilder.resume`) instead of ending the REPL.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Final, TextIO

from prompt_toolkit import PromptSession
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..containment import DEFAULT_CONTAINMENT, Containment
from ..errors import (
    AntigravityError,
    HarnessConnectionError,
    TurnCancelledError,
    TurnDeniedError,
)
from ..interactive import describe_call
from .chat import chat_policies, load_policy_file
from .containment import containment_lines
from .report import (
    DecisionReporter,
    make_console,
    model_label,
    policy_table,
    print_error,
    printable,
)
from .waiting import DEFAULT_TIMEOUT, ModelWait, model_endpoint, turn_timeout

if TYPE_CHECKING:
    from ..agent import Agent
    from ..harness.config import ModelSettings
    from ..types import StreamChunk, ToolCall

__all__ = ["run_repl"]

HELP: Final = (
    "Type a prompt and press Enter. Ctrl-C cancels the running turn; Ctrl-D or /exit "
    "ends the session.\n"
    "/history  the conversation so far    /usage  tokens used\n"
    "/policies the rules, in evaluation order    /help  this text"
)


class _ConsoleLog(logging.Handler):
    """The SDK's warnings on the console, dimmed, between the rows (not on raw stderr).
    Policy records and the harness's model errors are left out: the rows and the error
    lines already show them."""

    def __init__(self, reporter: DecisionReporter) -> None:
        super().__init__(logging.WARNING)
        self.reporter = reporter

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "antigravity_sdk.policy":
            return
        if record.name == "antigravity_sdk.agent" and record.msg == _HARNESS_ERROR:
            return
        refusal = getattr(record, "refusal", None)
        if refusal is not None:  # a refused connection: a row of its own
            self.reporter.network_refused(refusal.host, refusal.port, refusal.reason)
            return
        self.reporter.activity()
        self.reporter.line_break()
        self.reporter.console.print(Text(f"log: {record.getMessage()}", style="dim"))


_HARNESS_ERROR: Final = "the harness reports an error: %s"  # harness/protocol.py's message


class Repl:
    """One interactive session: the agent (rebuilt on resume), its reporter, the input."""

    def __init__(
        self,
        settings: ModelSettings,
        *,
        policies_file: str | None,
        workspace: Path,
        save_dir: Path,
        console: Console,
        containment: Containment | None = DEFAULT_CONTAINMENT,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.settings = settings
        self.containment = containment
        self.workspace = workspace
        self.save_dir = save_dir
        self.console = console
        self.reporter = DecisionReporter(console, workspace=str(workspace))
        self.wait = ModelWait(self.reporter, model_endpoint(settings), timeout, console=console)
        self.policies = chat_policies(policies_file, workspace, self.reporter.asking(self._ask))
        self.input: PromptSession[str] = PromptSession()
        self.history: list[tuple[str, str]] = []  # (prompt, answer or what ended the turn)
        self._asking = asyncio.Lock()  # one question at a time
        self.agent: Agent | None = None
        self._produced = False
        self._cancelling: asyncio.Future[bool] | None = None
        self._cancelled = False  # the running turn was cancelled: ask nothing more

    def build(self, resume: str | None = None) -> Agent:
        from ..agent import Agent

        builder = (
            Agent.builder()
            .hook(self.reporter)
            .policies(self.policies)
            .workspaces([self.workspace])
            .model(
                self.settings.name, base_url=self.settings.base_url, api_key=self.settings.api_key
            )
            .save_dir(self.save_dir / "conversations")
            .app_data_dir(self.save_dir / "app-data")
            .containment(self.containment)
            .turn_timeout(turn_timeout(self.wait.timeout))
        )
        if resume:
            builder.resume(resume)
        agent = builder.build()
        self.reporter.enforcer = agent.policy_enforcer
        return agent

    # -- ASK rules

    async def _ask(self, call: ToolCall) -> bool:
        """A y/N question on the terminal (default no); Ctrl-C or Ctrl-D refuses and
        cancels the turn. Once the turn is cancelled, or between turns (a cancelled turn's
        leftover, the harness still asking for a moment), it refuses unasked."""
        async with self._asking:
            if self._cancelled or not self.reporter.accepting:
                return False
            self.reporter.line_break()
            self.console.print(
                Text(f"The agent wants to call {describe_call(call, self.console.width)}")
            )
            try:
                answer = await self.input.prompt_async("Allow? [y/N] ")
            except (KeyboardInterrupt, EOFError):
                self._cancel()
                return False
        return answer.strip().lower() in ("y", "yes")

    # -- turns

    def _cancel(self) -> None:
        """Ctrl-C while a turn runs: cancel that turn (the session goes on)."""
        self._cancelled = True
        if self.agent is not None:
            self._cancelling = asyncio.ensure_future(self.agent.cancel())

    def _show(self, chunk: StreamChunk) -> None:
        self.reporter.activity()  # the model is answering
        if chunk.type == "text":
            self.reporter.stream_text(chunk.text)
        elif chunk.type == "error":
            self.reporter.line_break()
            self.console.print(Text(f"harness error: {chunk.error}", style="red"))
            if chunk.text and chunk.text != chunk.error:
                self.console.print(Text(f"  {printable(chunk.text)}", style="dim"))

    async def _stream(self, prompt: str) -> str:
        """Stream one turn and return its answer; raises what ended it otherwise
        (`self._produced` then says whether anything had arrived)."""
        agent = self.agent
        assert agent is not None
        parts: list[str] = []
        self._produced = False
        async with self.wait.turn(agent.cancel):
            async for chunk in agent.stream(prompt):
                self._produced = True
                self._show(chunk)
                if chunk.type == "text":
                    parts.append(chunk.text)
        self.reporter.line_break()
        return "".join(parts)

    async def turn(self, prompt: str) -> None:
        """One prompt, with Ctrl-C bound to `Agent.cancel()` while it runs. A session the
        harness had already ended is resumed, and the prompt sent there."""
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, self._cancel)
        self.reporter.accepting = True
        self._cancelled = False
        try:
            try:
                answer = await self._stream(prompt)
            except HarnessConnectionError as exc:
                self.reporter.line_break()
                if self._produced:  # it ended during this turn: say so, resume for the next
                    self.history.append((prompt, f"(the session ended: {exc})"))
                    await self._resume(exc)
                    return
                await self._resume(exc)
                answer = await self._stream(prompt)
            self.history.append((prompt, answer))
        except TurnCancelledError:
            self.reporter.line_break()
            if self.wait.expired:
                self.console.print(Text(f"{self.wait.error()}; the session goes on", style="red"))
                self.history.append((prompt, "(no answer from the model)"))
            else:
                self.console.print(
                    Text("turn cancelled (Ctrl-C); the session goes on", style="yellow")
                )
                self.history.append((prompt, "(cancelled)"))
        except TurnDeniedError as exc:
            self.reporter.line_break()
            self.console.print(Text(f"turn denied: {exc}", style="red"))
            self.history.append((prompt, "(denied)"))
        except HarnessConnectionError:
            raise  # the resumed session failed at once too: nothing left to try
        except AntigravityError as exc:  # TurnFailedError, TurnTimeoutError
            self.reporter.line_break()
            self.console.print(Text(f"the turn failed: {exc}", style="red"))
            self.console.print(
                Text(
                    "if the harness ended the session (it does after a model error), the "
                    "next prompt resumes the conversation on a new one",
                    style="dim",
                )
            )
            self.history.append((prompt, f"(failed: {exc})"))
        finally:
            loop.remove_signal_handler(signal.SIGINT)
            self.reporter.finish()
            # From here until the next turn, what the harness still sends of this one
            # (a cancelled turn's next tool call, say) is refused without a row or a
            # question: nothing of it may print after the next prompt.
            self.reporter.accepting = False
            if self.input.app.is_running:  # a question the turn's end left open
                self.input.app.exit(exception=EOFError)

    async def _resume(self, exc: HarnessConnectionError) -> None:
        """Start a new harness on the saved conversation (`AgentBuilder.resume`)."""
        assert self.agent is not None
        conversation = self.agent.conversation_id
        self.console.print(Text(f"the session ended: {str(exc).splitlines()[0]}", style="red"))
        if not conversation:
            raise exc
        await self.agent.stop()
        self.agent = None
        self.console.print(Text(f"resuming conversation {conversation} on a new harness…"))
        agent = self.build(resume=conversation)
        await agent.start()
        self.agent = agent
        self.console.print(Text("resumed; the conversation goes on", style="green"))

    # -- commands

    def command(self, line: str) -> bool:
        """Run a /command; False for /exit."""
        name = line.split()[0]
        if name in ("/exit", "/quit"):
            return False
        if name == "/help":
            self.console.print(HELP)
        elif name == "/history":
            if not self.history:
                self.console.print("no turns yet")
            # Two columns: a long prompt or answer wraps at words under itself.
            turns = Table.grid(padding=(0, 1))
            turns.add_column(justify="right", no_wrap=True, style="bold")
            turns.add_column(overflow="fold")
            for n, (prompt, answer) in enumerate(self.history, 1):
                turns.add_row(f"{n}. you:", Text(printable(prompt)))
                turns.add_row("agent:", Text(printable(answer)))
            self.console.print(turns)
        elif name == "/usage":
            assert self.agent is not None
            usage = self.agent.usage
            table = Table.grid(padding=(0, 2))
            for label, value in (
                ("prompt tokens", usage.prompt_token_count),
                ("cached", usage.cached_content_token_count),
                ("answer tokens", usage.candidates_token_count),
                ("thought tokens", usage.thoughts_token_count),
                ("total", usage.total_token_count),
            ):
                table.add_row(label, str(value))
            self.console.print(table)
        elif name == "/policies":
            assert self.agent is not None
            self.console.print("policies, in evaluation order (bucket, then order):")
            self.console.print(policy_table(self.agent.policy_enforcer))
        else:
            self.console.print(Text(f"unknown command {name}; /help lists them", style="red"))
        return True

    async def loop(self) -> None:
        """Read prompts until Ctrl-D or /exit."""
        while True:
            try:
                line = await self.input.prompt_async("> ")
            except KeyboardInterrupt:  # Ctrl-C at the prompt: a fresh line, like a shell
                continue
            except EOFError:
                return
            line = line.strip()
            if not line:
                continue
            if line.startswith("/"):
                if not self.command(line):
                    return
                continue
            await self.turn(line)


async def run_repl(
    *,
    policies_file: str | None = None,
    base_url: str | None = None,
    model: str | None = None,
    out: TextIO = sys.stdout,
    err: TextIO | None = None,
    containment: Containment | None = DEFAULT_CONTAINMENT,
    model_timeout: float = DEFAULT_TIMEOUT,
) -> int:
    """`antigravity chat` with no prompt. Policies as for one turn (`run_chat`), the file
    checked before the model is resolved. Exit codes: 0 ended by the user, 1 the session
    failed and could not be resumed, 2 not runnable (no model configured, bad policy
    file, no harness); the error that ends it goes to `err` (default stderr)."""
    from ..harness.config import resolve_model

    console = make_console(out)
    log = logging.getLogger("antigravity_sdk")
    handler: _ConsoleLog | None = None
    try:
        if policies_file is not None:
            load_policy_file(policies_file)  # a bad file is reported before the model
        settings = resolve_model(model, base_url=base_url)
        workspace = Path.cwd().resolve()
        with tempfile.TemporaryDirectory(prefix="antigravity-chat-") as tmp:
            repl = Repl(
                settings,
                policies_file=policies_file,
                workspace=workspace,
                save_dir=Path(tmp),
                console=console,
                containment=containment,
                timeout=model_timeout,
            )
            handler = _ConsoleLog(repl.reporter)
            log.addHandler(handler)
            console.print(Text(f"model: {model_label(settings)}; workspace: {workspace}"))
            console.print(Text(HELP, style="dim"))
            repl.agent = repl.build()
            await repl.agent.start()
            for line in containment_lines(repl.agent.containment):
                console.print(Text(line, style="dim"))
            try:
                await repl.loop()
            finally:
                if repl.agent is not None:
                    await repl.agent.stop()
    except AntigravityError as exc:
        out.flush()
        return print_error(sys.stderr if err is None else err, exc)
    finally:
        if handler is not None:
            log.removeHandler(handler)
    console.print("bye")
    return 0
