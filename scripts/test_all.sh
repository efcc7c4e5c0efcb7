#!/usr/bin/env bash
# Run the whole test suite on every supported CPython this machine has (see pythons.sh),
# each in its own virtual environment (.venv-3.X), except DONE, the version `make test`
# already covered. Runs them all, then fails if any failed.
#   scripts/test_all.sh [DONE]
set -uo pipefail
done_version=${1:-}
cd "$(dirname "$0")/.."
failed=() passed=() ran=0
while read -r version python; do
    [ "$version" = "$done_version" ] && { passed+=("$version"); continue; }
    ran=$((ran + 1))
    echo "==> Python $version ($python): the whole suite"
    if scripts/venv.sh "$python" ".venv-$version" dev \
        && ".venv-$version/bin/python" -m pytest -q -p no:cacheprovider; then
        passed+=("$version")
    else
        failed+=("$version")
    fi
done < <(scripts/pythons.sh)
missing=()
for v in 3.11 3.12 3.13; do
    [[ " ${passed[*]} ${failed[*]} " == *" $v "* ]] || missing+=("$v")
done
echo "==> suites passed on: ${passed[*]:-none}${failed:+; FAILED on: ${failed[*]}}${missing:+; not found here: ${missing[*]}}"
[ ${#failed[@]} -eq 0 ]
