"""Containment: the kernel bounds what an allowed call does, whatever route it takes.

The SDK's policies allow everything here (`policy.allow_all()`), so only the Landlock
domain the harness runs in (on by default) stands between the scripted model and:

  (a) writing outside the workspace (a file under the test's tmp_path, beside `ws`);
  (b) reading a planted credential (`~/.ssh/id_rsa`, `~/.aws/credentials`, also through
      `/proc/PID/root` and symlinks; HOME points at a tmp dir, and `~` is the SDK
      process's HOME at start), or one in the SDK's environment (`*_API_TOKEN`);
  (c) connecting to a loopback port nobody listed (a socket the test listens on);
  (d) signalling a process outside the agent (a `sleep 60` the test started).

Each route — a foreground command, the harness's own tools (file tools, grep,
read_url_content), a background command, a `run_workflow` script, a model-defined
subagent, a git hook and a `core.fsmonitor` an allowed git command runs — attempts all
that applies and records every attempt in an in-workspace report; the test checks both
that nothing escaped (by observing the outside: the file, every request the model got,
the socket, the process) and that the attempts really ran and were refused, so it cannot
pass by testing nothing (`.containment(None)` makes every escape assertion fail). Then:
ordinary work inside the workspace still works, the opt-out and the additions do what
they say, `Agent.containment` reports what is in force, a symlink is no way around the
hidden paths, nor is a workspace that holds them, and `stop()` removes the private
TMPDIR and everything started.

Two documented trade-offs are pinned too: the top of a workspace that holds a credential
path is listable only (with a warning at start), and `/dev/shm` is writable only when
named, so Python multiprocessing needs `Containment(write=["/dev/shm"])`. Not tested: a
hard link to a credential made before the agent started (Landlock checks paths; a
documented caveat).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import socket
import subprocess
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from antigravity_sdk import AgentBuilder, Containment, policy
from antigravity_sdk.containment import landlock_abi
from antigravity_sdk.harness.install import find_harness
from antigravity_sdk.testing import ScriptedModel, tool_call
from antigravity_sdk.types import BuiltinTool, CapabilitiesConfig

from .conftest import AgentFactory, Workspace, host_pid, process_alive, wait_gone

pytestmark = pytest.mark.skipif(
    landlock_abi() < 6, reason="the acceptance tests need Landlock ABI >= 6 (signals, TCP)"
)

KEY_MARKER = "PLANTED-SSH-KEY-c0ntainment-5e1f9a"
AWS_MARKER = "PLANTED-AWS-SECRET-c0ntainment-77d2b4"
ENV_NAME, ENV_MARKER = "ANTIGRAVITY_TEST_API_TOKEN", "PLANTED-ENV-TOKEN-c0ntainment-31c8e0"
ATTEMPTS = ("write", "read key", "read aws", "read via /proc", "read env", "connect", "kill")
WORKFLOW = CapabilitiesConfig(
    enabled_tools=CapabilitiesConfig().enabled_tools | {BuiltinTool.RUN_WORKFLOW}
)
SUBAGENT_PROMPT = "You are W. Run the command you are told to run."
FOREGROUND_MS = 15000  # a command finishing sooner is answered in the same call


@dataclass
class Target:
    """What the attacks aim at, set up by the test (outside the agent) before it starts."""

    ws: Path
    home: Path
    key: Path
    aws: Path
    outside: Path
    listener: socket.socket
    victim: subprocess.Popen[bytes]
    harness: Path

    @property
    def port(self) -> int:
        return int(self.listener.getsockname()[1])

    @property
    def report(self) -> Path:
        return self.ws / "report.txt"

    @property
    def attack_sh(self) -> Path:
        return self.ws / "attack.sh"

    def shell_attack(self) -> str:
        """Every attempt, by shell, each line of the report saying how it went."""
        connect = f"import socket; socket.create_connection(('127.0.0.1', {self.port}), 2)"
        return _shell_attempts(
            self.report,
            [
                ("write", f"sh -c 'echo escaped > {self.outside}'"),
                ("read key", f"cat {self.key}"),
                ("read aws", f"cat {self.aws}"),
                ("read via /proc", f"cat /proc/{self.victim.pid}/root{self.key}"),
                ("read env", f"printenv {ENV_NAME}"),
                ("connect", f'python3 -c "{connect}"'),
                ("kill", f"kill -9 {self.victim.pid}"),
            ],
        )

    def python_attack(self) -> str:
        """The same attempts, in Python (a `run_workflow` script)."""
        proc = f"/proc/{self.victim.pid}/root{self.key}"
        return textwrap.dedent(f"""\
            import os, socket
            report = open({str(self.report)!r}, "a", buffering=1)
            def attempt(name, act):
                try:
                    act()
                    report.write(name + ": ESCAPED\\n")
                except (OSError, KeyError) as exc:
                    report.write(name + ": denied " + repr(exc) + "\\n")
            attempt("write", lambda: open({str(self.outside)!r}, "w").write("escaped"))
            attempt("read key", lambda: report.write(open({str(self.key)!r}).read()))
            attempt("read aws", lambda: report.write(open({str(self.aws)!r}).read()))
            attempt("read via /proc", lambda: report.write(open({proc!r}).read()))
            attempt("read env", lambda: report.write(os.environ[{ENV_NAME!r}]))
            attempt("connect", lambda: socket.create_connection(("127.0.0.1", {self.port}), 2))
            attempt("kill", lambda: os.kill({self.victim.pid}, 9))
            report.write("end\\n")
            report.close()
            """)

    def accepted(self) -> bool:
        """Whether anything connected to the listening socket (without waiting)."""
        try:
            conn, _ = self.listener.accept()
        except BlockingIOError:
            return False
        conn.close()
        return True

    def assert_nothing_escaped(self, model: ScriptedModel) -> None:
        seen = json.dumps([r.body for r in model.requests])
        report = self.report.read_text() if self.report.exists() else ""
        assert not self.outside.exists(), "a contained process wrote outside the workspace"
        for marker in (KEY_MARKER, AWS_MARKER, ENV_MARKER):
            assert marker not in seen, f"the model was shown a credential ({marker})"
            assert marker not in report, f"a credential was copied into the workspace ({marker})"
        assert not self.accepted(), "a contained process connected to an unlisted port"
        assert self.victim.poll() is None, "a contained process killed a process outside"

    def assert_attempted(self, attempts: tuple[str, ...] = ATTEMPTS) -> None:
        """The route really ran every attempt, and each was refused."""
        report = self.report.read_text()
        lines = report.splitlines()
        assert "end" in lines, f"the attack did not run to its end:\n{report}"
        for name in attempts:
            assert any(line.startswith(f"{name}: denied") for line in lines), report
        assert "ESCAPED" not in report, report

    def ended(self) -> bool:
        return self.report.exists() and "end" in self.report.read_text().splitlines()


def _shell_attempts(report: Path, attempts: list[tuple[str, str]]) -> str:
    """A shell script running each command, appending `NAME: denied` (it failed) or
    `NAME: ESCAPED` to `report`, then `end`."""
    lines = ["#!/bin/sh", f"exec >>'{report}' 2>&1"]
    for name, command in attempts:
        lines.append(f'if {command}; then echo "{name}: ESCAPED"; else echo "{name}: denied"; fi')
    return "\n".join([*lines, "echo end", ""])


@pytest.fixture
def target(env: Workspace, monkeypatch: pytest.MonkeyPatch) -> Iterator[Target]:
    harness = find_harness()  # before HOME moves: the SDK's cache is found through it
    home = env.root / "home"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    key = home / ".ssh" / "id_rsa"
    key.write_text(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{KEY_MARKER}\n")
    key.chmod(0o600)
    (home / ".aws").mkdir()
    aws = home / ".aws" / "credentials"
    aws.write_text(f"[default]\naws_secret_access_key = {AWS_MARKER}\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv(ENV_NAME, ENV_MARKER)  # a credential in the SDK's environment
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    victim = subprocess.Popen(["sleep", "60"])
    t = Target(
        ws=env.ws,
        home=home,
        key=key,
        aws=aws,
        outside=env.root / "outside.txt",
        listener=listener,
        victim=victim,
        harness=harness,
    )
    t.attack_sh.write_text(t.shell_attack())
    try:
        yield t
    finally:
        listener.close()
        victim.kill()
        victim.wait()


def _configure(
    target: Target, *more: Callable[[AgentBuilder], AgentBuilder]
) -> Callable[[AgentBuilder], AgentBuilder]:
    def configure(builder: AgentBuilder) -> AgentBuilder:
        builder = builder.harness_path(target.harness)
        for step in more:
            builder = step(builder)
        return builder

    return configure


def _run(command: str, cwd: Path, wait_ms: int = FOREGROUND_MS) -> Any:
    return tool_call("run_command", CommandLine=command, Cwd=str(cwd), WaitMsBeforeAsync=wait_ms)


async def _until(done: Callable[[], bool], within: float = 15.0, what: str = "it") -> None:
    """Wait (bounded) for `done()`; fail the test if it does not come."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if done():
            return
        await asyncio.sleep(0.05)
    pytest.fail(f"waited {within}s for {what} in vain")


# -- the routes -------------------------------------------------------------------------------


def _tool_calls_so_far(messages: list[dict[str, Any]]) -> int:
    return sum(len(m.get("tool_calls") or ()) for m in messages if m.get("role") == "assistant")


def _subagent_script(t: Target) -> Any:
    """The main agent defines a write-enabled subagent and invokes it; the subagent (the
    same endpoint, told apart by its system prompt) runs the attack."""
    main = [
        tool_call(
            "define_subagent",
            name="w",
            description="does what it is told",
            system_prompt=SUBAGENT_PROMPT,
            enable_write_tools=True,
        ),
        tool_call(
            "invoke_subagent",
            Subagents=[{"TypeName": "w", "Prompt": "run the attack", "Role": "Worker"}],
        ),
        "finished",
    ]

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        done = _tool_calls_so_far(messages)
        if any(SUBAGENT_PROMPT in str(m.get("content", "")) for m in messages):
            return _run(f"sh {t.attack_sh}", t.ws) if done == 0 else "subagent done"
        return main[min(done, len(main) - 1)]

    return script


def _git(ws: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=ws, check=True, capture_output=True, text=True, timeout=10
    )
    return done.stdout


def _git_init(ws: Path) -> None:
    _git(ws, "init", "-q")
    _git(ws, "config", "user.name", "Test")
    _git(ws, "config", "user.email", "test@example.invalid")


def _git_hook_script(t: Target) -> list[Any]:
    hook = t.ws / ".git" / "hooks" / "post-commit"
    return [
        tool_call(
            "write_to_file",
            TargetFile=str(hook),
            CodeContent=t.shell_attack(),
            Overwrite=True,
            Description="a post-commit hook",
        ),
        _run(f"chmod +x {hook} && git commit -q --allow-empty -m work && git log --oneline", t.ws),
    ]


@dataclass(frozen=True)
class Route:
    script: Callable[[Target], Any]  # the model's replies: a list ("done" follows) or a function
    capabilities: CapabilitiesConfig | None = None
    configure: Callable[[AgentBuilder], AgentBuilder] | None = None
    background: bool = False  # the attack ends after the turn: wait for its report
    git: bool = False


ROUTES = {
    "foreground run_command": Route(lambda t: [_run(f"sh {t.attack_sh}; cat {t.report}", t.ws)]),
    "background run_command": Route(
        lambda t: [_run(f"sleep 0.3; sh {t.attack_sh}", t.ws, wait_ms=100)],
        background=True,
    ),
    "run_workflow script": Route(
        lambda t: [tool_call("run_workflow", Script=t.python_attack())],
        capabilities=WORKFLOW,
        background=True,
    ),
    "model-defined subagent": Route(
        _subagent_script, configure=lambda b: b.allow_ungoverned("subagents")
    ),
    # Both are closed one step earlier by default (`.git/hooks` and `.git/config` are
    # read-only: tests/integration/test_out_of_reach.py); given up here, what they run
    # is still contained.
    "git post-commit hook": Route(
        _git_hook_script,
        git=True,
        configure=lambda b: b.containment(Containment(unprotect=[".git/hooks"])),
    ),
    "git core.fsmonitor": Route(
        lambda t: [_run(f"git config core.fsmonitor 'sh {t.attack_sh}' && git status", t.ws)],
        git=True,
        configure=lambda b: b.containment(Containment(unprotect=[".git/config"])),
    ),
}


@pytest.mark.parametrize("route", ROUTES.values(), ids=ROUTES.keys())
async def test_an_allowed_route_cannot_escape(
    make_agent: AgentFactory, target: Target, route: Route
) -> None:
    if route.git:
        _git_init(target.ws)
    script = route.script(target)
    if isinstance(script, list):
        script.append("done")
    more = [route.configure] if route.configure else []
    agent, model = make_agent(
        script,
        policies=[policy.allow_all()],
        capabilities=route.capabilities,
        configure=_configure(target, *more),
    )
    async with agent:
        await agent.chat("attack")
        if route.background:
            await _until(target.ended, what="the attack to end")
    target.assert_nothing_escaped(model)
    target.assert_attempted()
    if route.script is _git_hook_script:  # the commit the hook ran after went through
        assert "work" in _git(target.ws, "log", "--oneline")


async def test_the_harness_own_tools_cannot_escape(
    make_agent: AgentFactory, target: Target
) -> None:
    # The harness's own process does these: no command, no child.
    inside = target.ws / "inside.txt"
    readable = target.home / "notes.txt"  # beside the hidden ones: grep must find this
    readable.write_text("c0ntainment notes\n")

    def write(path: Path) -> Any:
        return tool_call(
            "write_to_file",
            TargetFile=str(path),
            CodeContent="escaped",
            Overwrite=True,
            Description="write",
        )

    script = [
        write(target.outside),
        tool_call("view_file", AbsolutePath=str(target.key)),
        tool_call("view_file", AbsolutePath=str(target.aws)),
        tool_call("grep_search", SearchPath=str(target.home), Query="c0ntainment"),
        tool_call("read_url_content", Url=f"http://127.0.0.1:{target.port}/"),
        write(inside),
        "done",
    ]
    tools = {BuiltinTool.GREP_SEARCH, BuiltinTool.READ_URL_CONTENT}
    agent, model = make_agent(
        script,
        policies=[policy.allow_all()],
        capabilities=CapabilitiesConfig(enabled_tools=CapabilitiesConfig().enabled_tools | tools),
        configure=_configure(target),
    )
    async with agent:
        await agent.chat("attack")
    target.assert_nothing_escaped(model)
    results = [str(m.get("content", "")) for m in model.requests[-1].tool_results]
    assert len(results) == 6, results
    for shown in results[:3]:  # the kernel refused each, inside the harness's own process
        assert "permission denied" in shown.lower() or "read-only file system" in shown.lower()
    assert "notes.txt" in results[3]  # grep ran, and read what is not hidden
    assert "connect: permission denied" in results[4]
    assert inside.read_text().strip() == "escaped"  # the same tool inside: the route works


# -- ordinary work ------------------------------------------------------------------------------

WORK = r"""
python3 hello.py > py.out
git init -q repo && cd repo && git config user.name T && git config user.email t@example.invalid \
  && echo hi > f && git add f && git commit -qm first && git rev-list --count HEAD > ../git.out
cd ..
if command -v gcc >/dev/null; then gcc -o hello hello.c && ./hello > c.out; fi
echo x > /dev/null && echo ok > devnull.out
printf %s "$TMPDIR" > tmpdir.out
echo scratch > "$TMPDIR/scratch" && cat "$TMPDIR/scratch" > tmp.out
cat /etc/passwd > passwd.out && head -c 200 /usr/include/stdio.h > stdio.out
"""


def _system_file(path: str, size: int = -1) -> bytes | None:
    """What this process (uncontained) reads of a system file, None if there is none."""
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except FileNotFoundError:
        return None


async def test_ordinary_work_in_the_workspace_keeps_working(
    make_agent: AgentFactory, env: Workspace
) -> None:
    ws = env.ws
    (ws / "work.sh").write_text(WORK)
    (ws / "hello.py").write_text("print(6 * 7)\n")
    (ws / "hello.c").write_text('#include <stdio.h>\nint main(void) { puts("compiled"); }\n')
    script = [
        _run("sh work.sh", ws),
        _run("sleep 0.3; echo finished > bg.out", ws, wait_ms=100),
        "done",
    ]
    agent, _ = make_agent(script, policies=[policy.allow_all()])
    async with agent:
        await agent.chat("work")
        bg = ws / "bg.out"
        await _until(lambda: bg.exists() and bg.read_text() == "finished\n", what="bg.out")
        contained = agent.containment
        assert contained is not None
        assert (ws / "tmp.out").read_text() == "scratch\n"  # read while the agent runs
    assert (ws / "py.out").read_text() == "42\n"
    assert (ws / "git.out").read_text() == "1\n"
    if shutil.which("gcc"):
        assert (ws / "c.out").read_text() == "compiled\n"
    assert (ws / "devnull.out").read_text() == "ok\n"
    assert (ws / "tmpdir.out").read_text() == str(contained.tmp_dir)
    assert (ws / "passwd.out").read_bytes() == _system_file("/etc/passwd")
    stdio = _system_file("/usr/include/stdio.h", 200)
    if stdio is not None:
        assert (ws / "stdio.out").read_bytes() == stdio


# -- switching it off, adding to it, reading what is in force ----------------------------------


async def test_containment_none_turns_it_off_with_a_warning(
    make_agent: AgentFactory, target: Target, caplog: pytest.LogCaptureFixture
) -> None:
    # The control for the escape tests: the same write and read, uncontained, succeed.
    script = [_run(f"sh {target.attack_sh}; cat {target.report}", target.ws), "done"]
    with caplog.at_level(logging.WARNING, logger="antigravity_sdk.agent"):
        agent, model = make_agent(
            script,
            policies=[policy.allow_all()],
            configure=_configure(target, lambda b: b.containment(None)),
        )
    assert "containment is off" in caplog.text
    async with agent:
        assert agent.containment is None
        await agent.chat("attack")
    assert target.outside.read_text() == "escaped\n"
    seen = json.dumps([r.body for r in model.requests])
    assert KEY_MARKER in seen and ENV_MARKER in seen
    assert target.accepted()
    assert await wait_gone(target.victim.pid)


async def test_containment_additions_open_exactly_what_they_name(
    make_agent: AgentFactory, target: Target
) -> None:
    extra = target.ws.parent / "extra"
    extra.mkdir()
    ssh = target.home / ".ssh"
    attack = target.shell_attack().replace("echo end", f"echo extra > {extra}/f\necho end")
    target.attack_sh.write_text(attack)
    added = Containment(write=[extra], read=[ssh], connect=[target.port], env=[ENV_NAME])
    agent, model = make_agent(
        [_run(f"sh {target.attack_sh}; cat {target.report}", target.ws), "done"],
        policies=[policy.allow_all()],
        configure=_configure(target, lambda b: b.containment(added)),
    )
    async with agent:
        await agent.chat("attack")
        contained = agent.containment
    assert contained is not None
    assert (extra / "f").read_text() == "extra\n"  # write=[extra]
    seen = json.dumps([r.body for r in model.requests])
    assert KEY_MARKER in seen  # read=[~/.ssh]
    assert ENV_MARKER in seen  # env=[ENV_NAME]
    assert target.accepted()  # connect=[port]
    # ... and nothing more: the rest stays as the defaults have it.
    report = target.report.read_text()
    for name in ("write", "read aws", "kill"):
        assert f"{name}: denied" in report, report
    assert AWS_MARKER not in seen
    assert not target.outside.exists()
    assert target.victim.poll() is None
    assert extra in contained.write
    assert ssh in contained.read and ssh not in contained.hidden
    assert target.home / ".aws" in contained.hidden
    assert target.port in contained.connect


async def test_agent_containment_reports_what_is_in_force(
    make_agent: AgentFactory, env: Workspace, target: Target
) -> None:
    agent, model = make_agent(["nothing to do"], configure=_configure(target))
    assert agent.containment is None  # before the first start
    async with agent:
        contained = agent.containment
        assert contained is not None
        assert contained.abi == landlock_abi()
        assert contained.enforced == ("filesystem", "network", "scope")
        assert contained.not_enforced == ()
        assert env.ws in contained.write
        assert contained.tmp_dir in contained.write
        assert contained.tmp_dir.is_dir()
        assert not any(p == env.root or p in env.root.parents for p in contained.write)
        assert target.home / ".ssh" in contained.hidden
        assert target.home / ".aws" in contained.hidden
        assert ENV_NAME in contained.env_withheld
        # the egress proxy and the model's endpoint, on the agent's own loopback
        assert contained.connect == tuple(sorted(contained.listening))
        assert [u.target for u in contained.upstreams] == [f"{model.base_url}"]
        assert contained.bind == (0,)
        described = "\n".join(contained.describe())
        assert str(env.ws) in described and str(target.home / ".ssh") in described
        data = json.loads(json.dumps(contained.as_dict()))
        assert data["abi"] == contained.abi and str(env.ws) in data["write"]
        assert str(target.home / ".ssh") in data["hidden"]
    assert agent.containment is contained  # still readable after stop()


@pytest.fixture
def ws_is_home(env: Workspace, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """HOME is the workspace (an agent started in ~ works there): ~/.ssh is inside it."""
    harness = find_harness()
    (env.ws / ".ssh").mkdir(mode=0o700)
    (env.ws / ".ssh" / "id_rsa").write_text(f"{KEY_MARKER}\n")
    (env.ws / "proj").mkdir()
    monkeypatch.setenv("HOME", str(env.ws))
    yield harness


async def test_a_workspace_holding_a_credential_path_keeps_it_hidden(
    make_agent: AgentFactory, env: Workspace, ws_is_home: Path
) -> None:
    ws, report = env.ws, env.ws / "proj" / "report.txt"
    attempts = [
        ("read", "cat .ssh/id_rsa"),
        ("copy", "cp -r .ssh proj/ssh-copy"),
        ("move", "mv .ssh/id_rsa proj/moved"),
        ("move dir", "mv .ssh proj/moved-dir"),
        ("hard link", "ln .ssh/id_rsa proj/hard"),
        ("remove", "rm -f .ssh/id_rsa"),
        ("plant", "sh -c 'echo planted >> .ssh/authorized_keys'"),
    ]
    (ws / "proj" / "attack.sh").write_text(_shell_attempts(report, attempts))
    command = f"sh proj/attack.sh; echo work > proj/work.txt; cat {report}"
    agent, model = make_agent(
        [_run(command, ws), "done"],
        policies=[policy.allow_all()],
        configure=lambda b: b.harness_path(ws_is_home),
    )
    async with agent:
        await agent.chat("attack")
        contained = agent.containment
    assert contained is not None and ws / ".ssh" in contained.hidden
    assert KEY_MARKER not in json.dumps([r.body for r in model.requests])
    assert (ws / ".ssh" / "id_rsa").read_text() == f"{KEY_MARKER}\n"
    assert not (ws / ".ssh" / "authorized_keys").exists()
    text = report.read_text()
    assert KEY_MARKER not in text and "ESCAPED" not in text, text
    assert all(f"{name}: denied" in text for name, _ in attempts), text
    assert (ws / "proj" / "work.txt").read_text() == "work\n"  # work below the top goes on


async def test_the_top_of_a_workspace_holding_a_credential_path_is_listable_only(
    make_agent: AgentFactory,
    env: Workspace,
    ws_is_home: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Writing there would let a command move ~/.ssh/id_rsa out, or plant a file in its
    # place: the SDK keeps listing only, says so at start, and the rest stays writable.
    command = "echo new > new.txt; echo sub > proj/sub.txt"
    agent, _ = make_agent(
        [_run(command, env.ws), "done"],
        policies=[policy.allow_all()],
        configure=lambda b: b.harness_path(ws_is_home),
    )
    with caplog.at_level(logging.WARNING, logger="antigravity_sdk.agent"):
        async with agent:
            await agent.chat("work")
    assert agent.containment is not None
    assert agent.containment.listing_only == (env.ws,)
    assert any("only listable at their top" in line for line in agent.containment.describe())
    assert any("holds a credential path" in r.getMessage() for r in caplog.records)
    assert not (env.ws / "new.txt").exists()
    assert (env.ws / "proj" / "sub.txt").read_text() == "sub\n"


MULTIPROCESSING = (
    "import concurrent.futures as cf\n"
    "if __name__ == '__main__':\n"
    "    try:\n"
    "        with cf.ProcessPoolExecutor(2) as pool:\n"
    "            print(sum(pool.map(abs, [-1, -2])), file=open('mp.out', 'w'))\n"
    "    except PermissionError as exc:\n"
    "        print('refused', exc.filename, file=open('mp.out', 'w'))\n"
)


@pytest.mark.parametrize("shm", [False, True], ids=["default", "/dev/shm named"])
async def test_python_multiprocessing_works_in_a_dev_shm_of_its_own(
    make_agent: AgentFactory, env: Workspace, shm: bool
) -> None:
    # The agent's /dev/shm is a tmpfs of its own: multiprocessing's locks work, and the
    # machine's shared memory (a database's, a browser's) is out of reach.
    (env.ws / "mp.py").write_text(MULTIPROCESSING)
    spec = Containment(write=["/dev/shm"] if shm else [])
    agent, _ = make_agent(
        [_run("python3 mp.py; echo mine > /dev/shm/antigravity-test-mark", env.ws), "done"],
        policies=[policy.allow_all()],
        configure=lambda b: b.containment(spec),
    )
    async with agent:
        await agent.chat("work")
    assert (env.ws / "mp.out").read_text() == "3\n"
    assert not os.path.exists("/dev/shm/antigravity-test-mark")  # noqa: ASYNC240


# -- symlinks ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "made_by", ["the test, before start", "an allowed command"], ids=["before", "by command"]
)
async def test_a_symlink_is_no_way_to_a_hidden_path(
    make_agent: AgentFactory, target: Target, made_by: str
) -> None:
    # Links in the workspace to ~/.ssh and to ~ itself, and (made before start, where the
    # SDK computes its grants) one beside the workspace to ~: Landlock checks the path a
    # link resolves to, and the SDK grants nothing through a link above a hidden path.
    ws, home = target.ws, target.home
    links = {ws / "ssh": home / ".ssh", ws / "home": home}
    beside = ws.parent / "home-link"
    beside.symlink_to(home)
    make = "; ".join(f"ln -s {dest} {link}" for link, dest in links.items())
    if made_by.startswith("the test"):
        for link, dest in links.items():
            link.symlink_to(dest)
        make = "true"
    reads = [
        ("ssh link", f"cat {ws}/ssh/id_rsa"),
        ("home link", f"cat {ws}/home/.ssh/id_rsa"),
        ("home link aws", f"cat {ws}/home/.aws/credentials"),
        ("beside link", f"cat {beside}/.ssh/id_rsa"),
        ("copy through link", f"cp -rL {ws}/home/.ssh {ws}/copied"),
    ]
    target.attack_sh.write_text(_shell_attempts(target.report, reads))
    agent, model = make_agent(
        [_run(f"{make}; sh {target.attack_sh}; cat {target.report}", ws), "done"],
        policies=[policy.allow_all()],
        configure=_configure(target),
    )
    async with agent:
        await agent.chat("read through the links")
    assert all(link.is_symlink() for link in links)  # the links were there
    target.assert_nothing_escaped(model)
    target.assert_attempted(tuple(name for name, _ in reads))
    copied = ws / "copied"
    assert not any(KEY_MARKER in p.read_text() for p in copied.rglob("*") if p.is_file())


# -- stop() ---------------------------------------------------------------------------------


async def test_stop_removes_the_private_tmpdir_and_everything_started(
    make_agent: AgentFactory, env: Workspace
) -> None:
    # A process in a session of its own, outside the harness's process group.
    command = (
        'echo scratch > "$TMPDIR/scratch"; printf %s "$TMPDIR" > tmpdir; '
        "setsid -f sh -c 'echo $$ > pid.tmp; mv pid.tmp pid; exec sleep 60' "
        "</dev/null >/dev/null 2>&1; "
        "for _ in $(seq 100); do [ -e pid ] && break; sleep 0.05; done"
    )
    agent, _ = make_agent([_run(command, env.ws), "done"], policies=[policy.allow_all()])
    async with agent:
        await agent.chat("leave things behind")
        contained = agent.containment
        assert contained is not None
        assert (contained.tmp_dir / "scratch").read_text() == "scratch\n"
        sleeper = host_pid(int((env.ws / "pid").read_text()))
        assert process_alive(sleeper)
    assert (env.ws / "tmpdir").read_text() == str(contained.tmp_dir)
    assert not contained.tmp_dir.exists()
    assert await wait_gone(sleeper), "a process the agent started outlived stop()"
