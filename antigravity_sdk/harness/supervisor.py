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

Containment: RULEs, when given, are put in force in the forked child before it writes its
pid and execs (`confine.contain`: its own namespaces, a seccomp filter, then Landlock), so
the harness and everything it ever starts are inside one irrevocable domain; this process
stays outside it (it reads /proc and kills). A rule is `fs:RIGHTS:PATH` (Landlock
filesystem RIGHTS, a bit mask, beneath PATH), `connect:PORT` or `bind:PORT` (TCP), or
`scope` (no signals or abstract-socket connections out of the domain). The pid is then
followed by one byte: `contain`'s result bits. If the rules cannot be enforced, the child
says why on stderr behind `CONTAINMENT_FAILED` and exits with `CONTAINMENT_STATUS`, so the
SDK raises a containment error rather than "exited during the handshake".

Standard library only, and few imports: it runs with `-I -S`, outside the SDK's
environment, and its start-up is on `Agent.start()`'s path.
"""

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
CONTAINMENT_STATUS = 125
CONTAINMENT_FAILED = "antigravity supervisor: containment could not be enforced:"

if TYPE_CHECKING:
    from . import confine
else:  # run as a script: this directory's confine.py (standard library only)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # `-I` left it out
    import confine


def _prctl(option: int, value: int) -> None:
    confine.libc("prctl", option, value, 0, 0, 0)


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
        contained = b""
        if rules:
            try:
                contained = bytes((confine.contain(rules),))
            except OSError as exc:
                os.write(2, f"{CONTAINMENT_FAILED} {exc}\n".encode())
                os._exit(CONTAINMENT_STATUS)
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # as subprocess does for a child
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        env = _original_environ()
        os.write(1, os.getpid().to_bytes(4, "little") + contained)
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
