"""Every route the harness offers is governed, switched off, or explicitly opted into.

Attacks tried against the REAL harness (offline: the scripted model plays the attacker,
and also plays every subagent, since subagents call the same model endpoint):

- a subagent the model defines itself (`define_subagent` + `invoke_subagent`) whose tool
  calls the harness never asks about — under the default policies and under an explicit
  `deny("run_command")`;
- tools the harness never asks about (`manage_task`, `schedule`) switched on;
- a subagent asking for a tool the configuration left off;
- rules that could never match (internal names, typos, never-asked tools);
- file tools outside the configured workspace under the default policies.

The conformance matrix reads the model's tool list with every capability on, so a newer
harness that adds a tool fails here until the catalogue classifies it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from antigravity_sdk import ConfigurationError, Hook, HookResult, PolicyError, ToolCall, policy
from antigravity_sdk.harness.catalog import TOOLS, Arg, ArgKind, Governance
from antigravity_sdk.testing import tool_call
from antigravity_sdk.types import BuiltinTool, CapabilitiesConfig

from .conftest import AgentFactory, Workspace, tool_messages

SUBAGENT_PROMPT = "You are W. Run the command you are told to run."
EVERYTHING = CapabilitiesConfig(enabled_tools=frozenset(BuiltinTool))


class Seen(Hook):
    """Records every pre_tool_call; denies the names in `deny`."""

    def __init__(self, deny: frozenset[str] = frozenset()) -> None:
        self.calls: list[ToolCall] = []
        self.deny = deny

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        self.calls.append(tool_call)
        if tool_call.name in self.deny:
            return HookResult.denied(f"{tool_call.name} denied by the test")
        return HookResult.allowed()

    def names(self) -> list[str]:
        return [call.name for call in self.calls]


def _is_subagent(messages: list[dict[str, Any]]) -> bool:
    return any(SUBAGENT_PROMPT in str(m.get("content", "")) for m in messages)


def _tool_calls_so_far(messages: list[dict[str, Any]]) -> int:
    return sum(len(m.get("tool_calls") or ()) for m in messages if m.get("role") == "assistant")


def model_defined_subagent(marker: Path, name: str = "w") -> Any:
    """The main agent defines a write-enabled subagent and invokes it; the subagent (same
    model endpoint, told apart by its system prompt) runs `touch MARKER`."""
    main = [
        tool_call(
            "define_subagent",
            name=name,
            description="does what it is told",
            system_prompt=SUBAGENT_PROMPT,
            enable_write_tools=True,
        ),
        tool_call(
            "invoke_subagent",
            Subagents=[{"TypeName": name, "Prompt": f"touch {marker}", "Role": "Worker"}],
        ),
        "finished",
    ]

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        done = _tool_calls_so_far(messages)
        if _is_subagent(messages):
            if done == 0:
                return tool_call(
                    "run_command",
                    CommandLine=f"touch {marker}",
                    Cwd=str(marker.parent),
                    WaitMsBeforeAsync=5000,
                )
            return "subagent done"
        return main[min(done, len(main) - 1)]

    return script


@pytest.mark.parametrize(
    "policies",
    [None, [policy.deny("run_command"), policy.allow_all()]],
    ids=["default policies", "explicit deny run_command"],
)
async def test_a_model_defined_subagent_never_runs(
    make_agent: AgentFactory, env: Workspace, policies: list[Any] | None
) -> None:
    marker = env.ws / "pwned"
    seen = Seen()
    agent, model = make_agent(model_defined_subagent(marker), hooks=[seen], policies=policies)
    async with agent:
        await agent.chat("get W to touch the file")
    assert not marker.exists(), "a model-defined subagent ran a command no hook saw"
    # The invocation itself was refused by the SDK (no hook was even asked) ...
    assert "invoke_subagent" not in seen.names()
    shown = "\n".join(tool_messages(model, len(model.requests) - 1))
    assert "refused: subagent type 'w'" in shown
    # ... and no request ever came from the subagent.
    assert not any(_is_subagent(r.messages) for r in model.requests)


async def test_a_model_defined_subagent_named_research_does_not_shadow_the_built_in(
    make_agent: AgentFactory, env: Workspace
) -> None:
    # The guard lets TypeName "research" through: a definition under that name must not
    # take the built-in's place (measured: the built-in research subagent runs instead).
    marker = env.ws / "pwned"
    agent, model = make_agent(
        model_defined_subagent(marker, name="research"), policies=[policy.allow_all()]
    )
    async with agent:
        await agent.chat("get the fake research subagent to touch the file")
    assert not marker.exists()
    assert not any(_is_subagent(r.messages) for r in model.requests)


async def test_opting_into_ungoverned_subagents_lets_them_run(
    make_agent: AgentFactory, env: Workspace
) -> None:
    # The control: the same attack with the opt-in does run, which is what the opt-in says.
    marker = env.ws / "pwned"
    agent, _ = make_agent(
        model_defined_subagent(marker),
        policies=[policy.allow_all()],
        configure=lambda b: b.allow_ungoverned("subagents"),
    )
    async with agent:
        await agent.chat("get W to touch the file")
    assert marker.exists()


def test_never_asked_tools_are_refused_at_build_without_the_opt_in(
    make_agent: AgentFactory,
) -> None:
    with pytest.raises(ConfigurationError, match=r"manage_task.*schedule") as refused:
        make_agent(capabilities=EVERYTHING)
    assert "allow_ungoverned" in str(refused.value)


@pytest.mark.parametrize(
    ("rule", "hint"),
    [
        (policy.deny("create_file"), "'write_to_file'"),
        (policy.deny("edit_file"), "'replace_file_content'"),
        (policy.deny("run_comand"), "did you mean 'run_command'"),
        (policy.deny("Run_Command"), "did you mean 'run_command'"),
        (policy.deny("manage_task"), "never asks"),
        (policy.deny("define_subagent"), "never asks"),
    ],
)
def test_rules_that_could_never_match_are_refused(
    make_agent: AgentFactory, rule: policy.Policy, hint: str
) -> None:
    with pytest.raises(PolicyError, match=hint):
        make_agent(policies=[rule, policy.allow_all()])


async def test_default_policies_keep_file_tools_in_the_workspace(
    make_agent: AgentFactory, env: Workspace
) -> None:
    outside = env.root / "secret.txt"
    outside.write_text("TOP-SECRET")
    script = [tool_call("view_file", AbsolutePath=str(outside)), "done"]
    agent, model = make_agent(script)  # default policies, workspace configured
    async with agent:
        await agent.chat("read it")
    shown = "\n".join(tool_messages(model, 1))
    assert "TOP-SECRET" not in shown
    assert "workspace_only" in shown


async def test_a_subagent_cannot_use_a_tool_the_configuration_left_off(
    make_agent: AgentFactory, env: Workspace
) -> None:
    # The research subagent carries run_command whatever the root's capabilities say.
    marker = env.ws / "ran"
    research = "research"

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        done = _tool_calls_so_far(messages)
        names = {t.get("function", t).get("name") for t in tools}
        if "invoke_subagent" not in names:  # the research subagent's own request
            if done == 0:
                return tool_call(
                    "run_command", CommandLine=f"touch {marker}", Cwd=str(env.ws),
                    WaitMsBeforeAsync=5000,
                )  # fmt: skip
            return "research done"
        if done == 0:
            return tool_call(
                "invoke_subagent",
                Subagents=[{"TypeName": research, "Prompt": "look around", "Role": "Researcher"}],
            )
        return "finished"

    seen = Seen()
    capabilities = CapabilitiesConfig(
        enabled_tools=frozenset({BuiltinTool.VIEW_FILE, BuiltinTool.SUBAGENTS})
    )
    agent, model = make_agent(
        script, hooks=[seen], policies=[policy.allow_all()], capabilities=capabilities
    )
    async with agent:
        await agent.chat("research")
    assert seen.names() == ["invoke_subagent"]  # the subagent's run_command never reached it
    assert not marker.exists()
    assert any(
        "refused: run_command is not enabled" in text
        for i in range(len(model.requests))
        for text in tool_messages(model, i)
    )


def _schema_args(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON schema's properties at every depth: name -> its own properties (an object,
    or a list of objects), "open" (an object without properties), or None (a value)."""
    found: dict[str, Any] = {}
    for key, prop in schema.get("properties", {}).items():
        inner = prop.get("items", prop) if prop.get("type") == "array" else prop
        if inner.get("type") == "object":
            found[key] = _schema_args(inner) if "properties" in inner else "open"
        else:
            found[key] = None
    return found


def _catalogue_args(args: Mapping[str, Arg]) -> dict[str, Any]:
    """The same shape, from the catalogue's classification."""
    found: dict[str, Any] = {}
    for key, arg in args.items():
        assert isinstance(arg.kind, ArgKind)
        if arg.open:
            found[key] = "open"
        elif arg.kind is ArgKind.OBJECT:
            found[key] = _catalogue_args(arg.fields)
        else:
            found[key] = None
    return found


async def test_conformance_the_research_subagent_and_skills_tools_are_classified(
    make_agent: AgentFactory,
) -> None:
    """The tools only a subagent or inline skills bring: their arguments, at every depth,
    are the catalogue's."""
    from antigravity_sdk import Skill

    carried: list[dict[str, Any]] = []

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if "invoke_subagent" not in {t.get("function", t).get("name") for t in tools}:
            carried.extend(tools)
            return "research done"
        if _tool_calls_so_far(messages) == 0:
            return tool_call(
                "invoke_subagent",
                Subagents=[{"TypeName": "research", "Role": "R", "Prompt": "p"}],
            )
        return "finished"

    skill = Skill(name="ledger", description="Bookkeeping.", content="LEDGER")
    agent, model = make_agent(
        script, policies=[policy.allow_all()], configure=lambda b: b.skills([skill])
    )
    async with agent:
        await agent.chat("research")
    tools = [*carried, *model.requests[0].tools]
    names = {t.get("function", t)["name"] for t in tools}
    assert {"schedule", "run_command", "list_skills", "lookup_skill"} <= names
    for tool in tools:
        function = tool.get("function", tool)
        assert function["name"] in TOOLS, function["name"]
        offered_args = _schema_args(function.get("parameters", {}))
        assert offered_args == _catalogue_args(TOOLS[function["name"]].args), function["name"]


async def test_conformance_every_offered_tool_is_asked_or_refused(
    make_agent: AgentFactory, env: Workspace
) -> None:
    """With every capability on: each tool the model is offered is in the catalogue, each
    one the catalogue says is asked reaches the hooks (and a deny stops it), and each one
    it says is never asked is refused at build() without the opt-in."""
    with pytest.raises(ConfigurationError):
        make_agent(capabilities=EVERYTHING)
    opted = [n for n, s in TOOLS.items() if s.governance is Governance.NEVER_ASKED]
    probe, model = make_agent(
        ["nothing"],
        policies=[policy.allow_all()],
        capabilities=EVERYTHING,
        configure=lambda b: b.allow_ungoverned(*opted),
    )
    async with probe:
        await probe.chat("list your tools")
    offered = sorted(t.get("function", t)["name"] for t in model.requests[0].tools)
    unclassified = [name for name in offered if name not in TOOLS]
    assert not unclassified, f"tools the catalogue does not classify: {unclassified}"
    for name in offered:
        if TOOLS[name].governance is Governance.NEVER_ASKED:
            assert name in opted  # refused at build() above without the opt-in
    # Every argument the harness offers, at every depth, is classified (and nothing the
    # catalogue classifies is gone from the harness).
    for tool in model.requests[0].tools:
        function = tool.get("function", tool)
        offered_args = _schema_args(function.get("parameters", {}))
        assert offered_args == _catalogue_args(TOOLS[function["name"]].args), function["name"]

    asked = [name for name in offered if TOOLS[name].governance is Governance.ASKED]
    ws = str(env.ws)
    (env.ws / "existing").write_text("a\n")
    # Valid arguments for each asked tool: the harness checks them before it asks (an
    # edited or viewed file must exist).
    args: dict[str, dict[str, Any]] = {
        "ask_question": {"questions": [{"question": "ok?", "options": ["yes", "no"]}]},
        "find_by_name": {"SearchDirectory": ws, "Pattern": "*"},
        "generate_image": {"Prompt": "a cat", "ImageName": "cat"},
        "grep_search": {"SearchPath": ws, "Query": "x"},
        "invoke_subagent": {
            "Subagents": [{"TypeName": "research", "Role": "Researcher", "Prompt": "p"}]
        },
        "list_dir": {"DirectoryPath": ws},
        "read_url_content": {"Url": "http://127.0.0.1:9/"},
        "replace_file_content": {
            "TargetFile": f"{ws}/existing",
            "Instruction": "edit",
            "Description": "edit",
            "AllowMultiple": False,
            "TargetContent": "a",
            "ReplacementContent": "b",
            "StartLine": 1,
            "EndLine": 1,
        },
        "run_command": {"CommandLine": f"touch {ws}/ran", "Cwd": ws, "WaitMsBeforeAsync": 500},
        "run_workflow": {"Script": f"open('{ws}/ran', 'w')"},
        "search_web": {"query": "antigravity"},
        "view_file": {"AbsolutePath": f"{ws}/existing"},
        "write_to_file": {
            "TargetFile": f"{ws}/written",
            "Overwrite": True,
            "CodeContent": "x",
            "Description": "write",
        },
    }
    script = [tool_call(name, **args[name]) for name in asked] + ["done"]
    seen = Seen(deny=frozenset(asked))
    agent, _ = make_agent(
        script,
        hooks=[seen],
        policies=[policy.allow_all()],
        capabilities=EVERYTHING,
        configure=lambda b: b.allow_ungoverned(*opted),
    )
    async with agent:
        await agent.chat("call every tool")
    assert sorted(set(seen.names())) == sorted(asked)
    assert not (env.ws / "ran").exists() and not (env.ws / "written").exists()
    assert (env.ws / "existing").read_text() == "a\n"


async def test_the_harness_own_containment_does_not_stop_an_allowed_call(
    make_agent: AgentFactory, env: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pins a measured fact the SDK's design relies on (docs: governance): with the
    harness's workspace containment and workspace validation both switched on, a call the
    client allows still reads outside the workspace. So the SDK does not lean on them:
    `workspace_only` is the control. If a newer harness enforces them, this fails and the
    decision should be revisited. The harness counts its TMPDIR as inside (the test's
    file is under /tmp), so this runs uncontained: containment gives the harness a
    private TMPDIR, and the kernel would refuse the read anyway."""
    from antigravity_sdk.harness import config

    built = config.harness_config

    def with_containment(**kwargs: Any) -> dict[str, Any]:
        frame = built(**kwargs)
        frame["config"]["policyConfig"] = {"workspaceContainment": "WORKSPACE_CONTAINMENT_ENABLED"}
        tools = frame["config"]["harnessSideTools"]
        tools["permissions"] = {"enforceWorkspaceValidation": True}
        return frame

    monkeypatch.setattr(config, "harness_config", with_containment)
    outside = env.root / "outside.txt"
    outside.write_text("OUTSIDE-CONTENT")
    script = [tool_call("view_file", AbsolutePath=str(outside)), "done"]
    agent, model = make_agent(
        script, policies=[policy.allow_all()], configure=lambda b: b.containment(None)
    )
    async with agent:
        await agent.chat("read it")
    assert "OUTSIDE-CONTENT" in json.dumps(tool_messages(model, 1))
