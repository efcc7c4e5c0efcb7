"""Every ```python block of README.md and docs/*.md runs, as written, unless it says why not.

The convention (docs/decisions.md, "Examples in the docs run"): a block runs as a script
of its own, from the repository root, offline (no GEMINI_API_KEY, proxies pointing
nowhere), with the SDK's cache in a temp dir. An HTML comment on the line before the
fence changes that, and is invisible where the Markdown is rendered:

- `<!-- not run: REASON -->`: an outline, signatures, a fragment of a builder chain, or
  something that needs what a test cannot have (a network, credentials); the reason is
  required.
- `<!-- run offline: REASON -->`: the block asks for a real model; it runs on the real
  harness with a `ScriptedModel` in its place (`AgentBuilder.model` is patched for it), so
  everything else in it (hooks, policies, workspaces, the agent's life cycle) runs as
  written.

A block that needs the harness is skipped where none is installed (and fails under CI).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from antigravity_sdk.errors import HarnessNotFoundError
from antigravity_sdk.harness.install import find_harness

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
MARK = re.compile(r"<!--\s*(not run|run offline)\s*:\s*(.*?)\s*-->\s*\Z", re.S)
OFFLINE = """\
from antigravity_sdk.agent import AgentBuilder as _Builder
from antigravity_sdk.testing import ScriptedModel as _Scripted

_model = _Builder.model


def _offline(self, model, **_):
    return _model(self, _Scripted(["(a scripted answer: this block runs offline)"]))


_Builder.model = _offline
"""
TIMEOUT = 120


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    code: str
    mode: str  # "run", "run offline" or "not run"
    reason: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The file's python blocks, each with the mark on the line before its fence."""
    text = path.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip()
        last = before[before.rfind("\n") + 1 :]
        mark = MARK.search(last) if last.startswith("<!--") else None
        mode, reason = (mark.group(1), mark.group(2)) if mark else ("run", "")
        line = text.count("\n", 0, match.start()) + 1
        found.append(Block(path, line, match.group(1), mode, reason))
    return found


ALL = [block for path in DOCS for block in blocks(path)]


def run_block(block: Block, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "block.py"
    script.write_text((OFFLINE if block.mode == "run offline" else "") + block.code)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GEMINI_", "GOOGLE_", "ANTIGRAVITY_"))
    }
    env.update(
        PYTHONPATH=str(ROOT),
        ANTIGRAVITY_CACHE_DIR=str(tmp_path / "cache"),
        HTTP_PROXY="http://127.0.0.1:9",
        HTTPS_PROXY="http://127.0.0.1:9",
        NO_PROXY="127.0.0.1,localhost",
    )
    with contextlib.suppress(HarnessNotFoundError):
        env["ANTIGRAVITY_HARNESS_PATH"] = str(find_harness())
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=TIMEOUT,
    )


def test_every_block_that_does_not_run_says_why() -> None:
    assert ALL, "no python blocks found: the extraction is broken"
    unexplained = [b.id for b in ALL if b.mode == "not run" and len(b.reason) < 10]
    assert not unexplained, f"say why these blocks do not run: {unexplained}"


@pytest.mark.parametrize("block", [b for b in ALL if b.mode != "not run"], ids=lambda b: b.id)
def test_block_runs(block: Block, tmp_path: Path) -> None:
    done = run_block(block, tmp_path)
    if done.returncode != 0 and "HarnessNotFoundError" in done.stderr and not os.environ.get("CI"):
        pytest.skip(f"{block.id} needs the localharness binary, and none is installed")
    assert done.returncode == 0, f"{block.id} failed:\n{done.stdout}\n{done.stderr}"


# -- the runner itself -------------------------------------------------------------------


def test_a_broken_block_fails_and_marks_are_read(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "Text.\n\n```python\nraise SystemExit(3)\n```\n\n"
        "<!-- not run: a fragment of a builder chain -->\n```python\n.model(x)\n```\n\n"
        "<!-- run offline: it asks for Gemini -->\n"
        "```python\nfrom antigravity_sdk import AgentBuilder\nprint(AgentBuilder.model)\n```\n"
    )
    broken, fragment, offline = blocks(doc)
    assert (broken.line, broken.mode, broken.code) == (3, "run", "raise SystemExit(3)\n")
    assert (fragment.mode, fragment.reason) == ("not run", "a fragment of a builder chain")
    assert offline.mode == "run offline"
    assert run_block(broken, tmp_path).returncode == 3
    assert "_offline" in run_block(offline, tmp_path).stdout
