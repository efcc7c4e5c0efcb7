"""Confine a process and all it will start, before it execs the harness (Linux).

`contain(plan)` runs in the supervisor's forked child (its pid namespace, when asked for,
was made by the supervisor: `namespaces.unshare_pid`), in this order:

1. **Namespaces** (`namespaces.isolate`): a mount and an IPC namespace of its own (inside a
   user namespace when not root), and, as asked, UTS and network ones.
2. **Mounts** (`namespaces.mount`): every mount read-only but the writable roots, protected
   paths read-only again inside them, other processes' Unix sockets masked, a private
   devpts (the user's other terminals out of reach) and a private `/dev/shm`.
3. **Network** (`namespaces.network`): only `lo`, up; the listening and dial sockets made
   in it go to the SDK over its channel.
4. **`/proc`** of the agent's own pid namespace: nothing outside it is listed.
5. **A seccomp filter** (`guard`): what Landlock cannot see. TCP Fast Open (`sendto` with
   `MSG_FASTOPEN`) and MPTCP sockets connect without the check Landlock's port rules hook;
   io_uring would run both past the filter; the kernel keyring holds secrets;
   `TIOCSTI`/`TIOCLINUX` push keystrokes into a terminal; `ptrace`, `process_vm_readv`/
   `writev` and `perf_event_open` read other processes; a setuid or setgid bit (`chmod`,
   `fchmod`, `fchmodat(2)`, `mknod(at)`, and `open`, `openat`, `creat` when they create)
   would leave an executable any local user runs as the agent's user (root's, for root's
   harness) after the session; a syscall of another ABI (32-bit) would dodge the numbers
   below. Each is refused with EPERM. `openat2`, whose mode the filter cannot read, is
   refused with ENOSYS (callers fall back to `openat`); a socket of any family but Unix,
   IPv4, IPv6 and netlink (`AF_VSOCK` reaches the hypervisor's host past the network
   namespace) with EAFNOSUPPORT. `no_new_privs` comes first.
6. **Capabilities** (`drop_capabilities`): none left, bounding set included.
7. **Landlock** (`apply_landlock`): the filesystem, TCP and scoping rules.

Where the kernel will not make namespaces (user namespaces off for unprivileged users),
steps 1-4 are skipped and the result bits say so; where Landlock or the filter cannot be
applied, or a mount asked for fails, `contain` raises (the harness does not run).

The same module answers `landlock_abi()` in the SDK's process. Standard library only and
cheap to import: the supervisor loads it by path under `python -I -S`.
"""

import _ctypes
import os
import sys

TYPE_CHECKING = False  # as `typing` has it, without importing `typing` (~10 ms)

__all__ = [
    "CONTAINED_IPC",
    "CONTAINED_TERMINALS",
    "GUARDED",
    "HOSTNAME",
    "NETWORK",
    "NO_CAPABILITIES",
    "PROCESSES",
    "READONLY",
    "SHM",
    "Plan",
    "contain",
    "landlock_abi",
]

CONTAINED_TERMINALS = 1
"""`contain`'s result bit: the agent has a devpts of its own."""
CONTAINED_IPC = 2
"""… a mount and an IPC namespace of its own (so `protect:` and `mask:` are in force)."""
GUARDED = 4
"""… the seccomp filter is in force."""
NETWORK = 8
"""… a network namespace of its own, with only `lo` (up), its sockets handed over."""
PROCESSES = 16
"""… a pid namespace of its own, with its own `/proc`."""
HOSTNAME = 32
"""… a UTS namespace of its own."""
READONLY = 64
"""… every mount read-only, the `rw:` roots writable, the `protect:` paths read-only."""
NO_CAPABILITIES = 128
"""… no capabilities: effective, permitted, inheritable, ambient (and bounding, where it
could be dropped)."""
SHM = 256
"""… a private tmpfs on `/dev/shm`, writable."""

_PR_SET_NO_NEW_PRIVS = 38
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # all architectures
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
FS_FILE_RIGHTS = 1 | 2 | 4 | (1 << 14) | (1 << 15)
"""Rights that apply to a file itself (execute, write, read, truncate, ioctl on a device):
a rule on a file may hold only these."""
_FS_BY_ABI = (0, (1 << 13) - 1, (1 << 14) - 1, (1 << 15) - 1, (1 << 15) - 1, (1 << 16) - 1)
"""The filesystem rights each ABI handles: 13 bits in ABI 1, REFER in 2, TRUNCATE in 3,
IOCTL_DEV in 5; nothing new for files since."""
SHM_RIGHTS = ((1 << 15) - 1) & ~(1 | (1 << 6) | (1 << 11))
"""Beneath a private `/dev/shm`: all but execute, making devices and device ioctls."""
_NET_TCP = 1 | 2  # BIND_TCP, CONNECT_TCP (ABI 4)
_SCOPE_ALL = 1 | 2  # ABSTRACT_UNIX_SOCKET, SIGNAL (ABI 6)

# seccomp, per machine: the audit arch, the syscalls refused outright (io_uring_setup/
# enter/register, add_key, request_key, keyctl, ptrace, process_vm_readv/writev,
# perf_event_open), and the numbers of those whose arguments it reads (`_CHECKS`). aarch64
# has no `open`, `creat`, `chmod` or `mknod`: only their *at forms.
_SYSCALLS = {
    "x86_64": (0xC000003E, (425, 426, 427, 248, 249, 250, 101, 310, 311, 298), {
        "openat": 257, "open": 2, "creat": 85, "ioctl": 16, "sendto": 44, "sendmsg": 46,
        "sendmmsg": 307, "socket": 41, "socketpair": 53, "chmod": 90, "fchmod": 91,
        "fchmodat": 268, "fchmodat2": 452, "mknod": 133, "mknodat": 259, "openat2": 437}),
    "aarch64": (0xC00000B7, (425, 426, 427, 217, 218, 219, 117, 270, 271, 241), {
        "openat": 56, "ioctl": 29, "sendto": 206, "sendmsg": 211, "sendmmsg": 269,
        "socket": 198, "socketpair": 199, "fchmod": 52, "fchmodat": 53, "fchmodat2": 452,
        "mknodat": 33, "openat2": 437}),
}  # fmt: skip
_CHECKS = {  # "creating N": the flags are argument N, the mode N + 1; "mode N": argument N
    "openat": "creating 2", "open": "creating 1", "creat": "mode 1",
    "ioctl": "ioctl", "sendto": "fast open 3", "sendmsg": "fast open 2",
    "sendmmsg": "fast open 3", "socket": "socket", "socketpair": "family",
    "chmod": "mode 1", "fchmod": "mode 1", "mknod": "mode 1",
    "fchmodat": "mode 2", "fchmodat2": "mode 2", "mknodat": "mode 2",
    "openat2": "no openat2",  # its mode is in a struct: ENOSYS, and callers fall back
}  # fmt: skip
"""Where the filter sends each syscall whose arguments it reads: a block of `_filter`."""
_X32_BIT = 0x40000000  # x86_64's x32 ABI: the same kernel, other numbers
_IPPROTO_MPTCP = 262
_MSG_FASTOPEN = 0x20000000
_TIOCSTI, _TIOCLINUX = 0x5412, 0x541C
_FAMILIES = (1, 2, 10, 16)  # AF_UNIX, AF_INET, AF_INET6, AF_NETLINK: no AF_VSOCK, …
_CREATING = 0o100 | 0o20000000  # O_CREAT, __O_TMPFILE (the same on both machines)
_SETID = 0o6000  # S_ISUID | S_ISGID
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_EPERM, _ENOSYS, _EAFNOSUPPORT = 1, 38, 97
_LD_ABS, _JEQ, _JSET, _JGE, _RET = 0x20, 0x15, 0x45, 0x35, 0x06  # BPF opcodes

_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
_CAPABILITY_VERSION_3 = 0x20080522

_SWITCHES = frozenset({"scope", "readonly", "shm", "pid", "uts", "caps", "net"})
_PATH_RULES = ("rw", "protect", "mask")


class _LibcFunction(_ctypes.CFuncPtr):
    """A C function returning int, as `ctypes.CDLL(None, use_errno=True)` gives it, built
    from `_ctypes` directly: importing `ctypes` would cost ~10 ms of start-up."""

    _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO


class _Byte(_ctypes._SimpleCData):  # type: ignore[type-arg]  # (generic in typeshed only)
    _type_ = "B"


_FUNCTIONS: dict[str, _LibcFunction] = {}


def libc(name: str, *args: int | bytes | None) -> int:
    """Call libc's `name`; raises OSError with the errno when it returns -1."""
    function = _FUNCTIONS.get(name)
    if function is None:
        handle = _ctypes.dlopen(None)  # type: ignore[arg-type]  # None: this process's symbols
        function = _FUNCTIONS[name] = _LibcFunction(_ctypes.dlsym(handle, name))
    result: int = function(*args)
    if result == -1:
        errno = _ctypes.get_errno()
        raise OSError(errno, f"{name}: {os.strerror(errno)}")
    return result


def buffer(data: bytes) -> tuple[object, int]:
    """A C copy of `data` and its address (kept alive while the first item is)."""
    copy = (_Byte * len(data)).from_buffer_copy(data)
    return copy, _ctypes.addressof(copy)


def _u64(value: int) -> bytes:
    return value.to_bytes(8, "little")


# -- the rules --------------------------------------------------------------------------


class Plan:
    """The supervisor's rules, parsed; `ValueError` for one it does not know.

    `fs:RIGHTS:PATH`, `connect:PORT`, `bind:PORT`, `scope` (Landlock); `readonly`,
    `rw:PATH`, `protect:PATH`, `mask:PATH`, `shm` (mounts); `pid`, `uts`, `net` (namespaces);
    `caps`; `channel:FD`, `listen:PORT`, `dial:N` (the network's sockets, to the SDK).
    `rw:` takes effect with `readonly` only; `protect:` and `mask:` wherever the mount
    namespace is made (`CONTAINED_IPC`); the sockets with `net`."""

    def __init__(self, rules: list[str]) -> None:
        self.landlock: list[str] = []
        self.switches: set[str] = set()
        self.paths: dict[str, list[str]] = {kind: [] for kind in _PATH_RULES}
        self.listen: list[int] = []
        self.dial = 0
        self.channel = -1
        for rule in rules:
            kind, colon, value = rule.partition(":")
            try:
                ok = self._add(rule, kind, colon, value)
            except ValueError:
                ok = False
            if not ok:
                raise ValueError(f"unknown rule {rule!r}")
        if (self.listen or self.dial) and self.channel < 0:
            raise ValueError("listen: and dial: rules need a channel: rule")
        if len(self.listen) + self.dial > 253:  # SCM_MAX_FD
            raise ValueError("more than 253 listen: and dial: sockets")

    def _add(self, rule: str, kind: str, colon: str, value: str) -> bool:
        if not colon:
            if rule in _SWITCHES:
                self.switches.add(rule)
                if rule == "scope":
                    self.landlock.append(rule)
            return rule in _SWITCHES
        if kind == "fs":
            rights, colon, path = value.partition(":")
            int(rights)
            ok = bool(colon and path)
        elif kind in ("connect", "bind"):
            int(value)
            ok = True
        elif kind in _PATH_RULES:
            self.paths[kind].append(value)
            return value.startswith("/")
        elif kind == "listen":
            self.listen.append(int(value))
            return 0 < self.listen[-1] < 65536
        elif kind == "dial":
            self.dial = int(value)
            return self.dial >= 0
        elif kind == "channel":
            self.channel = int(value)
            return self.channel >= 0
        else:
            return False
        self.landlock.append(rule)
        return ok


# -- Landlock ---------------------------------------------------------------------------


def landlock_abi() -> int:
    """The Landlock ABI the running kernel offers: 0 where there is none (not Linux, an
    old kernel, the LSM not enabled at boot)."""
    if sys.platform != "linux":
        return 0
    try:
        return libc("syscall", _SYS_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION)
    except OSError:
        return 0


def apply_landlock(rules: list[str]) -> int:
    """Restrict this process (and all it will start) to `rules` (`fs:RIGHTS:PATH`,
    `connect:PORT`, `bind:PORT`, `scope`); returns the ABI used. Rights the kernel's ABI
    does not know are masked off; a path that is gone, or a symlink, is skipped (a rule
    on a link would grant its target, wherever that is). Raises OSError when the kernel
    cannot enforce them."""
    abi = landlock_abi()
    if abi < 1:
        raise OSError("Landlock is not available in this kernel")
    handled_fs = _FS_BY_ABI[min(abi, len(_FS_BY_ABI) - 1)]
    handled_net = _NET_TCP if abi >= 4 else 0
    scoped = _SCOPE_ALL if abi >= 6 and "scope" in rules else 0
    attr = _u64(handled_fs) + _u64(handled_net) + _u64(scoped)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = libc("syscall", _SYS_CREATE_RULESET, attr[:size], size, 0)
    try:
        for rule in rules:
            kind, _, value = rule.partition(":")
            if kind == "fs":
                rights, _, path = value.partition(":")
                _add_path_rule(ruleset, int(rights) & handled_fs, path)
            elif kind in ("connect", "bind") and handled_net:
                access = 2 if kind == "connect" else 1
                port = _u64(access) + _u64(int(value))
                libc("syscall", _SYS_ADD_RULE, ruleset, _RULE_NET_PORT, port, 0)
        libc("prctl", _PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        libc("syscall", _SYS_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)
    return abi


def _add_path_rule(ruleset: int, rights: int, path: str) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:  # gone since the SDK planned the rules: nothing to grant
        return
    try:
        kind = os.fstat(fd).st_mode & 0o170000
        if kind == 0o120000:  # a symlink (put there since the SDK planned): never granted
            return
        if kind != 0o040000:  # a file: only file rights
            rights &= FS_FILE_RIGHTS
        if rights:
            attr = _u64(rights) + fd.to_bytes(4, "little", signed=True)
            libc("syscall", _SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, attr, 0)
    finally:
        os.close(fd)


# -- seccomp ----------------------------------------------------------------------------


_Op = tuple[int, int, str, str]  # BPF: code, k, where to jump if true, if false


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return code.to_bytes(2, "little") + bytes((jt, jf)) + k.to_bytes(4, "little")


def _assemble(source: list[str | _Op]) -> bytes:
    """BPF from labels (str) and instructions (code, k, label if true, label if false;
    "" for the next): the jump offsets computed, each checked to be forward and to fit
    its byte."""
    labels: dict[str, int] = {}
    ops: list[_Op] = []
    for item in source:
        if isinstance(item, str):
            labels[item] = len(ops)
        else:
            ops.append(item)
    program = []
    for pc, (code, k, jt, jf) in enumerate(ops):
        offsets = [labels[to] - pc - 1 if to else 0 for to in (jt, jf)]
        if not all(0 <= offset < 256 for offset in offsets):
            raise ValueError(f"BPF jump out of range at {pc}: {offsets}")
        program.append(_op(code, k, *offsets))
    return b"".join(program)


def _arg(n: int) -> _Op:
    """Load argument `n`'s low 32 bits (`seccomp_data.args` are u64, little-endian here):
    what the kernel reads of an int, a mode or flags."""
    return (_LD_ABS, 16 + 8 * n, "", "")


def _filter(machine: str) -> bytes | None:
    """The BPF program (see the module docstring), or None on an unknown machine."""
    table = _SYSCALLS.get(machine)
    if table is None:
        return None
    arch, refused, numbers = table
    source: list[str | _Op] = [
        (_LD_ABS, 4, "", ""),
        (_JEQ, arch, "", "deny"),
        (_LD_ABS, 0, "", ""),
    ]
    if machine == "x86_64":
        source.append((_JGE, _X32_BIT, "deny", ""))
    source += [
        (_JEQ, numbers[name], block, "") for name, block in _CHECKS.items() if name in numbers
    ]
    source += [(_JEQ, nr, "deny", "") for nr in refused]
    source += [
        (_RET, _RET_ALLOW, "", ""),
        "socket",  # socket(domain, type, IPPROTO_MPTCP): EPERM, then the family
        _arg(2),
        (_JEQ, _IPPROTO_MPTCP, "deny", ""),
        "family",  # socket/socketpair(domain, …): only these families
        _arg(0),
        *[(_JEQ, family, "allow", "") for family in _FAMILIES],
        (_RET, _RET_ERRNO | _EAFNOSUPPORT, "", ""),
        "ioctl",  # ioctl(fd, TIOCSTI | TIOCLINUX)
        _arg(1),
        (_JEQ, _TIOCSTI, "deny", ""),
        (_JEQ, _TIOCLINUX, "deny", "allow"),
    ]
    for n in (2, 3):  # send*(…, flags & MSG_FASTOPEN)
        source += [f"fast open {n}", _arg(n), (_JSET, _MSG_FASTOPEN, "deny", "allow")]
    for n in (1, 2):  # open/openat(…, flags & (O_CREAT | O_TMPFILE), mode): the mode next
        source += [f"creating {n}", _arg(n), (_JSET, _CREATING, f"mode {n + 1}", "allow")]
    for n in (1, 2, 3):  # chmod & co (…, mode & (S_ISUID | S_ISGID))
        source += [f"mode {n}", _arg(n), (_JSET, _SETID, "deny", "allow")]
    source += [
        "allow",
        (_RET, _RET_ALLOW, "", ""),
        "deny",
        (_RET, _RET_ERRNO | _EPERM, "", ""),
        "no openat2",
        (_RET, _RET_ERRNO | _ENOSYS, "", ""),
    ]
    return _assemble(source)


def guard() -> bool:
    """Install the seccomp filter (after `no_new_privs`); False on a machine it has no
    syscall table for. Raises OSError when the kernel refuses it."""
    program = _filter(os.uname().machine)
    if program is None:
        return False
    keep, address = buffer(program)
    fprog = (len(program) // 8).to_bytes(2, "little") + bytes(6) + _u64(address)
    libc("prctl", _PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    libc("prctl", 22, 2, fprog, 0, 0)  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
    del keep
    return True


# -- capabilities -----------------------------------------------------------------------


def drop_capabilities() -> bool:
    """Leave this process no capability: the bounding set emptied (where it holds
    CAP_SETPCAP; elsewhere it has none to give, and `no_new_privs` keeps setuid and file
    capabilities from granting any), ambient cleared, effective, permitted and inheritable
    emptied. False if they could not be emptied."""
    for cap in range(64):
        try:
            libc("prctl", _PR_CAPBSET_DROP, cap, 0, 0, 0)
        except OSError:  # EINVAL: past the last; EPERM: no CAP_SETPCAP
            break
    try:
        libc("prctl", _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
        header = _CAPABILITY_VERSION_3.to_bytes(4, "little") + bytes(4)  # this process
        libc("capset", header, bytes(24))  # two (effective, permitted, inheritable)
    except OSError:
        return False
    return True


# -- all of it --------------------------------------------------------------------------


def contain(plan: Plan, *, user_namespace: bool = False, pid_namespace: bool = False) -> int:
    """Namespaces, mounts, network, `/proc`, the seccomp filter, capabilities, then
    Landlock (module docstring); returns the result bits. `user_namespace`: this process
    is in one already (the supervisor's); `pid_namespace`: and in a pid namespace of its
    own. Raises OSError when Landlock, the filter, or a mount asked for fails."""
    if TYPE_CHECKING or __package__:
        from . import namespaces
    else:
        import namespaces  # run by the supervisor: this directory's

    flags = namespaces.isolate(plan, user_namespace=user_namespace)
    bits = CONTAINED_IPC if flags else 0
    if flags & namespaces.CLONE_NEWUTS:
        bits |= HOSTNAME
    if flags:
        bits |= namespaces.mount(plan)
    networked = bool(flags & namespaces.CLONE_NEWNET)
    if networked:
        namespaces.loopback_up()
    if plan.channel >= 0:
        namespaces.hand_over(plan, networked)
    if networked:
        bits |= NETWORK
    if pid_namespace and flags and namespaces.mount_proc():
        bits |= PROCESSES
    if guard():
        bits |= GUARDED
    if "caps" in plan.switches and drop_capabilities():
        bits |= NO_CAPABILITIES
    landlock = plan.landlock
    if bits & SHM:
        landlock = [*landlock, f"fs:{SHM_RIGHTS}:/dev/shm"]
    apply_landlock(landlock)
    return bits
