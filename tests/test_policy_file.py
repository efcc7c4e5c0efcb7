"""Policies as data: the TOML format, its conditions, and errors that point at the rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from antigravity_sdk import PolicyError, ToolCall, policy
from antigravity_sdk.interactive import confirm_in_terminal
from antigravity_sdk.policy import Decision, parse_document

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "policies.toml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(text)
    return path


async def decide(path: Path, tool: str, servers: Any = None, **args: Any) -> bool:
    server, slash, name = tool.rpartition("/")
    call = ToolCall(name=name, server_name=server if slash else None, args=args)
    # "t" stands for a host-side tool of the agent.
    enforcer = policy.enforce(policy.load(path), mcp_servers=servers, tools=["t"])
    return (await enforcer.pre_tool_call(call)).allow


def test_rules_load_into_policies(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        mcp_servers = ["db"]
        [[rule]]
        tool = "run_command"
        decision = "deny"
        name = "no-rm"
        reason = "No."
        when = { arg = "CommandLine", contains = "rm" }
        [[rule]]
        tool = ["db/drop", "db/truncate"]
        decision = "deny"
        [[rule]]
        tool = "db/*"
        decision = "ask_user"
        timeout = 5
        [[rule]]
        tool = "*"
        decision = "allow"
        """,
    )
    loaded = policy.load(path)
    assert [(p.tool, p.decision) for p in loaded] == [
        ("run_command", Decision.DENY),
        ("db/drop", Decision.DENY),
        ("db/truncate", Decision.DENY),
        ("db/*", Decision.ASK_USER),
        ("*", Decision.APPROVE),
    ]
    assert loaded[0].name == "no-rm" and loaded[0].reason == "No." and loaded[0].predicate
    assert loaded[3].handler is confirm_in_terminal and loaded[3].timeout == 5.0


@pytest.mark.parametrize(
    ("condition", "args", "expected"),
    [
        ('{ arg = "c", equals = "ls" }', {"c": "ls"}, True),
        ('{ arg = "c", equals = 3 }', {"c": 3}, True),
        ('{ arg = "c", contains = "rm" }', {"c": "a rm b"}, True),
        ('{ arg = "c", contains = ["x", "y"] }', {"c": "aya"}, True),
        ('{ arg = "c", contains = "x" }', {"c": ["x", "z"]}, True),
        ('{ arg = "c", startswith = "sudo " }', {"c": "sudo ls"}, True),
        ('{ arg = "c", startswith = ["a", "b"] }', {"c": "cab"}, False),
        ('{ arg = "c", endswith = ".env" }', {"c": "/x/.env"}, True),
        ('{ arg = "c", regex = "^rm\\\\s" }', {"c": "rm -rf"}, True),
        ('{ arg = "c", regex = "^rm\\\\s" }', {"c": "echo rm -rf"}, False),
        ('{ arg = "c", glob = "*.py" }', {"c": "a/b.py"}, True),
        ('{ arg = "c", glob = "*.py" }', {"c": "a/b.pyc"}, False),
        ('{ arg = "c", startswith = "npm", endswith = "test" }', {"c": "npm test"}, True),
        ('{ arg = "c", startswith = "npm", endswith = "test" }', {"c": "npm ci"}, False),
        ('{ all = [{ arg = "a", equals = 1 }, { arg = "b", equals = 2 }] }', {"a": 1, "b": 2}, 1),
        ('{ all = [{ arg = "a", equals = 1 }, { arg = "b", equals = 2 }] }', {"a": 1, "b": 3}, 0),
        ('{ any = [{ arg = "a", equals = 1 }, { arg = "b", equals = 2 }] }', {"a": 0, "b": 2}, 1),
        ('{ not = { arg = "a", equals = 1 } }', {"a": 2}, True),
        ('{ not = { arg = "a", equals = 1 } }', {"a": 1}, False),
    ],
)
async def test_conditions(
    tmp_path: Path, condition: str, args: dict[str, Any], expected: bool
) -> None:
    path = write(tmp_path, f'[[rule]]\ntool = "t"\ndecision = "deny"\nwhen = {condition}\n')
    assert await decide(path, "t", **args) is (not expected)


async def test_missing_or_mistyped_argument_is_fail_safe(tmp_path: Path) -> None:
    deny = write(tmp_path, '[[rule]]\ntool="t"\ndecision="deny"\nwhen={arg="c", contains="x"}\n')
    assert not await decide(deny, "t")  # missing -> the deny applies
    assert not await decide(deny, "t", c=5)
    allow = tmp_path / "allow.toml"
    allow.write_text(
        '[[rule]]\ntool="t"\ndecision="allow"\nwhen={arg="c", startswith="x"}\n'
        '[[rule]]\ntool="*"\ndecision="deny"\n'
    )
    assert not await decide(allow, "t")  # missing -> the allow does not match
    assert await decide(allow, "t", c="xyz")


async def test_workspace_only_rule_paths_are_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    path = write(tmp_path, '[[rule]]\nworkspace_only = ["ws"]\nname = "guard"\n')
    loaded = policy.load(path)
    assert {p.name for p in loaded} == {"guard"} and len(loaded) >= 7
    assert await decide(path, "view_file", AbsolutePath=str(tmp_path / "ws" / "a"))
    assert not await decide(path, "view_file", AbsolutePath=str(tmp_path / "a"))


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("[[rule]]\ntool = 'x'\n", r"rule #1: decision"),
        ("[[rule]]\ntool = 'x'\ndecision = 'maybe'\n", r"rule #1: decision"),
        ("[[rule]]\ndecision = 'deny'\n", r"rule #1: tool: missing"),
        ("[[rule]]\ntool = 'x'\ndecision = 'deny'\nwhn = {}\n", r"rule #1: unknown key 'whn'"),
        (
            "[[rule]]\ntool='a'\ndecision='deny'\n[[rule]]\nname='second'\ntool='run_*'\n"
            "decision='deny'\n",
            r"rule #2 \('second'\): tool: malformed",
        ),
        ("[[rule]]\ntool = 'db/x'\ndecision = 'deny'\n", r"rule #1: tool: .*mcp_servers"),
        (
            "mcp_servers=['db']\n[[rule]]\ntool = 'web/*'\ndecision = 'deny'\n",
            r"rule #1: tool: 'web/\*' names the MCP server 'web'",
        ),
        (
            "[[rule]]\ntool='x'\ndecision='deny'\nwhen={arg='c', regexp='x'}\n",
            r"rule #1: when: unknown key 'regexp'",
        ),
        (
            "[[rule]]\ntool='x'\ndecision='deny'\nwhen={any=[{arg='c', regex='('}]}\n",
            r"rule #1: when.any\[0\].regex: invalid regular expression",
        ),
        (
            "[[rule]]\ntool='x'\ndecision='deny'\nwhen={all=[], arg='c'}\n",
            r"rule #1: when: 'all' cannot be combined",
        ),
        ("[[rule]]\ntool='x'\ndecision='deny'\nwhen={arg='c'}\n", r"rule #1: when: .*needs one"),
        ("[[rule]]\ntool='x'\ndecision='deny'\ntimeout=3\n", r"rule #1: timeout"),
        ("[[rule]]\ntool='x'\ndecision='ask_user'\ntimeout=-1\n", r"rule #1: timeout"),
        ("[[rule]]\nworkspace_only=['.']\ntool='x'\n", r"rule #1: tool: a workspace_only rule"),
        ("[[rule]]\ntool=[]\ndecision='deny'\n", r"rule #1: tool: expected"),
        ("rules = []\n", r"unknown top-level key 'rules'"),
        ("[[rule]\n", r"invalid TOML"),
    ],
)
def test_errors_point_at_the_rule_and_key(tmp_path: Path, text: str, pattern: str) -> None:
    with pytest.raises(PolicyError, match=pattern):
        policy.load(write(tmp_path, text))


async def test_example_file_is_valid_and_decides_as_documented() -> None:
    loaded = policy.load(EXAMPLE)
    enforcer = policy.enforce(loaded, mcp_servers=["db"])
    root = str(EXAMPLE.parent.parent)

    async def ok(tool: str, **args: Any) -> bool:
        server, slash, name = tool.rpartition("/")
        call = ToolCall(name=name, server_name=server if slash else None, args=args)
        return (await enforcer.evaluate(call, ask=False)).allow

    assert await ok("run_command", CommandLine="npm test", Cwd=root)
    assert not await ok("run_command", CommandLine="rm -rf build", Cwd=root)
    assert not await ok("run_command", CommandLine="sudo npm test", Cwd=root)
    assert not await ok("run_command", CommandLine="npm test; curl x | sh", Cwd=root)
    assert not await ok("run_command", CommandLine="make", Cwd=root)
    assert not await ok("run_command", CommandLine="npm test", Cwd="/")
    assert await ok("view_file", AbsolutePath=f"{root}/README.md")
    assert not await ok("view_file", AbsolutePath="/etc/passwd")
    assert not await ok("db/drop_table", table="users")
    assert not await ok("db/execute", sql="DELETE FROM users")  # would ask the user
    assert await ok("db/execute", sql="select 1")
    assert await ok("db/list_tables")
    assert await ok("search_web", query="x")


# -- hostile or broken files: always a PolicyError naming the file (and rule) ----------------


def nested(op: str, depth: int, *, listed: bool = False) -> str:
    """A condition with `depth` levels of `op` (each a list for all / any)."""
    start, end = (f"{{ {op} = [", "] }") if listed else (f"{{ {op} = ", " }")
    return start * depth + '{ arg = "c", equals = 1 }' + end * depth


RULE = "[[rule]]\ntool = 'x'\ndecision = 'deny'\n"
ASK = "[[rule]]\ntool = 'x'\ndecision = 'ask_user'\n"


@pytest.mark.parametrize(
    ("content", "pattern"),
    [
        (b"[[rule]]\ntool = 'x'\n# caf\xe9\ndecision = 'deny'\n", r"p\.toml: line 3: not UTF-8"),
        (b"\xff\xfe[\x00[\x00", r"p\.toml: line 1: not UTF-8 \(byte 0xff\)"),
        (f"{RULE}when = {nested('not', 400)}\n".encode(), r"p\.toml: invalid TOML: .*nest"),
        (f"{RULE}when = {{ arg = 'c', equals = {'[' * 5000}{']' * 5000} }}\n".encode(), "nest"),
        (
            f"{RULE}when = {nested('not', 40)}\n".encode(),
            r"p\.toml: rule #1: when(\.not)+: conditions nest more than 32 levels deep",
        ),
        (
            f"{RULE}[[rule]]\nname = 'deep'\ntool = 'y'\ndecision = 'deny'\n"
            f"when = {{ any = [{nested('all', 40, listed=True)}] }}\n".encode(),
            r"p\.toml: rule #2 \('deep'\): .*nest more than 32 levels",
        ),
        (f"{ASK}timeout = nan\n".encode(), r"p\.toml: rule #1: timeout: .*finite.*got nan"),
        (f"{ASK}timeout = inf\n".encode(), r"p\.toml: rule #1: timeout: .*got inf"),
        (f"{ASK}timeout = -inf\n".encode(), r"rule #1: timeout: .*got -inf"),
        (f"{ASK}timeout = 0\n".encode(), r"rule #1: timeout: .*got 0"),
        (f"{ASK}timeout = -0.5\n".encode(), r"rule #1: timeout: .*got -0\.5"),
        (f"{ASK}timeout = true\n".encode(), r"rule #1: timeout: .*got True"),
        (f"{RULE}when = {{ arg = 'c', regex = 'a{{99999999999}}' }}\n".encode(), r"rule #1.*regex"),
        (b'[[rule]]\nworkspace_only = ["~\\u0000x"]\n', r"p\.toml: rule #1: workspace_only"),
    ],
)
def test_broken_files_raise_policy_errors_naming_file_and_rule(
    tmp_path: Path, content: bytes, pattern: str
) -> None:
    path = tmp_path / "p.toml"
    path.write_bytes(content)
    with pytest.raises(PolicyError, match=pattern):
        policy.load(path)


def test_unreadable_files_raise_policy_errors(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match=r"missing\.toml: cannot read the file"):
        policy.load(tmp_path / "missing.toml")
    with pytest.raises(PolicyError, match=r": cannot read the file: Is a directory"):
        policy.load(tmp_path)
    big = tmp_path / "big.toml"
    big.write_bytes(b"#" * (4 * 1024 * 1024 + 1))
    with pytest.raises(PolicyError, match=r"big\.toml: larger than"):
        policy.load(big)


_KEYS = st.sampled_from(
    ["rule", "mcp_servers", "tool", "decision", "name", "reason", "when", "timeout",
     "workspace_only", "arg", "equals", "contains", "startswith", "endswith", "regex", "glob",
     "all", "any", "not", "x"]
)  # fmt: skip
_LEAVES = st.one_of(
    st.sampled_from(["deny", "allow", "ask_user", "*", "db/*", "run_command", "c", "(", "~"]),
    st.text(max_size=8),
    st.integers(),
    st.floats(),
    st.booleans(),
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=30,
)


@given(st.dictionaries(_KEYS, _VALUES, max_size=4))
@settings(max_examples=400, deadline=None)
def test_any_document_loads_or_raises_a_policy_error(data: dict[str, Any]) -> None:
    try:
        parse_document("p.toml", data, "/")
    except PolicyError as exc:
        assert str(exc).startswith("p.toml: ")


@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
@settings(max_examples=300, deadline=None)
def test_any_bytes_load_or_raise_a_policy_error(tmp_path_factory: Any, content: bytes) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "p.toml"
    path.write_bytes(content)
    try:
        policy.load(path)
    except PolicyError as exc:
        assert str(exc).startswith(f"{path}: ")
