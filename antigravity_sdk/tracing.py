"""OpenTelemetry tracing: a span per turn, per tool call, per hook call and per policy decision.

Optional (the `otel` extra, on `opentelemetry-api`) and off unless `AgentBuilder.tracing()`
is called. Nothing on the dispatch path asks whether tracing is on: a traced agent runs a
`TracedHookRunner` with every hook wrapped, an untraced one the plain `HookRunner`.

The span tree of a turn (names as the GenAI semantic conventions give them):

    invoke_agent {name}                  the turn: usage, stop reason, conversation id
    ├── pre_turn {Hook}                  each hook call (class and event)
    └── execute_tool {tool}              one tool call, from its decision to post_tool_call
        ├── pre_tool_call {Hook}
        ├── policy {tool}                the PolicyEnforcer: verdict, rule, bucket, latency
        └── post_tool_call {Hook}

Requests are answered in tasks that the reader starts, outside the turn's context, so
parents are passed explicitly (the turn span is held here), never taken from contextvars.
Tool arguments and results are not recorded. Tracing never changes a decision: a failure
of the tracer or of a span processor is logged on `antigravity_sdk.tracing` and contained.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from . import __version__
from .harness.effects import TurnEnded
from .hooks import Hook, HookRunner, RewriteCheck, overridden_events, plain_rewrite
from .policy import PolicyEnforcer
from .types import ChatResponse, HookResult, ToolCall, ToolResult

INSTALL: Final = "pip install 'antigravity-sdk[otel]'"
SDK_INSTALL: Final = "pip install opentelemetry-sdk"
"""The `otel` extra is OpenTelemetry's API only, as for any instrumented library: the
application installs an SDK (this one, or another) to record and export the spans."""

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
except ImportError as exc:  # the optional extra is not installed
    raise ImportError(
        f"tracing needs OpenTelemetry, which is not installed: {INSTALL} (its API; "
        f"{SDK_INSTALL} too to record and export the spans) ({exc})"
    ) from exc

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider
    from opentelemetry.util.types import AttributeValue

__all__ = ["INSTALL", "SDK_INSTALL", "TracedHookRunner", "Tracing"]

logger = logging.getLogger("antigravity_sdk.tracing")

Attributes = Mapping[str, "AttributeValue"]

_warned = False  # NO_PROVIDER was logged (once a process)

NO_PROVIDER: Final = (
    "tracing(): no OpenTelemetry TracerProvider is set, so the spans are recorded nowhere "
    "(the otel extra is the API only); to see them, " + SDK_INSTALL + " and set one with an "
    "exporter: trace.set_tracer_provider(provider), or tracing(provider) (docs/api.md, "
    "'Tracing with OpenTelemetry')"
)


class Tracing:
    """What `AgentBuilder.tracing()` configures: the tracer and the agent's name."""

    def __init__(self, tracer_provider: TracerProvider | None = None, agent_name: str = "") -> None:
        if not isinstance(agent_name, str):
            raise TypeError(f"agent_name must be a str, got {type(agent_name).__name__}")
        if tracer_provider is not None and not callable(
            getattr(tracer_provider, "get_tracer", None)
        ):
            raise TypeError(
                "tracer_provider must be an OpenTelemetry TracerProvider, got "
                f"{type(tracer_provider).__name__}"
            )
        # The global provider through a proxy: one set after this call is still used.
        self.tracer: Tracer = trace.get_tracer(
            "antigravity_sdk", __version__, tracer_provider=tracer_provider
        )
        self.agent_name = agent_name
        self.provider = tracer_provider

    def check_provider(self) -> None:
        """At a turn's start, warn (once a process) when its spans go nowhere: no provider
        given and none set globally (the API alone records nothing), or the API's no-op
        one. The agent goes on, untraced in effect, as the OpenTelemetry API intends."""
        global _warned
        if _warned:
            return
        provider = self.provider if self.provider is not None else trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
            _warned = True
            logger.warning(NO_PROVIDER)

    def hook_runner(
        self,
        hooks: Iterable[Hook],
        *,
        turn_attributes: Attributes,
        timeout: float | None = None,
        check_rewrite: RewriteCheck = plain_rewrite,
    ) -> TracedHookRunner:
        """The runner a traced agent uses, for one session."""
        return TracedHookRunner(
            hooks,
            tracing=self,
            turn_attributes=turn_attributes,
            timeout=timeout,
            check_rewrite=check_rewrite,
        )


# -- spans, contained ---------------------------------------------------------------------------


class _Spans:
    """Every call into OpenTelemetry, each contained: a failure is logged, never raised."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    def start(
        self,
        name: str,
        attributes: Attributes,
        parent: Span | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> Span:
        """A started span under `parent` (default: the current span)."""
        try:
            context = trace.set_span_in_context(parent) if parent is not None else None
            return self.tracer.start_span(name, context=context, kind=kind, attributes=attributes)
        except Exception as exc:
            _contained(f"start span {name!r}", exc)
            return trace.INVALID_SPAN

    @staticmethod
    def attach(span: Span | None) -> object:
        """Make `span` the current span (the parent of spans started until `detach`)."""
        if span is None:
            return None
        try:
            return otel_context.attach(trace.set_span_in_context(span))
        except Exception as exc:
            _contained("make a span current", exc)
            return None

    @staticmethod
    def detach(token: Any) -> None:
        if token is not None:
            try:
                otel_context.detach(token)
            except Exception as exc:
                _contained("restore the current span", exc)

    @staticmethod
    def end(
        span: Span,
        attributes: Attributes | None = None,
        *,
        error: BaseException | None = None,
        error_type: str = "",
        reason: str = "",
    ) -> None:
        """Set `attributes`, the ERROR status for an `error` (or an `error_type` with its
        `reason`), and end `span`."""
        try:
            if attributes:
                span.set_attributes(attributes)
            if error is not None:
                error_type = error_type or type(error).__name__
                reason = reason or str(error)
                span.record_exception(error)
            if error_type:
                span.set_attribute("error.type", error_type)
                span.set_status(Status(StatusCode.ERROR, reason or None))
            span.end()
        except Exception as exc:
            _contained("end a span", exc)


def _contained(what: str, exc: Exception) -> None:
    logger.warning(
        "tracing: could not %s (the agent goes on): %s: %s", what, type(exc).__name__, exc
    )


# -- hooks, wrapped -------------------------------------------------------------------------------


class _Traced(Hook):
    """A hook wrapped so that each call of it is a span; it decides exactly as the hook.

    Subclasses are made per hook class (`_wrapper_class`), named as it and overriding the
    same events, so that the runner's messages and rules see the hook itself."""

    def __init__(self, inner: Hook, spans: _Spans) -> None:
        self.inner = inner
        self.spans = spans
        self.hook_name = type(inner).__name__

    def __repr__(self) -> str:
        return f"traced({self.inner!r})"


def _tool_attributes(call: ToolCall | ToolResult) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {"gen_ai.tool.name": call.name}
    if call.id:
        attributes["gen_ai.tool.call.id"] = call.id
    if call.server_name:
        attributes["antigravity.tool.server"] = call.server_name
    return attributes


def _decision(result: object, of: str = "hook") -> dict[str, AttributeValue]:
    """`antigravity.{of}.decision` (allow, deny or rewrite), and a denial's reason."""
    if not isinstance(result, HookResult):
        return {}
    if not result.allow:
        return {f"antigravity.{of}.decision": "deny", f"antigravity.{of}.reason": result.message}
    return {f"antigravity.{of}.decision": "allow" if result.args is None else "rewrite"}


def _traced_event(event: str) -> Callable[..., Awaitable[Any]]:
    of_tool = event in ("pre_tool_call", "post_tool_call")

    async def method(self: _Traced, *args: Any) -> Any:
        attributes: dict[str, AttributeValue] = {
            "antigravity.hook.name": self.hook_name,
            "antigravity.hook.event": event,
        }
        if of_tool:
            attributes.update(_tool_attributes(args[0]))
        spans = self.spans
        span = spans.start(f"{event} {self.hook_name}", attributes)
        token = spans.attach(span)
        try:
            result = await getattr(self.inner, event)(*args)
        except BaseException as exc:
            spans.detach(token)
            spans.end(span, error=exc)
            raise
        spans.detach(token)
        spans.end(span, _decision(result))
        return result

    method.__name__ = method.__qualname__ = event
    return method


async def _policy_decision(self: _Traced, tool_call: ToolCall) -> HookResult:
    """The enforcer's pre_tool_call, as a span saying which rule decided and how."""
    enforcer = self.inner
    assert isinstance(enforcer, PolicyEnforcer)
    attributes: dict[str, AttributeValue] = {
        **_tool_attributes(tool_call),
        "antigravity.policy.mode": enforcer.mode,
    }
    span = self.spans.start(f"policy {tool_call.qualified_name}", attributes)
    try:
        result, decision = await enforcer.decide(tool_call)
    except BaseException as exc:
        self.spans.end(span, error=exc)
        raise
    outcome: dict[str, AttributeValue] = {
        "antigravity.policy.verdict": "allow" if result.allow else "deny",
        "antigravity.policy.rules_considered": len(decision.trace),
        "antigravity.policy.latency_us": decision.elapsed_ns / 1000,
    }
    if decision.policy is not None and decision.decision is not None:
        outcome["antigravity.policy.rule"] = decision.policy.label
        outcome["antigravity.policy.rule_decision"] = decision.decision.value
    if decision.bucket is not None:
        outcome["antigravity.policy.bucket"] = decision.bucket
        outcome["antigravity.policy.bucket_name"] = decision.bucket_name
    if not result.allow:
        outcome["antigravity.policy.reason"] = result.message
    self.spans.end(span, outcome)
    return result


_WRAPPERS: dict[tuple[type[Hook], frozenset[str], bool], type[_Traced]] = {}


def _wrapper_class(hook: Hook) -> type[_Traced]:
    cls = type(hook)
    events = overridden_events(hook)
    # Only the enforcer's own decision loop is reported as a policy decision: a subclass
    # that overrides pre_tool_call is traced as the hook it is.
    policy = isinstance(hook, PolicyEnforcer) and cls.pre_tool_call is PolicyEnforcer.pre_tool_call
    key = (cls, events, policy)
    wrapper = _WRAPPERS.get(key)
    if wrapper is None:
        namespace: dict[str, Any] = {event: _traced_event(event) for event in events}
        if policy:
            namespace["pre_tool_call"] = _policy_decision
        namespace["reviews_rewrites"] = cls.reviews_rewrites
        namespace["__qualname__"] = cls.__qualname__
        namespace["__module__"] = cls.__module__
        wrapper = _WRAPPERS[key] = type(cls.__name__, (_Traced,), namespace)
    return wrapper


def wrap(hook: Hook, spans: _Spans) -> Hook:
    """`hook`, each call of it a span."""
    return _wrapper_class(hook)(hook, spans)


# -- the runner ---------------------------------------------------------------------------------


class TracedHookRunner(HookRunner):
    """A `HookRunner` whose hooks are wrapped (`wrap`) and whose tool-call dispatches are
    grouped under an `execute_tool` span; the agent opens and closes the turn span."""

    def __init__(
        self,
        hooks: Iterable[Hook],
        *,
        tracing: Tracing,
        turn_attributes: Attributes,
        timeout: float | None = None,
        check_rewrite: RewriteCheck = plain_rewrite,
    ) -> None:
        self.spans = _Spans(tracing.tracer)
        self.tracing = tracing
        self.agent_name = tracing.agent_name
        self.turn_attributes = dict(turn_attributes)
        self.turn_span: Span | None = None
        self._tool_spans: dict[str, Span] = {}
        self._turn_error = False
        super().__init__(
            [wrap(hook, self.spans) for hook in hooks],
            timeout=timeout,
            check_rewrite=check_rewrite,
        )

    # -- the turn (the agent calls these) ---------------------------------------------------

    def start_turn(self, conversation_id: str) -> None:
        """Open the turn span, under the caller's current span."""
        self.close_turn()  # a turn left open (never expected) must not leak
        name = f"invoke_agent {self.agent_name}" if self.agent_name else "invoke_agent"
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "invoke_agent",
            **self.turn_attributes,
        }
        if self.agent_name:
            attributes["gen_ai.agent.name"] = self.agent_name
        if conversation_id:
            attributes["gen_ai.conversation.id"] = conversation_id
        self._turn_error = False
        self.tracing.check_provider()
        self.turn_span = self.spans.start(name, attributes, kind=SpanKind.CLIENT)

    def turn_ended(self, ended: TurnEnded, denial: HookResult | None) -> None:
        """Record how the turn ended: its usage, and an error if it was denied or failed
        (as `Agent` raises `TurnDeniedError` / `TurnFailedError` for it)."""
        span = self.turn_span
        if span is None:
            return
        try:
            span.set_attributes(_usage(ended.response))
        except Exception as exc:
            _contained("record the turn's usage", exc)
        if ended.cancelled and denial is not None:
            self._fail_turn("TurnDeniedError", denial.message or "denied by a hook")
        elif ended.error:
            self._fail_turn("TurnFailedError", ended.error)

    def turn_failed(self, error: BaseException) -> None:
        """The turn raised `error` (a timeout, a cancellation, a dead session)."""
        if self.turn_span is not None and not self._turn_error:
            self._turn_error = True
            with contextlib.suppress(Exception):  # record_exception: contained like the rest
                self.turn_span.record_exception(error)
            self._fail_turn(type(error).__name__, str(error))

    def close_turn(self) -> None:
        """End the turn span, and the spans of tool calls that never finished."""
        for tool_span in self._tool_spans.values():
            self.spans.end(tool_span, {"antigravity.tool.finished": False})
        self._tool_spans.clear()
        turn_span, self.turn_span = self.turn_span, None
        if turn_span is not None:
            self.spans.end(turn_span)

    def _fail_turn(self, error_type: str, reason: str) -> None:
        self._turn_error = True
        span = self.turn_span
        assert span is not None
        try:
            span.set_attribute("error.type", error_type)
            span.set_status(Status(StatusCode.ERROR, reason))
        except Exception as exc:
            _contained("record the turn's error", exc)

    # -- dispatch: what the harness's requests call -----------------------------------------

    def subscribed_events(self) -> frozenset[str]:
        """Also post_tool_call, whose request ends a tool call's span."""
        return super().subscribed_events() | {"post_tool_call"}

    async def dispatch(self, event: str, arg: Any = None) -> Any:
        if event == "pre_tool_call" and isinstance(arg, ToolCall):
            return await self._decide_tool_call(arg)
        if event == "post_tool_call" and isinstance(arg, ToolResult):
            return await self._tool_call_done(arg)
        token = self.spans.attach(self.turn_span)
        try:
            return await super().dispatch(event, arg)
        finally:
            self.spans.detach(token)

    async def _decide_tool_call(self, call: ToolCall) -> HookResult:
        """The hooks' decision on `call`, inside its `execute_tool` span (opened here; a
        second decision on the same call, e.g. a confirmation, goes into the same span)."""
        span = self._tool_spans.get(call.id) if call.id else None
        if span is None:
            attributes = {"gen_ai.operation.name": "execute_tool", **_tool_attributes(call)}
            span = self.spans.start(f"execute_tool {call.name}", attributes, self.turn_span)
        token = self.spans.attach(span)
        try:
            result: HookResult = await super().dispatch("pre_tool_call", call)
        except BaseException as exc:
            self._tool_spans.pop(call.id, None)
            self.spans.end(span, error=exc)
            raise
        finally:
            self.spans.detach(token)
        decision = _decision(result, "tool")
        if result.allow and call.id:
            try:
                span.set_attributes(decision)
            except Exception as exc:
                _contained("record a tool call's decision", exc)
            self._tool_spans[call.id] = span  # ended by post_tool_call, or with the turn
        elif result.allow:
            self.spans.end(span, decision)
        else:
            self._tool_spans.pop(call.id, None)
            self.spans.end(span, decision, error_type="denied", reason=result.message)
        return result

    async def _tool_call_done(self, result: ToolResult) -> None:
        span = self._tool_spans.pop(result.id, None) if result.id else None
        token = self.spans.attach(span if span is not None else self.turn_span)
        try:
            await super().dispatch("post_tool_call", result)
        finally:
            self.spans.detach(token)
            if span is not None:
                error = result.error or ""
                self.spans.end(
                    span,
                    {"antigravity.tool.finished": True},
                    error_type="tool_error" if error else "",
                    reason=error,
                )


def _usage(response: ChatResponse) -> dict[str, AttributeValue]:
    """The GenAI usage attributes of a turn (output tokens include the model's thoughts)."""
    attributes: dict[str, AttributeValue] = {
        "gen_ai.response.finish_reasons": [response.stop_reason.value],
    }
    usage = response.usage
    if usage is not None:
        attributes["gen_ai.usage.input_tokens"] = usage.prompt_token_count
        attributes["gen_ai.usage.output_tokens"] = (
            usage.candidates_token_count + usage.thoughts_token_count
        )
        attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cached_content_token_count
        attributes["antigravity.usage.thoughts_tokens"] = usage.thoughts_token_count
    return attributes


def model_attributes(
    model: object, *, served: bool, vertex: bool, default_model: str
) -> dict[str, AttributeValue]:
    """The turn span's model attributes: `gen_ai.request.model` and, for a Gemini model,
    `gen_ai.provider.name` (an OpenAI-compatible endpoint's provider is not known)."""
    name = model if isinstance(model, str) else getattr(model, "model_name", None)
    attributes: dict[str, AttributeValue] = {}
    if isinstance(name, str) and name:
        attributes["gen_ai.request.model"] = name
    elif not served:
        attributes["gen_ai.request.model"] = default_model
    if not served:
        attributes["gen_ai.provider.name"] = "gcp.vertex_ai" if vertex else "gcp.gemini"
    return attributes
