"""HookContext scopes, current_context() and thread-safe registration (docs/api.md: HookContext)."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from typing import Any

import pytest

from antigravity_sdk import (
    AskQuestionEntry,
    ChatResponse,
    Hook,
    HookContext,
    HookResult,
    HookRunner,
    QuestionHookResult,
    ToolCall,
    ToolContext,
    ToolExecutionError,
    ToolResult,
    current_context,
)

# -- HookContext ----------------------------------------------------------------------------


def test_get_walks_up_and_set_is_local() -> None:
    session = HookContext()
    turn = session.child()
    op = turn.child()
    assert not session.has_parent() and session.parent is None
    assert turn.has_parent() and turn.parent is session
    assert op.parent is turn

    session.set("user", "ada")
    session.set("level", "session")
    turn.set("level", "turn")  # shadows
    op.set("op_only", 1)

    assert op.get("user") == "ada"  # two levels up
    assert op.get("level") == "turn"  # nearest wins
    assert session.get("level") == "session"  # never mutated by the child's set
    assert turn.get("op_only") is None  # a parent never sees a child's keys
    assert session.get("op_only", "missing") == "missing"
    assert op.get("absent", 7) == 7


def test_a_stored_none_or_falsy_value_is_found_not_defaulted() -> None:
    parent = HookContext()
    parent.set("k", "parent")
    child = parent.child()
    child.set("k", None)
    child.set("zero", 0)
    assert child.get("k", "default") is None
    assert child.get("zero", 5) == 0


def test_explicit_parent_and_siblings_are_isolated() -> None:
    root = HookContext()
    a = HookContext(root)
    b = root.child()
    a.set("x", 1)
    assert a.parent is root
    assert b.get("x") is None
    root.set("x", 0)
    assert b.get("x") == 0 and a.get("x") == 1


def test_tool_context_is_a_flat_separate_store() -> None:
    tools = ToolContext("conv-1")
    assert tools.conversation_id == "conv-1"
    assert tools.get_state("k") is None
    assert tools.get_state("k", 3) == 3
    tools.set_state("k", {"v": 1})
    assert tools.get_state("k") == {"v": 1}
    assert not hasattr(tools, "get")  # not a HookContext: hooks and tools do not share


# -- current_context() ----------------------------------------------------------------------


def test_current_context_outside_a_dispatch_raises() -> None:
    with pytest.raises(LookupError):
        current_context()


async def test_current_context_outside_a_dispatch_raises_inside_a_loop() -> None:
    runner = HookRunner([Hook()])
    await runner.dispatch_session_start()
    with pytest.raises(LookupError):
        current_context()


class Recorder(Hook):
    """Records current_context() for every event."""

    def __init__(self) -> None:
        self.seen: dict[str, list[HookContext]] = {}

    def _note(self, event: str) -> HookContext:
        ctx = current_context()
        self.seen.setdefault(event, []).append(ctx)
        return ctx

    async def on_session_start(self) -> None:
        self._note("on_session_start")

    async def on_session_end(self) -> None:
        self._note("on_session_end")

    async def pre_turn(self) -> HookResult:
        self._note("pre_turn")
        return HookResult.allowed()

    async def post_turn(self, response: ChatResponse) -> None:
        self._note("post_turn")

    async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
        self._note("pre_tool_call").set("call", tool_call.id)
        return HookResult.allowed()

    async def post_tool_call(self, result: ToolResult) -> None:
        self._note("post_tool_call")

    async def on_tool_error(self, error: Exception) -> tuple[HookResult, Any | None]:
        self._note("on_tool_error")
        return HookResult(allow=False), None

    async def on_interaction(self, questions: Any) -> QuestionHookResult | None:
        self._note("on_interaction")
        return None

    async def on_compaction(self, summary: str) -> None:
        self._note("on_compaction")


async def test_each_event_sees_its_scope() -> None:
    rec = Recorder()
    runner = HookRunner([rec])
    session = runner.session
    await runner.dispatch_session_start()
    turn = runner.begin_turn("hello there")
    await runner.dispatch_pre_turn()
    call = ToolCall(name="view_file", id="c1")
    await runner.dispatch_pre_tool_call(call)
    await runner.dispatch_on_tool_error(ToolExecutionError("failed", call))
    await runner.dispatch_post_tool_call(ToolResult(name="view_file", id="c1"))
    await runner.dispatch_interaction([AskQuestionEntry(question="?")])
    await runner.dispatch_on_compaction("summary")
    await runner.dispatch_post_turn(ChatResponse(text="bye"))
    await runner.dispatch_session_end()

    s = rec.seen
    assert s["on_session_start"] == [session]
    assert s["on_session_end"] == [session]
    assert s["on_compaction"] == [session]
    assert s["on_interaction"] == [session]
    assert s["pre_turn"] == [turn] and s["post_turn"] == [turn]
    assert turn.parent is session
    assert turn.get("prompt") == "hello there"
    assert session.get("prompt") is None  # the prompt lives in the turn only
    op = s["pre_tool_call"][0]
    assert op.parent is turn
    # pre, on_tool_error and post of one tool call share one operation context
    assert s["on_tool_error"] == [op] and s["post_tool_call"] == [op]
    assert op.get("call") == "c1" and op.get("prompt") == "hello there"
    assert turn.get("call") is None and session.get("call") is None


async def test_pre_turn_without_begin_turn_opens_a_turn() -> None:
    rec = Recorder()
    runner = HookRunner([rec])
    await runner.dispatch_pre_turn()
    turn = rec.seen["pre_turn"][0]
    assert turn is not runner.session and turn.parent is runner.session
    assert turn.get("prompt") is None
    await runner.dispatch_post_turn(ChatResponse())
    assert rec.seen["post_turn"] == [turn]


async def test_each_turn_gets_a_fresh_context_and_fresh_operations() -> None:
    rec = Recorder()
    runner = HookRunner([rec])
    first = runner.begin_turn("one")
    await runner.dispatch_pre_tool_call(ToolCall(name="t", id="same-id"))
    await runner.dispatch_post_turn(ChatResponse())
    second = runner.begin_turn("two")
    await runner.dispatch_pre_turn()
    await runner.dispatch_pre_tool_call(ToolCall(name="t", id="same-id"))
    assert first is not second
    assert rec.seen["pre_turn"] == [second]
    assert second.get("prompt") == "two" and first.get("prompt") == "one"
    op1, op2 = rec.seen["pre_tool_call"]
    assert op1 is not op2  # an id reused in a later turn is a new operation
    assert op1.parent is first and op2.parent is second


async def test_closing_an_earlier_turn_late_leaves_the_next_turn_open() -> None:
    # A turn's clean-up can run after the next turn began (an async generator closed by
    # the garbage collector): ending the old scope must not end the new one.
    rec = Recorder()
    runner = HookRunner([rec])
    first = runner.begin_turn("one")
    second = runner.begin_turn("two")
    runner.end_turn(first)
    await runner.dispatch_pre_turn()
    assert rec.seen["pre_turn"] == [second]
    runner.end_turn(second)
    await runner.dispatch_pre_turn()
    assert rec.seen["pre_turn"][1] not in (first, second)


async def test_different_calls_get_different_operation_contexts() -> None:
    rec = Recorder()
    runner = HookRunner([rec])
    turn = runner.begin_turn("p")
    await runner.dispatch_pre_tool_call(ToolCall(name="a", id="1"))
    await runner.dispatch_pre_tool_call(ToolCall(name="b", id="2"))
    await runner.dispatch_post_tool_call(ToolResult(name="b", id="2"))
    await runner.dispatch_post_tool_call(ToolResult(name="a", id="1"))
    pre1, pre2 = rec.seen["pre_tool_call"]
    post2, post1 = rec.seen["post_tool_call"]
    assert pre1 is not pre2
    assert post1 is pre1 and post2 is pre2
    assert pre1.get("call") == "1" and pre2.get("call") == "2"
    assert pre1.parent is turn and pre2.parent is turn


async def test_a_post_only_hook_still_gets_an_operation_context() -> None:
    seen: list[HookContext] = []

    class PostOnly(Hook):
        async def post_tool_call(self, result: ToolResult) -> None:
            seen.append(current_context())

    runner = HookRunner([PostOnly()])
    turn = runner.begin_turn("p")
    assert await runner.dispatch_pre_tool_call(ToolCall(name="a", id="1")) == HookResult()
    await runner.dispatch_post_tool_call(ToolResult(name="a", id="1"))
    assert seen[0].parent is turn


async def test_current_context_is_restored_after_each_dispatch() -> None:
    rec = Recorder()
    runner = HookRunner([rec])
    outer = HookContext()
    from antigravity_sdk.context import _current

    token = _current.set(outer)
    try:
        await runner.dispatch_pre_tool_call(ToolCall(name="a", id="1"))
        assert current_context() is outer
        await runner.dispatch_session_start()
        assert current_context() is outer
    finally:
        _current.reset(token)
    with pytest.raises(LookupError):
        current_context()


async def test_current_context_is_restored_after_a_failing_hook() -> None:
    class Fails(Hook):
        async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
            raise RuntimeError("no")

        async def post_turn(self, response: ChatResponse) -> None:
            raise RuntimeError("no")

    runner = HookRunner([Fails()])
    assert (await runner.dispatch_pre_tool_call(ToolCall(name="a"))).allow is False
    await runner.dispatch_post_turn(ChatResponse())
    with pytest.raises(LookupError):
        current_context()


async def test_concurrent_dispatches_never_see_each_others_operation_context() -> None:
    """Two tasks interleave at awaits inside their hooks; each sees its own context."""
    both_inside = asyncio.Barrier(2)
    seen: dict[str, list[Any]] = {"a": [], "b": []}

    class Interleaving(Hook):
        async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
            mine = current_context()
            mine.set("owner", tool_call.id)
            await both_inside.wait()  # both dispatches are now mid-hook
            for _ in range(5):
                await asyncio.sleep(0)
                ctx = current_context()
                seen[tool_call.id].append((ctx is mine, ctx.get("owner")))
            return HookResult.allowed()

        async def post_tool_call(self, result: ToolResult) -> None:
            await both_inside.wait()
            seen[result.id].append(("post", current_context().get("owner")))

    runner = HookRunner([Interleaving()])
    runner.begin_turn("p")
    await asyncio.gather(
        runner.dispatch_pre_tool_call(ToolCall(name="t", id="a")),
        runner.dispatch_pre_tool_call(ToolCall(name="t", id="b")),
    )
    await asyncio.gather(
        runner.dispatch_post_tool_call(ToolResult(name="t", id="b")),
        runner.dispatch_post_tool_call(ToolResult(name="t", id="a")),
    )
    assert seen["a"] == [(True, "a")] * 5 + [("post", "a")]
    assert seen["b"] == [(True, "b")] * 5 + [("post", "b")]


async def test_concurrent_turn_and_session_dispatches_are_isolated() -> None:
    gate = asyncio.Barrier(2)
    seen: list[tuple[str, HookContext, HookContext]] = []

    class H(Hook):
        async def on_compaction(self, summary: str) -> None:
            before = current_context()
            await gate.wait()
            await asyncio.sleep(0)
            seen.append(("compaction", before, current_context()))

        async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
            before = current_context()
            await gate.wait()
            await asyncio.sleep(0)
            seen.append(("pre", before, current_context()))
            return HookResult.allowed()

    runner = HookRunner([H()])
    runner.begin_turn("p")
    await asyncio.gather(
        runner.dispatch_on_compaction("s"), runner.dispatch_pre_tool_call(ToolCall(name="x"))
    )
    assert {kind for kind, _, _ in seen} == {"compaction", "pre"}
    for kind, before, after in seen:
        assert before is after
        assert (before is runner.session) == (kind == "compaction")


# -- thread safety --------------------------------------------------------------------------


async def test_register_and_unregister_from_threads_during_dispatch() -> None:
    """Threads churn registrations while the loop dispatches; every dispatch is consistent.

    Each thread keeps at most one of its hooks registered at a time (unregister the old,
    then register the next), so any snapshot holds at most one hook per thread, in
    registration order; a dispatch reading a live, changing list would break that.
    """
    n_threads, per_thread = 4, 300
    stop = threading.Event()
    errors: list[BaseException] = []
    unregister_results: list[bool] = []
    runner = HookRunner()

    class Sentinel(Hook):
        async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
            tool_call.args["trace"].append(("sentinel", -1))
            time.sleep(0)  # noqa: ASYNC251 - release the GIL: threads run mid-dispatch
            return HookResult.allowed()

    class Churn(Hook):
        def __init__(self, thread: int, seq: int) -> None:
            self.key = (thread, seq)

        async def pre_tool_call(self, tool_call: ToolCall) -> HookResult:
            tool_call.args["trace"].append(self.key)
            time.sleep(0)  # noqa: ASYNC251 - release the GIL on purpose
            await asyncio.sleep(0)
            return HookResult.allowed()

    def churn(thread: int) -> None:
        try:
            current: Churn | None = None
            for seq in range(per_thread):
                if stop.is_set():
                    break
                if current is not None:
                    unregister_results.append(runner.unregister(current))
                current = Churn(thread, seq)
                runner.register(current)
                time.sleep(0)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    runner.register(Sentinel())
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    threads = [threading.Thread(target=churn, args=(i,)) for i in range(n_threads)]
    traces: list[list[tuple[Any, int]]] = []
    try:
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads) or len(traces) < 50:
            call = ToolCall(name="probe", args={"trace": []})
            result = await runner.dispatch_pre_tool_call(call)
            assert result == HookResult(allow=True), result
            traces.append(call.args["trace"])
            await asyncio.sleep(0)
    finally:
        stop.set()
        sys.setswitchinterval(old_interval)
        for t in threads:
            t.join()

    assert not errors, errors
    assert all(unregister_results)
    assert len(runner.hooks) == 1 + n_threads  # the sentinel and each thread's last hook
    churned = 0
    for trace in traces:
        assert trace[0] == ("sentinel", -1)  # first registered, always called first
        threads_seen = [key[0] for key in trace[1:]]
        assert len(threads_seen) == len(set(threads_seen)), trace  # ≤ 1 hook per thread
        churned += len(trace) - 1
    assert churned > 0  # the threads' hooks were actually dispatched


def test_concurrent_register_keeps_every_hook() -> None:
    runner = HookRunner()
    hooks = [[Hook() for _ in range(200)] for _ in range(4)]

    def add(batch: list[Hook]) -> None:
        for h in batch:
            runner.register(h)

    threads = [threading.Thread(target=add, args=(b,)) for b in hooks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    registered = runner.hooks
    assert len(registered) == 800
    assert {id(h) for h in registered} == {id(h) for b in hooks for h in b}
    for batch in hooks:  # each thread's hooks keep their relative order
        positions = [registered.index(h) for h in batch]
        assert positions == sorted(positions)
