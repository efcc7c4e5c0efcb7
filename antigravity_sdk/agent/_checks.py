"""What `AgentBuilder.build()` checks before any harness runs, one settings group each,
and the policies an agent gets when it is given none.

Each check raises `ConfigurationError` (or `ContainmentError`) for a configuration the
harness would refuse, fail on, or run without asking anyone about, and logs a warning
for one that is allowed but worth knowing about.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from .. import policy
from ..errors import ConfigurationError, ContainmentError
from ..harness.catalog import TOOLS, Governance
from ..types import BuiltinTool
from ._settings import GovernanceGroup, ModelGroup, ProcessGroup, PromptGroup

logger = logging.getLogger("antigravity_sdk.agent")

UNGOVERNED_ROUTES: Final = frozenset(
    {
        *(spec.name for spec in TOOLS.values() if spec.governance is Governance.NEVER_ASKED),
        "subagents",
        "subagent_workspaces",
    }
)
"""What `AgentBuilder.allow_ungoverned()` accepts."""


def default_policies(workspaces: Sequence[Path] = ()) -> list[Any]:
    """The policies an agent gets when it is given none: shell commands and workflow
    scripts denied (no one to confirm them), file tools kept inside the workspaces that
    were configured, everything else allowed."""
    return [
        *policy.confirm_run_command(),
        policy.deny(
            "run_workflow",
            name="confirm_run_workflow",
            reason="run_workflow is denied by policy 'confirm_run_workflow': a workflow "
            "script runs arbitrary code on the host, and no confirmation handler is "
            "configured.",
        ),
        *(policy.workspace_only(workspaces) if workspaces else ()),
    ]


def check_prompt(prompt: PromptGroup) -> None:
    """Settings the harness takes only one of; it would fail the first turn, or refuse to
    start, with both."""
    modes = [
        name
        for name, value in (
            ("system_instructions()", prompt.system_instructions),
            ("replace_system_instructions()", prompt.custom_instructions),
            ("override_system_sections()", prompt.section_overrides),
        )
        if value
    ]
    if len(modes) > 1:
        raise ConfigurationError(
            f"{' and '.join(modes)} cannot be combined: the harness takes one of them "
            "(to append while overriding, override a section with the text to add)"
        )
    if prompt.skills_paths and prompt.skills:
        raise ConfigurationError(
            "skills_paths() and skills() cannot be combined: the harness takes either "
            "skill directories or inline skills"
        )


def check_model(model: ModelGroup) -> None:
    """Gemini options and Vertex AI need a Gemini model, not the OpenAI-compatible
    endpoint (whose config has a URL and nothing else)."""
    if model.served and (model.options is not None or model.vertex is not None):
        what = "vertex_ai()" if model.vertex is not None else "model_options()"
        raise ConfigurationError(
            f"{what} needs a Gemini model: the harness's OpenAI-compatible endpoint takes "
            "only a URL (no options, headers or key)"
        )
    if model.vertex is not None and model.api_key is not None:
        raise ConfigurationError(
            "with vertex_ai(), give the key as vertex_ai(api_key=...), not model(api_key=...)"
        )


def check_containment(process: ProcessGroup) -> ProcessGroup:
    """Probe the kernel once per build: keep containment where it applies (with the
    kernel's Landlock ABI), refuse where it is required and cannot, otherwise warn once
    and run uncontained (the group returned has no containment)."""
    from ..containment import landlock_abi, unavailable_reason

    spec = process.containment
    if spec is None:
        logger.warning(
            "containment is off (AgentBuilder.containment(None)): the harness and every "
            "command it runs can do whatever this user can"
        )
        return process
    abi = landlock_abi()
    reason = unavailable_reason(abi, local=process.connection is None)
    if reason and spec.required:
        raise ContainmentError(f"Containment(required=True) cannot be met: {reason}")
    if reason:
        logger.warning("the harness will run uncontained: %s", reason)
        return replace(process, containment=None)
    return replace(process, landlock_abi=abi)


def check_capabilities(governance: GovernanceGroup) -> None:
    """Refuse tools the harness never asks about unless opted into; warn on opt-ins."""
    enabled = governance.capabilities.enabled_tools
    ungoverned = sorted(
        spec.name
        for spec in TOOLS.values()
        if spec.governance is Governance.NEVER_ASKED and spec.capability in enabled
    )
    missing = [name for name in ungoverned if name not in governance.ungoverned]
    if missing:
        raise ConfigurationError(
            f"the capabilities enable {missing}, which the harness runs without asking "
            "any hook or policy (a rule on them could never fire). Leave them out of "
            "CapabilitiesConfig.enabled_tools, or accept that with "
            f".allow_ungoverned({', '.join(map(repr, missing))})"
        )
    for route in sorted(governance.ungoverned):
        logger.warning(
            "allow_ungoverned(%r): the harness runs this route without asking hooks or policies",
            route,
        )
    if BuiltinTool.RUN_WORKFLOW in enabled:
        logger.warning(
            "run_workflow is enabled: once a call is allowed, its script runs arbitrary "
            "code on the host that no hook sees"
        )
