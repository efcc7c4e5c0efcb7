"""Host-side tools: schema generation, validation, execution and failure containment."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import threading
from typing import Any, Literal

import pydantic
import pytest

from antigravity_sdk import tools as tools_module
from antigravity_sdk.context import ToolContext
from antigravity_sdk.errors import ToolExecutionError
from antigravity_sdk.tools import FunctionTool, Tool, ToolRunner, tool
from antigravity_sdk.types import ToolCall, ToolResult


class Point(pydantic.BaseModel):
    x: int
    y: int = 0


@tool
def search(
    query: str,
    limit: int = 10,
    mode: Literal["fast", "exact"] = "fast",
    where: Point | None = None,
    context: ToolContext | None = None,
) -> dict[str, Any]:
    """Search the notes for a query.

    Second paragraph, not part of the description.

    Args:
        query: The text to look for,
            across several lines.
        limit (int): At most this many hits.
        context: Injected, never documented to the model.

    Returns:
        The hits.
    """
    return {"query": query, "limit": limit, "mode": mode, "where": where}


def call(name: str, **args: Any) -> ToolCall:
    return ToolCall(name=name, args=args, id=f"id-{name}")


# --- schema -------------------------------------------------------------------------


def test_schema_from_signature_and_docstring() -> None:
    schema = search.parameters_json_schema
    assert search.name == "search"
    assert search.description == "Search the notes for a query."
    assert schema["type"] == "object"
    assert schema["required"] == ["query"]
    props = schema["properties"]
    assert list(props) == ["query", "limit", "mode", "where"]  # no "context"
    assert props["query"] == {
        "type": "string",
        "description": "The text to look for, across several lines.",
    }
    assert props["limit"] == {
        "type": "integer",
        "default": 10,
        "description": "At most this many hits.",
    }
    assert props["mode"]["enum"] == ["fast", "exact"]
    assert props["mode"]["default"] == "fast"
    assert "description" not in props["mode"]
    assert props["where"]["anyOf"][0] == {"$ref": "#/$defs/Point"}
    assert schema["$defs"]["Point"]["required"] == ["x"]
    assert "title" not in schema and "title" not in props["query"]


def test_property_named_title_survives_title_stripping() -> None:
    @tool
    def rename(title: str, default: str = "x") -> str:
        return title

    props = rename.parameters_json_schema["properties"]
    assert list(props) == ["title", "default"]
    assert props["default"] == {"type": "string", "default": "x"}


def test_decorator_with_arguments_overrides_name_and_description() -> None:
    @tool(name="lookup_v2", description="Look it up.")
    def lookup(key: str) -> str:
        """Ignored docstring."""
        return key.upper()

    assert isinstance(lookup, FunctionTool)
    assert (lookup.name, lookup.description) == ("lookup_v2", "Look it up.")
    assert lookup("a") == "A"  # still callable like the function
    assert lookup.__name__ == "lookup"


def test_function_without_docstring_or_annotations() -> None:
    def anything(a, b=2):  # type: ignore[no-untyped-def]
        return [a, b]

    t = FunctionTool(anything)
    assert t.description == ""
    assert t.parameters_json_schema["required"] == ["a"]
    assert t.parameters_json_schema["properties"]["b"] == {"default": 2}


def test_docstring_sections_end_the_args_block() -> None:
    summary, args = tools_module._parse_docstring(
        "Line one\nline two.\n\nArgs:\n    a: first\n    b (int, optional): second\n"
        "        more\n\nRaises:\n    c: not an argument\n"
    )
    assert summary == "Line one line two."
    assert args == {"a": "first", "b": "second more"}


def test_names_that_clash_with_basemodel_attributes() -> None:
    @tool
    def odd(schema: str, model_config: int, json: bool = False, /) -> list[Any]:
        return [schema, model_config, json]

    assert list(odd.parameters_json_schema["properties"]) == ["schema", "model_config", "json"]


async def test_positional_only_parameters_are_passed_positionally() -> None:
    @tool
    def pos(a: int, b: str, /, c: float = 0.5) -> list[Any]:
        return [a, b, c]

    result = await ToolRunner([pos]).run(call("pos", a="1", b="x", c=2))
    assert result.result == [1, "x", 2.0]


@pytest.mark.parametrize(
    ("fn", "kwargs", "match"),
    [
        (lambda x: x, {}, "invalid tool name '<lambda>'"),
        (lambda x: x, {"name": "srv/tool"}, "invalid tool name 'srv/tool'"),
        (lambda x: x, {"name": "a" * 65}, "invalid tool name"),
    ],
)
def test_invalid_names_rejected(fn: Any, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        FunctionTool(fn, **kwargs)


def test_unrepresentable_signatures_fail_at_decoration() -> None:
    def varargs(*items: int) -> None: ...

    def unresolvable(x: NoSuchType) -> None: ...  # type: ignore[name-defined]  # noqa: F821

    def two_contexts(a: ToolContext, b: ToolContext) -> None: ...

    with pytest.raises(TypeError, match=r"\*args"):
        tool(varargs)
    with pytest.raises(TypeError, match="NoSuchType"):
        tool(unresolvable)
    with pytest.raises(TypeError, match="ToolContext twice"):
        tool(two_contexts)
    with pytest.raises(TypeError, match="callable"):
        FunctionTool(42)  # type: ignore[arg-type]


async def test_schema_is_built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    @tool
    def once(n: int) -> int:
        return n

    schema = once.parameters_json_schema

    def boom(*_: Any) -> Any:
        raise AssertionError("schema rebuilt after decoration")

    monkeypatch.setattr(tools_module, "_build_model", boom)
    runner = ToolRunner([once])
    for i in range(3):
        assert (await runner.run(call("once", n=i))).result == i
    assert once.parameters_json_schema is schema


# --- running --------------------------------------------------------------------------


async def test_sync_tool_runs_in_worker_thread_async_tool_on_the_loop() -> None:
    loop_thread = threading.get_ident()

    @tool
    def sync_where() -> int:
        return threading.get_ident()

    @tool
    async def async_where() -> int:
        return threading.get_ident()

    runner = ToolRunner([sync_where, async_where])
    assert (await runner.run(call("sync_where"))).result != loop_thread
    assert (await runner.run(call("async_where"))).result == loop_thread


async def test_blocking_sync_tool_does_not_block_the_loop() -> None:
    release = threading.Event()

    def blocking() -> str:
        release.wait(2)
        return "done"

    runner = ToolRunner([blocking])
    task = asyncio.create_task(runner.run(call("blocking")))
    await asyncio.sleep(0.01)  # the loop is free while the tool blocks its thread
    assert not task.done()
    release.set()
    assert (await task).result == "done"


async def test_args_are_coerced_and_result_is_json_data() -> None:
    runner = ToolRunner([search])
    result = await runner.run(call("search", query="q", limit="5", where={"x": "1"}))
    assert result == ToolResult(
        name="search",
        id="id-search",
        result={"query": "q", "limit": 5, "mode": "fast", "where": {"x": 1, "y": 0}},
    )
    json.dumps(result.result)


async def test_extra_args_are_ignored() -> None:
    result = await ToolRunner([search]).run(call("search", query="q", bogus=1))
    assert result.error is None
    assert result.result["query"] == "q"


async def test_validation_failure_becomes_error_and_tool_is_not_called() -> None:
    called = []

    @tool
    def add(a: int, b: int) -> int:
        called.append(1)
        return a + b

    result = await ToolRunner([add]).run(call("add", a="one"))
    assert result.result is None
    assert result.error is not None
    assert result.error.startswith("invalid arguments for tool 'add': ")
    assert "a: Input should be a valid integer" in result.error
    assert "b: Field required" in result.error
    assert "errors.pydantic.dev" not in result.error
    assert called == []


async def test_exceptions_become_errors(caplog: pytest.LogCaptureFixture) -> None:
    @tool
    async def explode() -> None:
        raise RuntimeError("kaboom")

    @tool
    def refuse(path: str) -> None:
        raise ToolExecutionError(f"{path} is not readable", ToolCall(name="refuse"))

    runner = ToolRunner([explode, refuse])
    with caplog.at_level(logging.WARNING, logger="antigravity_sdk.tools"):
        r1 = await runner.run(call("explode"))
        r2 = await runner.run(call("refuse", path="/x"))
    assert r1.error == "tool 'explode' failed: RuntimeError: kaboom"
    assert r2.error == "tool 'refuse' failed: /x is not readable"
    assert r1.id == "id-explode" and r1.name == "explode"
    assert [r.exc_info is not None for r in caplog.records] == [True]


async def test_non_json_result_becomes_error() -> None:
    @tool
    def weird() -> object:
        return object()

    @tool
    def when() -> dt.date:
        return dt.date(2024, 5, 1)

    runner = ToolRunner([weird, when])
    result = await runner.run(call("weird"))
    assert result.error is not None and "not JSON-serialisable" in result.error
    assert (await runner.run(call("when"))).result == "2024-05-01"


async def test_unknown_tool() -> None:
    runner = ToolRunner([search])
    result = await runner.run(call("nope"))
    assert result.error == "unknown tool 'nope' (host-side tools: search)"
    assert (await ToolRunner().run(call("x"))).error == "unknown tool 'x' (host-side tools: none)"
    # An MCP call is never routed to a host-side tool that happens to share its name.
    mcp = ToolCall(name="search", server_name="srv", args={"query": "q"})
    mcp_result = await runner.run(mcp)
    assert mcp_result.error is not None and "'srv/search'" in mcp_result.error
    assert mcp_result.server_name == "srv"


def test_duplicate_names_rejected() -> None:
    def dup() -> None: ...

    runner = ToolRunner([dup])
    with pytest.raises(ValueError, match="'dup' is already registered"):
        runner.register(tool(dup))
    with pytest.raises(ValueError, match="'dup'"):
        runner.register(FunctionTool(lambda: None, name="dup"))
    assert list(runner.tools) == ["dup"]


async def test_cancellation_propagates() -> None:
    started = asyncio.Event()

    @tool
    async def slow() -> None:
        started.set()
        await asyncio.sleep(10)

    @tool
    async def cancels_itself() -> None:
        raise asyncio.CancelledError

    runner = ToolRunner([slow, cancels_itself])
    task = asyncio.create_task(runner.run(call("slow")))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(asyncio.CancelledError):
        await runner.run(call("cancels_itself"))


async def test_tool_context_is_session_scoped() -> None:
    @tool
    def count(step: int, ctx: ToolContext) -> int:
        total: int = ctx.get_state("total", 0) + step
        ctx.set_state("total", total)
        return total

    @tool
    async def peek(ctx: ToolContext) -> Any:
        return ctx.get_state("total")

    assert "ctx" not in count.parameters_json_schema["properties"]
    assert peek.parameters_json_schema["properties"] == {}
    runner = ToolRunner([count, peek], context=ToolContext("conv-1"))
    assert [(await runner.run(call("count", step=s))).result for s in (1, 2, 3)] == [1, 3, 6]
    assert (await runner.run(call("peek"))).result == 6
    assert runner.context.get_state("total") == 6
    assert runner.context.conversation_id == "conv-1"
    other = ToolRunner([count])
    assert (await other.run(call("count", step=1))).result == 1


class EchoTool:
    """A hand-written `Tool`: no decorator, its own schema."""

    name = "echo"
    description = "Echo the args."
    parameters_json_schema: dict[str, Any] = {"type": "object", "properties": {}}

    async def call(self, args: dict[str, Any], context: ToolContext) -> Any:
        return {"args": args, "same_ctx": context is self.expected}

    expected: ToolContext | None = None


async def test_protocol_tools_and_declarations() -> None:
    echo = EchoTool()
    assert isinstance(echo, Tool)
    assert isinstance(search, Tool)
    assert not isinstance(lambda: None, Tool)
    runner = ToolRunner()
    assert runner.register(echo) is echo
    registered = runner.register(search)
    assert isinstance(registered, FunctionTool)
    echo.expected = runner.context
    result = await runner.run(call("echo", a=1))
    assert result.result == {"args": {"a": 1}, "same_ctx": True}
    decls = runner.declarations()
    assert [(n, d) for n, d, _ in decls] == [
        ("echo", "Echo the args."),
        ("search", "Search the notes for a query."),
    ]
    assert json.loads(decls[1][2]) == search.parameters_json_schema
    with pytest.raises(TypeError):
        runner.tools["x"] = echo  # type: ignore[index]
