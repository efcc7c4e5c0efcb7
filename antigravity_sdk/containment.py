"""Containment: the kernel bounds what any allowed call can do (Linux, Landlock).

Policies judge each call the harness asks about; they cannot bound what an allowed call
does once it runs (an allowed `pytest` runs a `conftest.py` the model wrote). So the SDK
starts the harness inside a Landlock domain — applied by the supervisor to the forked
harness just before exec, inherited by every process it starts, irrevocable:

- write only in the workspaces, the harness's state (save and app-data dirs), a private
  temporary directory (the harness's `TMPDIR`), a few devices, and what the user adds;
- read and execute everything else but `/dev` and the user's credentials
  (`CREDENTIAL_PATHS`): Landlock only grants, so "all but `~/.ssh`" is computed at start as
  grants on the siblings along the path;
- connect over TCP only to the model endpoint's port, the HTTP MCP servers' ports and
  listed ports; bind only port 0 (the harness's own loopback server) and listed ports
  (ABI >= 4);
- no signals to, and no abstract-socket connections with, processes outside the agent
  (ABI >= 6).

The environment is a second channel for secrets: variables that look like credentials
are withheld from the harness (and so from every command) unless listed in `env`.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from .errors import ContainmentError
from .harness import confine

if TYPE_CHECKING:
    from .harness.config import ModelSettings
    from .types import McpServer

__all__ = [
    "CREDENTIAL_PATHS",
    "DEFAULT_CONTAINMENT",
    "Containment",
    "ContainmentInForce",
    "landlock_abi",
]

# Landlock filesystem rights (linux/landlock.h), as the supervisor applies them.
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1, 2, 4, 8
_MAKE_CHAR, _MAKE_BLOCK, _IOCTL_DEV = 1 << 6, 1 << 11, 1 << 15
_ALL_FS = (1 << 16) - 1
READ: Final = _EXECUTE | _READ_FILE | _READ_DIR
"""Read files, list directories, execute."""
WRITE: Final = _ALL_FS & ~(_MAKE_CHAR | _MAKE_BLOCK | _IOCTL_DEV)
"""Everything but making device nodes (a device node in the workspace would open a disk
past every rule) and device ioctls."""
_DEVICE_RW = _READ_FILE | _WRITE_FILE | (1 << 14)  # and truncate: `> /dev/null`
_TERMINAL = _DEVICE_RW | _IOCTL_DEV

CREDENTIAL_PATHS: Final[tuple[str, ...]] = (
    "~/.ssh",
    "~/.aws",
    "~/.azure",
    "~/.gnupg",
    "~/.password-store",
    "~/.config/gcloud",
    "~/.config/gh",
    "~/.config/hub",
    "~/.config/op",
    "~/.config/doctl",
    "~/.config/rclone",
    "~/.config/google-chrome",
    "~/.config/chromium",
    "~/.mozilla",
    "~/.local/share/keyrings",
    "~/.kube",
    "~/.docker",
    "~/.oci",
    "~/.terraform.d",
    "~/.vault-token",
    "~/.netrc",
    "~/.git-credentials",
    "~/.pypirc",
    "~/.npmrc",
    "~/.yarnrc",
    "~/.gem/credentials",
    "~/.cargo/credentials",
    "~/.cargo/credentials.toml",
    "~/.m2/settings.xml",
    "~/.pgpass",
    "~/.my.cnf",
    "~/.s3cfg",
    "~/.boto",
    "~/.bash_history",
    "~/.zsh_history",
    "~/.python_history",
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/ssl/private",
    "/etc/ssh/ssh_host_*_key",
)
"""Paths no contained process can read unless `Containment(read=...)` names them (`~` is
the user's home as the SDK's process sees it; a `*` matches at start)."""

_DEVICES: Final[Mapping[str, int]] = {
    "/dev": _READ_DIR,
    "/dev/null": _DEVICE_RW,
    "/dev/zero": _DEVICE_RW,
    "/dev/full": _DEVICE_RW,
    "/dev/random": _READ_FILE,
    "/dev/urandom": _READ_FILE,
    "/dev/tty": _TERMINAL,
    "/dev/ptmx": _TERMINAL,
    "/dev/pts": _TERMINAL | _READ_DIR,
}
"""What commands need of `/dev` (the rest of it, disks included, stays unreadable)."""

_SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|COOKIE|SESSION|AUTH|^AWS_|^AZURE_|^SSH_AUTH_SOCK$"
    r"|^GPG_AGENT_INFO$|^KUBECONFIG$",
    re.IGNORECASE,
)
"""Environment variables withheld from the harness: they name or hold credentials."""


def landlock_abi() -> int:
    """The Landlock ABI this kernel offers (0: none: not Linux, an old kernel, or the LSM
    left out at boot)."""
    return confine.landlock_abi()


def _port(value: object, *, allow_zero: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ContainmentError(f"Containment: port {value!r} is not an int")
    if not (0 if allow_zero else 1) <= value <= 65535:
        raise ContainmentError(f"Containment: port {value} is out of range")
    return value


def _paths(values: Iterable[str | os.PathLike[str]], what: str) -> tuple[Path, ...]:
    if isinstance(values, str | os.PathLike):
        raise ContainmentError(f"Containment: {what} takes a list of paths, not one path")
    return tuple(Path(os.path.expanduser(os.fspath(v))).resolve() for v in values)


@dataclass(frozen=True)
class Containment:
    """What the harness and everything it starts may do beyond the defaults.

    `read` and `write` add paths (a path in `read` is readable even if it is a default
    credential path); `connect` and `bind` add TCP ports; `hide` adds paths to keep
    unreadable; `env` names environment variables to pass to the harness although they
    look like credentials. `required=True` refuses to start an agent the kernel cannot
    contain (no Landlock, or a harness that is not spawned locally), naming the reason.
    """

    read: Sequence[str | os.PathLike[str]] = ()
    write: Sequence[str | os.PathLike[str]] = ()
    connect: Sequence[int] = ()
    bind: Sequence[int] = ()
    hide: Sequence[str | os.PathLike[str]] = ()
    env: Sequence[str] = ()
    required: bool = False

    def __post_init__(self) -> None:
        for name in ("read", "write", "hide"):
            object.__setattr__(self, name, _paths(getattr(self, name), name))
        object.__setattr__(self, "connect", tuple(_port(p) for p in self.connect))
        object.__setattr__(self, "bind", tuple(_port(p, allow_zero=True) for p in self.bind))
        if isinstance(self.env, str):
            raise ContainmentError("Containment: env takes a list of variable names")
        object.__setattr__(self, "env", tuple(self.env))
        if not isinstance(self.required, bool):
            raise ContainmentError("Containment: required must be a bool")


DEFAULT_CONTAINMENT: Final = Containment()
"""The defaults, nothing added: what an agent gets unless told otherwise."""


def endpoint_ports(*urls: str | None) -> tuple[int, ...]:
    """The TCP ports of these URLs (the scheme's default where none is given)."""
    ports = set()
    for url in urls:
        if not url:
            continue
        parts = urlsplit(url)
        try:
            port = parts.port
        except ValueError:
            continue
        ports.add(port or (80 if parts.scheme in ("http", "ws") else 443))
    return tuple(sorted(ports))


@dataclass(frozen=True)
class ContainmentInForce:
    """The containment an agent's harness runs in: what `Agent.containment`,
    `antigravity doctor`, the audit log and tracing report."""

    abi: int
    """The kernel's Landlock ABI."""
    write: tuple[Path, ...]
    """Writable (and readable) roots: workspaces, harness state, temp dir, added paths."""
    read: tuple[Path, ...]
    """Paths granted for reading on top of the defaults (a credential path among them is
    readable: named by the user, or the Vertex AI credentials the harness needs)."""
    hidden: tuple[Path, ...]
    """Credential paths no contained process can read (those that exist now)."""
    connect: tuple[int, ...]
    """TCP ports contained processes may connect to (any host)."""
    bind: tuple[int, ...]
    """TCP ports they may bind (0: any ephemeral port; the harness's server needs it)."""
    tmp_dir: Path
    """The private temporary directory, the harness's `TMPDIR`."""
    env_withheld: tuple[str, ...] = ()
    """Environment variables the harness does not get."""
    env_passed: tuple[str, ...] = field(default=(), repr=False)
    guarded: tuple[Path, ...] = field(default=(), repr=False)
    """Every credential path kept out of the grants, also those that do not exist yet
    (so one created while the agent runs is not readable either)."""
    private: tuple[str, ...] = ()
    """What the agent has of its own, from its start: "terminals" (a devpts: your other
    terminals are out of reach) and "System V IPC" (its own IPC namespace)."""
    filtered: bool = False
    """Whether the seccomp filter is in force, from its start: TCP Fast Open, MPTCP
    sockets, io_uring, the kernel keyring and keystroke injection refused."""

    def confined(self, bits: int) -> ContainmentInForce:
        """This, with what the supervisor reported putting in force (`confine.contain`)."""
        private = [
            name
            for bit, name in (
                (confine.CONTAINED_TERMINALS, "terminals"),
                (confine.CONTAINED_IPC, "System V IPC"),
            )
            if bits & bit
        ]
        return replace(self, private=tuple(private), filtered=bool(bits & confine.GUARDED))

    @property
    def listing_only(self) -> tuple[Path, ...]:
        """Writable roots that hold a credential path (a workspace that is your home
        directory): writable below, but no file can be made, renamed or removed directly
        in them, nor in any directory between them and the credential."""
        above = _ancestors(_hidden_set((*self.guarded, *self.hidden)))
        return tuple(p for p in self.write if str(p) in above)

    @property
    def enforced(self) -> tuple[str, ...]:
        """The parts this kernel enforces: "filesystem" (ABI >= 1), "network" (>= 4),
        "scope" (signals and abstract sockets, >= 6)."""
        parts = [("filesystem", 1), ("network", 4), ("scope", 6)]
        return tuple(name for name, abi in parts if self.abi >= abi)

    @property
    def not_enforced(self) -> tuple[str, ...]:
        """What this kernel's ABI cannot enforce, said for a person."""
        missing = []
        if self.abi < 3:
            missing.append("truncating files outside the writable roots (ABI 3)")
        if self.abi < 4:
            missing.append("TCP connect and bind rules (ABI 4)")
        if self.abi < 6:
            missing.append("signals and abstract sockets outside the agent (ABI 6)")
        if self.private and "terminals" not in self.private:
            missing.append("private terminals: commands can reach your other terminals")
        if self.private and "System V IPC" not in self.private:
            missing.append("private System V IPC")
        return tuple(missing)

    def describe(self) -> list[str]:
        """Lines for a person: doctor, chat and demo print them."""
        lines = [
            f"Landlock ABI {self.abi}: {', '.join(self.enforced)} enforced",
            "writable: " + ", ".join(map(str, self.write)),
            "readable: everything but /dev and the credentials below"
            + ("; also " + ", ".join(map(str, self.read)) if self.read else ""),
            "hidden: " + (", ".join(map(str, self.hidden)) or "(none of the default list exist)"),
            "connect: TCP ports " + (", ".join(map(str, self.connect)) or "(none)"),
        ]
        if self.private:
            lines.append("its own: " + ", ".join(self.private))
        if self.filtered:
            lines.append(
                "refused by a seccomp filter: TCP Fast Open, MPTCP, io_uring, the kernel "
                "keyring, keystroke injection"
            )
        if self.listing_only:
            lines.append(
                "holding credentials, so only listable at their top: "
                + ", ".join(map(str, self.listing_only))
            )
        if self.env_withheld:
            lines.append("environment withheld: " + ", ".join(self.env_withheld))
        lines.extend(f"not enforced by this kernel: {item}" for item in self.not_enforced)
        return lines

    def as_dict(self) -> dict[str, Any]:
        """Plain data for the audit log's session record and tracing attributes."""
        return {
            "abi": self.abi,
            "enforced": list(self.enforced),
            "write": [str(p) for p in self.write],
            "read": [str(p) for p in self.read],
            "hidden": [str(p) for p in self.hidden],
            "connect": list(self.connect),
            "bind": list(self.bind),
            "env_withheld": list(self.env_withheld),
            "private": list(self.private),
            "filtered": self.filtered,
        }

    def remove_tmp_dir(self) -> None:
        """Remove the private temp dir (the agent's `stop()`, after the harness and all it
        started are gone)."""
        shutil.rmtree(self.tmp_dir, ignore_errors=True)

    def supervisor_rules(self) -> list[str]:
        """The rules for `supervisor.py`, computed now (the siblings of every credential
        path as the file system has them at this moment)."""
        hidden = _hidden_set((*self.guarded, *self.hidden, Path("/dev")))
        grants: list[tuple[Path, int]] = [(Path("/"), READ)]
        grants += [(p, WRITE) for p in self.write]
        rules = [f"fs:{rights}:{path}" for path, rights in _split(grants, hidden)]
        rules += [f"fs:{rights}:{path}" for path, rights in _DEVICES.items()]
        rules += [f"fs:{READ}:{path}" for path in self.read]  # named: granted as is
        rules += [f"connect:{port}" for port in self.connect]
        rules += [f"bind:{port}" for port in self.bind]
        rules.append("scope")
        return rules

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """`env` as the harness gets it: credentials withheld, `TMPDIR` private."""
        kept = {k: v for k, v in env.items() if k in self.env_passed or not _is_secret(k)}
        kept["TMPDIR"] = str(self.tmp_dir)
        return kept


def _is_secret(name: str) -> bool:
    return _SECRET_NAME.search(name) is not None


def _hidden_set(hidden: Iterable[Path]) -> frozenset[str]:
    """Each credential path as given and as the kernel resolves it (a symlinked `~/.aws`
    hides its target too)."""
    return frozenset(p for h in hidden for p in (str(h), os.path.realpath(h)))


def _ancestors(paths: Iterable[str]) -> frozenset[str]:
    """Every strict ancestor directory of `paths`."""
    found = set()
    for path in paths:
        parent = os.path.dirname(path)
        while parent not in found and parent != path:
            found.add(parent)
            path, parent = parent, os.path.dirname(parent)
    return frozenset(found)


def _split(grants: list[tuple[Path, int]], hidden: frozenset[str]) -> list[tuple[str, int]]:
    """Grants that cover nothing in `hidden`: a grant on a strict ancestor of a hidden
    path becomes, recursively, grants on its entries but the one leading there (the
    directory itself keeps only listing). An entry that is a symlink is left out: the
    kernel judges a link by where it leads, which has grants of its own, or none."""
    above = _ancestors(hidden)
    out: list[tuple[str, int]] = []
    stack = [(str(path), rights) for path, rights in grants]
    while stack:
        path, rights = stack.pop()
        if path not in above:
            out.append((path, rights))
            continue
        if rights & _READ_DIR:
            out.append((path, _READ_DIR))
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.path in hidden or entry.is_symlink():
                continue  # a link is judged where it leads: a rule on it would grant that
            stack.append((entry.path, rights))
    return out


def _expand(patterns: Iterable[str], home: Path, *, existing: bool = True) -> list[Path]:
    """The default credential paths (`~` as `home`, `*` globbed), by default only those
    that exist now."""
    found = []
    for pattern in patterns:
        path = pattern.replace("~", str(home), 1) if pattern.startswith("~") else pattern
        if "*" in path:
            parent = Path(path).parent
            try:
                names = os.listdir(parent)
            except OSError:
                continue
            found += [parent / n for n in fnmatch.filter(names, Path(path).name)]
        elif not existing or os.path.lexists(path):
            found.append(Path(path))
    return found


def plan(
    spec: Containment,
    *,
    workspaces: Sequence[Path],
    state: Sequence[Path],
    tmp_dir: Path,
    ports: Sequence[int],
    abi: int,
    credentials: Sequence[Path] = (),
    env: Mapping[str, str] | None = None,
) -> ContainmentInForce:
    """What an agent's harness will run in; `credentials` are files the harness itself
    must read (Vertex AI's), readable by every command too."""
    home = Path(os.path.expanduser("~")).resolve()
    read = [Path(p) for p in spec.read]
    named = {*read, *credentials}

    def unnamed(paths: Iterable[Path]) -> list[Path]:
        return [p for p in paths if p not in named and p.resolve() not in named]

    hidden = unnamed([*_expand(CREDENTIAL_PATHS, home), *map(Path, spec.hide)])
    guarded = unnamed(_expand(CREDENTIAL_PATHS, home, existing=False))
    environ = os.environ if env is None else env
    passed = tuple(spec.env)
    return ContainmentInForce(
        abi=abi,
        write=tuple(dict.fromkeys([*workspaces, *state, tmp_dir, *map(Path, spec.write)])),
        read=tuple(dict.fromkeys([*read, *credentials])),
        hidden=tuple(sorted(set(hidden))),
        connect=tuple(sorted({*ports, *spec.connect})),
        bind=tuple(sorted({0, *spec.bind})),
        tmp_dir=tmp_dir,
        env_withheld=tuple(sorted(k for k in environ if _is_secret(k) and k not in passed)),
        env_passed=passed,
        guarded=tuple(guarded),
    )


def unavailable_reason(abi: int, *, local: bool) -> str:
    """Why this agent cannot be contained, or ""."""
    if not local:
        return "the harness is not spawned by this process (a remote or custom connection)"
    if sys.platform != "linux":
        return f"Landlock is a Linux feature; this is {sys.platform}"
    if abi < 1:
        return "this kernel offers no Landlock (too old, or the LSM is not enabled at boot)"
    return ""


def for_agent(
    spec: Containment,
    *,
    abi: int,
    workspaces: Sequence[Path],
    state: Sequence[Path],
    model: ModelSettings,
    mcp_servers: Sequence[McpServer],
) -> ContainmentInForce:
    """The containment for one agent's start: a fresh private temp dir, the model's and
    HTTP MCP servers' ports, and the credentials file Vertex AI needs when the harness
    must find it itself (then readable by every command too, and reported so). `state`
    are the save and app-data dirs as configured, resolved here: one reached through a
    symlink inside another writable root is refused (`ContainmentError`), since an
    earlier agent could have planted that link to point this one's grant elsewhere."""
    from .types import McpHttpServer

    endpoint = model.base_url or (model.options and model.options.endpoint_url) or "https://"
    urls = [endpoint, *(s.url for s in mcp_servers if isinstance(s, McpHttpServer))]
    credentials: list[Path] = []
    adc = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    if model.vertex is not None and not model.vertex.api_key and adc:
        credentials.append(Path(adc).resolve())
        spec = Containment(
            read=spec.read,
            write=spec.write,
            connect=spec.connect,
            bind=spec.bind,
            hide=spec.hide,
            env=(*spec.env, "GOOGLE_APPLICATION_CREDENTIALS"),
            required=spec.required,
        )
    roots = [p.resolve() for p in (*workspaces, *state)]
    for given in state:
        _check_not_redirected(given, roots)
    return plan(
        spec,
        workspaces=[p.resolve() for p in workspaces],
        state=[p.resolve() for p in state],
        tmp_dir=Path(tempfile.mkdtemp(prefix="antigravity-agent-")),
        ports=endpoint_ports(*urls),
        abi=abi,
        credentials=credentials,
    )


def _check_not_redirected(given: Path, roots: Sequence[Path]) -> None:
    """Refuse `given` if a symlink on its way lies inside one of the writable `roots`."""
    path = Path(os.path.abspath(given))
    walked = Path(path.anchor)
    for part in path.parts[1:]:
        walked = walked / part
        if not walked.is_symlink():
            continue
        where = Path(os.path.realpath(walked.parent)) / walked.name
        for root in roots:
            if where != root and root in where.parents:
                raise ContainmentError(
                    f"{given} leads through the symlink {where}, which lies inside the "
                    f"writable {root}: a contained command may have made it, to point this "
                    "agent's writable directory elsewhere. Remove the link, or configure "
                    "the directory's real path"
                )
        walked = Path(os.path.realpath(walked))


def trace_attributes(contained: ContainmentInForce | None) -> dict[str, Any]:
    """The turn spans' attributes that say what the harness runs in."""
    if contained is None:
        return {"antigravity.containment": "off"}
    return {
        "antigravity.containment": "landlock",
        "antigravity.containment.abi": contained.abi,
        "antigravity.containment.enforced": list(contained.enforced),
        "antigravity.containment.write": [str(p) for p in contained.write],
        "antigravity.containment.hidden": [str(p) for p in contained.hidden],
        "antigravity.containment.connect": list(contained.connect),
    }
