"""No module reaches into another package's private names.

The rule, checked on every module under `antigravity_sdk/` (the generated
`harness/_proto/` aside) by reading its source with `ast`:

- A private name (a module, or any other name, starting with a single `_`) belongs to the
  directory (package) that holds it, and only modules in that same directory may import
  it. `from ._engine import _Rule` inside `policy/` is fine; `from ..policy._engine import
  PolicyLike` from `agent/` or `cli/` is a breach, and so is `from ..interactive import
  _printable` from `cli/` (`_printable` belongs to the top-level directory). A public
  name reached through a private module counts too: `from ..fleet._store import
  default_db_url` from `cli/` imports the private module `_store` of `fleet/`.
- One exception: the top-level package's own private modules (`_eager.py`, `_reasons.py`,
  `_repositories.py`, `_plain_json.py`, `_defaults.py`) are the library's shared
  internals. Any module may import their *public* names (`from .._eager import
  start_now`); their private names stay private.
- Every import counts alike: relative or absolute, at module level, inside a function,
  under `if TYPE_CHECKING:`.
- In `cli/` and `fleet/`, the clients of the library, reading or calling a private
  attribute of an object (`worker._thread`, `builder._set(...)`) is a breach too, when it
  is statically obvious: an attribute starting with a single `_` on a plain name other than
  `self` or `cls`. A few standard-library and third-party ones are legitimate, and listed in
  `ALLOWED_ATTRIBUTES` with the reason.

A package that needs something of another's asks its owner for a public name.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "antigravity_sdk"
NAME = "antigravity_sdk"
GENERATED = ("harness", "_proto")  # written by scripts/gen_proto.py, not by hand
CLIENTS = ("cli", "fleet")  # where private attribute access is checked too

# attribute -> why it is not a breach: other projects' private-looking names that are their
# documented or only way in, each used in cli/ or fleet/ today.
ALLOWED_ATTRIBUTES: dict[str, str] = {
    "_SubParsersAction": "argparse._SubParsersAction: the type add_subparsers() returns",
    "_actions": "parser._actions: argparse exposes no other list of a parser's options",
    "_mapping": "sqlalchemy Row._mapping: the documented dict-like view of a row",
}

Dir = tuple[str, ...]


def is_private(name: str) -> bool:
    """`_name`, not `__dunder__` nor `__mangled`, nor the bare `_`."""
    return name.startswith("_") and not name.startswith("__") and name != "_"


def packages(root: Path = PACKAGE) -> set[Dir]:
    """Every directory of the package that is a package, as parts below `antigravity_sdk`."""
    return {path.parent.relative_to(root).parts for path in root.rglob("__init__.py")} | {()}


def top_level_modules(root: Path = PACKAGE) -> set[str]:
    return {path.stem for path in root.glob("*.py")}


def owner(parts: Dir, known: set[Dir]) -> Dir:
    """The directory that holds the name `parts[-1]`: `parts[:-1]` when that is a package
    (a module or a name of its `__init__`), else the directory of that module."""
    prefix = parts[:-1]
    while prefix not in known:
        prefix = prefix[:-1]
    return prefix


def imported(node: ast.Import | ast.ImportFrom, here: Dir) -> Iterator[tuple[Dir, str]]:
    """Each `antigravity_sdk` name an import statement imports: (its parts below the
    package, as written)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            parts = tuple(alias.name.split("."))
            if parts[0] == NAME:
                yield parts[1:], alias.name
        return
    if node.level:
        if node.level - 1 > len(here):
            return  # above the package: not ours
        base = here[: len(here) - (node.level - 1)]
    else:
        if node.module is None or node.module.split(".")[0] != NAME:
            return
        base = ()
    module = tuple(node.module.split(".")) if node.module else ()
    if not node.level:
        module = module[1:]
    written = "." * node.level + (f"{node.module}." if node.module else "")
    for alias in node.names:
        if alias.name != "*":
            yield (*base, *module, alias.name), written + alias.name


def import_breaches(tree: ast.AST, here: Dir, known: set[Dir], shared: set[str]) -> list[str]:
    """`line: imported.name` (as written) for each private name `tree`, a module in
    directory `here`, imports from another directory."""
    found: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        for parts, written in imported(node, here):
            for i, part in enumerate(parts):
                if not is_private(part):
                    continue
                if i == 0 and part in shared:
                    continue  # a shared internal: its public names are everyone's
                if owner(parts[: i + 1], known) != here:
                    found.append(f"{node.lineno}: {written}")
                    break
    return found


def attribute_breaches(tree: ast.AST) -> list[str]:
    """`line: name._attr` for each private attribute read on a plain name not self/cls."""
    found: list[str] = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and is_private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id not in ("self", "cls")
            and node.attr not in ALLOWED_ATTRIBUTES
        ):
            found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return found


def breaches(source: str, path: PurePosixPath, known: set[Dir], shared: set[str]) -> list[str]:
    """Every breach in the module at `path` (relative to `antigravity_sdk/`), as
    `file:line: imported.name`."""
    tree = ast.parse(source, filename=str(path))
    here = path.parent.parts
    found = import_breaches(tree, here, known, shared)
    if here[:1] and here[0] in CLIENTS:
        found += attribute_breaches(tree)
    found.sort(key=lambda breach: int(breach.split(":")[0]))
    return [f"antigravity_sdk/{path}:{breach}" for breach in found]


def modules() -> list[PurePosixPath]:
    return sorted(
        PurePosixPath(path.relative_to(PACKAGE).as_posix())
        for path in PACKAGE.rglob("*.py")
        if path.relative_to(PACKAGE).parts[:2] != GENERATED
    )


def all_breaches() -> list[str]:
    known = packages()
    shared = {name for name in top_level_modules() if is_private(name)}
    found: list[str] = []
    for path in modules():
        found += breaches((PACKAGE / path).read_text(), path, known, shared)
    return found


def test_no_module_imports_another_package_s_private_names() -> None:
    assert len(modules()) > 50
    found = all_breaches()
    assert not found, "private names used across packages:\n" + "\n".join(found)


def check(source: str, path: str) -> list[str]:
    known = packages()
    shared = {name for name in top_level_modules() if is_private(name)}
    return breaches(textwrap.dedent(source), PurePosixPath(path), known, shared)


def test_the_checker_reports_each_kind_of_breach() -> None:
    source = """
        from typing import TYPE_CHECKING
        from .._eager import start_now
        from .._reasons import StopReason
        from ..policy import lint
        from ._common import Subparsers
        from ..policy._engine import PolicyLike
        from ..interactive import _printable
        from .. import _eager as eager
        import antigravity_sdk.policy._lint
        from antigravity_sdk.fleet import _store

        if TYPE_CHECKING:
            from .._eager import _Inline

        def run(worker, builder) -> None:
            from ..policy import _rules
            worker._thread.join()
            builder._set("governance")
            self._fine = argparse._SubParsersAction  # allowed: see ALLOWED_ATTRIBUTES
    """
    assert check(source, "cli/example.py") == [
        "antigravity_sdk/cli/example.py:7: ..policy._engine.PolicyLike",
        "antigravity_sdk/cli/example.py:8: ..interactive._printable",
        "antigravity_sdk/cli/example.py:10: antigravity_sdk.policy._lint",
        "antigravity_sdk/cli/example.py:11: antigravity_sdk.fleet._store",
        "antigravity_sdk/cli/example.py:14: .._eager._Inline",
        "antigravity_sdk/cli/example.py:17: ..policy._rules",
        "antigravity_sdk/cli/example.py:18: worker._thread",
        "antigravity_sdk/cli/example.py:19: builder._set",
    ]


def test_the_owner_s_own_directory_may_import_its_private_names() -> None:
    source = """
        from ._engine import _Rule, PolicyLike
        from . import _rules
        from .._eager import start_now
        from ..context import _current
        from antigravity_sdk.policy._file import _parse_document
    """
    assert check(source, "policy/_lint.py") == [
        "antigravity_sdk/policy/_lint.py:5: ..context._current"
    ]
    top = "from .context import _current\nfrom .policy._rules import Policy\n"
    assert check(top, "hooks.py") == ["antigravity_sdk/hooks.py:2: .policy._rules.Policy"]
    # attribute access is checked in the clients only, and never on self or cls
    assert check("worker._thread\n", "agent/_agent.py") == []
    assert check("self._thread\ncls._x\n", "fleet/_fleet.py") == []
