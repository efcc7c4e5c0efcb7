"""Build the wheel, install it into a fresh plain venv, import it from outside the repo.

Checks what only an installed package shows: the import name does not shadow (and is not
shadowed by) the standard library's `antigravity`, the wheel carries `py.typed` and the
console script, and `import antigravity_sdk` stays lazy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INSTALL_TIMEOUT = 120


def _run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload,no-any-return]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            str(ROOT),
        ],
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    wheels = list(out.glob("antigravity_sdk-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A plain venv (no system site-packages) with the wheel installed; (python, env)."""
    root = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=True, system_site_packages=False, clear=True).create(root)
    python = root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    try:
        done = _run(
            [str(python), "-m", "pip", "install", "--quiet", str(wheel)],
            timeout=INSTALL_TIMEOUT,
            env=env,
        )
        with_deps = done.returncode == 0
    except subprocess.TimeoutExpired:
        with_deps = False
    if not with_deps:
        # Offline or slow index: install only the wheel and borrow the dependencies from
        # this interpreter's site-packages (PYTHONPATH entries do not run .pth files, so
        # the project's editable install stays invisible).
        done = _run(
            [str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(wheel)],
            timeout=INSTALL_TIMEOUT,
            env=env,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        env["PYTHONPATH"] = sysconfig.get_paths()["purelib"]
    return python, env


PROBE = textwrap.dedent(
    """
    import json, sys, sysconfig
    import antigravity_sdk
    lazy = sorted(m for m in ("websockets", "betterproto2", "pydantic", "asyncio", "h11")
                  if m in sys.modules)
    import antigravity
    from antigravity_sdk import Hook, HookResult, HookRunner, ToolCall, current_context
    print(json.dumps({
        "sdk": antigravity_sdk.__file__,
        "version": antigravity_sdk.__version__,
        "stdlib_antigravity": antigravity.__file__,
        "stdlib": sysconfig.get_paths()["stdlib"],
        "prefix": sys.prefix,
        "loaded_by_import": lazy,
        "allowed": HookResult.allowed().allow,
        "is_hook": issubclass(Hook, object) and HookRunner.__module__,
    }))
    """
)


def test_installed_wheel_imports_from_outside_the_repo(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    python, env = installed
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    done = _run([str(python), "-c", PROBE], cwd=outside, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    venv_root = Path(info["prefix"]).resolve()
    assert venv_root == python.parent.parent.resolve()

    sdk = Path(info["sdk"]).resolve()
    assert sdk.is_relative_to(venv_root), sdk  # the installed copy, not the checkout
    assert not sdk.is_relative_to(ROOT)

    # `import antigravity` is still the standard library's module: no shadowing trap.
    stdlib_ag = Path(info["stdlib_antigravity"]).resolve()
    assert stdlib_ag.parent == Path(info["stdlib"]).resolve(), stdlib_ag
    assert stdlib_ag.name == "antigravity.py"

    # `import antigravity_sdk` is lazy: no transport, protocol or model code yet.
    assert info["loaded_by_import"] == [], info["loaded_by_import"]
    assert info["allowed"] is True
    assert info["is_hook"] == "antigravity_sdk.hooks"


def test_wheel_contents(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        scripts = zf.read(entry_points).decode()
        metadata = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "antigravity_sdk/py.typed" in names
    assert "antigravity_sdk/__init__.py" in names
    assert "antigravity_sdk/hooks.py" in names
    assert "antigravity_sdk/harness/supervisor.py" in names  # run as a script, by path
    # nothing installs a top-level `antigravity` (it would be shadowed by the stdlib anyway)
    assert not any(n.startswith("antigravity/") or n == "antigravity.py" for n in names)
    assert not any(n.startswith(("tests/", "benches/", "examples/")) for n in names)
    assert "antigravity = antigravity_sdk.cli:main" in scripts
    assert "antigravity_sdk/cli/__init__.py" in names  # the package the script points into
    assert "Name: antigravity-sdk" in metadata
    assert "Requires-Python: >=3.11" in metadata
    assert "Requires-Dist: h11>=0.16" in metadata  # ScriptedModel and `antigravity demo` need it
