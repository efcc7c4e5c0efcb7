"""Argument rewriting in pre_tool_call, against the real harness.

A hook allows a call with new arguments (`HookResult.rewrite`); later hooks and the
PolicyEnforcer see the rewritten call, and the harness runs exactly that. Each test pins
one part of it, attacks first: a rewrite that would make the harness act on something the
policies did not check is refused.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from antigravity_sdk import Hook, HookResult, McpStdioServer, ToolCall, ToolResult, policy
from antigravity_sdk.testing import tool_call
from antigravity_sdk.tools import tool

from .conftest import AgentFactory, Workspace, tool_messages
from .test_examples import load_example
from .test_governance import _tool_calls_so_far


class Rewrite(Hook):
    """Rewrites every call to `args` (a function of the call, or a fixed mapping)."""

    def __init__(self, args: Any) -> None:
        self.args = args
        self.seen: list[ToolCall] = []

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        self.seen.append(tool_call)
        args = self.args(tool_call) if callable(self.args) else self.args
        return HookResult.rewrite(args)


class Record(Hook):
    """Allows everything and records what it saw, before and after the tool ran."""

    def __init__(self) -> None:
        self.pre: list[ToolCall] = []
        self.post: list[ToolResult] = []

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        self.pre.append(tool_call)
        return HookResult.allowed()

    async def post_tool_call(self, result: ToolResult) -> None:
        self.post.append(result)


def _run(command: str, cwd: Path) -> dict[str, Any]:
    return {"CommandLine": command, "Cwd": str(cwd)}


async def test_the_rewritten_command_is_the_one_that_runs(
    make_agent: AgentFactory, env: Workspace
) -> None:
    victim = env.ws / "victim"
    victim.mkdir()
    (victim / "data").write_text("precious")
    rewrite = Rewrite(_run("echo safe-rewrite", env.ws))
    record = Record()
    agent, model = make_agent(
        [tool_call("run_command", **_run(f"rm -rf {victim}", env.ws)), "done"],
        hooks=[rewrite, record],
        policies=[policy.allow_all()],
    )
    async with agent:
        response = await agent.chat("clean up")
    assert (victim / "data").read_text() == "precious"
    (output,) = tool_messages(model, 1)
    assert "safe-rewrite" in output
    # Later hooks saw the rewrite, post_tool_call the call as run, and so does the step.
    assert record.pre[0].args == _run("echo safe-rewrite", env.ws)
    assert record.post[0].tool_call is not None
    assert record.post[0].tool_call.args == _run("echo safe-rewrite", env.ws)
    (step,) = [s for s in response.steps if s.kind == "tool_call"]
    assert step.tool_call is not None and step.tool_call.args["CommandLine"] == "echo safe-rewrite"


async def test_file_tools_run_with_the_rewritten_arguments(
    make_agent: AgentFactory, env: Workspace
) -> None:
    asked, rewritten = env.ws / "asked.txt", env.ws / "rewritten.txt"
    (env.ws / "shown.txt").write_text("SHOWN-CONTENT\n")
    write = {"TargetFile": str(asked), "CodeContent": "model\n", "Overwrite": True}
    view = {"AbsolutePath": str(env.ws / "hidden.txt")}

    def rewrite(call: ToolCall) -> dict[str, Any]:
        if call.name == "write_to_file":
            return {**call.args, "TargetFile": str(rewritten), "CodeContent": "hook\n"}
        return {"AbsolutePath": str(env.ws / "shown.txt")}

    agent, model = make_agent(
        [tool_call("write_to_file", **write), tool_call("view_file", **view), "done"],
        hooks=[Rewrite(rewrite)],
        policies=[policy.workspace_only([env.ws]), policy.allow_all()],
    )
    async with agent:
        await agent.chat("write and read")
    assert not asked.exists()
    assert rewritten.read_text() == "hook\n"
    assert any("SHOWN-CONTENT" in m for m in tool_messages(model, 2))


async def test_a_policy_denies_the_rewritten_form(make_agent: AgentFactory, env: Workspace) -> None:
    marker = env.ws / "marker"
    agent, model = make_agent(
        [tool_call("run_command", **_run("echo harmless", env.ws)), "done"],
        hooks=[Rewrite(_run(f"touch {marker}", env.ws))],
        policies=[
            policy.deny("run_command", when=lambda a: "touch" in a["CommandLine"], name="no-touch"),
            policy.allow_all(),
        ],
    )
    async with agent:
        await agent.chat("go")
    assert not marker.exists()
    assert "no-touch" in tool_messages(model, 1)[0]


async def test_a_lowercase_rewrite_is_checked_under_the_canonical_name(
    make_agent: AgentFactory, env: Workspace
) -> None:
    # The harness reads `commandline` as `CommandLine`: the policy must see it so.
    marker = env.ws / "marker"
    agent, model = make_agent(
        [tool_call("run_command", **_run("echo harmless", env.ws)), "done"],
        hooks=[Rewrite({"commandline": f"touch {marker}", "cwd": str(env.ws)})],
        policies=[
            policy.deny(
                "run_command", when=lambda a: "touch" in a.get("CommandLine", ""), name="no-touch"
            ),
            policy.allow_all(),
        ],
    )
    async with agent:
        await agent.chat("go")
    assert not marker.exists()
    assert "no-touch" in tool_messages(model, 1)[0]


async def test_a_lowercase_rewrite_runs_under_the_canonical_name(
    make_agent: AgentFactory, env: Workspace
) -> None:
    record = Record()
    agent, model = make_agent(
        [tool_call("run_command", **_run("echo harmless", env.ws)), "done"],
        hooks=[Rewrite({"commandline": "echo lower-ok", "cwd": str(env.ws)}), record],
        policies=[policy.allow_all()],
    )
    async with agent:
        await agent.chat("go")
    assert record.pre[0].args == _run("echo lower-ok", env.ws)
    assert "lower-ok" in tool_messages(model, 1)[0]


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"commandline": "touch {b}"}, "differ only in case"),
        ({"Bogus": "1"}, "takes no argument 'Bogus'"),
    ],
    ids=["case-collision", "unknown-argument"],
)
async def test_a_rewrite_the_harness_would_read_differently_is_refused(
    make_agent: AgentFactory, env: Workspace, extra: dict[str, str], expected: str
) -> None:
    a, b = env.ws / "a", env.ws / "b"
    args = {**_run(f"touch {a}", env.ws), **{k: v.format(b=b) for k, v in extra.items()}}
    agent, model = make_agent(
        [tool_call("run_command", **_run("echo harmless", env.ws)), "done"],
        hooks=[Rewrite(args)],
        policies=[policy.allow_all()],
    )
    async with agent:
        await agent.chat("go")
    assert not a.exists() and not b.exists()
    (message,) = tool_messages(model, 1)
    assert "refused: hook Rewrite rewrote the call's arguments unusably" in message
    assert expected in message


def _escapes(env: Workspace) -> dict[str, tuple[str, dict[str, Any]]]:
    """Calls that leave the workspace, each with a harmless original inside it."""
    link = env.ws / "link"
    link.symlink_to("/etc")
    inside = env.ws / "inside.txt"
    inside.write_text("inside\n")
    return {
        "outside": ("view_file", {"AbsolutePath": "/etc/hostname"}),
        "dotdot": ("view_file", {"AbsolutePath": f"{env.ws}/../../../../etc/hostname"}),
        "symlink": ("view_file", {"AbsolutePath": str(link / "hostname")}),
        "cwd": ("run_command", _run("cat hostname", Path("/etc"))),
        "cwd-symlink": ("run_command", _run("cat hostname", link)),
    }


def _hostname() -> str:
    """What reading the escaped file would show (never empty: the check must bite)."""
    return Path("/etc/hostname").read_text().strip() or "\0"


@pytest.mark.parametrize("escape", ["outside", "dotdot", "symlink", "cwd", "cwd-symlink"])
@pytest.mark.parametrize("route", ["original", "rewritten"])
async def test_workspace_only_catches_a_rewritten_escape_as_an_original_one(
    make_agent: AgentFactory, env: Workspace, escape: str, route: str
) -> None:
    name, args = _escapes(env)[escape]
    harmless = (
        {"AbsolutePath": str(env.ws / "inside.txt")}
        if name == "view_file"
        else _run("echo harmless", env.ws)
    )
    script = [tool_call(name, **(args if route == "original" else harmless)), "done"]
    hooks = [Rewrite(args)] if route == "rewritten" else []
    agent, model = make_agent(
        script, hooks=hooks, policies=[policy.workspace_only([env.ws]), policy.allow_all()]
    )
    async with agent:
        await agent.chat("read it")
    (message,) = tool_messages(model, 1)
    assert "outside" in message and "denied" in message
    assert _hostname() not in message.replace(str(env.ws), "")


class Boom(Hook):
    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        raise RuntimeError("boom")


class RewriteThenRaise(Hook):
    def __init__(self, args: dict[str, Any]) -> None:
        self.args = args

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        tool_call.args.clear()
        tool_call.args.update(self.args)
        raise RuntimeError("boom after rewriting in place")


@pytest.mark.parametrize("how", ["later-hook-raises", "rewriter-raises"])
async def test_a_rewrite_followed_by_a_raise_fails_closed(
    make_agent: AgentFactory, env: Workspace, how: str
) -> None:
    marker = env.ws / "marker"
    args = _run(f"touch {marker}", env.ws)
    hooks: list[Hook] = (
        [Rewrite(args), Boom()] if how == "later-hook-raises" else [RewriteThenRaise(args)]
    )
    agent, model = make_agent(
        [tool_call("run_command", **_run("echo harmless", env.ws)), "done"],
        hooks=hooks,
        policies=[policy.allow_all()],
    )
    async with agent:
        await agent.chat("go")
    assert not marker.exists()
    assert "failed" in tool_messages(model, 1)[0]


async def test_a_hook_registered_after_the_policies_cannot_rewrite(
    make_agent: AgentFactory, env: Workspace
) -> None:
    marker = env.ws / "marker"
    agent, model = make_agent(
        [tool_call("run_command", **_run("echo harmless", env.ws)), "done"],
        policies=[policy.deny("run_command", when=lambda a: "touch" in a["CommandLine"])],
    )
    async with agent:
        assert agent.hook_runner is not None
        agent.hook_runner.register(Rewrite(_run(f"touch {marker}", env.ws)))
        await agent.chat("go")
    assert not marker.exists()
    assert "runs after the policies" in tool_messages(model, 1)[0]


class MutateInPlace(Hook):
    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        tool_call.args["CommandLine"] = "echo sanitised"
        return HookResult.allowed()


async def test_changing_the_arguments_in_place_is_refused(
    make_agent: AgentFactory, env: Workspace
) -> None:
    # Policies would check "echo sanitised" while the harness ran the model's command.
    marker = env.ws / "marker"
    record = Record()
    agent, model = make_agent(
        [tool_call("run_command", **_run(f"touch {marker}", env.ws)), "done"],
        hooks=[MutateInPlace(), record],
        policies=[policy.allow_all()],
    )
    async with agent:
        await agent.chat("go")
    assert record.pre[0].args["CommandLine"] == "echo sanitised"
    assert not marker.exists()
    assert "changed the tool call's arguments in place" in tool_messages(model, 1)[0]


async def test_two_rewrites_chain(make_agent: AgentFactory, env: Workspace) -> None:
    first = Rewrite(lambda call: {**call.args, "CommandLine": "echo one"})
    second = Rewrite(lambda call: {**call.args, "CommandLine": call.args["CommandLine"] + " two"})
    record = Record()
    agent, model = make_agent(
        [tool_call("run_command", **_run("echo zero", env.ws)), "done"],
        hooks=[first, second, record],
        policies=[policy.allow_all()],
    )
    async with agent:
        await agent.chat("go")
    assert second.seen[0].args["CommandLine"] == "echo one"
    assert record.pre[0].args["CommandLine"] == "echo one two"
    assert "one two" in tool_messages(model, 1)[0]


# -- every route: host-side tools and MCP tools honour the rewrite too ----------------------

RECEIVED: list[dict[str, Any]] = []


@tool
def greet(name: str, shout: bool = False) -> str:
    """Greet someone."""
    RECEIVED.append({"name": name, "shout": shout})
    return f"hello {name}".upper() if shout else f"hello {name}"


async def test_a_host_tool_runs_with_the_rewritten_arguments(
    make_agent: AgentFactory, env: Workspace
) -> None:
    RECEIVED.clear()
    record = Record()
    agent, model = make_agent(
        [tool_call("greet", name="mallory"), "done"],
        hooks=[Rewrite({"name": "bob", "shout": True}), record],
        policies=[policy.deny("greet", when=lambda a: a["name"] == "mallory"), policy.allow_all()],
        tools=[greet],
    )
    async with agent:
        await agent.chat("greet")
    assert RECEIVED == [{"name": "bob", "shout": True}]
    assert "HELLO BOB" in tool_messages(model, 1)[0]
    assert record.post[0].tool_call is not None
    assert record.post[0].tool_call.args == {"name": "bob", "shout": True}


async def test_a_host_tool_rewrite_with_an_argument_it_does_not_take_is_refused(
    make_agent: AgentFactory, env: Workspace
) -> None:
    RECEIVED.clear()
    agent, model = make_agent(
        [tool_call("greet", name="alice"), "done"],
        hooks=[Rewrite({"name": "bob", "admin": True})],
        policies=[policy.allow_all()],
        tools=[greet],
    )
    async with agent:
        await agent.chat("greet")
    assert RECEIVED == []
    assert "greet takes no argument 'admin'" in tool_messages(model, 1)[0]


_MCP_SERVER = """
import json, sys
out = sys.argv[1]
def send(msg):
    sys.stdout.write(json.dumps(msg) + "\\n"); sys.stdout.flush()
for line in sys.stdin:
    if not line.strip():
        continue
    req = json.loads(line)
    method, rid = req.get("method"), req.get("id")
    if method == "initialize":
        version = req["params"].get("protocolVersion", "2024-11-05")
        send({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": version,
              "capabilities": {"tools": {}}, "serverInfo": {"name": "rec", "version": "1"}}})
    elif method == "tools/list":
        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [
              {"name": "record", "description": "Record text.", "inputSchema": schema}]}})
    elif method == "tools/call":
        with open(out, "a") as f:
            f.write(json.dumps(req["params"]) + "\\n")
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": [
              {"type": "text", "text": "recorded " + str(req["params"]["arguments"])}]}})
    elif rid is not None:
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
"""


async def test_an_mcp_tool_runs_with_the_rewritten_arguments_on_the_same_server(
    make_agent: AgentFactory, env: Workspace
) -> None:
    server = env.root / "mcp_record.py"
    server.write_text(_MCP_SERVER)
    log = env.ws / "calls.jsonl"  # the server runs contained: it writes in the workspace
    record = Record()
    # The rewrite names a server and tool of its own: they stay arguments, not a target.
    rewritten = {"text": "bob", "ServerName": "elsewhere", "ToolName": "other"}
    agent, model = make_agent(
        [
            tool_call(
                "call_mcp_tool", ServerName="rec", ToolName="record", Arguments={"text": "alice"}
            ),
            "done",
        ],
        hooks=[Rewrite(rewritten), record],
        policies=[policy.allow_all()],
        configure=lambda b: b.mcp_server(
            McpStdioServer(name="rec", command=sys.executable, args=[str(server), str(log)])
        ),
    )
    async with agent:
        await agent.chat("record")
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(c["name"], c["arguments"]) for c in calls] == [("record", rewritten)]
    assert record.pre[0].qualified_name == "rec/record"
    assert record.pre[0].args == rewritten
    assert "recorded" in tool_messages(model, 1)[0]


async def test_rewrite_arguments_example_runs() -> None:
    assert await load_example("rewrite_arguments").main() == 0


async def test_a_subagents_call_runs_rewritten(make_agent: AgentFactory, env: Workspace) -> None:
    # The research subagent runs commands read-only: what it prints shows what ran.
    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        done = _tool_calls_so_far(messages)
        if "invoke_subagent" not in {t.get("function", t).get("name") for t in tools}:
            if done == 0:  # the research subagent's own request
                return tool_call("run_command", **_run("echo as-asked", env.ws))
            return "research done"
        if done == 0:
            return tool_call(
                "invoke_subagent",
                Subagents=[{"TypeName": "research", "Prompt": "echo", "Role": "Researcher"}],
            )
        return "finished"

    def rewrite(call: ToolCall) -> dict[str, Any]:
        if call.name == "run_command":
            return _run("echo as-rewritten", env.ws)
        return call.args  # the invocation itself, unchanged

    record = Record()
    # Uncontained: the research subagent runs its commands in the harness's own read-only
    # sandbox (a user and mount namespace), which cannot start inside Landlock.
    agent, model = make_agent(
        script,
        hooks=[Rewrite(rewrite), record],
        policies=[policy.allow_all()],
        configure=lambda b: b.containment(None),
    )
    async with agent:
        await agent.chat("research")
    (sub,) = [c for c in record.pre if c.name == "run_command"]
    assert sub.trajectory_id != agent.conversation_id
    outputs = [m for i in range(len(model.requests)) for m in tool_messages(model, i)]
    assert any("as-rewritten" in m for m in outputs)
    assert not any("as-asked" in m for m in outputs)


async def test_an_invocation_cannot_be_rewritten_into_an_ungoverned_subagent(
    make_agent: AgentFactory, env: Workspace
) -> None:
    marker = env.ws / "marker"
    agent, model = make_agent(
        [
            tool_call(
                "invoke_subagent",
                Subagents=[{"TypeName": "research", "Prompt": "p", "Role": "Researcher"}],
            ),
            "done",
        ],
        hooks=[Rewrite({"Subagents": [{"TypeName": "self", "Prompt": f"touch {marker}"}]})],
        policies=[policy.allow_all()],
    )
    async with agent:
        await agent.chat("go")
    assert not marker.exists()
    assert "would run its tools without asking" in tool_messages(model, 1)[0]
