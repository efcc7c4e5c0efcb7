"""`antigravity chat PROMPT`: one governed turn on a real model in the current directory."""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO

from rich.text import Text

from .. import policy
from ..containment import DEFAULT_CONTAINMENT, Containment
from ..errors import AntigravityError, TurnCancelledError
from ._output import warnings_to
from ._signals import ctrl_c_cancels, report_interrupt
from .containment import containment_lines
from .report import DecisionReporter, make_console, model_label, print_error, printable
from .shell import no_destructive_shell
from .waiting import DEFAULT_TIMEOUT, ModelWait, model_endpoint, turn_timeout

__all__ = ["chat_policies", "load_policy_file", "run_chat"]


def load_policy_file(path: str, ask: policy.AskHandler | None = None) -> policy.PolicyFile:
    """`policy.load(path)`, checked as `antigravity policy check` checks it (`enforce`
    with the file's own mcp_servers): every problem of the file, a rule naming no tool
    included, is a `PolicyError` before the model is resolved."""
    loaded = policy.load(path, ask_handler=ask)
    policy.enforce(loaded, loaded.mcp_servers)
    return loaded


def chat_policies(policies_file: str | None, workspace: Path, ask: policy.AskHandler) -> list[Any]:
    """The policy file's rules, else the defaults `run_chat` describes; `ask` answers
    their ask_user rules."""
    if policies_file is not None:
        return load_policy_file(policies_file, ask)
    return [
        no_destructive_shell(),
        policy.workspace_only([workspace]),
        *policy.confirm_run_command(ask),
    ]


async def run_chat(
    prompt: str,
    *,
    policies_file: str | None = None,
    base_url: str | None = None,
    model: str | None = None,
    out: TextIO = sys.stdout,
    err: TextIO | None = None,
    audit_log: str | None = None,
    containment: Containment | None = DEFAULT_CONTAINMENT,
    model_timeout: float = DEFAULT_TIMEOUT,
) -> int:
    """`antigravity chat PROMPT`: one turn on a real model in the current directory.

    Policies come from the TOML `policies_file` (`policy.load`), else the defaults:
    no destructive shell commands, `workspace_only` on the current directory, and every
    other shell command confirmed on the terminal (denied without one). Each decision
    and the answer are printed to `out`; errors, and the harness's warnings as they
    happen (a model call it retries), to `err` (default stderr). The policy file is
    read before the model is resolved, so a bad file is reported first. Exit codes:
    0 answered, 1 the turn failed or was denied, 2 not runnable (no model configured,
    bad policy file, no harness), 130 interrupted (Ctrl-C: one line on `err`, the
    harness stopped). `audit_log`: a path for `AgentBuilder.audit_log`; `containment`:
    for `AgentBuilder.containment` (what is in force is printed at start); `model_timeout`:
    seconds to wait for the model each time it is called (`waiting.ModelWait`; a
    `waiting for the model … 12 s` indicator on `err` meanwhile), past which the turn
    is stopped and the error names the endpoint.
    """
    from ..agent import Agent
    from ..harness.config import resolve_model
    from ..interactive import confirm_in_terminal

    err = sys.stderr if err is None else err
    with ctrl_c_cancels() as interrupt:
        try:
            workspace = Path.cwd().resolve()
            reporter = DecisionReporter(out, workspace=str(workspace))
            ask = reporter.asking(confirm_in_terminal)
            policies = chat_policies(policies_file, workspace, ask)
            settings = resolve_model(model, base_url=base_url)  # after the policy file's checks
            endpoint = model_endpoint(settings)
            wait = ModelWait(reporter, endpoint, model_timeout, console=make_console(err))
            with tempfile.TemporaryDirectory(prefix="antigravity-chat-") as tmp:
                root = Path(tmp)
                agent = (
                    Agent.builder()
                    .hook(reporter)
                    .policies(policies)
                    .workspaces([workspace])
                    .model(settings.name, base_url=settings.base_url, api_key=settings.api_key)
                    .save_dir(root / "conversations")
                    .app_data_dir(root / "app-data")
                    .audit_log(audit_log)
                    .containment(containment)
                    .turn_timeout(turn_timeout(model_timeout))
                    .build()
                )
                reporter.enforcer = agent.policy_enforcer
                out.write(f"model: {model_label(settings)}; workspace: {workspace}\n")
                with warnings_to(err, before=wait.hide), reporter.showing_refusals():
                    async with agent:
                        lines = containment_lines(agent.containment)
                        out.write("".join(f"{line}\n" for line in lines))
                        out.flush()
                        async with wait.turn(agent.cancel):
                            try:
                                response = await agent.chat(prompt)
                            except TurnCancelledError:
                                if not wait.expired:
                                    raise
                                raise wait.error() from None
                reporter.finish()
        except AntigravityError as exc:
            out.flush()
            return print_error(err, exc)
        except asyncio.CancelledError:
            if not interrupt.came:
                raise
            out.flush()
            return report_interrupt(err, "the turn was stopped and the harness shut down")
    reporter.console.print("\nanswer:", style="bold")
    reporter.console.print(Text(printable(response.text.strip())))
    return 0
