"""The plan of what a contained agent cannot reach: protected paths inside the writable roots
(and the directories on their way, pinned as mount points), Unix sockets outside the agent's
directories, the endpoints the harness is told (the SDK holds their credentials), the hosts
allowed through the egress proxy. The kernel's side is in
tests/integration/test_confine_namespaces.py, the attacks in tests/integration/."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from antigravity_sdk import Containment, ContainmentError
from antigravity_sdk.containment import (
    PROTECTED_NAMES,
    ContainmentInForce,
    Upstream,
    for_agent,
    harness_endpoints,
    plan,
)
from antigravity_sdk.harness.config import ModelSettings
from antigravity_sdk.models import GeminiOptions
from antigravity_sdk.types import McpHttpServer, McpStdioServer


def _plan(tmp: Path, spec: Containment | None = None, **kwargs: object) -> ContainmentInForce:
    return plan(
        spec or Containment(),
        workspaces=[tmp / "ws"],
        state=[tmp / "save"],
        tmp_dir=tmp / "tmpdir",
        abi=7,
        sockets=kwargs.pop("sockets", []),  # type: ignore[arg-type]
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / ".vscode").mkdir()
    (ws / ".envrc").write_text("")
    (ws / "src").mkdir()
    return ws


# -- protected paths ----------------------------------------------------------------------------


def test_what_exists_of_the_default_names_is_held_and_the_rest_checked_at_stop(
    tmp_path: Path, repo: Path
) -> None:
    contained = _plan(tmp_path)
    assert set(contained.protected) == {
        repo / ".git" / "hooks",
        repo / ".git" / "config",
        repo / ".vscode",
        repo / ".envrc",
    }
    assert repo / ".gitmodules" in contained.absent
    assert contained.planted() == ()
    (repo / ".gitmodules").write_text("[submodule]\n")
    assert contained.planted() == (repo / ".gitmodules",)


def test_the_rules_pin_the_directories_on_the_way_and_hold_each_path(
    tmp_path: Path, repo: Path
) -> None:
    rules = _plan(tmp_path).supervisor_rules()
    assert "readonly" in rules
    assert f"rw:{repo}" in rules
    assert f"rw:{repo / '.git'}" in rules  # pinned: `.git` cannot be moved aside
    assert f"protect:{repo / '.git' / 'hooks'}" in rules
    # every rw: bind comes before the first protect: bind
    last_rw = max(i for i, r in enumerate(rules) if r.startswith("rw:"))
    first_protect = min(i for i, r in enumerate(rules) if r.startswith("protect:"))
    assert last_rw < first_protect
    assert f"rw:{repo / 'src'}" not in rules


def test_unprotect_gives_a_name_up_and_says_so(tmp_path: Path, repo: Path) -> None:
    contained = _plan(tmp_path, Containment(unprotect=[".vscode"]))
    assert repo / ".vscode" not in contained.protected
    assert contained.unprotected == (".vscode",)
    assert any("unprotect" in line and ".vscode" in line for line in contained.describe())


def test_protect_adds_and_a_missing_path_is_refused(tmp_path: Path, repo: Path) -> None:
    contained = _plan(tmp_path, Containment(protect=[repo / "src"]))
    assert repo / "src" in contained.protected
    with pytest.raises(ContainmentError, match="does not exist"):
        _plan(tmp_path, Containment(protect=[repo / "nope"]))


def test_a_protected_path_through_a_symlink_in_a_root_is_refused(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "real" / "hooks").mkdir(parents=True)
    (ws / "real" / "config").write_text("")
    ws.joinpath(".git").symlink_to(ws / "real")
    with pytest.raises(ContainmentError, match="symlink"):
        _plan(tmp_path)


def test_the_sdks_own_files_inside_a_root_are_held_and_outside_left_alone(
    tmp_path: Path, repo: Path
) -> None:
    audit = repo / "audit.jsonl"
    audit.write_text("")
    outside = tmp_path / "policies.toml"
    outside.write_text("")
    contained = _plan(tmp_path, controls=[audit, outside, repo / "missing.toml"])
    assert audit in contained.protected
    assert outside not in contained.protected  # read-only as all outside the roots
    assert repo / "missing.toml" not in contained.protected


def test_a_worktrees_git_dir_is_held_too(tmp_path: Path) -> None:
    main = tmp_path / "main" / ".git"
    (main / "worktrees" / "w").mkdir(parents=True)
    (main / "hooks").mkdir()
    (main / "config").write_text("")
    (main / "worktrees" / "w" / "commondir").write_text("../..\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".git").write_text(f"gitdir: {main / 'worktrees' / 'w'}\n")
    contained = _plan(tmp_path, Containment(write=[tmp_path / "main"]))
    assert main / "hooks" in contained.protected and main / "config" in contained.protected


def test_a_missing_hooks_dir_of_a_repository_is_made_so_it_can_be_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / ".git" / "config").write_text("")
    contained = for_agent(
        Containment(),
        abi=7,
        workspaces=[ws],
        state=[tmp_path / "save"],
        model=ModelSettings(name="m", base_url="http://127.0.0.1:9/v1"),
        mcp_servers=[],
    )
    try:
        assert (ws / ".git" / "hooks").is_dir()
        assert ws / ".git" / "hooks" in contained.protected
    finally:
        contained.remove_tmp_dir()


@given(st.sampled_from(PROTECTED_NAMES))
def test_every_default_name_is_relative_and_plain(name: str) -> None:
    assert not name.startswith("/") and ".." not in name.split("/")


# -- Unix sockets -------------------------------------------------------------------------------


def test_sockets_outside_the_roots_are_masked_unless_named(tmp_path: Path) -> None:
    outside, inside, named = tmp_path / "o.sock", tmp_path / "ws" / "i.sock", tmp_path / "n.sock"
    contained = _plan(
        tmp_path, Containment(sockets=[named]), sockets=[outside, inside, named, outside]
    )
    assert contained.masked == (outside,)
    assert contained.sockets == (named,)
    assert f"mask:{outside}" in contained.supervisor_rules()


def test_the_bound_sockets_are_read_from_the_kernel(tmp_path: Path) -> None:
    path = tmp_path / "listening.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        server.listen()
        contained = plan(Containment(), workspaces=[], state=[], tmp_dir=tmp_path / "t", abi=7)
    assert path in contained.masked


# -- endpoints and hosts ------------------------------------------------------------------------


def _served(model: ModelSettings, servers: list[object], tmp: Path) -> ContainmentInForce:
    return for_agent(
        Containment(),
        abi=7,
        workspaces=[tmp / "ws"],
        state=[tmp / "save"],
        model=model,
        mcp_servers=servers,  # type: ignore[arg-type]
    )


def test_the_gemini_key_stays_with_the_sdk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    model = ModelSettings(
        name="gemini-x", api_key="AIza-secret", options=GeminiOptions(headers={"x-extra": "h"})
    )
    contained = _served(model, [], tmp_path)
    try:
        (upstream,) = contained.upstreams
        assert upstream.what == "model"
        assert upstream.target == "https://generativelanguage.googleapis.com"
        assert upstream.headers == {"x-extra": "h", "x-goog-api-key": "AIza-secret"}
        assert "AIza-secret" not in repr(contained) and "AIza-secret" not in str(
            contained.as_dict()
        )
        told, _ = harness_endpoints(model, [], contained)
        assert told.api_key is not None and "AIza" not in told.api_key
        assert told.options is not None and told.options.headers == {}
        assert told.options.endpoint_url == f"http://127.0.0.1:{upstream.port}"
        assert contained.hosts == ()  # served by the SDK: not open to commands too
        assert upstream.port in contained.connect and contained.proxy_port in contained.connect
    finally:
        contained.remove_tmp_dir()


def test_an_openai_endpoint_and_http_mcp_servers_go_through_the_sdk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    model = ModelSettings(name="m", base_url="http://127.0.0.1:11434/v1")
    mcp = McpHttpServer(name="docs", url="https://mcp.example.com/mcp", headers={"A": "tok"})
    stdio = McpStdioServer(name="local", command="server")
    contained = _served(model, [mcp, stdio], tmp_path)
    try:
        model_up, mcp_up = contained.upstreams
        told, servers = harness_endpoints(model, [mcp, stdio], contained)
        assert told.base_url == f"http://127.0.0.1:{model_up.port}/v1"
        assert model_up.target == "http://127.0.0.1:11434/v1"
        http, kept = servers
        assert isinstance(http, McpHttpServer)
        assert http.url == f"http://127.0.0.1:{mcp_up.port}/mcp" and http.headers == {}
        assert mcp_up.headers == {"A": "tok"}
        assert kept is stdio
        # endpoints the SDK serves are not open through the proxy too (every port)
        assert contained.hosts == ()
        assert len({contained.proxy_port, model_up.port, mcp_up.port}) == 3
    finally:
        contained.remove_tmp_dir()


def test_uncontained_endpoints_are_told_as_they_are() -> None:
    model = ModelSettings(name="m", base_url="http://127.0.0.1:11434/v1")
    assert harness_endpoints(model, [], None) == (model, ())


def test_hosts_add_to_the_automatic_ones(tmp_path: Path) -> None:
    contained = _plan(tmp_path, Containment(hosts=["PyPI.org.", "*.GitHub.com"]), hosts=["a.io"])
    assert contained.hosts == ("a.io", "pypi.org", "*.github.com")
    assert "pypi.org" in " ".join(contained.describe())


def test_the_state_dir_is_hidden_like_a_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    (state / "antigravity-sdk").mkdir(parents=True)
    contained = _plan(tmp_path)
    assert state / "antigravity-sdk" in contained.hidden
    assert os.fspath(state / "antigravity-sdk") in {str(p) for p in contained.guarded}


def test_upstream_url_keeps_the_endpoints_path() -> None:
    assert Upstream(9, "https://h/v1/", "model").url == "http://127.0.0.1:9/v1"
    assert Upstream(9, "https://h", "model").url == "http://127.0.0.1:9"


# -- the harness binary -------------------------------------------------------------------------


def test_a_compiled_harness_runs_execute_only_and_a_script_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from antigravity_sdk.harness.install import execute_only

    monkeypatch.setenv("ANTIGRAVITY_CACHE_DIR", str(tmp_path / "cache"))
    elf = tmp_path / "bin" / "localharness"
    elf.parent.mkdir()
    elf.write_bytes(b"\x7fELF" + b"\0" * 64)
    elf.chmod(0o755)
    copy = execute_only(elf)
    assert copy != elf and copy.read_bytes() == elf.read_bytes()
    assert copy.stat().st_mode & 0o777 == 0o111  # unreadable: the kernel makes it non-dumpable
    assert elf.stat().st_mode & 0o777 == 0o755  # the user's own binary is left alone
    assert execute_only(elf) == copy  # made once
    cached = tmp_path / "cache" / "harness" / "0.1.22" / "localharness"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(elf.read_bytes())
    cached.chmod(0o755)
    assert execute_only(cached) == cached and cached.stat().st_mode & 0o777 == 0o111
    script = tmp_path / "bin" / "harness.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    assert execute_only(script) == script  # its interpreter must read it
