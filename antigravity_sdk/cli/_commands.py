"""The `antigravity` argument parser and its small subcommands (harness, doctor, demo, chat).

Each subcommand is one `add_*` function that adds its parser and sets `run` to a
handler `(args) -> exit code`; list the function in `COMMANDS` to register it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._common import EXIT_CODES, LOOP_ENV, Subparsers, event_loop_name, run_loop
from .containment import add_containment_options, containment_from
from .conversations import add_conversations
from .fleet import add_fleet
from .policy import add_policy

if TYPE_CHECKING:
    from pathlib import Path

    from ..containment import ContainmentInForce
    from ..harness.effects import SandboxStatus

__all__ = ["COMMANDS", "LOOP_ENV", "build_parser", "event_loop_name", "main", "run_loop"]

# -- antigravity harness ---------------------------------------------------------------------


def _harness_install(args: argparse.Namespace) -> int:
    from ..errors import ConfigurationError, HarnessNotFoundError
    from ..harness.install import ENV_HARNESS_PATH, HARNESS_VERSION, install_harness, wheel_version

    version = args.version or (args.wheel and wheel_version(args.wheel)) or HARNESS_VERSION
    from .progress import install_progress

    progress = install_progress(sys.stderr)
    try:
        path = install_harness(version, wheel=args.wheel, force=args.force, progress=progress)
    except ConfigurationError as exc:  # a malformed --version: nothing was downloaded
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except HarnessNotFoundError as exc:
        progress.close()
        print(f"error: {exc}", file=sys.stderr)
        return 1
    progress.close()
    print(path)
    if version != HARNESS_VERSION:
        print(
            f"note: the SDK is tested with harness {HARNESS_VERSION}; discovery uses that one "
            f"first when it is installed (set {ENV_HARNESS_PATH}={path} to use this one)",
            file=sys.stderr,
        )
    return 0


def _harness_path(args: argparse.Namespace) -> int:
    from ..errors import HarnessNotFoundError
    from ..harness.install import locate_harness

    try:
        found = locate_harness()
    except HarnessNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(found.path)
    return 0


def add_harness(subparsers: Subparsers) -> None:
    """`antigravity harness install|path`: fetch the pinned harness, show what is found."""
    parser = subparsers.add_parser("harness", help="install or locate the localharness binary")
    commands = parser.add_subparsers(dest="harness_command", required=True, metavar="COMMAND")
    install = commands.add_parser(
        "install", help="download the pinned google-antigravity wheel and keep its harness"
    )
    install.add_argument(
        "--version", help="a different google-antigravity version, e.g. 0.1.21 (no 'v')"
    )
    install.add_argument(
        "--wheel",
        metavar="FILE",
        help="a google-antigravity wheel already downloaded (no download; its RECORD "
        "hash is checked); give --version too if it is not the pinned one",
    )
    install.add_argument("--force", action="store_true", help="reinstall even if cached")
    install.set_defaults(run=_harness_install)
    path = commands.add_parser("path", help="print the harness that discovery finds")
    path.set_defaults(run=_harness_path)


# -- antigravity doctor ----------------------------------------------------------------------


async def _initialize(
    harness: Path, root: Path, contained: bool
) -> tuple[SandboxStatus | None, ContainmentInForce | None]:
    """Start the harness in `root` (contained as an agent's would be, when `contained`),
    initialize a conversation (no model is called), and return what the harness says
    about its command sandbox, and the containment the kernel put in force."""
    from ..containment import DEFAULT_CONTAINMENT, landlock_abi, plan
    from ..harness.config import ModelSettings, harness_config
    from ..harness.connection import LocalConnection
    from ..harness.effects import Initialized
    from ..harness.protocol import SessionCore
    from ..types import CapabilitiesConfig

    containment = None
    if contained:
        containment = plan(
            DEFAULT_CONTAINMENT,
            workspaces=[root],
            state=[root / "save", root / "home"],
            tmp_dir=root,
            abi=landlock_abi(),
        )
    conn = LocalConnection(harness, startup_timeout=30.0, containment=containment)
    try:
        async with asyncio.timeout(30.0):
            await conn.open(storage_dir=root / "save", home=root / "home")
            model = ModelSettings(name="doctor", base_url="http://127.0.0.1:9/v1")
            await conn.send(
                harness_config(
                    model=model,
                    workspaces=[root],
                    app_data_dir=root / "app",
                    capabilities=CapabilitiesConfig(),
                    hook_events=(),
                )
            )
            frames: asyncio.Queue[dict[str, Any] | BaseException] = asyncio.Queue()
            conn.listen(frames.put_nowait, frames.put_nowait)
            core = SessionCore(frozenset())
            while True:
                frame = await frames.get()
                if isinstance(frame, BaseException):
                    raise frame
                for effect in core.receive(frame):
                    if isinstance(effect, Initialized):
                        return effect.sandbox, conn.containment
    finally:
        await conn.close()


def _containment_report() -> bool:
    """Print the containment a default agent gets here; True where it can apply."""
    from pathlib import Path

    from ..containment import DEFAULT_CONTAINMENT, for_agent, landlock_abi, unavailable_reason
    from ..conversations import default_save_dir
    from ..harness.config import DEFAULT_GEMINI_MODEL, ModelSettings
    from ..harness.install import default_cache_dir

    abi = landlock_abi()
    reason = unavailable_reason(abi, local=True)
    if reason:
        print(
            f"[WARN] containment: unavailable ({reason}); agents run uncontained with a "
            "warning, and Containment(required=True) refuses to start"
        )
        return False
    contained = for_agent(
        DEFAULT_CONTAINMENT,
        abi=abi,
        workspaces=[Path.cwd().resolve()],
        state=[default_save_dir().resolve(), (default_cache_dir() / "app-data").resolve()],
        model=ModelSettings(name=DEFAULT_GEMINI_MODEL, api_key="(yours)"),
        mcp_servers=(),
    )
    contained.remove_tmp_dir()
    head, *rest = contained.describe()
    print(f"[ OK ] containment: {head} (for an agent in this directory on the Gemini API)")
    for line in rest:
        print(f"       {line}")
    return True


def _doctor(args: argparse.Namespace) -> int:
    del args
    import platform
    import tempfile
    from pathlib import Path

    from .. import __version__
    from ..errors import AntigravityError
    from ..harness.install import HARNESS_VERSION, locate_harness

    ok = True
    print(f"antigravity-sdk {__version__} on Python {platform.python_version()}")
    try:
        found = locate_harness()
    except AntigravityError as exc:
        print(f"[FAIL] harness: {exc}")
        return 1
    version = found.version or "unknown"
    print(f"[ OK ] harness: {found.path} (from {found.source}, version {version})")
    if found.version not in (None, HARNESS_VERSION):
        print(f"[WARN] the SDK is tested with harness {HARNESS_VERSION}")

    contained = _containment_report()
    try:
        with tempfile.TemporaryDirectory(prefix="antigravity-doctor-") as tmp:
            root = Path(os.path.realpath(tmp))  # the kernel compares resolved paths
            sandbox, in_force = run_loop(_initialize(found.path, root, contained))
        started = "starts" + (" contained" if contained else "")
        print(f"[ OK ] harness {started}, completes its handshake and initializes a conversation")
        if in_force is not None:  # what only the contained start itself can tell
            private = ", ".join(in_force.private) or "nothing (no user namespaces here)"
            print(f"       its own: {private}; seccomp filter: {in_force.filtered}")
        # Informational: the SDK leaves the harness's sandbox off (see docs/decisions.md).
        if sandbox is None:
            print("[INFO] harness command sandbox: not reported by this harness")
        elif sandbox.available:
            print("[INFO] harness command sandbox: available on this machine")
        else:
            reason = sandbox.unavailable_reason or "no reason given"
            print(f"[INFO] harness command sandbox: unavailable on this machine ({reason})")
    except (AntigravityError, TimeoutError) as exc:
        ok = False
        print(f"[FAIL] harness start: {exc or 'no conversation within 30s'}")
    if event_loop_name() == "uvloop":
        from importlib.metadata import version as installed

        print(f"[INFO] event loop: uvloop {installed('uvloop')} (the fast extra)")
    else:
        print("[INFO] event loop: asyncio (pip install 'antigravity-sdk[fast]' for uvloop)")
    if os.environ.get("GEMINI_API_KEY"):
        print("[ OK ] model: GEMINI_API_KEY is set (Gemini API)")
    else:
        print(
            "[INFO] model: GEMINI_API_KEY is not set; use a ScriptedModel (offline) or "
            "--base-url/--model for an OpenAI-compatible endpoint"
        )
    return 0 if ok else 1


def add_doctor(subparsers: Subparsers) -> None:
    """`antigravity doctor`: check the harness binary, its version and the model settings."""
    parser = subparsers.add_parser("doctor", help="check the harness and model settings")
    parser.set_defaults(run=_doctor)


# -- antigravity demo / chat -----------------------------------------------------------------


def _given(value: str) -> str | None:
    """An option's value; an empty one (`--base-url "$UNSET"`) counts as not given."""
    return value or None


def _model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--base-url", type=_given, help="an OpenAI-compatible /v1 endpoint (Ollama, vLLM)"
    )
    parser.add_argument(
        "--model", type=_given, help="the model name (Gemini, or served at --base-url)"
    )


def _missing_cli_extra(command: str, *modules: str) -> bool:
    """True, after printing how to install it, when the `cli` extra (prompt_toolkit, the
    interactive chat's input) that `command` needs is not installed."""
    import importlib

    missing = []
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    if missing:
        print(
            f"error: antigravity {command} needs {', '.join(missing)} (the cli extra): "
            "pip install 'antigravity-sdk[cli]'",
            file=sys.stderr,
        )
    return bool(missing)


def _audit_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--audit-log",
        metavar="PATH",
        type=_given,
        help="append a JSON line per tool-call decision and per turn to PATH",
    )


def _demo(args: argparse.Namespace) -> int:
    """`run_demo`, with the error that stops the session on stderr (the report on
    stdout): 0 as designed, 1 not, 2 not runnable (no harness, an unusable model)."""
    from ..errors import AntigravityError
    from .demo import demo_session
    from .report import print_error

    try:
        report = run_loop(
            demo_session(
                base_url=args.base_url,
                model=args.model,
                out=sys.stdout,
                audit_log=args.audit_log,
                containment=containment_from(args),
            )
        )
    except AntigravityError as exc:
        sys.stdout.flush()
        return print_error(sys.stderr, exc)
    return 0 if report.ok else 1


def _chat(args: argparse.Namespace) -> int:
    if args.prompt is None:  # the interactive session
        if _missing_cli_extra("chat", "prompt_toolkit"):
            return 2
        from .repl import run_repl

        try:
            return run_loop(
                run_repl(
                    policies_file=args.policies,
                    base_url=args.base_url,
                    model=args.model,
                    containment=containment_from(args),
                    model_timeout=args.timeout,
                )
            )
        except KeyboardInterrupt:  # Ctrl-C outside a turn and the prompt (starting, say)
            return 130
    from .chat import run_chat

    try:
        return run_loop(
            run_chat(
                args.prompt,
                policies_file=args.policies,
                base_url=args.base_url,
                model=args.model,
                audit_log=args.audit_log,
                containment=containment_from(args),
                model_timeout=args.timeout,
            )
        )
    except KeyboardInterrupt:  # a second Ctrl-C as the loop closes (run_chat has the first)
        print("interrupted (Ctrl-C)", file=sys.stderr)
        return 130


def _seconds(value: str) -> float:
    """A `--timeout`: a finite number of seconds > 0."""
    import math

    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {value!r}")
    return seconds


def add_demo(subparsers: Subparsers) -> None:
    """`antigravity demo`: the governed offline session (or on a real model)."""
    parser = subparsers.add_parser(
        "demo", help="run a governed session on the real harness (offline by default)"
    )
    _model_options(parser)
    _audit_option(parser)
    add_containment_options(parser)
    parser.set_defaults(run=_demo)


def add_chat(subparsers: Subparsers) -> None:
    """`antigravity chat [PROMPT]`: one governed turn on a real model, or (no PROMPT) an
    interactive session."""
    parser = subparsers.add_parser(
        "chat", help="chat on a real model: one turn, or an interactive session without PROMPT"
    )
    parser.add_argument(
        "prompt", metavar="PROMPT", nargs="?", help="one turn's prompt; omit it to chat"
    )
    parser.add_argument("--policies", metavar="FILE", help="a TOML policy file")
    _model_options(parser)
    from .waiting import DEFAULT_TIMEOUT

    parser.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=_seconds,
        default=DEFAULT_TIMEOUT,
        help="how long to wait for the model's answer each time it is called, before the "
        f"turn is stopped with an error naming the endpoint (default {DEFAULT_TIMEOUT:g})",
    )
    _audit_option(parser)
    add_containment_options(parser)
    parser.set_defaults(run=_chat)


# -- antigravity audit ------------------------------------------------------------------------


def _audit_summarize(args: argparse.Namespace) -> int:
    from ..audit import render_summary, summarize

    try:
        summary = summarize(args.file)
    except OSError as exc:
        print(f"error: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    render_summary(summary, sys.stdout)
    if summary.unreadable:
        print(
            f"warning: {summary.unreadable} unreadable line(s) skipped (a crash mid-write "
            "leaves a truncated last line)",
            file=sys.stderr,
        )
    return 0


def _audit_verify(args: argparse.Namespace) -> int:
    from ..audit import verify
    from ..errors import ConfigurationError
    from ..state import read_key_file

    try:
        keys = [read_key_file(path) for path in args.key_file] if args.key_file else None
        report = verify(args.file, keys)
    except OSError as exc:
        print(f"error: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except ConfigurationError as exc:
        print(f"error: {args.file}: {exc} (--key-file FILE)", file=sys.stderr)
        return 2
    for line, problem in report.problems:
        print(f"line {line}: {problem}")
    if report.wrong_key:
        tried = ", ".join(report.keys) or "none"
        print(
            f"no keyed line verifies with the keys tried ({tried}): if the log was sealed "
            "elsewhere, give its key with --key-file FILE"
        )
    state = "intact" if report.intact else f"BROKEN ({len(report.problems)} problem(s))"
    print(f"{args.file}: {report.lines} line(s), {report.sessions} session(s): chain {state}")
    return 0 if report.intact else 1


def add_audit(subparsers: Subparsers) -> None:
    """`antigravity audit summarize FILE`: what an agent's audit log says, as tables;
    `antigravity audit verify FILE [--key-file F]`: whether its sealed chain is intact."""
    parser = subparsers.add_parser("audit", help="read an agent's audit log")
    commands = parser.add_subparsers(dest="audit_command", required=True, metavar="COMMAND")
    summarize = commands.add_parser(
        "summarize",
        help="per tool: allowed/denied/asked, top deny reasons, latency; per turn: usage",
    )
    summarize.add_argument("file", metavar="FILE", help="a JSON-lines audit log")
    summarize.set_defaults(run=_audit_summarize)
    check = commands.add_parser(
        "verify",
        help="check the sealed chain: edited, deleted, inserted or reordered lines, a cut "
        "tail, a log resealed without the key (exit 1 when broken)",
        description="Check the chain of every session against the key it was sealed with: "
        "by default this machine's keys (the SDK state directory's audit key, and the "
        "fleet secret: $ANTIGRAVITY_FLEET_SECRET, else the state directory's fleet key).",
    )
    check.add_argument("file", metavar="FILE", help="a JSON-lines audit log")
    check.add_argument(
        "--key-file",
        metavar="F",
        action="append",
        help="a key to check with instead: 32 raw bytes (a state directory's keys/*.key) or "
        "hex or base64 text (as ANTIGRAVITY_FLEET_SECRET); repeat for several",
    )
    check.set_defaults(run=_audit_verify)


# -- registry ---------------------------------------------------------------------------------


COMMANDS: list[Callable[[Subparsers], None]] = [
    add_demo,
    add_chat,
    add_audit,
    add_policy,
    add_fleet,
    add_harness,
    add_doctor,
    add_conversations,
]
"""Subcommand registrars, in help order: add one function here per subcommand."""


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with every registered subcommand."""
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog="antigravity",
        description="Governed AI agents on Google's Antigravity harness.",
    )
    parser.add_argument("--version", action="version", version=f"antigravity-sdk {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in COMMANDS:
        register(subparsers)
    _exit_codes_epilog(parser)
    return parser


def _exit_codes_epilog(parser: argparse.ArgumentParser) -> None:
    """Give `parser` and every subcommand's parser under it the exit-code scheme as the
    epilog of its --help (one text: `_common.EXIT_CODES`)."""
    parser.epilog = EXIT_CODES
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                _exit_codes_epilog(sub)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (`_common.EXIT_CODES`: 0 yes, 1 no or
    failed, 2 not runnable, e.g. a usage error)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help and usage errors: report the code, do not exit
        return exc.code if isinstance(exc.code, int) else 2
    run: Callable[[argparse.Namespace], int] = args.run
    return run(args)
