"""Fixtures for the integration suite: the REAL `localharness`, offline via ScriptedModel.

Every test in this directory is marked `harness`. The binary is found the way users find
it (`find_harness()`: `$ANTIGRAVITY_HARNESS_PATH`, the SDK cache that `make test` fills,
an installed `google-antigravity`, `PATH`). Without one the tests are skipped locally and
FAIL under CI (env `CI` set), so a CI run can never pass by silently testing nothing.

`make_agent(script, ...)` builds an `Agent` whose save dir, app-data dir (and so the
harness's HOME) and workspace all live in the test's `tmp_path` — never the user's home —
with a fresh `ScriptedModel` the agent starts and stops itself. After the test, every
agent it built is stopped and every harness process it spawned must be gone.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from antigravity_sdk import Agent, AgentBuilder, Hook
from antigravity_sdk.errors import HarnessNotFoundError
from antigravity_sdk.harness.install import find_harness
from antigravity_sdk.testing import Reply as ScriptReply
from antigravity_sdk.testing import ScriptedModel, ScriptFunction
from antigravity_sdk.types import CapabilitiesConfig

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.harness)


_HARNESS: list[Path | HarnessNotFoundError] = []


def _harness() -> Path | HarnessNotFoundError:
    if not _HARNESS:
        try:
            _HARNESS.append(find_harness())
        except HarnessNotFoundError as exc:
            _HARNESS.append(exc)
    return _HARNESS[0]


@pytest.fixture(autouse=True)
def _require_harness() -> Path:
    found = _harness()
    if isinstance(found, HarnessNotFoundError):
        message = (
            "the integration tests need the real localharness binary and find_harness() "
            f"found none: {found}"
        )
        if os.environ.get("CI"):
            pytest.fail(f"{message}\n(CI is set: run `make test`, which installs it first)")
        pytest.skip(message)
    return found


# -- process table ------------------------------------------------------------------------


def process_state(pid: int) -> str | None:
    """The `State:` letter of /proc/<pid>/status, or None when the pid is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("State:"):
                    return line.split()[1]
    except (FileNotFoundError, ProcessLookupError):
        return None
    return "?"


def process_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie — dead, waiting to be reaped — is not alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return process_state(pid) not in (None, "Z", "X")


def host_pid(inner: int) -> int:
    """The pid, as this process sees it, of the process a contained command knows as
    `inner` (its pid in the agent's own PID namespace, as `echo $$` writes it): the one
    process in a PID namespace below this one whose last `NSpid` is `inner`. A pid no
    nested namespace has is returned as it is (the agent runs uncontained)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                nspid = next((line.split()[1:] for line in f if line.startswith("NSpid:")), [])
        except OSError:
            continue
        if len(nspid) > 1 and int(nspid[-1]) == inner:
            found.append(int(nspid[0]))
    assert len(found) <= 1, f"pid {inner} is in several agents' namespaces: {found}"
    return found[0] if found else inner


async def wait_gone(pid: int, within: float = 3.0) -> bool:
    """Wait until `pid` no longer runs; True if it is gone in time."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not process_alive(pid):
            return True
        await asyncio.sleep(0.02)
    return not process_alive(pid)


def harness_pid(agent: Agent) -> int:
    pid = agent.harness_pid
    assert pid is not None, "the agent is not started, or its harness is not a local process"
    return pid


# -- the agent factory ----------------------------------------------------------------------


@dataclass
class Workspace:
    root: Path
    ws: Path
    save: Path
    app: Path


@dataclass
class AgentFactory:
    """Builds agents on the real harness with everything under `tmp_path`."""

    env: Workspace
    agents: list[Agent] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)

    def builder(
        self, script: Sequence[ScriptReply] | ScriptFunction | ScriptedModel = ()
    ) -> tuple[AgentBuilder, ScriptedModel]:
        model = script if isinstance(script, ScriptedModel) else ScriptedModel(script)
        builder = (
            Agent.builder()
            .model(model)
            .workspaces([self.env.ws])
            .save_dir(self.env.save)
            .app_data_dir(self.env.app)
        )
        return builder, model

    def __call__(
        self,
        script: Sequence[ScriptReply] | ScriptFunction | ScriptedModel = (),
        *,
        hooks: Iterable[Hook] = (),
        policies: Iterable[Any] | None = None,
        tools: Iterable[Any] = (),
        capabilities: CapabilitiesConfig | None = None,
        hook_timeout: float | None = None,
        turn_timeout: float = 30.0,
        configure: Callable[[AgentBuilder], AgentBuilder] | None = None,
    ) -> tuple[Agent, ScriptedModel]:
        """An unstarted agent and its model; `policies=None` keeps the SDK's default."""
        builder, model = self.builder(script)
        builder.hooks(hooks).tools(tools).turn_timeout(turn_timeout)
        if policies is not None:
            builder.policies(policies)
        if capabilities is not None:
            builder.capabilities(capabilities)
        if hook_timeout is not None:
            builder.hook_timeout(hook_timeout)
        if configure is not None:
            builder = configure(builder)
        agent = builder.build()
        self.agents.append(agent)
        self._record_pid_on_start(agent)
        return agent, model

    def _record_pid_on_start(self, agent: Agent) -> None:
        # Every harness a test spawns is checked at teardown, whatever the test does.
        start = agent.start

        async def start_and_record() -> None:
            await start()
            if agent.harness_pid is not None:
                self.pids.append(agent.harness_pid)

        agent.start = start_and_record  # type: ignore[method-assign]


@pytest.fixture
def env(tmp_path: Path) -> Workspace:
    ws = tmp_path / "ws"
    ws.mkdir()
    return Workspace(root=tmp_path, ws=ws.resolve(), save=tmp_path / "save", app=tmp_path / "app")


@pytest.fixture
async def make_agent(env: Workspace) -> AsyncIterator[AgentFactory]:
    factory = AgentFactory(env)
    yield factory
    for agent in factory.agents:
        if agent.started:
            await asyncio.wait_for(agent.stop(), 10)
    leftovers = [pid for pid in factory.pids if not await wait_gone(pid)]
    assert not leftovers, f"harness processes outlived their agents: {leftovers}"


def tool_messages(model: ScriptedModel, request: int) -> list[str]:
    """The `role: tool` message contents of the model's `request`-th request."""
    return [str(m.get("content", "")) for m in model.requests[request].tool_results]
