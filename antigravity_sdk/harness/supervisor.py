"""Run the harness so that no process it starts outlives it (Linux; run by LocalConnection).

    python -I -S supervisor.py HOST_PID HARNESS_PATH [RULE ...]

Why a process of its own: the harness starts backgrounded commands in new sessions
(`setsid`), out of its process group; when the harness dies (killed, or frozen and then
killed) they are re-parented to init and run on. This process makes itself a child
subreaper (`PR_SET_CHILD_SUBREAPER`: orphaned descendants are re-parented to it, setsid
or not), asks the kernel for SIGHUP when the host process dies (`PR_SET_PDEATHSIG`), then
forks the harness, which inherits its stdin, stdout and stderr. Before the exec the child
writes its own pid to stdout (a little-endian u32), ahead of the harness's handshake.

Everything the harness started, however deep, is SIGKILLed when:
  * the harness exits (it exits on stdin EOF: a normal close, or the host dying);
  * SIGTERM or SIGINT arrives (the SDK's close(), past its stdin-EOF grace): the harness
    is SIGKILLed with them;
  * SIGHUP arrives (the host died): the harness first gets `_HOST_GONE_GRACE` to exit on
    the stdin EOF it also got (it may be frozen).
Then this process exits with the harness's status, so the SDK reports the harness's own.
Signals are taken synchronously (blocked, then `sigwaitinfo`), so no handler races the
reaping.

Containment: RULEs, when given, are applied to the forked child with Landlock before it
writes its pid and execs, so the harness and everything it ever starts are inside one
irrevocable domain; this process stays outside it (it reads /proc and kills). A rule is
`fs:RIGHTS:PATH` (grant Landlock filesystem RIGHTS, a bit mask, beneath PATH), `connect:PORT`
or `bind:PORT` (TCP), or `scope` (no signals or abstract-socket connections out of the
domain). Rights the running kernel's ABI does not know are masked off; a path that is gone
is skipped. If the rules cannot be enforced, the child says why on stderr behind
`CONTAINMENT_FAILED` and exits with `CONTAINMENT_STATUS`, so the SDK raises a containment
error rather than "exited during the handshake".

Standard library only, and few imports: it runs with `-I -S`, outside the SDK's
environment, and its start-up is on `Agent.start()`'s path.
"""

import _ctypes
import os
import sys
import time

TYPE_CHECKING = False  # as `typing` has it, without importing `typing` (~10 ms)
if TYPE_CHECKING:
    import signal
else:  # the same functions and numbers, without `signal`'s enums (~10 ms of start-up)
    import _signal as signal

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_HOST_GONE_GRACE = 1.0  # seconds the harness gets to exit on its own when the host dies
_KILL_DEADLINE = 2.0  # seconds to kill and reap every descendant
_SIGNALS = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
_PR_SET_NO_NEW_PRIVS = 38
CONTAINMENT_STATUS = 125
CONTAINMENT_FAILED = "antigravity supervisor: containment could not be enforced:"

# Landlock (linux/landlock.h): the same syscall numbers on every architecture Linux has.
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
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


class _LibcFunction(_ctypes.CFuncPtr):
    """A C function returning int, as `ctypes.CDLL(None, use_errno=True)` gives it, built
    from `_ctypes` directly: importing `ctypes` would cost ~10 ms of start-up."""

    _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO


def _prctl(option: int, value: int) -> None:
    libc = _ctypes.dlopen(None)  # type: ignore[arg-type]  # None: this process's own symbols
    if _LibcFunction(_ctypes.dlsym(libc, "prctl"))(option, value, 0, 0, 0) != 0:
        errno = _ctypes.get_errno()
        raise OSError(errno, f"prctl({option}): {os.strerror(errno)}")


def _syscall(*args: int | bytes | None) -> int:
    """`syscall(2)`; raises OSError with the errno on failure."""
    libc = _ctypes.dlopen(None)  # type: ignore[arg-type]
    result: int = _LibcFunction(_ctypes.dlsym(libc, "syscall"))(*args)
    if result < 0:
        errno = _ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return result


def landlock_abi() -> int:
    """The Landlock ABI the running kernel offers: 0 where there is none (not Linux, an
    old kernel, the LSM not enabled at boot)."""
    if sys.platform != "linux":
        return 0
    try:
        return _syscall(_SYS_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION)
    except OSError:
        return 0


def _u64(value: int) -> bytes:
    return value.to_bytes(8, "little")


def apply_landlock(rules: list[str]) -> int:
    """Restrict this process (and all it will start) to `rules`; returns the ABI used.

    Raises OSError when the kernel cannot enforce them (no Landlock, a rule it refuses)."""
    abi = landlock_abi()
    if abi < 1:
        raise OSError("Landlock is not available in this kernel")
    handled_fs = _FS_BY_ABI[min(abi, len(_FS_BY_ABI) - 1)]
    handled_net = _NET_TCP if abi >= 4 else 0
    scoped = _SCOPE_ALL if abi >= 6 and "scope" in rules else 0
    attr = _u64(handled_fs) + _u64(handled_net) + _u64(scoped)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = _syscall(_SYS_CREATE_RULESET, attr[:size], size, 0)
    try:
        for rule in rules:
            kind, _, value = rule.partition(":")
            if kind == "fs":
                rights, _, path = value.partition(":")
                _add_path_rule(ruleset, int(rights) & handled_fs, path)
            elif kind in ("connect", "bind") and handled_net:
                access = 2 if kind == "connect" else 1
                _syscall(_SYS_ADD_RULE, ruleset, _RULE_NET_PORT, _u64(access) + _u64(int(value)), 0)
        _prctl(_PR_SET_NO_NEW_PRIVS, 1)
        _syscall(_SYS_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)
    return abi


def _add_path_rule(ruleset: int, rights: int, path: str) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:  # gone since the SDK planned the rules: nothing to grant
        return
    try:
        if os.fstat(fd).st_mode & 0o170000 != 0o040000:  # not a directory
            rights &= FS_FILE_RIGHTS
        if rights:
            attr = _u64(rights) + fd.to_bytes(4, "little", signed=True)
            _syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, attr, 0)
    finally:
        os.close(fd)


def _note(message: str) -> None:
    try:  # noqa: SIM105 (contextlib would cost ~10 ms of start-up)
        os.write(2, f"antigravity supervisor: {message}\n".encode())
    except OSError:  # nobody reads stderr any more: the host is gone
        pass


def _original_environ() -> dict[bytes, bytes]:
    """The environment the SDK gave this process, as it gave it: Python's start-up may
    have added LC_CTYPE (PEP 538 locale coercion), which the harness must not inherit."""
    with open("/proc/self/environ", "rb") as f:
        entries = f.read().split(b"\0")
    return dict(entry.split(b"=", 1) for entry in entries if b"=" in entry)


def _descendants(root: int) -> list[int]:
    """Every live process below `root`, from one scan of /proc."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # gone meanwhile
            continue
        ppid = int(stat.rsplit(b")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(name))
    found: list[int] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            found.append(child)
            stack.append(child)
    return found


class _Harness:
    """The forked harness and, once reaped, its wait status."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.status: int | None = None

    def reap(self) -> bool:
        """Reap every exited child; False once no child is left."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.pid:
                self.status = status

    def wait_exit(self, seconds: float) -> None:
        """Reap children until the harness is reaped or `seconds` pass."""
        deadline = time.monotonic() + seconds
        while self.status is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if signal.sigtimedwait({signal.SIGCHLD}, left) is not None:
                self.reap()

    def kill_all(self) -> None:
        """SIGKILL every descendant, sweep after sweep, until none is left (bounded).

        A killed parent's children are re-parented here (the subreaper), so each sweep
        reaches what the last one orphaned; none of them can ignore SIGKILL."""
        deadline = time.monotonic() + _KILL_DEADLINE
        while self.reap():
            if time.monotonic() > deadline:
                _note(f"descendants still alive after {_KILL_DEADLINE}s; giving up")
                return
            for pid in _descendants(os.getpid()):
                try:  # noqa: SIM105 (contextlib would cost ~10 ms of start-up)
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            signal.sigtimedwait({signal.SIGCHLD}, 0.01)

    def run(self) -> None:
        """Reap orphans until the harness exits or a signal asks to end; then end all."""
        grace = 0.0
        while self.status is None:
            info = signal.sigwaitinfo(_SIGNALS)
            if info.si_signo == signal.SIGCHLD:
                self.reap()
                continue
            if info.si_signo == signal.SIGHUP:
                grace = _HOST_GONE_GRACE
            break
        self.wait_exit(grace)
        self.kill_all()

    def exit(self) -> None:
        """Leave with the harness's status: its exit code, or death by its signal."""
        if self.status is None:
            os._exit(1)
        code = os.waitstatus_to_exitcode(self.status)
        if code >= 0:
            os._exit(code)
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the harness's crash, not ours
        if code != -signal.SIGKILL:
            signal.signal(-code, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {-code})
        os.kill(os.getpid(), -code)
        os._exit(128 - code)  # a signal whose default is not to terminate


def _exec_harness(path: str, supervisor: int, rules: list[str]) -> None:
    """In the forked child: die with the supervisor, enter the containment, announce the
    pid, become the harness."""
    try:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != supervisor:  # the supervisor died before the prctl
            os._exit(1)
        if rules:
            try:
                apply_landlock(rules)
            except OSError as exc:
                os.write(2, f"{CONTAINMENT_FAILED} {exc}\n".encode())
                os._exit(CONTAINMENT_STATUS)
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # as subprocess does for a child
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        env = _original_environ()
        os.write(1, os.getpid().to_bytes(4, "little"))
        os.execve(path, [path], env)
    except BaseException as exc:
        _note(f"cannot start the harness {path}: {exc}")
    os._exit(127)


def main(argv: list[str]) -> None:
    host, path, rules = int(argv[0]), argv[1], argv[2:]
    signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGHUP)
    if os.getppid() != host:  # the host died before the prctl: nothing to run for
        _note("the host process is gone")
        os._exit(1)
    me = os.getpid()
    pid = os.fork()
    if pid == 0:
        _exec_harness(path, me, rules)
    # Only the harness holds the handshake pipes now: the host sees EOF when it dies.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    harness = _Harness(pid)
    harness.run()
    harness.exit()


if __name__ == "__main__":
    main(sys.argv[1:])
