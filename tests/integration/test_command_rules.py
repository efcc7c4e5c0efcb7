"""Command rules against the real harness: an allow list runs what it proves and nothing
that rides along with it."""

from __future__ import annotations

from antigravity_sdk import policy
from antigravity_sdk.testing import tool_call

from .conftest import AgentFactory, Workspace, tool_messages


async def test_an_allow_list_runs_echo_and_refuses_a_second_command(
    make_agent: AgentFactory, env: Workspace
) -> None:
    marker = env.ws / "X"
    agent, model = make_agent(
        [
            tool_call(
                "run_command", CommandLine="echo ok", Cwd=str(env.ws), WaitMsBeforeAsync=5000
            ),
            tool_call(
                "run_command",
                CommandLine="echo ok; touch X",
                Cwd=str(env.ws),
                WaitMsBeforeAsync=5000,
            ),
            "done",
        ],
        policies=[
            policy.allow_commands(["echo", "ls"], name="commands"),
            policy.workspace_only([env.ws]),
            policy.deny_all(),
        ],
    )
    async with agent:
        response = await agent.chat("go")
    assert response.text == "done"
    ran = "".join(tool_messages(model, 1))
    refused = "".join(tool_messages(model, 2))
    assert "ok" in ran and "denied" not in ran.lower(), ran
    assert "deny_all" in refused, refused
    assert not marker.exists()
