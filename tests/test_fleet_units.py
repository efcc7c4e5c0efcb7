"""The fleet's parts without a harness: the spec, the store's approvals, budget and rate
limit, the grant binding, and the audit table's chain."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("dbos", reason="the fleet extra (dbos) is not installed")

from cli_support import ROOT, cli_env
from fleet_support import open_approval

from antigravity_sdk import audit
from antigravity_sdk.errors import ConfigurationError, PolicyError
from antigravity_sdk.fleet import AgentSpec
from antigravity_sdk.fleet._spec import with_approvals
from antigravity_sdk.fleet._store import Store
from antigravity_sdk.fleet._worker import TableAudit, call_key
from antigravity_sdk.policy import Decision
from antigravity_sdk.state import secret
from antigravity_sdk.types import ToolCall

POLICIES = """
[[rule]]
name = "ask before writing"
tool = "write_to_file"
decision = "ask_user"
timeout = 5

[[rule]]
tool = "*"
decision = "allow"
"""


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'fleet.sqlite'}")


# -- the spec ------------------------------------------------------------------------------


def test_spec_hash_is_stable_and_covers_every_field(tmp_path: Path) -> None:
    policies = tmp_path / "p.toml"
    policies.write_text(POLICIES)
    one = AgentSpec.from_files(policies, model="m", base_url="http://127.0.0.1:1/v1")
    again = AgentSpec.from_files(policies, model="m", base_url="http://127.0.0.1:1/v1")
    assert one.spec_hash == again.spec_hash and len(one.spec_hash) == 64
    assert one.with_workspace(tmp_path).spec_hash != one.spec_hash
    assert one.model_copy(update={"containment": False}).spec_hash != one.spec_hash
    assert AgentSpec.model_validate_json(one.model_dump_json()) == one


def test_a_bad_policy_file_fails_when_the_spec_is_made_naming_the_rule(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[[rule]]\nname = "oops"\ntool = "run_command"\ndecision = "maybe"\n')
    with pytest.raises(PolicyError, match=r"rule #1 \('oops'\).*decision"):
        AgentSpec.from_files(bad)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("no_such_module_xyz:Hook", "cannot import it"),
        ("antigravity_sdk.policy:enforce", "calling it failed"),
        ("antigravity_sdk.policy:BUCKETS", "expected a Hook"),
    ],
)
def test_hook_paths_that_do_not_give_a_hook_are_refused(path: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        AgentSpec(hooks=(path,)).resolve_hooks()


def test_a_hook_path_without_an_attribute_is_invalid() -> None:
    with pytest.raises(ValueError, match="module:attribute"):
        AgentSpec(hooks=("just_a_module",))


def test_ask_rules_get_the_fleet_handler_and_keep_their_timeout_as_expiry() -> None:
    spec = AgentSpec(policies=POLICIES)
    seen = []

    def approvals(policy: object) -> object:
        seen.append(policy)

        async def handler(call: ToolCall) -> bool:
            return True

        return handler

    policies = with_approvals(spec.load_policies(None), approvals)  # type: ignore[arg-type]
    asks = [p for p in policies if p.decision is Decision.ASK_USER]
    assert len(asks) == 1 and len(seen) == 1 and seen[0].timeout == 5
    # The engine's own bound is lifted past the approval's expiry.
    assert asks[0].timeout is not None and asks[0].timeout > 5
    assert [p.decision for p in policies] == [Decision.ASK_USER, Decision.APPROVE]


# -- grants --------------------------------------------------------------------------------


@given(st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=8), max_size=6))
def test_a_grant_binds_the_call_whatever_the_order_of_its_keys(args: dict[str, object]) -> None:
    forward = ToolCall(name="write_to_file", args=dict(args))
    backward = ToolCall(name="write_to_file", args=dict(reversed(list(args.items()))))
    assert call_key(forward) == call_key(backward)
    assert call_key(forward)[1] != call_key(ToolCall(name="run_command", args=dict(args)))[1]


def test_an_approval_is_answered_once_and_a_grant_is_used_once(store: Store) -> None:
    call = ToolCall(name="write_to_file", args={"TargetFile": "/w/a", "CodeContent": "x"})
    first = open_approval(store, call)
    assert open_approval(store, call) == first  # the same call, waiting again: the same approval
    assert store.consume(first) is None  # pending
    assert store.answer(first, approve=True, by="me") is not None
    assert store.answer(first, approve=False, by="me") is None  # answered already
    assert store.consume(first) is True
    assert store.consume(first) is False  # used
    assert open_approval(store, call) != first  # the same call later needs a new approval


def test_a_grant_never_covers_another_call_or_another_task(store: Store) -> None:
    call = ToolCall(name="write_to_file", args={"TargetFile": "/w/a", "CodeContent": "x"})
    other = ToolCall(name="write_to_file", args={"TargetFile": "/w/b", "CodeContent": "x"})
    granted = open_approval(store, call)
    store.answer(granted, approve=True, by="me")
    assert open_approval(store, other) != granted
    assert open_approval(store, call, task="t2") != granted


def test_an_unanswered_approval_expires_to_deny(store: Store) -> None:
    call = ToolCall(name="write_to_file", args={"TargetFile": "/w/a"})
    approval = open_approval(store, call, expires_in=0.2)
    assert [a.id for a in store.approvals()] == [approval]
    time.sleep(0.3)
    assert store.approvals() == []
    assert store.answer(approval, approve=True, by="late") is None
    assert store.consume(approval) is False
    found = store.approval(approval)
    assert found is not None and found.status == "expired"


# -- the fleet row -------------------------------------------------------------------------


def test_tool_calls_are_counted_atomically_across_threads(store: Store) -> None:
    store.configure(max_tool_calls=50)
    results: list[int] = []

    def charge() -> None:
        for _ in range(20):
            results.append(store.charge_tool_call().tool_calls)

    threads = [threading.Thread(target=charge) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(results) == list(range(1, 81))  # every count once: none lost, none twice
    assert store.state().budget_spent == "the fleet's tool-call budget (50) is spent"


@settings(max_examples=20, deadline=None)
@given(limit=st.integers(1, 5), starts=st.integers(0, 8))
def test_the_turn_rate_never_lets_more_than_the_limit_start(
    tmp_path_factory: pytest.TempPathFactory, limit: int, starts: int
) -> None:
    store = Store(f"sqlite:///{tmp_path_factory.mktemp('rate') / 'f.sqlite'}")
    store.configure(turn_limit=limit, turn_period=3600.0)
    outcomes = [store.start_turn(f"t{i}", 0, "w") for i in range(starts)]
    started = [o for o in outcomes if o[0] >= 0]
    assert len(started) == min(limit, starts)
    assert all(wait > 0 for before, wait in outcomes if before < 0)
    store.dispose()


def test_a_turn_started_again_says_how_often_it_started(store: Store) -> None:
    assert store.start_turn("t", 0, "w")[0] == 0
    assert store.start_turn("t", 0, "w")[0] == 1
    assert store.start_turn("t", 1, "w")[0] == 0


def test_stop_and_resume_flip_the_switch(store: Store) -> None:
    store.set_stopped(True)
    assert store.state().stopped and store.charge_tool_call().stopped
    store.set_stopped(False)
    assert not store.state().stopped


# -- the audit table -----------------------------------------------------------------------


def test_audit_rows_carry_the_fleet_fields_inside_a_verifiable_chain(
    store: Store, tmp_path: Path
) -> None:
    spec = AgentSpec(policies=POLICIES)
    log = TableAudit(store, task_id="t1", worker="w1", spec=spec).copy()
    log.open("policyhash")
    log.write({"v": 2, "kind": "session", "time": "2026-11-26T00:00:00Z"})
    log.close()
    lines = list(store.audit(task_id="t1"))
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert (first["task"], first["worker"], first["spec_hash"]) == ("t1", "w1", spec.spec_hash)
    exported = tmp_path / "audit.jsonl"
    exported.write_text("".join(line + "\n" for line in lines))
    assert audit.verify(exported).intact  # this machine's fleet key, found by itself
    assert audit.verify(exported, store.key).intact
    assert not audit.verify(exported, secret("audit")).intact  # not the audit key
    exported.write_text(exported.read_text().replace('"w1"', '"w2"', 1))
    assert not audit.verify(exported).intact


def test_a_fleet_export_verifies_elsewhere_with_the_fleets_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`fleet audit -o out.jsonl` on one machine, `antigravity audit verify out.jsonl` on
    another: with the same ANTIGRAVITY_FLEET_SECRET, or the secret in a --key-file."""
    fleet_secret = os.urandom(32)
    monkeypatch.setenv("ANTIGRAVITY_FLEET_SECRET", fleet_secret.hex())
    store = Store(f"sqlite:///{tmp_path / 'fleet.sqlite'}")
    assert store.key == fleet_secret
    log = TableAudit(store, task_id="t1", worker="w1", spec=AgentSpec()).copy()
    log.open("policyhash")
    log.close()
    exported = tmp_path / "out.jsonl"
    exported.write_text("".join(line + "\n" for line in store.audit()))
    elsewhere = tmp_path / "elsewhere"  # another machine: its own state directory
    key_file = tmp_path / "fleet.key"
    key_file.write_text(fleet_secret.hex())

    def verify(*args: str, **env: str | None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "antigravity_sdk", "audit", "verify", str(exported), *args],
            env=cli_env(XDG_STATE_HOME=str(elsewhere), **env),
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert "chain intact" in verify().stdout  # the same secret in the environment
    assert (
        "chain intact" in verify("--key-file", str(key_file), ANTIGRAVITY_FLEET_SECRET=None).stdout
    )
    done = verify(ANTIGRAVITY_FLEET_SECRET=os.urandom(32).hex())
    assert done.returncode == 1 and "no keyed line verifies" in done.stdout


def test_importing_the_fleet_without_the_extra_names_it(tmp_path: Path) -> None:
    (tmp_path / "dbos.py").write_text("raise ImportError('no dbos here')\n")
    env = cli_env(PYTHONPATH=f"{tmp_path}:{ROOT}")
    done = subprocess.run(
        [sys.executable, "-c", "import antigravity_sdk.fleet"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "pip install 'antigravity-sdk[fleet]'" in done.stderr
    core = subprocess.run(
        [sys.executable, "-c", "import antigravity_sdk, antigravity_sdk.policy"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert core.returncode == 0, core.stderr


@pytest.mark.skipif(sys.version_info < (3, 12), reason="DBOS uses unixepoch('subsec') on 3.12+")
def test_unixepoch_subsec_works_on_every_sqlite_connection(tmp_path: Path) -> None:
    """DBOS stamps SQLite rows with `unixepoch('subsec')` on Python 3.12+; an SQLite older
    than 3.42 gives NULL for it unless the fleet supplies the function."""
    import sqlalchemy as sa

    engine = sa.create_engine(f"sqlite:///{tmp_path / 'any.sqlite'}")
    with engine.connect() as conn:
        value = conn.execute(sa.text("SELECT unixepoch('subsec') * 1000")).scalar()
    engine.dispose()
    assert value is not None and abs(value / 1000 - time.time()) < 60
