"""OpenTelemetry tracing (`antigravity_sdk.tracing`), without the harness: the spans a
`TracedHookRunner` makes, recorded by opentelemetry-sdk's in-memory exporter.

The harness's side (spans of real turns) is in tests/integration/test_tracing.py.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from antigravity_sdk import Hook, HookResult, ToolCall, ToolResult, policy
from antigravity_sdk.harness.effects import TurnEnded
from antigravity_sdk.tracing import TracedHookRunner, Tracing
from antigravity_sdk.types import ChatResponse, UsageMetadata

ROOT = Path(__file__).resolve().parents[1]


class Spans:
    """A tracer provider whose finished spans can be read back."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def runner(self, hooks: Sequence[Hook], agent_name: str = "") -> TracedHookRunner:
        tracing = Tracing(self.provider, agent_name)
        return tracing.hook_runner(hooks, turn_attributes={"gen_ai.request.model": "m"})

    @property
    def finished(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> ReadableSpan:
        matches = [s for s in self.finished if s.name == name]
        assert len(matches) == 1, [s.name for s in self.finished]
        return matches[0]


def parent_of(span: ReadableSpan, spans: Spans) -> ReadableSpan | None:
    if span.parent is None:
        return None
    return next(s for s in spans.finished if s.context.span_id == span.parent.span_id)


@pytest.fixture
def spans() -> Spans:
    return Spans()


class Allow(Hook):
    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        return HookResult.allowed()

    async def post_tool_call(self, result: ToolResult) -> None:
        return None


class DenyAll(Hook):
    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        return HookResult.denied("no")


class Rewrite(Hook):
    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        return HookResult.rewrite({"path": "/safe"})


class Broken(Hook):
    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        raise RuntimeError("boom")


CALL = ToolCall(name="view_file", args={"path": "/x"}, id="c1")
DONE = ToolResult(name="view_file", id="c1", result="ok")


def ended(usage: UsageMetadata | None = None, **kwargs: Any) -> TurnEnded:
    return TurnEnded(ChatResponse(text="ok", usage=usage), **kwargs)


async def test_a_tool_call_is_a_child_of_the_turn_and_its_hooks_children_of_it(
    spans: Spans,
) -> None:
    runner = spans.runner([Allow(), policy.enforce([policy.allow_all()])], agent_name="bot")
    runner.begin_turn("hi")
    runner.start_turn("conv-1")
    assert (await runner.dispatch("pre_tool_call", CALL)).allow
    await runner.dispatch("post_tool_call", DONE)
    runner.turn_ended(ended(UsageMetadata(prompt_token_count=7, candidates_token_count=3)), None)
    runner.close_turn()

    turn = spans.named("invoke_agent bot")
    tool = spans.named("execute_tool view_file")
    assert parent_of(tool, spans) is turn
    for name in ("pre_tool_call Allow", "policy view_file", "post_tool_call Allow"):
        assert parent_of(spans.named(name), spans) is tool
    assert turn.attributes is not None and tool.attributes is not None
    assert turn.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert turn.attributes["gen_ai.agent.name"] == "bot"
    assert turn.attributes["gen_ai.conversation.id"] == "conv-1"
    assert turn.attributes["gen_ai.request.model"] == "m"
    assert turn.attributes["gen_ai.usage.input_tokens"] == 7
    assert turn.attributes["gen_ai.usage.output_tokens"] == 3
    assert turn.status.status_code is StatusCode.UNSET
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "view_file"
    assert tool.attributes["gen_ai.tool.call.id"] == "c1"
    assert tool.attributes["antigravity.tool.decision"] == "allow"
    assert tool.attributes["antigravity.tool.finished"] is True


async def test_policy_span_names_verdict_rule_and_bucket(spans: Spans) -> None:
    rules = [policy.deny("run_command", name="no-shell"), policy.allow_all()]
    runner = spans.runner([policy.enforce(rules)])
    runner.start_turn("")
    shell = ToolCall(name="run_command", args={"CommandLine": "ls"}, id="c2")
    result = await runner.dispatch("pre_tool_call", shell)
    assert not result.allow
    assert (await runner.dispatch("pre_tool_call", CALL)).allow
    runner.close_turn()

    denied = spans.named("policy run_command").attributes
    assert denied is not None
    assert denied["antigravity.policy.verdict"] == "deny"
    assert denied["antigravity.policy.rule"] == "no-shell"
    assert denied["antigravity.policy.rule_decision"] == "deny"
    assert denied["antigravity.policy.bucket"] == 0
    assert denied["antigravity.policy.bucket_name"] == "specific deny"
    assert denied["antigravity.policy.reason"] == result.message
    assert isinstance(denied["antigravity.policy.latency_us"], float)
    allowed = spans.named("policy view_file").attributes
    assert allowed is not None
    assert allowed["antigravity.policy.verdict"] == "allow"
    assert allowed["antigravity.policy.bucket_name"] == "* allow"
    tool = spans.named("execute_tool run_command")
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.attributes is not None and tool.attributes["error.type"] == "denied"
    assert tool.attributes["antigravity.tool.reason"] == result.message


async def test_shadow_mode_allows_and_the_span_names_the_rule_that_would_deny(
    spans: Spans,
) -> None:
    runner = spans.runner([policy.enforce([policy.deny("view_file", name="d")], mode="shadow")])
    assert (await runner.dispatch("pre_tool_call", CALL)).allow
    attributes = spans.named("policy view_file").attributes
    assert attributes is not None
    assert attributes["antigravity.policy.mode"] == "shadow"
    assert attributes["antigravity.policy.verdict"] == "allow"
    assert attributes["antigravity.policy.rule"] == "d"
    assert attributes["antigravity.policy.rule_decision"] == "deny"


async def test_hook_spans_say_deny_and_rewrite(spans: Spans) -> None:
    runner = spans.runner([Rewrite(), Allow()])
    result = await runner.dispatch("pre_tool_call", CALL)
    assert result.args == {"path": "/safe"}
    rewrite = spans.named("pre_tool_call Rewrite").attributes
    assert rewrite is not None and rewrite["antigravity.hook.decision"] == "rewrite"
    tool = spans.finished[-1]  # still open: ended by post_tool_call (or the turn)
    assert tool.name == "pre_tool_call Allow"
    await runner.dispatch("post_tool_call", DONE)
    traced = spans.named("execute_tool view_file").attributes
    assert traced is not None and traced["antigravity.tool.decision"] == "rewrite"

    spans.exporter.clear()
    denier = spans.runner([DenyAll()])
    assert not (await denier.dispatch("pre_tool_call", CALL)).allow
    denied = spans.named("pre_tool_call DenyAll").attributes
    assert denied is not None
    assert denied["antigravity.hook.decision"] == "deny"
    assert denied["antigravity.hook.reason"] == "no"


async def test_a_failing_hook_still_denies_and_its_span_records_the_error(
    spans: Spans, caplog: pytest.LogCaptureFixture
) -> None:
    runner = spans.runner([Broken()])
    result = await runner.dispatch("pre_tool_call", CALL)
    assert not result.allow
    assert "hook Broken.pre_tool_call failed: RuntimeError: boom" in result.message
    span = spans.named("pre_tool_call Broken")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None and span.attributes["error.type"] == "RuntimeError"
    assert [e.name for e in span.events] == ["exception"]


async def test_a_denied_or_failed_turn_is_an_error(spans: Spans) -> None:
    runner = spans.runner([])
    runner.start_turn("c")
    runner.turn_ended(ended(cancelled=True), HookResult.denied("not now"))
    runner.close_turn()
    runner.start_turn("c")
    runner.turn_ended(ended(error="model exploded"), None)
    runner.close_turn()
    runner.start_turn("c")
    runner.turn_failed(TimeoutError("too slow"))
    runner.close_turn()
    denied, failed, timed_out = spans.finished
    for span, kind in (
        (denied, "TurnDeniedError"),
        (failed, "TurnFailedError"),
        (timed_out, "TimeoutError"),
    ):
        assert span.status.status_code is StatusCode.ERROR
        assert span.attributes is not None and span.attributes["error.type"] == kind
    assert denied.status.description == "not now"
    assert failed.status.description == "model exploded"


async def test_tool_calls_left_open_end_with_the_turn(spans: Spans) -> None:
    runner = spans.runner([Allow()])
    runner.start_turn("c")
    await runner.dispatch("pre_tool_call", CALL)
    runner.close_turn()
    tool = spans.named("execute_tool view_file")
    assert tool.attributes is not None and tool.attributes["antigravity.tool.finished"] is False
    assert parent_of(tool, spans) is spans.named("invoke_agent")


async def test_other_events_are_under_the_turn(spans: Spans) -> None:
    class Turns(Hook):
        async def pre_turn(self) -> HookResult:
            return HookResult.allowed()

    runner = spans.runner([Turns()])
    runner.start_turn("c")
    assert (await runner.dispatch("pre_turn")).allow
    runner.close_turn()
    assert parent_of(spans.named("pre_turn Turns"), spans) is spans.named("invoke_agent")


async def test_the_runner_subscribes_post_tool_call() -> None:
    """Its request is what ends a tool call's span, so the harness must send it."""
    runner = Spans().runner([DenyAll()])
    assert runner.subscribed_events() == {"pre_tool_call", "post_tool_call"}


def test_wrapped_hooks_keep_their_names_and_rewrite_review() -> None:
    enforcer = policy.enforce([policy.allow_all()])
    runner = Spans().runner([Allow(), enforcer])
    wrapped_allow, wrapped_enforcer = runner.hooks
    assert type(wrapped_allow).__name__ == "Allow"
    assert type(wrapped_enforcer).__name__ == "PolicyEnforcer"
    assert wrapped_enforcer.reviews_rewrites
    assert not wrapped_allow.reviews_rewrites


async def test_a_hook_after_the_policies_still_may_not_rewrite(spans: Spans) -> None:
    runner = spans.runner([policy.enforce([policy.allow_all()]), Rewrite()])
    result = await runner.dispatch("pre_tool_call", CALL)
    assert not result.allow
    assert "runs after the policies" in result.message


# -- containment: tracing never changes a decision --------------------------------------------


class RaisingTracerProvider:
    """A provider whose tracer fails at everything."""

    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def start_span(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("tracer down")


class RaisingProcessor(SpanProcessor):
    def on_start(self, span: Any, parent_context: Any = None) -> None:
        raise RuntimeError("processor down at start")

    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("processor down at end")


@pytest.mark.parametrize("broken", ["tracer", "processor"])
async def test_a_failing_tracer_changes_no_decision(
    broken: str, caplog: pytest.LogCaptureFixture
) -> None:
    if broken == "tracer":
        provider: Any = RaisingTracerProvider()
    else:
        provider = TracerProvider()
        provider.add_span_processor(RaisingProcessor())
    rules = [policy.deny("run_command", name="no-shell"), policy.allow_all()]
    runner = Tracing(provider).hook_runner([Allow(), policy.enforce(rules)], turn_attributes={})
    caplog.set_level(logging.WARNING, "antigravity_sdk.tracing")
    runner.start_turn("c")
    assert (await runner.dispatch("pre_tool_call", CALL)).allow
    await runner.dispatch("post_tool_call", DONE)
    shell = ToolCall(name="run_command", args={"CommandLine": "rm -rf /"}, id="c3")
    assert not (await runner.dispatch("pre_tool_call", shell)).allow
    runner.turn_ended(ended(cancelled=True), HookResult.denied("x"))
    runner.close_turn()
    assert "tracing: could not" in caplog.text
    assert "down" in caplog.text


# -- PolicyEnforcer.decide: exactly pre_tool_call's answer ----------------------------------

_TOOLS = ["view_file", "run_command", "write_to_file"]


def _rule(kind: str, tool: str, when: bool | None) -> Any:
    condition = None if when is None else (lambda args, value=when: value)
    if kind == "deny":
        return policy.deny(tool, when=condition)
    if kind == "allow":
        return policy.allow(tool, when=condition)
    return policy.ask_user(tool, handler=lambda call: False, when=condition)


_RULES = st.lists(
    st.tuples(
        st.sampled_from(["deny", "allow", "ask"]),
        st.sampled_from([*_TOOLS, "*"]),
        st.sampled_from([None, True, False]),
    ),
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(_RULES, st.sampled_from(_TOOLS), st.sampled_from(["enforce", "shadow"]))
async def test_decide_answers_exactly_as_pre_tool_call(
    rules: list[tuple[str, str, bool | None]], tool: str, mode: Any
) -> None:
    enforcer = policy.enforce([_rule(*r) for r in rules], mode=mode)
    call = ToolCall(name=tool, args={"CommandLine": "ls", "AbsolutePath": "/x"})
    plain = await enforcer.pre_tool_call(call)
    traced, decision = await enforcer.decide(call)
    assert traced == plain
    assert decision.allow == plain.allow
    evaluated = await enforcer.evaluate(call)
    # evaluate ignores shadow mode; in enforce mode all three agree on the rule.
    assert (decision.policy, decision.bucket) == (evaluated.policy, evaluated.bucket)
    if mode == "enforce":
        assert evaluated.allow == plain.allow


# -- without the extra ------------------------------------------------------------------------

_BLOCKED = textwrap.dedent(
    """
    import asyncio, sys

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ImportError(f"No module named {name!r} (blocked)")
            return None

    sys.meta_path.insert(0, Block())
    from antigravity_sdk import Agent, ConfigurationError, HookRunner, policy
    from antigravity_sdk.testing import ScriptedModel

    agent = Agent.builder().model(ScriptedModel(["hi"])).build()
    assert "antigravity_sdk.tracing" not in sys.modules
    try:
        Agent.builder().tracing()
    except ConfigurationError as exc:
        print(exc)
    else:
        raise SystemExit("tracing() without OpenTelemetry did not raise")
    """
)


def _python(code: str) -> subprocess.CompletedProcess[str]:
    """`code` in a fresh interpreter that sees only this checkout (no user site, no PATH)."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )


def test_without_opentelemetry_the_sdk_works_and_tracing_says_how_to_install() -> None:
    done = _python(_BLOCKED)
    assert done.returncode == 0, done.stderr
    assert "pip install 'antigravity-sdk[otel]'" in done.stdout
    assert "tracing needs OpenTelemetry" in done.stdout


def test_an_untraced_agent_does_not_import_opentelemetry() -> None:
    code = (
        "import sys\n"
        "from antigravity_sdk import Agent, policy\n"
        "Agent.builder().model('gemini-x').build()\n"
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry', "
        "'antigravity_sdk.tracing'))))\n"
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_tracing_refuses_what_is_not_a_provider() -> None:
    with pytest.raises(TypeError, match="TracerProvider"):
        Tracing(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="agent_name"):
        Tracing(None, 3)  # type: ignore[arg-type]
