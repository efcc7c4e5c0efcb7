"""Build the harness's `HarnessConfig` from the agent's settings (pure, no I/O).

The generated betterproto2 classes carry the schema, so a misspelt field fails here, in
Python, rather than silently at the harness — which drops any frame with an unknown
field and never answers it.
"""

from __future__ import annotations

import functools
import os
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..errors import ConfigurationError, ModelNotConfiguredError
from ..models import GeminiOptions, VertexAI
from ..skills import Skill
from ..types import (
    Budget,
    BuiltinTool,
    CapabilitiesConfig,
    McpHttpServer,
    McpServer,
    McpStdioServer,
    RetryPolicy,
    ToolOutputLimit,
)
from . import wire
from ._proto.genai import skills as skill_pb
from .catalog import CAPABILITY_SWITCHES
from .protocol import HOOK_EVENTS

pb = wire.pb

__all__ = ["DEFAULT_GEMINI_MODEL", "ModelSettings", "harness_config", "resolve_model"]

DEFAULT_GEMINI_MODEL: Final = "gemini-3.8-flash"


@dataclass(frozen=True)
class ModelSettings:
    """Which model the harness calls: a Gemini API model, or an OpenAI-compatible endpoint."""

    name: str
    base_url: str | None = None  # OpenAI-compatible /v1 endpoint (Ollama, vLLM, ScriptedModel)
    api_key: str | None = None  # Gemini API key
    options: GeminiOptions | None = None  # Gemini API and Vertex AI only
    vertex: VertexAI | None = None  # Vertex AI instead of the Gemini API

    def _options(self) -> Any:
        options = self.options
        if options is None or not options.generation:
            return None
        return pb.GeminiModelOptions(
            thinking_level=options.thinking_level or "",
            service_tier=options.service_tier or "",
            max_output_tokens=options.max_output_tokens or 0,
        )

    def to_proto(self) -> Any:
        transport = {
            "base_url": (self.options and self.options.endpoint_url) or "",
            "http_headers": dict(self.options.headers) if self.options else {},
            "options": self._options(),
        }
        if self.vertex is not None:
            return pb.ModelConfig(
                name=self.name,
                types=[pb.ModelType.TEXT],
                vertex_endpoint=pb.VertexEndpoint(
                    project=self.vertex.project or "",
                    location=self.vertex.location or "",
                    api_key=self.vertex.api_key or "",
                    **transport,
                ),
            )
        if self.base_url is not None:
            return pb.ModelConfig(
                name=self.name,
                types=[pb.ModelType.TEXT],
                gemma_endpoint=pb.GemmaEndpoint(base_url=self.base_url),
            )
        return pb.ModelConfig(
            name=self.name,
            types=[pb.ModelType.TEXT],
            gemini_api_endpoint=pb.GeminiApiEndpoint(api_key=self.api_key or "", **transport),
        )


def _is_gemini_name(model: str) -> bool:
    """Whether `model` is named like a Gemini model (`gemini-...`, `models/gemini-...`):
    only then is a missing API key the problem, rather than a missing endpoint."""
    return model.lower().removeprefix("models/").startswith("gemini")


def resolve_model(
    model: str | None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
) -> ModelSettings:
    """The model the harness calls, for the agent and the command line alike.

    With `base_url`: `model` served at that OpenAI-compatible endpoint (a `ScriptedModel`
    passes its own). Without: the Gemini model `model` (default `DEFAULT_GEMINI_MODEL`),
    keyed by `api_key`, else `GEMINI_API_KEY`. Raises `ModelNotConfiguredError` saying what
    is missing.
    """
    if base_url is not None:
        if not model:
            raise ModelNotConfiguredError(
                f"the endpoint {base_url} needs a model name (the model it serves)"
            )
        return ModelSettings(name=model, base_url=base_url)
    key = api_key or os.environ.get("GEMINI_API_KEY")
    if key:
        return ModelSettings(name=model or DEFAULT_GEMINI_MODEL, api_key=key)
    if model and _is_gemini_name(model):
        raise ModelNotConfiguredError(
            f"model {model!r} is a Gemini model, which needs an API key (api_key or "
            "GEMINI_API_KEY); for an OpenAI-compatible endpoint give its base_url too"
        )
    if model:
        raise ModelNotConfiguredError(
            f"model {model!r} needs the base_url of the OpenAI-compatible endpoint that "
            "serves it (Ollama, vLLM); a Gemini model needs an API key (api_key or "
            "GEMINI_API_KEY)"
        )
    raise ModelNotConfiguredError(
        "no model configured: use a ScriptedModel, a model name with the base_url of an "
        "OpenAI-compatible endpoint (Ollama, vLLM), or set GEMINI_API_KEY for Gemini"
    )


@functools.cache
def _switch_messages() -> dict[str, Any]:
    """`HarnessSideTools` field -> its message class (each has `enabled`)."""
    hints = typing.get_type_hints(pb.HarnessSideTools)
    return {name: typing.get_args(hints[name])[0] for name in CAPABILITY_SWITCHES.values()}


def _side_tools(capabilities: CapabilitiesConfig) -> Any:
    """Every capability switch explicitly on or off, from the catalogue's table."""
    on = capabilities.enabled_tools
    messages = _switch_messages()
    switches = {
        field_name: messages[field_name](enabled=tool in on)
        for tool, field_name in CAPABILITY_SWITCHES.items()
    }
    switches["run_command"].max_timeout_ms = capabilities.run_command_timeout_ms or 0
    switches["subagents"].max_nesting_depth = capabilities.max_subagent_depth or 0
    return pb.HarnessSideTools(**switches)


def _mcp(server: McpServer) -> Any:
    common: dict[str, Any] = {
        "name": server.name,
        "enabled_tools": list(server.enabled_tools or ()),
        "disabled_tools": list(server.disabled_tools or ()),
        "timeout_seconds": server.timeout_seconds or 0,
    }
    if isinstance(server, McpStdioServer):
        return pb.McpServerConfig(
            stdio=pb.McpStdioTransport(
                command=server.command,
                args=list(server.args),
                env=dict(server.env),
            ),
            **common,
        )
    assert isinstance(server, McpHttpServer)
    return pb.McpServerConfig(
        http=pb.McpHttpTransport(
            url=server.url,
            headers=dict(server.headers),
        ),
        **common,
    )


def _skill(skill: Skill) -> Any:
    return skill_pb.Skill(
        name=skill.name,
        description=skill.description,
        content=skill.content,
        allowed_tools=list(skill.allowed_tools),
        metadata=dict(skill.metadata),
    )


_FINISH_INSTRUCTIONS: Final = (
    "Give your final answer by calling the `finish` tool: its arguments are the answer, "
    "and they must match its parameter schema. Do not answer in plain text."
)
"""The harness's own description of `finish` only says that it ends the task (and its
system prompt does not mention it): a model may otherwise answer in text."""


def _structured_output(config: Any, schema: str) -> None:
    """Offer the finish tool with `schema`, and say in the system instructions that the
    answer goes there (custom system instructions are the user's whole prompt: kept)."""
    config.finish_tool_schema_json = schema
    section = pb.AppendedSystemInstructionsSection(
        title="Answer format", content=_FINISH_INSTRUCTIONS
    )
    if config.system_instructions is None:
        config.system_instructions = pb.SystemInstructions(
            appended=pb.AppendedSystemInstructions(appended_sections=[section])
        )
    elif config.system_instructions.appended is not None:
        config.system_instructions.appended.appended_sections.append(section)


_BUDGET_FIELDS: Final = ("max_model_calls", "max_tool_calls")


def merged_budget(capabilities: CapabilitiesConfig, budget: Budget | None) -> Budget | None:
    """One `Budget` from `budget` and CapabilitiesConfig's older call limits; a limit
    given in both must agree (ConfigurationError otherwise: which one would apply?)."""
    older = {name: getattr(capabilities, name) for name in _BUDGET_FIELDS}
    older = {name: value for name, value in older.items() if value is not None}
    if budget is None:
        return Budget(**older) if older else None
    clashes = [name for name, value in older.items() if getattr(budget, name) not in (None, value)]
    if clashes:
        raise ConfigurationError(
            f"{clashes} are set in both CapabilitiesConfig and Budget, differently; "
            "set them in Budget only"
        )
    return budget.model_copy(update=older)


def _retry(policy: RetryPolicy) -> Any:
    config = pb.RetryConfig(
        api_retry=pb.ModelApiRetryConfig(
            max_retries=policy.max_retries,
            initial_sleep_duration_ms=round((policy.initial_backoff or 0) * 1000),
            exponential_multiplier=policy.backoff_multiplier or 0.0,
            jitter_range=policy.jitter or 0.0,
        )
    )
    if policy.max_output_retries is not None:
        config.model_output_retry = pb.ModelOutputRetryConfig(max_retries=policy.max_output_retries)
    return config


def _explicit_retries(wire_retry: dict[str, Any], policy: RetryPolicy) -> None:
    """Send a retry count of 0 rather than leave it out: the harness reads an absent
    count as its own default (many minutes of retries), an explicit 0 as none."""
    wire_retry.setdefault("apiRetry", {})["maxRetries"] = policy.max_retries
    if policy.max_output_retries is not None:
        wire_retry.setdefault("modelOutputRetry", {})["maxRetries"] = policy.max_output_retries


def _truncation(limit: ToolOutputLimit) -> Any:
    if limit.on_exceed == "error":
        return pb.ToolOutputTruncation(
            error=pb.ToolOutputTruncationErrorStrategy(
                max_tokens=limit.max_tokens, error_message=limit.error_message
            )
        )
    return pb.ToolOutputTruncation(
        truncate=pb.ToolOutputTruncationTruncateStrategy(
            max_tokens=limit.max_tokens, save_full_output=limit.save_full_output
        )
    )


def harness_config(
    *,
    model: ModelSettings,
    workspaces: Sequence[Path],
    app_data_dir: Path,
    capabilities: CapabilitiesConfig,
    hook_events: Iterable[str],
    system_instructions: str = "",
    tools: Sequence[tuple[str, str, str]] = (),
    mcp_servers: Sequence[McpServer] = (),
    resume: str = "",
    create_if_missing: bool = False,
    custom_instructions: Sequence[Mapping[str, Any]] = (),
    section_overrides: Sequence[Mapping[str, Any]] = (),
    skills_paths: Sequence[Path] = (),
    skills: Sequence[Skill] = (),
    output_schema: str = "",
    budget: Budget | None = None,
    retry: RetryPolicy | None = None,
    tool_output: ToolOutputLimit | None = None,
) -> dict[str, Any]:
    """The `InitializeConversationEvent` to send, as a canonical-JSON dict.

    `resume`: the id of a saved conversation to continue (the harness fails if it is not
    saved, unless `create_if_missing`: then it starts a new one under that id).

    `hook_events` are the Hook method names some registered hook overrides; the harness
    is asked to call back for exactly those (session start is dispatched by the SDK
    itself, when the session is up, because the harness only raises it lazily).
    `output_schema` (JSON) makes the harness offer the `finish` tool with it.
    """
    enabled = sorted(
        {HOOK_EVENTS[e] for e in hook_events if e in HOOK_EVENTS},
        key=lambda name: pb.LifecycleHook[name.removeprefix("LIFECYCLE_HOOK_")].value,
    )
    config = pb.HarnessConfig(
        models=[model.to_proto()],
        workspaces=[
            pb.Workspace(filesystem_workspace=pb.FilesystemWorkspace(directory=str(w)))
            for w in workspaces
        ],
        app_data_dir=str(app_data_dir),
        harness_side_tools=_side_tools(capabilities),
        enabled_hooks=[pb.LifecycleHook[name.removeprefix("LIFECYCLE_HOOK_")] for name in enabled],
        tools=[
            pb.Tool(name=name, description=description, parameters_json_schema=schema)
            for name, description, schema in tools
        ],
        mcp_servers=[_mcp(s) for s in mcp_servers],
    )
    if resume:
        config.cascade_id = resume
        mode = pb.HarnessConfigSessionContinuationMode
        config.session_continuation_mode = (
            mode.CREATE_OR_RESUME if create_if_missing else mode.RESUME
        )
    if system_instructions:
        config.system_instructions = pb.SystemInstructions(
            appended=pb.AppendedSystemInstructions(
                appended_sections=[
                    pb.AppendedSystemInstructionsSection(
                        title="Instructions", content=system_instructions
                    )
                ]
            )
        )
    if custom_instructions:
        config.system_instructions = pb.SystemInstructions(
            custom=pb.CustomSystemInstructions(
                part=[pb.CustomSystemInstructionsPart(**part) for part in custom_instructions]
            )
        )
    if section_overrides:
        config.system_instructions = pb.SystemInstructions(
            overrides=[pb.TemplateOverride(**override) for override in section_overrides]
        )
    config.skills_paths = [str(path) for path in skills_paths]
    if skills:
        config.skills_config = pb.SkillsConfig(
            enabled=True, skills=[pb.SkillSource(skill=_skill(s)) for s in skills]
        )
    if output_schema:
        _structured_output(config, output_schema)
    if BuiltinTool.ASK_QUESTION in capabilities.enabled_tools:
        # The harness only forwards questions to the client in interactive mode.
        config.agent_behavior = pb.AgentBehavior.INTERACTIVE
    limits = merged_budget(capabilities, budget)
    if limits is not None:
        config.budget_config = pb.BudgetConfig(
            max_model_calls=limits.max_model_calls or 0,
            max_tool_calls=limits.max_tool_calls or 0,
            max_input_tokens=limits.max_input_tokens or 0,
            max_output_tokens=limits.max_output_tokens or 0,
            max_total_tokens=limits.max_total_tokens or 0,
            scope=pb.BudgetConfigBudgetScope[limits.scope.name],
        )
    if retry is not None:
        config.retry_config = _retry(retry)
    if tool_output is not None:
        config.tool_output_truncation = _truncation(tool_output)
    if capabilities.compaction_token_threshold:
        config.compaction_config = pb.CompactionConfig(
            token_threshold=capabilities.compaction_token_threshold
        )
    wire_config = wire.message_to_dict(config)
    if retry is not None:
        _explicit_retries(wire_config["retryConfig"], retry)
    return {"config": wire_config}
