"""Arguments the harness acts on beyond the obvious ones, attacked on the REAL harness.

Measured on the pinned harness (the scripted model plays the attacker and every
subagent):

- `invoke_subagent` with `Subagents[].Workspace` = `branch` / `share` runs
  `git worktree add` and `git reset --hard` in the user's repository (`BRANCH`, ` share`
  or an unknown value behave as `inherit`; absent or "" is `inherit`);
- `run_command`'s `RequestedTerminalID` is spliced into the harness's own `bash -c` string
  and into the path of the terminal's env file; the ids the harness issues are UUIDs;
- the research subagent's `schedule` is never asked; a `CronExpression` of `@every 2s`
  with `IsDaemon` wakes the subagent and then the root after `chat()` returned, with no
  PRE_TURN; their tool calls are asked. A harness-side PolicyConfig rule denying
  `schedule` does not stop it (and any rule set makes every tool no rule names denied).
  A HALT sent when the root's woken turn starts ends the wake and the timer;
- `call_mcp_tool` with an `Arguments` string that is not JSON reaches PRE_TOOL as is.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from antigravity_sdk import Hook, HookResult, ToolCall, policy
from antigravity_sdk.testing import tool_call
from antigravity_sdk.types import McpStdioServer

from .conftest import AgentFactory, Workspace, tool_messages
from .test_rewrite import _MCP_SERVER


class Timeline(Hook):
    """Records every hook call with the time it came, and allows everything."""

    def __init__(self) -> None:
        self.events: list[tuple[float, str, str]] = []

    def _note(self, event: str, what: str = "") -> None:
        self.events.append((time.monotonic(), event, what))

    async def pre_turn(self) -> HookResult:
        self._note("pre_turn")
        return HookResult.allowed()

    async def post_turn(self, response: Any) -> None:
        self._note("post_turn")

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        self._note("pre_tool_call", tool_call.name)
        return HookResult.allowed()

    def tools(self) -> list[str]:
        return [what for _, event, what in self.events if event == "pre_tool_call"]

    def after(self, moment: float) -> list[tuple[str, str]]:
        return [(event, what) for at, event, what in self.events if at > moment]


def _tool_calls_so_far(messages: list[dict[str, Any]]) -> int:
    return sum(len(m.get("tool_calls") or ()) for m in messages if m.get("role") == "assistant")


def _is_root(tools: list[dict[str, Any]]) -> bool:
    return "invoke_subagent" in {t.get("function", t).get("name") for t in tools}


def _all_tool_messages(model: Any) -> str:
    return "\n".join(m for i in range(len(model.requests)) for m in tool_messages(model, i))


# -- Subagents[].Workspace ------------------------------------------------------------------


def _git(ws: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=ws, capture_output=True, text=True, check=True).stdout


def _repository(ws: Path) -> None:
    _git(ws, "init", "-q")
    _git(
        ws, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "i"
    )


def _invoke_research(entry: dict[str, Any]) -> Any:
    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if not _is_root(tools):
            return "research done"
        if _tool_calls_so_far(messages) == 0:
            return tool_call("invoke_subagent", Subagents=[entry])
        return "finished"

    return script


@pytest.mark.parametrize(
    "entry",
    [
        {"TypeName": "research", "Role": "R", "Prompt": "p", "Workspace": "branch"},
        {"TypeName": "research", "Role": "R", "Prompt": "p", "Workspace": "share"},
        # Keys are read case-insensitively at every depth: the guard sees `Workspace`.
        {"typename": "research", "role": "R", "prompt": "p", "workspace": "branch"},
        {"TypeName": "research", "Role": "R", "Prompt": "p", "WORKSPACE": "branch"},
    ],
    ids=["branch", "share", "lower-case keys", "upper-case key"],
)
async def test_a_subagent_workspace_other_than_inherit_never_reaches_git(
    make_agent: AgentFactory, env: Workspace, entry: dict[str, Any]
) -> None:
    _repository(env.ws)
    seen = Timeline()
    agent, model = make_agent(_invoke_research(entry), hooks=[seen], policies=[policy.allow_all()])
    async with agent:
        await agent.chat("research in a branch")
    assert len(_git(env.ws, "worktree", "list").splitlines()) == 1
    assert "subagent-" not in _git(env.ws, "branch")
    assert not (env.app / "worktrees").exists()
    assert "invoke_subagent" not in seen.tools(), "refused before any hook"
    assert "Subagents[].Workspace" in _all_tool_messages(model)


async def test_inherit_still_runs_and_the_opt_in_lets_a_branch_through(
    make_agent: AgentFactory, env: Workspace
) -> None:
    _repository(env.ws)
    inherit = {"TypeName": "research", "Role": "R", "Prompt": "p", "Workspace": "inherit"}
    seen = Timeline()
    agent, _ = make_agent(_invoke_research(inherit), hooks=[seen], policies=[policy.allow_all()])
    async with agent:
        await agent.chat("research")
    assert seen.tools() == ["invoke_subagent"]
    # The control: opted in, the same call does run git in the repository.
    branch = {**inherit, "Workspace": "branch"}
    agent, _ = make_agent(
        _invoke_research(branch),
        policies=[policy.allow_all()],
        configure=lambda b: b.allow_ungoverned("subagent_workspaces"),
    )
    async with agent:
        await agent.chat("research in a branch")
    assert len(_git(env.ws, "worktree", "list").splitlines()) == 2


# -- run_command RequestedTerminalID --------------------------------------------------------


def _terminal_attacks(ws: Path) -> list[str]:
    marker = ws / "pwned"
    up = "../" * 12  # from <app-data>/brain/<id>/.system_generated/terminals to /
    return [
        f"t$(touch {marker})",
        f"t`touch {marker}`",
        f't\\"; touch {marker}; \\"',
        f"t'; touch {marker}; '",
        f"t\ntouch {marker}",
        up + str(ws / "escaped").lstrip("/"),  # `declare -p` dumped outside its directory
    ]


@pytest.mark.parametrize("attack", range(6))
async def test_a_terminal_id_that_is_not_a_plain_identifier_never_reaches_the_shell(
    make_agent: AgentFactory, env: Workspace, attack: int
) -> None:
    terminal = _terminal_attacks(env.ws)[attack]
    seen = Timeline()
    call = tool_call(
        "run_command",
        CommandLine="ls",
        Cwd=str(env.ws),
        WaitMsBeforeAsync=3000,
        RunPersistent=True,
        RequestedTerminalID=terminal,
    )
    agent, model = make_agent([call, "done"], hooks=[seen], policies=[policy.allow_all()])
    async with agent:
        await agent.chat("list")
    assert not (env.ws / "pwned").exists()
    assert not list(env.ws.glob("escaped*"))
    assert seen.tools() == [], "refused before any hook"
    assert "RequestedTerminalID" in tool_messages(model, 1)[0]
    assert "not a plain identifier" in tool_messages(model, 1)[0]


async def test_persistent_terminals_the_harness_issues_still_work(
    make_agent: AgentFactory, env: Workspace
) -> None:
    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        done = _tool_calls_so_far(messages)
        first = {"Cwd": str(env.ws), "WaitMsBeforeAsync": 3000, "RunPersistent": True}
        if done == 0:
            return tool_call("run_command", CommandLine="export FOO=kept", **first)
        if done == 1:
            found = re.search(r"Terminal ID: (\S+)", str(messages[-1].get("content")))
            assert found, messages[-1]
            return tool_call(
                "run_command",
                CommandLine="echo FOO=$FOO",
                RequestedTerminalID=found.group(1),
                **first,
            )
        return "done"

    seen = Timeline()
    agent, model = make_agent(script, hooks=[seen], policies=[policy.allow_all()])
    async with agent:
        await agent.chat("twice in one terminal")
    assert seen.tools() == ["run_command", "run_command"]
    (reused,) = tool_messages(model, 2)[-1:]
    assert "FOO=kept" in reused
    issued = re.search(r"Terminal ID: (\S+)", reused)
    assert issued and re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", issued.group(1))


# -- the research subagent's schedule ---------------------------------------------------------


def _scheduling_research(marker: Path, ws: Path) -> Any:
    """The root invokes research; research schedules a standing timer (never asked); when
    it wakes, it asks the root to act, and the root then touches MARKER."""

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        done = _tool_calls_so_far(messages)
        last = messages[-1]
        said = json.dumps(last)
        if not _is_root(tools):
            if last.get("role") == "user" and "WAKEUP" in said:
                return "ROOT-TOUCH-NOW"
            if done == 0:
                return tool_call(
                    "schedule", Prompt="WAKEUP", CronExpression="@every 2s", IsDaemon=True
                )
            return "research done"
        if "ROOT-TOUCH-NOW" in said:
            return tool_call(
                "run_command", CommandLine=f"touch {marker}", Cwd=str(ws), WaitMsBeforeAsync=3000
            )
        if done == 0:
            return tool_call(
                "invoke_subagent",
                Subagents=[{"TypeName": "research", "Prompt": "watch", "Role": "Watcher"}],
            )
        return "finished"

    return script


async def test_a_scheduled_wake_runs_nothing_after_chat_returns(
    make_agent: AgentFactory, env: Workspace
) -> None:
    marker = env.ws / "woken"
    seen = Timeline()
    agent, model = make_agent(
        _scheduling_research(marker, env.ws), hooks=[seen], policies=[policy.allow_all()]
    )
    async with agent:
        await agent.chat("watch")
        returned = time.monotonic()
        await asyncio.sleep(4.5)  # the timer fires every 2 s
        woken = len(model.requests)
        await asyncio.sleep(2.5)
        assert len(model.requests) == woken, "the halted wake's timer fired again"
        assert not marker.exists(), "a woken agent ran a command after chat() returned"
        assert seen.after(returned) == [], "a hook was asked outside any chat()"
        response = await agent.chat("still there?")  # the session goes on
    assert response.text == "finished"


async def test_opting_into_schedule_lets_the_wake_run(
    make_agent: AgentFactory, env: Workspace
) -> None:
    # The control: with the opt-in, the same wake reaches the (allowing) hooks and runs.
    marker = env.ws / "woken"
    agent, _ = make_agent(
        _scheduling_research(marker, env.ws),
        policies=[policy.allow_all()],
        configure=lambda b: b.allow_ungoverned("schedule"),
    )
    async with agent:
        await agent.chat("watch")
        for _ in range(80):
            if marker.exists():
                break
            await asyncio.sleep(0.1)
    assert marker.exists()


# -- call_mcp_tool Arguments ------------------------------------------------------------------


@pytest.mark.parametrize("arguments", ["{not json", "[1, 2]", "3", 7, ["text"]])
async def test_mcp_arguments_that_cannot_be_checked_are_refused_and_the_session_goes_on(
    make_agent: AgentFactory, env: Workspace, arguments: Any
) -> None:
    server = env.ws / "mcp_record.py"
    server.write_text(_MCP_SERVER)
    log = env.ws / "calls.jsonl"
    seen = Timeline()
    bad = tool_call("call_mcp_tool", ServerName="rec", ToolName="record", Arguments=arguments)
    good = tool_call(
        "call_mcp_tool", ServerName="rec", ToolName="record", Arguments={"text": "fine"}
    )
    agent, model = make_agent(
        [bad, "refused", good, "done"],
        hooks=[seen],
        policies=[policy.allow_all()],
        configure=lambda b: b.mcp_server(
            McpStdioServer(name="rec", command=sys.executable, args=[str(server), str(log)])
        ),
    )
    async with agent:
        await agent.chat("record badly")
        assert "Arguments cannot be checked" in tool_messages(model, 1)[0]
        assert seen.tools() == []
        await agent.chat("record")  # the next turn works
    assert seen.tools() == ["record"]
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c["arguments"] for c in calls] == [{"text": "fine"}]
