"""Skills against the real harness: skill directories and inline skills reach the model,
lookups return the skill's text, and nothing a skill says widens what the policies allow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from antigravity_sdk import (
    BuiltinTool,
    CapabilitiesConfig,
    ConfigurationError,
    Hook,
    HookResult,
    Skill,
    ToolCall,
    ToolResult,
    policy,
)
from antigravity_sdk.testing import tool_call

from .conftest import AgentFactory, Workspace, tool_messages
from .test_examples import load_example
from .test_system_instructions import system_prompt

SKILL_MD = """---
name: greeter
description: Greets people in pirate speak. Use when asked to greet.
---
# Greeter
Say AHOY-MARKER to greet.
"""


class Recorder(Hook):
    def __init__(self) -> None:
        self.asked: list[str] = []
        self.results: list[ToolResult] = []

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        self.asked.append(tool_call.name)
        return HookResult(allow=True)

    async def post_tool_call(self, result: ToolResult) -> None:
        self.results.append(result)


def skill_dir(root: Path) -> Path:
    (root / "skills" / "greeter").mkdir(parents=True)
    (root / "skills" / "greeter" / "SKILL.md").write_text(SKILL_MD)
    return root / "skills"


async def test_a_skill_directory_is_listed_and_read_through_view_file(
    make_agent: AgentFactory, env: Workspace
) -> None:
    skills = skill_dir(env.ws)
    skill_md = skills / "greeter" / "SKILL.md"
    hook = Recorder()
    agent, model = make_agent(
        [tool_call("view_file", AbsolutePath=str(skill_md)), "done"],
        hooks=[hook],
        configure=lambda b: b.skills_paths([skills]),
    )
    async with agent:
        await agent.chat("greet me")
    prompt = system_prompt(model)
    assert f"- greeter ({skill_md}): Greets people in pirate speak." in prompt
    assert hook.asked == ["view_file"]  # reading the skill is an ordinary, governed read
    assert "AHOY-MARKER" in tool_messages(model, 1)[0]


async def test_a_skill_directory_outside_the_workspace_is_read_only_if_policies_allow(
    make_agent: AgentFactory, env: Workspace
) -> None:
    outside = env.root / "elsewhere"
    outside.mkdir()
    skills = skill_dir(outside)
    agent, model = make_agent(
        [tool_call("view_file", AbsolutePath=str(skills / "greeter" / "SKILL.md")), "done"],
        configure=lambda b: b.skills_paths([skills]),
    )  # the default policies keep file tools inside the workspace
    async with agent:
        await agent.chat("greet me")
    assert "greeter" in system_prompt(model)
    result = tool_messages(model, 1)[0]
    assert "AHOY-MARKER" not in result and "denied" in result


INLINE = Skill(
    name="ledger",
    description="Bookkeeping rules. Use for any accounting question.",
    content="LEDGER-BODY: debit the expense account.",
    allowed_tools=["run_command"],
    metadata={"owner": "finance"},
)


async def test_inline_skills_are_offered_and_looked_up(make_agent: AgentFactory) -> None:
    hook = Recorder()
    script = [
        tool_call("list_skills"),
        tool_call("lookup_skill", name="ledger"),
        tool_call("lookup_skills", names=["ledger"]),
        "done",
    ]
    agent, model = make_agent(script, hooks=[hook], configure=lambda b: b.skills([INLINE]))
    async with agent:
        await agent.chat("book an expense")
    first = model.requests[0]
    assert {"list_skills", "lookup_skill", "lookup_skills"} <= set(first.tool_names)
    assert "**ledger**: Bookkeeping rules." in system_prompt(model)
    assert "LEDGER-BODY" not in system_prompt(model)  # only looked up on demand
    assert "ledger" in tool_messages(model, 1)[-1]
    assert "LEDGER-BODY" in tool_messages(model, 2)[-1]
    assert "LEDGER-BODY" in tool_messages(model, 3)[-1]
    # The lookups are never asked (they return configured text); their results are seen.
    assert hook.asked == []
    assert [r.name for r in hook.results] == ["list_skills", "lookup_skill", "lookup_skills"]


def _look_up_then_shell(env: Workspace) -> list[Any]:
    """The skill is looked up, then the model tries the shell its `allowed_tools` name."""
    return [
        tool_call("lookup_skill", name="ledger"),
        tool_call("run_command", CommandLine="echo pwned", Cwd=str(env.ws), WaitMsBeforeAsync=3000),
        "done",
    ]


async def test_allowed_tools_of_a_skill_do_not_widen_the_policies(
    make_agent: AgentFactory, env: Workspace
) -> None:
    script = _look_up_then_shell(env)
    agent, model = make_agent(
        script,
        policies=[policy.deny("run_command", name="no-shell"), policy.allow_all()],
        configure=lambda b: b.skills([INLINE]),
    )
    async with agent:
        await agent.chat("book it")
    result = tool_messages(model, 2)[-1]
    assert "no-shell" in result and "pwned" not in result


async def test_allowed_tools_of_a_skill_do_not_enable_a_tool(
    make_agent: AgentFactory, env: Workspace
) -> None:
    script = _look_up_then_shell(env)
    agent, model = make_agent(
        script,
        policies=[policy.allow_all()],
        capabilities=CapabilitiesConfig(enabled_tools=frozenset({BuiltinTool.VIEW_FILE})),
        configure=lambda b: b.skills([INLINE]),
    )
    async with agent:
        await agent.chat("book it")
    assert "run_command" not in model.requests[2].tool_names
    assert "pwned" not in model.requests[2].text


@pytest.mark.parametrize(
    ("configure", "message"),
    [
        (lambda b: b.skills([INLINE]).skills_paths(["."]), "cannot be combined"),
        (lambda b: b.skills([INLINE, INLINE]), "two skills are named"),
        (lambda b: b.skills(["ledger"]), "expected a Skill"),
        (lambda b: b.skills_paths(["/nonexistent/skills"]), "not a directory"),
        (lambda b: b.skills_paths("/tmp"), "list of paths"),
    ],
)
async def test_bad_skill_settings_are_refused(
    make_agent: AgentFactory, configure: Any, message: str
) -> None:
    with pytest.raises((ConfigurationError, TypeError), match=message):
        make_agent(["ok"], configure=configure)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": ""}, "must not be empty"),
        ({"name": "two words"}, "one word"),
        ({"description": " "}, "must not be empty"),
        ({"content": "\ud800"}, "not valid Unicode"),
        ({"allowed_tools": "run_command"}, "not a str"),
        ({"metadata": {"k": 1}}, "must be a str"),
    ],
)
def test_bad_skills_are_refused(fields: dict[str, Any], message: str) -> None:
    base: dict[str, Any] = {"name": "s", "description": "d", "content": "c"}
    with pytest.raises((ConfigurationError, TypeError), match=message):
        Skill(**{**base, **fields})


async def test_skills_example_runs() -> None:
    assert await load_example("skills").main() == 0
