"""OpenTelemetry tracing against the real harness (offline, ScriptedModel): the spans of
real turns, recorded by opentelemetry-sdk's in-memory exporter."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from antigravity_sdk import (
    AgentBuilder,
    Hook,
    HookResult,
    ToolCall,
    ToolResult,
    TurnDeniedError,
    policy,
)
from antigravity_sdk.testing import tool_call
from antigravity_sdk.tools import tool

from .conftest import AgentFactory, Workspace, tool_messages
from .test_examples import load_example


class Traced:
    def __init__(self, *processors: SpanProcessor) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        for processor in processors:
            self.provider.add_span_processor(processor)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def configure(self, name: str = "t") -> Any:
        def configure(builder: AgentBuilder) -> AgentBuilder:
            return builder.tracing(self.provider, agent_name=name)

        return configure

    @property
    def spans(self) -> list[ReadableSpan]:
        return sorted(self.exporter.get_finished_spans(), key=lambda s: s.start_time or 0)

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.name.startswith(prefix)]

    def parent(self, span: ReadableSpan) -> ReadableSpan | None:
        if span.parent is None:
            return None
        return next((s for s in self.spans if s.context.span_id == span.parent.span_id), None)


class RewriteRm(Hook):
    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        command = str(tool_call.args.get("CommandLine", ""))
        if command.startswith("rm "):
            return HookResult.rewrite({**tool_call.args, "CommandLine": "echo dry-run"})
        return HookResult.allowed()

    async def post_tool_call(self, result: ToolResult) -> None:
        return None


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_a_turn_and_its_allowed_denied_and_rewritten_calls(
    make_agent: AgentFactory, env: Workspace
) -> None:
    (env.ws / "a.txt").write_text("hello")
    victim = env.ws / "victim"
    victim.mkdir()
    traced = Traced()
    agent, model = make_agent(
        [
            tool_call("view_file", AbsolutePath=str(env.ws / "a.txt")),
            tool_call("run_command", CommandLine=f"rm -rf {victim}", Cwd=str(env.ws)),
            tool_call(
                "write_to_file", TargetFile=str(env.ws / "b.txt"), CodeContent="x", Overwrite=False
            ),
            "done",
        ],
        hooks=[RewriteRm()],
        policies=[policy.deny("write_to_file", name="read-only"), policy.allow_all()],
        configure=traced.configure("tester"),
    )
    async with agent:
        response = await agent.chat("go")
    assert response.text == "done"
    assert victim.exists() and not (env.ws / "b.txt").exists()
    assert "dry-run" in "".join(tool_messages(model, 2))

    (turn,) = traced.named("invoke_agent")
    assert turn.name == "invoke_agent tester"
    assert turn.status.status_code is StatusCode.UNSET
    assert attrs(turn)["gen_ai.conversation.id"] == agent.conversation_id
    assert attrs(turn)["gen_ai.request.model"] == model.model_name
    assert response.usage is not None and response.usage.prompt_token_count > 0
    assert attrs(turn)["gen_ai.usage.input_tokens"] == response.usage.prompt_token_count
    assert attrs(turn)["gen_ai.usage.output_tokens"] == response.usage.candidates_token_count
    assert turn.parent is None

    view, run, write = traced.named("execute_tool")
    assert [s.name for s in (view, run, write)] == [
        "execute_tool view_file",
        "execute_tool run_command",
        "execute_tool write_to_file",
    ]
    for span in (view, run, write):
        assert traced.parent(span) is turn
        assert attrs(span)["gen_ai.operation.name"] == "execute_tool"
        assert attrs(span)["gen_ai.tool.call.id"]
        children = [s for s in traced.spans if traced.parent(s) is span]
        assert [s.name.split()[0] for s in children][:2] == ["pre_tool_call", "policy"]
    assert attrs(view)["antigravity.tool.decision"] == "allow"
    assert attrs(view)["antigravity.tool.finished"] is True
    assert attrs(run)["antigravity.tool.decision"] == "rewrite"
    assert attrs(run)["antigravity.tool.finished"] is True
    assert write.status.status_code is StatusCode.ERROR
    assert attrs(write)["error.type"] == "denied"

    (deny,) = traced.named("policy write_to_file")
    assert attrs(deny)["antigravity.policy.verdict"] == "deny"
    assert attrs(deny)["antigravity.policy.rule"] == "read-only"
    assert attrs(deny)["antigravity.policy.bucket_name"] == "specific deny"
    (rewritten,) = traced.named("policy run_command")
    assert attrs(rewritten)["antigravity.policy.verdict"] == "allow"
    (rewrite,) = [s for s in traced.named("pre_tool_call RewriteRm") if traced.parent(s) is run]
    assert attrs(rewrite)["antigravity.hook.decision"] == "rewrite"
    posts = traced.named("post_tool_call RewriteRm")
    assert {traced.parent(s).name for s in posts if traced.parent(s)} == {
        "execute_tool view_file",
        "execute_tool run_command",
    }


async def test_a_denied_turn_is_an_error_span(make_agent: AgentFactory) -> None:
    class NoTurns(Hook):
        async def pre_turn(self) -> HookResult:
            return HookResult.denied("closed for the day")

    traced = Traced()
    agent, _ = make_agent(["never"], hooks=[NoTurns()], configure=traced.configure())
    async with agent:
        with pytest.raises(TurnDeniedError):
            await agent.chat("hi")
        turn_spans = traced.named("invoke_agent")
    (turn,) = turn_spans
    assert turn.status.status_code is StatusCode.ERROR
    assert turn.status.description == "closed for the day"
    assert attrs(turn)["error.type"] == "TurnDeniedError"
    (hook,) = traced.named("pre_turn NoTurns")
    assert traced.parent(hook) is turn
    assert attrs(hook)["antigravity.hook.decision"] == "deny"


async def test_turns_nest_under_the_callers_span_and_host_tools_are_traced(
    make_agent: AgentFactory,
) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    traced = Traced()
    agent, _ = make_agent(
        [tool_call("add", a=2, b=3), "five"],
        tools=[add],
        policies=[policy.allow_all()],
        configure=traced.configure(),
    )
    tracer = traced.provider.get_tracer("app")
    async with agent:
        with tracer.start_as_current_span("request"):
            async for _ in agent.stream("add"):
                pass
    (request,) = traced.named("request")
    (turn,) = traced.named("invoke_agent")
    assert traced.parent(turn) is request
    (call,) = traced.named("execute_tool add")
    assert traced.parent(call) is turn
    assert attrs(call)["antigravity.tool.finished"] is True


class Exploding(SpanProcessor):
    def on_start(self, span: Any, parent_context: Any = None) -> None:
        raise RuntimeError("exporter on fire")

    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("exporter on fire")


async def test_a_failing_tracer_never_breaks_a_turn(
    make_agent: AgentFactory, env: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    (env.ws / "a.txt").write_text("hello")
    traced = Traced(Exploding())
    agent, model = make_agent(
        [
            tool_call("view_file", AbsolutePath=str(env.ws / "a.txt")),
            tool_call("run_command", CommandLine="ls", Cwd=str(env.ws)),
            "done",
        ],
        policies=[policy.deny("run_command", name="no-shell"), policy.allow_all()],
        configure=traced.configure(),
    )
    async with agent:
        response = await agent.chat("go")
    assert response.text == "done"
    assert "hello" in "".join(tool_messages(model, 1))
    assert "no-shell" in "".join(tool_messages(model, 2))
    assert "tracing: could not" in caplog.text
    assert traced.spans == []  # every span failed to start or to end


async def test_tracing_example_runs() -> None:
    assert await load_example("tracing").main() == 0
