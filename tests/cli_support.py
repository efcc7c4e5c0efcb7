"""What the tests of the `antigravity` command share: the environment its process gets,
and a ScriptedModel served from a thread for that process to call."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from antigravity_sdk.testing import ScriptedModel

ROOT = Path(__file__).resolve().parent.parent


def cli_env(**extra: str | None) -> dict[str, str]:
    """This process's environment for the CLI's: the repo importable, no Gemini key, and
    `extra` set (None: removed)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    env.pop("GEMINI_API_KEY", None)
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


@contextlib.contextmanager
def served_in_thread(script: Any) -> Iterator[ScriptedModel]:
    """A ScriptedModel on its own event loop in a thread, for another process to call."""
    with ScriptedModel(script).in_thread() as model:
        yield model
