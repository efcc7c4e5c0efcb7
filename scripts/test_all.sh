#!/usr/bin/env bash
# `make test` on the default python3, then the whole suite on every other supported
# CPython this machine has (see pythons.sh), each in its own virtual environment
# (.venv-3.X). The other environments are built in the background while `make test` runs
# (installing is mostly waiting on the network and the disk); the suites themselves run
# one at a time, so timing-sensitive tests never share the cores with another suite.
# Runs everything, then fails if anything failed.
#   scripts/test_all.sh PYTHON
set -uo pipefail
python=${1:-python3}
cd "$(dirname "$0")/.."
default=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo none)

declare -A setup_pid=() interpreter=()
logs=$(mktemp -d)
while read -r version path; do
    [ "$version" = "$default" ] && continue
    interpreter[$version]=$path
    scripts/venv.sh "$path" ".venv-$version" dev >"$logs/$version.log" 2>&1 &
    setup_pid[$version]=$!
done < <(scripts/pythons.sh)

failed=() passed=()
if make test PYTHON="$python"; then passed+=("$default"); else failed+=("$default"); fi

for version in $(printf '%s\n' "${!interpreter[@]}" | sort -V); do
    echo "==> Python $version (${interpreter[$version]}): the whole suite"
    if ! wait "${setup_pid[$version]}"; then
        cat "$logs/$version.log"
        failed+=("$version")
        continue
    fi
    cat "$logs/$version.log"
    if ".venv-$version/bin/python" -m pytest -q -rs -p no:cacheprovider; then
        passed+=("$version")
    else
        failed+=("$version")
    fi
done
rm -rf "$logs"

missing=()
for v in 3.11 3.12 3.13; do
    [[ " ${passed[*]} ${failed[*]} " == *" $v "* ]] || missing+=("$v")
done
echo "==> suites passed on: ${passed[*]:-none}${failed:+; FAILED on: ${failed[*]}}${missing:+; not found here: ${missing[*]}}"
[ ${#failed[@]} -eq 0 ]
