#!/usr/bin/env bash
# Make (or reuse) a virtual environment with the project installed:
#   scripts/venv.sh PYTHON VENV EXTRAS
# Checks the interpreter first, so an unsupported one is refused at once (pip would
# otherwise search every release for one that accepts it, for many minutes), and
# rebuilds a VENV that was made by another Python version.
set -euo pipefail
python=$1 venv=$2 extras=$3
min_minor=11

version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || {
    echo "error: cannot run '$python'. Install Python 3.$min_minor or newer and pass it as PYTHON=..." >&2
    exit 1
}
if [ "${version%%.*}" != 3 ] || [ "${version#*.}" -lt "$min_minor" ]; then
    echo "error: $python is Python $version; antigravity-sdk needs Python 3.$min_minor or newer" \
         "(tested on 3.11, 3.12 and 3.13). Run again with PYTHON=python3.12 (or another)." >&2
    exit 1
fi

stamp=$venv/.installed-$extras
if [ -x "$venv/bin/python" ]; then
    have=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo none)
    if [ "$have" != "$version" ]; then
        echo "==> $venv was made with Python $have; rebuilding it with $python ($version)"
        rm -rf "$venv"
    fi
fi
if [ -f "$stamp" ] && [ "$stamp" -nt pyproject.toml ]; then
    exit 0
fi
if [ ! -x "$venv/bin/python" ]; then
    echo "==> creating $venv with $python (Python $version)"
    "$python" -m venv "$venv"
fi
# On a terminal pip shows what it fetches, with its progress bars; in CI or a log, quiet.
case "${CI:-}" in ""|0|false|no) ci=no ;; *) ci=yes ;; esac
if [ -t 1 ] && [ "$ci" = no ]; then
    pip_output=(--progress-bar on)
else
    pip_output=(--progress-bar off -q)
fi
echo "==> installing antigravity-sdk[$extras] into $venv (pip, the first time about a minute)"
"$venv/bin/python" -m pip install --disable-pip-version-check "${pip_output[@]}" -e ".[$extras]"
touch "$stamp"
