"""docs/architecture.md is the map of the package, and this test holds the code to it.

The map's "Module map" section has one table row per module (its path relative to
`antigravity_sdk/`, in backticks), under a `### Ln` heading naming its layer, with what
the module may import. Its "Exceptions to the layer rule" table lists the imports the
layer rule lets through, each with a reason. Checked here:

- every `.py` file under `antigravity_sdk/` has a row (the generated `harness/_proto/`
  tree is one row), and every row names a module that exists (but `PENDING`);
- every import of an `antigravity_sdk` module, absolute or relative, at the top of a
  module, inside a function or under `TYPE_CHECKING`, keeps the map's rules: the layers
  and each row's *may import* (rule 1), the library never importing `cli/` (2), `policy/`
  never importing the terminal (3), `hooks`, `types`, `errors` and `context` importing
  nothing from above (4), the one-way arrows inside `agent/` (5), and `cli/_commands`
  imported by `cli/__init__` alone (6). A breach reads `file:line imports X: rule ...`.

Rules 2 to 6 are written out below as they are in the map; the layers, the rows and the
exceptions are read from the map itself.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "antigravity_sdk"
MAP = ROOT / "docs" / "architecture.md"
PROTO = "harness/_proto/"  # generated code: one row of the map for the whole tree

# Modules the map lists ahead of a change still in progress: allowed to be missing until
# they land. Whoever lands one removes it from this set (the test below fails while a
# module named here exists). Nothing else may be missing. Emptied when the last two,
# `agent/_lifecycle.py` and `timeouts.py`, landed (a617a9c).
PENDING: frozenset[str] = frozenset()

# Rule 4: what everything imports stays below it all.
BASE = frozenset({"hooks.py", "types.py", "errors.py", "context.py"})
ABOVE_BASE = ("harness/", "policy/", "agent/", "fleet/", "cli/")

# Rule 5: the arrows inside agent/. Rank: a module imports only higher ranks (and the
# leaves); `_builder` and `_agent` share the head and may import each other.
AGENT_RANK: dict[str, int] = {
    "agent/__init__.py": -1,
    "agent/_builder.py": 0,
    "agent/_agent.py": 0,
    "agent/_session.py": 1,
    "agent/_turn.py": 2,
    "agent/_answers.py": 3,
}
AGENT_LEAVES = frozenset(
    {"agent/_settings.py", "agent/_lifecycle.py", "agent/_checks.py", "agent/_outside.py"}
)
AGENT_HEAD = frozenset({"agent/_builder.py", "agent/_agent.py"})

BOUND = re.compile(r"L0(?:\s*[\u2013-]\s*L(\d+))?\b")  # "L0", or "L0", an en dash, "Ln"
LAYER_HEADING = re.compile(r"^###\s+L(\d+)\b")
CELL_SPLIT = re.compile(r"(?<!\\)\|")
MAY_IMPORT = re.compile(r"\bfrom\s+\.|antigravity_sdk")  # a relative import, or the name


# -- the map ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    module: str
    layer: int
    owns: str
    may_import: str
    line: int


@dataclass(frozen=True)
class Allowed:
    """A row's *may import*: layers up to `bound`, or exactly `only` (empty: nothing)."""

    bound: int | None
    only: frozenset[str] | None


@dataclass(frozen=True)
class LayerException:
    importer: str  # a module, or "any"
    imported: str
    names: frozenset[str]  # empty: any name
    why: str


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in CELL_SPLIT.split(line.strip().strip("|"))]


def _section(text: str, heading: str) -> list[tuple[int, str]]:
    """The numbered lines under the first heading starting with `heading`, up to the
    next heading of the same or a higher level."""
    lines = text.splitlines()
    for start, line in enumerate(lines):
        if line.startswith(heading):
            level = len(line) - len(line.lstrip("#"))
            found = []
            for number, body in enumerate(lines[start + 1 :], start + 2):
                hashes = len(body) - len(body.lstrip("#"))
                if body.startswith("#") and body[hashes : hashes + 1] == " " and hashes <= level:
                    break
                found.append((number, body))
            return found
    raise AssertionError(f"{MAP.name}: no section {heading!r}")


def parse_rows(text: str) -> list[Row]:
    rows: list[Row] = []
    layer: int | None = None
    for number, line in _section(text, "## Module map"):
        heading = LAYER_HEADING.match(line)
        if heading:
            layer = int(heading.group(1))
            continue
        if not line.startswith("| `"):
            continue
        cells = _cells(line)
        assert len(cells) == 3, f"{MAP.name}:{number}: a module row has 3 cells: {line}"
        module = re.fullmatch(r"`([^`]+)`", cells[0])
        assert module, f"{MAP.name}:{number}: the first cell is one module in backticks"
        assert layer is not None, f"{MAP.name}:{number}: a module row before any ### Ln"
        rows.append(Row(module.group(1), layer, cells[1], cells[2], number))
    return rows


def parse_exceptions(text: str) -> list[LayerException]:
    found: list[LayerException] = []
    for number, line in _section(text, "### Exceptions to the layer rule"):
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        cells = _cells(line)
        if cells[0] == "importer":  # the header
            continue
        assert len(cells) == 4, f"{MAP.name}:{number}: an exception has 4 cells: {line}"
        importer, imported, names, why = cells
        assert why, f"{MAP.name}:{number}: an exception needs its reason"
        found.append(
            LayerException(
                importer=importer.strip("`"),
                imported=imported.strip("`"),
                names=frozenset(re.findall(r"`([^`]+)`", names)),
                why=why,
            )
        )
    return found


@dataclass(frozen=True)
class Map:
    rows: dict[str, Row]
    exceptions: list[LayerException]

    def layer(self, module: str) -> int:
        return self.rows[module].layer

    def resolve_ref(self, ref: str) -> set[str]:
        """A module named in a *may import* cell: `x/y` is `x/y.py` or `x/y/__init__.py`;
        `x/` is every module under it."""
        if ref.endswith("/"):
            return {m for m in self.rows if m.startswith(ref)}
        for candidate in (f"{ref}.py", f"{ref}/__init__.py", ref):
            if candidate in self.rows:
                return {candidate}
        raise AssertionError(f"{MAP.name}: 'may import' names {ref!r}, which has no row")

    def allowed(self, module: str) -> Allowed:
        row = self.rows[module]
        cell = row.may_import
        where = f"{MAP.name}:{row.line} ({module})"
        if cell.startswith("nothing"):
            return Allowed(None, frozenset())
        if cell.startswith("only"):
            refs = re.findall(r"`([^`]+)`", cell)
            assert refs, f"{where}: 'only' names no module"
            return Allowed(None, frozenset().union(*(self.resolve_ref(r) for r in refs)))
        bound = BOUND.match(cell)
        assert bound, f"{where}: 'may import' starts with L0-Ln, 'only' or 'nothing'"
        top = int(bound.group(1) or 0)
        assert top <= row.layer, f"{where}: may import L{top}, above its own layer"
        return Allowed(top, None)


def parse_map(text: str) -> Map:
    rows = parse_rows(text)
    seen: dict[str, Row] = {}
    for row in rows:
        assert row.module not in seen, f"{MAP.name}:{row.line}: {row.module} listed twice"
        seen[row.module] = row
    return Map(seen, parse_exceptions(text))


@functools.cache
def the_map() -> Map:
    return parse_map(MAP.read_text(encoding="utf-8"))


# -- the code -----------------------------------------------------------------------------


def module_of(path: Path) -> str:
    """The map's name for a file: its path under the package, or the `_proto` row."""
    rel = path.relative_to(PACKAGE).as_posix()
    return PROTO if rel.startswith(PROTO) else rel


def source_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


@functools.cache
def on_disk() -> frozenset[str]:
    return frozenset(module_of(p) for p in source_files())


@dataclass(frozen=True)
class Import:
    line: int
    target: str  # the map's name for the imported module ("" when there is no such module)
    name: str  # the name imported from it ("" for `import x` or a submodule)
    dotted: str  # as written, made absolute


def _target(dotted: list[str], known: frozenset[str]) -> str | None:
    """The map's name for module `antigravity_sdk.<dotted>`, if it is one."""
    rel = "/".join(dotted)
    if rel == "":
        return "__init__.py"
    if f"{rel}/".startswith(PROTO):
        return PROTO
    for candidate in (f"{rel}.py", f"{rel}/__init__.py"):
        if candidate in known:
            return candidate
    return None


def imports_of(file: str, source: str, known: frozenset[str]) -> Iterator[Import]:
    """Every import of a package module in `source`, as the file at `file` (its path
    under the package) would run it. `known`: the modules there are."""
    if not MAY_IMPORT.search(source):  # no import of the package can be in it: skip parsing
        return
    package = file.split("/")[:-1]  # a package's __init__ is inside its package too
    for node in _statements(ast.parse(source).body):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "antigravity_sdk":
                    yield _import(node.lineno, parts[1:], "", known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                up = node.level - 1
                base = package[: len(package) - up] if up <= len(package) else ["..."]
                base = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == "antigravity_sdk":
                base = node.module.split(".")[1:]
            else:
                continue
            for alias in node.names:
                sub = _target([*base, alias.name], known) if alias.name != "*" else None
                if sub is not None:
                    yield Import(node.lineno, sub, "", ".".join(["antigravity_sdk", *base]))
                else:
                    yield _import(node.lineno, base, alias.name, known)


def _statements(
    nodes: list[ast.stmt] | list[ast.excepthandler] | list[ast.match_case],
) -> Iterator[ast.AST]:
    """Every statement, however deep (in functions, classes, `if TYPE_CHECKING:`, `try`):
    imports are statements, so expressions need no visit."""
    for node in nodes:
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            yield from _statements(getattr(node, field, []))


def _import(line: int, dotted: list[str], name: str, known: frozenset[str]) -> Import:
    return Import(line, _target(dotted, known) or "", name, ".".join(["antigravity_sdk", *dotted]))


# -- the rules ----------------------------------------------------------------------------


def _excepted(module: str, imp: Import, exceptions: list[LayerException]) -> bool:
    return any(
        e.importer in ("any", module)
        and e.imported == imp.target
        and (not e.names or imp.name in e.names)
        for e in exceptions
    )


def _is_library(module: str) -> bool:
    return not module.startswith("cli/") and module != "__main__.py"


def _agent_arrow(module: str, target: str) -> str | None:
    """Rule 5, for an import from one module of agent/ to another."""
    if target in AGENT_LEAVES:
        return None
    if module in AGENT_LEAVES:
        return "rule 5 broken (a leaf of agent/ imports no module of agent/ but leaves)"
    if module not in AGENT_RANK or target not in AGENT_RANK:
        unplaced = module if module not in AGENT_RANK else target
        return f"rule 5 broken ({unplaced} has no place in agent/'s arrows)"
    if {module, target} == AGENT_HEAD or AGENT_RANK[target] > AGENT_RANK[module]:
        return None
    return "rule 5 broken (agent/'s arrows run _agent → _session → _turn → _answers)"


def breaches(file: str, source: str, the: Map) -> list[str]:
    """What in `source`, read as the file at `file` (its path under the package), breaks
    a rule of the map."""
    module = PROTO if file.startswith(PROTO) else file
    known = frozenset(the.rows) | on_disk()
    allowed = the.allowed(module)
    found: list[str] = []
    for imp in imports_of(file, source, known):
        target = imp.target
        if target == module:
            continue
        broken: list[str] = []
        if not target:
            broken.append("no such module")
        elif target not in the.rows:
            continue  # a module without a row: test_every_module_is_on_the_map says so
        if _is_library(module) and target.startswith("cli/"):
            broken.append("rule 2 broken (the library never imports cli/)")
        if module.startswith("policy/") and target == "interactive.py":
            broken.append("rule 3 broken (policy/ does not import the terminal)")
        if module in BASE and target.startswith(ABOVE_BASE):
            broken.append(
                "rule 4 broken (hooks, types, errors, context import nothing from "
                "harness/, policy/, agent/, fleet/, cli/)"
            )
        if module.startswith("agent/") and target.startswith("agent/"):
            arrow = _agent_arrow(module, target)
            if arrow:
                broken.append(arrow)
        if target == "cli/_commands.py" and module != "cli/__init__.py":
            broken.append("rule 6 broken (only cli/__init__ imports cli/_commands)")
        if target and not _excepted(module, imp, the.exceptions):
            layer, theirs = the.layer(module), the.layer(target)
            if theirs > layer:
                broken.append(f"rule 1 broken (L{layer} may not import L{theirs})")
            elif allowed.only is not None and target not in allowed.only:
                what = ", ".join(sorted(allowed.only)) or "nothing of the SDK"
                broken.append(f"rule 1 broken ({module} may import only {what})")
            elif allowed.bound is not None and theirs > allowed.bound:
                span = "L0" if allowed.bound == 0 else f"L0-L{allowed.bound}"
                broken.append(f"rule 1 broken ({module} may import {span} only)")
        shown = (target or imp.dotted) + (f" ({imp.name})" if imp.name else "")
        found += [f"antigravity_sdk/{file}:{imp.line} imports {shown}: {b}" for b in broken]
    return found


# -- the tests ----------------------------------------------------------------------------


def test_every_module_is_on_the_map() -> None:
    missing = sorted(on_disk() - set(the_map().rows))
    assert not missing, f"modules missing from {MAP.name}'s module map: {missing}"


def test_every_module_on_the_map_exists() -> None:
    gone = sorted(set(the_map().rows) - on_disk() - PENDING)
    assert not gone, f"{MAP.name} lists modules that do not exist: {gone}"


def test_pending_modules_are_still_pending() -> None:
    landed = sorted(PENDING & on_disk())
    assert not landed, f"{landed} exist now: remove them from PENDING in {__file__}"
    assert set(the_map().rows) >= PENDING, "PENDING names a module the map does not list"


def test_every_row_says_what_it_owns_and_may_import() -> None:
    the = the_map()
    for module, row in the.rows.items():
        assert row.owns, f"{MAP.name}:{row.line}: {module} says nothing of what it owns"
        the.allowed(module)  # parses, and stays within the row's own layer
    for exception in the.exceptions:
        assert exception.importer == "any" or exception.importer in the.rows
        assert exception.imported in the.rows, f"exception names {exception.imported}"


def test_the_rules_written_here_name_modules_on_the_map() -> None:
    rows = set(the_map().rows)
    assert rows >= BASE
    assert set(AGENT_RANK) | AGENT_LEAVES == {m for m in rows if m.startswith("agent/")}


def test_imports_keep_the_rules() -> None:
    the = the_map()
    found: list[str] = []
    for path in source_files():
        if module_of(path) in the.rows:  # a missing row is the first test's failure
            file = path.relative_to(PACKAGE).as_posix()
            found += breaches(file, path.read_text(encoding="utf-8"), the)
    assert not found, "imports that break docs/architecture.md's rules:\n" + "\n".join(found)


# -- the checker can fail -----------------------------------------------------------------


# Each case: a file of the package, made-up source for it, and how a report that must be
# among the breaches begins (after "antigravity_sdk/").
BREACHES: list[tuple[str, str, str]] = [
    (
        "hooks.py",
        "from .harness.rewrite import encode_struct\n",
        "hooks.py:1 imports harness/rewrite.py (encode_struct): rule 4 broken",
    ),
    (
        "hooks.py",
        "from .harness.rewrite import encode_struct\n",
        "hooks.py:1 imports harness/rewrite.py (encode_struct): rule 1 broken (L1 may not",
    ),
    (
        "policy/_file.py",
        "def load():\n    from ..interactive import confirm_in_terminal\n",
        "policy/_file.py:2 imports interactive.py (confirm_in_terminal): rule 3 broken",
    ),
    (
        "agent/_answers.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._session import Session\n",
        "agent/_answers.py:3 imports agent/_session.py (Session): rule 5 broken",
    ),
    (
        "agent/_lifecycle.py",
        "from . import _turn\n",
        "agent/_lifecycle.py:1 imports agent/_turn.py: rule 5 broken (a leaf",
    ),
    (
        "fleet/_store.py",
        "import antigravity_sdk.cli.fleet as cli\n",
        "fleet/_store.py:1 imports cli/fleet.py: rule 2 broken",
    ),
    (
        "cli/policy.py",
        "from antigravity_sdk.cli import _commands\n",
        "cli/policy.py:1 imports cli/_commands.py: rule 6 broken",
    ),
    (
        "policy/_shell.py",
        "from ..errors import PolicyError\n",
        "policy/_shell.py:1 imports errors.py (PolicyError): rule 1 broken (policy/_shell.py",
    ),
    (
        "harness/catalog.py",
        "from .wire import decode_frame\n",
        "harness/catalog.py:1 imports harness/wire.py (decode_frame): rule 1 broken",
    ),
    (
        "types.py",
        "from antigravity_sdk import Agent\n",
        "types.py:1 imports __init__.py (Agent): rule 1 broken (L0 may not import L7)",
    ),
    (
        "tools.py",
        "from .nowhere import thing\n",
        "tools.py:1 imports antigravity_sdk.nowhere (thing): no such module",
    ),
]


@pytest.mark.parametrize(("file", "source", "expected"), BREACHES)
def test_a_breach_is_reported(file: str, source: str, expected: str) -> None:
    found = breaches(file, source, the_map())
    assert any(line.startswith(f"antigravity_sdk/{expected}") for line in found), found


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("tracing.py", "from . import __version__\n"),  # the listed exception
        ("harness/connection.py", "def f():\n    from .. import __version__\n"),
        ("agent/_agent.py", "from . import _session, _turn\nfrom ._builder import AgentBuilder\n"),
        ("agent/_builder.py", "def build():\n    from ._agent import Agent\n"),
        ("agent/_checks.py", "from ._settings import ModelGroup\n"),
        ("policy/_shell.py", "from ._programs import WRAPPERS\n"),
        ("cli/fleet.py", "from ..fleet import _store\nfrom ._common import Subparsers\n"),
    ],
)
def test_an_allowed_import_is_not_reported(module: str, source: str) -> None:
    assert breaches(module, source, the_map()) == []


def test_relative_imports_resolve_as_python_resolves_them() -> None:
    known = frozenset(the_map().rows)
    found = list(
        imports_of(
            "agent/__init__.py",
            "from ._agent import Agent\nfrom .. import policy\nfrom ..harness import wire\n"
            "from ..harness._proto.genai import skills\nimport antigravity_sdk.egress\n",
            known,
        )
    )
    assert [(i.target, i.name) for i in found] == [
        ("agent/_agent.py", "Agent"),
        ("policy/__init__.py", ""),
        ("harness/wire.py", ""),
        (PROTO, ""),
        ("egress.py", ""),
    ]


def test_the_map_parser_refuses_a_malformed_row() -> None:
    text = "## Module map\n\n### L0 · x\n\n| `a.py` | owns |\n"
    with pytest.raises(AssertionError, match="3 cells"):
        parse_map(text)
