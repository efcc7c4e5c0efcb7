"""tree-sitter-bash against bashlex on the command-rule corpus: the measurement behind the
parser choice (docs/decisions.md, "Command rules: the shell parser").

Run: python benches/compare_shell_parsers.py

bashlex is GPLv3+ and never a dependency of this package: install it somewhere apart
(`pip install --target /tmp/bashlex bashlex`) and put that on PYTHONPATH for this script
only. Without it, only tree-sitter is measured.

Correctness first: for every line of tests/shell_corpus.py (and a few more tricky ones),
does the parser accept exactly what `bash -n` accepts, and where both accept, do they
find the same words in command position? Then speed: the median µs to parse a line.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from shell_corpus import BYPASSES, ORDINARY

from antigravity_sdk.policy._shell import _parser

EXTRA = [
    "r\\\nm -rf x",  # a continuation inside a word: bash runs `rm`
    "echo $'\\x72m'",
    "echo {a,b}",
    "case $x in a) ls;; *) echo;; esac",
    "cat <<EOF | sh\nls\nEOF",
    "echo $((1 + 2)) ${x:-$(id)}",
    "coproc ls",
    "select x in a b; do ls; done",
    "[[ -f x && $y == z* ]] && ls",
    "ls > >(cat) 2> >(cat >&2)",
    "time -p ls",
    "echo ${x@P}",
    "a=(1 2 3); echo ${a[@]}",
    "function f { ls; }",
    "ls &>/dev/null &",
]


def corpus() -> list[str]:
    lines = [line.replace("{ws}", "/ws") for line in [*BYPASSES, *ORDINARY, *EXTRA]]
    return [line for line in lines if "\x00" not in line]  # bash -c cannot take a NUL


def bash_accepts(line: str) -> bool:
    done = subprocess.run(["bash", "-n", "-c", line], capture_output=True, timeout=10)
    return done.returncode == 0


# -- the two parsers: (accepts, command words) ------------------------------------------


def tree_sitter(line: str) -> tuple[bool, list[str]]:
    root = _parser().parse(line.encode()).root_node
    if root.has_error:
        return False, []
    found: list[str] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "command_name" and node.text is not None:
            found.append(node.text.decode())
        stack.extend(reversed(node.children))
    return True, found


def bashlex_parser() -> Callable[[str], tuple[bool, list[str]]] | None:
    try:
        import bashlex  # type: ignore[import-not-found]
    except ImportError:
        return None

    def words(node: Any) -> Iterator[str]:
        if node.kind == "command":
            first = next((p for p in node.parts if p.kind == "word"), None)
            if first is not None:
                yield first.word
        for value in vars(node).values():
            children = value if isinstance(value, list) else [value]
            for child in children:
                if hasattr(child, "kind"):
                    yield from words(child)

    def parse(line: str) -> tuple[bool, list[str]]:
        try:
            trees = bashlex.parse(line)
        except Exception:  # bashlex raises its own errors and Python ones alike
            return False, []
        return True, [w for tree in trees for w in words(tree)]

    return parse


def median_us(parse: Callable[[str], Any], lines: list[str]) -> float:
    times = []
    for line in lines:
        start = time.perf_counter_ns()
        for _ in range(20):
            parse(line)
        times.append((time.perf_counter_ns() - start) / 20 / 1000)
    return statistics.median(times)


def main() -> None:
    lines = corpus()
    truth = {line: bash_accepts(line) for line in lines}
    parsers: dict[str, Callable[[str], tuple[bool, list[str]]]] = {"tree-sitter-bash": tree_sitter}
    other = bashlex_parser()
    if other is not None:
        parsers["bashlex"] = other
    else:
        print("bashlex is not importable: measuring tree-sitter only\n")
    results = {name: {line: parse(line) for line in lines} for name, parse in parsers.items()}
    print(f"{len(lines)} lines; bash -n accepts {sum(truth.values())}\n")
    print(f"{'parser':<18}{'agrees with bash -n':>20}{'accepts bad':>13}{'refuses good':>14}")
    for name, result in results.items():
        agree = sum(result[line][0] == truth[line] for line in lines)
        bad = [line for line in lines if result[line][0] and not truth[line]]
        good = [line for line in lines if not result[line][0] and truth[line]]
        print(f"{name:<18}{agree:>20}{len(bad):>13}{len(good):>14}")
        for line in bad:
            print(f"    accepts what bash refuses: {line[:60]!r}")
        for line in good:
            print(f"    refuses what bash accepts: {line[:60]!r}")
    if other is not None:
        both = [line for line in lines if all(r[line][0] for r in results.values())]
        ours, theirs = results["tree-sitter-bash"], results["bashlex"]
        differ = [line for line in both if ours[line][1] != theirs[line][1]]
        print(f"\ncommand words (as written) differ on {len(differ)} of {len(both)} lines:")
        for line in differ:
            print(f"    {line[:50]!r}\n        tree-sitter {ours[line][1]}")
            print(f"        bashlex     {theirs[line][1]}")
    accepted = [line for line in lines if truth[line] and len(line) < 1000]
    print(f"\nmedian µs to parse a line ({len(accepted)} valid lines under 1000 characters):")
    for name, parse in parsers.items():
        print(f"    {name:<18}{median_us(parse, accepted):>8.1f}")


if __name__ == "__main__":
    main()
