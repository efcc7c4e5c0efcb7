"""The first hour, again (issue 21): what a new user still hit on the command line.

Each test runs the REAL `antigravity` entry point, in a subprocess (stdout and stderr
apart) or a pseudo-terminal (pexpect), and checks the exit code, the message and where it
went. The model is either a socket that accepts and never answers (`silent`), or a
`ScriptedModel` served by this process in a thread of its own (`served`).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import cli_env, served_in_thread

from antigravity_sdk.errors import HarnessNotFoundError
from antigravity_sdk.harness.install import find_harness
from antigravity_sdk.testing import ScriptedModel, ToolCallSpec, text, tool_call, tool_calls

ROOT = Path(__file__).resolve().parent.parent
BOUND = 90  # seconds: generous, for a loaded machine; the waits under test are a few


def _require_harness() -> None:
    try:
        find_harness()
    except HarnessNotFoundError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the harness tests: {exc}")
        pytest.skip(f"no localharness: {exc}")


_env = cli_env


# -- a model that never answers, and the processes a command leaves ----------------------------


class Silent:
    """A loopback endpoint that accepts connections and never answers; `called` is set
    when the first one comes (the harness is calling the model)."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.called = threading.Event()
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:  # closed
                return
            self._held.append(conn)
            self.called.set()

    def close(self) -> None:
        self.server.close()
        for conn in self._held:
            conn.close()
        self._thread.join(5)


@pytest.fixture
def silent() -> Iterator[Silent]:
    endpoint = Silent()
    try:
        yield endpoint
    finally:
        endpoint.close()


def _descendants(pid: int) -> set[int]:
    """Every process below `pid`, from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _assert_gone(pids: set[int]) -> None:
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in pids if _alive(pid)], "processes left behind"


def _chat(*args: str, cwd: Path, **env: str | None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "antigravity_sdk", "chat", *args],
        cwd=cwd,
        env=_env(**env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=BOUND)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"still running after {BOUND} s:\n{out}\n{err}")
    return proc.returncode, out, err


# -- 1. Ctrl-C during a one-shot chat -----------------------------------------------------------


@pytest.mark.harness
@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_ctrl_c_in_one_shot_chat_is_one_line_and_130(
    silent: Silent, tmp_path: Path, loop: str
) -> None:
    """Ctrl-C (SIGINT to the foreground process group, as the terminal sends it) while
    the model is being waited for: one line on stderr, exit 130, no traceback, and no
    process of the command left (the harness was stopped)."""
    _require_harness()
    if loop == "uvloop":
        pytest.importorskip("uvloop")
    proc = _chat(
        "hi", "--base-url", silent.base_url, "--model", "m", cwd=tmp_path, ANTIGRAVITY_LOOP=loop
    )
    try:
        assert silent.called.wait(BOUND), "the harness never called the model"
        below = _descendants(proc.pid)
        assert below, "no harness process under the command"
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)
        code, out, err = _finish(proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert code == 130, out + err
    assert err == "interrupted (Ctrl-C): the turn was stopped and the harness shut down\n"
    assert "Traceback" not in out and "Error" not in out
    assert out.startswith("model: m at ")
    _assert_gone(below)


@pytest.mark.harness
def test_ctrl_c_at_a_one_shot_question_exits_at_once(tmp_path: Path) -> None:
    """Ctrl-C while `chat PROMPT` asks `Allow? [y/N]` on the terminal: the question's
    reader must not keep the process alive until Enter (it did: asyncio.run waits for
    its executor's threads)."""
    _require_harness()
    pexpect = pytest.importorskip("pexpect")
    script = [tool_call("run_command", CommandLine="ls", Cwd=str(tmp_path)), "ok"]
    with served_in_thread(script) as model:
        child = _spawn(tmp_path, "list", "--base-url", model.base_url, "--model", model.model_name)
        try:
            child.expect(r"Allow\? \[y/N\] ")
            time.sleep(0.5)
            child.sendintr()
            child.expect("interrupted \\(Ctrl-C\\): the turn was stopped and the harness shut down")
            child.expect(pexpect.EOF, timeout=30)  # no Enter needed
            child.close()
            assert child.exitstatus == 130
            assert "Traceback" not in child.before
        finally:
            child.close(force=True)


# -- 2. a model that never answers: bounded, named, shown ---------------------------------------


@pytest.mark.harness
def test_chat_model_that_never_answers_is_bounded_and_named(silent: Silent, tmp_path: Path) -> None:
    _require_harness()
    began = time.monotonic()
    proc = _chat(
        "hi", "--base-url", silent.base_url, "--model", "m", "--timeout", "3", cwd=tmp_path
    )
    code, out, err = _finish(proc)
    seconds = time.monotonic() - began
    assert code == 1, out + err
    assert seconds < 60
    assert err.startswith(
        f"error: no answer from the model 'm' at {silent.base_url} within 3 s, so the turn "
        "was stopped"
    ), err
    assert "--timeout SECONDS" in err and "Traceback" not in err
    # off a terminal: no live indicator (nor, in 3 s, a plain line); stdout has no error
    assert "\r" not in err and "\x1b" not in err and "waiting" not in err
    assert "error" not in out and out.startswith("model: m at ")


def test_timeout_must_be_positive_seconds(tmp_path: Path) -> None:
    for bad in ("0", "-1", "nan", "soon"):
        proc = subprocess.run(
            [sys.executable, "-m", "antigravity_sdk", "chat", "hi", "--timeout", bad],
            capture_output=True,
            text=True,
            timeout=BOUND,
            env=_env(),
            cwd=tmp_path,
        )
        assert proc.returncode == 2 and proc.stdout == ""
        assert f"expected a number of seconds > 0, got '{bad}'" in proc.stderr


def _spawn(cwd: Path, *args: str, term: str = "dumb", columns: int = 160) -> Any:
    pexpect = pytest.importorskip("pexpect")
    env = _env(PROMPT_TOOLKIT_NO_CPR="1", TERM=term, CI=None, COLUMNS=None, LINES=None)
    return pexpect.spawn(
        sys.executable,
        ["-m", "antigravity_sdk", "chat", *args],
        cwd=str(cwd),
        env=env,
        encoding="utf-8",
        timeout=BOUND,
        dimensions=(50, columns),
    )


def _end(child: Any) -> int:
    pexpect = pytest.importorskip("pexpect")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus is not None, child.signalstatus
    return int(child.exitstatus)


@pytest.mark.harness
def test_one_shot_on_a_terminal_shows_the_wait_live(silent: Silent, tmp_path: Path) -> None:
    _require_harness()
    child = _spawn(
        tmp_path,
        "hi",
        "--base-url",
        silent.base_url,
        "--model",
        "m",
        "--timeout",
        "4",
        term="xterm",
    )
    try:
        child.expect(rf"waiting for the model 'm' at {re.escape(silent.base_url)} … [1-3] s")
        child.expect(r"no answer from the model 'm' at .* within 4 s")
        assert _end(child) == 1
    finally:
        child.close(force=True)


@pytest.mark.harness
def test_repl_model_that_never_answers_stops_the_turn_not_the_session(
    silent: Silent, tmp_path: Path
) -> None:
    _require_harness()
    child = _spawn(
        tmp_path, "--base-url", silent.base_url, "--model", "m", "--timeout", "3", term="xterm"
    )
    prompt = r"\x1b\[\?2004h"  # prompt_toolkit's prompt on an xterm: bracketed paste on
    try:
        child.expect(prompt)
        time.sleep(0.3)  # prompt_toolkit enters raw mode after drawing the prompt
        child.sendline("hello?")
        child.expect(r"waiting for the model 'm' at .* … [12] s")
        child.expect(r"no answer from the model 'm' at .* within 3 s, so the turn was stopped")
        child.expect("the session goes on")
        child.expect(prompt)
        time.sleep(0.3)
        child.sendline("/exit")
        child.expect("bye")
        assert _end(child) == 0
    finally:
        child.close(force=True)


# -- 3. Ctrl-C at an ASK prompt: nothing of that turn after the next prompt ---------------------


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ScriptedModel]:
    """A ScriptedModel on its own event loop in a thread, for the CLI's process to call.
    `list` asks for three commands at once (each an ASK), `long` streams a long answer,
    `wipe` tries a long destructive command (denied)."""

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        prompt = next(str(m["content"]) for m in reversed(messages) if m["role"] == "user")
        if messages[-1]["role"] == "tool":
            return text("done.")
        if "list" in prompt:
            return tool_calls(
                *(
                    ToolCallSpec("run_command", {"CommandLine": f"ls {d}", "Cwd": str(tmp_path)})
                    for d in ("alpha", "beta", "gamma")
                )
            )
        if "wipe" in prompt:
            return tool_call("run_command", CommandLine=LONG_COMMAND, Cwd=str(tmp_path))
        if "long" in prompt:
            return text(LONG_ANSWER)
        return text("ok")

    with served_in_thread(script) as model:
        yield model


LONG_ANSWER = " ".join(
    f"{word}{n}" for n in range(40) for word in ("governance", "is", "a", "wonderful", "thing")
)
LONG_COMMAND = "rm -rf " + " ".join(f"/srv/cache{n:02d}" for n in range(12))


@pytest.mark.harness
def test_repl_ctrl_c_at_ask_leaves_nothing_after_the_prompt(
    served: ScriptedModel, tmp_path: Path
) -> None:
    """The model asks for three commands at once; Ctrl-C at the first question cancels
    the turn. The harness still sends the others for a moment: they are refused without
    a row or a question, so nothing of that turn prints after the new prompt (tried three
    times: it was a race)."""
    _require_harness()
    child = _spawn(tmp_path, "--base-url", served.base_url, "--model", served.model_name)
    try:
        child.expect("> ")
        for attempt in range(3):
            time.sleep(0.3)
            child.sendline(f"list the files ({attempt})")
            child.expect(r"Allow\? \[y/N\] ")
            time.sleep(0.3)
            child.sendintr()
            child.expect("turn cancelled")
            child.expect("> ")
            time.sleep(2.5)  # what the harness still sends of the turn would print now
            child.sendline("/help")
            child.expect("/history  the conversation so far")
            after = child.before
            for leftover in ("ASK", "Allow?", "↳", "ls beta", "ls gamma", "run_command"):
                assert leftover not in after, (attempt, after)
            child.expect("> ")
        time.sleep(0.3)
        child.sendline("/exit")
        child.expect("bye")
        assert _end(child) == 0
    finally:
        child.close(force=True)


# -- 9. rendering ---------------------------------------------------------------------------------


@pytest.mark.harness
def test_repl_wraps_the_answer_at_words_and_history_indents(
    served: ScriptedModel, tmp_path: Path
) -> None:
    """At 80 columns the streamed answer breaks between words, never inside one (it
    arrives in pieces cut anywhere); `/history` indents a wrapped answer under itself."""
    _require_harness()
    child = _spawn(
        tmp_path, "--base-url", served.base_url, "--model", served.model_name, columns=80
    )
    try:
        child.expect("> ")
        time.sleep(0.3)
        child.sendline("a long answer please")
        child.expect("> ")  # the next prompt: the answer is before it
        shown = child.before
        start = shown.index("governance0")
        lines = shown[start:].replace("\r", "").split("\n")
        answer = [line for line in lines if line.strip()]
        assert len(answer) > 5, answer
        assert all(len(line) <= 80 for line in answer), answer
        assert " ".join(line.strip() for line in answer) == LONG_ANSWER  # no word cut
        time.sleep(0.3)
        child.sendline("/history")
        child.expect("1. you: a long answer please")
        child.expect("> ")
        listed = [line for line in child.before.replace("\r", "").split("\n") if line.strip()]
        first = next(n for n, line in enumerate(listed) if "agent: governance0" in line)
        column = listed[first].index("governance0")
        rest = listed[first + 1 :]
        assert len(rest) > 5, listed
        for line in rest:  # continuation lines start under the answer's first word
            assert line[:column].strip() == "" and line[column] != " ", listed
        assert " ".join(line.strip() for line in rest[-1:]).endswith("thing39")
        time.sleep(0.3)
        child.sendline("/exit")
        child.expect("bye")
        assert _end(child) == 0
    finally:
        child.close(force=True)


@pytest.mark.harness
async def test_rows_off_a_terminal_are_whole_and_unpadded(tmp_path: Path) -> None:
    """Piped, a row shows the whole command (not cut with …) and no line ends in the
    spaces that pad a table; the row's time is named for what it is (`decided in`)."""
    _require_harness()
    script = [tool_call("run_command", CommandLine=LONG_COMMAND, Cwd=str(tmp_path)), "refused."]
    async with ScriptedModel(script) as model:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "antigravity_sdk",
            "chat",
            "wipe it",
            "--base-url",
            model.base_url,
            "--model",
            model.model_name,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(COLUMNS="80"),
            cwd=tmp_path,
        )
        try:
            raw_out, raw_err = await asyncio.wait_for(proc.communicate(), BOUND)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    out, err = raw_out.decode(), raw_err.decode()
    assert proc.returncode == 0, out + err
    assert "…" not in out
    assert [line for line in out.splitlines() if line != line.rstrip()] == []
    for word in LONG_COMMAND.split():  # every part of the command, wrapped in its column
        assert re.search(rf"(^|\s){re.escape(word)}(\s|$)", out), word
    head = next(line for line in out.splitlines() if "arguments" in line)
    assert head.split()[-2:] == ["decided", "in"] and "latency" not in head
    assert re.search(r"DENY .*no-destructive-shell .*\d+\.\d µs", out)
