"""`AgentBuilder`: the fluent configuration of an `Agent`.

Each method checks what it is given at once (a wrong type, an unknown route, a bad
duration) and replaces one frozen settings group (`_settings`); `build()` runs the checks
that need the whole configuration (`_checks`), compiles the policies and makes the agent.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import instructions, policy
from ..containment import Containment
from ..context import ToolContext
from ..conversations import check_conversation_id
from ..errors import ConfigurationError, ConfigurationTypeError
from ..harness.catalog import RESERVED_TOOL_NAMES
from ..hooks import Hook, overridden_events
from ..instructions import BuiltinSection
from ..models import GeminiOptions, ServiceTier, ThinkingLevel, VertexAI
from ..skills import Skill, check_skill_dir, check_skills
from ..timeouts import Timeouts
from ..types import Budget, CapabilitiesConfig, McpServer, RetryPolicy, ToolOutputLimit
from ._checks import (
    UNGOVERNED_ROUTES,
    check_capabilities,
    check_containment,
    check_model,
    check_prompt,
    default_policies,
)
from ._settings import ServedModel, Settings

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ..audit import AuditLog, Redactor
    from ..harness.connection import Connection
    from ..policy import PolicyLike
    from ..triggers import Trigger
    from ._agent import Agent

__all__ = ["AgentBuilder"]


class AgentBuilder:
    """Fluent configuration for an `Agent`; `build()` validates it (policies included)."""

    def __init__(self) -> None:
        self._settings = Settings()

    def _set(self, group: str, **changes: Any) -> AgentBuilder:
        """Replace `changes` in the settings group named `group` (the groups are frozen)."""
        settings = self._settings
        self._settings = replace(settings, **{group: replace(getattr(settings, group), **changes)})
        return self

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
        return self._set("governance", hooks=(*self._settings.governance.hooks, *added))

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
        governance = self._settings.governance
        declared = [*governance.declared_servers]
        files = [*governance.policy_files]
        for source in (policies, *items):
            if isinstance(source, policy.PolicyFile):
                declared.extend(source.mcp_servers)
                files += [source.path] if source.path else []
        return self._set(
            "governance",
            declared_servers=tuple(declared),
            policy_files=tuple(files),
            policies=(*governance.policies, *items),
        )

    def allow_all(self) -> AgentBuilder:
        """Add the catch-all allow (instead of the default `confirm_run_command()`)."""
        return self.policy(policy.allow_all())

    def tool(self, tool: Any) -> AgentBuilder:
        """A host-side tool: a `Tool`, a `@tool` function or a plain (a)sync function."""
        return self.tools([tool])

    def tools(self, tools: Iterable[Any]) -> AgentBuilder:
        return self._set("governance", tools=(*self._settings.governance.tools, *tools))

    def trigger(self, trigger: Trigger) -> AgentBuilder:
        return self._set("governance", triggers=(*self._settings.governance.triggers, trigger))

    def mcp_server(self, server: McpServer) -> AgentBuilder:
        servers = (*self._settings.governance.mcp_servers, server)
        return self._set("governance", mcp_servers=servers)

    def workspaces(self, paths: Iterable[str | os.PathLike[str]]) -> AgentBuilder:
        """The directories the agent works in (resolved now; `~` expanded): the harness's
        workspaces, and where the default policies confine file access."""
        added = (Path(path).expanduser().resolve() for path in paths)
        return self._set("governance", workspaces=(*self._settings.governance.workspaces, *added))

    def system_instructions(self, text: str) -> AgentBuilder:
        """Text appended to the harness's own system prompt (as its `<Instructions>`)."""
        text = instructions.check_text("system_instructions", text, empty=True)
        return self._set("prompt", system_instructions=text)

    def replace_system_instructions(self, *parts: str | BuiltinSection) -> AgentBuilder:
        """Replace the harness's system prompt entirely with `parts`, in order: your text,
        and any `BuiltinSection` of the harness's prompt to keep. The prompt governs
        nothing: hooks and policies still decide every tool call."""
        return self._set("prompt", custom_instructions=tuple(instructions.custom_parts(parts)))

    def override_system_sections(self, sections: Mapping[str, str | None]) -> AgentBuilder:
        """Replace sections of the harness's default prompt by name (`"identity"`,
        `"communication_style"`, ...), or remove one with None."""
        return self._set("prompt", section_overrides=tuple(instructions.overrides(sections)))

    def skills_paths(self, paths: Iterable[str | os.PathLike[str]]) -> AgentBuilder:
        """Directories of skills (each skill a sub-directory with a `SKILL.md`)."""
        if isinstance(paths, str | os.PathLike):
            raise ConfigurationTypeError("skills_paths() takes a list of paths, not one path")
        added = (check_skill_dir(Path(path).expanduser().resolve()) for path in paths)
        return self._set("prompt", skills_paths=(*self._settings.prompt.skills_paths, *added))

    def skills(self, skills: Iterable[Skill]) -> AgentBuilder:
        """Inline skills, which the model reads with `lookup_skill` (see `Skill`)."""
        checked = check_skills([*self._settings.prompt.skills, *skills])
        return self._set("prompt", skills=tuple(checked))

    def capabilities(self, capabilities: CapabilitiesConfig) -> AgentBuilder:
        return self._set("governance", capabilities=capabilities)

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
        return self._set("model", model=model, base_url=base_url, api_key=api_key)

    def budget(self, budget: Budget) -> AgentBuilder:
        """Limits on model calls, tool calls and tokens for the whole conversation; past
        one the harness ends the turn (`ChatResponse.stop_reason` says which)."""
        if not isinstance(budget, Budget):
            raise ConfigurationTypeError(f"budget() takes a Budget, got {type(budget).__name__}")
        return self._set("limits", budget=budget)

    def retry_policy(self, policy: RetryPolicy | None) -> AgentBuilder:
        """How the harness retries failed model calls (default `RetryPolicy()`: bounded,
        about 7 s); None leaves it to the harness, which retries for many minutes."""
        if policy is not None and not isinstance(policy, RetryPolicy):
            raise ConfigurationTypeError(
                f"retry_policy() takes a RetryPolicy or None, got {type(policy).__name__}"
            )
        return self._set("limits", retry=policy)

    def tool_output_limit(self, limit: ToolOutputLimit | None) -> AgentBuilder:
        """Bound what one tool's output may cost the model (truncate it, or an error)."""
        if limit is not None and not isinstance(limit, ToolOutputLimit):
            raise ConfigurationTypeError(
                f"tool_output_limit() takes a ToolOutputLimit or None, got {type(limit).__name__}"
            )
        return self._set("limits", tool_output=limit)

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
        options = GeminiOptions(
            thinking_level=thinking_level,
            service_tier=service_tier,
            max_output_tokens=max_output_tokens,
            headers=dict(headers or {}),
            endpoint_url=endpoint_url,
        )
        return self._set("model", options=options)

    def vertex_ai(
        self,
        project: str | None = None,
        location: str | None = None,
        *,
        api_key: str | None = None,
    ) -> AgentBuilder:
        """Call the Gemini model on Vertex AI: in `project` and `location` (default
        `GOOGLE_CLOUD_PROJECT` / `GOOGLE_CLOUD_LOCATION`), or with an express-mode key."""
        return self._set("model", vertex=VertexAI.resolve(project, location, api_key))

    def output_type(self, model: type[BaseModel]) -> AgentBuilder:
        """Answer with an instance of `model` (a pydantic BaseModel): the harness offers
        the model a `finish` tool whose arguments are `model`'s JSON schema, for the whole
        session, and `chat()` returns the answer validated in `ChatResponse.output`.

        `finish` calls reach hooks and policies like any tool call; the agent's policies
        get `policy.allow("finish")` (named "output_type"), so a catch-all deny leaves
        structured output possible while `policy.deny("finish")` still wins. Raises
        `TypeError` for anything but a model class with fields.
        """
        from ..structured import output_schema

        return self._set("prompt", output_schema=output_schema(model), output_type=model)

    def harness_path(self, path: str | os.PathLike[str]) -> AgentBuilder:
        return self._set("process", harness_path=path)

    def save_dir(self, path: str | os.PathLike[str]) -> AgentBuilder:
        """Where the harness stores conversations (default: under the SDK's cache dir)."""
        return self._set("storage", save_dir=Path(path))

    def resume(self, conversation_id: str, *, create: bool = False) -> AgentBuilder:
        """Continue the conversation saved under the save dir as `conversation_id` (an
        earlier agent's `conversation_id`; `list_conversations()` lists them). `start()`
        raises `ConversationNotFoundError` if it is not saved, unless `create`: then a new
        conversation starts under that id. The earlier steps are in `agent.history`; this
        agent's own hooks and policies govern everything from here on."""
        if not isinstance(create, bool):
            raise ConfigurationTypeError(f"create must be a bool, got {type(create).__name__}")
        resume = check_conversation_id(conversation_id)
        return self._set("storage", resume=resume, create_if_missing=create)

    def app_data_dir(self, path: str | os.PathLike[str]) -> AgentBuilder:
        """Where the harness keeps its app data and its HOME (default: the SDK's cache)."""
        return self._set("storage", app_data_dir=Path(path))

    def connection(self, connection: Connection) -> AgentBuilder:
        """Use this connection (e.g. `RemoteConnection`) instead of spawning a harness."""
        return self._set("process", connection=connection)

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
        unknown = sorted(set(routes) - UNGOVERNED_ROUTES)
        if unknown:
            raise ConfigurationError(
                f"allow_ungoverned(): unknown route(s) {unknown}; "
                f"the ungoverned routes are {sorted(UNGOVERNED_ROUTES)}"
            )
        ungoverned = self._settings.governance.ungoverned | frozenset(routes)
        return self._set("governance", ungoverned=ungoverned)

    def timeouts(self, timeouts: Timeouts) -> AgentBuilder:
        """Every bound the agent puts on a wait, in one value (`antigravity_sdk.Timeouts`:
        start-up, each turn, each hook call, the session hooks, the session's end, a
        halted turn's end)."""
        if not isinstance(timeouts, Timeouts):
            raise ConfigurationTypeError(
                f"timeouts() takes a Timeouts, got {type(timeouts).__name__}"
            )
        return self._set("limits", timeouts=timeouts)

    def _timeout(self, setter: str, **bound: Any) -> AgentBuilder:
        """One field of `Timeouts` changed, checked as `Timeouts` checks it; the error
        names the setter the user called."""
        try:
            timeouts = replace(self._settings.limits.timeouts, **bound)
        except ConfigurationError as exc:
            (value,) = bound.values()
            none = " or None" if "hook" in bound else ""
            raise ConfigurationError(
                f"{setter} must be a positive, finite number of seconds{none}, got {value!r}"
            ) from exc
        return self._set("limits", timeouts=timeouts)

    def hook_timeout(self, seconds: float | None) -> AgentBuilder:
        """Bound each hook call; a hook that exceeds it counts as failing (fail-closed).
        Policy predicates get the same bound (see `policy.enforce`). None: unbounded."""
        return self._timeout("hook_timeout", hook=seconds)

    def turn_timeout(self, seconds: float) -> AgentBuilder:
        """Bound each turn (default 600 s); past it the turn is halted and
        `TurnTimeoutError` raised."""
        return self._timeout("turn_timeout", turn=seconds)

    def startup_timeout(self, seconds: float) -> AgentBuilder:
        """Bound the start (default 30 s): the harness's spawn and handshake, then the
        conversation being ready, each; past it `start()` raises
        `HarnessConnectionError` with the harness's last stderr lines."""
        return self._timeout("startup_timeout", startup=seconds)

    def tracing(self, tracer_provider: Any = None, *, agent_name: str = "") -> AgentBuilder:
        """Trace with OpenTelemetry: a span per turn, tool call, hook call and policy
        decision, from `tracer_provider` (default: the global one). Needs the `otel`
        extra; without it this raises `ConfigurationError` with the install command.
        `agent_name` is `gen_ai.agent.name` (and names the turn spans)."""
        try:
            from ..tracing import Tracing
        except ImportError as exc:
            raise ConfigurationError(str(exc)) from exc
        return self._set("governance", tracing=Tracing(tracer_provider, agent_name))

    def audit_log(
        self,
        path: str | os.PathLike[str] | AuditLog | None,
        *,
        redact: Redactor | None = None,
        fsync: bool = False,
    ) -> AgentBuilder:
        """Append one JSON line per tool-call decision (and one per turn) to `path`; None
        turns it off. `redact(args) -> args` filters the arguments first (if it fails,
        the line says so instead of holding them); `fsync` syncs each line to disk. The
        file is opened at `start()` (an unusable path is a `ConfigurationError` then).
        An `AuditLog` made by hand (its own key, `sink` or `fields`: the fleet's table,
        say) is taken as it is, with `redact` and `fsync` left unset.
        See `antigravity_sdk.audit` for the format and its guarantees."""
        from ..audit import AuditLog

        if isinstance(path, AuditLog):
            if redact is not None or fsync:
                raise ConfigurationError(
                    "audit_log(AuditLog(...)): give redact and fsync to the AuditLog itself"
                )
            return self._set("governance", audit=path)
        audit = None if path is None else AuditLog(path, redact=redact, fsync=fsync)
        return self._set("governance", audit=audit)

    def containment(self, containment: Containment | None) -> AgentBuilder:
        """Bound the harness and everything it starts with the kernel (Linux Landlock),
        on by default: writes only in the workspaces, the harness's state and a private
        temp dir; no reading the user's credentials; TCP only to the model's and listed
        ports; no signals outside the agent. `Containment(...)` extends the defaults;
        `Containment(required=True)` refuses to build where it cannot apply; None
        switches it off (with a warning). See `antigravity_sdk.containment`."""
        if containment is not None and not isinstance(containment, Containment):
            raise ConfigurationTypeError(
                f"containment() takes a Containment or None, got {type(containment).__name__}"
            )
        return self._set("process", containment=containment)

    def build(self) -> Agent:
        """Validate everything that can be checked without the harness: the capabilities
        (no ungoverned tool without the opt-in), the host-side tools' names and
        signatures, and the policies (no rule that could never match)."""
        from ..harness.config import merged_budget
        from ..tools import ToolRunner
        from ._agent import Agent

        settings = self._settings
        governance = settings.governance
        check_capabilities(governance)
        check_prompt(settings.prompt)
        check_model(settings.model)
        settings = replace(settings, process=check_containment(settings.process))
        merged_budget(governance.capabilities, settings.limits.budget)  # set twice: must agree
        tools = ToolRunner(governance.tools, context=ToolContext())
        clashes = sorted(set(tools.tools) & RESERVED_TOOL_NAMES)
        if clashes:
            raise ConfigurationError(
                f"host-side tool names {clashes} are the harness's own tool names; "
                "hooks and policies could not tell the two apart"
            )
        policies = list(governance.policies) or default_policies(governance.workspaces)
        if settings.prompt.output_type is not None:
            # A specific allow: above a catch-all deny, below a specific deny of finish.
            policies = [*policies, policy.allow("finish", name="output_type")]
        # The enforcer bounds its own predicates by the hook timeout: a blocking sync
        # predicate would otherwise stall the event loop, so the hook bound never fires.
        enforcer = policy.enforce(
            policies,
            mcp_servers=governance.mcp_servers or governance.declared_servers or None,
            tools=tools.tools,
            timeout=settings.limits.timeouts.hook,
        )
        if governance.audit is not None:
            enforcer.note_decisions()  # the audit log records the rule behind each verdict
        return Agent(settings, enforcer, tools)
