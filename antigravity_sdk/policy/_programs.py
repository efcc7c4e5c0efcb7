"""What programs do with their arguments: the commands they run, and the code they hide.

Once the parser (`_shell`) has a simple command, `expand` looks its program up here: a
shell's `-c` string and a literal `eval` are parsed again; a wrapper (`env`, `sudo`,
`timeout`, `xargs`, …) yields the command it runs as a nested simple command; options that
run a command (`find -exec`, `rg --pre`, `git rebase --exec`, `find -delete` as the `rm`
it amounts to) do too; options that run code the rules cannot read (`git -c`, `tar
--to-command`, `sed`'s `e`, `awk`'s `system()`, an `env` assignment, `source`) make the
line unprovable. An option a wrapper's table does not know is unprovable as well: it may
take a value, and then the command would start elsewhere.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

MAX_DEPTH: Final = 8
"""How deep `sh -c`, `eval` and wrappers may nest inside one another."""


@dataclass(frozen=True, slots=True, init=False)
class SimpleCommand:
    """One command the line runs: its words after quote removal, how it was found (`via`:
    "" at the top, else e.g. "sh -c", "$(...)", "sudo", "find -exec"), and which words are
    not plain literals (`dynamic`: indices of words holding an expansion, a glob or a
    substitution, shown as written). `program` is the first word's base name."""

    words: tuple[str, ...]
    via: str = ""
    dynamic: frozenset[int] = frozenset()
    program: str = field(init=False)

    def __init__(
        self, words: tuple[str, ...], via: str = "", dynamic: frozenset[int] = frozenset()
    ) -> None:
        # By hand, through the slots: a frozen dataclass's `__init__` costs twice as much,
        # and every command of every line checked is built on the decision's path.
        _set_words(self, words)
        _set_via(self, via)
        _set_dynamic(self, dynamic)
        _set_program(self, words[0].rpartition("/")[2] if words else "")

    def __str__(self) -> str:
        shown = " ".join(
            w if i in self.dynamic else shlex.quote(w) for i, w in enumerate(self.words)
        )
        return f"{shown}  (via {self.via})" if self.via else shown


_set_words, _set_via, _set_dynamic, _set_program = (
    SimpleCommand.__dict__[name].__set__ for name in ("words", "via", "dynamic", "program")
)


class Context:
    """What `expand` adds to: the commands found, and the first reason the line cannot be
    checked. `_shell._Walk` is the one implementation; `parse` runs a nested shell string."""

    __slots__ = ("commands", "reason")

    def __init__(self) -> None:
        self.commands: list[SimpleCommand] = []
        self.reason = ""

    def fail(self, reason: str) -> None:
        if not self.reason:
            self.reason = reason

    def parse(self, source: str, via: str, depth: int) -> None:
        raise NotImplementedError


SHELL_VARIABLES: Final = frozenset(
    {"PATH", "IFS", "CDPATH", "GLOBIGNORE", "HOME", "PS4", "BASHOPTS", "SHELLOPTS", "BASH_ENV"}
)
"""Variables whose value changes what the shell itself runs (lookup, splitting, globbing)."""


def expand(ctx: Context, cmd: SimpleCommand, depth: int) -> None:
    """Record `cmd` in `ctx`, then what it runs (nested commands) or hides (unprovable)."""
    ctx.commands.append(cmd)
    if 0 in cmd.dynamic:
        ctx.fail(f"a variable, glob or substitution in command position: {cmd.words[0]}")
        return
    if depth > MAX_DEPTH:
        ctx.fail(f"commands nest more than {MAX_DEPTH} levels deep")
        return
    program = cmd.program
    reason = _UNPROVABLE.get(program)
    if reason is not None:
        ctx.fail(reason)
        return
    handler = _HANDLERS.get(program)
    if handler is not None:
        handler(ctx, cmd, depth)


def _nested(ctx: Context, cmd: SimpleCommand, start: int, via: str, depth: int) -> None:
    """Expand `cmd.words[start:]` as the command `cmd` runs."""
    dynamic = frozenset(i - start for i in cmd.dynamic if i >= start)
    expand(ctx, SimpleCommand(cmd.words[start:], via, dynamic), depth + 1)


# -- shells and eval --------------------------------------------------------------------------

_SHELLS: Final = frozenset(
    {"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh"}
)


def _shell(ctx: Context, cmd: SimpleCommand, depth: int) -> None:
    """`sh -c STRING` parses STRING; a shell without `-c` runs a file or its input."""
    words, program = cmd.words, cmd.program
    command_string = False
    i = 1
    while i < len(words):
        word = words[i]
        if i in cmd.dynamic:
            ctx.fail(f"an option of {program} that cannot be read: {word}")
            return
        if word in ("-", "--"):
            i += 1
            break
        if word.startswith("--"):
            i += 2 if word in ("--rcfile", "--init-file") else 1
            continue
        if len(word) > 1 and word[0] in "-+":
            command_string = command_string or "c" in word
            i += 2 if word[-1] in "oO" else 1
            continue
        break
    if not command_string:
        what = f"a script file ({words[i]})" if i < len(words) else "commands from its input"
        ctx.fail(f"{program} runs {what}, which the rules cannot read")
    elif i >= len(words):
        ctx.fail(f"{program} -c without a command string")
    elif i in cmd.dynamic:
        ctx.fail(f"{program} -c with a command string that is not a literal: {words[i]}")
    else:
        ctx.parse(words[i], f"{program} -c", depth + 1)


def _eval(ctx: Context, cmd: SimpleCommand, depth: int) -> None:
    if cmd.dynamic:
        ctx.fail("eval of something that is not a literal")
    elif len(cmd.words) > 1:
        ctx.parse(" ".join(cmd.words[1:]), "eval", depth + 1)


def _su(ctx: Context, cmd: SimpleCommand, depth: int) -> None:
    words = cmd.words
    for i, word in enumerate(words):
        if word.startswith(("--command=", "--session-command=")):
            value, dynamic = word.partition("=")[2], i in cmd.dynamic
        elif word in ("-c", "--command", "--session-command") and i + 1 < len(words):
            value, dynamic = words[i + 1], i + 1 in cmd.dynamic
        else:
            continue
        if dynamic:
            ctx.fail(f"su -c with a command string that is not a literal: {value}")
        else:
            ctx.parse(value, "su -c", depth + 1)
        return
    ctx.fail("su starts a shell reading commands from its input")


def _assigns(ctx: Context, cmd: SimpleCommand, depth: int) -> None:
    """`read`, `printf -v`, `mapfile`, …: naming a shell variable or an array element (an
    arithmetic subscript) changes what runs."""
    for word in cmd.words[1:]:
        if word in SHELL_VARIABLES or "[" in word:
            ctx.fail(f"{cmd.program} assigns {word}, which can change what runs")
            return


# -- wrappers ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Wrapper:
    """A program that runs the command given after its options (and `skip` operands).

    Options are named without dashes: one letter for `-x`, longer for `--name`."""

    args: frozenset[str] = frozenset()  # options that take a value
    flags: frozenset[str] = frozenset()  # options that do not
    optional: frozenset[str] = frozenset()  # short options whose value is attached, if any
    stop: frozenset[str] = frozenset()  # options after which no command runs
    unsafe: frozenset[str] = frozenset()  # options that run a shell or a string
    skip: int = 0  # operands before the command (timeout's duration, chroot's root)
    numeric: bool = False  # `-5` is an option (nice)
    assign: bool = False  # NAME=VALUE operands set the command's environment (env)
    replace: frozenset[str] = field(default_factory=frozenset)  # xargs -I: words it fills


def _set(*names: str) -> frozenset[str]:
    return frozenset(names)


_WRAPPERS: Final[Mapping[str, _Wrapper]] = {
    "env": _Wrapper(
        args=_set("u", "unset", "C", "chdir"),
        flags=_set("i", "ignore-environment", "0", "null", "v", "debug"),
        unsafe=_set("S", "split-string", "P"),
        assign=True,
    ),
    "nice": _Wrapper(args=_set("n", "adjustment"), numeric=True),
    "timeout": _Wrapper(
        args=_set("s", "signal", "k", "kill-after"),
        flags=_set("preserve-status", "foreground", "v", "verbose"),
        skip=1,
    ),
    "nohup": _Wrapper(),
    "sudo": _Wrapper(
        args=_set(*"ugCDhprtUTR", "user", "group", "close-from", "chdir", "host", "prompt")
        | _set("role", "type", "other-user", "command-timeout", "chroot"),
        flags=_set(*"AbEHnPSBNk", "askpass", "background", "preserve-env", "set-home")
        | _set("non-interactive", "preserve-groups", "stdin", "bell", "reset-timestamp"),
        stop=_set(*"elvVK", "edit", "list", "validate", "remove-timestamp"),
        unsafe=_set("s", "i", "shell", "login"),
    ),
    "doas": _Wrapper(args=_set("u", "C"), flags=_set("n"), stop=_set("L"), unsafe=_set("s")),
    "exec": _Wrapper(args=_set("a"), flags=_set("c", "l")),
    "command": _Wrapper(flags=_set("p"), stop=_set("v", "V")),
    "builtin": _Wrapper(),
    "time": _Wrapper(
        args=_set("f", "o", "format", "output"),
        flags=_set(*"pavq", "portability", "append", "verbose", "quiet"),
    ),
    "stdbuf": _Wrapper(args=_set("i", "o", "e", "input", "output", "error")),
    "setsid": _Wrapper(flags=_set("c", "f", "w", "ctty", "fork", "wait")),
    "ionice": _Wrapper(
        args=_set("c", "n", "class", "classdata"),
        flags=_set("t", "ignore"),
        stop=_set("p", "P", "u", "pid", "pgid", "uid"),
    ),
    "chroot": _Wrapper(args=_set("userspec", "groups"), flags=_set("skip-chdir"), skip=1),
    "busybox": _Wrapper(),
    "xargs": _Wrapper(
        args=_set(*"adEILnPs", "arg-file", "delimiter", "eof", "max-lines", "max-args")
        | _set("max-procs", "max-chars", "process-slot-var"),
        flags=_set(*"0rtpxo", "null", "no-run-if-empty", "verbose", "interactive", "exit")
        | _set("open-tty", "show-limits", "replace"),
        optional=_set("e", "i", "l"),
        replace=_set("I", "i", "replace"),
    ),
}


def _wrapper(ctx: Context, cmd: SimpleCommand, depth: int) -> None:
    """Find where the wrapped command starts; expand it as a nested command."""
    spec = _WRAPPERS[cmd.program]
    words, program = cmd.words, cmd.program
    replace = ""
    i = 1
    while i < len(words):
        word = words[i]
        if i in cmd.dynamic:
            ctx.fail(f"an argument of {program} that cannot be read: {word}")
            return
        if word == "--":
            i += 1
            break
        if word.startswith("--"):
            name, eq, value = word[2:].partition("=")
            if name in ("help", "version") or name in spec.stop:
                return
            if name in spec.unsafe:
                ctx.fail(f"{program} {word} runs a string the rules cannot read")
                return
            if name in spec.replace:
                replace = value if eq else "{}"
            if name in spec.args and not eq:
                i += 2
            elif name in spec.args or name in spec.flags:
                i += 1
            else:
                ctx.fail(f"an option of {program} the rules do not know: {word}")
                return
            continue
        if word == "-" and spec.assign:
            i += 1
            continue
        if len(word) > 1 and word[0] == "-":
            if spec.numeric and word[1:].lstrip("+-").isdigit():
                i += 1
                continue
            step = 1
            for j, letter in enumerate(word[1:], start=2):
                if letter in spec.stop:
                    return
                if letter in spec.unsafe:
                    ctx.fail(f"{program} -{letter} runs a string the rules cannot read")
                    return
                if letter in spec.args or letter in spec.optional:
                    value = word[j:]
                    if letter in spec.args and not value:
                        step, value = 2, words[i + 1] if i + 1 < len(words) else ""
                    if letter in spec.replace:
                        replace = value or "{}"
                    break
                if letter not in spec.flags:
                    ctx.fail(f"an option of {program} the rules do not know: -{letter}")
                    return
            i += step
            continue
        if spec.assign and "=" in word and _NAME.match(word):
            ctx.fail(f"{program} {word[:40]} sets the environment, which can change what runs")
            return
        break
    i += spec.skip
    if i >= len(words):
        return
    if spec.replace:  # xargs: the input fills {} (with -I) or comes after the words
        inner = words[i:]
        dynamic = {k - i for k in cmd.dynamic if k >= i}
        if replace:
            dynamic |= {k for k, w in enumerate(inner) if replace in w and k}
        else:
            dynamic.add(len(inner))
            inner = (*inner, "{input}")
        expand(ctx, SimpleCommand(inner, program, frozenset(dynamic)), depth + 1)
        return
    _nested(ctx, cmd, i, program, depth)


_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


# -- programs whose options run commands ------------------------------------------------------

_FIND_EXEC: Final = frozenset({"-exec", "-execdir", "-ok", "-okdir"})


def _find(ctx: Context, cmd: SimpleCommand, depth: int) -> None:
    """`-exec … ;` runs a command (`{}` filled by find); `-delete` amounts to `rm -rf`."""
    words = cmd.words
    i = 1
    while i < len(words):
        word = words[i]
        if word in _FIND_EXEC:
            end = i + 1
            while end < len(words) and not (words[end] in (";", "+") and end not in cmd.dynamic):
                end += 1
            if end >= len(words) or end == i + 1:
                ctx.fail(f"find {word} without a command and its closing ; or +")
                return
            inner = words[i + 1 : end]
            dynamic = {k for k, w in enumerate(inner) if "{}" in w or i + 1 + k in cmd.dynamic}
            expand(ctx, SimpleCommand(inner, f"find {word}", frozenset(dynamic)), depth + 1)
            i = end
        elif word == "-delete":
            expand(ctx, SimpleCommand(("rm", "-rf", "{}"), "find -delete", _FOUND), depth + 1)
        i += 1


_FOUND: Final = frozenset({2})


def _rg(ctx: Context, cmd: SimpleCommand, depth: int) -> None:
    """`rg --pre COMMAND` runs COMMAND on every file searched."""
    words = cmd.words
    for i, word in enumerate(words):
        if word.startswith("--pre="):
            command, dynamic = word[6:], i in cmd.dynamic
        elif word == "--pre" and i + 1 < len(words):
            command, dynamic = words[i + 1], i + 1 in cmd.dynamic
        else:
            continue
        marks = frozenset({0, 1}) if dynamic else _SECOND
        expand(ctx, SimpleCommand((command, "{file}"), "rg --pre", marks), depth + 1)


_SECOND: Final = frozenset({1})

_GIT_CONFIG: Final = "can run code (core.pager, core.sshCommand, alias.*, …)"
_GIT_RUNS: Final = ("--upload-pack", "--receive-pack", "--exec", "--open-files-in-pager")
_GIT_SUBCOMMANDS_RUN: Final = frozenset({"rebase", "difftool", "mergetool", "grep", "clone"})
"""Subcommands with options of their own that run a command (`_git_options`)."""


def _git(ctx: Context, cmd: SimpleCommand, depth: int) -> None:
    """Global `-c`/`--config-env`/`--exec-path=` set config that runs programs; a few
    subcommands run commands from their arguments."""
    words = cmd.words
    i = 1
    while i < len(words) and words[i].startswith("-"):
        word = words[i]
        if word in ("-c", "--config-env") or word.startswith(("--config-env=", "--exec-path=")):
            ctx.fail(f"git {word} {_GIT_CONFIG}")
            return
        i += 2 if word in ("-C", "--git-dir", "--work-tree", "--namespace") else 1
    if i >= len(words):
        return
    if i in cmd.dynamic:
        ctx.fail(f"a git subcommand that cannot be read: {words[i]}")
        return
    sub, rest = words[i], words[i + 1 :]
    if sub == "bisect" and rest[:1] == ("run",):
        _nested(ctx, cmd, i + 2, "git bisect run", depth)
    elif sub == "submodule" and "foreach" in rest:
        start = i + 2 + rest.index("foreach")
        while start < len(words) and words[start] in ("--recursive", "-q", "--quiet"):
            start += 1
        if any(k >= start for k in cmd.dynamic):
            ctx.fail("git submodule foreach with a command that is not a literal")
        elif start < len(words):
            ctx.parse(" ".join(words[start:]), "git submodule foreach", depth + 1)
    elif sub == "filter-branch":
        ctx.fail("git filter-branch runs shell code from its options")
    else:
        _git_options(ctx, cmd, i, depth)


def _git_options(ctx: Context, cmd: SimpleCommand, at: int, depth: int) -> None:
    sub, words = cmd.words[at], cmd.words
    if sub not in _GIT_SUBCOMMANDS_RUN:  # most: only the options every subcommand has
        for word in words[at + 1 :]:
            if word.startswith(_GIT_RUNS):
                ctx.fail(f"git {sub} {word} runs a command the rules cannot read")
                return
        return
    for k in range(at + 1, len(words)):
        word = words[k]
        if word[:1] != "-":
            continue
        if sub == "rebase" and (word in ("-x", "--exec") or word.startswith("--exec=")):
            value_at = k if word.startswith("--exec=") else k + 1
            if value_at >= len(words) or value_at in cmd.dynamic:
                ctx.fail("git rebase --exec with a command that is not a literal")
            else:
                value = words[value_at]
                value = value.partition("=")[2] if value_at == k else value
                ctx.parse(value, "git rebase --exec", depth + 1)
            return
        runs = word.startswith(_GIT_RUNS) or (
            (sub in ("difftool", "mergetool") and word.startswith(("-x", "--extcmd", "-t")))
            or (sub == "grep" and word.startswith("-O"))
            or (sub == "clone" and word in ("-u", "-c", "--config"))
            or (sub == "clone" and word.startswith("--config="))
        )
        if runs:
            ctx.fail(f"git {sub} {word} runs a command the rules cannot read")
            return


_TAR_RUNS: Final = (
    "to-command",
    "checkpoint-action",
    "use-compress-program",
    "info-script",
    "new-volume-script",
    "rsh-command",
    "rmt-command",
)


def _tar(ctx: Context, cmd: SimpleCommand, depth: int) -> None:
    for i, word in enumerate(cmd.words[1:], start=1):
        if word.startswith("--"):
            name = word[2:].partition("=")[0]
            if len(name) >= 3 and any(full.startswith(name) for full in _TAR_RUNS):
                ctx.fail(f"tar {word} runs a command the rules cannot read")
                return
        elif (word.startswith("-") or i == 1) and ("I" in word or "F" in word):
            ctx.fail(f"tar {word}: -I and -F run a program the rules cannot read")
            return


def _rsync(ctx: Context, cmd: SimpleCommand, depth: int) -> None:
    for word in cmd.words[1:]:
        runs = word.startswith(("--rsh", "--rsync-path")) or (
            word.startswith("-") and not word.startswith("--") and "e" in word
        )
        if runs:
            ctx.fail(f"rsync {word} runs a command the rules cannot read")
            return


_SED_ADDRESS: Final = re.compile(r"\s*(?:[0-9$]+|/(?:[^/\\]|\\.)*/[IM]*|\\(.)(?:(?!\1).)*\1)?")


def _sed_runs(script: str) -> bool:
    """Whether a sed script may run a command (`e`, the `s///e` flag) or touch a file (`w`,
    `W`, `r`, `R`). Conservative: any doubt is True."""
    for raw in re.split(r"[;\n]", script):
        command = raw.strip().lstrip("{}").strip()
        for _ in range(2):  # an address, then an optional second one after a comma
            address = _SED_ADDRESS.match(command)
            command = command[address.end() if address else 0 :].lstrip(", !")
        if not command:
            continue
        if command[0] in "eEwWrR":
            return True
        if command[0] in "sy" and len(command) > 1:
            delimiter = re.escape(command[1])
            parts = re.fullmatch(
                rf"s{delimiter}(?:[^\\]|\\.)*?{delimiter}(?:[^\\]|\\.)*?{delimiter}(.*)",
                command,
                re.S,
            )
            if parts is None or (command[0] == "s" and re.search(r"[ewW]", parts.group(1))):
                return True
    return False


def _sed(ctx: Context, cmd: SimpleCommand, depth: int) -> None:
    words = cmd.words
    scripts: list[str] = []
    positional: list[str] = []
    i = 1
    while i < len(words):
        word = words[i]
        if word in ("-e", "--expression") and i + 1 < len(words):
            scripts.append(words[i + 1])
            i += 2
            continue
        if word.startswith("--expression="):
            scripts.append(word.partition("=")[2])
        elif word in ("-f", "--file") or word.startswith("--file="):
            ctx.fail("sed -f runs a script file the rules cannot read")
            return
        elif word.startswith("-") and not word.startswith("--") and len(word) > 1:
            letters = word[1:].split("i", 1)[0]  # -i takes the rest as its suffix
            if "f" in letters:
                ctx.fail("sed -f runs a script file the rules cannot read")
                return
            if "e" in letters:
                ctx.fail(f"sed {word}: a script the rules cannot read")
                return
        elif not word.startswith("-"):
            positional.append(word)
        i += 1
    if not scripts and positional:
        scripts.append(positional[0])
    if any(_sed_runs(s) for s in scripts) or (cmd.dynamic and not scripts):
        ctx.fail("a sed script that can run commands or write files (e, w, r)")


_AWK_RUNS: Final = re.compile(r"system|\||\bprintf?\b[^;{}]*>|@load")


def _awk(ctx: Context, cmd: SimpleCommand, depth: int) -> None:
    words = cmd.words
    i = 1
    while i < len(words):
        word = words[i]
        if word in ("-f", "--file") or word.startswith(("--file=", "-f")):
            ctx.fail(f"{cmd.program} -f runs a program file the rules cannot read")
            return
        if word in ("-v", "-F", "--assign", "--field-separator"):
            i += 2
            continue
        if word == "--":
            i += 1
            break
        if not word.startswith("-"):
            break
        i += 1
    if i < len(words) and (i in cmd.dynamic or _AWK_RUNS.search(words[i])):
        ctx.fail(f"an {cmd.program} program that can run commands (system, |, print >)")


_UNPROVABLE: Final[Mapping[str, str]] = {
    "source": "source runs the commands of a file",
    ".": ". runs the commands of a file",
    "alias": "alias defines a command from a string",
    "trap": "trap runs a string as commands",
    "enable": "enable can load a builtin from a file",
    "hash": "hash can change what a command name runs",
    "let": "let evaluates arithmetic, which can run code",
    "fc": "fc runs commands from the history",
    "bind": "bind can run a string as commands",
    "complete": "complete can run a string as commands",
    "coproc": "coproc (the rules do not read it)",
}

_HANDLERS: Final[Mapping[str, Callable[[Context, SimpleCommand, int], None]]] = {
    **dict.fromkeys(_SHELLS, _shell),
    **dict.fromkeys(_WRAPPERS, _wrapper),
    **dict.fromkeys(("read", "printf", "mapfile", "readarray", "getopts"), _assigns),
    **dict.fromkeys(("awk", "gawk", "mawk", "nawk"), _awk),
    "eval": _eval,
    "su": _su,
    "find": _find,
    "rg": _rg,
    "git": _git,
    "tar": _tar,
    "rsync": _rsync,
    "sed": _sed,
}
