"""Confine a process and all it will start, before it execs the harness (Linux).

`contain(rules)` runs in the supervisor's forked child, in this order:

1. **Namespaces** (`isolate`): a mount and an IPC namespace of its own, inside a user
   namespace when not root, with a private devpts mounted on `/dev/pts` and its `ptmx` on
   `/dev/ptmx`: the agent's terminals are its own, and the user's other terminals (and
   System V IPC objects) are out of reach. Where user namespaces are off, this step is
   skipped and reported (the terminals are then shared; the filter below still refuses
   keystroke injection).
2. **A seccomp filter** (`guard`): what Landlock cannot see. TCP Fast Open (`sendto`
   with `MSG_FASTOPEN`) and MPTCP sockets connect without the check Landlock's port rules
   hook; io_uring would run both past the filter; the kernel keyring holds secrets;
   `TIOCSTI`/`TIOCLINUX` push keystrokes into a terminal; a syscall of another ABI (32-bit)
   would dodge the numbers below. Each is refused with EPERM. `no_new_privs` comes first.
3. **Landlock** (`apply_landlock`): the filesystem, TCP and scoping rules.

The same module answers `landlock_abi()` in the SDK's process. Standard library only and
cheap to import: the supervisor loads it by path under `python -I -S`.
"""

import _ctypes
import os
import sys

__all__ = ["CONTAINED_IPC", "CONTAINED_TERMINALS", "GUARDED", "contain", "landlock_abi"]

CONTAINED_TERMINALS = 1
"""`contain`'s result bit: the agent has a devpts of its own."""
CONTAINED_IPC = 2
"""… an IPC namespace of its own."""
GUARDED = 4
"""… the seccomp filter is in force."""

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
_NET_TCP = 1 | 2  # BIND_TCP, CONNECT_TCP (ABI 4)
_SCOPE_ALL = 1 | 2  # ABSTRACT_UNIX_SOCKET, SIGNAL (ABI 6)

_CLONE_NEWNS, _CLONE_NEWIPC, _CLONE_NEWUSER = 0x00020000, 0x08000000, 0x10000000
_MS_NOSUID, _MS_NOEXEC, _MS_BIND, _MS_REC, _MS_PRIVATE = 2, 8, 4096, 16384, 1 << 18

# seccomp: (audit arch, socket, sendto, sendmsg, sendmmsg, io_uring_setup/enter/register,
# add_key, request_key, keyctl, ioctl) per machine.
_SYSCALLS = {
    "x86_64": (0xC000003E, 41, 44, 46, 307, (425, 426, 427), 248, 249, 250, 16),
    "aarch64": (0xC00000B7, 198, 206, 211, 269, (425, 426, 427), 217, 218, 219, 29),
}
_X32_BIT = 0x40000000  # x86_64's x32 ABI: the same kernel, other numbers
_IPPROTO_MPTCP = 262
_MSG_FASTOPEN = 0x20000000
_TIOCSTI, _TIOCLINUX = 0x5412, 0x541C
_RET_ALLOW, _RET_EPERM = 0x7FFF0000, 0x00050001
_LD_ABS, _JEQ, _JSET, _JGE, _RET = 0x20, 0x15, 0x45, 0x35, 0x06  # BPF opcodes


class _LibcFunction(_ctypes.CFuncPtr):
    """A C function returning int, as `ctypes.CDLL(None, use_errno=True)` gives it, built
    from `_ctypes` directly: importing `ctypes` would cost ~10 ms of start-up."""

    _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO


def libc(name: str, *args: int | bytes | None) -> int:
    """Call libc's `name`; raises OSError with the errno when it returns -1."""
    handle = _ctypes.dlopen(None)  # type: ignore[arg-type]  # None: this process's symbols
    result: int = _LibcFunction(_ctypes.dlsym(handle, name))(*args)
    if result == -1:
        errno = _ctypes.get_errno()
        raise OSError(errno, f"{name}: {os.strerror(errno)}")
    return result


def _u64(value: int) -> bytes:
    return value.to_bytes(8, "little")


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


# -- namespaces -------------------------------------------------------------------------


def isolate() -> int:
    """Give this process a devpts and System V IPC of its own (`CONTAINED_TERMINALS |
    CONTAINED_IPC`), or nothing (0) where the kernel will not make the namespaces (user
    namespaces switched off for unprivileged users, say)."""
    uid, gid = os.getuid(), os.getgid()
    flags = _CLONE_NEWNS | _CLONE_NEWIPC | (_CLONE_NEWUSER if uid != 0 else 0)
    try:
        libc("unshare", flags)
    except OSError:
        return 0
    if uid != 0:  # keep this uid and gid inside the new user namespace
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1")):
            _write(f"/proc/self/{name}", text)
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    # Mounts below must not propagate to the host's namespace.
    libc("mount", b"none", b"/", None, _MS_REC | _MS_PRIVATE, None)
    try:
        options = b"newinstance,ptmxmode=0666,mode=0620"
        libc("mount", b"devpts", b"/dev/pts", b"devpts", _MS_NOSUID | _MS_NOEXEC, options)
        libc("mount", b"/dev/pts/ptmx", b"/dev/ptmx", None, _MS_BIND, None)
    except OSError:
        return CONTAINED_IPC
    return CONTAINED_TERMINALS | CONTAINED_IPC


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


# -- seccomp ----------------------------------------------------------------------------


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return code.to_bytes(2, "little") + bytes((jt, jf)) + k.to_bytes(4, "little")


def _filter(machine: str) -> bytes | None:
    """The BPF program (see the module docstring), or None on an unknown machine."""
    table = _SYSCALLS.get(machine)
    if table is None:
        return None
    arch, socket, sendto, sendmsg, sendmmsg, uring, add_key, request_key, keyctl, ioctl = table
    deny, allow = _op(_RET, _RET_EPERM), _op(_RET, _RET_ALLOW)
    flags_arg = {sendto: 3, sendmsg: 2, sendmmsg: 3}
    refused = [*uring, add_key, request_key, keyctl]
    body = [_op(_LD_ABS, 4), _op(_JEQ, arch, 1, 0), deny, _op(_LD_ABS, 0)]
    if machine == "x86_64":
        body += [_op(_JGE, _X32_BIT, 0, 1), deny]
    for nr in refused:
        body += [_op(_JEQ, nr, 0, 1), deny]
    # socket(domain, type, IPPROTO_MPTCP)
    body += [_op(_JEQ, socket, 0, 4), _op(_LD_ABS, 16 + 8 * 2), _op(_JEQ, _IPPROTO_MPTCP, 0, 1)]
    body += [deny, allow]
    for nr, arg in flags_arg.items():  # send*(…, flags & MSG_FASTOPEN)
        body += [_op(_JEQ, nr, 0, 4), _op(_LD_ABS, 16 + 8 * arg)]
        body += [_op(_JSET, _MSG_FASTOPEN, 0, 1), deny, allow]
    # ioctl(fd, TIOCSTI | TIOCLINUX)
    body += [_op(_JEQ, ioctl, 0, 5), _op(_LD_ABS, 16 + 8 * 1), _op(_JEQ, _TIOCSTI, 1, 0)]
    body += [_op(_JEQ, _TIOCLINUX, 0, 1), deny, allow]
    return b"".join([*body, allow])


class _Byte(_ctypes._SimpleCData):  # type: ignore[type-arg]  # (generic in typeshed only)
    _type_ = "B"


def guard() -> bool:
    """Install the seccomp filter (after `no_new_privs`); False on a machine it has no
    syscall table for. Raises OSError when the kernel refuses it."""
    program = _filter(os.uname().machine)
    if program is None:
        return False
    size = len(program)
    buffer = (_Byte * size).from_buffer_copy(program)
    fprog = (size // 8).to_bytes(2, "little") + bytes(6) + _u64(_ctypes.addressof(buffer))
    libc("prctl", _PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    libc("prctl", 22, 2, fprog, 0, 0)  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
    return True


def contain(rules: list[str]) -> int:
    """Namespaces, the seccomp filter, then Landlock (module docstring); returns the
    result bits. Raises OSError when Landlock or the filter cannot be put in force."""
    isolated = isolate()
    guarded = GUARDED if guard() else 0
    apply_landlock(rules)
    return isolated | guarded
