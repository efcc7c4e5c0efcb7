"""The harness's tools, in one table: names, switches, arguments, paths, governability.

Everything in the SDK that knows about a built-in tool reads it from `TOOLS`: the names
hooks are shown (the harness reports some tools under internal names), the canonical
argument spelling, which arguments are paths (for `workspace_only`), which capability
switch turns a tool on, how a step reports it, and — the point of the table — whether the
harness asks the client before the tool runs. A newer harness that offers a tool missing
here fails the conformance test until the tool is classified.

Facts are those of the pinned harness (0.1.22), measured with a scripted model.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from ..types import BuiltinTool

__all__ = [
    "CAPABILITY_SWITCHES",
    "GOVERNED_SUBAGENT_TYPES",
    "INTERNAL_NAMES",
    "RESERVED_TOOL_NAMES",
    "TOOLS",
    "Governance",
    "ToolGuard",
    "ToolSpec",
    "tools_enabled_by",
]


class Governance(enum.Enum):
    """Whether the harness asks the client (PRE_TOOL) before a tool runs."""

    ASKED = "asked"
    """Every call reaches hooks and policies first; a DENY stops it."""
    CONTAINED = "contained"
    """Never asked, but it runs no tool and touches nothing by itself: it defines,
    messages or lists subagents, which can only run through `invoke_subagent` (asked, and
    guarded by the SDK so only governed subagent types start), or returns the text of the
    inline skills the agent was configured with."""
    NEVER_ASKED = "never asked"
    """Never asked, and it acts: off unless the user opts in (`allow_ungoverned`)."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool the harness can offer the model."""

    name: str
    """The name the model calls it by; hooks and policies see this name."""
    capability: BuiltinTool | None
    """The switch that offers it to the root agent (None: only subagents carry it)."""
    args: tuple[str, ...]
    """Its argument keys in canonical spelling (the harness matches them case-insensitively)."""
    governance: Governance = Governance.ASKED
    internal: tuple[str, ...] = ()
    """Other names the harness uses for it in hook requests."""
    paths: tuple[str, ...] = ()
    """Arguments that name a file-system location (checked by `workspace_only`)."""
    path_list: bool = False
    """The path argument is a list of paths."""
    path_optional: bool = False
    """The path argument may be left out (the schema does not require it)."""
    uris: bool = True
    """The path argument may be a `file://` URI (a `run_command` `Cwd` given as one runs
    in a directory named `file:` below the harness's working directory)."""
    action: str = ""
    """The step action field the harness reports it with (camelCase), if any."""
    action_args: Mapping[str, str] = field(default_factory=dict)
    """Step action field -> argument key, to tell which call a step executes."""


_T = ToolSpec
_B = BuiltinTool
_ASKED, _CONTAINED, _NEVER = Governance.ASKED, Governance.CONTAINED, Governance.NEVER_ASKED

TOOLS: Final[Mapping[str, ToolSpec]] = {
    spec.name: spec
    for spec in (
        _T(
            "run_command",
            _B.RUN_COMMAND,
            (
                "CommandLine",
                "Cwd",
                "WaitMsBeforeAsync",
                "RunPersistent",
                "RequestedTerminalID",
                "NotificationTimeoutSeconds",
            ),
            paths=("Cwd",),
            uris=False,
            action="runCommand",
            action_args={"commandLine": "CommandLine", "workingDir": "Cwd"},
        ),
        _T(
            "view_file",
            _B.VIEW_FILE,
            ("AbsolutePath", "StartLine", "EndLine", "ContentOffset"),
            paths=("AbsolutePath",),
            action="viewFile",
            action_args={"filePath": "AbsolutePath"},
        ),
        _T(
            "write_to_file",
            _B.WRITE_TO_FILE,
            ("TargetFile", "CodeContent", "Overwrite", "Description", "Append", "ArtifactMetadata"),
            internal=("create_file",),
            paths=("TargetFile",),
            action="createFile",
            action_args={"filePath": "TargetFile"},
        ),
        _T(
            "replace_file_content",
            _B.EDIT_FILE,
            (
                "TargetFile",
                "Instruction",
                "Description",
                "AllowMultiple",
                "TargetContent",
                "ReplacementContent",
                "StartLine",
                "EndLine",
                "TargetLintErrorIds",
            ),
            internal=("edit_file",),
            paths=("TargetFile",),
            action="editFile",
            action_args={"filePath": "TargetFile"},
        ),
        _T(
            "list_dir",
            _B.LIST_DIR,
            ("DirectoryPath",),
            internal=("list_directory",),
            paths=("DirectoryPath",),
            action="listDirectory",
            action_args={"directoryPath": "DirectoryPath"},
        ),
        _T(
            "grep_search",
            _B.GREP_SEARCH,
            ("SearchPath", "Query", "CaseInsensitive", "Includes", "IsRegex", "MatchPerLine"),
            internal=("search_directory",),
            paths=("SearchPath",),
            action="searchDirectory",
            action_args={"directoryPath": "SearchPath", "query": "Query"},
        ),
        _T(
            "find_by_name",
            _B.FIND,
            (
                "SearchDirectory",
                "Pattern",
                "Excludes",
                "Extensions",
                "FullPath",
                "MaxDepth",
                "Type",
            ),
            internal=("find_file",),
            paths=("SearchDirectory",),
            action="findFile",
            action_args={"directoryPath": "SearchDirectory", "query": "Pattern"},
        ),
        _T("ask_question", _B.ASK_QUESTION, ("questions",)),
        _T(
            "search_web",
            _B.SEARCH_WEB,
            ("query", "domain"),
            action="searchWeb",
            action_args={"query": "query", "domain": "domain"},
        ),
        _T(
            "read_url_content",
            _B.READ_URL_CONTENT,
            ("Url",),
            action="readUrlContent",
            action_args={"url": "Url"},
        ),
        _T(
            "generate_image",
            _B.GENERATE_IMAGE,
            ("Prompt", "ImageName", "ImagePaths", "AspectRatio"),
            paths=("ImagePaths",),
            path_list=True,
            path_optional=True,
            action="generateImage",
            action_args={"prompt": "Prompt"},
        ),
        _T(
            "run_workflow",
            _B.RUN_WORKFLOW,
            ("Script", "ScriptPath", "Args", "Description"),
            paths=("ScriptPath",),
            path_optional=True,
            action="runWorkflow",
            action_args={"scriptPath": "ScriptPath"},
        ),
        _T("invoke_subagent", _B.SUBAGENTS, ("Subagents",), action="invokeSubagent"),
        _T(
            "define_subagent",
            _B.SUBAGENTS,
            (
                "name",
                "description",
                "system_prompt",
                "enable_write_tools",
                "enable_mcp_tools",
                "enable_subagent_tools",
            ),
            governance=_CONTAINED,
        ),
        _T("manage_subagents", _B.SUBAGENTS, ("Action", "ConversationIds"), governance=_CONTAINED),
        _T("send_message", _B.SUBAGENTS, ("Recipient", "Message"), governance=_CONTAINED),
        _T("manage_task", _B.MANAGE_TASK, ("Action", "Input", "TaskId"), governance=_NEVER),
        _T(
            "schedule",
            _B.SCHEDULE,
            (
                "Prompt",
                "CronExpression",
                "DurationSeconds",
                "IsDaemon",
                "MaxIterations",
                "TimerCondition",
            ),
            governance=_NEVER,
        ),
        # Offered only with an output type (AgentBuilder.output_type, which enables it
        # in the guard): its arguments are the structured answer, and it ends the turn.
        # Asked like any tool; it acts on nothing.
        _T("finish", None, ()),
        # Only subagents carry these (a write-enabled model-defined one gets them); the
        # root can never enable them, so a PRE_TOOL for one is always refused.
        _T("notebook_edit", None, ()),
        _T("multi_replace_file_content", None, ()),
        # Offered when inline skills are configured (`AgentBuilder.skills`): they return
        # the skills' own text, and their results reach post_tool_call.
        _T("list_skills", None, (), governance=_CONTAINED),
        _T("lookup_skill", None, ("name",), governance=_CONTAINED),
        _T("lookup_skills", None, ("names",), governance=_CONTAINED),
    )
}

INTERNAL_NAMES: Final[Mapping[str, str]] = {
    internal: spec.name for spec in TOOLS.values() for internal in spec.internal
}
"""Internal name the harness uses in hook requests -> the model-facing name."""

RESERVED_TOOL_NAMES: Final = frozenset({*TOOLS, *INTERNAL_NAMES, "call_mcp_tool"})
"""Names of the harness's own tools (as the model and as hooks see them, and its MCP
wrapper): a host-side tool with one of these names would be indistinguishable from the
built-in in PRE_TOOL."""

CAPABILITY_SWITCHES: Final[Mapping[BuiltinTool, str]] = {
    _B.RUN_COMMAND: "run_command",
    _B.VIEW_FILE: "view_file",
    _B.WRITE_TO_FILE: "write_to_file",
    _B.EDIT_FILE: "file_edit",
    _B.LIST_DIR: "list_dir",
    _B.GREP_SEARCH: "grep_search",
    _B.FIND: "find",
    _B.ASK_QUESTION: "user_questions",
    _B.SUBAGENTS: "subagents",
    _B.SEARCH_WEB: "search_web",
    _B.READ_URL_CONTENT: "read_url_content",
    _B.GENERATE_IMAGE: "generate_image",
    _B.MANAGE_TASK: "manage_task",
    _B.SCHEDULE: "schedule",
    _B.RUN_WORKFLOW: "run_workflow",
}
"""Each capability -> the `HarnessSideTools` field that switches it."""

GOVERNED_SUBAGENT_TYPES: Final = frozenset({"research"})
"""Built-in subagent types whose own tool calls the harness asks the client about."""


def tools_enabled_by(capabilities: frozenset[BuiltinTool]) -> frozenset[str]:
    """The tools a root agent with these capabilities is offered."""
    return frozenset(spec.name for spec in TOOLS.values() if spec.capability in capabilities)


@dataclass(frozen=True, slots=True)
class ToolGuard:
    """What the SDK refuses by itself in PRE_TOOL, before any hook is asked: a tool the
    configuration did not enable (subagents carry tool sets of their own), an MCP server
    it did not configure, and a subagent whose tool calls the harness would not ask about.
    """

    enabled: frozenset[str]
    """Model-facing names of the enabled built-in tools, and the host-side tools."""
    mcp_servers: frozenset[str] = frozenset()
    any_subagent: bool = False
    """Let `invoke_subagent` start any subagent type (opted in: ungoverned)."""

    def refusal(self, name: str, server: str | None, args: Mapping[str, object]) -> str:
        """Why the call must be denied without asking the hooks, or ""."""
        if server is not None:
            if server in self.mcp_servers:
                return ""
            return f"refused: MCP server {server!r} is not configured for this agent"
        if name not in self.enabled:
            return (
                f"refused: {name} is not enabled for this agent "
                "(a subagent asked for a tool the configuration leaves off)"
            )
        if name == "invoke_subagent" and not self.any_subagent:
            return _subagent_refusal(args.get("Subagents"))
        return ""


def _subagent_refusal(entries: object) -> str:
    if not isinstance(entries, list) or not entries:
        return "refused: invoke_subagent needs a non-empty Subagents list"
    allowed = ", ".join(sorted(GOVERNED_SUBAGENT_TYPES))
    for entry in entries:
        if not isinstance(entry, dict):
            return "refused: each Subagents entry must be an object"
        types = [value for key, value in entry.items() if key.casefold() == "typename"]
        if len(types) != 1 or types[0] not in GOVERNED_SUBAGENT_TYPES:
            shown = repr(types[0]) if len(types) == 1 else "(missing)"
            return (
                f"refused: subagent type {shown} would run its tools without asking this "
                f"SDK; only built-in {allowed} subagents are governed "
                "(AgentBuilder.allow_ungoverned('subagents') opts in)"
            )
    return ""
