"""The engine: `enforce()` compiles policies into a `PolicyEnforcer` that decides calls.

Evaluation walks nine buckets, highest first (specific / `server/*` / `*`, each as
deny / ask / allow); inside a bucket registration order holds, and the first policy
whose pattern matches and whose predicate holds decides. No match allows. The rules
are indexed by tool name and server at `enforce()` time, so a decision only looks at
the rules that can match the call: its cost does not grow with unrelated rules.

Fail-safe rule: a predicate that raises makes DENY and ASK_USER policies deny and an
APPROVE policy not match, so an error is never more permissive than either value the
predicate could have returned. An ASK_USER handler that raises or times out denies.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import difflib
import functools
import gc
import hashlib
import inspect
import json
import logging
import re
import time
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from pydantic import BaseModel

from ..context import DecisionNote, noting
from ..errors import PolicyError
from ..harness.catalog import INTERNAL_NAMES, TOOLS, Governance
from ..hooks import Hook, being_cancelled
from ..timeouts import is_duration
from ..types import HookResult, ToolCall
from ._rules import (
    BUCKETS,
    Decision,
    McpServerConfig,
    Policy,
    Undecidable,
    _bucket,
    _parse_pattern,
)

Mode: TypeAlias = Literal["enforce", "shadow"]
PolicyLike: TypeAlias = "Policy | Iterable[PolicyLike]"

logger = logging.getLogger("antigravity_sdk.policy")


# -- compilation --------------------------------------------------------------------------

_DOTTED = re.compile(r"[A-Za-z_][\w.]*")

# How a predicate receives the call: nothing to call, the args dict, the ToolCall, a model.
_NONE, _ARGS, _CALL, _MODEL = 0, 1, 2, 3


def _predicate_kind(fn: Callable[..., Any]) -> tuple[int, type[BaseModel] | None]:
    """Decide once, from the first parameter's annotation, what the predicate receives."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins without a signature get the args dict
        return _ARGS, None
    params = list(signature.parameters.values())
    try:
        signature.bind(None)
    except TypeError:
        raise ValueError("the predicate must accept exactly one positional argument") from None
    first = params[0]
    if first.kind is first.VAR_POSITIONAL:
        return _ARGS, None
    annotation: Any = first.annotation
    # Only a string naming a class can turn out to be ToolCall or a model; resolving is slow.
    if isinstance(annotation, str) and _DOTTED.fullmatch(annotation):
        target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else type(fn).__call__
        with contextlib.suppress(Exception):  # unresolvable: keep the raw string (args dict)
            annotation = typing.get_type_hints(target).get(first.name, annotation)
    if isinstance(annotation, type) and issubclass(annotation, ToolCall):
        return _CALL, None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _MODEL, annotation
    return _ARGS, None


def _is_async(fn: Callable[..., Any]) -> bool:
    call = getattr(fn, "__call__", None)  # noqa: B004 - callable objects with async __call__
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)


_RULE_TOOLS: Final = frozenset(
    name for name, spec in TOOLS.items() if spec.governance is Governance.ASKED
)
"""Built-in tools a rule can name: the harness asks before each of them runs."""


def _unmatchable(tool: str, host_tools: frozenset[str], *, rule: bool = True) -> str:
    """Why a rule naming the bare tool `tool` could never match a call, or "". With
    `rule=False`, why no policy ever decides a call of `tool` (`antigravity policy
    explain` refuses such a call with the same words and did-you-mean)."""
    if tool in host_tools:
        return ""
    spec = TOOLS.get(tool)
    if spec is not None:
        if spec.capability is None:  # only the inline-skill lookups: no switch of their own
            fix = "it exists only with inline skills (AgentBuilder.skills); leave those out"
        else:
            fix = (
                f"switch it off instead (leave BuiltinTool.{spec.capability.name} out of "
                f"CapabilitiesConfig.enabled_tools)"
            )
        never = "a rule on it can never fire" if rule else "no policy ever decides a call of it"
        return f"the harness never asks before {tool!r} runs, so {never}; {fix}"
    public = INTERNAL_NAMES.get(tool)
    if public is not None:
        return (
            f"{tool!r} is the harness's internal name; {'rules' if rule else 'policies'} use "
            f"the name the model calls the tool by: {public!r}"
        )
    names = sorted(_RULE_TOOLS | host_tools)
    same = [name for name in names if name.casefold() == tool.casefold()]
    close = same or difflib.get_close_matches(tool, names, n=1, cutoff=0.75)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    where = "a built-in tool" + (" or one of the agent's host-side tools" if host_tools else "")
    never = "the rule could never match" if rule else "no policy could ever decide a call of it"
    return f"no tool is called {tool!r}: it is not {where}, so {never}{hint}"


def why_undecidable(tool: str) -> str:
    """Why no policy could ever decide a call of the built-in tool `tool`, or "" when a
    rule can: the harness never asks before it runs, it is an internal name, or no tool
    has that name (with a did-you-mean). Public so that a tool that evaluates a call a
    user typed (`antigravity policy explain`) refuses it in `enforce()`'s words rather
    than answer ALLOWED for a typo that a catch-all rule would match."""
    return "" if tool in _RULE_TOOLS else _unmatchable(tool, frozenset(), rule=False)


def _invalid(index: int, policy: Policy, problem: str) -> PolicyError:
    """An error naming the policy as its author numbers it: the file's rule for a policy
    `load()` read, else its position (from 1) in the flattened list given to `enforce`."""
    where = policy.origin or f"policy #{index + 1} ({policy.label!r})"
    return PolicyError(f"{where}: {problem}")


class _Rule:
    """A validated policy, with everything the hot path needs precomputed."""

    __slots__ = (
        "_denied",
        "bucket",
        "fn",
        "handler",
        "handler_async",
        "index",
        "is_async",
        "kind",
        "model",
        "policy",
        "result",
    )

    def __init__(
        self,
        index: int,
        policy: Policy,
        mcp_servers: frozenset[str] | None,
        host_tools: frozenset[str],
    ) -> None:
        # Kept lean: enforce() runs this once per rule, and rule sets can be large.
        decision = policy.decision
        if not isinstance(decision, Decision):
            raise _invalid(index, policy, f"decision must be a Decision, got {decision!r}")
        try:
            scope, server = _parse_pattern(policy.tool)
        except ValueError as exc:
            raise _invalid(index, policy, str(exc)) from None
        if scope == 0 and server is None and policy.tool not in _RULE_TOOLS:
            problem = _unmatchable(policy.tool, host_tools)
            if problem:
                raise _invalid(index, policy, problem)
        if server is not None:
            if mcp_servers is None:
                fix = (
                    "pass the file's own on: enforce(rules, rules.mcp_servers), or give the "
                    "whole PolicyFile to AgentBuilder.policies()"
                    if policy.origin
                    else "pass enforce(..., mcp_servers=[...]) (an Agent passes its "
                    ".mcp_server(...)s)"
                )
                raise _invalid(
                    index,
                    policy,
                    f"MCP pattern {policy.tool!r} needs the configured servers: {fix}",
                )
            if server not in mcp_servers:
                raise _invalid(
                    index,
                    policy,
                    f"server {server!r} is not among mcp_servers "
                    f"({', '.join(sorted(mcp_servers)) or 'none'})",
                )
        handler = policy.handler
        if decision is Decision.ASK_USER:
            if handler is None:
                raise _invalid(index, policy, "an ASK_USER policy needs a handler")
            if not callable(handler):
                raise _invalid(index, policy, "the handler is not callable")
        elif handler is not None:
            raise _invalid(index, policy, "a handler only makes sense on an ASK_USER policy")
        timeout = policy.timeout
        if timeout is not None and not is_duration(timeout):
            raise _invalid(
                index, policy, f"timeout must be a positive, finite number, got {timeout!r}"
            )
        self.index = index
        self.policy = policy
        self.bucket = _bucket(scope, decision)
        self.kind, self.model, self.is_async = _NONE, None, False
        self.fn: Callable[[Any], Any] | None = policy.predicate
        if self.fn is not None:
            if not callable(self.fn):
                raise _invalid(index, policy, "the predicate is not callable")
            try:
                self.kind, self.model = _predicate_kind(self.fn)
            except ValueError as exc:
                raise _invalid(index, policy, str(exc)) from None
            self.is_async = _is_async(self.fn)
        self.handler = handler
        self.handler_async = handler is not None and _is_async(handler)
        # Only APPROVE returns straight from the hot loop; DENY and ASK_USER log or ask.
        self.result = HookResult.ALLOWED if decision is Decision.APPROVE else None
        self._denied: HookResult | None = None

    @property
    def denied(self) -> HookResult:
        """The deny (or user-refused) result, built on first use: most rules never deny."""
        if self._denied is None:
            policy = self.policy
            if policy.decision is Decision.DENY:
                message = policy.reason or f"Denied by policy '{policy.label}'."
            else:
                message = policy.reason or f"Denied by policy '{policy.label}': the user refused."
            self._denied = HookResult.denied(message)
        return self._denied

    def apply(self, call: ToolCall) -> Any:
        """Call the predicate (model validation included): its raw return value."""
        fn, kind = self.fn, self.kind
        assert fn is not None
        if kind == _ARGS:
            return fn(call.args)
        if kind == _CALL:
            return fn(call)
        assert self.model is not None
        return fn(self.model.model_validate(call.args))

    async def within(self, call: ToolCall, bound: float) -> bool:
        """The predicate's verdict within `bound` seconds, else TimeoutError; other
        exceptions propagate (the caller applies fail-safe). A sync predicate runs in a
        worker thread, so that a blocking one cannot stall the event loop (and with it the
        deadline). Without a bound the enforcer calls `apply` inline: the fast path.
        """
        loop = asyncio.get_running_loop()
        ends = loop.time() + bound
        deadline = asyncio.timeout_at(ends)
        try:
            async with deadline:
                if self.is_async:
                    value = await self.apply(call)
                else:
                    value = await asyncio.to_thread(self.apply, call)
                if value.__class__ is not bool:
                    value = await _truth(value)
        except TimeoutError:
            if deadline.expired():
                raise TimeoutError(f"no verdict within {bound}s") from None
            raise  # the predicate's own TimeoutError
        except asyncio.CancelledError:
            if being_cancelled():  # e.g. the hook timeout fired first: say what was running
                logger.warning(
                    "policy %r: cancelled while its predicate ran on %s",
                    self.policy.label,
                    call.qualified_name,
                )
            raise
        # Late, even if the timer never got to fire: the predicate swallowed the
        # cancellation, or held the loop (or the GIL) past the deadline.
        if deadline.expired() or loop.time() > ends:
            raise TimeoutError(f"no verdict within {bound}s (its late answer is ignored)")
        return bool(value)


async def _truth(value: object) -> bool:
    if inspect.isawaitable(value):
        value = await value
    return bool(value)


def _describe(exc: BaseException) -> str:
    """`Type: first line` of `exc`, at most 200 characters: deny messages the model reads.

    Not `hooks._describe`, which keeps the whole text (hook failures go to logs)."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    if len(first) > 200:
        first = first[:197] + "..."
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _predicate_failed(rule: _Rule, call: ToolCall, exc: BaseException) -> HookResult | None:
    """Fail-safe: a broken predicate denies for DENY/ASK_USER, does not match for APPROVE."""
    label, what = rule.policy.label, _describe(exc)
    undecidable = isinstance(exc, Undecidable)
    if rule.policy.decision is Decision.APPROVE:
        logger.log(
            logging.INFO if undecidable else logging.WARNING,
            "policy %r: predicate failed on %s (%s); the policy does not match",
            label,
            call.qualified_name,
            what,
        )
        return None
    if undecidable:
        logger.info("policy %r: %s cannot be judged (%s); denying", label, call.name, exc)
        return HookResult.denied(f"Denied by policy '{label}': {exc}.")
    logger.error(
        "policy %r: predicate failed on %s (%s); denying", label, call.qualified_name, what
    )
    return HookResult.denied(f"Denied by policy '{label}': its condition failed ({what}).")


async def _answer(rule: _Rule, call: ToolCall) -> object:
    handler = rule.handler
    assert handler is not None
    if rule.handler_async:
        answer: object = await handler(call)  # type: ignore[misc]
    else:  # a sync handler (e.g. input()) must never block the event loop
        answer = await asyncio.to_thread(handler, call)
    if inspect.isawaitable(answer):
        answer = await answer
    return answer


async def _ask(rule: _Rule, call: ToolCall) -> HookResult:
    """Run an ASK_USER handler; only a `True` answer, given in time, allows."""
    label = rule.policy.label
    timeout = rule.policy.timeout
    deadline = None if timeout is None else asyncio.timeout(timeout)
    try:
        if deadline is None:
            answer = await _answer(rule, call)
        else:
            async with deadline:
                answer = await _answer(rule, call)
            if deadline.expired():  # it swallowed the cancellation: a late answer is none
                raise TimeoutError
    except (Exception, asyncio.CancelledError) as exc:
        if not isinstance(exc, Exception) and being_cancelled():
            raise
        if deadline is not None and deadline.expired():
            logger.error("policy %r: handler timed out after %ss; denying", label, timeout)
            return HookResult.denied(
                f"Denied by policy '{label}': no answer from the user within {timeout}s."
            )
        logger.error("policy %r: handler failed (%s); denying", label, _describe(exc))
        return HookResult.denied(
            f"Denied by policy '{label}': asking the user failed ({_describe(exc)})."
        )
    if answer is True:
        logger.info("policy %r: the user approved %s", label, call.qualified_name)
        return HookResult.ALLOWED
    if answer is not False:
        logger.error(
            "policy %r: handler returned %s, not a bool; denying", label, type(answer).__name__
        )
        return HookResult.denied(
            f"Denied by policy '{label}': its handler returned {type(answer).__name__}, not a bool."
        )
    logger.info("policy %r: the user refused %s", label, call.qualified_name)
    return rule.denied


def _identity(value: object) -> str | None:
    """What identifies a rule's condition or handler across processes: its own text where
    it has one (data), else the module and qualified name of its function or type."""
    if value is None:
        return None
    if inspect.isroutine(value):
        return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', '')}"
    text = repr(value)
    if " at 0x" in text:  # a default repr: an address, different in every process
        kind = type(value)
        return f"{kind.__module__}.{kind.__qualname__}"
    return text


def _flatten(policies: PolicyLike) -> list[Policy]:
    flat: list[Policy] = []

    def walk(item: object) -> None:
        if isinstance(item, Policy):
            flat.append(item)
        elif isinstance(item, Iterable) and not isinstance(item, str | bytes | Mapping):
            for sub in item:
                walk(sub)
        else:
            raise PolicyError(
                f"policy #{len(flat) + 1} is a {type(item).__name__} ({item!r}), not a Policy"
            )

    walk(policies)
    return flat


def _tool_names(tools: Iterable[str]) -> frozenset[str]:
    if isinstance(tools, str):
        raise PolicyError(f"tools takes a list of tool names, not the string {tools!r}")
    names = frozenset(tools)
    bad = [name for name in names if not isinstance(name, str) or not name]
    if bad:
        raise PolicyError(f"tools takes tool names (non-empty strings), got {bad[0]!r}")
    return names


def _server_names(servers: Iterable[McpServerConfig | str] | None) -> frozenset[str] | None:
    if servers is None:
        return None
    if isinstance(servers, str):
        raise PolicyError(f"mcp_servers must be a list, not the string {servers!r}")
    names = set()
    for server in servers:
        name = server if isinstance(server, str) else getattr(server, "name", None)
        if not isinstance(name, str):
            raise PolicyError(f"mcp_servers: expected a server name or config, got {server!r}")
        names.add(name)
    return frozenset(names)


# -- the enforcer ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """One rule `evaluate()` considered: what its predicate (and handler) said, and how long."""

    policy: Policy
    bucket: int
    matched: bool
    outcome: str
    elapsed_ns: int


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    """Why a call is allowed or denied: the deciding policy, its bucket, and the trace.

    `decision` and `policy` are None when no policy matched (the call is allowed).
    """

    tool: str
    allow: bool
    decision: Decision | None
    bucket: int | None
    policy: Policy | None
    message: str
    trace: list[TraceEntry]
    elapsed_ns: int = 0

    @property
    def bucket_name(self) -> str:
        """The deciding bucket in words, e.g. "specific deny"."""
        return BUCKETS[self.bucket] if self.bucket is not None else "no match"

    @property
    def would_ask(self) -> bool:
        """Whether the call would ask the user: `evaluate(call, ask=False)` stopped at an
        ASK_USER rule without calling its handler (`allow` is then False). Public so that
        a report of decisions (`antigravity policy test`) can tell "asks" from "denied"."""
        return self.decision is Decision.ASK_USER and self.message == _NOT_ASKED

    def __str__(self) -> str:
        verdict = "ALLOWED" if self.allow else "DENIED"
        if self.message == _NOT_ASKED:
            verdict = "ASKS THE USER"
        if self.policy is None:
            head = f"{self.tool}: {verdict} (no policy matched; the default allows)"
        else:
            assert self.decision is not None
            head = (
                f"{self.tool}: {verdict} by policy {self.policy.label!r} "
                f"({self.decision.name}, bucket {self.bucket}: {self.bucket_name})"
            )
        lines = [head]
        if self.message:
            lines.append(f"  message: {self.message}")
        lines.append(f"  rules considered: {len(self.trace)} in {self.elapsed_ns / 1000:.1f} µs")
        width = max((len(e.policy.label) for e in self.trace), default=0)
        for i, entry in enumerate(self.trace):
            mark = "  <- decides" if self.policy is not None and i == len(self.trace) - 1 else ""
            lines.append(
                f"    [{entry.bucket} {BUCKETS[entry.bucket]:<14}] "
                f"{entry.policy.label:<{width}}  {entry.outcome}  "
                f"({entry.elapsed_ns / 1000:.1f} µs){mark}"
            )
        return "\n".join(lines)


_NOT_ASKED: Final = "The user would be asked (the handler was not called)."
_NOT_ASKED_RESULT: Final = HookResult.denied(_NOT_ASKED)
_Segments: TypeAlias = tuple[tuple[_Rule, ...], ...]


def _bucket_of(rule: _Rule) -> int:
    return rule.bucket


def _how(rule: _Rule) -> str:
    """How a matching rule matched, as a trace says it."""
    return "predicate true" if rule.kind else "always"


def _note(trace: list[TraceEntry], rule: _Rule, matched: bool, outcome: str, began: int) -> None:
    trace.append(
        TraceEntry(rule.policy, rule.bucket, matched, outcome, time.perf_counter_ns() - began)
    )


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Build large rule tables without cyclic-GC passes rescanning every new rule."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class PolicyEnforcer(Hook):
    """A `Hook` deciding every tool call with a validated, indexed policy set.

    In `mode="shadow"` it evaluates and logs what it would deny (or ask about) but
    allows everything: for rolling a policy set out on a live agent.

    `timeout` bounds each predicate (seconds); a predicate without a verdict in time
    counts as raising (the fail-safe rule). With a timeout, sync predicates run in a
    worker thread so that a blocking one cannot stall the event loop; without one they
    run inline, the fast path. An `Agent` passes its `hook_timeout` here.
    """

    reviews_rewrites = True  # a rewrite by a hook after this one would go unchecked

    def __init__(
        self,
        policies: PolicyLike,
        mcp_servers: Iterable[McpServerConfig | str] | None = None,
        *,
        mode: Mode = "enforce",
        tools: Iterable[str] = (),
        timeout: float | None = None,
    ) -> None:
        if mode not in ("enforce", "shadow"):
            raise PolicyError(f"mode must be 'enforce' or 'shadow', got {mode!r}")
        if timeout is not None and not is_duration(timeout):
            raise PolicyError(f"timeout must be a positive, finite number, got {timeout!r}")
        flat = _flatten(policies)
        servers = _server_names(mcp_servers)
        host_tools = _tool_names(tools)
        with _gc_paused():
            self._compile([_Rule(i, p, servers, host_tools) for i, p in enumerate(flat)])
        self.policies: tuple[Policy, ...] = tuple(flat)
        self.mode: Mode = mode
        self.timeout = timeout
        self._shadow = mode == "shadow"

    @functools.cached_property
    def fingerprint(self) -> str:
        """A content hash of the policy set (32 hex digits): the same rules, in the same
        order and mode, give the same hash in any process. Each rule counts with its
        pattern, decision, name, reason, timeout and condition; a condition that is data
        (a TOML `when`, a command rule, `workspace_only`) by its content, a Python
        function or handler by its module and qualified name. The audit log records it
        on every line that a decision depends on."""
        rules = [
            {
                "tool": p.tool,
                "decision": p.decision.name,
                "name": p.name,
                "reason": p.reason,
                "timeout": p.timeout,
                "when": _identity(p.predicate),
                "handler": _identity(p.handler),
            }
            for p in self.policies
        ]
        canonical = json.dumps([self.mode, rules], sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:32]

    def _compile(self, rules: list[_Rule]) -> None:
        """Index rules by exact name and by server, each list in bucket order."""
        specific: dict[str, list[_Rule]] = {}
        prefix: dict[str, list[_Rule]] = {}
        wildcard: list[_Rule] = []
        for rule in rules:
            if rule.bucket < 3:
                specific.setdefault(rule.policy.tool, []).append(rule)
            elif rule.bucket < 6:
                prefix.setdefault(rule.policy.tool[:-2], []).append(rule)
            else:
                wildcard.append(rule)

        def ordered(group: list[_Rule]) -> tuple[_Rule, ...]:
            # Stable: registration order holds inside a bucket.
            return tuple(group if len(group) == 1 else sorted(group, key=_bucket_of))

        tail = ordered(wildcard)
        tails = {server: ordered(group) + tail for server, group in prefix.items()}
        self._default: _Segments = (tail,)
        self._by_server: dict[str, _Segments] = {s: (t,) for s, t in tails.items()}
        self._by_name: dict[str, _Segments] = {}
        for key, group in specific.items():
            server, slash, _ = key.partition("/")
            self._by_name[key] = (ordered(group), tails.get(server, tail) if slash else tail)

    def __repr__(self) -> str:
        return f"PolicyEnforcer({len(self.policies)} policies, mode={self.mode!r})"

    async def _decide(
        self,
        tool_call: ToolCall,
        trace: list[TraceEntry] | None = None,
        ask: bool = True,
        note: DecisionNote | None = None,
    ) -> HookResult:
        """The one evaluation loop: `pre_tool_call` is this; `evaluate` and `decide` call
        it with a trace. An audit log's `note` gets the deciding rule (a `_Rule`: its
        `policy` and `bucket`) and the policies' own verdict, checked only on the way out.

        With a `trace` every rule considered is recorded in it, the deciding one last (and
        timed), and only predicate and handler failures are logged (`decide` enforces the
        result itself). Without one it enforces: it logs denials, and in shadow mode allows
        what it would deny (or ask about). With `ask` False an ASK_USER match is
        `_NOT_ASKED_RESULT`, its handler not called.
        """
        # `tool_call.qualified_name`, inlined: the property costs 10-25% of a decision on
        # bench_policy's rule sets (measured side by side). Keep the two in step.
        server = tool_call.server_name
        name = f"{server}/{tool_call.name}" if server else tool_call.name
        segments = self._by_name.get(name)
        if segments is None:  # no specific rule: the call's server's rules, or only `*`
            if "/" in name:
                segments = self._by_server.get(name[: name.index("/")], self._default)
            else:
                segments = self._default
        began = 0
        for segment in segments:
            for rule in segment:
                if trace is not None:
                    began = time.perf_counter_ns()
                if rule.kind:
                    try:
                        if self.timeout is not None:  # bounded, sync ones off the loop
                            holds = await rule.within(tool_call, self.timeout)
                        else:
                            holds = rule.apply(tool_call)
                            if rule.is_async:
                                holds = await holds
                            if holds.__class__ is not bool:
                                holds = await _truth(holds)
                    except (Exception, asyncio.CancelledError) as exc:
                        if not isinstance(exc, Exception) and being_cancelled():
                            raise
                        failed = _predicate_failed(rule, tool_call, exc)
                        if trace is not None:
                            end = " -> no match" if failed is None else " -> deny"
                            outcome = f"predicate raised {_describe(exc)}{end}"
                            _note(trace, rule, failed is not None, outcome, began)
                        if failed is None:
                            continue
                        if note is not None:
                            note.rule, note.policy_allow = rule, False
                        if trace is None and self._shadow:
                            return self._shadowed(rule.policy.label, name, failed)
                        return failed
                    if not holds:
                        if trace is not None:
                            _note(trace, rule, False, "predicate false", began)
                        continue
                result = rule.result
                if result is None:  # DENY or ASK_USER: logged, asked, or shadowed
                    result = await self._act(rule, tool_call, name, trace, ask, began)
                    if note is not None:  # shadow mode allows what it would deny or ask
                        note.rule, note.policy_allow = rule, result.allow and not self._shadow
                    return result
                if trace is not None:
                    _note(trace, rule, True, _how(rule), began)
                if note is not None:
                    note.rule, note.policy_allow = rule, True
                return result
        if note is not None:
            note.rule, note.policy_allow = None, True
        return HookResult.ALLOWED

    # Decide `tool_call`: the hot path (no trace, precomputed results). Not a method that
    # awaits `_decide`: that extra coroutine costs 10-30% of a decision on bench_policy.
    pre_tool_call = _decide

    async def _act(
        self,
        rule: _Rule,
        call: ToolCall,
        name: str,
        trace: list[TraceEntry] | None,
        ask: bool,
        began: int,
    ) -> HookResult:
        """A DENY or ASK_USER rule matched (see `_decide`): deny, logged unless traced; ask
        its handler, or report it would; untraced in shadow mode, allow with a warning."""
        how = _how(rule)
        shadow = trace is None and self._shadow
        if rule.policy.decision is Decision.DENY:
            result = rule.denied
            if trace is None and not shadow:
                logger.info("policy %r denied %s", rule.policy.label, name)
        elif shadow or not ask:
            result = _NOT_ASKED_RESULT
            how += " -> would ask the user"
        else:
            result = await _ask(rule, call)
            how += " -> user approved" if result.allow else " -> not approved"
        if trace is not None:
            _note(trace, rule, True, how, began)
        return self._shadowed(rule.policy.label, name, result) if shadow else result

    @staticmethod
    def _shadowed(label: str, name: str, result: HookResult) -> HookResult:
        """Shadow mode: allow what `result` would deny (or ask about), with a warning."""
        if result is _NOT_ASKED_RESULT:
            logger.warning("shadow mode: %s would ask the user (policy %r); allowing", name, label)
        else:
            logger.warning(
                "shadow mode: %s would be denied by policy %r (%s); allowing",
                name,
                label,
                result.message,
            )
        return HookResult.ALLOWED

    async def evaluate(self, tool_call: ToolCall, *, ask: bool = True) -> PolicyDecision:
        """Decide `tool_call` as enforce mode would, recording every rule considered.

        With `ask=False` an ASK_USER policy is reported without calling its handler (the
        decision then does not allow). Shadow mode does not change what this reports.
        """
        _, decision = await self._traced(tool_call, ask)
        return decision

    async def decide(self, tool_call: ToolCall) -> tuple[HookResult, PolicyDecision]:
        """Enforce on `tool_call` exactly as `pre_tool_call` does (shadow mode and logging
        included), and say which rule decided: what tracing reports, and what an audit
        log's note (`context.noting`, when set) gets: the deciding rule, the policies' own
        verdict (before shadow mode) and the time taken. Slower than `pre_tool_call`
        (every rule considered is timed and recorded)."""
        # Shadow mode never asks: as in pre_tool_call, an ASK_USER match is only reported.
        result, decision = await self._traced(tool_call, not self._shadow)
        last = decision.trace[-1] if decision.trace and decision.trace[-1].matched else None
        note = noting.get()
        if note is not None:
            note.policy_ns = decision.elapsed_ns
            note.rule, note.policy_allow = last, result.allow
        if result.allow:
            return result, decision
        label = last.policy.label if last is not None else "?"
        if self._shadow:
            allowed = self._shadowed(label, tool_call.qualified_name, result)
            return allowed, dataclasses.replace(decision, allow=True, message=allowed.message)
        if last is not None and last.policy.decision is Decision.DENY:
            logger.info("policy %r denied %s", label, tool_call.qualified_name)
        return result, decision

    async def _traced(self, tool_call: ToolCall, ask: bool) -> tuple[HookResult, PolicyDecision]:
        """`_decide` with every rule considered recorded, not enforcing (no shadow, no
        denial logged): `evaluate` reports it, `decide` enforces it."""
        trace: list[TraceEntry] = []
        start = time.perf_counter_ns()
        result = await self._decide(tool_call, trace, ask)
        elapsed = time.perf_counter_ns() - start
        last = trace[-1] if trace and trace[-1].matched else None
        return result, PolicyDecision(
            tool=tool_call.qualified_name,
            allow=result.allow,
            decision=last.policy.decision if last else None,
            bucket=last.bucket if last else None,
            policy=last.policy if last else None,
            message=result.message,
            trace=trace,
            elapsed_ns=elapsed,
        )

    def note_decisions(self) -> None:
        """Make this enforcer's `pre_tool_call` note, for an audit log, the rule behind
        each verdict (`decide`). Per instance: enforcers of agents without an audit log
        keep the lean path."""
        vars(self)["pre_tool_call"] = self._decide_noted

    async def _decide_noted(self, tool_call: ToolCall) -> HookResult:
        """`pre_tool_call`, noting the deciding rule, the policies' own verdict and the
        time taken while an audit log's note is set."""
        note = noting.get()
        if note is None:
            return await self._decide(tool_call)
        began = time.perf_counter_ns()
        result = await self._decide(tool_call, note=note)
        note.policy_ns = time.perf_counter_ns() - began
        return result


def enforce(
    policies: PolicyLike,
    mcp_servers: Iterable[McpServerConfig | str] | None = None,
    *,
    mode: Mode = "enforce",
    tools: Iterable[str] = (),
    timeout: float | None = None,
) -> PolicyEnforcer:
    """Validate and compile `policies` (nested lists are flattened) into an enforcer.

    Raises `PolicyError`, naming the policy, for a non-Policy item, an ASK_USER policy
    without handler, a malformed pattern, an MCP pattern whose server is not in
    `mcp_servers` (configs or names), and a rule that could never match: a bare tool name
    that is neither a built-in tool the harness asks about nor one of `tools` (the names
    of host-side tools; an `Agent` passes its own). Predicates are inspected here, once: a
    first parameter annotated `ToolCall` gets the call, a `BaseModel` subclass gets the
    args validated into it, anything else gets the args dict. `timeout` bounds each
    predicate (see `PolicyEnforcer`).
    """
    return PolicyEnforcer(policies, mcp_servers, mode=mode, tools=tools, timeout=timeout)
