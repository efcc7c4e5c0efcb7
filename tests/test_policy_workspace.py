"""workspace_only: resolution rules, and fuzzing against the kernel's view of real trees.

The oracle resolves each path twice with the stdlib: `..` cleaned textually first (how the
harness opens a path) and symlinks followed first (how `chdir` resolves `Cwd`); a path is
inside only when both are.
"""

from __future__ import annotations

import asyncio
import errno
import os
import posixpath
import random
import tempfile
from pathlib import Path
from typing import TypeAlias
from urllib.parse import quote

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from antigravity_sdk import PolicyError, ToolCall, policy
from antigravity_sdk.policy import PolicyEnforcer
from antigravity_sdk.policy._workspace import (
    _NO_URIS,
    _OPTIONAL_PATHS,
    _PATH_ARGUMENTS,
    _PATH_LISTS,
    _realpath,
)

COMPONENTS = (
    "ws", "ws-evil", "wsx", "outside", "sub", "file.txt", "new",
    "link_in", "link_out", "link_up", "link_back", "link_abs", "dangling_out", "deep",
    "..", ".", "",
)  # fmt: skip


def make_tree(base: Path) -> Path:
    """base/{ws, ws-evil, wsx, outside} with symlinks pointing in, out, up, back and deeper."""
    ws = base / "ws"
    for d in (ws / "sub" / "inner", base / "ws-evil", base / "wsx", base / "outside" / "sub"):
        d.mkdir(parents=True)
    (ws / "file.txt").write_text("x")
    (base / "outside" / "secret").write_text("s")
    (ws / "link_in").symlink_to("sub")
    (ws / "deep").symlink_to("sub/inner")  # deep/../.. is base textually, ws for the kernel
    (ws / "sub" / "link_up").symlink_to("../..")  # -> base: outside
    (ws / "link_out").symlink_to(base / "outside")
    (ws / "dangling_out").symlink_to(base / "outside" / "new_file")
    (ws / "link_abs").symlink_to(ws / "sub")
    (base / "outside" / "link_back").symlink_to(ws / "sub")
    (base / "link_up").symlink_to("ws")
    return ws


def resolutions(path: str) -> tuple[str, str]:
    """Where the harness opens `path` (`..` cleaned textually, then the kernel resolves the
    rest) and where the kernel alone takes it; the stdlib resolves missing parts lexically."""
    cleaned = "/" + posixpath.normpath(path).lstrip("/")  # normpath keeps a leading `//`
    return os.path.realpath(cleaned), os.path.realpath(path)


def expected_inside(path: str, ws: str) -> bool:
    """The oracle: an absolute path both of whose resolutions are in `ws`."""
    if not path.startswith("/"):  # relative: the harness's own working directory decides
        return False
    return all(real == ws or real.startswith(ws + "/") for real in resolutions(path))


def enforcer_for(ws: Path) -> PolicyEnforcer:
    return policy.enforce(policy.workspace_only([ws]))


async def check(enforcer: PolicyEnforcer, tool: str, value: object) -> bool:
    """`value` as the tool's path argument (None: absent; a one-element list for list tools)."""
    if value is not None and tool in _PATH_LISTS:
        value = [value]
    args = {} if value is None else {_PATH_ARGUMENTS[tool]: value}
    return (await enforcer.pre_tool_call(ToolCall(name=tool, args=args))).allow


async def check_list(enforcer: PolicyEnforcer, tool: str, value: object) -> bool:
    """`value` as is (a list, or not) for a list-of-paths argument."""
    call = ToolCall(name=tool, args={_PATH_ARGUMENTS[tool]: value})
    return (await enforcer.pre_tool_call(call)).allow


def generate(base: Path, ws: Path, rnd: random.Random, count: int) -> list[tuple[str, bool]]:
    """Random paths (absolute, relative, file:// URIs) and whether each is inside."""
    real_ws = os.path.realpath(ws)
    cases: list[tuple[str, bool]] = []
    while len(cases) < count:
        parts = [rnd.choice(COMPONENTS) for _ in range(rnd.randint(1, 7))]
        start = rnd.random()
        if start < 0.45:
            path = str(base) + "/" + "/".join(parts)
        elif start < 0.6:
            path = str(ws) + "/" + "/".join(parts)
        else:
            path = "/".join(parts) or "."
        if rnd.random() < 0.15:
            if not path.startswith("/"):
                continue  # a URI names an absolute path; keep relative ones plain
            cases.append(("file://" + quote(path), expected_inside(path, real_ws)))
        else:
            cases.append((path, expected_inside(path, real_ws)))
    return cases


async def test_fuzz_ten_thousand_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = make_tree(tmp_path)
    enforcer = enforcer_for(ws)
    rnd = random.Random(20240601)
    tools = list(_PATH_ARGUMENTS)
    checked = inside_count = 0
    for cwd in (tmp_path, ws, ws / "sub", tmp_path / "outside"):
        monkeypatch.chdir(cwd)
        for value, inside in generate(tmp_path, ws, rnd, 2600):
            tool = rnd.choice(tools)
            inside = inside and not (tool in _NO_URIS and value.startswith("file:"))
            allowed = await check(enforcer, tool, value)
            assert allowed == inside, f"{tool} {value!r} (cwd {cwd}): expected {inside}"
            checked += 1
            inside_count += inside
    assert checked >= 10_000
    assert 0.1 * checked < inside_count < 0.9 * checked, "the generator must cover both sides"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(COMPONENTS), min_size=1, max_size=8))
def test_hypothesis_paths(tmp_path_factory: pytest.TempPathFactory, parts: list[str]) -> None:
    base = tmp_path_factory.getbasetemp() / "hyp"
    ws = base / "ws" if (base / "ws").exists() else make_tree(base)
    path = str(base) + "/" + "/".join(parts)
    allowed = asyncio.run(check(enforcer_for(ws), "view_file", path))
    assert allowed == expected_inside(path, os.path.realpath(ws))


async def test_named_cases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = make_tree(tmp_path)
    enforcer = enforcer_for(ws)
    w = str(ws)
    cases = {
        f"{w}/file.txt": True,
        f"//{w[1:]}/file.txt": True,
        f"{w}/new/dir/file": True,  # missing leaves resolve through the nearest parent
        f"{w}/../ws/./sub//x": True,
        f"{w}/link_in/x": True,
        w: True,
        f"{w}/../etc/passwd": False,
        f"{w}/../ws-evil/x": False,  # a sibling sharing the prefix is not inside
        f"{tmp_path}/ws-evil": False,
        f"{w}/link_out/secret": False,
        f"{w}/link_in/link_up/outside": False,
        f"{w}/dangling_out": False,  # writing through it would create a file outside
        f"{w}/new/../../outside": False,
        # `..` after a symlink: the harness cleans it textually, the kernel follows first.
        f"{w}/deep/../../outside/secret": False,  # textually base/outside
        f"{w}/deep/..": True,  # ws textually, ws/sub for the kernel
        f"{w}/deep/../sub/x": True,
        f"{w}/deep/../link_out/secret": False,  # the harness opens ws/link_out/secret
        f"{w}/link_in/../../outside": False,
        f"//{w[1:]}/deep/../../outside": False,
        f"file://{quote(w)}/deep/../../outside/secret": False,
        f"file://{quote(w)}/deep/%2e%2e/%2E%2E/outside/secret": False,
        # The harness reads a backslash as a separator.
        f"{w}/sub\\..\\..\\outside": False,
        f"{w}/sub\\x": False,
        f"file://{quote(w)}/sub%5C..%5C..%5Coutside": False,
        f"{tmp_path}/outside/link_back/x": True,
        f"file://{quote(w)}/file.txt": True,
        f"file://localhost{quote(w)}/sub": False,  # the harness opens \\localhost\...
        f"file://{quote(w)}/%2e%2e/outside": False,
        f"file://evil.host{quote(w)}/x": False,
        "": False,
        f"{w}/a\x00b": False,
    }
    for value, expected in cases.items():
        assert await check(enforcer, "view_file", value) is expected, value
    for bad in (None, 42, ["x"], b"/ws"):
        assert not await check(enforcer, "write_to_file", bad)
    # run_command runs in a relative `file:/...` below its own directory for a URI Cwd.
    assert await check(enforcer, "view_file", f"file://{quote(w)}/sub")
    assert not await check(enforcer, "run_command", f"file://{quote(w)}/sub")
    assert await check(enforcer, "run_command", f"{w}/sub")
    monkeypatch.chdir(ws)  # relative paths are denied even where they would be inside
    for relative in ("sub", ".", "./file.txt", "file.txt", "../outside", "~/x", "file:sub"):
        for tool in ("run_command", "view_file", "list_dir"):
            assert not await check(enforcer, tool, relative), (tool, relative)


async def test_symlink_loops_and_unreadable_paths_are_denied(tmp_path: Path) -> None:
    ws = make_tree(tmp_path)
    (ws / "loop1").symlink_to("loop2")
    (ws / "loop2").symlink_to("loop1")
    enforcer = enforcer_for(ws)
    for path in (f"{ws}/loop1", f"{ws}/loop1/x", f"{ws}/loop1/../../outside/secret"):
        assert not await check(enforcer, "view_file", path), path
    if os.geteuid() != 0:  # root reads everything
        locked = ws / "locked"
        locked.mkdir()
        (locked / "inner").mkdir()
        locked.chmod(0)
        try:
            assert not await check(enforcer, "view_file", f"{locked}/inner/x")
        finally:
            locked.chmod(0o755)


async def test_process_paths_are_outside_even_under_a_root_workspace(tmp_path: Path) -> None:
    # /proc/self, its cwd and fds are the harness's own there, not what the SDK would see.
    ws = make_tree(tmp_path)
    (ws / "to_proc").symlink_to("/proc")
    (ws / "to_cwd").symlink_to("/proc/self/cwd")
    (ws / "to_stdin").symlink_to("/dev/stdin")
    everything = policy.enforce(policy.workspace_only(["/"]))
    for path in (
        "/proc",
        "/proc/self/environ",
        "/proc/cpuinfo",
        "/proc/self/cwd/file.txt",
        f"/proc/self/root{ws}/file.txt",
        "/tmp/../proc/self/environ",
        "//proc/self/environ",
        "file:///proc/self/environ",
        "/dev/fd",
        "/dev/fd/0",
        "/dev/stdin",
        "/dev/stdout",
        "/dev/stderr",
        f"{ws}/to_proc/self/environ",
        f"{ws}/to_cwd/file.txt",
        f"{ws}/to_stdin",
    ):
        assert not await check(everything, "view_file", path), path
    assert await check(everything, "view_file", f"{ws}/file.txt")
    assert await check(everything, "view_file", "/dev/null")
    assert not await check(enforcer_for(ws), "view_file", f"{ws}/to_cwd/file.txt")


@pytest.mark.parametrize("root", ["/proc/sys", "/proc", "/dev/fd", "/proc/self/cwd"])
def test_a_workspace_under_proc_is_refused(root: str) -> None:
    with pytest.raises(PolicyError, match=root):
        policy.workspace_only([root])


# A generated tree: base/{ws,out}/a/b, files ws/a/f and out/f, and symlinks l0..l2 in any of
# DIRS whose targets (relative, or absolute under base) are made of LINK_PARTS: links
# inside -> inside, inside -> outside, outside -> inside, chains of links and loops. A path
# mostly goes through one of those links and back up with `..` (where the two resolutions
# differ), then on through PATH_PARTS.
DIRS = ("", "ws", "ws/a", "ws/a/b", "out", "out/a")
LINKS = ("l0", "l1", "l2")
LINK_PARTS = ("..", ".", "a", "b", "ws", "out", "f", *LINKS)
PATH_PARTS = ("ws", "out", "a", "b", "f", "new", "..", ".", "", *LINKS)

LinkSpec: TypeAlias = tuple[str, str, bool, list[str]]
link_specs = st.lists(
    st.tuples(
        st.sampled_from(DIRS),
        st.sampled_from(LINKS),
        st.booleans(),
        st.lists(st.sampled_from(LINK_PARTS), min_size=1, max_size=4),
    ),
    max_size=6,
)
PathSpec: TypeAlias = tuple[str, str, int, int, list[str]]
path_specs = st.lists(
    st.tuples(
        st.sampled_from(sorted(set(_PATH_ARGUMENTS) - _PATH_LISTS)),
        st.sampled_from(("/", "//", "/./")),
        st.integers(0, 7),  # through links[i]; past the end: from ws or base, no link
        st.integers(0, 3),  # then this many `..`
        st.lists(st.sampled_from(PATH_PARTS), max_size=5),
    ),
    min_size=1,
    max_size=6,
)


def spell(links: list[LinkSpec], spec: PathSpec) -> str:
    """The path `spec` names below base (to be prefixed with it)."""
    _, slashes, through, ups, rest = spec
    start = [*links[through][:2]] if through < len(links) else ["ws" if through % 2 else ""]
    return slashes + "/".join([*start, *[".."] * ups, *rest])


def build(base: str, links: list[LinkSpec]) -> bool:
    """Build the tree under `base`; True when some link loops: for the kernel, or for the
    policy's resolution, which takes missing components as plain directories (`b/..`
    where `b` is missing is the link's own directory, so a dangling `l0 -> b/../l0`
    loops there while the kernel stops at `b`): a denial is then the fail-closed answer."""
    for d in ("ws/a/b", "out/a/b"):
        os.makedirs(f"{base}/{d}")
    for f in ("ws/a/f", "out/f"):
        Path(f"{base}/{f}").write_text("x")
    made = []
    for where, name, absolute, parts in links:
        link = f"{base}/{where}/{name}"
        if not os.path.lexists(link):
            os.symlink((base + "/" if absolute else "") + "/".join(parts), link)
            made.append(link)
    loops = False
    for link in made:
        for resolve in (os.stat, _realpath):
            try:
                resolve(link)
            except OSError as exc:
                loops |= exc.errno == errno.ELOOP
    return loops


@settings(max_examples=400, deadline=None)
@given(link_specs, path_specs)
@example(links=[("ws", "l0", False, ["b", "..", "l0"])], paths=[("view_file", "/", 0, 0, [])])
def test_hypothesis_generated_trees_with_symlinks(
    links: list[LinkSpec], paths: list[PathSpec]
) -> None:
    """Allowed implies both resolutions inside; both inside implies allowed (no loops)."""
    with tempfile.TemporaryDirectory() as tmp:
        base = os.path.realpath(tmp)
        loops = build(base, links)
        ws = f"{base}/ws"
        enforcer = policy.enforce(policy.workspace_only([ws]))
        for spec in paths:
            path = base + spell(links, spec)
            allowed = asyncio.run(check(enforcer, spec[0], path))
            inside = expected_inside(path, ws)
            if allowed:
                assert inside, f"{path} allowed, but resolves to {resolutions(path)}"
            elif not loops:
                assert not inside, f"{path} denied, but resolves to {resolutions(path)}"


def test_workspaces_resolved_once_at_construction(tmp_path: Path) -> None:
    ws = make_tree(tmp_path)
    guards = policy.workspace_only([tmp_path / "link_up"])  # a symlink to ws
    assert repr(guards[0].predicate).endswith(os.path.realpath(ws))
    assert {g.tool for g in guards} == set(_PATH_ARGUMENTS)
    assert all(g.name == "workspace_only" for g in guards)
    with pytest.raises(PolicyError):
        policy.workspace_only([])
    with pytest.raises(PolicyError, match="bytes"):
        policy.workspace_only(os.fsencode(ws))  # type: ignore[arg-type]


def test_one_workspace_path_is_accepted_like_in_a_policy_file(tmp_path: Path) -> None:
    """`workspace_only("/tmp")` is `workspace_only(["/tmp"])`, as `workspace_only = "."`
    is `workspace_only = ["."]` in a policy file."""
    ws = make_tree(tmp_path)
    for one in (str(ws), ws):
        guards = policy.workspace_only(one)
        listed = policy.workspace_only([ws])
        assert [(g.tool, repr(g.predicate)) for g in guards] == [
            (g.tool, repr(g.predicate)) for g in listed
        ]
        assert repr(guards[0].predicate).endswith(os.path.realpath(ws))


async def test_other_tools_and_mcp_calls_are_not_checked(tmp_path: Path) -> None:
    enforcer = enforcer_for(make_tree(tmp_path))
    assert (await enforcer.pre_tool_call(ToolCall(name="search_web", args={}))).allow
    call = ToolCall(name="view_file", server_name="fs", args={"AbsolutePath": "/etc"})
    assert (await enforcer.pre_tool_call(call)).allow


# -- list-of-paths and optional path arguments (generate_image, run_workflow) -------------


def test_list_and_optional_tables_match_the_tool_schemas() -> None:
    assert _PATH_ARGUMENTS["generate_image"] == "ImagePaths"
    assert _PATH_ARGUMENTS["run_workflow"] == "ScriptPath"
    assert sorted(_PATH_LISTS) == ["generate_image"]
    assert sorted(_OPTIONAL_PATHS) == ["generate_image", "run_workflow"]


async def test_image_paths_every_element_must_be_inside(tmp_path: Path) -> None:
    ws = make_tree(tmp_path)
    enforcer = enforcer_for(ws)
    w = str(ws)
    inside, outside = f"{w}/file.txt", f"{w}/link_out/secret"
    assert await check_list(enforcer, "generate_image", [inside])
    assert await check_list(enforcer, "generate_image", [inside, f"{w}/sub/new.png", w])
    assert await check_list(enforcer, "generate_image", [])  # no reference images
    for paths in (
        [outside],
        [inside, outside],
        [outside, inside],
        [inside, f"{w}/../etc/passwd"],
        [inside, f"file://evil.host{quote(w)}/x"],
    ):
        assert not await check_list(enforcer, "generate_image", paths), paths


@pytest.mark.parametrize(
    "bad",
    [
        None,  # present but null: not a list
        "",
        "/ws/a.png",  # a bare string is not a list of paths
        ("/ws/a.png",),
        {"0": "/ws/a.png"},
        42,
        [None],
        [42],
        [""],
        [["/nested"]],
        [b"/ws/a.png"],
    ],
)
async def test_image_paths_that_are_not_a_list_of_usable_paths_deny(
    tmp_path: Path, bad: object
) -> None:
    ws = make_tree(tmp_path)
    enforcer = enforcer_for(ws)
    if isinstance(bad, str) and bad:
        bad = f"{ws}/file.txt"  # inside, but a string rather than a list
    elif isinstance(bad, tuple):
        bad = (f"{ws}/file.txt",)
    assert not await check_list(enforcer, "generate_image", bad)
    if isinstance(bad, list):  # also after a good element
        assert not await check_list(enforcer, "generate_image", [f"{ws}/file.txt", *bad])


async def test_optional_path_arguments_may_be_absent_but_not_unusable(tmp_path: Path) -> None:
    ws = make_tree(tmp_path)
    enforcer = enforcer_for(ws)
    image = ToolCall(name="generate_image", args={"Prompt": "a cat", "ImageName": "cat"})
    inline = ToolCall(name="run_workflow", args={"Script": "print(1)"})
    assert (await enforcer.pre_tool_call(image)).allow
    assert (await enforcer.pre_tool_call(inline)).allow
    assert await check(enforcer, "run_workflow", f"{ws}/sub/flow.py")
    for bad in (f"{tmp_path}/outside/flow.py", f"{ws}/../outside/flow.py", "", 42, ["x"]):
        assert not await check(enforcer, "run_workflow", bad), bad
    null = ToolCall(name="run_workflow", args={"ScriptPath": None, "Script": "print(1)"})
    assert not (await enforcer.pre_tool_call(null)).allow
    # The required path arguments still deny when absent.
    for tool in set(_PATH_ARGUMENTS) - _OPTIONAL_PATHS:
        assert not await check(enforcer, tool, None), tool


async def test_list_deny_message_names_the_argument(tmp_path: Path) -> None:
    ws = make_tree(tmp_path)
    enforcer = enforcer_for(ws)
    call = ToolCall(name="generate_image", args={"ImagePaths": ["/etc/passwd"]})
    result = await enforcer.pre_tool_call(call)
    assert not result.allow and "ImagePaths" in result.message
    assert "workspace_only" in result.message


async def test_fuzz_image_path_lists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random lists of 0-5 random paths: allowed exactly when every element is inside."""
    ws = make_tree(tmp_path)
    enforcer = enforcer_for(ws)
    rnd = random.Random(20250117)
    monkeypatch.chdir(tmp_path)
    pool = generate(tmp_path, ws, rnd, 3000)
    allowed_count = 0
    for _ in range(2000):
        chosen = rnd.sample(pool, rnd.randint(0, 5))
        expected = all(inside for _, inside in chosen)
        allowed = await check_list(enforcer, "generate_image", [v for v, _ in chosen])
        assert allowed == expected, chosen
        allowed_count += allowed
    assert 100 < allowed_count < 1900, "the generator must cover both sides"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from(COMPONENTS), min_size=1, max_size=6), max_size=4))
def test_hypothesis_image_path_lists(
    tmp_path_factory: pytest.TempPathFactory, many: list[list[str]]
) -> None:
    base = tmp_path_factory.getbasetemp() / "hyp-list"
    ws = base / "ws" if (base / "ws").exists() else make_tree(base)
    paths = [str(base) + "/" + "/".join(parts) for parts in many]
    allowed = asyncio.run(check_list(enforcer_for(ws), "generate_image", paths))
    real_ws = os.path.realpath(ws)
    assert allowed == all(expected_inside(p, real_ws) for p in paths)
