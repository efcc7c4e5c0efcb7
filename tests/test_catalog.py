"""The tool catalogue, the SDK's own PRE_TOOL refusals, and what build()/enforce() refuse."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from antigravity_sdk import (
    Agent,
    BuiltinTool,
    CapabilitiesConfig,
    ConfigurationError,
    PolicyError,
    ToolCall,
    policy,
)
from antigravity_sdk.agent import default_policies
from antigravity_sdk.harness.catalog import (
    CAPABILITY_SWITCHES,
    INTERNAL_NAMES,
    PLAIN_ID,
    RESERVED_TOOL_NAMES,
    TOOLS,
    Arg,
    ArgKind,
    Governance,
    ToolGuard,
    canonical_args,
    shown_args,
    tools_enabled_by,
)
from antigravity_sdk.harness.effects import HookCall
from antigravity_sdk.harness.protocol import SessionCore
from antigravity_sdk.testing import ScriptedModel

# -- the table ------------------------------------------------------------------------------


def test_every_capability_has_a_switch_and_tools() -> None:
    assert set(CAPABILITY_SWITCHES) == set(BuiltinTool)
    for capability in BuiltinTool:
        assert tools_enabled_by(frozenset({capability})), capability
    # The primary tool of each capability carries the capability's own name.
    assert {c.value for c in BuiltinTool} <= set(TOOLS)


def test_internal_names_are_unique_and_map_to_tools() -> None:
    internals = [name for spec in TOOLS.values() for name in spec.internal]
    assert len(internals) == len(set(internals))
    assert not set(internals) & set(TOOLS)
    assert all(INTERNAL_NAMES[name] in TOOLS for name in internals)


def test_path_arguments_are_arguments() -> None:
    for spec in TOOLS.values():
        assert set(spec.paths) <= set(spec.args), spec.name
        assert set(spec.action_args.values()) <= set(spec.args), spec.name


def _kinds(args: Any, where: str = "") -> dict[str, ArgKind]:
    found = {}
    for key, arg in args.items():
        found[where + key] = arg.kind
        assert isinstance(arg, Arg) and isinstance(arg.kind, ArgKind)
        assert bool(arg.fields) == (arg.kind is ArgKind.OBJECT), (where, key)
        found |= _kinds(arg.fields, f"{where}{key}[].")
    return found


def test_every_argument_is_classified_and_the_dangerous_ones_as_measured() -> None:
    kinds = {name: _kinds(spec.args) for name, spec in TOOLS.items()}
    assert kinds["run_command"]["CommandLine"] is ArgKind.SHELL
    assert kinds["run_command"]["Cwd"] is ArgKind.PATH
    assert kinds["run_command"]["RequestedTerminalID"] is ArgKind.IDENTIFIER
    assert kinds["invoke_subagent"]["Subagents[].Workspace"] is ArgKind.WORKSPACE
    assert kinds["invoke_subagent"]["Subagents[].TypeName"] is ArgKind.SUBAGENT
    assert kinds["ask_question"]["questions[].options"] is ArgKind.DATA
    assert kinds["write_to_file"]["ArtifactMetadata[].Summary"] is ArgKind.DATA
    assert {k for k, v in kinds["schedule"].items() if v is ArgKind.SCHEDULE} == {
        "CronExpression", "DurationSeconds", "IsDaemon", "MaxIterations", "TimerCondition"
    }  # fmt: skip
    for name, found in kinds.items():
        if found:  # every built-in tool takes the two captions
            assert found["toolAction"] is found["toolSummary"] is ArgKind.LABEL, name


# -- canonical keys at every depth ----------------------------------------------------------


def _spellings(key: str) -> Any:
    return st.lists(st.booleans(), min_size=len(key), max_size=len(key)).map(
        lambda upper: "".join(
            c.upper() if u else c.lower() for c, u in zip(key, upper, strict=True)
        )
    )


SUBAGENT_KEYS = ("TypeName", "Prompt", "Role", "Model", "Workspace")


@given(st.tuples(*(_spellings(key) for key in SUBAGENT_KEYS)), _spellings("Subagents"))
def test_keys_are_canonical_at_every_depth(keys: tuple[str, ...], outer: str) -> None:
    entry = dict(zip(keys, ("research", "p", "r", "inherit", "inherit"), strict=True))
    args = canonical_args("invoke_subagent", {outer: [entry, "not an object"], "Extra": 1})
    assert args == {
        "Subagents": [dict(zip(SUBAGENT_KEYS, entry.values(), strict=True)), "not an object"],
        "Extra": 1,  # not the catalogue's: kept as it is
    }


def test_nested_structures_of_every_tool_are_canonical() -> None:
    question = {"QUESTION": "ok?", "Options": ["a", "b"], "IS_MULTI_SELECT": True}
    assert canonical_args("ask_question", {"Questions": [question]}) == {
        "questions": [{"question": "ok?", "options": ["a", "b"], "is_multi_select": True}]
    }
    meta = {"summary": "s", "userfacing": True, "requestfeedback": False}
    assert canonical_args("write_to_file", {"artifactmetadata": meta}) == {
        "ArtifactMetadata": {"Summary": "s", "UserFacing": True, "RequestFeedback": False}
    }
    # A free-form object (the workflow's own Args) and the structured answer stay as given.
    assert canonical_args("run_workflow", {"args": {"cwd": 1}}) == {"Args": {"cwd": 1}}
    assert canonical_args("finish", {"city": "x"}) == {"city": "x"}


def test_the_core_shows_hooks_nested_keys_canonical_and_refuses_nested_collisions() -> None:
    core = SessionCore(guard=ToolGuard(enabled=frozenset({"invoke_subagent"})))
    core.user_input("go", streaming=False)
    inner = '{"typename": "research", "role": "r", "prompt": "p", "workspace": "inherit"}'
    (call,) = core.receive(_pre_tool("invoke_subagent", f'{{"subagents": [{inner}]}}'))
    assert isinstance(call, HookCall) and call.refusal == ""
    assert call.arg.args == {
        "Subagents": [{"TypeName": "research", "Role": "r", "Prompt": "p", "Workspace": "inherit"}]
    }
    both = inner[:-1] + ', "Workspace": "branch"}'
    (call,) = core.receive(_pre_tool("invoke_subagent", f'{{"subagents": [{both}]}}'))
    assert isinstance(call, HookCall) and "differ only in case" in call.refusal
    branch = inner.replace("inherit", "branch")
    (call,) = core.receive(_pre_tool("invoke_subagent", f'{{"subagents": [{branch}]}}'))
    assert isinstance(call, HookCall) and "Subagents[].Workspace = 'branch'" in call.refusal


# -- identifiers and workspaces -------------------------------------------------------------

RUN = ToolGuard(enabled=frozenset({"run_command", "generate_image", "invoke_subagent"}))
IDS = st.one_of(
    st.text(max_size=70),
    st.from_regex(r"[A-Za-z0-9_-]{0,64}", fullmatch=True),
    st.sampled_from(["t$(touch x)", "t`id`", '"; id; "', "../../x", "a b", "a.b", "a/b"]),
    st.none(),
    st.integers(),
)


@given(IDS)
def test_identifiers_pass_only_when_plain(value: Any) -> None:
    plain = isinstance(value, str) and PLAIN_ID.fullmatch(value) is not None
    for name, key in (("run_command", "RequestedTerminalID"), ("generate_image", "ImageName")):
        refusal = RUN.refusal(name, None, {key: value})
        assert (refusal == "") is plain, (name, value)
        if not plain:
            assert key in refusal and "not a plain identifier" in refusal


def test_the_ids_the_harness_issues_are_plain() -> None:
    assert PLAIN_ID.fullmatch("5239dbd8-a419-4463-8df8-7ee3efde9353")
    assert RUN.refusal("run_command", None, {"RequestedTerminalID": ""}) == ""
    for attack in ("t$(touch x)", "t`touch x`", 't\\"; touch x; \\"', "../../../outside/x"):
        assert "not a plain identifier" in RUN.refusal(
            "run_command", None, {"RunPersistent": True, "RequestedTerminalID": attack}
        )


WORKSPACES = st.one_of(
    st.sampled_from(["inherit", "", "branch", "share", "Inherit", "BRANCH", " share"]),
    st.text(max_size=10),
    st.none(),
    st.integers(),
    st.lists(st.text(max_size=3), max_size=2),
)


@given(st.lists(st.one_of(st.just(None), WORKSPACES), min_size=1, max_size=3))
def test_only_inherited_workspaces_pass_without_the_opt_in(values: list[Any]) -> None:
    entries = [
        {"TypeName": "research", "Role": "r", "Prompt": "p"}
        | ({} if value is None else {"Workspace": value})
        for value in values
    ]
    refusal = RUN.refusal("invoke_subagent", None, {"Subagents": entries})
    inherited = all(value is None or value in ("", "inherit") for value in values)
    assert (refusal == "") is inherited, values
    if not inherited:
        assert "Workspace" in refusal and "subagent_workspaces" in refusal
    opted = ToolGuard(enabled=RUN.enabled, subagent_workspaces=True)
    assert opted.refusal("invoke_subagent", None, {"Subagents": entries}) == ""


def test_what_a_prompt_shows_leaves_out_only_the_captions() -> None:
    args = {"CommandLine": "ls", "toolSummary": "harmless", "toolAction": "Listing", "X": 1}
    assert shown_args("run_command", None, args) == {"CommandLine": "ls", "X": 1}
    assert shown_args("run_command", "db", args) == args  # an MCP tool's own arguments


def test_never_asked_tools_are_exactly_the_measured_ones() -> None:
    by_governance = {
        g: sorted(n for n, s in TOOLS.items() if s.governance is g) for g in Governance
    }
    assert by_governance[Governance.NEVER_ASKED] == ["manage_task", "schedule"]
    assert by_governance[Governance.CONTAINED] == [
        "define_subagent",
        "list_skills",
        "lookup_skill",
        "lookup_skills",
        "manage_subagents",
        "send_message",
    ]


def test_reserved_names_cover_tools_and_internal_names() -> None:
    assert set(TOOLS) | set(INTERNAL_NAMES) <= RESERVED_TOOL_NAMES


# -- the guard ------------------------------------------------------------------------------

GUARD = ToolGuard(
    enabled=frozenset({"view_file", "invoke_subagent", "lookup"}), mcp_servers=frozenset({"db"})
)


def test_guard_refuses_what_the_configuration_did_not_enable() -> None:
    assert GUARD.refusal("view_file", None, {}) == ""
    assert GUARD.refusal("lookup", None, {}) == ""
    assert "run_command is not enabled" in GUARD.refusal("run_command", None, {})
    assert GUARD.refusal("drop_table", "db", {}) == ""
    assert "'other' is not configured" in GUARD.refusal("x", "other", {})


type_names = st.sampled_from(["research", "Research", "w", "", "research ", "RESEARCH"])
entries = st.one_of(
    st.dictionaries(
        st.sampled_from(["TypeName", "typename", "TYPENAME", "Prompt", "Role"]),
        st.one_of(type_names, st.integers(), st.none()),
        max_size=4,
    ),
    st.sampled_from([None, "research", 3, ["research"]]),
)


@given(st.one_of(st.lists(entries, max_size=4), st.sampled_from([None, "research", {}, 0])))
def test_invoke_subagent_is_allowed_only_for_research_entries(subagents: Any) -> None:
    refusal = GUARD.refusal("invoke_subagent", None, {"Subagents": subagents})
    governed = (
        isinstance(subagents, list)
        and bool(subagents)
        and all(
            isinstance(e, dict)
            and [v for k, v in e.items() if k.casefold() == "typename"] == ["research"]
            for e in subagents
        )
    )
    assert (refusal == "") is governed
    opted_in = ToolGuard(enabled=GUARD.enabled, any_subagent=True)
    assert opted_in.refusal("invoke_subagent", None, {"Subagents": subagents}) == ""


def _pre_tool(name: str, args: str, server: str = "") -> dict[str, Any]:
    request = {"toolName": name, "argumentsJson": args, "callId": "c1"}
    if server:
        request["serverName"] = server
    return {
        "callHookRequest": {
            "requestId": "r1",
            "type": "LIFECYCLE_HOOK_PRE_TOOL",
            "preToolArgs": request,
        }
    }


def test_core_refuses_before_any_hook() -> None:
    core = SessionCore(frozenset({"lookup"}), GUARD)
    core.user_input("go", streaming=False)
    (call,) = core.receive(_pre_tool("run_command", '{"CommandLine": "rm -rf /"}'))
    assert isinstance(call, HookCall) and "not enabled" in call.refusal
    (call,) = core.receive(_pre_tool("invoke_subagent", '{"subagents": [{"typename": "w"}]}'))
    assert isinstance(call, HookCall) and "subagent type 'w'" in call.refusal
    (call,) = core.receive(_pre_tool("view_file", '{"AbsolutePath": "/ws/a"}'))
    assert isinstance(call, HookCall) and call.refusal == ""
    # An internal name is translated first: create_file is write_to_file, which is off.
    (call,) = core.receive(_pre_tool("create_file", '{"TargetFile": "/ws/a"}'))
    assert isinstance(call, HookCall) and "write_to_file is not enabled" in call.refusal


# -- enforce() refuses rules that could never match ------------------------------------------


@pytest.mark.parametrize(
    ("tool", "message"),
    [
        ("create_file", "internal name.*'write_to_file'"),
        ("list_directory", "internal name.*'list_dir'"),
        ("run_comand", "did you mean 'run_command'"),
        ("RUN_COMMAND", "did you mean 'run_command'"),
        ("frobnicate", "no tool is called 'frobnicate'"),
        ("schedule", "never asks.*BuiltinTool.SCHEDULE"),
        ("send_message", "never asks"),
        ("lookup_skill", "never asks.*inline skills"),
    ],
)
def test_enforce_refuses_rules_that_could_never_match(tool: str, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        policy.enforce([policy.allow_all(), policy.deny(tool, name="r")])


def test_enforce_knows_host_tools_it_is_given() -> None:
    policy.enforce([policy.deny("lookup")], tools=["lookup"])
    with pytest.raises(PolicyError, match="did you mean 'lookup'"):
        policy.enforce([policy.deny("lokup")], tools=["lookup"])
    with pytest.raises(PolicyError, match="list of tool names"):
        policy.enforce([], tools="lookup")


def test_patterns_other_than_bare_names_are_not_checked_against_the_catalogue() -> None:
    policy.enforce([policy.deny("*"), policy.deny_mcp("db"), policy.deny("db/anything")], ["db"])


# -- build() --------------------------------------------------------------------------------


def _builder(**capabilities: Any) -> Any:
    return Agent.builder().model(ScriptedModel()).capabilities(CapabilitiesConfig(**capabilities))


@pytest.mark.parametrize("tool", [BuiltinTool.MANAGE_TASK, BuiltinTool.SCHEDULE])
def test_build_refuses_never_asked_tools_without_the_opt_in(tool: BuiltinTool) -> None:
    with pytest.raises(ConfigurationError, match=rf"\['{tool.value}'\].*allow_ungoverned"):
        _builder(enabled_tools=frozenset({BuiltinTool.RUN_COMMAND, tool})).build()


def test_the_opt_in_builds_and_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "antigravity_sdk.agent")
    enabled = frozenset({BuiltinTool.RUN_COMMAND, BuiltinTool.MANAGE_TASK})
    _builder(enabled_tools=enabled).allow_ungoverned("manage_task").build()
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "manage_task" in warnings[0]


def test_unknown_ungoverned_routes_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="unknown route"):
        Agent.builder().allow_ungoverned("run_command")


def test_enabling_run_workflow_warns(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "antigravity_sdk.agent")
    _builder(enabled_tools=frozenset({BuiltinTool.RUN_WORKFLOW})).build()
    assert any("run_workflow" in r.getMessage() for r in caplog.records)


def test_host_tools_are_known_to_the_agents_policies() -> None:
    def lookup(order_id: str) -> str:
        """Look an order up."""
        return order_id

    Agent.builder().tool(lookup).policy(policy.deny("lookup")).build()
    with pytest.raises(PolicyError, match="did you mean 'lookup'"):
        Agent.builder().tool(lookup).policy(policy.deny("look_up")).build()


async def test_default_policies(tmp_path: Path) -> None:
    enforcer = policy.enforce(default_policies([tmp_path]))

    async def allowed(name: str, **args: Any) -> bool:
        return (await enforcer.pre_tool_call(ToolCall(name=name, args=args))).allow

    assert not await allowed("run_command", CommandLine="ls", Cwd=str(tmp_path))
    assert not await allowed("run_workflow", Script="print(1)")
    assert not await allowed("view_file", AbsolutePath="/etc/hostname")
    assert await allowed("view_file", AbsolutePath=str(tmp_path / "a"))
    no_workspace = policy.enforce(default_policies())
    assert (await no_workspace.pre_tool_call(ToolCall(name="view_file", args={}))).allow
