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

Around the Landlock domain the supervisor builds the agent's own view of the machine
(`harness/confine.py`): every mount read-only but the writable roots (so `chmod`, `chown`,
`utime` and `setxattr` fail outside them too), paths that make programs run code later
read-only inside them (`PROTECTED_NAMES`, the SDK's own files), Unix sockets outside its
directories masked, its own PID, UTS and network namespaces, no capabilities. Its only
way out is the SDK's egress proxy (`egress.py`): by host name, not by port; the model
credential never enters the domain.

The environment is a second channel for secrets: the harness gets `CORE_ENV` and the
names listed in `env`, nothing else.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import os
import shutil
import socket
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
    "CORE_ENV",
    "CREDENTIAL_PATHS",
    "DEFAULT_CONTAINMENT",
    "PROTECTED_NAMES",
    "Containment",
    "ContainmentInForce",
    "Upstream",
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

CORE_ENV: Final[frozenset[str]] = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "USERNAME", "SHELL", "LANG", "LANGUAGE",
        "TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "TZ", "COLUMNS",
        "LINES", "EDITOR", "VISUAL", "PAGER", "VIRTUAL_ENV", "PYTHONIOENCODING",
        "PYTHONUTF8", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "AWS_CA_BUNDLE", "GIT_SSL_CAINFO",
        "PIP_CERT",
    }
)  # fmt: skip
"""Environment variables the harness (and so every command) gets, with `LC_*`: the
locale, the terminal, the search path and CA bundles. Anything else, a credential by any
name included, is passed only when `Containment(env=[...])` names it."""

PROTECTED_NAMES: Final[tuple[str, ...]] = (
    ".git/hooks",
    ".git/config",
    ".gitmodules",
    ".vscode",
    ".idea",
    ".envrc",
    ".mcp.json",
    ".husky",
    ".githooks",
    "lefthook.yml",
    ".pre-commit-config.yaml",
    ".yarnrc.yml",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".bash_aliases",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".vimrc",
    ".gitconfig",
    ".config/git",
    ".config/fish",
    ".config/nvim",
    ".config/autostart",
    ".config/systemd/user",
    ".config/environment.d",
)
"""Paths below each workspace (and each `Containment(write=...)` root) kept read-only:
what git, an editor, a shell or the desktop runs later, outside the agent, without
asking. Those that exist when the agent starts are held; `.git/hooks` and `.git/config`
stand for everything in a repository that leads git to run code (`_repositories`: also
`commondir`, worktrees', submodules' and `core.hooksPath`'s), in the repositories at each
root and one level below. `Containment(unprotect=[...])` gives a name up, and says so."""

_GIT_GIVEN_UP: Final = {".git/hooks": "hooks", ".git/config": "config"}

_PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy")
_NO_PROXY = "localhost,127.0.0.1,::1"
_DIAL_SOCKETS = 4  # the SDK's WebSocket to the harness: attempts inside the agent's network


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


def _host(value: object) -> str:
    from .egress import check_host_pattern

    if not isinstance(value, str):
        raise ContainmentError(f"Containment: host {value!r} is not a string")
    try:
        return check_host_pattern(value)
    except ValueError as exc:
        raise ContainmentError(f"Containment: hosts: {exc}") from None


def _paths(values: Iterable[str | os.PathLike[str]], what: str) -> tuple[Path, ...]:
    if isinstance(values, str | os.PathLike):
        raise ContainmentError(f"Containment: {what} takes a list of paths, not one path")
    return tuple(Path(os.path.expanduser(os.fspath(v))).resolve() for v in values)


@dataclass(frozen=True)
class Containment:
    """What the harness and everything it starts may do beyond the defaults.

    `read` and `write` add paths (a path in `read` is readable even if it is a default
    credential path); `connect` and `bind` add TCP ports on the agent's own loopback;
    `hide` adds paths to keep unreadable; `env` names environment variables to pass to
    the harness beyond `CORE_ENV`. `hosts` adds hosts the egress proxy lets through
    (`"pypi.org"`, `"*.github.com"`: its subdomains; a loopback or private address only
    when named exactly); `sockets` names Unix sockets outside the agent's directories
    that stay reachable; `protect` adds paths kept read-only inside the writable roots
    and `unprotect` gives up names of `PROTECTED_NAMES`. `required=True` refuses to
    start an agent the kernel cannot contain (no Landlock, or a harness that is not
    spawned locally), naming the reason.
    """

    read: Sequence[str | os.PathLike[str]] = ()
    write: Sequence[str | os.PathLike[str]] = ()
    connect: Sequence[int] = ()
    bind: Sequence[int] = ()
    hide: Sequence[str | os.PathLike[str]] = ()
    env: Sequence[str] = ()
    required: bool = False
    hosts: Sequence[str] = ()
    sockets: Sequence[str | os.PathLike[str]] = ()
    protect: Sequence[str | os.PathLike[str]] = ()
    unprotect: Sequence[str] = ()

    def __post_init__(self) -> None:
        for name in ("read", "write", "hide", "sockets", "protect"):
            object.__setattr__(self, name, _paths(getattr(self, name), name))
        object.__setattr__(self, "connect", tuple(_port(p) for p in self.connect))
        object.__setattr__(self, "bind", tuple(_port(p, allow_zero=True) for p in self.bind))
        for name in ("env", "hosts", "unprotect"):
            if isinstance(getattr(self, name), str):
                raise ContainmentError(f"Containment: {name} takes a list of strings")
        object.__setattr__(self, "env", tuple(self.env))
        object.__setattr__(self, "hosts", tuple(_host(h) for h in self.hosts))
        unknown = [n for n in self.unprotect if n not in PROTECTED_NAMES]
        if unknown:
            raise ContainmentError(
                f"Containment: unprotect names {unknown[0]!r}, which is not protected by "
                f"default (PROTECTED_NAMES: {', '.join(PROTECTED_NAMES)})"
            )
        object.__setattr__(self, "unprotect", tuple(self.unprotect))
        if not isinstance(self.required, bool):
            raise ContainmentError("Containment: required must be a bool")


DEFAULT_CONTAINMENT: Final = Containment()
"""The defaults, nothing added: what an agent gets unless told otherwise."""


@dataclass(frozen=True)
class Upstream:
    """A port on the agent's loopback that the SDK serves as a reverse proxy to `target`
    (the model's endpoint, an HTTP MCP server), adding `headers` (the credential, which
    so never enters the agent)."""

    port: int
    target: str
    """Where requests go: an origin, with a path prefix if the endpoint has one."""
    what: str
    """"model", or "mcp:NAME"."""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    @property
    def spliced(self) -> bool:
        """Served as a splice (bytes as they are, on the endpoint's own port, so even its
        `Host` header holds): a plain-HTTP endpoint on this machine with no credential to
        add. Else a reverse proxy that adds `headers` (`egress.ReverseProxy`)."""
        parts = urlsplit(self.target)
        return not self.headers and parts.scheme == "http" and _loopback(parts.hostname)

    @property
    def address(self) -> tuple[str, int]:
        """The endpoint's host and port (a splice connects there)."""
        parts = urlsplit(self.target)
        return parts.hostname or "127.0.0.1", parts.port or 80

    @property
    def scope(self) -> str:
        """The endpoint's path: the only requests the SDK sends on, with its credential."""
        return urlsplit(self.target).path.rstrip("/") or "/"

    @property
    def origin(self) -> str:
        """Where the SDK sends what arrives on the port (the path is the request's own)."""
        parts = urlsplit(self.target)
        return f"{parts.scheme}://{parts.netloc}"

    @property
    def url(self) -> str:
        """The endpoint as the harness is told it: this port on its own loopback."""
        path = urlsplit(self.target).path.rstrip("/")
        return f"http://127.0.0.1:{self.port}{path}"


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
    """TCP ports contained processes may connect to: on the agent's own loopback when it
    has its own network (the egress proxy's, the upstreams', listed ones)."""
    bind: tuple[int, ...]
    """TCP ports they may bind (0: any ephemeral port; the harness's server needs it)."""
    tmp_dir: Path
    """The private temporary directory, the harness's `TMPDIR`."""
    env_withheld: tuple[str, ...] = ()
    """Environment variables of the SDK's process the harness does not get."""
    env_passed: tuple[str, ...] = field(default=(), repr=False)
    """Names passed beyond `CORE_ENV` (`Containment(env=...)`)."""
    guarded: tuple[Path, ...] = field(default=(), repr=False)
    """Every credential path kept out of the grants, also those that do not exist yet
    (so one created while the agent runs is not readable either)."""
    private: tuple[str, ...] = ()
    """What the agent has of its own, from its start: "terminals" (a devpts), "System V
    IPC", "network" (only loopback: its way out is the egress proxy), "processes" (a PID
    namespace and /proc: nothing outside it is visible), "hostname", "/dev/shm"."""
    filtered: bool = False
    """Whether the seccomp filter is in force, from its start: TCP Fast Open, MPTCP
    sockets, io_uring, the kernel keyring, keystroke injection, ptrace and other
    processes' memory refused."""
    readonly: bool = False
    """Whether everything outside the writable roots is a read-only mount (metadata
    included: chmod, chown, utime, setxattr), from its start."""
    capabilities_dropped: bool = False
    """Whether the harness runs with no capabilities at all (root's included)."""
    harness_memory_private: bool = False
    """Whether the harness runs from an execute-only binary, so the kernel keeps its memory
    (/proc/PID/mem, maps, environ) from the commands it runs."""
    reported: bool = field(default=False, repr=False)
    """Whether the supervisor has said what it put in force (`confined`)."""
    hosts: tuple[str, ...] = ()
    """Hosts the egress proxy lets through (patterns as `Containment(hosts=...)`)."""
    proxy_port: int = 0
    """The egress proxy's port on the agent's loopback (`HTTPS_PROXY`); 0: none."""
    upstreams: tuple[Upstream, ...] = ()
    """The model's and HTTP MCP servers' endpoints as the harness reaches them."""
    protected: tuple[Path, ...] = ()
    """Paths inside the writable roots held read-only (`PROTECTED_NAMES`, the SDK's own
    files, `Containment(protect=...)`), and the directories on their way, which cannot
    be renamed or removed."""
    absent: tuple[Path, ...] = field(default=(), repr=False)
    """Protected names that did not exist at start (checked again at stop)."""
    unprotected: tuple[str, ...] = ()
    """Names of `PROTECTED_NAMES` given up (`Containment(unprotect=...)`)."""
    sockets: tuple[Path, ...] = ()
    """Unix sockets outside the agent's directories left reachable (named)."""
    masked: tuple[Path, ...] = field(default=(), repr=False)
    """Unix sockets outside the agent's directories made unreachable (bound at start)."""
    forwarded: tuple[int, ...] = ()
    """Ports of the agent's loopback forwarded to this machine's (`Containment(connect=
    ...)`: a database the agent's tests use, say), when it has a network of its own."""

    @property
    def listening(self) -> tuple[int, ...]:
        """The ports the SDK serves on the agent's loopback, in the supervisor's order:
        the egress proxy, the upstreams, the forwarded ports."""
        proxy = (self.proxy_port,) if self.proxy_port else ()
        return (*proxy, *(u.port for u in self.upstreams), *self.forwarded)

    def confined(self, bits: int) -> ContainmentInForce:
        """This, with what the supervisor reported putting in force (`confine.contain`)."""
        private = [
            name
            for bit, name in (
                (confine.CONTAINED_TERMINALS, "terminals"),
                (confine.CONTAINED_IPC, "System V IPC"),
                (confine.NETWORK, "network"),
                (confine.PROCESSES, "processes"),
                (confine.HOSTNAME, "hostname"),
                (confine.SHM, "/dev/shm"),
            )
            if bits & bit
        ]
        return replace(
            self,
            private=tuple(private),
            filtered=bool(bits & confine.GUARDED),
            readonly=bool(bits & confine.READONLY),
            capabilities_dropped=bool(bits & confine.NO_CAPABILITIES),
            reported=True,
        )

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
        """What this kernel's ABI or this machine cannot enforce, said for a person."""
        missing = []
        if self.abi < 3:
            missing.append("truncating files outside the writable roots (ABI 3)")
        if self.abi < 4:
            missing.append("TCP connect and bind rules (ABI 4)")
        if self.abi < 6:
            missing.append("signals and abstract sockets outside the agent (ABI 6)")
        if self.reported:
            for name, meaning in (
                ("terminals", "private terminals: commands can reach your other terminals"),
                ("System V IPC", "private System V IPC"),
                ("network", "a network of its own: TCP is bounded by port, not by host"),
                ("processes", "a PID namespace: processes outside the agent are visible"),
                ("hostname", "a hostname of its own"),
            ):
                if name not in self.private:
                    missing.append(meaning)
            if not self.readonly:
                missing.append("read-only mounts: metadata outside the roots can change")
            if not self.harness_memory_private:
                missing.append(
                    "the harness's memory is readable by its commands (its binary is "
                    "readable and could not be copied execute-only)"
                )
        return tuple(missing)

    def describe(self) -> list[str]:
        """Lines for a person: doctor, chat and demo print them."""
        lines = [
            f"Landlock ABI {self.abi}: {', '.join(self.enforced)} enforced",
            "writable: " + ", ".join(map(str, self.write)),
            "readable: everything but /dev and the credentials below"
            + ("; also " + ", ".join(map(str, self.read)) if self.read else ""),
            "hidden: " + (", ".join(map(str, self.hidden)) or "(none of the default list exist)"),
        ]
        if self.proxy_port or self.hosts:
            lines.append(
                "network: only through the SDK's egress proxy, to "
                + (", ".join(self.hosts) or "no host")
                + (" (the model and MCP endpoints through the SDK, which holds their keys)")
            )
        lines.append("connect: TCP ports " + (", ".join(map(str, self.connect)) or "(none)"))
        if self.forwarded:
            lines.append(
                "forwarded to this machine's loopback: ports " + ", ".join(map(str, self.forwarded))
            )
        if self.readonly or not self.reported:
            lines.append("read-only: every mount outside the writable roots")
        if self.protected:
            lines.append("read-only inside the roots: " + ", ".join(map(str, self.protected)))
        if self.unprotected:
            lines.append("given up (unprotect): " + ", ".join(self.unprotected))
        lines.append(
            f"Unix sockets outside the agent: {len(self.masked)} unreachable"
            + ("; reachable: " + ", ".join(map(str, self.sockets)) if self.sockets else "")
        )
        if self.private:
            lines.append("its own: " + ", ".join(self.private))
        if self.capabilities_dropped:
            lines.append("capabilities: none (root's included)")
        if self.harness_memory_private:
            lines.append("the harness's memory: out of its commands' reach (execute-only binary)")
        if self.filtered:
            lines.append(
                "refused by a seccomp filter: TCP Fast Open, MPTCP, io_uring, the kernel "
                "keyring, keystroke injection, ptrace, other processes' memory"
            )
        if self.listing_only:
            lines.append(
                "holding credentials, so only listable at their top: "
                + ", ".join(map(str, self.listing_only))
            )
        lines.append(
            "environment: the core set"
            + (" and " + ", ".join(self.env_passed) if self.env_passed else "")
            + (f"; {len(self.env_withheld)} other variables withheld" if self.env_withheld else "")
        )
        lines.extend(f"not enforced here: {item}" for item in self.not_enforced)
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
            "hosts": list(self.hosts),
            "upstreams": [{"what": u.what, "target": u.target} for u in self.upstreams],
            "protected": [str(p) for p in self.protected],
            "unprotected": list(self.unprotected),
            "sockets": [str(p) for p in self.sockets],
            "masked_sockets": len(self.masked),
            "env_withheld": list(self.env_withheld),
            "env_passed": list(self.env_passed),
            "private": list(self.private),
            "filtered": self.filtered,
            "readonly": self.readonly,
            "capabilities_dropped": self.capabilities_dropped,
            "harness_memory_private": self.harness_memory_private,
        }

    def remove_tmp_dir(self) -> None:
        """Remove the private temp dir (the agent's `stop()`, after the harness and all it
        started are gone)."""
        shutil.rmtree(self.tmp_dir, ignore_errors=True)

    def planted(self) -> tuple[Path, ...]:
        """Protected names absent at start that exist now: made by the agent, and not
        held (a read-only mount needs something to hold)."""
        return tuple(p for p in self.absent if os.path.lexists(p))

    def supervisor_rules(self) -> list[str]:
        """The rules for `supervisor.py`, computed now (the siblings of every credential
        path as the file system has them at this moment). `connection.py` adds the
        channel the sockets come back on."""
        hidden = _hidden_set((*self.guarded, *self.hidden, Path("/dev")))
        grants: list[tuple[Path, int]] = [(Path("/"), READ)]
        grants += [(p, WRITE) for p in self.write]
        rules = [f"fs:{rights}:{path}" for path, rights in _split(grants, hidden)]
        rules += [f"fs:{rights}:{path}" for path, rights in _DEVICES.items()]
        rules += [f"fs:{READ}:{path}" for path in self.read]  # named: granted as is
        rules += [f"connect:{port}" for port in self.connect]
        rules += [f"bind:{port}" for port in self.bind]
        rules += ["scope", "readonly", "shm", "pid", "uts", "caps", "net"]
        rules += [f"rw:{path}" for path in self.write]
        rules += [f"rw:{path}" for path in _pinned(self.protected, self.write)]
        rules += [f"protect:{path}" for path in self.protected]
        rules += [f"mask:{path}" for path in self.masked]
        rules += [f"listen:{port}" for port in self.listening]
        rules.append(f"dial:{_DIAL_SOCKETS}")
        return rules

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """`env` as the harness gets it: `CORE_ENV`, `LC_*` and the names passed, the
        private `TMPDIR`, and the egress proxy for every command."""
        kept = {k: v for k, v in env.items() if _passed(k, self.env_passed)}
        kept["TMPDIR"] = str(self.tmp_dir)
        if self.proxy_port:
            proxy = f"http://127.0.0.1:{self.proxy_port}"
            kept.update(dict.fromkeys(_PROXY_ENV, proxy))
            kept["NO_PROXY"] = kept["no_proxy"] = _NO_PROXY
        return kept


def _passed(name: str, passed: Iterable[str]) -> bool:
    return name in CORE_ENV or name.startswith("LC_") or name in passed


def _pinned(protected: Iterable[Path], roots: Sequence[Path]) -> list[Path]:
    """The directories between each protected path and its writable root: bound onto
    themselves, they are mount points, which cannot be renamed or removed (else moving
    `.git` aside and making a new one would plant hooks past a protected `.git/hooks`)."""
    pinned: dict[Path, None] = {}
    for path in protected:
        root = next((r for r in roots if r in path.parents), None)
        if root is None:
            continue
        for parent in reversed(path.parents):
            if parent != root and root in parent.parents:
                pinned[parent] = None
    return list(pinned)


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
    abi: int,
    credentials: Sequence[Path] = (),
    env: Mapping[str, str] | None = None,
    controls: Sequence[Path] = (),
    hosts: Sequence[str] = (),
    proxy_port: int = 0,
    upstreams: Sequence[Upstream] = (),
    sockets: Sequence[Path] | None = None,
) -> ContainmentInForce:
    """What an agent's harness will run in; `credentials` are files the harness itself
    must read (Vertex AI's), readable by every command too; `controls` are the SDK's own
    files (audit log, policy files, hook modules), held read-only where they lie inside
    a writable root; `sockets` are the Unix sockets bound on this machine (read from
    /proc/net/unix when None)."""
    home = Path(os.path.expanduser("~")).resolve()
    read = [Path(p) for p in spec.read]
    named = {*read, *credentials}

    def unnamed(paths: Iterable[Path]) -> list[Path]:
        return [p for p in paths if p not in named and p.resolve() not in named]

    patterns = (*CREDENTIAL_PATHS, *_sdk_state())
    hidden = unnamed([*_expand(patterns, home), *map(Path, spec.hide)])
    guarded = unnamed(_expand(patterns, home, existing=False))
    environ = os.environ if env is None else env
    passed = tuple(spec.env)
    write = tuple(dict.fromkeys([*workspaces, *state, tmp_dir, *map(Path, spec.write)]))
    protected, absent = _protected(spec, [*workspaces, *map(Path, spec.write)], write, controls)
    named_sockets = tuple(Path(p) for p in spec.sockets)
    bound = _bound_sockets() if sockets is None else sockets
    hidden_set = _hidden_set(hidden)
    masked = [
        p
        for p in dict.fromkeys(bound)
        if p not in named_sockets
        and (not _inside(p, write) or any(str(a) in hidden_set for a in (p, *p.parents)))
    ]
    loopback = {proxy_port} - {0} | {u.port for u in upstreams}
    return ContainmentInForce(
        abi=abi,
        write=write,
        read=tuple(dict.fromkeys([*read, *credentials])),
        hidden=tuple(sorted(set(hidden))),
        connect=tuple(sorted({*spec.connect, *loopback})),
        bind=tuple(sorted({0, *spec.bind})),
        tmp_dir=tmp_dir,
        env_withheld=tuple(sorted(k for k in environ if not _passed(k, passed))),
        env_passed=passed,
        guarded=tuple(guarded),
        hosts=tuple(dict.fromkeys([*hosts, *spec.hosts])),
        proxy_port=proxy_port,
        upstreams=tuple(upstreams),
        protected=protected,
        absent=absent,
        unprotected=tuple(spec.unprotect),
        sockets=named_sockets,
        masked=tuple(masked),
        forwarded=tuple(sorted(set(spec.connect))) if proxy_port else (),
    )


def _sdk_state() -> tuple[str, ...]:
    """The SDK's own state (its keys, the embedded fleet): hidden like a credential."""
    from .state import protected_state

    return tuple(str(p) for p in protected_state())


def _inside(path: Path, roots: Iterable[Path]) -> Path | None:
    """The first of `roots` that is `path` or holds it."""
    return next((r for r in roots if r == path or r in path.parents), None)


def _protected(
    spec: Containment, named_roots: Sequence[Path], write: Sequence[Path], controls: Sequence[Path]
) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """The paths to hold read-only inside the writable roots, and the default names
    absent at start. A protected path reached through a symlink inside a writable root
    is refused: the link could be swapped for a directory of the agent's own."""
    from ._repositories import repository_paths

    wanted: list[Path] = []
    absent: list[Path] = []
    names = [n for n in PROTECTED_NAMES if n not in spec.unprotect]
    given_up = {_GIT_GIVEN_UP[n] for n in spec.unprotect if n in _GIT_GIVEN_UP}
    for root in named_roots:
        for path in [root / n for n in names]:
            (wanted if os.path.lexists(path) else absent).append(path)
        if not os.path.lexists(root / ".git"):
            absent.append(root / ".git")  # a repository made now would run its config later
        wanted += [
            path
            for path in repository_paths(root)
            if os.path.lexists(path) and not given_up & {path.name, path.parent.name}
        ]
    for named in map(Path, spec.protect):
        if not os.path.lexists(named):
            raise ContainmentError(
                f"Containment: protect names {named}, which does not exist: a read-only "
                "mount needs something to hold"
            )
        wanted.append(named)
    wanted += [p for p in controls if os.path.lexists(p)]
    held: dict[Path, None] = {}
    for path in wanted:
        absolute = Path(os.path.abspath(path))
        inside = _inside(absolute, write)
        if inside is None:
            continue  # outside every writable root: read-only already
        _refuse_links(absolute, inside)
        held[absolute] = None
    return tuple(held), tuple(absent)


def _refuse_links(path: Path, root: Path) -> None:
    walked = root
    for part in path.relative_to(root).parts:
        walked = walked / part
        if walked.is_symlink():
            raise ContainmentError(
                f"{walked} is a symlink inside the writable {root}, on the way to {path}, "
                "which the containment holds read-only: the link could be swapped for a "
                "directory of the agent's own. Replace it with what it points to, or give "
                "the name up with Containment(unprotect=[...])"
            )


def _bound_sockets() -> list[Path]:
    """Every pathname Unix socket bound on this machine, from `/proc/PID/net/unix` of one
    process of each network namespace this process can see (a containerised database's
    too; abstract ones, `@…`, are Landlock's to scope)."""
    seen: set[str] = set()
    found: list[Path] = []
    for name in ["self", *(n for n in os.listdir("/proc") if n.isdigit())]:
        try:
            namespace = os.readlink(f"/proc/{name}/ns/net")
        except OSError:
            continue
        if namespace in seen:
            continue
        seen.add(namespace)
        try:
            with open(f"/proc/{name}/net/unix", encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split(None, 7)
            if len(fields) == 8 and fields[7].startswith("/"):
                found.append(Path(fields[7]))
    return found


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
    controls: Sequence[Path] = (),
) -> ContainmentInForce:
    """The containment for one agent's start: a fresh private temp dir, the egress proxy
    and the model's and HTTP MCP servers' endpoints on the agent's loopback (`Upstream`),
    their hosts allowed, and the credentials file Vertex AI needs when the harness must
    find it itself (then readable by every command too, and reported so). `state` are the
    save and app-data dirs as configured, resolved here: one reached through a symlink
    inside another writable root is refused (`ContainmentError`), since an earlier agent
    could have planted that link to point this one's grant elsewhere. A repository's
    missing `.git/hooks` is made (empty) so that it can be held read-only."""
    credentials: list[Path] = []
    adc = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    if model.vertex is not None and not model.vertex.api_key and adc:
        credentials.append(Path(adc).resolve())
        spec = replace(spec, env=(*spec.env, "GOOGLE_APPLICATION_CREDENTIALS"))
    roots = [p.resolve() for p in (*workspaces, *state)]
    for given in state:
        _check_not_redirected(given, roots)
    resolved = [p.resolve() for p in workspaces]
    if not {".git/hooks", ".git/config"} & set(spec.unprotect):
        from ._repositories import prepare

        for root in (*resolved, *map(Path, spec.write)):
            prepare(root)
    ports = _free_ports(1 + len(mcp_servers) + 1)
    upstreams, hosts = _upstreams(model, mcp_servers, ports[1:])
    return plan(
        spec,
        workspaces=resolved,
        state=[p.resolve() for p in state],
        tmp_dir=Path(tempfile.mkdtemp(prefix="antigravity-agent-")),
        abi=abi,
        credentials=credentials,
        controls=controls,
        hosts=hosts,
        proxy_port=ports[0],
        upstreams=upstreams,
    )


_GEMINI_API = "https://generativelanguage.googleapis.com"
_VERTEX_EXPRESS = "https://aiplatform.googleapis.com"
_VERTEX_HOSTS = ("aiplatform.googleapis.com", "oauth2.googleapis.com", "sts.googleapis.com")
_KEY_HELD = "held-by-the-antigravity-sdk"
"""What the harness gets as the Gemini API key: the SDK's proxy adds the real one."""


def _upstreams(
    model: ModelSettings, mcp_servers: Sequence[McpServer], ports: Sequence[int]
) -> tuple[list[Upstream], list[str]]:
    """The endpoints the SDK serves on the agent's loopback, and the hosts the harness
    must reach itself through the egress proxy (Vertex AI's, which it signs for): an
    endpoint the SDK serves is not allowed through the proxy too (an MCP server's host
    would be open on every port)."""
    from .types import McpHttpServer

    upstreams: list[Upstream] = []
    free = iter(ports)

    def served(target: str, what: str, headers: Mapping[str, str] | None = None) -> Upstream:
        """On the endpoint's own port where it is spliced (its `Host` unchanged), else on
        a free one."""
        upstream = Upstream(0, target, what, dict(headers or {}))
        port = upstream.address[1]
        taken = {u.port for u in upstreams}
        if upstream.spliced and port not in taken:
            return replace(upstream, port=port)
        return replace(upstream, port=next(free))

    options = model.options
    extra = dict(options.headers) if options else {}
    endpoint = options.endpoint_url if options else None
    hosts: list[str] = []
    if model.vertex is not None and not (model.vertex.api_key or endpoint):
        # The harness signs its own requests (Application Default Credentials): through
        # the proxy, to Vertex AI's hosts.
        location = model.vertex.location or "us-central1"
        hosts = [f"{location}-aiplatform.googleapis.com", *_VERTEX_HOSTS]
    elif model.vertex is not None:  # express mode (a key: the SDK adds it), or your own
        if model.vertex.api_key:
            extra["x-goog-api-key"] = model.vertex.api_key
        upstreams.append(served(endpoint or _VERTEX_EXPRESS, "model", extra))
    elif model.base_url is not None:
        upstreams.append(served(model.base_url, "model"))
    else:
        key = {"x-goog-api-key": model.api_key or ""}
        upstreams.append(served(endpoint or _GEMINI_API, "model", {**extra, **key}))
    for server in mcp_servers:
        if isinstance(server, McpHttpServer):
            upstreams.append(served(server.url, f"mcp:{server.name}", server.headers))
    return upstreams, hosts


def _loopback(host: str | None) -> bool:
    if not host:
        return False
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports free on this machine's loopback now: the egress
    proxy's and the upstreams' (inside the agent's own network any port is free; these
    are also the ports the SDK binds itself where the agent cannot have its own)."""
    held = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.append(sock)
            sock.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in held]
    finally:
        for sock in held:
            sock.close()


def harness_endpoints(
    model: ModelSettings, mcp_servers: Sequence[McpServer], contained: ContainmentInForce | None
) -> tuple[ModelSettings, tuple[McpServer, ...]]:
    """The model and MCP servers as the harness is told them: through their `Upstream`
    on its loopback, with no credential (the SDK's proxy adds it)."""
    from .types import McpHttpServer

    if contained is None or not contained.upstreams:
        return model, tuple(mcp_servers)
    by_what = {u.what: u for u in contained.upstreams}
    served = by_what.get("model")
    if served is not None and model.base_url is not None:
        model = replace(model, base_url=served.url)
    elif served is not None:
        from .models import GeminiOptions

        options = replace(model.options or GeminiOptions(), endpoint_url=served.url, headers={})
        model = replace(model, options=options)
        if model.vertex is not None and model.vertex.api_key:
            model = replace(model, vertex=replace(model.vertex, api_key=_KEY_HELD))
        elif model.vertex is None:
            model = replace(model, api_key=_KEY_HELD)
    servers = []
    for server in mcp_servers:
        upstream = by_what.get(f"mcp:{server.name}")
        if isinstance(server, McpHttpServer) and upstream is not None:
            server = server.model_copy(update={"url": upstream.url, "headers": {}})
        servers.append(server)
    return model, tuple(servers)


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
