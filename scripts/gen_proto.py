#!/usr/bin/env python3
"""Regenerate `antigravity_sdk/harness/_proto/` from `proto/**/*.proto`.

    python scripts/gen_proto.py           # rewrite the generated package
    python scripts/gen_proto.py --check   # exit 1 if the committed code is stale

Needs the `proto` extra (betterproto2-compiler, grpcio-tools) and `ruff` (the dev extra):
betterproto2's compiler pipes its output through `ruff check --fix` and `ruff format`,
so run it with the repository's ruff to get byte-identical output. The output depends
only on the .proto files and those tool versions; running it twice yields no diff.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
OUT_DIR = ROOT / "antigravity_sdk" / "harness" / "_proto"
PLUGIN = "protoc-gen-python_betterproto2"


def _tool_dirs() -> list[str]:
    """Directories holding the plugin and ruff: this interpreter's bin dir first."""
    dirs = [str(Path(sys.executable).parent)]
    dirs += os.environ.get("PATH", "").split(os.pathsep)
    return [d for d in dirs if d]


def _find(name: str, path: str) -> str:
    found = shutil.which(name, path=path)
    if found is None:
        sys.exit(f"gen_proto: {name!r} not found; pip install -e '.[proto,dev]'")
    return found


def generate(dest: Path) -> None:
    path = os.pathsep.join(_tool_dirs())
    plugin = _find(PLUGIN, path)
    _find("ruff", path)
    protos = sorted(str(p.relative_to(PROTO_DIR)) for p in PROTO_DIR.rglob("*.proto"))
    if not protos:
        sys.exit(f"gen_proto: no .proto files under {PROTO_DIR}")
    cmd = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"-I{PROTO_DIR}",
        f"--plugin={PLUGIN}={plugin}",
        f"--python_betterproto2_out={dest}",
        *protos,
    ]
    # cwd=ROOT so the compiler's ruff run picks up this repository's ruff settings.
    env = {**os.environ, "PATH": path}
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"gen_proto: protoc failed ({result.returncode}):\n{result.stderr}")


def _tree(d: Path) -> dict[str, Path]:
    return {
        str(p.relative_to(d)): p
        for p in sorted(d.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def same_tree(a: Path, b: Path) -> bool:
    ta, tb = _tree(a), _tree(b)
    return ta.keys() == tb.keys() and all(filecmp.cmp(ta[k], tb[k], shallow=False) for k in ta)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the output is stale")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "_proto"
        fresh.mkdir()
        generate(fresh)
        if OUT_DIR.exists() and same_tree(fresh, OUT_DIR):
            print(f"gen_proto: {OUT_DIR.relative_to(ROOT)} is up to date")
            return 0
        if args.check:
            print(f"gen_proto: {OUT_DIR.relative_to(ROOT)} is stale; run scripts/gen_proto.py")
            return 1
        if OUT_DIR.exists():
            shutil.rmtree(OUT_DIR)
        shutil.copytree(fresh, OUT_DIR)
        print(f"gen_proto: wrote {OUT_DIR.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
