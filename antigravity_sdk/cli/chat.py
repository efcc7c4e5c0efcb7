"""`antigravity chat PROMPT`: one governed turn on a real model in the current directory."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO

from .. import policy
from ..errors import AntigravityError
from .report import DecisionReporter, model_label, print_error
from .shell import no_destructive_shell

__all__ = ["run_chat"]


def _chat_policies(policies_file: str | None, workspace: Path) -> list[Any]:
    """The policy file's rules, else the defaults `run_chat` describes."""
    if policies_file is not None:
        return policy.load(policies_file)
    from ..interactive import confirm_in_terminal

    return [
        no_destructive_shell(),
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
    audit_log: str | None = None,
) -> int:
    """`antigravity chat PROMPT`: one turn on a real model in the current directory.

    Policies come from the TOML `policies_file` (`policy.load`), else the defaults:
    no destructive shell commands, `workspace_only` on the current directory, and every
    other shell command confirmed on the terminal (denied without one). Each decision
    and the answer are printed. Exit codes: 0 answered, 1 the turn failed or was
    denied, 2 not runnable (no model configured, bad policy file, no harness).
    `audit_log`: a path for `AgentBuilder.audit_log`.
    """
    from ..agent import Agent
    from ..harness.config import resolve_model

    try:
        settings = resolve_model(model, base_url=base_url)
        workspace = Path.cwd().resolve()
        policies = _chat_policies(policies_file, workspace)
        reporter = DecisionReporter(out, workspace=str(workspace))
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
                .build()
            )
            reporter.enforcer = agent.policy_enforcer
            out.write(f"model: {model_label(settings)}; workspace: {workspace}\n")
            async with agent:
                response = await agent.chat(prompt)
            reporter.finish()
    except AntigravityError as exc:
        return print_error(out, exc)
    out.write("\n" + reporter.style.bold("answer:") + "\n" + response.text.strip() + "\n")
    return 0
