#!/usr/bin/env bash
# Print one interpreter per supported CPython version found on this machine, as
# "VERSION PATH" lines: `python3.X` on PATH first, else the newest pyenv build of 3.X.
set -uo pipefail
supported=(3.11 3.12 3.13)
pyenv_root=$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")
for v in "${supported[@]}"; do
    found=""
    if command -v "python$v" >/dev/null 2>&1; then
        found=$(command -v "python$v")
    fi
    # pyenv's shims are on PATH but may point at another version: ask the interpreter.
    if [ -n "$found" ] && [ "$("$found" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" != "$v" ]; then
        found=""
    fi
    if [ -z "$found" ] && [ -d "$pyenv_root/versions" ]; then
        for dir in $(ls -d "$pyenv_root/versions/$v".* 2>/dev/null | sort -V -r); do
            if [ -x "$dir/bin/python" ]; then found=$dir/bin/python; break; fi
        done
    fi
    [ -n "$found" ] && echo "$v $found"
done
exit 0
