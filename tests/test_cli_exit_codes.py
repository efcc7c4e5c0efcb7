"""Issue 21, "The first hour, again" (items 4-7, 10, 11): one exit-code scheme for every
command, an unknown tool in `policy explain`, `/policies` naming MCP tools, tracing with
the `otel` extra's API only, `make demo` without the development tools, and docs/api.md's
copy-paste damage. (Items 1-3, 8, 9 are in tests/test_cli_first_hour.py.)

CLI behaviour runs the REAL console script in a subprocess, checking the exit code, what
goes to stdout and what to stderr, and the message. Tests marked `harness` need
`localharness`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NoOpTracerProvider

from antigravity_sdk import cli, errors, policy, tracing
from antigravity_sdk.cli._common import EXIT_CODES
from antigravity_sdk.cli.report import tools_label
from antigravity_sdk.errors import HarnessNotFoundError
from antigravity_sdk.harness.install import find_harness

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "policies.toml"
SCRIPT = Path(sys.executable).parent / "antigravity"


def run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The console script as a user runs it: no model configured, no stdin."""
    command = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "antigravity_sdk"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("GEMINI_API_KEY", None)
    return subprocess.run(
        [*command, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


def _require_harness() -> Path:
    try:
        return find_harness()
    except HarnessNotFoundError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the harness tests: {exc}")
        pytest.skip(f"no localharness: {exc}")


# -- 7. one exit-code scheme ------------------------------------------------------------------

BAD_FILES = {
    "missing": None,
    "invalid TOML": "[[rule]\n",
    "a rule naming no tool": "[[rule]]\nname = 'typo'\ntool = 'veiw_file'\ndecision = 'deny'\n",
}
CASES = '[[case]]\ntool = "run_command"\nargs = { CommandLine = "ls" }\nexpect = "allow"\n'

# Every command that reads a policy file, FILE standing for it.
READS_A_POLICY_FILE: list[tuple[str, tuple[str, ...]]] = [
    ("policy check", ("policy", "check", "FILE")),
    ("policy explain", ("policy", "explain", "FILE", "run_command")),
    ("policy lint", ("policy", "lint", "FILE")),
    ("policy test", ("policy", "test", "FILE", "CASES")),
    ("policy replay", ("policy", "replay", "FILE", "AUDIT")),
    ("chat PROMPT", ("chat", "hi", "--policies", "FILE")),
    ("chat", ("chat", "--policies", "FILE")),
]


@pytest.mark.parametrize("kind", list(BAD_FILES))
@pytest.mark.parametrize(
    ("name", "argv"), READS_A_POLICY_FILE, ids=[name for name, _ in READS_A_POLICY_FILE]
)
def test_a_bad_policy_file_is_exit_2_in_every_command(
    tmp_path: Path, name: str, argv: tuple[str, ...], kind: str
) -> None:
    """The same bad file gets the same answer everywhere: exit 2, the error on stderr
    naming the file, before anything else (the model, in `chat`)."""
    bad = tmp_path / "bad.toml"
    if BAD_FILES[kind] is not None:
        bad.write_text(str(BAD_FILES[kind]))
    (tmp_path / "cases.toml").write_text(CASES)
    (tmp_path / "audit.jsonl").write_text("")
    given = {
        "FILE": str(bad),
        "CASES": str(tmp_path / "cases.toml"),
        "AUDIT": str(tmp_path / "audit.jsonl"),
    }
    done = run(*(given.get(arg, arg) for arg in argv), cwd=tmp_path)
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr and "model" not in done.stderr
    if name == "policy lint" and kind == "a rule naming no tool":
        # lint's answer is its findings, on stdout; the error is one of them
        error = next(line for line in done.stdout.splitlines() if line.startswith("error: "))
        assert done.stderr == "" and "rule #1 ('typo')" in error and "'view_file'?" in error
        return
    assert done.stdout == ""
    assert done.stderr.startswith(f"error: {bad}: "), done.stderr
    if kind == "a rule naming no tool":
        assert "did you mean 'view_file'?" in done.stderr


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        # 0: the answer is yes
        (("policy", "check", EXAMPLE), 0, "OK, 20 policies"),
        (("policy", "explain", EXAMPLE, "db/list_tables"), 0, "ALLOWED by policy 'db'"),
        # 1: it ran, and the answer is no
        (("policy", "explain", EXAMPLE, "db/drop_table"), 1, "DENIED by policy"),
        (("policy", "explain", EXAMPLE, "db/execute", '{"sql": "x"}'), 1, "ASKS THE USER"),
        (("audit", "verify", "UNSEALED"), 1, "chain BROKEN"),
        # 2: not runnable: a missing input file, bad arguments, no model
        (("policy", "test", EXAMPLE, "MISSING"), 2, "error: MISSING: cannot read"),
        (("policy", "replay", EXAMPLE, "MISSING"), 2, "error: cannot read MISSING"),
        (("audit", "summarize", "MISSING"), 2, "error: cannot read MISSING"),
        (("audit", "verify", "MISSING"), 2, "error: cannot read MISSING"),
        (("conversations", "list", "--dir", "UNSEALED"), 2, "is not a directory"),
        (("policy", "explain", EXAMPLE, "run_command", "{nope"), 2, "not valid JSON"),
        (("demo", "--model", "qwen3"), 2, "error: model 'qwen3' needs the base_url"),
        (("chat", "hi"), 2, "error: no model configured"),
        (("policy", "check"), 2, "usage: antigravity policy check"),
        (("chat", "--nope"), 2, "unrecognized arguments: --nope"),
        (("demo", "--nope"), 2, "unrecognized arguments: --nope"),
        (("doctor", "--nope"), 2, "unrecognized arguments: --nope"),
        (("harness",), 2, "usage: antigravity harness"),
        (("audit", "verify"), 2, "usage: antigravity audit verify"),
        (("conversations", "clean", "--older-than", "-1"), 2, "expected a finite number"),
    ],
)
def test_every_command_exits_by_the_scheme(
    tmp_path: Path, argv: tuple[str | Path, ...], code: int, says: str
) -> None:
    unsealed = tmp_path / "unsealed.jsonl"
    unsealed.write_text(json.dumps({"v": 1, "kind": "decision"}) + "\n")
    missing = tmp_path / "missing.file"
    paths = {"UNSEALED": str(unsealed), "MISSING": str(missing)}
    done = run(*(paths.get(str(arg), arg) for arg in argv), cwd=tmp_path)
    assert done.returncode == code, done
    says = says.replace("MISSING", str(missing))
    answer, other = (done.stdout, done.stderr) if code < 2 else (done.stderr, done.stdout)
    assert says in answer, done
    assert other == "", done  # an answer on stdout, an error on stderr: never both
    assert "Traceback" not in done.stderr


def _leaf_commands() -> list[list[str]]:
    """Every command path of the parser (`policy explain`, `doctor`, ...)."""
    found: list[list[str]] = []

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            found.append(path)
        for action in subs:
            for name, sub in action.choices.items():
                walk(sub, [*path, name])

    walk(cli.build_parser(), [])
    return found


def test_every_help_ends_with_the_one_scheme(capsys: pytest.CaptureFixture[str]) -> None:
    leaves = _leaf_commands()
    assert ["policy", "explain"] in leaves and ["doctor"] in leaves and len(leaves) >= 14
    for path in [[], ["policy"], *leaves]:
        assert cli.main([*path, "--help"]) == 0
        out = capsys.readouterr().out
        assert out.rstrip().endswith(EXIT_CODES.rstrip()), path
    done = run("policy", "explain", "--help")  # as the console script prints it
    assert done.returncode == 0 and done.stderr == ""
    assert "exit codes, the same for every command:" in done.stdout
    assert "  2    not runnable:" in done.stdout


def test_the_scheme_is_documented_once_in_each_place() -> None:
    readme = (ROOT / "README.md").read_text()
    api = (ROOT / "docs" / "api.md").read_text()
    for code in ("| 0 | done,", "| 1 | it ran,", "| 2 | not runnable:", "| 130 | interrupted"):
        assert readme.count(code) == 1, code
    for code in ("- 0: done", "- 1: it ran", "- 2: not runnable", "- 130: interrupted"):
        assert api.count(code) == 1, code
    assert "1 when it is not" not in (ROOT / "docs" / "policies.md").read_text()


# -- 6. an unknown tool in `policy explain` and `policy test` -------------------------------


@pytest.mark.parametrize(
    ("tool", "says"),
    [
        ("run_comand", "no tool is called 'run_comand'"),
        ("Run_Command", "no tool is called 'Run_Command'"),
        ("manage_task", "the harness never asks before 'manage_task' runs"),
        ("dbb/execute", "server 'dbb' is not among the file's mcp_servers (db)"),
        ("db/", "expected a tool name"),
    ],
)
def test_explain_refuses_a_tool_no_policy_could_decide(tool: str, says: str) -> None:
    """The example ends in `allow_all`: without the check a typo was ALLOWED, exit 0."""
    done = run("policy", "explain", EXAMPLE, tool, "{}")
    assert done.returncode == 2, done
    assert done.stdout == ""
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1
    assert says in done.stderr
    if tool in ("run_comand", "Run_Command"):
        assert "did you mean 'run_command'?" in done.stderr
    if tool == "dbb/execute":
        assert "did you mean 'db'?" in done.stderr


def test_explain_words_an_unknown_tool_as_enforce_words_a_rule(tmp_path: Path) -> None:
    """The same machinery: the refusals differ only in what can never happen."""
    rules = tmp_path / "rules.toml"
    rules.write_text("[[rule]]\ntool = 'run_comand'\ndecision = 'deny'\n")
    as_rule = run("policy", "check", rules).stderr
    as_call = run("policy", "explain", EXAMPLE, "run_comand").stderr
    hint = "; did you mean 'run_command'?"
    assert as_rule.rstrip().endswith(hint) and as_call.rstrip().endswith(hint)
    common = "no tool is called 'run_comand': it is not a built-in tool, so "
    assert common in as_rule and common in as_call


def test_explain_still_decides_known_tools_and_undeclared_servers(tmp_path: Path) -> None:
    done = run("policy", "explain", EXAMPLE, "run_command", '{"CommandLine": "ls"}')
    assert done.returncode == 1 and done.stderr == ""  # no-other-commands denies it
    open_file = tmp_path / "open.toml"
    open_file.write_text("[[rule]]\ntool = '*'\ndecision = 'approve'\n")
    done = run("policy", "explain", open_file, "anyserver/tool")  # no mcp_servers declared
    assert done.returncode == 0 and "ALLOWED" in done.stdout and done.stderr == ""


def test_policy_test_refuses_a_case_naming_no_tool(tmp_path: Path) -> None:
    cases = tmp_path / "cases.toml"
    cases.write_text(CASES + '[[case]]\nname = "typo"\ntool = "veiw_file"\nexpect = "allow"\n')
    done = run("policy", "test", EXAMPLE, cases)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"error: {cases}: case #2 ('typo'): tool: no tool is called")
    assert "did you mean 'view_file'?" in done.stderr


# -- 5. /policies names MCP tools as MCP tools ------------------------------------------------


def test_tools_label_names_mcp_tools_and_keeps_path_taking_for_workspace_only() -> None:
    sql = [policy.deny(t) for t in ("db/drop_table", "db/delete_rows", "db/truncate_table")]
    assert tools_label(sql) == "db: drop_table, delete_rows, truncate_table"
    workspace = policy.workspace_only(["/tmp"])
    assert tools_label(workspace) == f"{len(workspace)} path-taking tools"
    mixed = [policy.deny(t) for t in ("view_file", "write_to_file", "list_dir", "kv/get")]
    assert tools_label(mixed) == "view_file, write_to_file, list_dir; kv: get"
    assert tools_label([policy.allow("db/*"), policy.allow("*")]) == "db/*, *"


@pytest.mark.harness
def test_chat_policies_names_the_file_rules_tools(tmp_path: Path) -> None:
    """`/policies` in the interactive chat, in a pseudo-terminal, with the example file."""
    _require_harness()
    pexpect = pytest.importorskip("pexpect")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "dumb"}
    env.pop("GEMINI_API_KEY", None)
    model = ("--base-url", "http://127.0.0.1:9/v1", "--model", "m")  # no turn is run
    child = pexpect.spawn(
        sys.executable,
        ["-m", "antigravity_sdk", "chat", "--policies", str(EXAMPLE), *model],
        cwd=str(tmp_path),
        env=env,
        encoding="utf-8",
        timeout=60,
        dimensions=(50, 200),
    )
    try:
        child.expect("> ")
        time.sleep(0.3)  # prompt_toolkit enters raw mode after drawing the prompt
        child.sendline("/policies")
        child.expect("allow_all")
        shown = child.before
        child.sendline("/exit")
        child.expect("bye")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    flat = " ".join(shown.split())  # a long cell folds onto the next line
    assert "no-destructive-sql DENY db: drop_table, delete_rows, truncate_table [" in flat
    assert re.search(r"workspace DENY \d+ path-taking tools \[", flat), flat
    assert flat.count("path-taking") == 1, flat


# -- 4. tracing with the otel extra's API only -------------------------------------------------

_API_ONLY = """
import asyncio, sys, tempfile

class Block:  # the otel extra's API is installed, no SDK
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry.sdk" or name.startswith("opentelemetry.sdk."):
            raise ImportError(f"No module named {name!r} (blocked)")
        return None

sys.meta_path.insert(0, Block())
from antigravity_sdk import Agent
from antigravity_sdk.testing import ScriptedModel

async def main():
    async with ScriptedModel(["hello", "again"]) as model:
        with tempfile.TemporaryDirectory() as ws:
            builder = Agent.builder().model(model).allow_all().workspaces([ws])
            async with builder.tracing(agent_name="t").build() as agent:
                print((await agent.chat("hi")).text)
                print((await agent.chat("hi")).text)
    print(sorted(m for m in sys.modules if m.startswith("opentelemetry.sdk")))

asyncio.run(main())
"""


@pytest.mark.harness
def test_tracing_with_the_api_only_runs_untraced_and_says_what_to_install() -> None:
    harness = _require_harness()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ANTIGRAVITY_HARNESS_PATH": str(harness)}
    done = subprocess.run(
        [sys.executable, "-c", _API_ONLY],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hello\nagain\n[]\n"
    # one warning for the process (two turns), naming the SDK package and where to read
    assert done.stderr.count("pip install opentelemetry-sdk") == 1, done.stderr
    assert "no OpenTelemetry TracerProvider is set" in done.stderr
    assert "Tracing with OpenTelemetry" in done.stderr


async def test_the_warning_is_for_no_provider_only(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "antigravity_sdk.tracing")
    for provider, warns in ((TracerProvider(), False), (NoOpTracerProvider(), True)):
        monkeypatch.setattr(tracing, "_warned", False)
        caplog.clear()
        runner = tracing.Tracing(provider).hook_runner([], turn_attributes={})
        runner.start_turn("c")
        runner.close_turn()
        runner.start_turn("c")  # once a process
        runner.close_turn()
        messages = [r.getMessage() for r in caplog.records]
        assert messages == ([tracing.NO_PROVIDER] if warns else []), provider


def test_the_missing_api_message_names_the_extra_and_the_sdk() -> None:
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'opentelemetry':\n"
        "            raise ImportError('blocked')\n"
        "sys.meta_path.insert(0, Block())\n"
        "from antigravity_sdk import Agent, ConfigurationError\n"
        "try:\n"
        "    Agent.builder().tracing()\n"
        "except ConfigurationError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    expected = "pip install 'antigravity-sdk[otel]' (its API; pip install opentelemetry-sdk"
    assert expected in done.stdout


@pytest.mark.harness
def test_the_readme_tracing_block_exports_spans(tmp_path: Path) -> None:
    """The README's snippet, run offline as the docs test runs it, prints the spans."""
    from test_docs_examples import blocks, run_block  # tests/ is on sys.path (no package)

    _require_harness()
    [block] = [b for b in blocks(ROOT / "README.md") if "ConsoleSpanExporter" in b.code]
    assert block.mode == "run offline"
    done = run_block(block, tmp_path)
    assert done.returncode == 0, done.stderr
    names = re.findall(r'"name": "([^"]+)"', done.stdout)
    assert "invoke_agent docs-bot" in names, done.stdout
    assert "no OpenTelemetry TracerProvider" not in done.stderr
    readme = (ROOT / "README.md").read_text()
    assert "pip install 'antigravity-sdk[otel]' opentelemetry-sdk" in readme


# -- 10. make demo: the cli extra only --------------------------------------------------------


def _make_n(target: str) -> list[str]:
    # As a user runs it: not as a sub-make of `make test` (which would add "Entering
    # directory" lines and pass its own flags down).
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", target],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if not line.startswith("echo ")]


def test_make_demo_installs_the_cli_extra_only() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    cli_extra = re.search(r"^cli = \[(.*?)^\]", pyproject, re.S | re.M)
    assert cli_extra is not None and "pytest" not in cli_extra.group(1)
    commands = _make_n("demo")
    installs = [c for c in commands if "scripts/venv.sh" in c]
    assert installs == ["scripts/venv.sh python3 .venv-demo cli"], commands
    rest = [c for c in commands if c not in installs]
    assert rest and all(c.startswith(".venv-demo/bin/antigravity ") for c in rest), rest
    assert rest[-1] == ".venv-demo/bin/antigravity demo"
    assert ".venv-demo/" in (ROOT / ".gitignore").read_text().splitlines()
    # make test keeps its own venv with the development tools
    assert "scripts/venv.sh python3 .venv dev" in _make_n("test")


# -- 11. docs/api.md ---------------------------------------------------------------------------


def _prose(path: Path) -> str:
    return re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)


@pytest.mark.parametrize(
    "path", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name
)
def test_no_line_of_the_docs_is_pasted_twice(path: Path) -> None:
    lines = [line.strip() for line in _prose(path).splitlines() if len(line.strip()) >= 50]
    lines = [line for line in lines if not line.startswith("<!--")]  # the docs test's marks
    twice = sorted({line for line in lines if lines.count(line) > 1})
    assert not twice, twice


def test_the_error_tree_is_the_class_tree() -> None:
    text = (ROOT / "docs" / "api.md").read_text()
    tree = text[text.index("```\nAntigravityError") + 4 : text.index("ToolExecutionError (")]
    parents: list[tuple[int, str]] = []  # (depth, name) along the current branch
    shown: list[str] = []
    for line in tree.splitlines():
        match = re.match(r"^([│ ]*)(?:[├└]── )?([A-Z]\w+)", line)
        if match is None:
            continue
        depth = len(match.group(1)) // 4 + (1 if "── " in line else 0)
        name = match.group(2)
        parents = [p for p in parents if p[0] < depth]
        if parents:
            assert getattr(errors, name).__bases__[0] is getattr(errors, parents[-1][1]), name
        parents.append((depth, name))
        shown.append(name)
    public = [
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.AntigravityError)
    ]
    assert len(shown) == len(set(shown)), f"an error listed twice: {shown}"
    assert sorted(shown) == sorted(public)


def test_the_reexport_paragraph_is_one_and_complete() -> None:
    import antigravity_sdk
    from antigravity_sdk import types

    text = (ROOT / "docs" / "api.md").read_text()
    assert " ".join(text.split()).count("Names load on first use") == 1
    start = text.index("`antigravity_sdk` re-exports:")
    paragraph = text[start : text.index("\n\n", start)]
    named = set(re.findall(r"`(\w+)`", paragraph)) - {"antigravity_sdk", "policy"}
    below = {n for n in antigravity_sdk.__all__ if hasattr(errors, n) or hasattr(types, n)}
    assert named == set(antigravity_sdk.__all__) - below - {"__version__", "policy"}
