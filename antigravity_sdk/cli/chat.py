"""`antigravity chat PROMPT`: one governed turn on a real model in the current directory."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO

from rich.text import Text

from .. import policy
from ..containment import DEFAULT_CONTAINMENT, Containment
from ..errors import AntigravityError
from ._output import warnings_to
from .containment import containment_lines
from .report import DecisionReporter, model_label, print_error, printable
from .shell import no_destructive_shell

__all__ = ["chat_policies", "run_chat"]


def chat_policies(policies_file: str | None, workspace: Path, ask: policy.AskHandler) -> list[Any]:
    """The policy file's rules, else the defaults `run_chat` describes; `ask` answers
    their ask_user rules."""
    if policies_file is not None:
        return policy.load(policies_file, ask_handler=ask)
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
) -> int:
    """`antigravity chat PROMPT`: one turn on a real model in the current directory.

    Policies come from the TOML `policies_file` (`policy.load`), else the defaults:
    no destructive shell commands, `workspace_only` on the current directory, and every
    other shell command confirmed on the terminal (denied without one). Each decision
    and the answer are printed to `out`; errors, and the harness's warnings as they
    happen (a model call it retries), to `err` (default stderr). The policy file is
    read before the model is resolved, so a bad file is reported first. Exit codes:
    0 answered, 1 the turn failed or was denied, 2 not runnable (no model configured,
    bad policy file, no harness). `audit_log`: a path for `AgentBuilder.audit_log`;
    `containment`: for `AgentBuilder.containment` (what is in force is printed at start).
    """
    from ..agent import Agent
    from ..harness.config import resolve_model
    from ..interactive import confirm_in_terminal

    err = sys.stderr if err is None else err
    try:
        workspace = Path.cwd().resolve()
        reporter = DecisionReporter(out, workspace=str(workspace))
        policies = chat_policies(policies_file, workspace, reporter.asking(confirm_in_terminal))
        settings = resolve_model(model, base_url=base_url)  # after the policy file's checks
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
                .build()
            )
            reporter.enforcer = agent.policy_enforcer
            out.write(f"model: {model_label(settings)}; workspace: {workspace}\n")
            with warnings_to(err):
                async with agent:
                    out.write("".join(f"{line}\n" for line in containment_lines(agent.containment)))
                    response = await agent.chat(prompt)
            reporter.finish()
    except AntigravityError as exc:
        out.flush()
        return print_error(err, exc)
    reporter.console.print("\nanswer:", style="bold")
    reporter.console.print(Text(printable(response.text.strip())))
    return 0
