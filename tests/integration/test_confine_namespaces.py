"""The kernel's view of a contained agent, on this kernel, as root and as an ordinary user.

`supervisor.py` is driven directly, the way `LocalConnection` runs it, with a generated
probe standing in for the harness: the probe tries what a command could, and prints what
happened (an errno name, or OK) as JSON. Each containment is also shown not holding
without its rule, so that a test can fail. The ordinary user (`agtest`) is made once if
missing; the supervisor runs as it through `setpriv`, so its parent is still this process.
The last test runs the real harness, as the SDK starts it, with a scripted model.
"""

from __future__ import annotations

import json
import os
import pwd
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from antigravity_sdk import policy
from antigravity_sdk.harness import confine
from antigravity_sdk.testing import tool_call

from .conftest import AgentFactory, Workspace

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or confine.landlock_abi() < 6, reason="needs Landlock ABI >= 6"
)


def _readable_supervisor() -> Path:
    """The supervisor and the standard-library modules it loads beside it, copied where an
    ordinary user can read them (a checkout may sit in a directory only root can enter,
    as `mktemp -d` makes it)."""
    area = Path(tempfile.mkdtemp(prefix="antigravity-supervisor-"))
    area.chmod(0o755)
    for name in ("supervisor.py", "supervise.py", "confine.py", "namespaces.py"):
        copy = area / name
        shutil.copyfile(Path(confine.__file__).with_name(name), copy)
        copy.chmod(0o644)
    return area / "supervisor.py"


SUPERVISOR = _readable_supervisor()
USER = "agtest"
READ = 1 | 4 | 8  # execute, read files, list directories
WRITE = ((1 << 16) - 1) & ~((1 << 6) | (1 << 11) | (1 << 15))
DEVICE = 2 | 4 | (1 << 14) | (1 << 15)
ALL_BITS = 511

PRELUDE = """#!{python}
import ctypes, errno, json, os, socket, subprocess, sys, time
R = {{}}
def attempt(name, fn):
    try:
        value = fn()
        R[name] = "OK" if value is None else value
    except OSError as exc:
        R[name] = errno.errorcode.get(exc.errno, str(exc))
def done():
    print(json.dumps(R), flush=True)
"""

# Run as root: make a user namespace where root maps to root and the user to itself, allow
# no further user namespace in it, become the user, exec the supervisor (its parent: the
# test). Then no namespace can be made at all, as where user namespaces are switched off.
NO_USER_NAMESPACES = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
host, uid, gid = os.getppid(), int(sys.argv[1]), int(sys.argv[2])
go, went = os.pipe()
done, mapped = os.pipe()
helper = os.fork()
if helper == 0:
    os.read(go, 1)
    for name, ident in (("uid_map", uid), ("gid_map", gid)):
        with open(f"/proc/{os.getppid()}/{name}", "w") as f:
            f.write(f"0 0 1\\n{ident} {ident} 1")
    os.write(mapped, b"x")
    os._exit(0)
assert libc.unshare(0x10000000) == 0
os.write(went, b"x")
os.read(done, 1)
os.waitpid(helper, 0)
with open("/proc/sys/user/max_user_namespaces", "w") as f:
    f.write("0")
os.setgroups([])
os.setresgid(gid, gid, gid)
os.setresuid(uid, uid, uid)
os.execv(sys.argv[3], [sys.argv[3], "-I", "-S", *sys.argv[4:5], str(host), *sys.argv[5:]])
"""


@dataclass
class Who:
    name: str  # "root", USER, or "no-userns" (the user, where no namespace can be made)
    python: str
    uid: int = 0
    gid: int = 0

    @property
    def root(self) -> bool:
        return self.name == "root"


@pytest.fixture(scope="session")
def user() -> tuple[int, int, str]:
    """The ordinary user (made if missing) and a Python it can run."""
    if os.geteuid() != 0:
        pytest.skip("making and becoming the ordinary user needs root")
    try:
        entry = pwd.getpwnam(USER)
    except KeyError:
        made = subprocess.run(["useradd", "-m", USER], capture_output=True)
        if made.returncode != 0:
            pytest.skip(f"useradd {USER} failed: {made.stderr.decode().strip()}")
        entry = pwd.getpwnam(USER)
    script = Path(tempfile.mkdtemp(prefix="agconfine-", dir="/tmp")) / "check"
    try:
        script.parent.chmod(0o755)
        for python in (sys.executable, "/usr/bin/python3", shutil.which("python3") or ""):
            script.write_text(f"#!{python}\n")  # as the probe runs: by its #! line
            script.chmod(0o755)
            if python and _as_user(entry.pw_uid, entry.pw_gid, [str(script)]) == 0:
                return entry.pw_uid, entry.pw_gid, python
    finally:
        shutil.rmtree(script.parent)
    pytest.skip(f"no Python {USER} can run")


def _as_user(uid: int, gid: int, argv: list[str]) -> int:
    """Run `argv` as the user; through a shell, since setpriv execs it still holding root's
    capabilities (a path the user cannot reach would run)."""
    setpriv = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]
    shell = ["/bin/sh", "-c", 'exec "$@"', "sh"]
    return subprocess.run([*setpriv, *shell, *argv], capture_output=True).returncode


@pytest.fixture(params=["root", USER])
def who(request: pytest.FixtureRequest) -> Who:
    if request.param == "root":
        if os.geteuid() != 0:
            pytest.skip("runs as root")
        return Who("root", sys.executable)
    uid, gid, python = request.getfixturevalue("user")
    return Who(request.param, python, uid, gid)


@pytest.fixture
def areas() -> Iterator[Callable[[Who], Path]]:
    """Make directories `who` can reach: `ws` (a writable root), `outside` (not one)."""
    made: list[Path] = []

    def make(who: Who) -> Path:
        path = Path(tempfile.mkdtemp(prefix="agconfine-", dir="/tmp"))
        made.append(path)
        (path / "ws").mkdir()
        (path / "outside").mkdir()
        (path / "outside" / "file").write_text("outside")
        for p in (path, *path.rglob("*")):
            os.chown(p, who.uid, who.gid)
        path.chmod(0o755)
        return path

    yield make
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def area(who: Who, areas: Callable[[Who], Path]) -> Path:
    return areas(who)


@dataclass
class Supervised:
    proc: subprocess.Popen[bytes]
    pid: int  # the harness's, as announced
    bits: int
    sockets: list[socket.socket] = field(default_factory=list)

    def finish(self, timeout: float = 20) -> tuple[int, dict[str, object], str]:
        """The supervisor's exit status, the probe's report, the supervisor's stderr."""
        if self.proc.stdin is not None and self.proc.stdin.closed:
            self.proc.stdin = None
        out, err = self.proc.communicate(timeout=timeout)
        lines = [line for line in out.decode().splitlines() if line.startswith("{")]
        return self.proc.returncode, json.loads(lines[-1]) if lines else {}, err.decode()


def base_rules(area: Path) -> list[str]:
    devices = [f"fs:{DEVICE}:/dev/{d}" for d in ("null", "zero", "tty", "ptmx", "pts")]
    return [f"fs:{READ}:/", f"fs:{WRITE}:{area / 'ws'}", "fs:8:/dev", *devices, "scope"]


def receive_sockets(channel: socket.socket) -> list[socket.socket]:
    """The SDK's side of the channel: `b"AGSOCK" + count`, the descriptors as
    SCM_RIGHTS (listeners in rule order, then the dial sockets)."""
    channel.settimeout(10)
    data, fds, _, _ = socket.recv_fds(channel, 64, 254)
    assert data[:6] == b"AGSOCK" and len(data) == 7 and data[6] == len(fds), (data, fds)
    return [socket.socket(fileno=fd) for fd in fds]


def start(
    who: Who, area: Path, rules: list[str], probe: str, *, channel: bool = False
) -> Supervised:
    """Write `probe` (Python, after PRELUDE) and run it under the supervisor as `who`."""
    script = area / "probe"
    script.write_text(PRELUDE.format(python=who.python) + probe)
    script.chmod(0o755)
    ours, theirs = socket.socketpair() if channel else (None, None)
    if theirs is not None:
        rules = [*rules, f"channel:{theirs.fileno()}"]
    if who.name == "no-userns":
        wrapper = area / "no-userns.py"
        wrapper.write_text(NO_USER_NAMESPACES)
        ids = [str(who.uid), str(who.gid), who.python, str(SUPERVISOR)]
        argv = [sys.executable, str(wrapper), *ids, str(script), *rules]
    else:
        argv = [who.python, "-I", "-S", str(SUPERVISOR), str(os.getpid()), str(script), *rules]
        if not who.root:
            setpriv = ["setpriv", f"--reuid={who.uid}", f"--regid={who.gid}", "--clear-groups"]
            argv = [*setpriv, "--", *argv]
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
        pass_fds=(theirs.fileno(),) if theirs is not None else (),
    )
    if theirs is not None:
        theirs.close()
    assert proc.stdout is not None
    header = b""
    while len(header) < 6:
        ready, _, _ = select.select([proc.stdout], [], [], 10)
        chunk = os.read(proc.stdout.fileno(), 6 - len(header)) if ready else b""
        if not chunk:
            proc.kill()
            _, err = proc.communicate()
            pytest.fail(f"no announcement (status {proc.returncode}): {err.decode()}")
        header += chunk
    pid, bits = int.from_bytes(header[:4], "little"), int.from_bytes(header[4:], "little")
    supervised = Supervised(proc, pid, bits)
    if ours is not None:
        supervised.sockets = receive_sockets(ours)
        ours.close()
    return supervised


def run(who: Who, area: Path, rules: list[str], probe: str) -> tuple[int, dict[str, object], int]:
    supervised = start(who, area, rules, probe + "\ndone()\n")
    status, report, err = supervised.finish()
    assert status == 0, err
    return supervised.bits, report, status


def alive_with(marker: str) -> list[int]:
    """Processes on the host whose command line holds `marker`."""
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(name))
        except (OSError, ValueError):
            continue
    return found


# -- the read-only tree -------------------------------------------------------------------

READ_ONLY_PROBE = """
ws, out = sys.argv[0].rsplit("/", 1)[0] + "/ws", sys.argv[0].rsplit("/", 1)[0] + "/outside"
attempt("chmod outside", lambda: os.chmod(out + "/file", 0o777))
attempt("chown outside", lambda: os.chown(out + "/file", os.getuid(), os.getgid()))
attempt("utime outside", lambda: os.utime(out + "/file", (1, 1)))
attempt("setxattr outside", lambda: os.setxattr(out + "/file", "user.x", b"1"))
attempt("create outside", lambda: open(out + "/new", "w").close())
attempt("write ws", lambda: open(ws + "/new", "w").write("x") and None)
attempt("chmod ws", lambda: os.chmod(ws + "/new", 0o600))
attempt("write hooks", lambda: open(ws + "/.git/hooks/pre-commit", "w").close())
attempt("write config", lambda: open(ws + "/.git/config", "a").close())
attempt("move hooks", lambda: os.rename(ws + "/.git/hooks", ws + "/.git/h"))
attempt("remove config", lambda: os.unlink(ws + "/.git/config"))
attempt("write git", lambda: open(ws + "/.git/HEAD", "w").write("ref") and None)
attempt("unlink link", lambda: os.unlink(ws + "/link"))
attempt("dev null", lambda: open("/dev/null", "w").write("x") and None)
import pty
attempt("pty", lambda: os.ttyname(pty.openpty()[1]))
"""


@pytest.mark.parametrize("readonly", [True, False])
def test_only_the_writable_roots_are_writable(who: Who, area: Path, readonly: bool) -> None:
    ws = area / "ws"
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / "link").symlink_to(area / "outside")
    for p in ws.rglob("*"):
        os.lchown(p, who.uid, who.gid)
    mounts = [
        "readonly",
        f"rw:{ws}",
        f"rw:{ws / '.git'}",  # pinned: a mount point cannot be moved aside
        f"protect:{ws / '.git' / 'hooks'}",
        f"protect:{ws / '.git' / 'config'}",
        f"protect:{ws / 'link'}",  # the link itself, not followed
        f"protect:{ws / 'missing'}",  # skipped
    ]
    rules = base_rules(area) + (mounts if readonly else [])
    bits, report, _ = run(who, area, rules, READ_ONLY_PROBE)
    assert report["write ws"] == report["chmod ws"] == report["write git"] == "OK"
    assert report["dev null"] == "OK" and str(report["pty"]).startswith("/dev/pts/")
    if not readonly:  # Landlock alone: metadata outside the roots changes
        assert report["chmod outside"] == report["utime outside"] == "OK"
        assert report["create outside"] == "EACCES"
        assert not bits & confine.READONLY
        return
    assert bits & confine.READONLY
    for name in ("chmod", "chown", "utime", "setxattr", "create"):
        assert report[f"{name} outside"] == "EROFS", (name, report)
    assert report["write hooks"] == report["write config"] == "EROFS"
    assert report["move hooks"] == report["remove config"] == report["unlink link"] == "EBUSY"
    assert (area / "outside" / "file").stat().st_mode & 0o777 != 0o777
    assert (ws / "link").is_symlink() and (ws / ".git" / "config").read_text() == "[core]\n"


def test_a_symlinked_writable_root_is_not_followed(who: Who, area: Path) -> None:
    (area / "ws" / "to-outside").symlink_to(area / "outside")
    rules = [*base_rules(area), "readonly", f"rw:{area / 'ws' / 'to-outside'}"]
    probe = 'attempt("write", lambda: open(sys.argv[0][:-5] + "outside/x", "w").close())'
    assert run(who, area, rules, probe)[1]["write"] == "EROFS"


# -- masked sockets -----------------------------------------------------------------------


def _unix_server(path: Path) -> socket.socket:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    path.chmod(0o777)
    server.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.sendall(b"hello")
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return server


@pytest.mark.parametrize("masked", [True, False])
def test_a_masked_socket_refuses_connections(who: Who, area: Path, masked: bool) -> None:
    outside, inside = area / "outside" / "s.sock", area / "ws" / "t.sock"
    servers = [_unix_server(outside), _unix_server(inside)]
    try:
        rules = [*base_rules(area), "readonly", f"rw:{area / 'ws'}", f"mask:{area / 'gone'}"]
        if masked:
            rules.append(f"mask:{outside}")
        probe = f"""
def talk(path):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(path)
        return s.recv(10).decode()
attempt("outside", lambda: talk({str(outside)!r}))
attempt("inside", lambda: talk({str(inside)!r}))
"""
        _, report, _ = run(who, area, rules, probe)
    finally:
        for server in servers:
            server.close()
    assert report["inside"] == "hello"
    assert report["outside"] == ("ECONNREFUSED" if masked else "hello")


def test_containment_fails_closed(tmp_path: Path) -> None:
    failing = [
        ("bogus", "unknown rule 'bogus'"),
        ("listen:80", "listen: and dial: rules need a channel: rule"),
        (f"mask:{tmp_path}", f"mask {tmp_path}: Invalid argument"),  # a directory
    ]
    for rule, reason in failing:
        supervised = subprocess.run(
            [sys.executable, "-I", "-S", SUPERVISOR, str(os.getpid()), "/bin/true", rule],
            capture_output=True,
        )
        assert supervised.returncode == 125
        assert supervised.stderr.decode().startswith("antigravity supervisor: containment")
        assert reason in supervised.stderr.decode()


# -- processes ----------------------------------------------------------------------------

PID_PROBE = """
R["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
R["me"] = os.getpid()
R["pid 1"] = open("/proc/1/cmdline", "rb").read().decode().split("\\0")
attempt("pid 1 environ", lambda: open("/proc/1/environ", "rb").read() and None)
attempt("kill pid 1", lambda: os.kill(1, 9))
done()
sys.stdin.read()
"""


def test_the_agent_sees_only_its_own_processes(who: Who, area: Path) -> None:
    # (`caps`: root's CAP_PERFMON would read any process's environ, Landlock or not)
    supervised = start(who, area, [*base_rules(area), "pid", "readonly", "caps"], PID_PROBE)
    try:
        assert supervised.proc.stdout is not None
        report = json.loads(supervised.proc.stdout.readline())
        # From outside: the pid announced is the probe's, its parent the reaper (pid 1
        # inside), whose parent is the supervisor.
        with open(f"/proc/{supervised.pid}/status") as f:
            status = dict(line.split(":", 1) for line in f)
        assert status["NSpid"].split() == [str(supervised.pid), "2"]
        reaper = int(status["PPid"])
        with open(f"/proc/{reaper}/stat") as f:
            assert int(f.read().rsplit(")", 1)[1].split()[1]) == supervised.proc.pid
    finally:
        supervised.proc.stdin.close()  # type: ignore[union-attr]
        status_code, _, err = supervised.finish()
    assert status_code == 0, err
    assert supervised.bits & confine.PROCESSES
    assert report["me"] == 2 and 1 in report["pids"]
    assert os.getpid() not in report["pids"] and supervised.proc.pid not in report["pids"]
    assert max(report["pids"]) < 50  # this namespace's, not the host's
    assert report["pid 1"][3].endswith("supervisor.py")  # the reaper
    assert report["pid 1 environ"] == "EACCES" and report["kill pid 1"] == "EPERM"


@pytest.mark.parametrize(("end", "status"), [("sys.exit(3)", 3), ("os.kill(os.getpid(), 9)", -9)])
@pytest.mark.parametrize("pid", [True, False])
def test_the_harness_status_comes_back_and_nothing_outlives_it(
    who: Who, area: Path, end: str, status: int, pid: bool
) -> None:
    marker = f"{time.monotonic_ns() % 10**6}.5"
    probe = f"""
subprocess.Popen(["setsid", "sleep", "{marker}"], start_new_session=True)
if os.fork() == 0:  # an orphan too
    os.execvp("sleep", ["sleep", "{marker}"])
time.sleep(0.2)
print("ready", flush=True)
sys.stdin.readline()
{end}
"""
    rules = [*base_rules(area), *(["pid"] if pid else [])]
    supervised = start(who, area, rules, probe)
    assert supervised.proc.stdout is not None and supervised.proc.stdin is not None
    assert supervised.proc.stdout.readline() == b"ready\n"
    assert len(alive_with(marker)) == 2
    supervised.proc.stdin.write(b"end\n")
    supervised.proc.stdin.flush()
    code, _, err = supervised.finish()
    assert code == status, err
    assert alive_with(marker) == []


def test_sigterm_ends_everything(who: Who, area: Path) -> None:
    marker = f"{time.monotonic_ns() % 10**6}.25"
    probe = f"""
subprocess.Popen(["setsid", "sleep", "{marker}"], start_new_session=True)
print("ready", flush=True)
time.sleep(60)
"""
    supervised = start(who, area, [*base_rules(area), "pid"], probe)
    assert supervised.proc.stdout is not None
    assert supervised.proc.stdout.readline() == b"ready\n"
    deadline = time.monotonic() + 5
    found = alive_with(marker)
    while len(found) != 1 and time.monotonic() < deadline:
        time.sleep(0.01)  # (setsid forks before it execs: a cmdline read mid-exec is empty)
        found = alive_with(marker)
    assert len(found) == 1
    supervised.proc.send_signal(signal.SIGTERM)
    code, _, _ = supervised.finish()
    assert code == -signal.SIGKILL  # the harness's own end
    assert alive_with(marker) == []


HOST = """
import os, subprocess, sys
supervisor = subprocess.Popen([sys.executable, "-I", "-S", *sys.argv[1:2], str(os.getpid()),
                               *sys.argv[2:]], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
head = supervisor.stdout.read(6)
supervisor.stdout.readline()  # the probe is ready
print(supervisor.pid, flush=True)
os._exit(0)  # dies: the supervisor gets SIGHUP, the harness EOF on its stdin
"""


def test_the_host_dying_ends_everything(who: Who, area: Path) -> None:
    """A harness that ignores the EOF (frozen, say) is killed after the grace."""
    marker = f"{time.monotonic_ns() % 10**6}.75"
    probe = f"""
subprocess.Popen(["setsid", "sleep", "{marker}"], start_new_session=True)
time.sleep(0.2)
print("ready", flush=True)
time.sleep(60)
"""
    (area / "probe").write_text(PRELUDE.format(python=who.python) + probe)
    (area / "probe").chmod(0o755)
    (area / "host.py").write_text(HOST)
    argv = [who.python, str(area / "host.py"), str(SUPERVISOR), str(area / "probe")]
    argv += [*base_rules(area), "pid"]
    if not who.root:
        argv = ["setpriv", f"--reuid={who.uid}", f"--regid={who.gid}", "--clear-groups", *argv]
    host = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert host.stdout is not None
    supervisor = int(host.stdout.readline())
    assert host.wait(timeout=5) == 0
    assert alive_with(marker)  # (within the grace)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _running(supervisor):
        time.sleep(0.05)
    assert not _running(supervisor)
    assert alive_with(marker) == []


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# -- hostname, capabilities, the filter ---------------------------------------------------


def test_the_hostname_is_the_agents_own(who: Who, area: Path) -> None:
    host = os.uname().nodename
    probe = """
R["uts"] = os.readlink("/proc/self/ns/uts")
R["set"] = subprocess.run(["hostname", "agent-inside"], capture_output=True).returncode
R["name"] = os.uname().nodename
"""
    bits, report, _ = run(who, area, [*base_rules(area), "uts"], probe)
    assert bits & confine.HOSTNAME
    assert report["uts"] != os.readlink("/proc/self/ns/uts")
    if who.root:  # with its capabilities: renamed inside only
        assert report["set"] == 0 and report["name"] == "agent-inside"
    assert os.uname().nodename == host


CAPS_PROBE = """
status = dict(l.split(":", 1) for l in open("/proc/self/status"))
for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs"):
    R[key] = int(status[key], 16)
ws = sys.argv[0][:-5] + "ws"
open(ws + "/f", "w").close()
attempt("chown", lambda: os.chown(ws + "/f", 1, 1))
attempt("setcap", lambda: subprocess.run(["setcap", "cap_net_raw+ep", ws + "/f"],
        capture_output=True).returncode or None)
attempt("raw socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, 1).close())
attempt("packet socket", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW).close())
attempt("sethostname", lambda: socket.sethostname("x"))
libc = ctypes.CDLL(None, use_errno=True)
def mount():
    if libc.mount(b"tmpfs", ws.encode(), b"tmpfs", 0, None):
        raise OSError(ctypes.get_errno(), "mount")
attempt("mount", mount)
"""


@pytest.mark.parametrize("caps", [True, False])
def test_root_has_no_capabilities(areas: Callable[[Who], Path], caps: bool) -> None:
    if os.geteuid() != 0:
        pytest.skip("runs as root")
    who = Who("root", sys.executable)
    area = areas(who)
    rules = [*base_rules(area), "readonly", f"rw:{area / 'ws'}", "uts", "pid"]
    bits, report, _ = run(who, area, [*rules, *(["caps"] if caps else [])], CAPS_PROBE)
    if not caps:  # what root could do without it
        assert report["chown"] == "OK" and report["CapEff"]
        return
    assert bits & confine.NO_CAPABILITIES and report["NoNewPrivs"] == 1
    assert [report[k] for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")] == [0] * 5
    assert report["chown"] == report["raw socket"] == report["sethostname"] == "EPERM"
    assert report["mount"] == "EPERM" and report["setcap"] not in ("OK", 0)
    assert report["packet socket"] == "EAFNOSUPPORT"  # the filter, before the capability


def test_the_user_has_no_capabilities_in_its_namespaces(
    user: tuple[int, int, str], areas: Callable[[Who], Path]
) -> None:
    who = Who(USER, user[2], user[0], user[1])
    path = areas(who)
    bits, report, _ = run(who, path, [*base_rules(path), "pid", "caps"], CAPS_PROBE)
    assert bits & confine.NO_CAPABILITIES
    assert [report[k] for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")] == [0] * 5


def test_other_processes_memory_is_refused(who: Who, area: Path) -> None:
    probe = """
sibling = subprocess.Popen(["sleep", "10"])
libc = ctypes.CDLL(None, use_errno=True)
def call(result):
    if result == -1:
        raise OSError(ctypes.get_errno(), "")
attempt("ptrace", lambda: call(libc.ptrace(16, sibling.pid, None, None)))  # ATTACH
local, remote = ctypes.create_string_buffer(8), (ctypes.c_size_t * 2)(0x10000, 8)
iov = (ctypes.c_size_t * 2)(ctypes.addressof(local), 8)
for name in ("process_vm_readv", "process_vm_writev"):
    attempt(name, lambda: call(getattr(libc, name)(sibling.pid, iov, 1, remote, 1, 0)))
attr = (ctypes.c_uint32 * 32)(1, 128)  # PERF_TYPE_SOFTWARE, size
attempt("perf_event_open", lambda: call(libc.syscall(298 if os.uname().machine == "x86_64"
        else 241, attr, 0, -1, -1, 0)))
sibling.kill()
"""
    bits, report, _ = run(who, area, base_rules(area), probe)
    assert bits & confine.GUARDED
    for name in ("ptrace", "process_vm_readv", "process_vm_writev", "perf_event_open"):
        assert report[name] == "EPERM", (name, report)


# -- /dev/shm -----------------------------------------------------------------------------


@pytest.mark.parametrize("shm", [True, False])
def test_dev_shm_is_the_agents_own(who: Who, area: Path, shm: bool) -> None:
    name = f"agconfine-{os.getpid()}-{time.monotonic_ns()}"
    (Path("/dev/shm") / f"{name}-host").write_text("host")
    try:
        probe = f"""
attempt("host's", lambda: open("/dev/shm/{name}-host").read())
attempt("own", lambda: open("/dev/shm/{name}", "w").close())
"""
        rules = [*base_rules(area), "readonly", *(["shm"] if shm else [])]
        bits, report, _ = run(who, area, rules, probe)
    finally:
        (Path("/dev/shm") / f"{name}-host").unlink()
    assert not (Path("/dev/shm") / name).exists()
    if shm:
        assert bits & confine.SHM and report == {"host's": "ENOENT", "own": "OK"}
    else:
        assert not bits & confine.SHM and report["own"] == "EROFS"


# -- the network --------------------------------------------------------------------------

NET_PROBE = """
host_port, listen_port, inner_port = {ports}
R["interfaces"] = [name for _, name in socket.if_nameindex()]
def reach(port):
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(b"from-inside")
attempt("host", lambda: reach(host_port))
server = socket.create_server(("127.0.0.1", inner_port))
print("ready", flush=True)
conn, _ = server.accept()
conn.sendall(b"echo:" + conn.recv(100))
conn.close()
attempt("listener", lambda: reach(listen_port))
done()
"""


@pytest.mark.parametrize("net", [True, False])
def test_the_agent_has_only_its_own_loopback(who: Who, area: Path, net: bool) -> None:
    host = socket.create_server(("127.0.0.1", 0))
    host.settimeout(5)
    host_port = host.getsockname()[1]
    spare = socket.create_server(("127.0.0.1", 0))  # free on the host too, for the fallback
    listen_port, inner_port = spare.getsockname()[1], 0
    spare.close()
    with socket.socket() as probe_port:
        probe_port.bind(("127.0.0.1", 0))
        inner_port = probe_port.getsockname()[1]
    ports = (host_port, listen_port, inner_port)
    rules = [*base_rules(area), *(f"connect:{p}" for p in ports), f"bind:{inner_port}"]
    rules += [*(["net"] if net else []), f"listen:{listen_port}", "dial:2"]
    supervised = start(who, area, rules, NET_PROBE.format(ports=ports), channel=True)
    try:
        assert supervised.proc.stdout is not None
        assert supervised.proc.stdout.readline() == b"ready\n"
        if not net:  # no namespace: nothing handed over, the host's loopback reached
            assert supervised.sockets == [] and not supervised.bits & confine.NETWORK
            host.accept()[0].close()
            with socket.create_connection(("127.0.0.1", inner_port)) as s:
                s.sendall(b"x")
            return
        assert supervised.bits & confine.NETWORK
        listener, *dial = supervised.sockets
        assert len(dial) == 2 and listener.getsockname() == ("127.0.0.1", listen_port)
        dial[0].settimeout(5)
        dial[0].connect(("127.0.0.1", inner_port))  # the probe's server, inside
        dial[0].sendall(b"hi")
        assert dial[0].recv(100) == b"echo:hi"
        listener.settimeout(5)
        conn, _ = listener.accept()
        assert conn.recv(100) == b"from-inside"
        conn.close()
        code, report, err = supervised.finish()
        assert code == 0, err
        assert report["interfaces"] == ["lo"] and report["host"] == "ECONNREFUSED"
        assert report["listener"] == "OK"
    finally:
        for sock in (host, *supervised.sockets):
            sock.close()
        if supervised.proc.poll() is None:
            supervised.proc.kill()
            supervised.proc.communicate()


# -- all of it, and where no namespace can be made ----------------------------------------


def test_every_bit_as_root_and_as_the_user(who: Who, area: Path) -> None:
    rules = [*base_rules(area), "readonly", f"rw:{area / 'ws'}", "shm", "pid", "uts"]
    rules += ["caps", "net", "listen:3128", "dial:1"]
    supervised = start(who, area, rules, "done()", channel=True)
    assert supervised.finish()[0] == 0
    assert supervised.bits == ALL_BITS and len(supervised.sockets) == 2
    for sock in supervised.sockets:
        sock.close()


def test_without_user_namespaces_the_rest_holds(
    user: tuple[int, int, str], areas: Callable[[Who], Path]
) -> None:
    who = Who("no-userns", user[2], user[0], user[1])
    path = areas(who)
    rules = [*base_rules(path), "readonly", f"rw:{path / 'ws'}", "shm", "pid", "uts"]
    rules += ["caps", "net", "listen:3128", "dial:1"]
    probe = """
attempt("write outside", lambda: open(sys.argv[0][:-5] + "outside/x", "w").close())
attempt("write ws", lambda: open(sys.argv[0][:-5] + "ws/x", "w").close())
R["me"] = os.getpid()
"""
    supervised = start(who, path, rules, probe + "done()\n", channel=True)
    code, report, err = supervised.finish()
    assert code == 0, err
    assert supervised.sockets == []  # `AGSOCK\0`: the SDK falls back to port rules
    assert supervised.bits == confine.GUARDED | confine.NO_CAPABILITIES
    assert report["write outside"] == "EACCES" and report["write ws"] == "OK"
    assert report["me"] == supervised.pid


# -- the real harness ---------------------------------------------------------------------


async def test_a_command_leaves_no_setuid_file_and_opens_no_vsock(
    make_agent: AgentFactory, env: Workspace
) -> None:
    """A setuid file left in the workspace would run as the agent's user (here root) for
    anyone after the session; `AF_VSOCK` reaches the hypervisor's host past the agent's
    network namespace. Each is refused; an ordinary `chmod` still works."""
    ws = env.ws
    for name in ("f", "g"):
        (ws / name).write_text("#!/bin/sh\n")
        (ws / name).chmod(0o644)
    report, script = ws / "report.txt", ws / "attack.sh"
    attempts = [
        ("setuid", "chmod 4755 f"),
        ("setgid", "chmod g+s f"),
        ("vsock", 'python3 -c "import socket; socket.socket(40, 1)"'),
        ("chmod 755", "chmod 755 g"),
    ]
    lines = ["#!/bin/sh", f"exec >>'{report}' 2>&1"]
    for name, command in attempts:
        lines.append(f'if {command}; then echo "{name}: ESCAPED"; else echo "{name}: denied"; fi')
    script.write_text("\n".join([*lines, "echo end", ""]))
    run = tool_call("run_command", CommandLine=f"sh {script}", Cwd=str(ws), WaitMsBeforeAsync=15000)
    agent, _ = make_agent([run, "done"], policies=[policy.allow_all()])
    async with agent:
        await agent.chat("go")
    text = report.read_text()
    assert text.rstrip().endswith("end"), text
    for name in ("setuid", "setgid", "vsock"):
        assert f"{name}: denied" in text, text
    assert "Operation not permitted" in text and "Address family not supported" in text, text
    assert "chmod 755: ESCAPED" in text, text  # allowed: it ran
    assert (ws / "f").stat().st_mode & 0o7777 == 0o644
    assert (ws / "g").stat().st_mode & 0o7777 == 0o755
