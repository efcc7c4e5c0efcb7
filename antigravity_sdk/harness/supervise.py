"""The supervisor's body: `supervisor.py` (its docstring says what it does and why) runs
`main`. A module, so that its bytecode is cached; standard library only."""

import os
import time

TYPE_CHECKING = False  # as `typing` has it, without importing `typing` (~10 ms)
if TYPE_CHECKING:
    import signal
    from typing import NoReturn
else:  # the same functions and numbers, without `signal`'s enums (~10 ms of start-up)
    import _signal as signal

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_HOST_GONE_GRACE = 1.0  # seconds the harness gets to exit on its own when the host dies
_KILL_DEADLINE = 2.0  # seconds to kill and reap every descendant
_SIGNALS = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
CONTAINMENT_STATUS = 125
CONTAINMENT_FAILED = "antigravity supervisor: containment could not be enforced:"

if TYPE_CHECKING or __package__:
    from . import confine, namespaces
else:  # run by supervisor.py: this directory's modules
    import confine
    import namespaces


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
    """The forked child (the harness, or the reaper of its pid namespace) and, once
    reaped, the harness's wait status."""

    def __init__(self, pid: int, relay: int) -> None:
        self.pid = pid
        self.relay = relay  # the reaper's pipe: the harness's own status (or -1)
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
                self.status = self._relayed(status)

    def _relayed(self, status: int) -> int:
        """The harness's status the reaper passed on, else the reaper's own (killed)."""
        if self.relay < 0:
            return status
        try:
            data = os.read(self.relay, 4)
        except BlockingIOError:
            data = b""
        os.close(self.relay)
        self.relay = -1
        return int.from_bytes(data, "little") if len(data) == 4 else status

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


def _fail(reason: object) -> "NoReturn":
    try:  # noqa: SIM105 (contextlib would cost ~10 ms of start-up)
        os.write(2, f"{CONTAINMENT_FAILED} {reason}\n".encode())
    except OSError:
        pass
    os._exit(CONTAINMENT_STATUS)


def _outer_parent() -> int:
    """This process's parent as the host's /proc sees it (`getppid()` is 0 for a pid
    namespace's pid 1)."""
    with open("/proc/self/stat", "rb") as f:
        return int(f.read().rsplit(b")", 1)[1].split()[1])


def _detach(plan: confine.Plan | None) -> None:
    """Leave the handshake pipes (and the SDK's channel) to the harness alone: the host
    sees EOF when it dies."""
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    if plan is not None and plan.channel >= 0:
        os.close(plan.channel)


def _exec_harness(path: str, supervisor: int, plan: confine.Plan | None, made: int) -> None:
    """In the harness's process: die with its parent, enter the containment, announce
    the pid, become the harness."""
    try:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if made & namespaces.CLONE_NEWPID:  # its pid outside, before /proc is the agent's
            pid = int(os.readlink("/proc/self"))
        elif os.getppid() != supervisor:  # the supervisor died before the prctl
            os._exit(1)
        else:
            pid = os.getpid()
        env = _original_environ()
        contained = b""
        if plan is not None:
            try:
                bits = confine.contain(
                    plan,
                    user_namespace=bool(made & namespaces.CLONE_NEWUSER),
                    pid_namespace=bool(made & namespaces.CLONE_NEWPID),
                )
            except OSError as exc:
                _fail(exc)
            contained = bits.to_bytes(2, "little")
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # as subprocess does for a child
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        os.write(1, pid.to_bytes(4, "little") + contained)
        os.execve(path, [path], env)
    except BaseException as exc:
        _note(f"cannot start the harness {path}: {exc}")
    os._exit(127)


def _reap_namespace(path: str, supervisor: int, plan: confine.Plan, made: int, relay: int) -> None:
    """Pid 1 of the agent's pid namespace: fork the harness, reap every orphan; when the
    harness exits, write its wait status to `relay` and exit (the kernel then SIGKILLs
    every process left in the namespace)."""
    try:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if _outer_parent() != supervisor:  # the supervisor died before the prctl
            os._exit(1)
        _prctl(_PR_SET_DUMPABLE, 0)  # its /proc/1 files: root's, for the agent
        harness = os.fork()
        if harness == 0:
            os.close(relay)
            _prctl(_PR_SET_DUMPABLE, 1)  # (inherited; its own /proc files are its own)
            _exec_harness(path, supervisor, plan, made)
        _detach(plan)
        while True:
            signal.sigwaitinfo({signal.SIGCHLD})
            while (reaped := os.waitpid(-1, os.WNOHANG))[0]:
                if reaped[0] == harness:
                    os.write(relay, reaped[1].to_bytes(4, "little"))
                    os._exit(0)
    except BaseException as exc:
        _note(f"the agent's reaper failed: {exc}")
    os._exit(1)


def main(argv: list[str]) -> None:
    host, path, rules = int(argv[0]), argv[1], argv[2:]
    plan = None
    if rules:
        try:
            plan = confine.Plan(rules)
        except ValueError as exc:
            _fail(exc)
    signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    made = 0
    if plan is not None and "pid" in plan.switches:
        try:
            made = namespaces.unshare_pid()
        except OSError as exc:  # a user namespace without its uid: not one to go on in
            _fail(f"pid namespace: {exc}")
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGHUP)
    if os.getppid() != host:  # the host died before the prctl: nothing to run for
        _note("the host process is gone")
        os._exit(1)
    me = os.getpid()
    relay, relay_end = os.pipe() if made else (-1, -1)
    pid = os.fork()
    if pid == 0:
        if plan is not None and made:
            os.close(relay)
            _reap_namespace(path, me, plan, made, relay_end)
        _exec_harness(path, me, plan, made)
    if made:
        os.close(relay_end)
        os.set_blocking(relay, False)
    # Only the harness holds the handshake pipes now: the host sees EOF when it dies.
    _detach(plan)
    harness = _Harness(pid, relay)
    harness.run()
    harness.exit()
