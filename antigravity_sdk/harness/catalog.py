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
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..types import BuiltinTool

__all__ = [
    "CAPABILITY_SWITCHES",
    "GOVERNED_SUBAGENT_TYPES",
    "INHERITED_WORKSPACES",
    "INTERNAL_NAMES",
    "LABELS",
    "PLAIN_ID",
    "RESERVED_TOOL_NAMES",
    "TOOLS",
    "Arg",
    "ArgKind",
    "Governance",
    "ToolGuard",
    "ToolSpec",
    "canonical_args",
    "shown_args",
    "tools_enabled_by",
    "walk_args",
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


class ArgKind(enum.Enum):
    """What the pinned harness does with one argument, and so how the SDK governs it."""

    DATA = "data"
    """A value the harness uses as content or an option (text to write, a line number, a
    flag): no path, shell, workspace or schedule. Policies see it like any argument."""
    LABEL = "label"
    """The model's caption of the call (`toolAction`, `toolSummary`): acted on by nothing,
    and left out of confirmation prompts (it would only say what the model wants said)."""
    PATH = "path"
    """A file-system location: `workspace_only` checks it."""
    SHELL = "shell"
    """Code the harness runs (a command line, a workflow script, input to a running
    command): the policies judge it as given, and prompts show all of it."""
    IDENTIFIER = "identifier"
    """A name the harness splices into a file name of its own (and, for
    `RequestedTerminalID`, into its own `bash -c` string): the SDK refuses anything but a
    plain identifier (`PLAIN_ID`), which is all the harness ever issues."""
    WORKSPACE = "workspace"
    """Where a subagent works: anything but `inherit` makes the harness run git in the
    user's repository; the SDK refuses it unless opted into
    (`allow_ungoverned("subagent_workspaces")`)."""
    SUBAGENT = "subagent"
    """Which subagent type runs: only governed types pass (`GOVERNED_SUBAGENT_TYPES`)."""
    SCHEDULE = "schedule"
    """A timer that wakes the agent later. A wake while no `chat()`/`stream()` runs is
    refused and halted by the SDK unless `allow_ungoverned("schedule")`."""
    URL = "url"
    """A network location the harness fetches."""
    OBJECT = "object"
    """An object, or a list of objects, whose own keys `Arg.fields` classifies."""


@dataclass(frozen=True, slots=True)
class Arg:
    """How one argument is classified; an `OBJECT` says how its keys are."""

    kind: ArgKind
    fields: Mapping[str, Arg] = field(default_factory=dict)
    """Its keys in canonical spelling (an `OBJECT`, or a list of them): matched
    case-insensitively by the harness, at every depth."""
    open: bool = False
    """A free-form object (its keys are the caller's, not the harness's): nothing below
    it is renamed or classified."""


_LABEL_NAMES: Final = ("toolAction", "toolSummary")
LABELS: Final = frozenset(_LABEL_NAMES)
"""The caption arguments every built-in tool takes (see `ArgKind.LABEL`)."""


def _args(**kinds: ArgKind | Arg) -> dict[str, Arg]:
    """Arguments by canonical name (the labels added)."""
    args = {key: kind if isinstance(kind, Arg) else Arg(kind) for key, kind in kinds.items()}
    return args | {label: Arg(ArgKind.LABEL) for label in _LABEL_NAMES}


def _object(**kinds: ArgKind | Arg) -> Arg:
    return Arg(
        ArgKind.OBJECT,
        {key: kind if isinstance(kind, Arg) else Arg(kind) for key, kind in kinds.items()},
    )


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool the harness can offer the model."""

    name: str
    """The name the model calls it by; hooks and policies see this name."""
    capability: BuiltinTool | None
    """The switch that offers it to the root agent (None: only subagents carry it)."""
    args: Mapping[str, Arg]
    """Every argument the pinned harness's schema offers, at every depth, in canonical
    spelling (the harness matches keys case-insensitively), each classified."""
    governance: Governance = Governance.ASKED
    internal: tuple[str, ...] = ()
    """Other names the harness uses for it in hook requests."""
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

    @property
    def paths(self) -> tuple[str, ...]:
        """Arguments that name a file-system location (checked by `workspace_only`)."""
        return tuple(key for key, arg in self.args.items() if arg.kind is ArgKind.PATH)


_T = ToolSpec
_B = BuiltinTool
_K = ArgKind
_DATA, _PATH, _SHELL, _SCHEDULE = _K.DATA, _K.PATH, _K.SHELL, _K.SCHEDULE
_ASKED, _CONTAINED, _NEVER = Governance.ASKED, Governance.CONTAINED, Governance.NEVER_ASKED

TOOLS: Final[Mapping[str, ToolSpec]] = {
    spec.name: spec
    for spec in (
        _T(
            "run_command",
            _B.RUN_COMMAND,
            _args(
                CommandLine=_SHELL,
                Cwd=_PATH,
                WaitMsBeforeAsync=_DATA,
                RunPersistent=_DATA,
                # Spliced into the harness's `bash -c` string and the terminal's env file.
                RequestedTerminalID=_K.IDENTIFIER,
                # A command still running then notifies the model: a wake of its own.
                NotificationTimeoutSeconds=_SCHEDULE,
            ),
            uris=False,
            action="runCommand",
            action_args={"commandLine": "CommandLine", "workingDir": "Cwd"},
        ),
        _T(
            "view_file",
            _B.VIEW_FILE,
            _args(AbsolutePath=_PATH, StartLine=_DATA, EndLine=_DATA, ContentOffset=_DATA),
            action="viewFile",
            action_args={"filePath": "AbsolutePath"},
        ),
        _T(
            "write_to_file",
            _B.WRITE_TO_FILE,
            _args(
                TargetFile=_PATH,
                CodeContent=_DATA,
                Overwrite=_DATA,
                Description=_DATA,
                Append=_DATA,
                ArtifactMetadata=_object(RequestFeedback=_DATA, Summary=_DATA, UserFacing=_DATA),
            ),
            internal=("create_file",),
            action="createFile",
            action_args={"filePath": "TargetFile"},
        ),
        _T(
            "replace_file_content",
            _B.EDIT_FILE,
            _args(
                TargetFile=_PATH,
                Instruction=_DATA,
                Description=_DATA,
                AllowMultiple=_DATA,
                TargetContent=_DATA,
                ReplacementContent=_DATA,
                StartLine=_DATA,
                EndLine=_DATA,
                TargetLintErrorIds=_DATA,
            ),
            internal=("edit_file",),
            action="editFile",
            action_args={"filePath": "TargetFile"},
        ),
        _T(
            "list_dir",
            _B.LIST_DIR,
            _args(DirectoryPath=_PATH),
            internal=("list_directory",),
            action="listDirectory",
            action_args={"directoryPath": "DirectoryPath"},
        ),
        _T(
            "grep_search",
            _B.GREP_SEARCH,
            # The query goes after `--`; the globs only filter below SearchPath.
            _args(
                SearchPath=_PATH,
                Query=_DATA,
                CaseInsensitive=_DATA,
                Includes=_DATA,
                IsRegex=_DATA,
                MatchPerLine=_DATA,
            ),
            internal=("search_directory",),
            action="searchDirectory",
            action_args={"directoryPath": "SearchPath", "query": "Query"},
        ),
        _T(
            "find_by_name",
            _B.FIND,
            _args(
                SearchDirectory=_PATH,
                Pattern=_DATA,
                Excludes=_DATA,
                Extensions=_DATA,
                FullPath=_DATA,
                MaxDepth=_DATA,
                Type=_DATA,
            ),
            internal=("find_file",),
            action="findFile",
            action_args={"directoryPath": "SearchDirectory", "query": "Pattern"},
        ),
        _T(
            "ask_question",
            _B.ASK_QUESTION,
            _args(questions=_object(question=_DATA, options=_DATA, is_multi_select=_DATA)),
        ),
        _T(
            "search_web",
            _B.SEARCH_WEB,
            _args(query=_DATA, domain=_DATA),
            action="searchWeb",
            action_args={"query": "query", "domain": "domain"},
        ),
        _T(
            "read_url_content",
            _B.READ_URL_CONTENT,
            _args(Url=_K.URL),
            action="readUrlContent",
            action_args={"url": "Url"},
        ),
        _T(
            "generate_image",
            _B.GENERATE_IMAGE,
            # ImageName becomes the saved image's file name.
            _args(Prompt=_DATA, ImageName=_K.IDENTIFIER, ImagePaths=_PATH, AspectRatio=_DATA),
            path_list=True,
            path_optional=True,
            action="generateImage",
            action_args={"prompt": "Prompt"},
        ),
        _T(
            "run_workflow",
            _B.RUN_WORKFLOW,
            _args(
                Script=_SHELL,
                ScriptPath=_PATH,
                Args=Arg(_DATA, open=True),  # handed to the script as it is
                Description=_DATA,
            ),
            path_optional=True,
            action="runWorkflow",
            action_args={"scriptPath": "ScriptPath"},
        ),
        _T(
            "invoke_subagent",
            _B.SUBAGENTS,
            _args(
                Subagents=_object(
                    TypeName=_K.SUBAGENT,
                    Prompt=_DATA,
                    Role=_DATA,
                    Model=_DATA,  # inherit, flash_lite, flash, pro
                    Workspace=_K.WORKSPACE,
                )
            ),
            action="invokeSubagent",
        ),
        _T(
            "define_subagent",
            _B.SUBAGENTS,
            _args(
                name=_DATA,
                description=_DATA,
                system_prompt=_DATA,
                enable_write_tools=_DATA,
                enable_mcp_tools=_DATA,
                enable_subagent_tools=_DATA,
            ),
            governance=_CONTAINED,
        ),
        _T(
            "manage_subagents",
            _B.SUBAGENTS,
            _args(Action=_DATA, ConversationIds=_DATA),
            governance=_CONTAINED,
        ),
        _T(
            "send_message",
            _B.SUBAGENTS,
            _args(Recipient=_DATA, Message=_DATA),
            governance=_CONTAINED,
        ),
        _T(
            "manage_task",
            _B.MANAGE_TASK,
            _args(Action=_DATA, Input=_SHELL, TaskId=_DATA),  # Input: to a running command
            governance=_NEVER,
        ),
        _T(
            "schedule",
            _B.SCHEDULE,
            _args(
                Prompt=_DATA,
                CronExpression=_SCHEDULE,
                DurationSeconds=_SCHEDULE,
                IsDaemon=_SCHEDULE,
                MaxIterations=_SCHEDULE,
                TimerCondition=_SCHEDULE,
            ),
            governance=_NEVER,
        ),
        # Offered only with an output type (AgentBuilder.output_type, which enables it
        # in the guard): its arguments are the structured answer (checked against the
        # output schema, case-sensitively), and it ends the turn. Asked; acts on nothing.
        _T("finish", None, {}),
        # Only subagents carry these (a write-enabled model-defined one gets them); the
        # root can never enable them, so a PRE_TOOL for one is always refused.
        _T("notebook_edit", None, {}),
        _T("multi_replace_file_content", None, {}),
        # Offered when inline skills are configured (`AgentBuilder.skills`): they return
        # the skills' own text, and their results reach post_tool_call.
        _T("list_skills", None, _args(), governance=_CONTAINED),
        _T("lookup_skill", None, _args(skill_name=_DATA), governance=_CONTAINED),
        _T("lookup_skills", None, _args(skill_names=_DATA), governance=_CONTAINED),
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

INHERITED_WORKSPACES: Final = frozenset({"", "inherit"})
"""`Subagents[].Workspace` values that keep the subagent in its parent's workspace (the
harness's default; measured: `branch` and `share` run `git worktree add` and
`git reset --hard` in the user's repository)."""

PLAIN_ID: Final = re.compile(r"[A-Za-z0-9_-]{0,64}")
"""What an `IDENTIFIER` argument may be (matched whole): the harness issues terminal ids
as UUIDs (`5239dbd8-a419-4463-8df8-7ee3efde9353`), and asks for lowercase image names
with underscores. Empty is the harness's "none" (a new terminal)."""


def tools_enabled_by(capabilities: frozenset[BuiltinTool]) -> frozenset[str]:
    """The tools a root agent with these capabilities is offered."""
    return frozenset(spec.name for spec in TOOLS.values() if spec.capability in capabilities)


# -- arguments at every depth ---------------------------------------------------------------


def _folded(fields: Mapping[str, Arg]) -> dict[str, str]:
    return {key.casefold(): key for key in fields}


def canonical_args(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """A built-in tool's arguments with every key the catalogue knows in its canonical
    spelling, at every depth (the harness reads them case-insensitively at every depth).
    Keys it does not know are kept as they are; other tools' arguments are returned
    unchanged. Keys that collide under case-folding are refused before this runs."""
    if name not in TOOLS or name == "finish":  # finish: the answer, checked case-sensitively
        return args
    return _canonical_object(args, TOOLS[name].args)


def _canonical_object(value: dict[str, Any], fields: Mapping[str, Arg]) -> dict[str, Any]:
    folded = _folded(fields)
    out: dict[str, Any] = {}
    for key, item in value.items():
        canonical = folded.get(key.casefold(), key)
        arg = fields.get(canonical)
        out[canonical] = _canonical_value(item, arg) if arg is not None else item
    return out


def _canonical_value(value: Any, arg: Arg) -> Any:
    if arg.kind is not ArgKind.OBJECT or arg.open:
        return value
    if isinstance(value, dict):
        return _canonical_object(value, arg.fields)
    if isinstance(value, list):
        return [
            _canonical_object(item, arg.fields) if isinstance(item, dict) else item
            for item in value
        ]
    return value


def walk_args(
    args: Mapping[str, Any], fields: Mapping[str, Arg], where: str = ""
) -> Iterator[tuple[str, Arg | None, Any]]:
    """Every argument at every depth, as (dotted name, its classification or None for a
    key the catalogue does not know, value); a list of objects shows as `Name[]`."""
    for key, value in args.items():
        name = f"{where}.{key}" if where else key
        arg = fields.get(key)
        yield name, arg, value
        if arg is None or arg.kind is not ArgKind.OBJECT or arg.open:
            continue
        if isinstance(value, dict):
            yield from walk_args(value, arg.fields, name)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    yield from walk_args(item, arg.fields, f"{name}[]")


def shown_args(name: str, server: str | None, args: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments a person asked to confirm a call is shown: all of them but a
    built-in tool's captions (`ArgKind.LABEL`), which the harness acts on not at all."""
    if server is not None or name not in TOOLS:
        return dict(args)
    spec = TOOLS[name].args
    return {
        key: value
        for key, value in args.items()
        if not (key in spec and spec[key].kind is ArgKind.LABEL)
    }


# -- the guard ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolGuard:
    """What the SDK refuses by itself in PRE_TOOL, before any hook is asked: a tool the
    configuration did not enable (subagents carry tool sets of their own), an MCP server
    it did not configure, a subagent whose tool calls the harness would not ask about,
    a subagent workspace other than `inherit`, an identifier that is not plain, and any
    request the harness makes on its own while no turn of the client's runs.
    """

    enabled: frozenset[str]
    """Model-facing names of the enabled built-in tools, and the host-side tools."""
    mcp_servers: frozenset[str] = frozenset()
    any_subagent: bool = False
    """Let `invoke_subagent` start any subagent type (opted in: ungoverned)."""
    subagent_workspaces: bool = False
    """Let a subagent work in a `branch` or `share` workspace (opted in: the harness runs
    git in the user's repository, which runs whatever the repository's config says)."""
    scheduled_wakes: bool = False
    """Let the harness run turns and tool calls on its own between the client's turns (a
    timer the model scheduled; opted in with `allow_ungoverned("schedule")`). Off: every
    request of such a wake is refused, and the wake halted."""

    def refusal(self, name: str, server: str | None, args: Mapping[str, Any]) -> str:
        """Why the call must be denied without asking the hooks, or "" (`args` in
        canonical spelling, as `canonical_args` returns them)."""
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
            refusal = _subagent_refusal(args.get("Subagents"))
            if refusal:
                return refusal
        spec = TOOLS.get(name)
        if spec is None:
            return ""  # a host-side tool: its arguments are its own
        for where, arg, value in walk_args(args, spec.args):
            if arg is None:
                continue
            if arg.kind is ArgKind.IDENTIFIER and not _plain_id(value):
                return (
                    f"refused: {name} argument {where} = {_brief(value)} is not a plain "
                    "identifier (letters, digits, '_' and '-', at most 64): the harness "
                    "splices it into a file name or a shell command of its own"
                )
            if (
                arg.kind is ArgKind.WORKSPACE
                and not self.subagent_workspaces
                and not (isinstance(value, str) and value in INHERITED_WORKSPACES)
            ):
                return (
                    f"refused: {name} argument {where} = {_brief(value)}: only 'inherit' "
                    "is governed (the harness runs git in the user's repository for any "
                    "other workspace: `git worktree add`, `git reset --hard`, and whatever "
                    "the repository's config tells git to run); "
                    "AgentBuilder.allow_ungoverned('subagent_workspaces') opts in"
                )
        return ""


def _plain_id(value: object) -> bool:
    return isinstance(value, str) and PLAIN_ID.fullmatch(value) is not None


def _brief(value: object) -> str:
    shown = repr(value)
    return shown if len(shown) <= 80 else shown[:77] + "..."


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
