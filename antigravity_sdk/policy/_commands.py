"""Command rules: `allow_commands`, `deny_commands`, `ask_commands` on `run_command`.

A pattern is plain words: a program and the words it starts with (`"npm test"`,
`"git push --force"`, `"rm -rf"`). The line is parsed as shell (`_shell`) into its simple
commands, nested ones included. An allow rule is a proof: it holds only when the whole
line reduced to plain words and every simple command starts with one of its patterns. A
deny or ask rule holds when any simple command matches one of its patterns, found by its
program's base name, its flags in any spelling and order, or when the line cannot be
reduced to plain words (`UnprovableCommand`: raised, so that the engine's fail-safe rule
applies and the trace says why).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal, TypeAlias

from ..errors import PolicyError
from ._programs import SimpleCommand
from ._rules import AskHandler, Decision, Policy, Undecidable
from ._shell import ParsedLine, parse_command_line

Mode: TypeAlias = Literal["allow", "deny", "ask"]

__all__ = [
    "CommandPredicate",
    "ParsedLine",
    "SimpleCommand",
    "UnprovableCommand",
    "allow_commands",
    "ask_commands",
    "deny_commands",
    "parse_command_line",
]


class UnprovableCommand(Undecidable):
    """The command line cannot be reduced to plain words: allow rules do not match it,
    deny and ask rules deny it (the engine's fail-safe rule)."""


# -- flags --------------------------------------------------------------------------------

# Spellings of one option, by program: each maps to one canonical name. `rm -R`,
# `rm --recursive` and `rm -r` are one flag; so are `git push -f` and `--force`.
_ALIASES: Final[Mapping[str, Mapping[str, str]]] = {
    "rm": {"R": "r", "recursive": "r", "force": "f", "dir": "d", "interactive": "i"},
    "cp": {"R": "r", "recursive": "r", "force": "f", "archive": "a"},
    "mv": {"force": "f", "interactive": "i"},
    "chmod": {"recursive": "R"},
    "chown": {"recursive": "R"},
    "chgrp": {"recursive": "R"},
    "git": {"force": "f", "delete": "d"},
    "sed": {"in-place": "i"},
    "npm": {"global": "g", "force": "f"},
    "curl": {"output": "o", "insecure": "k"},
    "grep": {"R": "r", "recursive": "r"},
}
_SINGLE_DASH: Final = frozenset({"find"})
"""Programs whose options are whole words after one dash (`find -delete`, `-name`)."""
_PLAIN: Final = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")


def _flags(word: str, program: str) -> tuple[str, ...]:
    """The canonical flags a word spells (`-rf` → r, f; `--force=x` → force), or ()."""
    aliases = _ALIASES.get(program, {})
    if word.startswith("--") and len(word) > 2:
        name = word[2:].partition("=")[0]
        return (aliases.get(name, name),)
    if word.startswith("-") and len(word) > 1:
        if program in _SINGLE_DASH:
            return (aliases.get(word[1:], word[1:]),)
        return tuple(aliases.get(letter, letter) for letter in word[1:])
    return ()


def _long_names(flag: str, program: str) -> tuple[str, ...]:
    """Every long spelling of a canonical flag: what an abbreviation may shorten."""
    names = [long for long, canonical in _ALIASES.get(program, {}).items() if canonical == flag]
    if len(flag) > 1:
        names.append(flag)
    return tuple(names)


class _Pattern:
    """One compiled pattern: the program, then steps (a word, or a run of flags)."""

    __slots__ = ("flags", "longs", "path", "program", "steps", "text", "wanted", "words")

    def __init__(self, text: str) -> None:
        words = text.split()
        if not words:
            raise ValueError("an empty pattern")
        bad = next((w for w in words if not _PLAIN.fullmatch(w)), None)
        if bad is not None:
            raise ValueError(
                f"{text!r} is not plain words ({bad!r}): patterns name a program and the "
                "words it starts with, without quotes, globs or shell syntax"
            )
        if words[0].startswith("-"):
            raise ValueError(f"{text!r} starts with a flag: a pattern starts with a program")
        self.text = " ".join(words)
        self.words = tuple(words)
        self.path = "/" in words[0]
        self.program = words[0]
        name = words[0].rpartition("/")[2]
        steps: list[str | frozenset[str]] = []
        for word in words[1:]:
            spelled = _flags(word, name)
            if not spelled:
                steps.append(word)
            elif steps and isinstance(steps[-1], frozenset):
                steps[-1] = steps[-1] | frozenset(spelled)
            else:
                steps.append(frozenset(spelled))
        self.steps = tuple(steps)
        self.wanted = tuple(s for s in steps if isinstance(s, str))
        self.flags = frozenset(f for s in steps if isinstance(s, frozenset) for f in s)
        self.longs = {flag: _long_names(flag, name) for flag in self.flags}

    def names(self, cmd: SimpleCommand) -> bool:
        """The program: a bare pattern names a base name, a path names that path."""
        return cmd.words[0] == self.program if self.path else cmd.program == self.program

    def allows(self, cmd: SimpleCommand) -> bool:
        """The proof: the command's first words are the pattern's, literally, with each
        run of flags spelled in any order (and only those flags, before the last word).
        A bare pattern allows only a program found by `PATH` (`ls`, not `/tmp/x/ls`)."""
        if cmd.words[0] != self.program:
            return False
        if not self.steps:
            return True
        words, dynamic = cmd.words, cmd.dynamic
        i = 1
        last = len(self.steps) - 1
        for n, step in enumerate(self.steps):
            if isinstance(step, str):
                if i >= len(words) or i in dynamic or words[i] != step:
                    return False
                i += 1
                continue
            seen: set[str] = set()
            while i < len(words) and i not in dynamic and words[i].startswith("-"):
                spelled = _flags(words[i], cmd.program)
                if n != last and not step.issuperset(spelled):
                    break
                seen.update(spelled)
                i += 1
            if not seen.issuperset(step):
                return False
        return True

    def denies(self, cmd: SimpleCommand) -> bool:
        """Generous: the pattern's words appear in order anywhere after the program, and
        its flags anywhere, in any spelling (abbreviated long options too); a word that is
        not a literal could be any of them."""
        if not self.names(cmd):
            return False
        dynamic = cmd.dynamic
        if dynamic and (len(dynamic) > 1 or 0 not in dynamic):
            return True
        words = cmd.words
        for word in self.wanted:  # the common case, cheaply: a word is missing
            if word not in words:
                return False
        wanted = list(self.wanted)
        flags: set[str] = set()
        longs: list[str] = []
        for word in words[1:]:
            if wanted and word == wanted[0]:
                wanted.pop(0)
            spelled = _flags(word, cmd.program)
            flags.update(spelled)
            if word.startswith("--") and len(word) > 2:
                longs.append(word[2:].partition("=")[0])
        if wanted:
            return False
        if cmd.program == "git" and "push" in words and any(w[:1] == "+" for w in words):
            flags.add("f")  # `git push origin +main` forces, as --force does
        return all(
            flag in flags or any(n.startswith(ln) for n in self.longs[flag] for ln in longs)
            for flag in self.flags
        )


def _compile(patterns: object, builder: str) -> tuple[_Pattern, ...]:
    if isinstance(patterns, str):
        raise PolicyError(
            f"{builder} takes a list of command patterns, not the string {patterns!r} "
            f"(write [{patterns!r}])"
        )
    if not isinstance(patterns, Iterable):
        raise PolicyError(f"{builder} takes a list of command patterns, got {patterns!r}")
    compiled: list[_Pattern] = []
    for pattern in patterns:
        if not isinstance(pattern, str):
            raise PolicyError(f"{builder}: a command pattern must be a str, got {pattern!r}")
        try:
            compiled.append(_Pattern(pattern))
        except ValueError as exc:
            raise PolicyError(f"{builder}: {exc}") from None
    if not compiled:
        raise PolicyError(f"{builder} needs at least one command pattern")
    return tuple(compiled)


_VERDICTS: Final = 1024
"""How many lines' verdicts each command rule remembers (then it starts afresh)."""


class CommandPredicate:
    """The predicate a command rule puts on its `Policy`: called with the call's args,
    it parses `CommandLine` (cached) and matches it as `mode` says (module docstring)."""

    __slots__ = ("_by_program", "_compiled", "_programs", "_verdicts", "mode", "patterns")

    def __init__(self, patterns: Sequence[str], mode: Mode, builder: str = "") -> None:
        compiled = _compile(patterns, builder or f"{mode}_commands")
        self._compiled = compiled
        self.patterns: tuple[str, ...] = tuple(p.text for p in compiled)
        self.mode: Mode = mode
        by_program: dict[str, list[_Pattern]] = {}
        for pattern in compiled:
            key = pattern.program.rpartition("/")[2]
            by_program.setdefault(key, []).append(pattern)
        self._by_program = {k: tuple(v) for k, v in by_program.items()}
        self._programs = frozenset(by_program)
        self._verdicts: dict[str, bool | str] = {}

    def __call__(self, args: Mapping[str, Any]) -> bool:
        line = args["CommandLine"]
        if line.__class__ is not str:
            raise TypeError(f"CommandLine must be a string, got {type(line).__name__}")
        verdicts = self._verdicts
        verdict = verdicts.get(line)
        if verdict is None:
            parsed = parse_command_line(line)
            if (
                self.mode != "allow"
                and not parsed.unprovable
                and parsed.programs.isdisjoint(self._programs)
            ):
                verdict = False  # the common case, inline: most rules name none of them
            else:
                verdict = self._verdict(parsed)
            if len(verdicts) >= _VERDICTS:
                verdicts.clear()
            verdicts[line] = verdict
        if verdict.__class__ is str:
            raise UnprovableCommand(verdict)
        return verdict is True

    def _verdict(self, parsed: ParsedLine) -> bool | str:
        """True or False, or why the line cannot be checked."""
        if parsed.unprovable:
            return parsed.unprovable
        by_program = self._by_program
        if self.mode != "allow" and parsed.programs.isdisjoint(self._programs):
            return False
        if self.mode == "allow":
            if not parsed.commands:
                return False
            for cmd in parsed.commands:
                for pattern in by_program.get(cmd.program, ()):
                    if pattern.allows(cmd):
                        break
                else:
                    return False
            return True
        for cmd in parsed.commands:
            for pattern in by_program.get(cmd.program, ()):
                if pattern.denies(cmd):
                    return True
        return False

    def matching(self, cmd: SimpleCommand) -> str:
        """The pattern that matches `cmd` as this rule's mode matches, or ""."""
        for pattern in self._by_program.get(cmd.program, ()):
            if pattern.allows(cmd) if self.mode == "allow" else pattern.denies(cmd):
                return pattern.text
        return ""

    def explain(self, line: str) -> list[str]:
        """Each simple command of `line` and the pattern that matched it, or why the line
        cannot be checked: what `antigravity policy explain` shows under a command rule."""
        parsed = parse_command_line(line)
        lines = []
        for cmd in parsed.commands:
            pattern = self.matching(cmd)
            lines.append(f"{cmd}: " + (f"matches {pattern!r}" if pattern else "no pattern"))
        if parsed.redirects:
            lines.append("redirects to: " + ", ".join(parsed.redirects))
        if parsed.unprovable:
            effect = "does not match" if self.mode == "allow" else f"{self.mode} rules match"
            lines.append(f"cannot be checked: {parsed.unprovable} ({effect})")
        elif not parsed.commands:
            lines.append("no command")
        return lines

    def __repr__(self) -> str:
        return f"command in {list(self.patterns)!r}"


# -- builders ---------------------------------------------------------------------------


def allow_commands(patterns: Sequence[str], *, name: str = "", reason: str = "") -> Policy:
    """Approve a `run_command` whose every simple command starts with one of `patterns`
    (and that reduces to plain words). `reason` is kept for symmetry with the other
    builders; an allow rule never denies."""
    predicate = CommandPredicate(patterns, "allow", "allow_commands")
    return Policy("run_command", Decision.APPROVE, predicate, name=name, reason=reason)


def deny_commands(patterns: Sequence[str], *, name: str = "", reason: str = "") -> Policy:
    """Deny a `run_command` that runs any command matching one of `patterns` anywhere in
    the line (nested ones too), or that cannot be reduced to plain words."""
    predicate = CommandPredicate(patterns, "deny", "deny_commands")
    return Policy("run_command", Decision.DENY, predicate, name=name, reason=reason)


def ask_commands(
    patterns: Sequence[str],
    handler: AskHandler | None = None,
    *,
    name: str = "",
    reason: str = "",
    timeout: float | None = None,
) -> Policy:
    """Ask `handler` about a `run_command` that runs any command matching one of
    `patterns`; a line that cannot be reduced to plain words is denied without asking."""
    predicate = CommandPredicate(patterns, "ask", "ask_commands")
    return Policy(
        "run_command",
        Decision.ASK_USER,
        predicate,
        handler,
        name=name,
        reason=reason,
        timeout=timeout,
    )
