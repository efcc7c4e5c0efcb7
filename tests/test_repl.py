"""`antigravity chat` with no prompt: the interactive session, driven through a real
pseudo-terminal (pexpect) against the REAL harness.

The console script runs as users run it; the model is a `ScriptedModel` served by this
test process (in a thread of its own) and named with `--base-url`/`--model`, so the CLI
needs no test-only switch.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import served_in_thread

from antigravity_sdk.errors import HarnessNotFoundError
from antigravity_sdk.harness.install import find_harness
from antigravity_sdk.testing import ScriptedModel, text, tool_call

pexpect = pytest.importorskip("pexpect")

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 30


def _require_harness() -> None:
    try:
        find_harness()
    except HarnessNotFoundError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the harness tests: {exc}")
        pytest.skip(f"no localharness: {exc}")


def _script(cwd: Path, messages: list[dict[str, Any]]) -> Any:
    """Answers by the last prompt: `hello` streams text, `clean` tries `rm -rf` (denied),
    `list` runs `ls` (an ASK rule), `slow` takes long enough to be cancelled."""
    prompt = next(str(m["content"]) for m in reversed(messages) if m["role"] == "user")
    after_tool = messages[-1]["role"] == "tool"
    if "hello" in prompt:
        return text("Hello from the scripted model, streamed in pieces.")
    if "clean" in prompt:
        if after_tool:
            return text("The cleanup was refused.")
        return tool_call("run_command", CommandLine="rm -rf keep", Cwd=str(cwd))
    if "list" in prompt:
        if after_tool:
            return text("Listed the files.")
        return tool_call("run_command", CommandLine="ls", Cwd=str(cwd))
    if "slow" in prompt:
        time.sleep(4)
        return text("too late")
    return text("ok")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ScriptedModel]:
    """A ScriptedModel on its own event loop in a thread, for the CLI's process to call."""
    with served_in_thread(lambda messages, tools: _script(tmp_path, messages)) as model:
        yield model


def _spawn(cwd: Path, *args: str) -> Any:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PROMPT_TOOLKIT_NO_CPR": "1",  # pexpect does not answer cursor-position requests
        "TERM": "dumb",  # plain prompts and no colours: the test matches text, not escapes
    }
    env.pop("GEMINI_API_KEY", None)
    child = pexpect.spawn(
        sys.executable,
        ["-m", "antigravity_sdk", "chat", *args],
        cwd=str(cwd),
        env=env,
        encoding="utf-8",
        timeout=TIMEOUT,
        dimensions=(50, 160),
    )
    return child


def _ready(child: Any, prompt: str) -> None:
    """Wait for `prompt`, then a moment more: prompt_toolkit enters raw mode after
    drawing it, and that discards what was typed before (a person types later)."""
    child.expect(prompt)
    time.sleep(0.3)


def _close(child: Any) -> int:
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus is not None, child.signalstatus
    return int(child.exitstatus)


def _exit(child: Any) -> None:
    """At the prompt, `/exit` says bye and ends the command with exit code 0."""
    _ready(child, "> ")
    child.sendline("/exit")
    child.expect("bye")
    assert _close(child) == 0


@pytest.mark.harness
def test_repl_streams_denies_asks_cancels_and_exits(served: ScriptedModel, tmp_path: Path) -> None:
    _require_harness()
    (tmp_path / "keep").mkdir()
    child = _spawn(tmp_path, "--base-url", served.base_url, "--model", served.model_name)
    try:
        _ready(child, "> ")
        child.sendline("/help")
        child.expect("/history  the conversation so far")
        child.sendline("say hello")
        child.expect("Hello from the scripted model, streamed in pieces.")

        child.sendline("clean up")  # the default policies deny rm -rf
        # an 80-column terminal (TERM=dumb): buckets by number
        child.expect(r"rm -rf keep\s+DENY\s+\[0\]\s+no-destructive-shell")
        child.expect("not run: Denied by policy 'no-destructive-shell'")
        child.expect("The cleanup was refused.")
        assert (tmp_path / "keep").is_dir()

        child.sendline("list the files")  # every other shell command asks
        child.expect(r"\$ ls\s+ASK\s+\[1\]\s+confirm_run_command")
        _ready(child, r"Allow\? \[y/N\] ")
        child.sendline("y")
        child.expect("approved: by you; it runs")
        child.expect("ran: exit 0")
        child.expect("Listed the files.")

        child.sendline("/policies")
        child.expect("no-destructive-shell")
        child.sendline("/usage")
        child.expect(r"total\s+\d+")
        child.sendline("/history")
        child.expect("3. you: list the files")

        child.sendline("be slow")  # Ctrl-C cancels the turn, not the session
        time.sleep(1.5)
        child.sendintr()
        child.expect("turn cancelled")
        child.sendline("hello again")
        child.expect("Hello from the scripted model")

        _exit(child)
    finally:
        child.close(force=True)


@pytest.mark.harness
def test_repl_ask_refused_shows_the_outcome(served: ScriptedModel, tmp_path: Path) -> None:
    _require_harness()
    child = _spawn(tmp_path, "--base-url", served.base_url, "--model", served.model_name)
    try:
        _ready(child, "> ")
        child.sendline("list the files")
        _ready(child, r"Allow\? \[y/N\] ")
        child.sendline("n")
        child.expect("not approved: not run")
        _exit(child)
    finally:
        child.close(force=True)


@pytest.mark.harness
def test_repl_unreachable_model_shows_errors_and_resumes(tmp_path: Path) -> None:
    """Nothing listens on port 9: the harness reports the error as it happens, the turn
    fails, the harness ends the session, and the next prompt resumes the conversation."""
    _require_harness()
    child = _spawn(tmp_path, "--base-url", "http://127.0.0.1:9/v1", "--model", "nobody")
    try:
        _ready(child, "> ")
        child.sendline("hello?")
        # Behind the containment's splice an unreachable endpoint answers 502, which the
        # harness reports at once (a connection reset instead would be retried for minutes).
        child.expect("harness error: There was a network issue", timeout=3 * TIMEOUT)
        child.expect("the turn failed: ")
        _ready(child, "> ")
        child.sendline("still there?")
        child.expect("the session ended: ")
        child.expect("resuming conversation [0-9a-f]+ on a new harness")
        child.expect("resumed; the conversation goes on")
        child.expect("harness error: ", timeout=3 * TIMEOUT)  # still unreachable, again
        _ready(child, "> ")
        child.sendline("/exit")
        assert _close(child) == 0
        assert "Traceback" not in (child.before or "")
    finally:
        child.close(force=True)


@pytest.mark.harness
def test_repl_ctrl_d_ends_the_session(served: ScriptedModel, tmp_path: Path) -> None:
    _require_harness()
    child = _spawn(tmp_path, "--base-url", served.base_url, "--model", served.model_name)
    try:
        _ready(child, "> ")
        child.sendline("hello")
        child.expect("Hello from the scripted model")
        _ready(child, "> ")
        child.sendcontrol("d")
        child.expect("bye")
        assert _close(child) == 0
    finally:
        child.close(force=True)
