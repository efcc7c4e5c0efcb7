"""Containment's plan (what is granted, computed around the credentials), its settings, and
the supervisor's Landlock calls on the real kernel. The attacks against the real harness are
in tests/integration/test_containment.py."""

from __future__ import annotations

import logging
import os
import socket
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from antigravity_sdk import Agent, Containment, ContainmentError, policy
from antigravity_sdk.containment import (
    CORE_ENV,
    CREDENTIAL_PATHS,
    READ,
    WRITE,
    ContainmentInForce,
    Upstream,
    landlock_abi,
    plan,
    unavailable_reason,
)
from antigravity_sdk.harness import confine
from antigravity_sdk.harness.connection import RemoteConnection

LANDLOCK = pytest.mark.skipif(landlock_abi() < 1, reason="this kernel offers no Landlock")


def _plan(tmp: Path, **kwargs: object) -> ContainmentInForce:
    spec = kwargs.pop("spec", Containment())
    assert isinstance(spec, Containment)
    return plan(
        spec,
        workspaces=[tmp / "ws"],
        state=[tmp / "save", tmp / "app"],
        tmp_dir=tmp / "tmpdir",
        abi=7,
        proxy_port=3128,
        upstreams=[Upstream(8080, "http://127.0.0.1:11434/v1", "model")],
        sockets=kwargs.pop("sockets", []),  # type: ignore[arg-type]
        **kwargs,  # type: ignore[arg-type]
    )


# -- settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"connect": [0]}, "out of range"),
        ({"connect": [70000]}, "out of range"),
        ({"connect": ["443"]}, "not an int"),
        ({"connect": [True]}, "not an int"),
        ({"bind": [-1]}, "out of range"),
        ({"read": "/data"}, "a list of paths"),
        ({"env": "TOKEN"}, "a list of strings"),
        ({"hosts": "pypi.org"}, "a list of strings"),
        ({"hosts": ["pypi.org/simple"]}, "hosts"),
        ({"hosts": [443]}, "not a string"),
        ({"unprotect": [".git"]}, "not protected by default"),
        ({"required": "yes"}, "must be a bool"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ContainmentError, match=message):
        Containment(**kwargs)  # type: ignore[arg-type]


def test_paths_are_expanded_and_resolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    spec = Containment(read=["~/data"], write=[tmp_path / "a" / ".." / "b"], bind=[0])
    assert spec.read == (tmp_path.resolve() / "data",)
    assert spec.write == (tmp_path.resolve() / "b",)
    assert spec.bind == (0,)


# -- the plan -------------------------------------------------------------------------------


def test_the_plan_writes_where_the_agent_works_and_connects_only_to_its_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home" / ".ssh").mkdir(parents=True)
    contained = _plan(tmp_path, spec=Containment(write=[tmp_path / "extra"], connect=[5432]))
    assert contained.write == (
        tmp_path / "ws",
        tmp_path / "save",
        tmp_path / "app",
        tmp_path / "tmpdir",
        tmp_path / "extra",
    )
    assert contained.connect == (3128, 5432, 8080)
    assert contained.bind == (0,)
    assert tmp_path / "home" / ".ssh" in contained.hidden
    assert contained.enforced == ("filesystem", "network", "scope")
    assert not contained.not_enforced
    text = "\n".join(contained.describe())
    assert str(tmp_path / "ws") in text and ".ssh" in text and "3128, 5432, 8080" in text
    assert contained.as_dict()["connect"] == [3128, 5432, 8080]


def test_a_named_credential_is_readable_and_not_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    (home / ".ssh").mkdir(parents=True)
    contained = _plan(tmp_path, spec=Containment(read=["~/.ssh"]))
    assert home / ".ssh" not in contained.hidden
    assert f"fs:{READ}:{home / '.ssh'}" in contained.supervisor_rules()


@pytest.mark.parametrize(("abi", "missing"), [(1, 3), (3, 2), (4, 1), (5, 1), (6, 0)])
def test_an_older_abi_says_what_it_cannot_enforce(tmp_path: Path, abi: int, missing: int) -> None:
    contained = plan(Containment(), workspaces=[], state=[], tmp_dir=tmp_path, abi=abi, sockets=[])
    assert len(contained.not_enforced) == missing
    assert contained.enforced[0] == "filesystem"


def test_the_environment_is_passed_by_allow_list(tmp_path: Path) -> None:
    env = {
        "PATH": "/usr/bin",
        "HOME": "/h",
        "GEMINI_API_KEY": "k",
        "GITHUB_TOKEN": "t",
        "DATABASE_URL": "postgresql://u:pw@db/x",
        "ANTIGRAVITY_FLEET_DB": "postgresql://u:pw@db/fleet",
        "MYSQL_PWD": "pw",
        "SENTRY_DSN": "https://k@sentry",
        "SLACK_WEBHOOK_URL": "https://hooks",
        "CI_JOB_JWT_V2": "jwt",
        "GH_PAT": "pat",
        "REDIS_URL": "redis://:pw@r",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "AWS_CA_BUNDLE": "/etc/ca.pem",
    }
    spec = Containment(env=["GITHUB_TOKEN"])
    contained = plan(spec, workspaces=[], state=[], tmp_dir=tmp_path, abi=7, env=env, sockets=[])
    given = contained.environment(env)
    assert {k: v for k, v in given.items() if "PROXY" not in k.upper()} == {
        "PATH": "/usr/bin",
        "HOME": "/h",
        "GITHUB_TOKEN": "t",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "AWS_CA_BUNDLE": "/etc/ca.pem",
        "TMPDIR": str(tmp_path),
    }
    withheld = set(env) - set(given)
    assert set(contained.env_withheld) == withheld
    assert "DATABASE_URL" in withheld and "REDIS_URL" in withheld


@given(name=st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=30))
def test_no_name_outside_the_core_set_is_passed_unnamed(name: str) -> None:
    contained = plan(
        Containment(), workspaces=[], state=[], tmp_dir=Path("/t"), abi=7, env={}, sockets=[]
    )
    given = contained.environment({name: "v"})
    assert (name in given) == (name in CORE_ENV or name.startswith("LC_") or name == "TMPDIR")


def test_commands_get_the_egress_proxy_and_loopback_stays_direct(tmp_path: Path) -> None:
    given = _plan(tmp_path).environment({})
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        assert given[name] == "http://127.0.0.1:3128"
    assert given["NO_PROXY"] == given["no_proxy"] == "localhost,127.0.0.1,::1"


def test_unavailable_reasons() -> None:
    assert "not spawned by this process" in unavailable_reason(7, local=False)
    if sys.platform == "linux":
        assert "no Landlock" in unavailable_reason(0, local=True)
        assert unavailable_reason(1, local=True) == ""


def test_every_default_credential_path_is_under_home_or_absolute() -> None:
    assert all(p.startswith(("~/", "/")) for p in CREDENTIAL_PATHS)
    for must in ("~/.ssh", "~/.aws", "~/.gnupg", "~/.config/gcloud", "~/.kube", "~/.docker"):
        assert must in CREDENTIAL_PATHS
    for must in ("~/.netrc", "~/.git-credentials", "~/.pypirc", "~/.npmrc"):
        assert must in CREDENTIAL_PATHS


# -- the grants never cover a credential, and lose nothing else ---------------------------

_NAMES = st.sampled_from(["a", "b", "c", ".ssh", ".aws", "d"])
_TREE = st.lists(st.lists(_NAMES, min_size=1, max_size=4), min_size=1, max_size=12)


def _rules(contained: ContainmentInForce) -> list[tuple[int, Path]]:
    out = []
    for rule in contained.supervisor_rules():
        kind, _, value = rule.partition(":")
        if kind == "fs":
            rights, _, path = value.partition(":")
            out.append((int(rights), Path(path)))
    return out


def _covered(path: Path, rules: list[tuple[int, Path]], right: int) -> bool:
    real = Path(os.path.realpath(path))
    return any(
        rights & right
        and (Path(os.path.realpath(p)) == real or Path(os.path.realpath(p)) in real.parents)
        for rights, p in rules
    )


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(tree=_TREE, hide=st.lists(st.lists(_NAMES, min_size=1, max_size=3), max_size=3), link=_TREE)
def test_no_grant_reaches_a_hidden_path_and_every_other_file_stays_readable(
    tmp_path_factory: pytest.TempPathFactory,
    tree: list[list[str]],
    hide: list[list[str]],
    link: list[list[str]],
) -> None:
    """A workspace holding credential paths at any depth, with symlinks to them: the
    supervisor's rules grant nothing at or below a hidden path (a directory above one keeps
    only listing), yet every file that is not hidden is still readable and writable."""
    ws = tmp_path_factory.mktemp("tree")
    for parts in tree:  # directories, each with a file
        path = ws.joinpath(*parts)
        path.mkdir(parents=True, exist_ok=True)
        (path / "f").touch()
    hidden = [ws.joinpath(*parts) for parts in hide]
    for i in range(len(link)):  # symlinks to hidden places, below them, and their parents
        if hidden and i % 4 == 1:
            (ws / f"link{i}").symlink_to(hidden[i % len(hidden)] / "f")
        elif hidden:
            target = (
                hidden[i % len(hidden)].parents[i % 2] if i % 3 == 0 else hidden[i % len(hidden)]
            )
            source = ws / f"link{i}"
            source.symlink_to(target)
    contained = plan(
        Containment(hide=hidden),
        workspaces=[ws],
        state=[],
        tmp_dir=ws / "tmp-not-made",
        abi=7,
        sockets=[],
    )
    rules = _rules(contained)
    hidden_real = {Path(os.path.realpath(h)) for h in hidden}
    for rights, path in rules:
        real = Path(os.path.realpath(path))
        for h in hidden_real:
            if real == h or h in real.parents:
                pytest.fail(f"a rule grants {path} -> {real}, at or below hidden {h}")
            if real in h.parents:
                assert rights & ~8 == 0 or path == Path("/"), (path, rights)
    for file in ws.rglob("*"):
        if file.is_symlink() or not file.is_file():
            continue
        real = Path(os.path.realpath(file))
        if any(real == h or h in real.parents for h in hidden_real):
            continue
        assert _covered(file, rules, 4), f"{file} is no longer readable"
        assert _covered(file, rules, 2), f"{file} is no longer writable"


def test_dev_is_never_granted_whole(tmp_path: Path) -> None:
    rules = _rules(_plan(tmp_path))
    assert (READ, Path("/dev")) not in rules
    assert all(
        p == Path("/dev") or Path("/dev") not in p.parents or rights != READ for rights, p in rules
    )
    granted_dev = {p for _, p in rules if p == Path("/dev") or Path("/dev") in p.parents}
    assert Path("/dev/null") in granted_dev and Path("/dev/tty") in granted_dev
    assert not any("sd" in p.name or "vd" in p.name or "nvme" in p.name for p in granted_dev)


def test_writable_roots_never_make_device_nodes() -> None:
    assert not WRITE & (1 << 6) and not WRITE & (1 << 11)


# -- the supervisor's calls, on this kernel ------------------------------------------------


def _in_child(rules: list[str], attempt: object) -> int:
    """Apply `rules` in a forked child, run `attempt()`, return its exit code (0: it worked,
    13: refused with EACCES/EPERM)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            confine.apply_landlock(rules)
            attempt()  # type: ignore[operator]
            code = 0
        except PermissionError:
            code = 13
        except OSError as exc:
            code = 20 + (exc.errno or 0) % 50
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@LANDLOCK
def test_a_file_rule_with_directory_rights_is_masked_not_refused(tmp_path: Path) -> None:
    target = tmp_path / "f"
    target.write_text("x")
    rules = [f"fs:{WRITE}:{target}", f"fs:{READ}:/usr", f"fs:{READ}:/lib"]
    assert _in_child(rules, lambda: target.write_text("y")) == 0
    assert target.read_text() == "y"
    assert _in_child(rules, lambda: (tmp_path / "g").write_text("y")) == 13


@LANDLOCK
def test_a_missing_path_is_skipped(tmp_path: Path) -> None:
    rules = [f"fs:{WRITE}:{tmp_path / 'gone'}", f"fs:{WRITE}:{tmp_path}"]
    assert _in_child(rules, lambda: (tmp_path / "ok").write_text("y")) == 0


@pytest.mark.skipif(landlock_abi() < 4, reason="TCP rules need Landlock ABI 4")
def test_only_listed_ports_connect() -> None:
    with socket.socket() as one, socket.socket() as two:
        for s in (one, two):
            s.bind(("127.0.0.1", 0))
            s.listen()
        port_one, port_two = one.getsockname()[1], two.getsockname()[1]

        def connect(port: int) -> None:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()

        rules = [f"fs:{READ}:/", f"connect:{port_one}"]  # (name lookup reads /etc)
        assert _in_child(rules, lambda: connect(port_one)) == 0
        assert _in_child(rules, lambda: connect(port_two)) == 13


@LANDLOCK
def test_a_rule_the_kernel_refuses_fails_the_child(tmp_path: Path) -> None:
    code = _in_child([f"connect:{1 << 20}"], lambda: None)  # port past 65535: EINVAL
    assert code not in (0, 13)


# -- build() --------------------------------------------------------------------------------


def _builder() -> object:
    return (
        Agent.builder().model("m", base_url="http://127.0.0.1:9/v1").policies([policy.allow_all()])
    )


def test_a_remote_harness_cannot_be_contained(caplog: pytest.LogCaptureFixture) -> None:
    conn = RemoteConnection("127.0.0.1", 1, "key")
    with pytest.raises(ContainmentError, match="not spawned by this process"):
        _builder().connection(conn).containment(Containment(required=True)).build()  # type: ignore[attr-defined]
    with caplog.at_level(logging.WARNING, logger="antigravity_sdk.agent"):
        agent = _builder().connection(conn).build()  # type: ignore[attr-defined]
    assert agent.containment is None
    assert [r.getMessage() for r in caplog.records if "uncontained" in r.getMessage()]


def test_switching_it_off_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="antigravity_sdk.agent"):
        _builder().containment(None).build()  # type: ignore[attr-defined]
    assert len([r for r in caplog.records if "containment is off" in r.getMessage()]) == 1


def test_containment_takes_a_containment_or_none() -> None:
    from antigravity_sdk import ConfigurationError

    with pytest.raises(ConfigurationError, match="Containment or None"):
        _builder().containment({"write": ["/x"]})  # type: ignore[attr-defined]


@LANDLOCK
def test_required_builds_where_the_kernel_offers_landlock() -> None:
    agent = _builder().containment(Containment(required=True)).build()  # type: ignore[attr-defined]
    assert agent.containment is None  # nothing is in force before start()
