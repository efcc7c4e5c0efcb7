"""What command rules add to a `run_command` decision.

Run: python benches/bench_command_rules.py [--quick]

Three decisions, interleaved in one run, each timed in CPU µs (thread time) and reported
as the median:

* baseline: `allow("run_command")` + `deny_all()`, no command rules;
* 20 command rules (19 `deny_commands` with one to three patterns each, one
  `allow_commands` with ten) + `deny_all()`, on a different ~200-character line every
  time (each decision parses its line once: no cache hit);
* the same 20 rules on one repeated line (the parse is cached).

Three ~200-character lines: a plain one (pipes, `&&`, quotes, redirections) and one with a
`$(…)` of plain words, both of which the parser splits without tree-sitter (its fast
path), and one with a glob too, which tree-sitter parses. Each line's floor row is
tree-sitter's parse of it alone, in C, with no tree walked: what any decision that goes
through tree-sitter pays at least. A decision is driven by `coroutine.send(None)` (every
predicate here is sync), so event-loop overhead is left out of all three alike.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Coroutine
from typing import Any

from antigravity_sdk import ToolCall, policy
from antigravity_sdk.policy._shell import _parser

DENIED = [
    ["rm -rf"],
    ["git push --force", "git push -f"],
    ["sudo", "doas", "su"],
    ["mkfs"],
    ["dd"],
    ["shred"],
    ["curl -o", "wget"],
    ["chmod -R"],
    ["chown -R"],
    ["find -delete"],
    ["git reset --hard"],
    ["git clean -f"],
    ["npm publish"],
    ["pip install", "pip uninstall"],
    ["docker run --privileged"],
    ["kubectl delete"],
    ["terraform apply", "terraform destroy"],
    ["systemctl stop", "systemctl disable"],
    ["crontab -r"],
]
ALLOWED = [
    "git status",
    "git diff",
    "git log",
    "grep",
    "head",
    "tail",
    "pytest",
    "python -m pytest",
    "echo",
    "wc",
]
PLAIN = (
    "git diff --stat HEAD~{n} -- src/ tests/ | grep -v '^ *$' | head -n 40 && "
    'python -m pytest -q -k "parse and not slow" tests/test_shell.py --maxfail=2 2>&1 | '
    "tail -n 20 > out.txt; git status --short; echo done"
)
"""A plain line: pipes, `&&`, quotes, redirections (the parser's fast path)."""
SUBSTITUTION = (
    "git diff --stat HEAD~{n} -- src/ | grep -v '^ *$' | head -n 40 && "
    'python -m pytest -q -k "parse and not slow" tests/test_shell.py --maxfail=2 2>&1 | '
    'tail -n 20; echo "done: $(git log -1 --format=%h)" > out.txt'
)
"""A line with a command substitution of plain words (the fast path too)."""
GLOB = SUBSTITUTION.replace("tests/test_shell.py", "tests/test_*.py")
"""The same with a glob: tree-sitter parses it."""


def enforcers() -> tuple[policy.PolicyEnforcer, policy.PolicyEnforcer]:
    rules = [policy.deny_commands(p, name=f"deny-{i}") for i, p in enumerate(DENIED)]
    rules.append(policy.allow_commands(ALLOWED, name="allowed"))
    assert len(rules) == 20
    with_rules = policy.enforce([*rules, policy.deny_all()])
    baseline = policy.enforce([policy.allow("run_command"), policy.deny_all()])
    return baseline, with_rules


def cpu_us(enforcer: policy.PolicyEnforcer, call: ToolCall) -> float:
    """One decision's thread CPU time in µs; every predicate is sync, so one send ends it."""
    coroutine: Coroutine[Any, Any, Any] = enforcer.pre_tool_call(call)
    start = time.thread_time_ns()
    try:
        coroutine.send(None)
    except StopIteration as done:
        elapsed = time.thread_time_ns() - start
        assert done.value.allow, "the bench line must be allowed by both rule sets"
        return elapsed / 1000
    raise RuntimeError("a decision awaited: the bench assumes sync predicates")


def parse_us(line: str) -> float:
    """tree-sitter's parse of `line` alone, in thread CPU µs."""
    data = line.encode()
    start = time.thread_time_ns()
    _parser().parse(data)
    return (time.thread_time_ns() - start) / 1000


def measure(template: str, rounds: int) -> tuple[float, float, float, float]:
    """Median CPU µs of a decision: baseline, 20 rules on new lines, 20 rules cached; and
    of tree-sitter's parse of the line alone."""
    baseline, with_rules = enforcers()

    def call(n: int) -> ToolCall:
        return ToolCall(name="run_command", args={"CommandLine": template.format(n=n)})

    for n in range(50):  # warm up the parser and the code paths, on lines not timed
        cpu_us(with_rules, call(10**6 + n))
    cached = call(0)
    base: list[float] = []
    fresh: list[float] = []
    repeat: list[float] = []
    for n in range(1, rounds + 1):
        line = call(n)
        base.append(cpu_us(baseline, line))
        fresh.append(cpu_us(with_rules, line))
        repeat.append(cpu_us(with_rules, cached))
    # Apart, after: a parse between two decisions would leave the next one a colder cache.
    floor = [parse_us(template.format(n=n)) for n in range(1, rounds + 1)]
    b, f, r, p = (statistics.median(m) for m in (base, fresh, repeat, floor))
    return b, f, r, p


def main(rounds: int) -> None:
    print(f"run_command decision, median CPU µs over {rounds} interleaved rounds")
    print(f"{'line':<38}{'case':<30}{'µs':>8}{'added':>9}")
    lines = (("plain", PLAIN), ("with $(...)", SUBSTITUTION), ("with $(...) and a glob", GLOB))
    for label, template in lines:
        b, f, r, p = measure(template, rounds)
        label = f"{label} ({len(template.format(n=1))} chars)"
        print(f"{label:<38}{'no command rules':<30}{b:>8.1f}")
        print(f"{'':<38}{'20 rules, a new line each time':<30}{f:>8.1f}{f - b:>9.1f}")
        print(f"{'':<38}{'20 rules, the same line':<30}{r:>8.1f}{r - b:>9.1f}")
        print(f"{'':<38}{'floor: tree-sitter parse alone':<30}{p:>8.1f}")


if __name__ == "__main__":
    main(300 if "--quick" in sys.argv else 3000)
