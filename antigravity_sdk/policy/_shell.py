"""The shell parser behind command rules: a `CommandLine` as the simple commands it runs.

tree-sitter's bash grammar parses the line; this module walks the tree and keeps only what
it understands: lists, pipelines, subshells, groups, `if`/`while`/`for`/`case`, `$(…)`,
backticks, process substitution, redirections. The commands hidden in arguments are found
too: `sh -c`/`bash -c` strings and literal `eval`s (parsed again), the wrappers that run
another command (`env`, `sudo`, `timeout`, `xargs`, …) and the programs' options that run
one (`find -exec`, `rg --pre`, `git rebase --exec`, …: `_programs`). Anything else — a
variable or glob in command position, an assignment, `source`, a function definition,
syntax the walk does not know, input that does not parse — makes the line *unprovable*,
with the reason. Parses are cached by line (`parse_command_line`). Plain lines, most of
them, skip tree-sitter: a regular expression splits them to the same result (`_plain`).
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TypeAlias

from ._programs import MAX_DEPTH, SHELL_VARIABLES, Context, SimpleCommand, expand

MAX_LINE: Final = 10_000
"""Longer command lines are not checked: they are unprovable."""

if TYPE_CHECKING:
    import tree_sitter


@functools.cache
def _parser() -> tree_sitter.Parser:
    """The bash parser, built on first use: importing the policy engine stays light."""
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


@dataclass(frozen=True, slots=True)
class ParsedLine:
    """A command line as shell: every simple command it runs (nested ones included, in
    order), the redirection targets, and why it cannot be checked ("" when it reduced to
    plain words). `dynamic_redirects` are the indices of targets that are not literals;
    `programs` the base names of every command's program."""

    commands: tuple[SimpleCommand, ...]
    unprovable: str = ""
    redirects: tuple[str, ...] = ()
    dynamic_redirects: frozenset[int] = frozenset()
    programs: frozenset[str] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "programs", frozenset([c.program for c in self.commands]))

    def describe(self) -> list[str]:
        """One line per simple command, then the redirections and why the line cannot be
        checked, if it cannot: what `antigravity policy explain` shows."""
        lines = [str(c) for c in self.commands]
        if self.redirects:
            lines.append("redirects to: " + ", ".join(self.redirects))
        if self.unprovable:
            lines.append(f"cannot be checked: {self.unprovable}")
        return lines


# -- raw-line checks ------------------------------------------------------------------------

# A backslash-newline joining two tokens (`r\<newline>m`): bash joins them into one word,
# tree-sitter's grammar splits them. An odd run of backslashes before the newline, with a
# non-blank character on both sides.
_JOINING_CONTINUATION: Final = re.compile(r"[^\s\\](?:\\\\)*\\\n[^\s]|(?:\\\\)+\\\n[^\s]")
_CONTROL: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _raw_problem(line: str) -> str:
    if len(line) > MAX_LINE:
        return f"the line is longer than {MAX_LINE} characters"
    if _CONTROL.search(line):
        return "the line holds a control character"
    if "\\\n" in line and _JOINING_CONTINUATION.search(line):
        return "a line continuation inside a word"
    return ""


# -- words ----------------------------------------------------------------------------------

_GLOB: Final = frozenset("*?[")
_DQ_ESCAPES: Final = frozenset('$`"\\\n')
_ANSI: Final = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
_ANSI_NUMERIC: Final = re.compile(
    r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3})"
)


def _unquoted(text: str) -> tuple[str, bool]:
    """An unquoted word's value and whether it is literal (no glob, no tilde)."""
    literal = not text.startswith("~")
    if "\\" not in text:
        return text, literal and "*" not in text and "?" not in text and "[" not in text
    out: list[str] = []
    chars = iter(text)
    for ch in chars:
        if ch == "\\":
            nxt = next(chars, "")
            if nxt != "\n":
                out.append(nxt)
        else:
            if ch in _GLOB:
                literal = False
            out.append(ch)
    return "".join(out), literal


def _double_quoted(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    chars = iter(text)
    for ch in chars:
        if ch == "\\":
            nxt = next(chars, "")
            if nxt in _DQ_ESCAPES:
                if nxt != "\n":
                    out.append(nxt)
            else:
                out.append(ch + nxt)
        else:
            out.append(ch)
    return "".join(out)


def _ansi_c(body: str) -> str | None:
    """The value of `$'body'`, or None when an escape is one this does not decode."""
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1 : i + 2]
        if nxt in _ANSI:
            out.append(_ANSI[nxt])
            i += 2
            continue
        numeric = _ANSI_NUMERIC.match(body, i)
        if numeric is None:
            return None
        digits = numeric.group(1)
        value = int(digits, 8) if digits[0] in "01234567" else int(digits[1:], 16)
        if value == 0 or value > 0x10FFFF:
            return None
        out.append(chr(value))
        i = numeric.end()
    return "".join(out)


def _text(node: tree_sitter.Node) -> str:
    return node.text.decode("utf-8", "surrogateescape") if node.text is not None else ""


# -- the plain-line fast path ----------------------------------------------------------------

# Most command lines are plain: words of safe characters and simple quotes (no glob, no
# variable), joined by `|`, `||`, `&&`, `;`, `&`, with `>`-style redirections to plain
# words; an argument may hold a `$(…)` of a plain line (not nested, no backslash). Those
# are split here without tree-sitter (several times faster); anything else goes to the full
# parse. tests/test_command_rules.py checks that both give the same `ParsedLine`.
_CHARS: Final = "[A-Za-z0-9_./:,@%+=^~-]"
_SUB_BODY: Final = r"""(?:[^()'"\\$`!\n]++|'[^'\\\n]*+'|"[^"$`\\!\n]*+")*+"""
_SUB: Final = rf"\$\({_SUB_BODY}\)"
_TOKEN: Final = (
    rf"(?!~)(?:{_CHARS}++|'[^'\n]*+'"  # a word (with quotes or `$(…)`: bare ones are
    rf"""|"(?:[^"$`\\!\n]++|{_SUB})*+"|{_SUB})++(?!(?<=[0-9])>)"""  # runs first) (*)
    r"|[0-9]*+(?:>>|>&?)"  # a redirection operator
    r"|\|\||&&|[|;&]"  # a list or pipeline operator
)
_BARE: Final = rf"""(?!~){_CHARS}++(?!['"$]|(?<=[0-9])>)"""  # a word of safe characters (*)
# (*) Not a tilde expansion, nor `a2>f` (tree-sitter and bash split it differently).
# Possessive throughout: no backtracking, whatever the line. A match is a run of bare words
# (one match, split by `str.split`: most of a line, cheaply), one other token, or the first
# character of something else (the line is not plain).
_PLAIN_TOKEN: Final = re.compile(rf"[ \t]*+(?:((?:{_BARE}[ \t]*+)++)|({_TOKEN})|(.))", re.S)
_OTHER: Final = operator.itemgetter(2)
_OPERATORS: Final = frozenset({"|", "||", "&&", ";", "&"})
_QUOTED: Final = re.compile(r"'([^']*)'|\"([^\"]*)\"")
_SUB_PART: Final = re.compile(rf"""'([^']*)'|"((?:[^"$]++|{_SUB})*+)"|({_SUB})""")
_SUB_IN_STRING: Final = re.compile(rf"\$\(({_SUB_BODY})\)")
_KEYWORDS: Final = frozenset(
    {"if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while", "until"}
    | {"do", "done", "in", "function", "time", "coproc", "export", "declare", "local"}
    | {"readonly", "typeset", "unset"}
)
_NONE: Final[frozenset[int]] = frozenset()


def _substituted(word: str) -> tuple[str, list[str]]:
    """A word holding `$(…)`: its value (quotes removed, each substitution as written, as
    the full walk gives it) and the substitutions' bodies, in order."""
    bodies: list[str] = []

    def part(match: re.Match[str]) -> str:
        quoted, string, substitution = match.groups()
        if quoted is not None:
            return quoted
        if string is not None:
            bodies.extend(_SUB_IN_STRING.findall(string))
            return string
        bodies.append(substitution[2:-1])
        return substitution

    return _SUB_PART.sub(part, word), bodies


def _plain_value(word: str) -> str:
    """A plain word's value: its quotes removed (one kind only: each is a delimiter)."""
    if '"' not in word:
        return word.replace("'", "")
    if "'" not in word:
        return word.replace('"', "")
    return _QUOTED.sub(_unquote, word)


def _unquote(part: re.Match[str]) -> str:
    single, double = part.groups()
    return double if single is None else single


_Step: TypeAlias = "tuple[SimpleCommand, tuple[str, ...]]"
"""A simple command of a plain line and its redirection targets."""


def _plain(line: str, via: str = "") -> list[_Step] | None:
    """The simple commands of a plain line (found `via`) in the order the full walk finds
    them (a substitution's before the command it is an argument of), or None when the line
    is not plain."""
    steps: list[_Step] = []
    words: list[str] = []
    dynamic: list[int] = []
    redirects: list[str] = []
    pending = ""  # a redirection operator waiting for its target
    last = ""
    substituted = False
    tokens = _PLAIN_TOKEN.findall(line)
    if any(map(_OTHER, tokens)):
        return None
    for run, token, _ in tokens:
        if run:
            bare = run.split()
            if pending:
                target = bare.pop(0)
                if pending[-1] == "&" and target[0] == "-":
                    return None  # `>&-`: tree-sitter and bash split it differently
                if pending[-1] != "&" or not target.isdigit():  # else a descriptor dup
                    redirects.append(target)
                pending = ""
            if bare and not words:
                program = bare[0]
                if program in _KEYWORDS or "=" in program or program[0] == "-":
                    return None
            words += bare
        elif token[-1] in "|;&>":  # an operator: words never end so
            if pending or not words:
                return None
            if token in _OPERATORS:
                command = SimpleCommand(tuple(words), via, frozenset(dynamic) if dynamic else _NONE)
                steps.append((command, tuple(redirects)))
                words, last = [], token
                dynamic.clear()
                redirects.clear()
            else:
                pending = token
        elif pending:  # a quoted target
            if "$(" in token and _substituted(token)[1]:
                return None  # a substitution in a redirection: left to tree-sitter
            redirects.append(_plain_value(token))
            pending = ""
        elif not words:
            return None  # a quoted program or a substitution: left to tree-sitter
        elif "$(" in token:
            value, bodies = _substituted(token)
            if bodies:
                dynamic.append(len(words))
                substituted = True
            for body in bodies:
                inner = _plain(body, "$(...)")
                if not inner:
                    return None  # not plain, or empty: tree-sitter refuses `$()`
                steps += inner
            words.append(value)
        else:
            words.append(_plain_value(token))
    if pending:
        return None
    if words:
        command = SimpleCommand(tuple(words), via, frozenset(dynamic) if dynamic else _NONE)
        steps.append((command, tuple(redirects)))
    elif last not in ("", ";", "&"):
        return None
    if substituted and ("==" in line or "=~" in line):
        # tree-sitter reads the word after `==` or `=~` as a regular expression: a line with
        # `$(…)`, which it used to parse, keeps its reading
        return None
    return steps


class _Walk(Context):
    """One parse: the commands and redirections found so far, and the first reason the
    line cannot be checked. `fast` lets plain lines skip tree-sitter (`_plain`)."""

    __slots__ = ("ascii", "data", "dynamic_redirects", "fast", "redirects", "source")

    def __init__(self, fast: bool = True) -> None:
        super().__init__()
        self.redirects: list[str] = []
        self.dynamic_redirects: set[int] = set()
        self.fast = fast
        # The source being walked (a nested parse swaps its own in): its bytes, which the
        # tree's offsets index, and its text, which they index too when it is ASCII.
        self.data = b""
        self.source = ""
        self.ascii = True

    def text(self, node: tree_sitter.Node) -> str:
        """`node`'s source text, sliced from the line's text when it is ASCII: no bytes
        object made and decoded per node."""
        if self.ascii:
            return self.source[node.start_byte : node.end_byte]
        return _text(node)

    def plain(self, source: str, via: str, depth: int) -> bool:
        """Walk `source` if it is a plain line; False (nothing walked) if it is not."""
        steps = _plain(source, via) if self.fast else None
        if steps is None:
            return False
        for command, redirects in steps:
            expand(self, command, depth)
            self.redirects += redirects
        return True

    def parse(self, source: str, via: str, depth: int) -> None:
        """Parse `source` (the line, or a string a command runs as shell) into this walk."""
        if depth > MAX_DEPTH:
            self.fail(f"commands nest more than {MAX_DEPTH} levels deep")
            return
        problem = _raw_problem(source)
        if problem:
            self.fail(problem)
            return
        if self.plain(source, via, depth):
            return
        try:
            data = source.encode("utf-8")
        except UnicodeEncodeError:
            self.fail("the line is not valid text")
            return
        root = _parser().parse(data).root_node
        if root.has_error:
            self.fail("the line does not parse as shell")
            return
        outer = self.data, self.source, self.ascii
        self.data, self.source, self.ascii = data, source, len(data) == len(source)
        self.statements(root, via, depth)
        self.data, self.source, self.ascii = outer

    def contiguous(self, nodes: Sequence[tree_sitter.Node]) -> None:
        """Only blanks between `nodes`: tree-sitter drops a word now and then (the `-` of
        `ls - 2>f`), and a word it drops is one the rules would not see."""
        data = self.data
        end = -1
        for node in nodes:
            start = node.start_byte
            if start > end >= 0:
                gap = data[end:start]
                if gap != b" " and gap.strip(b" \t\n\\"):
                    self.fail(f"words the parser drops: {gap.decode(errors='replace')[:40]}")
            end = node.end_byte

    # -- statements --

    def statements(self, node: tree_sitter.Node, via: str, depth: int) -> None:
        for child in node.named_children:
            self.statement(child, via, depth)

    def statement(self, node: tree_sitter.Node, via: str, depth: int) -> None:
        kind = node.type
        if kind == "command":
            self.command(node, via, depth)
        elif kind == "redirected_statement":
            self.redirected(node, via, depth)
        elif kind in _CONTAINERS:
            self.statements(node, via, depth)
        elif kind == "comment":
            return
        elif kind == "compound_statement" and node.children[0].type == "((":
            self.arithmetic(node)
            self.words_in(node, via, depth)
        elif kind == "compound_statement":
            self.statements(node, via, depth)
        elif kind == "c_style_for_statement":
            self.arithmetic(node)
            for child in node.named_children:
                if child.type == "do_group":
                    self.statements(child, via, depth)
                else:
                    self.words_in(child, via, depth)
        elif kind == "for_statement":
            variable = node.child_by_field_name("variable")
            name = self.text(variable) if variable is not None else ""
            if name in SHELL_VARIABLES:
                self.fail(f"a for loop assigning {name}, which changes how the shell runs")
            for child in node.named_children:
                if child.type == "do_group":
                    self.statements(child, via, depth)
                elif child.type != "variable_name":
                    self.word(child, via, depth)
        elif kind == "case_statement":
            for child in node.named_children:
                if child.type == "case_item":
                    self.case_item(child, via, depth)
                else:
                    self.word(child, via, depth)
        elif kind == "test_command":
            self.test(node, via, depth)
        elif kind in _REDIRECTS:
            self.redirect(node, via, depth)
        elif kind == "variable_assignment" or kind == "variable_assignments":
            self.fail(f"an assignment ({self.text(node)[:40]}) can change what runs")
            self.words_in(node, via, depth)
        elif kind == "declaration_command":
            self.fail(
                f"{self.text(node.children[0])} assigns variables, which can change what runs"
            )
            self.words_in(node, via, depth)
        elif kind == "function_definition":
            self.fail("a function definition: it can stand in for any command")
            body = node.child_by_field_name("body")
            if body is not None:
                self.statement(body, via, depth)
        elif kind == "unset_command":
            self.simple([c for c in node.children if c.is_named], via, depth, "unset")
        else:
            self.fail(f"shell syntax the rules do not check ({kind})")

    def case_item(self, node: tree_sitter.Node, via: str, depth: int) -> None:
        for child in node.named_children:
            if child.type in _WORDS:
                self.word(child, via, depth)
            else:
                self.statement(child, via, depth)

    def test(self, node: tree_sitter.Node, via: str, depth: int) -> None:
        """`[[ … ]]` / `[ … ]`: no command runs, but its words may hold substitutions, and
        an arithmetic comparison evaluates a variable's value as code."""
        stack = list(node.named_children)
        while stack:
            child = stack.pop()
            if child.type in _WORDS:
                self.word(child, via, depth)
            elif child.type == "test_operator" and self.text(child) in _ARITHMETIC_TESTS:
                if node.children[0].type == "[[":
                    self.arithmetic(node)
            else:
                stack.extend(child.named_children)

    def arithmetic(self, node: tree_sitter.Node) -> None:
        if _mentions_variable(node):
            self.fail("arithmetic on a variable, which can run code (a[$(…)])")

    def redirect(self, node: tree_sitter.Node, via: str, depth: int) -> None:
        descriptor = node.child_by_field_name("descriptor")
        if descriptor is not None and not self.text(descriptor).isdigit():
            # tree-sitter reads `-c2>f` as descriptor `-c2`; bash as the word -c2 and `>f`
            self.fail(f"a redirection the parser cannot read: {self.text(node)[:40]}")
        if node.type == "file_redirect":
            target = node.child_by_field_name("destination")
            if target is None:
                return
            operator = next((c.type for c in node.children if not c.is_named), "")
            if operator in (">&-", "<&-"):  # tree-sitter splits `>&-x` where bash does not
                self.fail(f"a redirection the parser cannot read: {self.text(node)[:40]}")
            elif operator in (">&", "<&") and (target.type == "number" or self.text(target) == "-"):
                return  # a file descriptor duplicated or closed, no file
            value, literal = self.word(target, via, depth)
            if not literal:
                self.dynamic_redirects.add(len(self.redirects))
            self.redirects.append(value)
            return
        arguments = {c.start_byte for c in _extra_words(node)}  # the command's, not ours
        for child in node.named_children:  # here-documents and here-strings
            if child.type == "heredoc_body":
                self.words_in(child, via, depth)
            elif child.type in _WORDS:
                if child.start_byte not in arguments:
                    self.word(child, via, depth)
            elif child.type not in ("heredoc_start", "heredoc_end", "file_descriptor"):
                self.statement(child, via, depth)

    # -- simple commands --

    def redirected(self, node: tree_sitter.Node, via: str, depth: int) -> None:
        """A statement with redirections. tree-sitter files the words after a redirection's
        target under the redirection; bash gives them to the command (`nice >f rm x` runs
        `nice rm x`), and so does this."""
        self.contiguous(node.children)
        body = node.child_by_field_name("body")
        redirects = [c for c in node.children if c.type in _REDIRECTS]
        extra = [word for r in redirects for word in _extra_words(r)]
        last = body
        while last is not None and last.type in ("pipeline", "list"):  # `a | b >f`: b's
            *first, last = last.named_children
            for child in first:
                self.statement(child, via, depth)
        if last is not None and last.type == "command":
            self.command(last, via, depth, extra)
        elif last is not None:
            if extra:
                self.fail("words after the redirection of a compound command")
            self.statement(last, via, depth)
        for redirect in redirects:
            self.redirect(redirect, via, depth)

    def command(
        self, node: tree_sitter.Node, via: str, depth: int, extra: Sequence[tree_sitter.Node] = ()
    ) -> None:
        if not extra:  # most commands are plain words: read from the text, no node walked
            text = self.text(node)
            if _PLAIN_COMMAND.fullmatch(text):
                words = text.split()
                if node.child_count == len(words):  # a node per word: none dropped
                    expand(self, SimpleCommand(tuple(words), via), depth)
                    return
        children = node.children
        self.contiguous(children)
        parts: list[tree_sitter.Node] = []
        redirects: list[tree_sitter.Node] = []
        for index, child in enumerate(children):
            kind = child.type
            if kind == "command_name":
                parts.append(child.children[0])
            elif kind == "variable_assignment":
                self.fail(
                    f"an assignment before a command ({self.text(child)[:40]}) can change what runs"
                )
                self.words_in(child, via, depth)
            elif kind in _REDIRECTS:
                redirects.append(child)
                parts.extend(_extra_words(child))
            elif child.is_named or node.field_name_for_child(index) == "argument":
                parts.append(child)  # `-` and `$` arguments are anonymous nodes
        self.simple([*parts, *extra] if extra else parts, via, depth)
        for redirect in redirects:
            self.redirect(redirect, via, depth)

    def simple(
        self, parts: list[tree_sitter.Node], via: str, depth: int, program: str = ""
    ) -> None:
        words: list[str] = [program] if program else []
        dynamic: list[int] = []
        source, ascii = self.source, self.ascii
        for part in parts:
            if part.type == "word":  # the most common part, without `word`'s dispatch
                text = source[part.start_byte : part.end_byte] if ascii else _text(part)
                value, literal = _unquoted(text)
            else:
                value, literal = self.word(part, via, depth)
            if not literal:
                dynamic.append(len(words))
            words.append(value)
        if not words:
            return
        expand(self, SimpleCommand(tuple(words), via, frozenset(dynamic)), depth)

    # -- words --

    def word(self, node: tree_sitter.Node, via: str, depth: int) -> tuple[str, bool]:
        """The word's value after quote removal and whether it is a plain literal; any
        command inside it (`$(…)`, backticks, `<(…)`) is walked as a nested command."""
        kind = node.type
        if kind == "word" or not node.is_named:
            return _unquoted(self.text(node))
        if kind == "number":
            return self.text(node), True
        if kind == "raw_string":
            return self.text(node)[1:-1], True
        if kind == "string":
            return self.string(node, via, depth)
        if kind == "ansi_c_string":
            value = _ansi_c(self.text(node)[2:-1])
            return (self.text(node), False) if value is None else (value, True)
        if kind == "translated_string":
            inner = node.named_children
            return self.string(inner[0], via, depth) if inner else ("", True)
        if kind == "regex":
            # After `==` or `=~` outside `[[ ]]` tree-sitter reads a regular expression
            # that can run over `;` and the commands after it, which bash does run.
            self.fail(f"a word the parser reads as a regular expression: {self.text(node)[:40]}")
            return self.text(node), False
        if kind == "concatenation":
            values: list[str] = []
            literal, braces = True, False
            for index, child in enumerate(node.children):
                part = child.type
                if index and part == "word":  # a tilde expands only at the start
                    value, plain = _unquoted(self.text(child).replace("~", "\\~", 1))
                else:
                    value, plain = self.word(child, via, depth)
                literal = literal and plain and part != "brace_expression"
                braces = braces or (part == "word" and value == "{")
                values.append(value)
            joined = "".join(values)
            if braces and ("," in joined or ".." in joined):
                literal = False  # brace expansion: {a,b}, {1..3}
            return joined, literal
        self.substitutions(node, via, depth)
        return self.text(node), False

    def string(self, node: tree_sitter.Node, via: str, depth: int) -> tuple[str, bool]:
        """A double-quoted word: its value from the source text (tree-sitter leaves blank
        content out of the tree), literal unless an expansion is inside."""
        literal = True
        for child in node.named_children:
            if child.type != "string_content":
                literal = False
                self.substitutions(child, via, depth)
        return _double_quoted(self.text(node)[1:-1]), literal

    def substitutions(self, node: tree_sitter.Node, via: str, depth: int) -> None:
        """Walk an expansion for the commands it runs and the code it can hide."""
        kind = node.type
        if kind == "command_substitution":
            inner = "`...`" if self.text(node).startswith("`") else "$(...)"
            self.statements(node, inner, depth)
        elif kind == "process_substitution":
            self.statements(node, "<(...)" if self.text(node).startswith("<") else ">(...)", depth)
        elif kind == "arithmetic_expansion":
            self.arithmetic(node)
            self.words_in(node, via, depth)
        elif kind == "expansion":
            text = self.text(node)
            if _PROMPT_EXPANSION.search(text):
                self.fail(f"a prompt expansion ({text[:40]}) can run code")
            if any(c.type == "subscript" for c in node.named_children):
                self.arithmetic(node)
            self.words_in(node, via, depth)

    def words_in(self, node: tree_sitter.Node, via: str, depth: int) -> None:
        """Walk every substitution anywhere under `node`."""
        stack = list(node.named_children)
        while stack:
            child = stack.pop()
            if child.type in _SUBSTITUTIONS:
                self.substitutions(child, via, depth)
            else:
                stack.extend(child.named_children)


_CONTAINERS: Final = frozenset(
    {
        "program",
        "list",
        "pipeline",
        "subshell",
        "if_statement",
        "elif_clause",
        "else_clause",
        "while_statement",
        "do_group",
        "negated_command",
    }
)
_REDIRECTS: Final = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_PLAIN_COMMAND: Final = re.compile(
    r"[A-Za-z0-9_./:,@%+^-][A-Za-z0-9_./:,@%+^~-]*+"  # a program, not an assignment
    r"(?:[ \t]++[A-Za-z0-9_./:,@%+^-][A-Za-z0-9_./:,@%+=^~-]*+)*+"  # arguments
)
"""A command of words that `word` would give as they are, literal: no quote, expansion,
glob, backslash, redirection, or word starting with a tilde or `=` (after `==` or `=~`
tree-sitter reads a regular expression)."""
_WORDS: Final = frozenset(
    {
        "word",
        "number",
        "string",
        "raw_string",
        "ansi_c_string",
        "translated_string",
        "concatenation",
        "simple_expansion",
        "expansion",
        "command_substitution",
        "process_substitution",
        "arithmetic_expansion",
        "brace_expression",
    }
)
_SUBSTITUTIONS: Final = frozenset(
    {"command_substitution", "process_substitution", "arithmetic_expansion", "expansion"}
)
_ARITHMETIC_TESTS: Final = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
_PROMPT_EXPANSION: Final = re.compile(r"@[PEAKa]")


_VARIABLES: Final = frozenset({"variable_name", "simple_expansion", "expansion", "word"})


def _extra_words(redirect: tree_sitter.Node) -> list[tree_sitter.Node]:
    """The words tree-sitter files under a redirection that are the command's arguments."""
    if redirect.type == "file_redirect":
        return redirect.children_by_field_name("destination")[1:]
    if redirect.type == "heredoc_redirect":
        return redirect.children_by_field_name("argument")
    return []


def _mentions_variable(node: tree_sitter.Node) -> bool:
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type in _VARIABLES and not (current.type == "word" and _text(current).isdigit()):
            return True
        stack.extend(current.named_children)
    return False


@functools.lru_cache(maxsize=1024)
def parse_command_line(line: str) -> ParsedLine:
    """`line` as the simple commands it runs (cached: a repeated line is not parsed again).

    Never raises: what cannot be reduced to plain words is reported in `unprovable`."""
    return _parse(line)


def _parse(line: str, fast: bool = True) -> ParsedLine:
    """`parse_command_line` uncached; `fast=False` sends plain lines to tree-sitter too."""
    walk = _Walk(fast)
    walk.parse(line, "", 0)
    return ParsedLine(
        tuple(walk.commands),
        walk.reason,
        tuple(walk.redirects),
        frozenset(walk.dynamic_redirects),
    )
