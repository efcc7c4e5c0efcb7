"""What an agent is built with, in frozen groups.

`AgentBuilder` replaces a group each time one of its methods is called, and `build()`
hands the result to one check per group (`_checks`), so each check sees only the
settings it is about. The groups never change after `build()`: an agent built from a
builder is not affected by what that builder is given later.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard

from ..containment import Containment
from ..timeouts import Timeouts
from ..types import Budget, CapabilitiesConfig, McpServer, RetryPolicy, ToolOutputLimit

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ..audit import AuditLog
    from ..harness.connection import Connection
    from ..hooks import Hook
    from ..models import GeminiOptions, VertexAI
    from ..policy import PolicyLike
    from ..skills import Skill
    from ..tracing import Tracing
    from ..triggers import Trigger


class ServedModel(Protocol):
    """A model served on an OpenAI-compatible endpoint the agent may start and stop,
    such as `antigravity_sdk.testing.ScriptedModel` (matched by shape, not imported)."""

    @property
    def base_url(self) -> str: ...
    @property
    def model_name(self) -> str: ...
    @property
    def started(self) -> bool: ...
    async def start(self) -> None: ...
    async def stop(self) -> None: ...


def is_served_model(model: object) -> TypeGuard[ServedModel]:
    # getattr_static: `base_url` is typically a property that raises until the model starts.
    missing = object()
    names = ("base_url", "model_name", "start", "stop")
    return all(inspect.getattr_static(model, name, missing) is not missing for name in names)


@dataclass(frozen=True)
class ModelGroup:
    """Which model the harness calls, and how (`model()`, `model_options()`, `vertex_ai()`)."""

    model: str | ServedModel | None = None
    base_url: str | None = None
    api_key: str | None = None
    options: GeminiOptions | None = None
    vertex: VertexAI | None = None

    @property
    def served(self) -> bool:
        """On an OpenAI-compatible endpoint, where the harness drops documents."""
        return self.base_url is not None or is_served_model(self.model)


@dataclass(frozen=True)
class PromptGroup:
    """What the model is told besides the turn's prompt: the system prompt, skills, and
    the `finish` tool of structured output."""

    system_instructions: str = ""
    custom_instructions: tuple[dict[str, str], ...] = ()
    section_overrides: tuple[dict[str, Any], ...] = ()
    skills_paths: tuple[Path, ...] = ()
    skills: tuple[Skill, ...] = ()
    output_type: type[BaseModel] | None = None
    output_schema: str = ""


@dataclass(frozen=True)
class StorageGroup:
    """Where the harness keeps conversations and its app data, and which to resume."""

    save_dir: Path | None = None
    app_data_dir: Path | None = None
    resume: str = ""  # the id of a saved conversation to continue
    create_if_missing: bool = False


@dataclass(frozen=True)
class LimitsGroup:
    """How much a conversation may cost, and how long anything may take."""

    budget: Budget | None = None
    retry: RetryPolicy | None = field(default_factory=RetryPolicy)
    tool_output: ToolOutputLimit | None = None
    timeouts: Timeouts = field(default_factory=Timeouts)


@dataclass(frozen=True)
class GovernanceGroup:
    """What the harness may do, and everything that decides or records it."""

    hooks: tuple[Hook, ...] = ()
    policies: tuple[PolicyLike, ...] = ()
    declared_servers: tuple[str, ...] = ()  # by PolicyFiles
    policy_files: tuple[str, ...] = ()  # where PolicyFiles came from: held read-only
    tools: tuple[Any, ...] = ()  # Tool, @tool functions, plain (a)sync functions
    triggers: tuple[Trigger, ...] = ()
    mcp_servers: tuple[McpServer, ...] = ()
    workspaces: tuple[Path, ...] = ()
    capabilities: CapabilitiesConfig = field(default_factory=CapabilitiesConfig)
    ungoverned: frozenset[str] = frozenset()
    tracing: Tracing | None = None
    audit: AuditLog | None = None  # a template: each agent opens a log of its own


@dataclass(frozen=True)
class ProcessGroup:
    """How the harness is reached (spawned or connected to) and what bounds it."""

    harness_path: str | os.PathLike[str] | None = None
    connection: Connection | None = None
    containment: Containment | None = field(default_factory=Containment)  # None: off
    landlock_abi: int = 0  # the kernel's, probed by build() when containment applies


@dataclass(frozen=True)
class Settings:
    """All of an agent's settings, one group per concern."""

    model: ModelGroup = field(default_factory=ModelGroup)
    prompt: PromptGroup = field(default_factory=PromptGroup)
    storage: StorageGroup = field(default_factory=StorageGroup)
    limits: LimitsGroup = field(default_factory=LimitsGroup)
    governance: GovernanceGroup = field(default_factory=GovernanceGroup)
    process: ProcessGroup = field(default_factory=ProcessGroup)
