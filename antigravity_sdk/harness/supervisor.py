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

Containment: RULEs, when given, are put in force in the harness's process before it
writes its pid and execs (`confine.contain`: namespaces, mounts, its network, `/proc`, a
seccomp filter, no capabilities, then Landlock), so the harness and everything it ever
starts are inside one irrevocable domain; this process stays outside it, and outside every
namespace but, when not root and `pid` is asked for, a user namespace that keeps its uid
(it reads the host's /proc and kills). The rules (`confine.Plan`; one it does not know is
an error):

    fs:RIGHTS:PATH  connect:PORT  bind:PORT  scope      Landlock
    readonly  rw:PATH  protect:PATH  mask:PATH  shm    mounts (`namespaces.mount`)
    pid  uts  net  caps                                 namespaces, capabilities
    channel:FD  listen:PORT  dial:N                     the network's sockets, to the SDK

With `pid`, this process makes a pid namespace before it forks: its child is pid 1 there,
the agent's reaper, and forks the harness (pid 2 inside). The reaper reaps every orphan
and, when the harness exits, passes its raw wait status here through a pipe and exits; the
kernel then kills all left in the namespace. The pid written is the harness's as this
process (and the SDK) sees it. Process tree: SDK > supervisor > reaper (pid 1) > harness
(pid 2) > commands; without `pid`: SDK > supervisor > harness > commands.

The pid is followed by two bytes, little-endian: `contain`'s result bits (`confine`'s
CONTAINED_TERMINALS, CONTAINED_IPC, GUARDED, NETWORK, PROCESSES, HOSTNAME, READONLY,
NO_CAPABILITIES, SHM; each set only if that step took effect). With `channel:FD` (one end
of an AF_UNIX SOCK_STREAM socketpair the SDK passed), the harness's process first sends
one message on FD and closes it: the data `b"AGSOCK"` and a count byte, and as SCM_RIGHTS
that many descriptors, made inside the agent's own network namespace (`net`): one TCP
socket listening on 127.0.0.1:PORT (backlog 128) per `listen:PORT` in rule order, then N
unconnected TCP sockets for `dial:N` (the SDK connects them to the harness inside). Where
the agent has no network of its own, the count is 0 and no descriptor comes.

If the rules cannot be enforced (an unknown rule, Landlock or the filter refused, a mount
asked for failed), the process says why on stderr behind `CONTAINMENT_FAILED` and exits
with `CONTAINMENT_STATUS`, so the SDK raises a containment error rather than "exited
during the handshake"; where namespaces cannot be made at all (user namespaces off),
the rest is put in force and the bits say what is missing.

Standard library only, and few imports: it runs with `-I -S`, outside the SDK's
environment, and its start-up is on `Agent.start()`'s path. So this script is only its
entry point: the body is `supervise.py`, a module, whose bytecode Python caches (a script
is compiled on every run, ~2 ms for the body).
"""

import sys

TYPE_CHECKING = False  # as `typing` has it, without importing `typing` (~10 ms)
if TYPE_CHECKING or __package__:
    from . import supervise
else:  # run as a script: this directory's modules (standard library only)
    import os

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # `-I` left it out
    import supervise

__all__ = ["CONTAINMENT_FAILED", "CONTAINMENT_STATUS"]

CONTAINMENT_STATUS = supervise.CONTAINMENT_STATUS
CONTAINMENT_FAILED = supervise.CONTAINMENT_FAILED

if __name__ == "__main__":
    supervise.main(sys.argv[1:])
