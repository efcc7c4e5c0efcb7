"""Namespaces, mounts and the agent's network, for `confine.contain` (Linux).

Mounts, in the child's private mount namespace (nothing propagates to the host's):

- `readonly`: every mount read-only (`mount_setattr(AT_RECURSIVE, MOUNT_ATTR_RDONLY)` on
  `/`), so `chmod`, `chown`, `utime`, `setxattr` and writes fail with EROFS where Landlock,
  which has no right for metadata, would let them through;
- `rw:PATH`: PATH as it was (cloned, its own mounts below included, before the tree was
  made read-only) mounted back onto itself;
- `protect:PATH`: PATH, inside a writable root, bound onto itself read-only (a mount point
  also cannot be renamed or removed);
- `mask:PATH`: `/dev/null` bound over PATH (a pathname Unix socket: `connect()` is then
  refused, where neither Landlock nor a read-only mount stops it);
- a devpts of its own on `/dev/pts` (its `ptmx` on `/dev/ptmx`), and with `shm` a tmpfs on
  `/dev/shm`.

A path that is gone is skipped; a symlink is never followed (`rw:` skips it, `protect:`
and `mask:` cover the link itself). Any other failure raises `OSError` naming the path.

Standard library only; the supervisor loads it by path under `python -I -S`, as `confine`.
"""

import os
import sys

TYPE_CHECKING = False  # as `typing` has it, without importing `typing` (~10 ms)
if TYPE_CHECKING or __package__:
    from . import confine
else:  # run by the supervisor: this directory's confine.py
    import confine

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18
_SYS_OPEN_TREE, _SYS_MOVE_MOUNT, _SYS_MOUNT_SETATTR = 428, 429, 442  # all architectures
_OPEN_TREE_CLONE, _AT_FDCWD, _AT_EMPTY_PATH, _AT_RECURSIVE = 1, -100, 0x1000, 0x8000
_MOVE_MOUNT_EMPTY_PATHS = 0x04 | 0x40  # F_EMPTY_PATH | T_EMPTY_PATH
_READ_ONLY = confine._u64(1) + bytes(24)  # struct mount_attr: attr_set = MOUNT_ATTR_RDONLY
_AF_INET, _SOCK_STREAM, _SOCK_DGRAM, _SOCK_CLOEXEC = 2, 1, 2, 0o2000000
_SIOCSIFFLAGS, _IFF_UP = 0x8914, 1
_SOL_SOCKET, _SCM_RIGHTS = 1, 1
_WORD = 8 if sys.maxsize > 2**32 else 4  # a pointer, a size_t
SOCKETS_MAGIC = b"AGSOCK"
"""The channel's one message: this, a count byte, and that many descriptors."""


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _map_ids(uid: int, gid: int) -> None:
    """Keep this uid and gid inside the user namespace just made."""
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")


def unshare_pid() -> int:
    """In the supervisor, before it forks: a pid namespace its child will be pid 1 of
    (inside a user namespace, keeping this uid, when not root: this process then stays in
    that user namespace, and in no other new one). Returns the namespaces made, 0 where
    the kernel will not make them."""
    uid, gid = os.getuid(), os.getgid()  # (unmapped, they read as 65534)
    flags = CLONE_NEWPID | (CLONE_NEWUSER if uid != 0 else 0)
    try:
        confine.libc("unshare", flags)
    except OSError:
        return 0
    if uid != 0:
        _map_ids(uid, gid)
    return flags


def isolate(plan: "confine.Plan", *, user_namespace: bool) -> int:
    """A mount and an IPC namespace of its own, and UTS and network ones as `plan` asks
    (without them where the kernel will not make them), inside a user namespace when not
    root and not in one already; mounts made private. Returns the namespaces made (0:
    none, where user namespaces are off, say)."""
    uid, gid = os.getuid(), os.getgid()
    user = CLONE_NEWUSER if uid != 0 and not user_namespace else 0
    base = CLONE_NEWNS | CLONE_NEWIPC | user
    extra = (CLONE_NEWUTS if "uts" in plan.switches else 0) | (
        CLONE_NEWNET if "net" in plan.switches else 0
    )
    for flags in (base | extra, base):
        try:
            confine.libc("unshare", flags)
            break
        except OSError:
            continue
    else:
        return 0
    if user:
        _map_ids(uid, gid)
    # Mounts below must not propagate to the host's namespace.
    confine.libc("mount", b"none", b"/", None, _MS_REC | _MS_PRIVATE, None)
    return flags


# -- mounts -----------------------------------------------------------------------------


def _syscall(what: str, path: str, *args: int | bytes | None) -> int:
    try:
        return confine.libc("syscall", *args)
    except OSError as exc:
        raise OSError(exc.errno, f"{what} {path}: {os.strerror(exc.errno or 0)}") from None


def _open(path: str) -> int:
    """`path` itself (a link not followed), or -1 where it is gone."""
    try:
        return os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return -1
    except OSError as exc:
        raise OSError(exc.errno, f"{path}: {exc.strerror}") from None


def _clone(what: str, path: str) -> int:
    """A detached copy of the mounts at and below `path` (-1: gone; for `rw`, a link)."""
    fd = _open(path)
    if fd < 0:
        return -1
    try:
        if what == "rw" and os.fstat(fd).st_mode & 0o170000 == 0o120000:
            return -1  # a symlink: not followed, and a link itself is never written
        flags = _OPEN_TREE_CLONE | os.O_CLOEXEC | _AT_RECURSIVE | _AT_EMPTY_PATH
        return _syscall(what, path, _SYS_OPEN_TREE, fd, b"", flags)
    finally:
        os.close(fd)


def _attach(what: str, tree: int, path: str) -> None:
    """Mount the detached `tree` onto `path` as it resolves now (on top of what is
    there), unless `path` is gone."""
    try:
        target = _open(path)
        if target >= 0:
            try:
                move = (tree, b"", target, b"", _MOVE_MOUNT_EMPTY_PATHS)
                _syscall(what, path, _SYS_MOVE_MOUNT, *move)
            finally:
                os.close(target)
    finally:
        os.close(tree)


def mount(plan: "confine.Plan") -> int:
    """In the new mount namespace: the read-only tree, `rw:` roots, `protect:`ed paths,
    `mask:`s, the private devpts and `/dev/shm` (module docstring). Returns the result
    bits (`READONLY`, `CONTAINED_TERMINALS`, `SHM`); raises OSError naming the path when
    a mount asked for fails."""
    bits = 0
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = ""
    if "readonly" in plan.switches:
        trees = [(_clone("rw", path), path) for path in plan.paths["rw"]]  # the tree as is
        every = (_AT_FDCWD, b"/", _AT_RECURSIVE, _READ_ONLY, 32)
        _syscall("readonly", "/", _SYS_MOUNT_SETATTR, *every)
        for tree, path in trees:  # in order: a root inside another lands on top of it
            if tree >= 0:
                _attach("rw", tree, path)
        bits |= confine.READONLY
    for path in plan.paths["protect"]:  # after every rw: on top of them
        tree = _clone("protect", path)
        if tree >= 0:
            attr = _AT_EMPTY_PATH | _AT_RECURSIVE
            try:
                _syscall("protect", path, _SYS_MOUNT_SETATTR, tree, b"", attr, _READ_ONLY, 32)
            except OSError:
                os.close(tree)
                raise
            _attach("protect", tree, path)
    null = _OPEN_TREE_CLONE | os.O_CLOEXEC  # a copy of the /dev/null mount, per mask
    for path in plan.paths["mask"]:
        if os.path.lexists(path):
            tree = _syscall("mask", path, _SYS_OPEN_TREE, _AT_FDCWD, b"/dev/null", null)
            _attach("mask", tree, path)
    try:
        options = b"newinstance,ptmxmode=0666,mode=0620"
        confine.libc("mount", b"devpts", b"/dev/pts", b"devpts", _MS_NOSUID | _MS_NOEXEC, options)
        confine.libc("mount", b"/dev/pts/ptmx", b"/dev/ptmx", None, _MS_BIND, None)
        bits |= confine.CONTAINED_TERMINALS
    except OSError:
        pass
    if "shm" in plan.switches:
        try:
            flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
            confine.libc("mount", b"tmpfs", b"/dev/shm", b"tmpfs", flags, b"mode=1777")
            bits |= confine.SHM
        except OSError:
            pass
    if cwd:  # the working directory as it resolves now (a writable root's mount, say)
        try:  # noqa: SIM105 (contextlib would cost ~10 ms of start-up)
            os.chdir(cwd)
        except OSError:
            pass
    return bits


def mount_proc() -> bool:
    """A `/proc` of this pid namespace over the host's (read-only, nosuid, nodev,
    noexec); False where the kernel refuses it."""
    flags = _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    try:
        confine.libc("mount", b"proc", b"/proc", b"proc", flags, None)
    except OSError:
        return False
    return True


# -- network ----------------------------------------------------------------------------


def loopback_up() -> None:
    """Bring `lo` up in this (new) network namespace."""
    fd = confine.libc("socket", _AF_INET, _SOCK_DGRAM | _SOCK_CLOEXEC, 0)
    try:
        ifreq = b"lo".ljust(16, b"\0") + _IFF_UP.to_bytes(2, sys.byteorder) + bytes(22)
        confine.libc("ioctl", fd, _SIOCSIFFLAGS, ifreq)
    except OSError as exc:
        raise OSError(exc.errno, f"lo up: {exc.strerror}") from None
    finally:
        os.close(fd)


def hand_over(plan: "confine.Plan", networked: bool) -> None:
    """Send the SDK, on its channel, one message: `AGSOCK`, a count byte, and (as
    SCM_RIGHTS) that many sockets made in this network namespace: listening on
    127.0.0.1:PORT for each `listen:` in order, then `dial:` unconnected TCP ones; with
    no network of its own, a count of 0 and none. Then close the channel and them."""
    fds: list[int] = []
    try:
        if networked:
            for port in plan.listen:
                fds.append(confine.libc("socket", _AF_INET, _SOCK_STREAM | _SOCK_CLOEXEC, 0))
                address = _AF_INET.to_bytes(2, sys.byteorder) + port.to_bytes(2, "big")
                confine.libc("bind", fds[-1], address + bytes((127, 0, 0, 1)) + bytes(8), 16)
                confine.libc("listen", fds[-1], 128)
            for _ in range(plan.dial):
                fds.append(confine.libc("socket", _AF_INET, _SOCK_STREAM | _SOCK_CLOEXEC, 0))
        _send(plan.channel, SOCKETS_MAGIC + bytes((len(fds),)), fds)
    finally:
        for fd in (*fds, plan.channel):
            os.close(fd)


def _send(channel: int, data: bytes, fds: list[int]) -> None:
    """`sendmsg(channel, data, SCM_RIGHTS fds)` through libc (`_socket` costs ~1 ms)."""

    def word(value: int) -> bytes:
        return value.to_bytes(_WORD, sys.byteorder)

    order = sys.byteorder
    payload, payload_at = confine.buffer(data)
    iov, iov_at = confine.buffer(word(payload_at) + word(len(data)))
    control, control_at = b"", 0
    keep: object = None
    if fds:
        rights = b"".join(fd.to_bytes(4, order) for fd in fds)
        header = word(_WORD + 8 + len(rights)) + _SOL_SOCKET.to_bytes(4, order)
        control = header + _SCM_RIGHTS.to_bytes(4, order) + rights
        control += bytes(-len(control) % _WORD)
        keep, control_at = confine.buffer(control)
    message = word(0) + word(0) + word(iov_at) + word(1) + word(control_at)
    sent = confine.libc("sendmsg", channel, message + word(len(control)) + word(0), 0)
    del payload, iov, keep
    if sent != len(data):
        raise OSError(f"channel: sent {sent} of {len(data)} bytes")
