"""`Agent` and `AgentBuilder`: a governed agent on the real Antigravity harness.

The agent owns one harness connection and one `SessionCore`. The connection hands every
frame to the core as it is parsed; hook calls, tool runs and questions it yields start at
once as tasks (an answer that never waits goes out before the next frame is read; a slow
hook never stalls the socket) and always answer exactly once — fail-closed when the
dispatch itself fails. Stream chunks and the turn's end go to the turn in progress.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import weakref
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

from . import instructions, policy
from ._eager import start_now
from .containment import Containment
from .context import ToolContext
from .conversations import check_conversation_id, conversation_file, default_save_dir
from .errors import (
    AgentStateError,
    AntigravityError,
    ConfigurationError,
    ContainmentError,
    ConversationNotFoundError,
    HarnessConnectionError,
    PromptError,
    ProtocolError,
    TurnCancelledError,
    TurnDeniedError,
    TurnFailedError,
    TurnTimeoutError,
)
from .harness.catalog import (
    RESERVED_TOOL_NAMES,
    TOOLS,
    Governance,
    ToolGuard,
    tools_enabled_by,
)
from .harness.effects import (
    HALT,
    SESSION_END,
    Chunk,
    Effect,
    Frame,
    HookCall,
    Initialized,
    Request,
    SessionEnded,
    TurnEnded,
)
from .harness.protocol import SessionCore
from .hooks import Hook, HookRunner, overridden_events
from .instructions import BuiltinSection
from .media import Document, Prompt, PromptPart, prompt_parts, prompt_text
from .models import GeminiOptions, ServiceTier, ThinkingLevel, VertexAI
from .policy._rules import _is_duration
from .skills import Skill, check_skill_dir, check_skills
from .types import (
    Budget,
    BuiltinTool,
    CapabilitiesConfig,
    ChatResponse,
    HookResult,
    McpServer,
    RetryPolicy,
    Step,
    StopReason,
    StreamChunk,
    ToolCall,
    ToolOutputLimit,
    ToolResult,
    UsageMetadata,
)

if TYPE_CHECKING:
    from pydantic import BaseModel

    from .audit import AuditLog, Redactor
    from .containment import ContainmentInForce
    from .harness.connection import Connection
    from .policy import PolicyEnforcer
    from .policy._engine import PolicyLike
    from .structured import OutputGuard
    from .tools import ToolRunner
    from .tracing import TracedHookRunner, Tracing
    from .triggers import Trigger, TriggerRunner

__all__ = ["Agent", "AgentBuilder"]

logger = logging.getLogger("antigravity_sdk.agent")
_trigger_logger = logging.getLogger("antigravity_sdk.triggers")

_SESSION_END_TIMEOUT = 2.0
_SESSION_HOOKS_TIMEOUT = 10.0  # on_session_start / on_session_end hooks, all together
_IDLE_TIMEOUT = 10.0

# Cleanups of agents that were garbage-collected while started (asyncio keeps only weak
# references to tasks, so these hold them until they finish).
_CLEANUPS: set[asyncio.Task[None]] = set()


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


def _is_served_model(model: object) -> bool:
    # getattr_static: `base_url` is typically a property that raises until the model starts.
    missing = object()
    names = ("base_url", "model_name", "start", "stop")
    return all(inspect.getattr_static(model, name, missing) is not missing for name in names)


def _default_root() -> Path:
    from .harness.install import default_cache_dir

    return default_cache_dir()


@dataclass
class _Settings:
    hooks: list[Hook] = field(default_factory=list)
    policies: list[Any] = field(default_factory=list)
    tools: list[Any] = field(default_factory=list)
    triggers: list[Any] = field(default_factory=list)
    mcp_servers: list[McpServer] = field(default_factory=list)
    declared_servers: list[str] = field(default_factory=list)  # by PolicyFiles
    workspaces: list[Path] = field(default_factory=list)
    system_instructions: str = ""
    custom_instructions: list[dict[str, str]] = field(default_factory=list)
    section_overrides: list[dict[str, Any]] = field(default_factory=list)
    skills_paths: list[Path] = field(default_factory=list)
    skills: list[Skill] = field(default_factory=list)
    model_options: GeminiOptions | None = None
    vertex: VertexAI | None = None
    capabilities: CapabilitiesConfig = field(default_factory=CapabilitiesConfig)
    model: Any = None  # str | ServedModel | None
    base_url: str | None = None
    api_key: str | None = None
    budget: Budget | None = None
    retry: RetryPolicy | None = field(default_factory=RetryPolicy)
    tool_output: ToolOutputLimit | None = None
    harness_path: str | os.PathLike[str] | None = None
    save_dir: Path | None = None
    resume: str = ""  # the id of a saved conversation to continue
    create_if_missing: bool = False
    app_data_dir: Path | None = None
    connection: Any = None
    hook_timeout: float | None = None
    ungoverned: frozenset[str] = frozenset()
    turn_timeout: float = 600.0
    startup_timeout: float = 30.0
    output_type: Any = None  # type[BaseModel] | None
    output_schema: str = ""
    tracing: Tracing | None = None
    audit: AuditLog | None = None  # a template: each agent opens a log of its own
    containment: Containment | None = field(default_factory=Containment)  # None: off
    landlock_abi: int = 0  # the kernel's, probed by build() when containment applies


class AgentBuilder:
    """Fluent configuration for an `Agent`; `build()` validates it (policies included)."""

    def __init__(self) -> None:
        self._settings = _Settings()

    def hook(self, hook: Hook) -> AgentBuilder:
        """Add a `Hook`; hooks run in the order added, all before the policies. Raises
        TypeError here, not at start, for a non-Hook or a lifecycle method written
        without `async def`."""
        return self.hooks([hook])

    def hooks(self, hooks: Iterable[Hook]) -> AgentBuilder:
        """Add several hooks, checked as `hook()` checks one."""
        added = list(hooks)
        for hook in added:
            overridden_events(hook)
        self._settings.hooks.extend(added)
        return self

    def policy(self, policy: PolicyLike) -> AgentBuilder:
        """Add one policy (or a list of them, as the `policy` builders return)."""
        return self.policies([policy])

    def policies(self, policies: Iterable[PolicyLike]) -> AgentBuilder:
        """Add policies (nested lists are flattened); `build()` validates them, naming a
        bad one by its position from 1 or, for a file's, by the file's rule number.
        Without any, the agent uses `default_policies`. A `PolicyFile` (`policy.load`)
        also brings the MCP servers it declares: without `.mcp_server(...)`s its
        `server/tool` rules are checked against those names (with them, against the
        configured servers)."""
        items = list(policies)
        for source in (policies, *items):
            if isinstance(source, policy.PolicyFile):
                self._settings.declared_servers.extend(source.mcp_servers)
        self._settings.policies.extend(items)
        return self

    def allow_all(self) -> AgentBuilder:
        """Add the catch-all allow (instead of the default `confirm_run_command()`)."""
        return self.policy(policy.allow_all())

    def tool(self, tool: Any) -> AgentBuilder:
        """A host-side tool: a `Tool`, a `@tool` function or a plain (a)sync function."""
        return self.tools([tool])

    def tools(self, tools: Iterable[Any]) -> AgentBuilder:
        self._settings.tools.extend(tools)
        return self

    def trigger(self, trigger: Trigger) -> AgentBuilder:
        self._settings.triggers.append(trigger)
        return self

    def mcp_server(self, server: McpServer) -> AgentBuilder:
        self._settings.mcp_servers.append(server)
        return self

    def workspaces(self, paths: Iterable[str | os.PathLike[str]]) -> AgentBuilder:
        """The directories the agent works in (resolved now; `~` expanded): the harness's
        workspaces, and where the default policies confine file access."""
        self._settings.workspaces.extend(Path(path).expanduser().resolve() for path in paths)
        return self

    def system_instructions(self, text: str) -> AgentBuilder:
        """Text appended to the harness's own system prompt (as its `<Instructions>`)."""
        self._settings.system_instructions = instructions.check_text(
            "system_instructions", text, empty=True
        )
        return self

    def replace_system_instructions(self, *parts: str | BuiltinSection) -> AgentBuilder:
        """Replace the harness's system prompt entirely with `parts`, in order: your text,
        and any `BuiltinSection` of the harness's prompt to keep. The prompt governs
        nothing: hooks and policies still decide every tool call."""
        self._settings.custom_instructions = instructions.custom_parts(parts)
        return self

    def override_system_sections(self, sections: Mapping[str, str | None]) -> AgentBuilder:
        """Replace sections of the harness's default prompt by name (`"identity"`,
        `"communication_style"`, ...), or remove one with None."""
        self._settings.section_overrides = instructions.overrides(sections)
        return self

    def skills_paths(self, paths: Iterable[str | os.PathLike[str]]) -> AgentBuilder:
        """Directories of skills (each skill a sub-directory with a `SKILL.md`)."""
        if isinstance(paths, str | os.PathLike):
            raise TypeError("skills_paths() takes a list of paths, not one path")
        self._settings.skills_paths.extend(
            check_skill_dir(Path(path).expanduser().resolve()) for path in paths
        )
        return self

    def skills(self, skills: Iterable[Skill]) -> AgentBuilder:
        """Inline skills, which the model reads with `lookup_skill` (see `Skill`)."""
        self._settings.skills = check_skills([*self._settings.skills, *skills])
        return self

    def capabilities(self, capabilities: CapabilitiesConfig) -> AgentBuilder:
        self._settings.capabilities = capabilities
        return self

    def model(
        self,
        model: str | ServedModel,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
    ) -> AgentBuilder:
        """A Gemini model name, a name served at an OpenAI-compatible `base_url`, or a
        `ScriptedModel` (which the agent starts and stops if it is not running)."""
        if base_url is not None and api_key is not None:
            raise ConfigurationError(
                "the harness's OpenAI-compatible endpoint takes no API key; "
                "use an endpoint that needs none (Ollama, vLLM) or a Gemini model"
            )
        settings = self._settings
        settings.model, settings.base_url, settings.api_key = model, base_url, api_key
        return self

    def budget(self, budget: Budget) -> AgentBuilder:
        """Limits on model calls, tool calls and tokens for the whole conversation; past
        one the harness ends the turn (`ChatResponse.stop_reason` says which)."""
        if not isinstance(budget, Budget):
            raise TypeError(f"budget() takes a Budget, got {type(budget).__name__}")
        self._settings.budget = budget
        return self

    def retry_policy(self, policy: RetryPolicy | None) -> AgentBuilder:
        """How the harness retries failed model calls (default `RetryPolicy()`: bounded,
        about 7 s); None leaves it to the harness, which retries for many minutes."""
        if policy is not None and not isinstance(policy, RetryPolicy):
            raise TypeError(
                f"retry_policy() takes a RetryPolicy or None, got {type(policy).__name__}"
            )
        self._settings.retry = policy
        return self

    def tool_output_limit(self, limit: ToolOutputLimit | None) -> AgentBuilder:
        """Bound what one tool's output may cost the model (truncate it, or an error)."""
        if limit is not None and not isinstance(limit, ToolOutputLimit):
            raise TypeError(
                f"tool_output_limit() takes a ToolOutputLimit or None, got {type(limit).__name__}"
            )
        self._settings.tool_output = limit
        return self

    def model_options(
        self,
        *,
        thinking_level: ThinkingLevel | str | None = None,
        max_output_tokens: int | None = None,
        service_tier: ServiceTier | str | None = None,
        headers: Mapping[str, str] | None = None,
        endpoint_url: str | None = None,
    ) -> AgentBuilder:
        """Options of a Gemini model (Gemini API or Vertex AI): how much it thinks, its
        output limit and tier, extra HTTP headers, and another API root (`endpoint_url`,
        a proxy or gateway). The OpenAI-compatible endpoint takes none of them."""
        self._settings.model_options = GeminiOptions(
            thinking_level=thinking_level,
            service_tier=service_tier,
            max_output_tokens=max_output_tokens,
            headers=dict(headers or {}),
            endpoint_url=endpoint_url,
        )
        return self

    def vertex_ai(
        self,
        project: str | None = None,
        location: str | None = None,
        *,
        api_key: str | None = None,
    ) -> AgentBuilder:
        """Call the Gemini model on Vertex AI: in `project` and `location` (default
        `GOOGLE_CLOUD_PROJECT` / `GOOGLE_CLOUD_LOCATION`), or with an express-mode key."""
        self._settings.vertex = VertexAI.resolve(project, location, api_key)
        return self

    def output_type(self, model: type[BaseModel]) -> AgentBuilder:
        """Answer with an instance of `model` (a pydantic BaseModel): the harness offers
        the model a `finish` tool whose arguments are `model`'s JSON schema, for the whole
        session, and `chat()` returns the answer validated in `ChatResponse.output`.

        `finish` calls reach hooks and policies like any tool call; the agent's policies
        get `policy.allow("finish")` (named "output_type"), so a catch-all deny leaves
        structured output possible while `policy.deny("finish")` still wins. Raises
        `TypeError` for anything but a model class with fields.
        """
        from .structured import output_schema

        self._settings.output_schema = output_schema(model)
        self._settings.output_type = model
        return self

    def harness_path(self, path: str | os.PathLike[str]) -> AgentBuilder:
        self._settings.harness_path = path
        return self

    def save_dir(self, path: str | os.PathLike[str]) -> AgentBuilder:
        """Where the harness stores conversations (default: under the SDK's cache dir)."""
        self._settings.save_dir = Path(path)
        return self

    def resume(self, conversation_id: str, *, create: bool = False) -> AgentBuilder:
        """Continue the conversation saved under the save dir as `conversation_id` (an
        earlier agent's `conversation_id`; `list_conversations()` lists them). `start()`
        raises `ConversationNotFoundError` if it is not saved, unless `create`: then a new
        conversation starts under that id. The earlier steps are in `agent.history`; this
        agent's own hooks and policies govern everything from here on."""
        if not isinstance(create, bool):
            raise TypeError(f"create must be a bool, got {type(create).__name__}")
        self._settings.resume = check_conversation_id(conversation_id)
        self._settings.create_if_missing = create
        return self

    def app_data_dir(self, path: str | os.PathLike[str]) -> AgentBuilder:
        """Where the harness keeps its app data and its HOME (default: the SDK's cache)."""
        self._settings.app_data_dir = Path(path)
        return self

    def connection(self, connection: Connection) -> AgentBuilder:
        """Use this connection (e.g. `RemoteConnection`) instead of spawning a harness."""
        self._settings.connection = connection
        return self

    def allow_ungoverned(self, *routes: str) -> AgentBuilder:
        """Opt into routes the harness runs WITHOUT asking hooks or policies.

        `"manage_task"` and `"schedule"` let their capabilities be switched on (the harness
        never asks before these tools run: `manage_task` can feed input to a running
        background command); `"subagents"` lets `invoke_subagent` start subagents the
        model defines itself, whose tool calls no hook ever sees;
        `"subagent_workspaces"` lets a subagent work in a `branch` or `share` workspace,
        for which the harness runs `git worktree add` and `git reset --hard` in the
        user's repository (and git runs whatever that repository's config says, which an
        allowed file write can change). Without the opt-in, `build()` refuses such a
        configuration and the SDK denies such calls before any hook is asked.

        `"schedule"` also lets the harness run the turns a timer wakes while no `chat()`
        or `stream()` runs (the built-in `research` subagent carries `schedule` whatever
        the capabilities say): without it, every request of such a wake is refused and
        the wake halted. Each opt-in is logged as a warning when the agent is built.
        """
        unknown = sorted(set(routes) - _UNGOVERNED_ROUTES)
        if unknown:
            raise ConfigurationError(
                f"allow_ungoverned(): unknown route(s) {unknown}; "
                f"the ungoverned routes are {sorted(_UNGOVERNED_ROUTES)}"
            )
        self._settings.ungoverned |= frozenset(routes)
        return self

    def hook_timeout(self, seconds: float | None) -> AgentBuilder:
        """Bound each hook call; a hook that exceeds it counts as failing (fail-closed).
        Policy predicates get the same bound (see `policy.enforce`)."""
        if seconds is not None and not _is_duration(seconds):
            raise ConfigurationError(
                f"hook_timeout must be a positive, finite number, got {seconds!r}"
            )
        self._settings.hook_timeout = seconds
        return self

    def turn_timeout(self, seconds: float) -> AgentBuilder:
        """Bound each turn (default 600 s); past it the turn is halted and TimeoutError raised."""
        self._settings.turn_timeout = seconds
        return self

    def tracing(self, tracer_provider: Any = None, *, agent_name: str = "") -> AgentBuilder:
        """Trace with OpenTelemetry: a span per turn, tool call, hook call and policy
        decision, from `tracer_provider` (default: the global one). Needs the `otel`
        extra; without it this raises `ConfigurationError` with the install command.
        `agent_name` is `gen_ai.agent.name` (and names the turn spans)."""
        try:
            from .tracing import Tracing
        except ImportError as exc:
            raise ConfigurationError(str(exc)) from exc
        self._settings.tracing = Tracing(tracer_provider, agent_name)
        return self

    def audit_log(
        self,
        path: str | os.PathLike[str] | None,
        *,
        redact: Redactor | None = None,
        fsync: bool = False,
    ) -> AgentBuilder:
        """Append one JSON line per tool-call decision (and one per turn) to `path`; None
        turns it off. `redact(args) -> args` filters the arguments first (if it fails,
        the line says so instead of holding them); `fsync` syncs each line to disk. The
        file is opened at `start()` (an unusable path is a `ConfigurationError` then).
        See `antigravity_sdk.audit` for the format and its guarantees."""
        from .audit import AuditLog

        self._settings.audit = None if path is None else AuditLog(path, redact=redact, fsync=fsync)
        return self

    def containment(self, containment: Containment | None) -> AgentBuilder:
        """Bound the harness and everything it starts with the kernel (Linux Landlock),
        on by default: writes only in the workspaces, the harness's state and a private
        temp dir; no reading the user's credentials; TCP only to the model's and listed
        ports; no signals outside the agent. `Containment(...)` extends the defaults;
        `Containment(required=True)` refuses to build where it cannot apply; None
        switches it off (with a warning). See `antigravity_sdk.containment`."""
        if containment is not None and not isinstance(containment, Containment):
            raise ConfigurationError(
                f"containment() takes a Containment or None, got {type(containment).__name__}"
            )
        self._settings.containment = containment
        return self

    def build(self) -> Agent:
        """Validate everything that can be checked without the harness: the capabilities
        (no ungoverned tool without the opt-in), the host-side tools' names and
        signatures, and the policies (no rule that could never match)."""
        from .harness.config import merged_budget
        from .tools import ToolRunner

        settings = replace(self._settings)
        _check_capabilities(settings)
        _check_exclusive(settings)
        _check_model(settings)
        _check_containment(settings)
        merged_budget(settings.capabilities, settings.budget)  # limits set twice must agree
        tools = ToolRunner(settings.tools, context=ToolContext())
        clashes = sorted(set(tools.tools) & RESERVED_TOOL_NAMES)
        if clashes:
            raise ConfigurationError(
                f"host-side tool names {clashes} are the harness's own tool names; "
                "hooks and policies could not tell the two apart"
            )
        policies = settings.policies or default_policies(settings.workspaces)
        if settings.output_type is not None:
            # A specific allow: above a catch-all deny, below a specific deny of finish.
            policies = [*policies, policy.allow("finish", name="output_type")]
        # The enforcer bounds its own predicates by the hook timeout: a blocking sync
        # predicate would otherwise stall the event loop, so the hook bound never fires.
        enforcer = policy.enforce(
            policies,
            mcp_servers=settings.mcp_servers or settings.declared_servers or None,
            tools=tools.tools,
            timeout=settings.hook_timeout,
        )
        if settings.audit is not None:
            enforcer.note_decisions()  # the audit log records the rule behind each verdict
        return Agent(settings, enforcer, tools)


_UNGOVERNED_ROUTES: Final = frozenset(
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


def _check_exclusive(settings: _Settings) -> None:
    """Settings the harness takes only one of; it would fail the first turn, or refuse to
    start, with both."""
    modes = [
        name
        for name, value in (
            ("system_instructions()", settings.system_instructions),
            ("replace_system_instructions()", settings.custom_instructions),
            ("override_system_sections()", settings.section_overrides),
        )
        if value
    ]
    if len(modes) > 1:
        raise ConfigurationError(
            f"{' and '.join(modes)} cannot be combined: the harness takes one of them "
            "(to append while overriding, override a section with the text to add)"
        )
    if settings.skills_paths and settings.skills:
        raise ConfigurationError(
            "skills_paths() and skills() cannot be combined: the harness takes either "
            "skill directories or inline skills"
        )


def _check_model(settings: _Settings) -> None:
    """Gemini options and Vertex AI need a Gemini model, not the OpenAI-compatible
    endpoint (whose config has a URL and nothing else)."""
    served = settings.base_url is not None or _is_served_model(settings.model)
    if served and (settings.model_options is not None or settings.vertex is not None):
        what = "vertex_ai()" if settings.vertex is not None else "model_options()"
        raise ConfigurationError(
            f"{what} needs a Gemini model: the harness's OpenAI-compatible endpoint takes "
            "only a URL (no options, headers or key)"
        )
    if settings.vertex is not None and settings.api_key is not None:
        raise ConfigurationError(
            "with vertex_ai(), give the key as vertex_ai(api_key=...), not model(api_key=...)"
        )


def _check_containment(settings: _Settings) -> None:
    """Probe the kernel once per build: keep containment where it applies, refuse where
    it is required and cannot, otherwise warn once and run uncontained."""
    from .containment import landlock_abi, unavailable_reason

    spec = settings.containment
    if spec is None:
        logger.warning(
            "containment is off (AgentBuilder.containment(None)): the harness and every "
            "command it runs can do whatever this user can"
        )
        return
    abi = landlock_abi()
    reason = unavailable_reason(abi, local=settings.connection is None)
    if reason and spec.required:
        raise ContainmentError(f"Containment(required=True) cannot be met: {reason}")
    if reason:
        logger.warning("the harness will run uncontained: %s", reason)
        settings.containment = None
        return
    settings.landlock_abi = abi


def _check_capabilities(settings: _Settings) -> None:
    """Refuse tools the harness never asks about unless opted into; warn on opt-ins."""
    enabled = settings.capabilities.enabled_tools
    ungoverned = sorted(
        spec.name
        for spec in TOOLS.values()
        if spec.governance is Governance.NEVER_ASKED and spec.capability in enabled
    )
    missing = [name for name in ungoverned if name not in settings.ungoverned]
    if missing:
        raise ConfigurationError(
            f"the capabilities enable {missing}, which the harness runs without asking "
            "any hook or policy (a rule on them could never fire). Leave them out of "
            "CapabilitiesConfig.enabled_tools, or accept that with "
            f".allow_ungoverned({', '.join(map(repr, missing))})"
        )
    for route in sorted(settings.ungoverned):
        logger.warning(
            "allow_ungoverned(%r): the harness runs this route without asking hooks or policies",
            route,
        )
    if BuiltinTool.RUN_WORKFLOW in enabled:
        logger.warning(
            "run_workflow is enabled: once a call is allowed, its script runs arbitrary "
            "code on the host that no hook sees"
        )


class Agent:
    """A running conversation with the harness, governed by hooks and policies.

    Use `async with agent:` (or `await agent.start()` / `await agent.stop()`), then
    `await agent.chat(prompt)` or `async for chunk in agent.stream(prompt)`.
    """

    def __init__(self, settings: _Settings, enforcer: PolicyEnforcer, tools: ToolRunner) -> None:
        self._settings = settings
        self.policy_enforcer = enforcer
        self._hooks: list[Hook] = list(settings.hooks)
        self.hook_runner: HookRunner | None = None
        self._traced: TracedHookRunner | None = None  # the hook runner, when tracing
        self.conversation_id = ""
        self.history: list[Step] = []
        self.turn_count = 0
        self._core: SessionCore | None = None
        self._conn: Connection | None = None
        self._tools = tools
        self._triggers: TriggerRunner | None = None
        self._owned_model: ServedModel | None = None
        self._listening = False  # frames from the connection reach `_handle`
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._answers: set[asyncio.Task[None]] = set()  # answers the harness waits for
        self._abandoning: asyncio.Task[None] | None = None  # the last abandoned turn's halt
        self._turn_lock = asyncio.Lock()
        self._output_guard: OutputGuard | None = None
        if settings.output_type is not None:
            from .structured import OutputGuard

            self._output_guard = OutputGuard(settings.output_type)
        # The harness drops documents on their way to an OpenAI-compatible endpoint.
        self._documents_reach_model = settings.base_url is None and not _is_served_model(
            settings.model
        )
        self._queue: asyncio.Queue[Effect | BaseException] | None = None
        self._idle = asyncio.Event()
        self._initialized = asyncio.Event()
        self._session_ended = asyncio.Event()
        self._session_end_dispatched = False
        self._denial: HookResult | None = None
        self._failure: BaseException | None = None
        self._started = False
        self.last_stop_reason: StopReason | None = None
        """Why the last turn ended (also for `stream()` and a turn that raised)."""
        self._audit = settings.audit.copy() if settings.audit is not None else None
        self._containment: ContainmentInForce | None = None

    @staticmethod
    def builder() -> AgentBuilder:
        return AgentBuilder()

    @property
    def started(self) -> bool:
        return self._started

    @property
    def usage(self) -> UsageMetadata:
        """What the conversation has cost so far, all turns and trajectories (a resumed
        conversation's earlier turns included)."""
        return self._core.usage if self._core is not None else UsageMetadata()

    @property
    def usage_by_trajectory(self) -> dict[str, UsageMetadata]:
        """`usage` by trajectory id: the conversation's id, and each subagent's."""
        return self._core.usage_by_trajectory if self._core is not None else {}

    @property
    def harness_pid(self) -> int | None:
        """The process id of the harness this agent spawned, from `start()` to `stop()`;
        None for a remote harness (`RemoteConnection`) or an agent that is not started."""
        pid = getattr(self._conn, "pid", None)
        return pid if isinstance(pid, int) else None

    @property
    def containment(self) -> ContainmentInForce | None:
        """The containment the harness runs in, from `start()` on (it stays readable
        after `stop()`); None before the first start and when the agent is uncontained
        (switched off, or unavailable here: `build()` warned)."""
        return self._containment

    def register_hook(self, hook: Hook) -> None:
        """Add a hook (before the PolicyEnforcer); only before `start()`."""
        if self._started:
            raise AgentStateError("register hooks before the agent starts")
        self._hooks.append(hook)

    # -- lifecycle ----------------------------------------------------------------------

    async def __aenter__(self) -> Agent:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Spawn (or connect to) the harness, configure the session, run session_start."""
        if self._started:
            raise AgentStateError("the agent is already started")
        from .harness.config import harness_config
        from .harness.connection import LocalConnection

        settings = self._settings
        save_dir = (settings.save_dir or default_save_dir()).resolve()
        self._check_resumable(save_dir)
        if self._audit is not None:
            self._audit.open(self.policy_enforcer.fingerprint)
        self._started = True
        self._reset_session()
        try:
            model = await self._model_settings()
            root = _default_root()
            app_data = (settings.app_data_dir or root / "app-data").resolve()
            # The output guard first: a finish call that does not validate is refused
            # before any hook or policy is asked (like the SDK's other refusals).
            output = [self._output_guard] if self._output_guard is not None else []
            host_tools = frozenset(self._tools.tools)
            finish = frozenset({"finish"}) if output else frozenset()
            guard = ToolGuard(
                enabled=tools_enabled_by(settings.capabilities.enabled_tools) | host_tools | finish,
                mcp_servers=frozenset(server.name for server in settings.mcp_servers),
                any_subagent="subagents" in settings.ungoverned,
                subagent_workspaces="subagent_workspaces" in settings.ungoverned,
                scheduled_wakes="schedule" in settings.ungoverned,
            )
            self._core = SessionCore(host_tools, guard, host_args=_host_args(self._tools))
            hooks = [*output, *self._hooks, self.policy_enforcer]
            if settings.tracing is None:
                self.hook_runner = HookRunner(
                    hooks, timeout=settings.hook_timeout, check_rewrite=self._core.check_rewrite
                )
            else:
                self.hook_runner = self._traced = settings.tracing.hook_runner(
                    hooks,
                    turn_attributes=self._model_attributes(),
                    timeout=settings.hook_timeout,
                    check_rewrite=self._core.check_rewrite,
                )
            from .containment import for_agent, trace_attributes

            if settings.containment is not None:
                self._containment = for_agent(
                    settings.containment,
                    abi=settings.landlock_abi,
                    workspaces=settings.workspaces or [Path.cwd()],
                    state=(
                        settings.save_dir or default_save_dir(),
                        settings.app_data_dir or root / "app-data",
                    ),
                    model=model,
                    mcp_servers=settings.mcp_servers,
                )
                for root in self._containment.listing_only:
                    logger.warning(
                        "containment: %s holds a credential path, so no file can be made "
                        "directly in it (its subdirectories are writable); use a project "
                        "directory as the workspace",
                        root,
                    )
            self._conn = settings.connection or LocalConnection(
                settings.harness_path,
                startup_timeout=settings.startup_timeout,
                containment=self._containment,
            )
            await self._conn.open(storage_dir=save_dir, home=app_data / "home")
            if isinstance(self._conn, LocalConnection) and self._containment is not None:
                self._containment = self._conn.containment  # what the kernel put in force
            if self._traced is not None:
                self._traced.turn_attributes.update(trace_attributes(self._containment))
            # The connection holds the agent only weakly, so an agent dropped without
            # stop() can be collected; its finalizer then ends the harness (see `_abandon`).
            self._listening = True
            _listen(weakref.ref(self), self._conn, self._core)
            self._finalizer = weakref.finalize(
                self, _abandon, asyncio.get_running_loop(), self._conn, self._owned_model
            )
            await self._conn.send(
                harness_config(
                    model=model,
                    workspaces=settings.workspaces or [Path.cwd()],
                    app_data_dir=app_data,
                    capabilities=settings.capabilities,
                    hook_events=self.hook_runner.subscribed_events(),
                    system_instructions=settings.system_instructions,
                    custom_instructions=settings.custom_instructions,
                    section_overrides=settings.section_overrides,
                    skills_paths=settings.skills_paths,
                    skills=settings.skills,
                    tools=self._tools.declarations(),
                    mcp_servers=settings.mcp_servers,
                    resume=settings.resume,
                    create_if_missing=settings.create_if_missing,
                    output_schema=settings.output_schema,
                    budget=settings.budget,
                    retry=settings.retry,
                    tool_output=settings.tool_output,
                )
            )
            _build_turn_models()  # while the harness initializes the conversation
            await self._wait_initialized(save_dir)
            if self._audit is not None:
                self._audit.session(self.conversation_id, self._containment)
            self._idle.set()
            await self._session_hooks(self.hook_runner.dispatch_session_start, "on_session_start")
            if settings.triggers:
                from .triggers import TriggerRunner

                self._triggers = TriggerRunner(settings.triggers)
                await self._triggers.start(self._trigger_send)
        except BaseException:
            await self._shutdown()
            raise

    def _check_resumable(self, save_dir: Path) -> None:
        """Before anything starts: a conversation to resume must be saved. Only a harness
        the agent spawns reads this save dir; a remote one answers for its own."""
        settings = self._settings
        if not settings.resume or settings.create_if_missing or settings.connection:
            return
        if not conversation_file(save_dir, settings.resume).is_file():
            raise _not_found(settings.resume, save_dir)

    async def _wait_initialized(self, save_dir: Path) -> None:
        settings = self._settings
        try:
            await self._wait(
                self._initialized, settings.startup_timeout, "initialize the conversation"
            )
        except HarnessConnectionError as exc:
            # Removed since the check, or a remote harness's own save dir: the harness
            # says so on stderr and exits.
            if settings.resume and "cannot resume" in exc.stderr_tail:
                raise _not_found(settings.resume, save_dir) from exc
            raise

    def _reset_session(self) -> None:
        self.conversation_id = ""
        self.history = []
        self.turn_count = 0
        self._idle = asyncio.Event()
        self._initialized = asyncio.Event()
        self._session_ended = asyncio.Event()
        self._session_end_dispatched = False
        self._abandoning = None
        self._denial = None
        self._failure = None
        self.last_stop_reason = None

    async def stop(self) -> None:
        """End the session (bounded: at most a few seconds even if the harness ignores it)."""
        if not self._started:
            return
        try:
            if self._triggers is not None:
                await self._triggers.stop()
            if not self._session_end_dispatched and self.hook_runner is not None:
                self._session_end_dispatched = True
                await self._session_hooks(self.hook_runner.dispatch_session_end, "on_session_end")
            if self._conn is not None and self._failure is None and self._initialized.is_set():
                with contextlib.suppress(Exception):
                    await self._conn.send(SESSION_END)
                    await self._wait(self._session_ended, _SESSION_END_TIMEOUT, "end the session")
        finally:
            await self._shutdown()

    async def _shutdown(self) -> None:
        self._listening = False  # nothing new starts while the session winds down
        if self._queue is not None:  # a turn still waiting must not wait for its timeout
            self._queue.put_nowait(AntigravityError("the agent was stopped during the turn"))
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        tasks = [t for t in self._tasks if not t.done()]
        for task in tasks:
            task.cancel()
        try:
            if tasks:
                await asyncio.wait(tasks, timeout=1.0)
        finally:
            conn, self._conn = self._conn, None
            if conn is not None:
                await conn.close()
            model, self._owned_model = self._owned_model, None
            if model is not None:
                await model.stop()
            if self._audit is not None:
                self._audit.close()
            if self._containment is not None:
                self._containment.remove_tmp_dir()
            self._started = False

    @staticmethod
    async def _session_hooks(dispatch: Callable[[], Awaitable[None]], event: str) -> None:
        """Session hooks are Inspect hooks, but start() and stop() must not wait forever on
        them: past the bound they are cancelled (and logged), and the session goes on."""
        try:
            async with asyncio.timeout(_SESSION_HOOKS_TIMEOUT):
                await dispatch()
        except TimeoutError:
            logger.warning(
                "%s hooks did not finish within %ss; going on", event, _SESSION_HOOKS_TIMEOUT
            )

    def _model_attributes(self) -> dict[str, Any]:
        """The turn span's model attributes (tracing)."""
        from .harness.config import DEFAULT_GEMINI_MODEL
        from .tracing import model_attributes

        settings = self._settings
        return model_attributes(
            settings.model,
            served=not self._documents_reach_model,
            vertex=settings.vertex is not None,
            default_model=DEFAULT_GEMINI_MODEL,
        )

    async def _model_settings(self) -> Any:
        from .harness.config import DEFAULT_GEMINI_MODEL, ModelSettings, resolve_model

        settings = self._settings
        if _is_served_model(settings.model):
            if not settings.model.started:
                await settings.model.start()
                self._owned_model = settings.model
            return resolve_model(settings.model.model_name, base_url=settings.model.base_url)
        if settings.vertex is not None:
            return ModelSettings(
                name=settings.model or DEFAULT_GEMINI_MODEL,
                vertex=settings.vertex,
                options=settings.model_options,
            )
        resolved = resolve_model(
            settings.model, base_url=settings.base_url, api_key=settings.api_key
        )
        return replace(resolved, options=settings.model_options)

    async def _wait(self, event: asyncio.Event, seconds: float, what: str) -> None:
        try:
            await asyncio.wait_for(event.wait(), seconds)
        except TimeoutError:
            if self._failure is not None:
                raise self._failure from None
            tail = self._conn.stderr_tail() if self._conn is not None else ""
            raise HarnessConnectionError(
                f"the harness did not {what} within {seconds}s", stderr_tail=tail
            ) from None
        if self._failure is not None and event is not self._session_ended:
            raise self._failure

    # -- turns --------------------------------------------------------------------------

    async def chat(
        self, prompt: Prompt, *, output_type: type[BaseModel] | None = None
    ) -> ChatResponse:
        """Run one turn; raises TurnDeniedError when a pre_turn hook denies it.

        `prompt`: text, an `Image` / `Document`, or a sequence of them; checked before
        anything is sent (TypeError, ValueError or `PromptError`). With an output type
        (`AgentBuilder.output_type`) the response's `output` is the model's answer
        validated into it, or None if the model gave none. Passing `output_type` (which
        must be the agent's) requires one: a turn without an answer that validates raises
        `OutputValidationError`, with the raw answer attached.
        """
        parts = self._prompt_parts(prompt)
        self._check_output_type(output_type)
        turn = self._turn(parts, streaming=False)
        output = self._output_guard
        async with self._turn_lock, contextlib.aclosing(turn):
            if output is not None:
                output.begin_turn()
            async for item in turn:
                if isinstance(item, TurnEnded):
                    response = self._finish(item)
                    if output is not None:
                        response.output = output.structured_output(
                            response, self.conversation_id, required=output_type is not None
                        )
                    return response
        raise AssertionError("unreachable: a turn always ends with TurnEnded")

    def _check_output_type(self, output_type: object) -> None:
        """Before anything is sent: the finish tool's schema is fixed when the session
        starts, so a turn can only ask for the agent's own output type."""
        if output_type is None:
            return
        from .structured import check_output_type

        name = check_output_type(output_type).__name__
        configured = self._settings.output_type
        if output_type is not configured:
            has = f"the output type {configured.__name__}" if configured else "no output type"
            raise ConfigurationError(
                f"chat(output_type={name}): this agent has {has}; the harness fixes the "
                "finish tool's schema when the session starts, so build the agent with "
                f".output_type({name})"
            )

    async def stream(
        self, prompt: Prompt, *, subagents: bool = False
    ) -> AsyncIterator[StreamChunk]:
        """Run one turn, yielding text, thought and tool-call chunks as they arrive.

        Only the agent's own chunks (its trajectory is the conversation's), unless
        `subagents`: then subagents' chunks too, told apart by `chunk.trajectory_id`.
        `prompt` is checked as for `chat()`.
        """
        parts = self._prompt_parts(prompt)
        turn = self._turn(parts, streaming=True)
        async with self._turn_lock, contextlib.aclosing(turn):
            async for item in turn:
                if isinstance(item, Chunk):
                    chunk = item.chunk
                    if subagents or chunk.trajectory_id == self.conversation_id:
                        yield chunk
                elif isinstance(item, TurnEnded):
                    self._finish(item)

    def _prompt_parts(self, prompt: object) -> tuple[PromptPart, ...]:
        """The checked parts; a document only for a model that receives documents."""
        parts = prompt_parts(prompt)
        if not self._documents_reach_model and any(isinstance(p, Document) for p in parts):
            raise PromptError(
                "this model is served on an OpenAI-compatible endpoint, and the harness "
                "drops documents on the way there (only text and images arrive): use a "
                "Gemini model, or put the document's text in the prompt"
            )
        return parts

    async def _turn(
        self, parts: tuple[PromptPart, ...], *, streaming: bool
    ) -> AsyncGenerator[Effect, None]:
        if not self._started or self._core is None or self._conn is None:
            raise AgentStateError("start the agent first (async with agent: ...)")
        if self._failure is not None:
            raise self._failure
        if self._abandoning is not None:
            # Its HALT must reach the harness before this turn's input, or it halts this
            # turn instead (nothing else orders them: the idle wait may not yield at all).
            await asyncio.wait([self._abandoning], timeout=_IDLE_TIMEOUT)
            self._abandoning = None
        await self._wait(self._idle, _IDLE_TIMEOUT, "finish the previous turn")
        assert self.hook_runner is not None
        queue: asyncio.Queue[Effect | BaseException] = asyncio.Queue()
        self._queue, self._denial = queue, None
        self._idle.clear()
        scope = self.hook_runner.begin_turn(prompt_text(parts))
        scope.set("prompt_parts", parts)
        traced = self._traced
        if traced is not None:
            traced.start_turn(self.conversation_id)
        finished = False
        ended: TurnEnded | None = None
        self.last_stop_reason = None
        if self._audit is not None:
            self._audit.begin_turn()
        deadline = asyncio.get_running_loop().time() + self._settings.turn_timeout
        try:
            try:
                await self._conn.send(self._core.user_input(parts, streaming=streaming))
            except HarnessConnectionError as exc:
                self._fail(exc)  # the session is over: every later call says so too
                raise
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        item = await queue.get()
                except TimeoutError:
                    self.last_stop_reason = StopReason.TIMEOUT
                    raise TurnTimeoutError(
                        f"the turn did not finish within {self._settings.turn_timeout}s (halted)"
                    ) from None
                if isinstance(item, TurnCancelledError):
                    self.last_stop_reason = StopReason.CANCELLED
                    raise item  # not finished: the clean-up below halts the harness's turn
                if isinstance(item, BaseException):
                    finished = True
                    raise item
                ended = item if isinstance(item, TurnEnded) else None
                finished = ended is not None
                if traced is not None and ended is not None:
                    traced.turn_ended(ended, self._denial)
                yield item
                if finished:
                    return
        except BaseException as exc:
            if traced is not None and not (finished and isinstance(exc, GeneratorExit)):
                traced.turn_failed(exc)
            raise
        finally:
            if self._audit is not None:
                reason = self.last_stop_reason
                self._audit.end_turn(
                    self.conversation_id, ended, reason.value if reason else "error"
                )
            # Closed by the caller's `aclosing` before the turn lock is released. Even so,
            # clear only this turn's state: a generator closed late (by the garbage
            # collector) must never end the turn that came after it.
            if self._queue is queue:
                self._queue = None
            self.hook_runner.end_turn(scope)
            if traced is not None:
                traced.close_turn()
            if not finished and self._failure is None and self._conn is not None:
                # Abandoned (error, timeout, cancellation, consumer gone): stop the harness's
                # turn; the reader marks the agent idle when the harness confirms.
                self._abandoning = self._spawn(self._abandon_turn())

    async def cancel(self) -> bool:
        """End the running turn now, from any task: its `chat()` (or `stream()`) raises
        `TurnCancelledError`, requests still pending are answered fail-closed, and the
        harness halts the turn. The session stays usable: the next turn starts once the
        harness confirms. Returns whether a turn was running."""
        queue = self._queue
        if queue is None:
            return False
        queue.put_nowait(TurnCancelledError("the turn was cancelled (Agent.cancel())"))
        return True

    async def _abandon_turn(self) -> None:
        """Answer every pending request fail-closed, then halt the harness's turn. In that
        order: on a halt the harness drops its pending hook requests, and an answer to a
        request it no longer knows ends the whole session."""
        pending = [task for task in self._answers if not task.done()]
        for task in pending:
            task.cancel()  # each answers fail-closed as it unwinds
        if pending:
            await asyncio.wait(pending, timeout=1.0)
        await self._send_quietly(HALT)

    def _finish(self, ended: TurnEnded) -> ChatResponse:
        if ended.cancelled and self._denial is not None:
            self.last_stop_reason = StopReason.DENIED
            raise TurnDeniedError(self._denial)
        reason = ended.response.stop_reason
        if ended.error:
            failed = TurnFailedError(
                ended.error, StopReason.ERROR if reason is StopReason.FINISHED else reason
            )
            self.last_stop_reason = failed.stop_reason
            raise failed
        self.last_stop_reason = reason
        self.turn_count += 1
        self.history.extend(ended.response.steps)
        return ended.response

    async def _trigger_send(self, text: str) -> None:
        """A trigger's message as a turn. A denied or failed turn is logged and the trigger
        goes on: a rate limit or one bad turn must not silence it for good. A dead
        session still raises (and ends the trigger): every later turn would fail too."""
        try:
            await self.chat(text)
        except (AntigravityError, TimeoutError) as exc:
            if self._failure is not None:
                raise
            what = "was denied" if isinstance(exc, TurnDeniedError) else "failed"
            _trigger_logger.warning("a trigger's turn %s: %s", what, exc)

    # -- the reader and what it starts --------------------------------------------------

    def _fail(self, exc: BaseException) -> None:
        if (
            isinstance(exc, HarnessConnectionError)
            and self.conversation_id
            and self._settings.connection is None
        ):
            # The harness ends its session after a failed turn (a model error, say); the
            # conversation is saved, so say how to go on.
            exc.add_note(
                f"the conversation is saved: an agent built with "
                f".resume({self.conversation_id!r}) over the same save_dir continues it"
            )
        self._failure = exc
        if self._queue is not None:
            self._queue.put_nowait(exc)
        self._initialized.set()
        self._session_ended.set()
        self._idle.set()

    def _spawn(self, coro: Any) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        self._track(task)
        return task

    def _track(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _handle(self, effect: Effect) -> None:
        if isinstance(effect, Chunk):  # only built when the turn streams
            if self._queue is not None:
                self._queue.put_nowait(effect)
        elif isinstance(effect, TurnEnded):
            self._idle.set()
            if self._queue is not None:
                self._queue.put_nowait(effect)
        elif isinstance(effect, Initialized):
            self.conversation_id = effect.conversation_id
            self.history.extend(effect.history)
            if self._tools is not None:
                self._tools.context.conversation_id = effect.conversation_id
            self._initialized.set()
        elif isinstance(effect, SessionEnded):
            self._session_ended.set()
        else:
            # Started here, inside the connection's callback: an answer that needs no
            # waiting is sent before this returns, and leaves nothing to track.
            task = start_now(self._answer(effect))
            if task is not None:
                self._track(task)
                self._answers.add(task)
                task.add_done_callback(self._answers.discard)

    async def _answer(self, request: Request) -> None:
        """Work out the answer to `request` and send it, exactly once. If that fails or is
        cancelled, the answer is its fail-closed refusal (deny, failed tool, cancel)."""
        try:
            hooks = self.hook_runner
            assert hooks is not None, "answering before start()"
            # Any: what one request's `decide` returns is what its own `reply` takes.
            if self._audit is not None:
                outcome: Any = await self._audit.decide(
                    request, hooks, self._tools, self.conversation_id
                )
            else:
                outcome = await request.decide(hooks, self._tools)
            if request.gates_turn and not outcome.allow:
                self._denial = outcome
            self._note_denial(request, outcome)
            reply = request.reply(outcome)
        except BaseException as exc:
            if not isinstance(exc, asyncio.CancelledError):
                logger.error("answering %s failed (answering fail-closed): %s", request, exc)
            reason = _failure_reason(exc)
            if request.gates_turn:
                self._denial = HookResult(allow=False, message=reason)
            self._note_denial(request, HookResult(allow=False, message=reason))
            await self._send_quietly(request.refuse(reason))
            if isinstance(exc, Exception):
                return
            raise
        await self._send_quietly(reply)

    def _note_denial(self, request: Request, outcome: Any) -> None:
        """A denied tool call, for the turn's `denied` step (`Step.kind`)."""
        if (
            isinstance(request, HookCall)
            and request.event == "pre_tool_call"
            and isinstance(request.arg, ToolCall)
            and not outcome.allow
            and self._core is not None
        ):
            self._core.note_denial(request.arg, outcome.message)

    async def _send_quietly(self, frame: Frame) -> None:
        conn = self._conn
        if conn is None:
            return
        try:
            await conn.send(frame)
        except Exception as exc:  # the reader reports a dead connection; nothing to add
            logger.debug("could not send %s: %s", next(iter(frame)), exc)


def _not_found(conversation_id: str, save_dir: Path) -> ConversationNotFoundError:
    return ConversationNotFoundError(
        f"no conversation {conversation_id!r} is saved in {str(save_dir)!r}: "
        "list_conversations(save_dir) lists the saved ones, and resume(id, create=True) "
        "starts a new conversation under an id that is not saved"
    )


def _host_args(tools: ToolRunner) -> dict[str, frozenset[str]]:
    """Each host-side tool -> the arguments its schema names (what a rewrite may set); a
    schema without a `properties` object, or one that admits others
    (`additionalProperties` other than false), is left out: its arguments are open."""
    known: dict[str, frozenset[str]] = {}
    for name, t in tools.tools.items():
        schema = t.parameters_json_schema
        properties = schema.get("properties")
        if isinstance(properties, dict) and schema.get("additionalProperties", False) is False:
            known[name] = frozenset(properties)
    return known


def _build_turn_models() -> None:
    """Build the validators of the types every turn makes (deferred at import, see
    `types._Model`) at start, while the harness is busy anyway, not inside the first
    turn: there their ~7 ms, and the caches they leave cold, cost a 50-call turn about
    0.2 ms of CPU per tool call (measured on harness 0.1.22)."""
    for model in (ToolCall, ToolResult, UsageMetadata, Step, ChatResponse):
        model.model_rebuild()


def _failure_reason(exc: BaseException) -> str:
    return f"the SDK could not decide: {type(exc).__name__}: {exc}".rstrip(": ")


# -- module-level so that nothing the event loop holds keeps an Agent alive ---------------


def _listen(agent_ref: weakref.ref[Agent], conn: Connection, core: SessionCore) -> None:
    """Have `conn` feed every frame to the core and its effects to the agent, and its end
    to `Agent._fail`; both only while the agent is there and listening."""
    receive = core.receive

    def on_frame(frame: dict[str, Any]) -> None:
        agent = agent_ref()  # a strong reference only while this frame is handled
        if agent is not None and agent._listening:
            for effect in receive(frame):
                agent._handle(effect)

    def on_lost(exc: BaseException) -> None:
        agent = agent_ref()
        if agent is None or not agent._listening:
            return
        agent._fail(exc)
        if isinstance(exc, ProtocolError):
            agent._spawn(conn.close())  # a peer we cannot understand is a peer we stop

    conn.listen(on_frame, on_lost)


def _abandon(loop: asyncio.AbstractEventLoop, conn: Connection, model: ServedModel | None) -> None:
    """Finalizer of an agent collected (or left at exit) while started: end its harness.

    On a running loop the connection is closed properly (stdin EOF, then TERM, then KILL);
    with no loop left to run that, a local harness is killed outright.
    """
    logger.warning("an Agent was garbage-collected without stop(); ending its harness")

    def start_cleanup() -> None:
        task = loop.create_task(_close_abandoned(conn, model))
        _CLEANUPS.add(task)
        task.add_done_callback(_CLEANUPS.discard)

    if loop.is_running():
        try:
            loop.call_soon_threadsafe(start_cleanup)
            return
        except RuntimeError:  # closed in the meantime
            pass
    pid = getattr(conn, "pid", None)
    if isinstance(pid, int):
        from .harness.connection import kill_process

        kill_process(pid)


async def _close_abandoned(conn: Connection, model: ServedModel | None) -> None:
    try:
        await conn.close()
    finally:
        if model is not None:
            await model.stop()
