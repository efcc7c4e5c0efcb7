"""`resolve_model`: the one place model settings are resolved, for `Agent` and the CLI.

Also: `ModelNotConfiguredError` is public, and the library never imports the CLI.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import antigravity_sdk
from antigravity_sdk import Agent, ConfigurationError, ModelNotConfiguredError
from antigravity_sdk.cli.chat import run_chat
from antigravity_sdk.harness.config import DEFAULT_GEMINI_MODEL, ModelSettings, resolve_model

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)


def test_endpoint_model(no_key: None) -> None:
    assert resolve_model("qwen3", base_url="http://127.0.0.1:11434/v1") == ModelSettings(
        name="qwen3", base_url="http://127.0.0.1:11434/v1"
    )


def test_gemini_model_keyed_by_argument_then_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "from-env")
    assert resolve_model(None) == ModelSettings(name=DEFAULT_GEMINI_MODEL, api_key="from-env")
    assert resolve_model("g", api_key="given") == ModelSettings(name="g", api_key="given")


@pytest.mark.parametrize(
    ("model", "base_url", "needle"),
    [
        (None, "http://127.0.0.1:1/v1", "needs a model name"),
        ("", "http://127.0.0.1:1/v1", "needs a model name"),
        ("gemini-x", None, "'gemini-x' is a Gemini model, which needs an API key"),
        (None, None, "no model configured"),
    ],
)
def test_unusable_settings_say_what_is_missing(
    no_key: None, model: str | None, base_url: str | None, needle: str
) -> None:
    with pytest.raises(ModelNotConfiguredError, match=needle):
        resolve_model(model, base_url=base_url)


@given(
    model=st.one_of(st.none(), st.text(max_size=8)),
    base_url=st.one_of(st.none(), st.text(max_size=8)),
    api_key=st.one_of(st.none(), st.text(max_size=8)),
)
def test_every_result_names_one_endpoint(
    model: str | None, base_url: str | None, api_key: str | None
) -> None:
    """Any combination gives a named model on exactly one endpoint, or the one error."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("GEMINI_API_KEY", raising=False)
        try:
            settings = resolve_model(model, base_url=base_url, api_key=api_key)
        except ModelNotConfiguredError:
            assert (base_url is not None and not model) or (base_url is None and not api_key)
            return
    assert settings.name
    assert (settings.base_url is None) != (settings.api_key is None)
    assert settings.base_url == base_url


async def test_agent_start_raises_the_same_error(no_key: None, tmp_path: Path) -> None:
    agent = Agent.builder().model("gemini-x").workspaces([tmp_path]).build()
    with pytest.raises(ModelNotConfiguredError, match="'gemini-x' is a Gemini model"):
        await agent.start()
    assert not agent.started


async def test_chat_reports_the_resolvers_words_and_the_options(no_key: None) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert await run_chat("hi", model="gemini-x", out=out, err=err) == 2
    assert out.getvalue() == ""
    error, hint = err.getvalue().splitlines()
    assert error.startswith("error: model 'gemini-x' is a Gemini model")
    assert "--base-url" in hint and "--model" in hint


def test_public_and_a_configuration_error() -> None:
    assert antigravity_sdk.ModelNotConfiguredError is ModelNotConfiguredError
    assert "ModelNotConfiguredError" in antigravity_sdk.__all__
    assert issubclass(ModelNotConfiguredError, ConfigurationError)
    assert issubclass(ModelNotConfiguredError, ValueError)


def test_the_library_never_imports_the_cli() -> None:
    """Import every library module (everything but cli/ and __main__): no cli module loads."""
    package = ROOT / "antigravity_sdk"
    names = sorted(
        ".".join(
            ("antigravity_sdk", *path.relative_to(package).with_suffix("").parts)
        ).removesuffix(".__init__")
        for path in package.rglob("*.py")
        if path.relative_to(package).parts[0] not in ("cli", "__main__.py")
    )
    assert "antigravity_sdk.agent" in names and len(names) > 20
    probe = (
        f"import importlib, sys\nfor name in {names!r}: importlib.import_module(name)\n"
        "print(sorted(n for n in sys.modules if n.startswith('antigravity_sdk.cli')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
