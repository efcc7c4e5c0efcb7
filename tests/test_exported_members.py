"""The top-level public API, as httpx's tests/test_exported_members.py checks its own.

`_EXPORTS` in `antigravity_sdk/__init__.py` (name -> module) is the one list: `__all__`
is derived from it, and the `if TYPE_CHECKING:` block that type checkers read must import
exactly its names, from the modules it says. The expected set below is written out, so
that adding or removing a public name is a decision a diff shows.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import types
from pathlib import Path

import antigravity_sdk

NAME = "antigravity_sdk"
INIT = Path(antigravity_sdk.__file__)

EXPECTED = {
    # the package itself
    "__version__",
    "policy",
    # the agent
    "Agent",
    "AgentBuilder",
    "Containment",
    "Timeouts",
    "Skill",
    "BUILTIN_SECTIONS",
    "BuiltinSection",
    "ServiceTier",
    "ThinkingLevel",
    "ConversationInfo",
    "list_conversations",
    # hooks, their context, policies
    "Hook",
    "HookRunner",
    "HookContext",
    "ToolContext",
    "current_context",
    "Decision",
    "Policy",
    "PolicyEnforcer",
    # prompts
    "Document",
    "Image",
    "Prompt",
    # antigravity_sdk.types
    "AskQuestionEntry",
    "AskQuestionOption",
    "Budget",
    "BudgetScope",
    "BuiltinTool",
    "CapabilitiesConfig",
    "ChatResponse",
    "HookResult",
    "McpHttpServer",
    "McpStdioServer",
    "QuestionHookResult",
    "QuestionResponse",
    "RetryPolicy",
    "Step",
    "StopReason",
    "StreamChunk",
    "ToolCall",
    "ToolOutputLimit",
    "ToolResult",
    "UsageMetadata",
    # antigravity_sdk.errors
    "AgentStateError",
    "AntigravityError",
    "ConfigurationError",
    "ConfigurationTypeError",
    "ContainmentError",
    "ConversationNotFoundError",
    "HarnessConnectionError",
    "HarnessError",
    "HarnessInstallError",
    "HarnessNotFoundError",
    "ModelNotConfiguredError",
    "OutputValidationError",
    "PolicyError",
    "PromptError",
    "ProtocolError",
    "ToolExecutionError",
    "TurnCancelledError",
    "TurnDeniedError",
    "TurnError",
    "TurnFailedError",
    "TurnTimeoutError",
}


def test_the_exported_names_are_the_expected_ones() -> None:
    assert set(antigravity_sdk.__all__) == EXPECTED


def test_all_is_sorted_without_duplicates_and_derived_from_exports() -> None:
    names = antigravity_sdk.__all__
    assert names == sorted(names)
    assert len(names) == len(set(names))
    assert set(names) == {*antigravity_sdk._EXPORTS, "__version__"}


def test_nothing_private_is_exported() -> None:
    for name in antigravity_sdk.__all__:
        assert not name.startswith("_") or (name.startswith("__") and name.endswith("__")), name
    for name, module in antigravity_sdk._EXPORTS.items():
        assert not module.startswith("_") and "._" not in module, (name, module)


def test_every_exported_name_is_importable_and_defined_in_the_package() -> None:
    namespace: dict[str, object] = {}
    exec(f"from antigravity_sdk import {', '.join(antigravity_sdk.__all__)}", namespace)
    for name in antigravity_sdk.__all__:
        value = getattr(antigravity_sdk, name)
        assert namespace[name] is value
        if name == "__version__":
            continue
        module = antigravity_sdk._EXPORTS[name]
        loaded = importlib.import_module(f"antigravity_sdk.{module}")
        if isinstance(value, types.ModuleType):
            assert value is loaded and value.__name__ == f"antigravity_sdk.{name}"
            continue
        assert value is getattr(loaded, name)
        if inspect.isclass(value) or inspect.isfunction(value):  # not constants nor aliases
            defined_in = value.__module__
            assert defined_in == NAME or defined_in.startswith(f"{NAME}."), (name, defined_in)


def test_dir_lists_the_exported_names() -> None:
    assert set(antigravity_sdk.__all__) <= set(dir(antigravity_sdk))


def type_checking_imports() -> dict[str, str]:
    """name -> module (below the package) that `__init__.py`'s TYPE_CHECKING block imports
    it from; `from . import policy` imports the module `policy` itself."""
    tree = ast.parse(INIT.read_text())
    blocks = [
        node
        for node in tree.body
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
    ]
    assert len(blocks) == 1
    imported: dict[str, str] = {}
    for node in blocks[0].body:
        assert isinstance(node, ast.ImportFrom) and node.level == 1, ast.unparse(node)
        for alias in node.names:
            assert alias.asname == alias.name, f"re-export {alias.name} as itself"
            assert alias.name not in imported, f"{alias.name} imported twice"
            imported[alias.name] = node.module or alias.name
    return imported


def test_the_type_checking_block_imports_exactly_the_exports() -> None:
    assert type_checking_imports() == antigravity_sdk._EXPORTS
