"""The audit log: one JSON line per tool-call decision an agent makes, one per turn.

`AgentBuilder.audit_log(path)` turns it on. Each decision line says when, in which
conversation and trajectory, which tool with which arguments (after the `redact` hook),
the verdict, and what decided it: a policy rule (with its bucket), a hook (by name), or
the SDK itself (a refusal before any hook is asked, or a failure to decide). A rewrite
records the arguments as rewritten too. Each turn ends with a line holding its usage and
stop reason. `summarize()` (`antigravity audit summarize FILE`) reads a log back.

Crash safety: every line is one `os.write` on a file opened with `O_APPEND`, right after
the decision, with nothing buffered across decisions. So a crash of the process loses at
most the line being written (the reader skips a truncated last line), and agents
appending to the same file never interleave within a line: POSIX makes appends up to
`PIPE_BUF` (4096 bytes on Linux) atomic, and local Linux filesystems serialise whole
appends to a regular file (longer lines, e.g. a large `write_to_file`, stay whole in
practice; not on NFS). Lines reach the kernel at once but the disk only when the kernel
flushes them, unless `fsync=True` (see docs/api.md for the cost). The log grows without
bound: rotate it with logrotate's `copytruncate` (writes after the truncation land at
the new end, as `O_APPEND` writes do).

Sealed: each line carries its session, its number, the previous line's seal and its own,
an HMAC-SHA256 with a key the agent never holds (the state directory's `audit` key by
default, see `antigravity_sdk.state`), so a log rewritten and resealed without the key
fails `verify`. Lines go to an `AuditSink`: the file (`FileSink`) or, in a fleet, its
audit table.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import statistics
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii as _encode_string
from pathlib import Path
from time import perf_counter_ns
from typing import IO, TYPE_CHECKING, Any, Final, Protocol

from .context import DecisionNote, noting
from .errors import ConfigurationError
from .harness.effects import ConfirmTool, HookCall, PolicyRequest
from .policy import BUCKETS, Decision
from .types import HookResult, ToolCall, UsageMetadata

if TYPE_CHECKING:
    from .containment import ContainmentInForce
    from .harness.effects import HookDispatch, Request, ToolRun, TurnEnded

__all__ = [
    "REDACTION_FAILED",
    "UNKEYED",
    "AuditLog",
    "AuditSink",
    "AuditSummary",
    "ChainReport",
    "FileSink",
    "Redactor",
    "default_keys",
    "read_entries",
    "render_summary",
    "summarize",
    "verify",
]

logger = logging.getLogger("antigravity_sdk.audit")

VERSION: Final = 3
"""The line format's version (`"v"` in every line): 3 seals the chain with a keyed MAC
(`"mac"`); 2 sealed it with a plain hash (`"hash"`), which `verify` still reads but cannot
prove (anyone can recompute it)."""

REDACTION_FAILED: Final = "<redaction failed>"
"""What a line holds instead of the arguments when the redactor raised or returned
something that is not a JSON-serialisable mapping: never the raw arguments."""

Redactor = Callable[[dict[str, Any]], Mapping[str, Any]]
"""`redact(args) -> args`: gets a private copy of a call's arguments, returns what to log."""

_ENCODER: Final = json.JSONEncoder(separators=(",", ":"), default=str, allow_nan=False)
"""Built once (`json.dumps` with options builds one per call). ASCII output, so no
character any reader takes for a line break (U+2028, U+0085...) is written raw."""
_STRICT: Final = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
"""For a redactor's answer: plain JSON or nothing (no `str()` of unknown objects)."""


_NO_RULE: Final = 'null,"decision":null,"bucket":null,"bucket_name":null'
_ALLOWED: Final = '"message":"",'
_HEADS_KEPT: Final = 1024
_HASH_DIGITS: Final = 32
_SEAL_FIELDS: Final = frozenset({"sid", "seq", "prev", "hash", "mac"})


def _str(value: object) -> str:
    """A JSON string literal (ASCII) of `value` as text."""
    return _encode_string(value if isinstance(value, str) else str(value))


_last_second: tuple[int, str] = (-1, "")  # the last whole second, formatted


def _iso(ns: int) -> str:
    """`ns` (`time.time_ns()`) as ISO 8601 UTC with microseconds; the seconds part is
    formatted once a second."""
    global _last_second
    whole, fraction = divmod(ns, 1_000_000_000)
    cached = _last_second  # one read: another thread may replace it meanwhile
    if cached[0] != whole:
        cached = _last_second = (whole, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)))
    return f"{cached[1]}.{fraction // 1000:06d}Z"


def _flat_json(args: dict[str, Any]) -> str | None:
    """`args` as JSON when every key and value is a string (paths, commands: most tool
    calls), a third of the encoder's cost; None for anything else."""
    parts = []
    for key, value in args.items():
        if key.__class__ is not str or value.__class__ is not str:
            return None
        parts.append(f"{_encode_string(key)}:{_encode_string(value)}")
    return "{" + ",".join(parts) + "}"


def _usage(usage: UsageMetadata | None) -> dict[str, int] | None:
    if usage is None:
        return None
    return {
        "prompt": usage.prompt_token_count,
        "cached": usage.cached_content_token_count,
        "candidates": usage.candidates_token_count,
        "thoughts": usage.thoughts_token_count,
        "total": usage.total_token_count,
    }


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):  # closing is all that is left to do
        os.close(fd)


class AuditSink(Protocol):
    """Where an audit log's sealed lines go: `write` one whole line (ASCII JSON ending in
    a newline; raise `OSError` when it cannot be stored), `close` at the session's end."""

    def write(self, line: bytes) -> None: ...

    def close(self) -> None: ...


class FileSink:
    """An `AuditSink` appending to a file: opened (created 0600: arguments may be
    sensitive) with `O_APPEND`, one `os.write` per line (more only after a short write),
    `fsync` after each when asked. A path that cannot be opened is a
    `ConfigurationError`."""

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        try:
            fd = os.open(path, flags, 0o600)
        except OSError as exc:
            raise ConfigurationError(
                f"cannot open the audit log {os.fspath(path)!r}: {exc.strerror or exc}"
            ) from None
        self._fd = fd
        self._fsync = fsync
        self._closer = weakref.finalize(self, _close, fd)

    def write(self, line: bytes) -> None:
        fd = self._fd
        if fd < 0:
            raise OSError("the audit log is not open")
        written = os.write(fd, line)
        while written < len(line):  # a full disk or a signal; the rest follows
            written += os.write(fd, line[written:])
        if self._fsync:
            os.fsync(fd)

    def close(self) -> None:
        self._fd = -1
        self._closer()


class _Sealer:
    """HMAC-SHA256 with `key`, its padded key blocks hashed once: a seal then costs two
    hash copies and updates (cheaper than `hmac.new`, which starts over every time)."""

    def __init__(self, key: bytes) -> None:
        block = hashlib.sha256().block_size
        padded = (hashlib.sha256(key).digest() if len(key) > block else key).ljust(block, b"\0")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in padded))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in padded))

    def seal(self, data: bytes) -> str:
        """The first 32 hex digits of HMAC-SHA256(key, data)."""
        inner = self._inner.copy()
        inner.update(data)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.hexdigest()[:_HASH_DIGITS]


def _check_key(key: object, what: str) -> bytes:
    if not isinstance(key, bytes) or len(key) < 32:
        raise ConfigurationError(f"{what} must be at least 32 bytes, got {type(key).__name__}")
    return key


class AuditLog:
    """Appends an agent's decision and turn lines to `path` (see the module docstring).

    The agent opens it at `start()` and closes it at `stop()`. Writing never breaks a
    turn: a failed write is logged on `antigravity_sdk.audit` and counted in
    `write_errors`, and the decision stands as made.

    `key` seals the chain (at least 32 bytes; None: the state directory's `audit` key,
    `antigravity_sdk.state.secret("audit")`, read when the log opens). `sink` makes where
    the lines go, once per opening (None: a `FileSink` on `path`); `fields` are added to
    every line, inside its seal (the fleet's task, worker and spec hash).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        redact: Redactor | None = None,
        fsync: bool = False,
        key: bytes | None = None,
        sink: Callable[[], AuditSink] | None = None,
        fields: Mapping[str, str | int | None] | None = None,
    ) -> None:
        if not isinstance(path, str | os.PathLike):
            raise TypeError(f"audit_log takes a file path, got {type(path).__name__}")
        if redact is not None and not callable(redact):
            raise TypeError(f"redact must be callable (args -> args), got {redact!r}")
        if not isinstance(fsync, bool):
            raise TypeError(f"fsync must be a bool, got {fsync!r}")
        if key is not None:
            _check_key(key, "the audit key")
        if sink is not None and not callable(sink):
            raise TypeError(f"sink must be callable (() -> AuditSink), got {sink!r}")
        fields = dict(fields or {})
        taken = _SEAL_FIELDS & fields.keys()
        if taken:
            raise ConfigurationError(f"audit fields {sorted(taken)} are the seal's own")
        self.path = Path(path)
        self.redact = redact
        self.fsync = fsync
        self.key = key
        self.sink = sink
        self.fields = fields
        self._fields = "".join(f",{_str(k)}:{_ENCODER.encode(v)}" for k, v in fields.items())
        self.write_errors = 0
        self._out: AuditSink | None = None
        self._sealer: _Sealer | None = None
        self._turn = 0
        self._decisions = 0
        self._denied = 0
        # Each decision line's opening, per where and verdict (see `_head`).
        self._heads: dict[tuple[Any, ...], str] = {}
        # The chain (see `_append`): this writer's session, its next line's number, the
        # hash of its last line written, and the policy set's hash for decision lines.
        self._sid = ""
        self._seq = 0
        self._prev = ""
        self._policy = ""

    def copy(self) -> AuditLog:
        """A new, unopened log with the same settings: one per agent."""
        return AuditLog(
            self.path,
            redact=self.redact,
            fsync=self.fsync,
            key=self.key,
            sink=self.sink,
            fields=self.fields,
        )

    # -- the file ----------------------------------------------------------------------

    def open(self, policy: str = "") -> None:
        """Open the sink (the file: created 0600, for appending); a path that cannot be
        opened, or a key that cannot be read, is a `ConfigurationError`. Each opening
        starts a chain of its own (a new `sid`); `policy` is the policy set's hash
        (`PolicyEnforcer.fingerprint`), recorded on the session and decision lines."""
        if self._out is not None:
            return
        if self._sealer is None:
            if self.key is None:
                from .state import secret

                self._sealer = _Sealer(secret("audit"))
            else:
                self._sealer = _Sealer(self.key)
        self._sid, self._seq, self._prev = secrets.token_hex(8), 0, ""
        self._policy = policy
        self._heads.clear()
        self._out = self.sink() if self.sink is not None else FileSink(self.path, fsync=self.fsync)

    def close(self) -> None:
        """Write the session's `end` line (how many lines came before it, so a cut tail
        shows) and close."""
        out = self._out
        if out is None:
            return
        self.write({"v": VERSION, "kind": "end", "time": _iso(time.time_ns())})
        self._out = None
        try:
            out.close()
        except Exception as exc:
            self._failed(f"could not close the audit log {self.path}", exc)

    def write(self, entry: Mapping[str, Any]) -> None:
        """Append `entry` (a non-empty mapping) as one JSON line."""
        try:
            line = _ENCODER.encode(entry)
        except Exception as exc:
            self._failed("could not encode an audit line", exc)
            return
        self._append(line[:-1])

    def _append(self, body: str) -> None:
        """Seal `body` (a JSON object's text without its closing brace) into a line of
        the chain and hand it to the sink (the file: one `os.write`).

        The seal adds the log's `fields`, this writer's `sid`, the line's `seq` and the
        previous line's seal (`prev`), then the line's own `mac`: the first 32 hex digits
        of the HMAC-SHA256, under the log's key, of the line up to that field. Only a
        line written advances the chain."""
        try:
            out, sealer = self._out, self._sealer
            if out is None or sealer is None:
                raise OSError("the audit log is not open")
            sealed = (
                f'{body}{self._fields},"sid":"{self._sid}","seq":{self._seq},"prev":"{self._prev}"'
            )
            encoded = sealed.encode("ascii")
            digest = sealer.seal(encoded)
            out.write(encoded + b',"mac":"' + digest.encode("ascii") + b'"}\n')
        except Exception as exc:
            self._failed(f"could not write to the audit log {self.path}", exc)
            return
        self._seq += 1
        self._prev = digest

    def _failed(self, what: str, exc: Exception) -> None:
        self.write_errors += 1
        # The type, and the text only of OS errors: other messages may quote the line.
        detail = str(exc) if isinstance(exc, OSError) else type(exc).__name__
        logger.error("%s: %s", what, detail)

    # -- decisions ---------------------------------------------------------------------

    async def decide(
        self, request: Request, hooks: HookDispatch, tools: ToolRun, conversation: str
    ) -> Any:
        """`request.decide(hooks, tools)`, and for a tool-call decision a line saying
        what was decided and by what (also when deciding fails: the refusal that
        follows is logged as the SDK's)."""
        # `type() is`: the effects are final dataclasses, and this runs on every call.
        if type(request) is HookCall:
            if request.event != "pre_tool_call":
                return await request.decide(hooks, tools)
            route, call = "pre_tool_call", request.arg
        elif type(request) is PolicyRequest:
            route, call = "policy_request", request.call
        elif type(request) is ConfirmTool:
            route, call = "confirmation", request.call
        else:
            return await request.decide(hooks, tools)
        note = DecisionNote()
        token = noting.set(note)
        began = perf_counter_ns()
        try:
            outcome: Any = await request.decide(hooks, tools)
        except BaseException as exc:
            failed = HookResult.denied(f"the SDK could not decide: {type(exc).__name__}")
            self._decision(request, route, call, conversation, failed, note, began)
            raise
        finally:
            noting.reset(token)
        self._decision(request, route, call, conversation, outcome, note, began)
        return outcome

    def _decision(
        self,
        request: Request,
        route: str,
        call: ToolCall | None,
        conversation: str,
        outcome: HookResult,
        note: DecisionNote,
        began: int,
    ) -> None:
        """Write the decision's line. Built as text, not as a dict to encode: this runs on
        every tool call (benches/bench_audit.py). What a turn repeats from call to call
        (where, tool, verdict, rule) is one cached head; only the time, the call id, the
        latencies, a deny's message and the arguments are formatted per line."""
        latency = perf_counter_ns() - began
        allow = outcome.allow
        policy_ns = note.policy_ns
        decided = policy_ns >= 0  # the policies ran (they come last)
        if allow:
            by = "policy" if decided else "sdk"
        elif decided and not note.policy_allow:
            by = "policy"
        else:
            by = "hook" if note.hook else "sdk"
        self._decisions += 1
        if not allow:
            self._denied += 1
        try:
            if call is not None:
                trajectory, call_id, args = call.trajectory_id, call.id, self._args(call.args)
                tool, server = call.name, call.server_name
            else:  # a step the SDK could not describe
                trajectory, call_id, args = getattr(request, "trajectory_id", ""), "", "null"
                tool, server = None, None
            key = (
                conversation,
                self._turn,
                trajectory,
                route,
                tool,
                server,
                by,
                note.rule if by == "policy" else None,
                note.hook if by == "hook" else "",
                allow,
            )
            head = self._heads.get(key)
            if head is None:
                head = self._head(key, call)
            line = (
                f'{head}"time":"{_iso(time.time_ns())}","call_id":{_encode_string(call_id)},'
                f'"latency_us":{latency / 1000:.1f},'
                f'"policy_us":{f"{policy_ns / 1000:.1f}" if decided else "null"}'
            )
            if not allow:
                line += f',"message":{_str(outcome.message)}'
            line += f',"args":{args}'
            if allow and decided and not note.policy_allow:  # shadow mode: what it would do
                rule = key[7]
                asks = rule is not None and rule.policy.decision is Decision.ASK_USER
                line += f',"shadow":"{"ask" if asks else "deny"}"'
            if note.rewriters:  # also when a later hook denied the rewritten call
                line += f',"rewritten_by":{_ENCODER.encode([str(n) for n in note.rewriters])}'
            if outcome.args is not None:
                line += f',"rewritten_args":{self._args(outcome.args)}'
        except Exception as exc:  # never break the turn
            self._failed("could not build an audit line", exc)
            return
        self._append(line)

    def _head(self, key: tuple[Any, ...], call: ToolCall | None) -> str:
        """The line's opening for `key` (conversation, turn, trajectory, route, tool,
        server, by, rule, hook, allow): every field but the per-call ones, ending in a
        comma; on allow the empty message too. Cached; the cache is bounded, as tool names
        come from the model."""
        conversation, turn, trajectory, route, _, _, by, rule, hook, allow = key
        tool = "null" if call is None else _str(call.qualified_name)
        ruled = _NO_RULE
        if rule is not None:
            policy = rule.policy
            ruled = (
                f'{_str(policy.label)},"decision":{_str(policy.decision.value)},'
                f'"bucket":{int(rule.bucket)},"bucket_name":{_str(BUCKETS[rule.bucket])}'
            )
        head = (
            f'{{"v":{VERSION},"kind":"decision","policy":"{self._policy}",'
            f'"conversation":{_str(conversation)},'
            f'"turn":{turn},"trajectory":{_str(trajectory)},"route":"{route}","tool":{tool},'
            f'"verdict":"{"allow" if allow else "deny"}","by":"{by}","rule":{ruled},'
            f'"hook":{_str(hook) if hook else "null"},{_ALLOWED if allow else ""}'
        )
        if len(self._heads) >= _HEADS_KEPT:
            self._heads.clear()
        self._heads[key] = head
        return head

    def _args(self, args: dict[str, Any]) -> str:
        """`args` as JSON, through the redactor, fail-closed: on any failure the marker
        (the arguments as the hooks saw them are never written after a failed redaction)."""
        redact = self.redact
        try:
            if redact is None:
                return _flat_json(args) or _ENCODER.encode(args)
            copy = json.loads(_ENCODER.encode(args))  # the redactor's own to change
            redacted = redact(copy)
            if not isinstance(redacted, Mapping):
                raise TypeError(f"redact returned {type(redacted).__name__}, not a mapping")
            return _STRICT.encode(dict(redacted))
        except Exception as exc:
            # Only the type: a redactor's message may quote the very value it was hiding.
            logger.error("audit log: arguments left out (%s)", type(exc).__name__)
            return _str(REDACTION_FAILED)

    # -- sessions and turns ------------------------------------------------------------

    def session(self, conversation: str, containment: ContainmentInForce | None) -> None:
        """The session's line, at start: what the harness runs in (None: uncontained)."""
        self.write(
            {
                "v": VERSION,
                "kind": "session",
                "time": _iso(time.time_ns()),
                "policy": self._policy,
                "conversation": conversation,
                "containment": containment.as_dict() if containment is not None else None,
            }
        )

    def refused_connection(
        self, conversation: str, host: str, port: int, method: str, reason: str
    ) -> None:
        """A decision line for a connection the containment's egress proxy refused: the
        `network` route, no tool call (a command or the harness reached for a host not
        allowed), decided by the containment."""
        self.write(
            {
                "v": VERSION,
                "kind": "decision",
                "policy": self._policy,
                "conversation": conversation,
                "turn": self._turn,
                "trajectory": "",
                "route": "network",
                "tool": None,
                "verdict": "deny",
                "by": "containment",
                "rule": None,
                "hook": None,
                "message": reason,
                "time": _iso(time.time_ns()),
                "call_id": "",
                "host": host,
                "port": port,
                "method": method,
                "args": {"host": host, "port": port, "method": method},
            }
        )

    def begin_turn(self) -> None:
        self._turn += 1
        self._decisions = self._denied = 0

    def end_turn(self, conversation: str, ended: TurnEnded | None, stop_reason: str) -> None:
        """The turn's line: its usage (None when it did not end normally) and why it ended."""
        response = ended.response if ended is not None else None
        self.write(
            {
                "v": VERSION,
                "kind": "turn",
                "time": _iso(time.time_ns()),
                "conversation": conversation,
                "turn": self._turn,
                "stop_reason": stop_reason,
                "error": ended.error if ended is not None else "",
                "usage": _usage(response.usage) if response is not None else None,
                "usage_by_trajectory": {
                    trajectory: _usage(usage)
                    for trajectory, usage in (
                        response.usage_by_trajectory.items() if response is not None else ()
                    )
                },
                "decisions": self._decisions,
                "denied": self._denied,
            }
        )


# -- reading it back -------------------------------------------------------------------------


_KINDS: Final = frozenset({"session", "decision", "turn", "end"})
_SEAL: Final = re.compile(rb',"(hash|mac)":"([0-9a-f]{%d})"\}\n\Z' % _HASH_DIGITS)
UNKEYED: Final = "unkeyed: integrity not provable against a rewrite"
"""What `verify` says of a session sealed with a plain hash (an older SDK's format):
its chain may hold, but anyone can recompute it."""


@dataclass
class _Chain:
    """One writer's session, as `verify` has followed it so far."""

    first: int  # the line number of its first line seen
    last: int  # of its last line seen
    seq: int  # the last line's sequence number
    hash: str  # the last line's seal
    keyed: bool  # its first line is sealed with a key
    key: bytes | None = None  # the key its lines verified with
    ended: bool = False


@dataclass
class ChainReport:
    """What `verify` found: the lines and sessions it read, and every break in the chain
    as (line number, what is wrong). An intact log has no problems: every session whole
    and sealed with a key `verify` holds. `unkeyed` counts the sessions sealed without a
    key (a problem each: nothing proves they were not rewritten); `unverified` the
    keyed lines whose seal matched no key (edited, or sealed with another key),
    out of `keyed` keyed lines; `keys` names the keys tried."""

    lines: int = 0
    sessions: int = 0
    problems: list[tuple[int, str]] = field(default_factory=list)
    keyed: int = 0
    unverified: int = 0
    unkeyed: int = 0
    keys: list[str] = field(default_factory=list)

    @property
    def intact(self) -> bool:
        return not self.problems

    @property
    def wrong_key(self) -> bool:
        """No keyed line verified: most likely the log was sealed with another key."""
        return self.keyed > 0 and self.unverified == self.keyed


def default_keys() -> list[tuple[str, bytes]]:
    """The keys this machine holds, named: the state directory's `audit` key and the
    fleet's secret (`$ANTIGRAVITY_FLEET_SECRET`, else the state directory's `fleet` key),
    those that exist (none is made here)."""
    from .state import FLEET_SECRET_ENV, fleet_secret, key_path, secret

    found: list[tuple[str, bytes]] = []
    if key_path("audit").exists():
        found.append((str(key_path("audit")), secret("audit", create=False)))
    fleet = fleet_secret(create=False)
    if fleet is not None:
        name = f"${FLEET_SECRET_ENV}" if os.environ.get(FLEET_SECRET_ENV) else key_path("fleet")
        found.append((str(name), fleet))
    return found


class _Keys:
    """The keys `verify` tries, made on first need (a log sealed with none needs none)."""

    def __init__(self, keys: bytes | Iterable[bytes] | None) -> None:
        self._given = keys
        self._keys: list[tuple[bytes, _Sealer]] | None = None
        self.names: list[str] = []

    def get(self) -> list[tuple[bytes, _Sealer]]:
        if self._keys is None:
            if self._given is None:
                named = default_keys()
            elif isinstance(self._given, bytes):
                named = [("the key given", self._given)]
            else:
                named = [(f"key #{n}", key) for n, key in enumerate(self._given, 1)]
            self.names = [name for name, _ in named]
            self._keys = [(_check_key(key, name), _Sealer(key)) for name, key in named]
        return self._keys


def verify(path: str | os.PathLike[str], key: bytes | Iterable[bytes] | None = None) -> ChainReport:
    """Check the chain of every session in the log at `path` (raises OSError when it
    cannot be read). Each line must be whole, carry its session (`sid`), number (`seq`),
    the previous line's seal (`prev`) and its own (`mac`: an HMAC over the line up to
    it, under one of the keys); each session must run from line 0 to its `end` line
    without a gap. So an edited line (its seal), a deleted, inserted or reordered one
    (`seq` and `prev`), a cut tail (a partial last line, or a session without its `end`)
    and a log rewritten and resealed without the key are found, with the line number
    where the chain breaks. Sessions of several agents may interleave in one file.

    `key`: the key, or keys, the log may be sealed with (each session with one); None:
    this machine's (`default_keys()`: the audit key and the fleet's secret). A session
    sealed with a plain hash (an older SDK) is reported as `UNKEYED`. A keyed line with
    no key to check it against is a `ConfigurationError`."""
    report = ChainReport()
    chains: dict[str, _Chain] = {}
    keys = _Keys(key)
    with open(path, "rb") as f:
        raw_lines = f.readlines()
    for number, raw in enumerate(raw_lines, 1):
        report.lines = number
        problem = _check_line(number, raw, chains, keys, report)
        if problem:
            report.problems.append((number, problem))
    for sid, chain in chains.items():
        if not chain.keyed:
            report.unkeyed += 1
            report.problems.append(
                (chain.first, f"session {sid} (from line {chain.first}) is {UNKEYED}")
            )
        if not chain.ended:
            report.problems.append(
                (
                    chain.last,
                    f"session {sid} (from line {chain.first}) stops at line {chain.last} "
                    "without its end line: its tail was cut, or its agent crashed or is "
                    "still running",
                )
            )
    report.sessions = len(chains)
    report.keys = keys.names
    report.problems.sort()
    return report


def _unseal(
    number: int, raw: bytes, sealed: re.Match[bytes], chain: _Chain | None, keys: _Keys
) -> tuple[bytes | None, str]:
    """(the key the line's MAC verifies with, "") or (None, what is wrong with its seal)."""
    content, digest = raw[: sealed.start()], sealed.group(2).decode()
    candidates = keys.get()
    if not candidates:
        raise ConfigurationError(
            f"line {number} is sealed with a key, and there is none to check it with (no "
            "audit key in the SDK's state directory, no fleet secret): give the key it "
            "was sealed with"
        )
    if chain is not None and chain.key is not None:
        candidates = [pair for pair in candidates if pair[0] == chain.key]
    for secret_key, sealer in candidates:
        if hmac.compare_digest(sealer.seal(content), digest):
            return secret_key, ""
    if chain is not None and chain.key is not None:
        return None, "its MAC does not match its content: the line was edited"
    return None, (
        "its MAC does not match its content under any key tried: the line was edited, "
        "or the log was sealed with another key"
    )


def _check_line(
    number: int, raw: bytes, chains: dict[str, _Chain], keys: _Keys, report: ChainReport
) -> str:
    """What is wrong with line `number` of the chain (and record it), or ""."""
    if not raw.endswith(b"\n"):
        return "the last line is partial: the file was cut here (or a write was cut short)"
    sealed = _SEAL.search(raw)
    if sealed is None:
        return "not a sealed line (no seal at its end): edited, inserted, or from an older SDK"
    digest = sealed.group(2).decode()
    keyed = sealed.group(1) == b"mac"
    try:
        entry = json.loads(raw)
        sid, seq, prev = str(entry["sid"]), entry["seq"], str(entry["prev"])
    except (ValueError, KeyError, TypeError):
        return "not a chained JSON line (no sid, seq or prev)"
    chain = chains.get(sid)
    used: bytes | None = None
    if keyed:
        report.keyed += 1
        used, wrong = _unseal(number, raw, sealed, chain, keys)
        if wrong:
            report.unverified += 1
            return wrong
    elif hashlib.sha256(raw[: sealed.start()]).hexdigest()[:_HASH_DIGITS] != digest:
        return "its hash does not match its content: the line was edited"
    if not isinstance(seq, int) or isinstance(seq, bool):
        return "its seq is not a number"
    problem = ""
    if chain is None:
        if seq != 0 or prev:
            problem = f"session {sid} starts at its line {seq}: the lines before were deleted"
        chain = chains[sid] = _Chain(
            first=number, last=number, seq=seq, hash=digest, keyed=keyed, key=used
        )
    else:
        if chain.ended:
            problem = f"a line of session {sid} after its end line (line {chain.last})"
        elif keyed != chain.keyed:
            problem = (
                f"sealed {'with' if keyed else 'without'} a key, in a session sealed "
                f"{'with' if chain.keyed else 'without'} one: the session was rewritten"
            )
        elif seq != chain.seq + 1:
            problem = (
                f"session {sid} goes from its line {chain.seq} (line {chain.last}) to "
                f"{seq}: lines were deleted, inserted or reordered"
            )
        elif prev != chain.hash:
            problem = (
                f"does not follow line {chain.last} of session {sid}: a line was replaced "
                "or reordered"
            )
        chain.last, chain.seq, chain.hash = number, seq, digest
        if chain.key is None:
            chain.key = used
    if entry.get("kind") == "end":
        chain.ended = True
    return problem


def read_entries(path: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], int]:
    """The log's entries, and how many lines could not be read (a truncated last line
    after a crash, or damage); raises OSError when the file cannot be read."""
    entries: list[dict[str, Any]] = []
    bad = 0
    with open(path, "rb") as f:
        for raw in f:
            if not raw.strip():
                continue
            try:
                entry = json.loads(raw)
            except ValueError:
                bad += 1
                continue
            if isinstance(entry, dict) and entry.get("kind") in _KINDS:
                entries.append(entry)
            else:
                bad += 1
    return entries, bad


@dataclass
class ToolStats:
    """One tool's decisions: counts, why denials happened, how long deciding took."""

    tool: str
    allowed: int = 0
    denied: int = 0
    asked: int = 0
    deny_reasons: Counter[str] = field(default_factory=Counter)
    latencies_us: list[float] = field(default_factory=list)

    def percentile(self, q: float) -> float:
        values = sorted(self.latencies_us)
        if not values:
            return 0.0
        if len(values) == 1:
            return values[0]
        return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


@dataclass
class AuditSummary:
    """What `summarize` makes of a log."""

    tools: dict[str, ToolStats]
    turns: list[dict[str, Any]]
    unreadable: int


def _deny_reason(entry: Mapping[str, Any]) -> str:
    by = entry.get("by")
    if by == "policy":
        return f"rule {entry.get('rule')}"
    if by == "hook":
        return f"hook {entry.get('hook')}"
    if by == "containment":
        return f"host {entry.get('host')} not allowed"
    return "sdk refusal"


def summarize(path: str | os.PathLike[str]) -> AuditSummary:
    """Per tool: allowed / denied / asked counts, the top deny reasons, decision latency;
    per turn: stop reason and usage. Lines that cannot be read are counted, not fatal."""
    entries, bad = read_entries(path)
    tools: dict[str, ToolStats] = {}
    turns: list[dict[str, Any]] = []
    for entry in entries:
        if entry["kind"] in ("session", "end"):
            continue
        if entry["kind"] == "turn":
            turns.append(entry)
            continue
        route = "(network)" if entry.get("route") == "network" else "(undescribed)"
        name = str(entry.get("tool") or route)
        stats = tools.setdefault(name, ToolStats(name))
        if entry.get("verdict") == "allow":
            stats.allowed += 1
        else:
            stats.denied += 1
            stats.deny_reasons[_deny_reason(entry)] += 1
        if entry.get("decision") == "ask_user":
            stats.asked += 1
        latency = entry.get("latency_us")
        if isinstance(latency, int | float):
            stats.latencies_us.append(float(latency))
    return AuditSummary(dict(sorted(tools.items())), turns, bad)


def _rows(summary: AuditSummary) -> tuple[list[list[str]], list[list[str]]]:
    tool_rows = []
    for stats in summary.tools.values():
        top = ", ".join(f"{reason} ({n})" for reason, n in stats.deny_reasons.most_common(3))
        tool_rows.append(
            [
                stats.tool,
                str(stats.allowed),
                str(stats.denied),
                str(stats.asked),
                f"{stats.percentile(50):.1f}",
                f"{stats.percentile(95):.1f}",
                top or "-",
            ]
        )
    turn_rows = []
    totals = [0, 0, 0]
    for turn in summary.turns:
        usage = turn.get("usage") or {}
        counts = [int(usage.get(k, 0) or 0) for k in ("prompt", "candidates", "total")]
        totals = [a + b for a, b in zip(totals, counts, strict=True)]
        turn_rows.append(
            [
                str(turn.get("conversation", ""))[:13],
                str(turn.get("turn", "")),
                str(turn.get("stop_reason", "")),
                str(turn.get("decisions", "")),
                *(str(c) for c in counts),
            ]
        )
    if turn_rows:
        count = f"{len(turn_rows)} turn{'' if len(turn_rows) == 1 else 's'}"
        turn_rows.append(["total", "", count, "", *(str(t) for t in totals)])
    return tool_rows, turn_rows


TOOL_COLUMNS: Final = ("tool", "allowed", "denied", "asked", "p50 µs", "p95 µs", "top deny reasons")
TURN_COLUMNS: Final = (
    "conversation",
    "turn",
    "stop reason",
    "decisions",
    "prompt tok",
    "output tok",
    "total tok",
)


def _plain(title: str, columns: Iterable[str], rows: list[list[str]], out: IO[str]) -> None:
    header = list(columns)
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    out.write(f"{title}\n")
    for row in [header, ["-" * w for w in widths], *rows]:
        out.write("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        out.write("\n")
    out.write("\n")


def render_summary(summary: AuditSummary, out: IO[str], *, plain: bool = False) -> None:
    """Print the two tables: with `rich` when it is importable (and not `plain`), else
    as aligned plain text."""
    tool_rows, turn_rows = _rows(summary)
    tables = [("Decisions by tool", TOOL_COLUMNS, tool_rows)]
    if turn_rows:
        tables.append(("Turns", TURN_COLUMNS, turn_rows))
    console: Any = None
    if not plain:
        try:
            from rich.console import Console
            from rich.table import Table
        except ImportError:
            pass
        else:
            console = Console(
                file=out, width=max(120, Console(file=out).width), markup=False, highlight=False
            )
    for title, columns, rows in tables:
        if console is None:
            _plain(title, columns, rows, out)
            continue
        table = Table(title=title, title_justify="left")
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*row)
        console.print(table)
