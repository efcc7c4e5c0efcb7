"""Host-side tools: the `Tool` protocol, the `@tool` decorator and the `ToolRunner`.

A host-side tool runs in this process when the model calls it. Any object with `name`,
`description`, `parameters_json_schema` and `async call(args, context)` is a `Tool`; a
plain function (sync or async) becomes one through `@tool` or `ToolRunner.register`:

* the JSON schema comes from the signature via a pydantic model, built once at
  decoration time so a bad signature fails at startup, not in the middle of a session;
* the description is the docstring's first paragraph; per-parameter descriptions come
  from a Google-style ``Args:`` section;
* a parameter annotated `ToolContext` receives the runner's session-scoped context and
  is left out of the schema;
* arguments are validated and coerced through the model before the call; arguments the
  schema does not name are ignored (models sometimes add some);
* a sync function runs in a worker thread (`asyncio.to_thread`) so it never blocks the
  event loop. A thread cannot be interrupted: cancelling the call stops waiting for it,
  not the function itself.

Results go to the harness as JSON, so `ToolRunner` converts them with
`pydantic_core.to_jsonable_python` (models, dataclasses, datetimes... become JSON data)
and reports a value it cannot convert as an error. The connection layer sends a dict as
is and wraps any other value as ``{"result": value}``.

`ToolRunner.run` never raises for a tool's failure: an unknown tool, invalid arguments
or an exception become `ToolResult(error=...)` with a message the model can act on.
Cancellation (`asyncio.CancelledError`) always propagates.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import logging
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import (
    Any,
    Generic,
    NamedTuple,
    ParamSpec,
    Protocol,
    TypeVar,
    overload,
    runtime_checkable,
)

import pydantic
import pydantic_core

from .context import ToolContext
from .errors import ConfigurationError, ToolExecutionError
from .types import ToolCall, ToolResult

__all__ = ["FunctionTool", "Tool", "ToolRunner", "tool"]

logger = logging.getLogger("antigravity_sdk.tools")

P = ParamSpec("P")
R = TypeVar("R")

# What both Gemini and OpenAI-style function calling accept; no "/", which would read as
# an MCP "server/tool" name to policies.
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
_SECTION_RE = re.compile(r"^(\w[\w ]*):\s*$")
_ARGS_SECTIONS = frozenset({"Args", "Arguments", "Parameters", "Params"})
_ARG_LINE_RE = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


@runtime_checkable
class Tool(Protocol):
    """A host-side tool the model can call.

    `parameters_json_schema` is a JSON schema of type ``object`` describing `args`.
    `call` receives the arguments as the model sent them and the runner's session-scoped
    `ToolContext`; its return value must be JSON-serialisable.
    """

    name: str
    description: str
    parameters_json_schema: dict[str, Any]

    async def call(self, args: dict[str, Any], context: ToolContext) -> Any: ...


class _InvalidArguments(Exception):
    """Arguments failed validation; kept apart from errors raised inside the tool."""


class FunctionTool(Generic[P, R]):
    """A `Tool` made from a plain function; still callable like the function itself."""

    name: str
    description: str
    parameters_json_schema: dict[str, Any]
    __name__: str  # copied from the function, like functools.wraps does

    def __init__(
        self,
        fn: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"a tool must be callable, got {fn!r}")
        tool_name = name if name is not None else getattr(fn, "__name__", None)
        if not isinstance(tool_name, str) or not _NAME_RE.match(tool_name):
            raise ConfigurationError(
                f"invalid tool name {tool_name!r}: use 1-64 letters, digits, '_' or '-', "
                "starting with a letter or '_' (pass name=... for lambdas and partials)"
            )
        self.fn = fn
        self.name = tool_name
        summary, arg_docs = _parse_docstring(inspect.getdoc(fn) or "")
        self.description = description if description is not None else summary
        self._is_async = _is_async_callable(fn)
        sig = _build_model(fn, tool_name, arg_docs)
        self._model = sig.model
        self._fields = sig.fields
        self._positional = sig.positional
        self._context_param = sig.context_param
        self.parameters_json_schema = sig.schema
        functools.update_wrapper(self, fn, updated=())  # keep our own attributes

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the underlying function directly, with no validation."""
        return self.fn(*args, **kwargs)

    async def call(self, args: dict[str, Any], context: ToolContext) -> Any:
        """Validate `args`, inject `context` if asked for, and run the function."""
        try:
            model = self._model.model_validate(args)
        except pydantic.ValidationError as exc:
            raise _InvalidArguments(_format_validation_error(exc)) from None
        values = {param: getattr(model, field) for field, param in self._fields.items()}
        if self._context_param is not None:
            values[self._context_param] = context
        positional = [values.pop(param) for param in self._positional]
        if self._is_async:
            return await typing.cast(Any, self.fn)(*positional, **values)
        return await asyncio.to_thread(typing.cast(Any, self.fn), *positional, **values)

    def __repr__(self) -> str:
        return f"FunctionTool({self.name!r})"


@overload
def tool(fn: Callable[P, R], /) -> FunctionTool[P, R]: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...
def tool(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> FunctionTool[P, R] | Callable[[Callable[P, R]], FunctionTool[P, R]]:
    """Turn a function into a `Tool`: bare ``@tool`` or ``@tool(name=..., description=...)``.

    The schema is built here, once, so signature problems surface at import time.
    """
    if fn is not None:
        return FunctionTool(fn, name=name, description=description)

    def decorate(f: Callable[P, R]) -> FunctionTool[P, R]:
        return FunctionTool(f, name=name, description=description)

    return decorate


class ToolRunner:
    """Runs host-side tools by name, turning every failure into a `ToolResult` error.

    Holds one `ToolContext` for the session; tools that ask for it share its state.
    """

    def __init__(
        self,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        *,
        context: ToolContext | None = None,
    ) -> None:
        self._tools: dict[str, Tool] = {}
        self.context = context if context is not None else ToolContext()
        for t in tools:
            self.register(t)

    @property
    def tools(self) -> Mapping[str, Tool]:
        """The registered tools by name, in registration order (read-only view)."""
        return types.MappingProxyType(self._tools)

    def register(self, tool_or_fn: Tool | Callable[..., Any]) -> Tool:
        """Register a `Tool` or a plain function; returns the `Tool` that was registered.

        Raises `ValueError` when a tool of that name is already registered: two tools with
        one name would make the model's calls ambiguous.
        """
        t = tool_or_fn if isinstance(tool_or_fn, Tool) else FunctionTool(tool_or_fn)
        if t.name in self._tools:
            raise ConfigurationError(f"a tool named {t.name!r} is already registered")
        self._tools[t.name] = t
        return t

    def declarations(self) -> list[tuple[str, str, str]]:
        """``(name, description, json_schema_str)`` per tool, for the harness config."""
        return [
            (t.name, t.description, json.dumps(t.parameters_json_schema))
            for t in self._tools.values()
        ]

    async def run(self, tool_call: ToolCall) -> ToolResult:
        """Run the tool `tool_call` names. Never raises, except `CancelledError`."""
        name = tool_call.name

        def fail(message: str) -> ToolResult:
            return ToolResult(
                name=name, id=tool_call.id, error=message, server_name=tool_call.server_name
            )

        t = None if tool_call.server_name else self._tools.get(name)
        if t is None:
            known = ", ".join(self._tools) or "none"
            return fail(f"unknown tool {tool_call.qualified_name!r} (host-side tools: {known})")
        try:
            value = await t.call(dict(tool_call.args), self.context)
        except _InvalidArguments as exc:
            return fail(f"invalid arguments for tool {name!r}: {exc}")
        except ToolExecutionError as exc:
            # The tool chose to report a failure: its message is the whole story.
            logger.debug("tool %r reported an error: %s", name, exc.message)
            return fail(f"tool {name!r} failed: {exc.message}")
        except Exception as exc:
            logger.warning("tool %r raised", name, exc_info=True)
            return fail(f"tool {name!r} failed: {type(exc).__name__}: {exc}")
        try:
            result = pydantic_core.to_jsonable_python(value)
        except pydantic_core.PydanticSerializationError as exc:
            return fail(f"tool {name!r} returned a value that is not JSON-serialisable: {exc}")
        return ToolResult(
            name=name, id=tool_call.id, result=result, server_name=tool_call.server_name
        )


class _Signature(NamedTuple):
    model: type[pydantic.BaseModel]
    schema: dict[str, Any]
    fields: dict[str, str]  # model field -> parameter name
    positional: list[str]  # positional-only parameters, in order
    context_param: str | None  # the parameter that receives the ToolContext


def _is_async_callable(fn: Any) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
    )


def _is_tool_context(hint: Any) -> bool:
    if hint is ToolContext:
        return True
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return len(args) == 1 and args[0] is ToolContext
    return False


def _build_model(fn: Callable[..., Any], tool_name: str, arg_docs: dict[str, str]) -> _Signature:
    """Read `fn`'s signature into an arguments model and its JSON schema.

    Fields get synthetic names with the parameter name as alias, so parameters such as
    ``schema`` or ``model_x`` cannot clash with `BaseModel`'s own attributes.
    """
    try:
        # eval_str resolves `from __future__ import annotations` strings in the function's
        # own module; it also sees through partials and callable objects.
        signature = inspect.signature(fn, eval_str=True)
    except (NameError, SyntaxError) as exc:
        raise TypeError(
            f"cannot resolve the type hints of tool {tool_name!r}: {exc} "
            "(types used in annotations must be importable from the function's module)"
        ) from None
    except (TypeError, ValueError) as exc:
        raise TypeError(f"cannot read the signature of tool {tool_name!r}: {exc}") from None

    definitions: dict[str, Any] = {}
    fields: dict[str, str] = {}
    positional: list[str] = []
    context_param: str | None = None
    for index, param in enumerate(signature.parameters.values()):
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(
                f"tool {tool_name!r}: *args and **kwargs cannot be described by a JSON "
                f"schema (parameter {param.name!r})"
            )
        hint = Any if param.annotation is param.empty else param.annotation
        if _is_tool_context(hint):
            if context_param is not None:
                raise TypeError(f"tool {tool_name!r} asks for ToolContext twice")
            context_param = param.name
            if param.kind is param.POSITIONAL_ONLY:
                positional.append(param.name)
            continue
        default = ... if param.default is param.empty else param.default
        field_name = f"arg{index}"
        definitions[field_name] = (
            hint,
            pydantic.Field(default, alias=param.name, description=arg_docs.get(param.name)),
        )
        fields[field_name] = param.name
        if param.kind is param.POSITIONAL_ONLY:
            positional.append(param.name)

    try:
        model = pydantic.create_model(
            f"{tool_name}_arguments",
            **definitions,
        )
        schema = _strip_titles(model.model_json_schema())
    except Exception as exc:
        raise TypeError(
            f"tool {tool_name!r}: its parameters cannot be described as a JSON schema: {exc}"
        ) from None
    return _Signature(
        typing.cast(type[pydantic.BaseModel], model), schema, fields, positional, context_param
    )


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph, and the descriptions of a Google-style ``Args:`` section."""
    lines = doc.splitlines()
    summary: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION_RE.match(line):
            break
        summary.append(line.strip())

    arg_docs: dict[str, str] = {}
    in_args = False
    entry_indent: int | None = None
    current: str | None = None
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        header = _SECTION_RE.match(line)
        if header and indent == 0:
            in_args = header.group(1) in _ARGS_SECTIONS
            entry_indent = current = None
            continue
        if not in_args or not stripped:
            continue
        if indent == 0:  # unindented prose ends the section
            in_args = False
            continue
        if entry_indent is None:
            entry_indent = indent
        match = _ARG_LINE_RE.match(stripped)
        if indent <= entry_indent and match:
            current = match.group(1)
            arg_docs[current] = match.group(2).strip()
        elif current is not None:
            arg_docs[current] = f"{arg_docs[current]} {stripped}".strip()
    return " ".join(summary), arg_docs


def _format_validation_error(exc: pydantic.ValidationError) -> str:
    """One line per problem, without pydantic's documentation URLs (the model reads it)."""
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


_NO_RECURSE = frozenset({"default", "const", "enum", "examples"})
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties"})


def _strip_titles(schema: Any) -> Any:
    """Drop pydantic's generated ``title`` keys: tokens the model pays for, no meaning."""
    if isinstance(schema, list):
        return [_strip_titles(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: _strip_titles(v) for k, v in value.items()}
        elif key in _NO_RECURSE:
            out[key] = value
        else:
            out[key] = _strip_titles(value)
    return out
