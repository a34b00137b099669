"""The supervisor: `python -I -S supervisor.py PARENT_PID -- ARGV...` (built by `lifeline.supervised`).

It runs ARGV as its child, in the process group the caller started it in, and leaves nothing behind:
it is the subreaper of everything ARGV starts (`PR_SET_CHILD_SUBREAPER`), so a process that moves out
of the group (`setsid -f`, a double fork) is still its descendant, and when ARGV exits, when
PARENT_PID dies (the parent-death signal, `SWEEP`) and when the caller sends `SWEEP` (a timeout), it
kills every descendant, then its group. SIGTERM, SIGINT and SIGHUP are passed on to ARGV; after SIGTERM
or SIGHUP, what has not ended TERM_GRACE later is killed with everything it started, before whoever
sent the signal kills the group with the supervisor in it and leaves what moved out of the group
alive (the MCP SDK ends a stdio server that way). The exit status is ARGV's.

A file of its own, run without site and importing only what it needs (no `signal`, whose enums cost
more than the rest, no `typing`): it starts before every hook, every command outside the sandbox and
every MCP server, so its start-up is paid where a person waits (docs/performance.md, "Hooks").
"""

from __future__ import annotations

import ctypes
import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # `signal`'s types: `_signal` is the part of it used here, without the enums
    import signal as _signal
    from types import FrameType
else:
    import _signal

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
SWEEP = _signal.SIGUSR1
"""The parent-death signal, and the caller's word to end ARGV and all it started (`lifeline.SWEEP`)."""
TERM_GRACE = 1.0
"""Seconds ARGV has to end after SIGTERM or SIGHUP; the MCP SDK kills the whole group 2 s after its SIGTERM."""


def _children() -> list[int]:
    """This process's children (one thread: its task's list), or, without that file, those /proc names."""
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children", "rb") as listing:
            return [int(pid) for pid in listing.read().split()]
    except OSError:
        pass
    kids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
        except OSError:  # not a process, or gone
            continue
        if int(fields[1]) == me:
            kids.append(int(entry))
    return kids


def sweep() -> None:
    """Kill every descendant: the children now, then those their deaths hand to the subreaper, until none is left."""
    while True:
        for pid in _children():
            try:
                os.kill(pid, _signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:  # no child at all, living or dead
            return
        time.sleep(0.001)  # a killed child takes a moment to end, and its own children come to us as it does


def _end(signum: int, frame: FrameType | None) -> None:
    sweep()
    if os.getpgid(0) == os.getpid():  # the group is ours alone (started in a new session)
        os.killpg(0, _signal.SIGKILL)
    os._exit(128 + signum)


def _pass_on(child: int, signum: int) -> None:
    try:
        os.kill(child, signum)
    except ProcessLookupError:
        pass
    if signum != _signal.SIGINT and not _signal.getitimer(_signal.ITIMER_REAL)[0]:  # asked to end: a deadline
        _signal.setitimer(_signal.ITIMER_REAL, TERM_GRACE)


def _overdue(signum: int, frame: FrameType | None) -> None:
    _end(_signal.SIGKILL, frame)  # ARGV, killed in the sweep, ends as a SIGKILL ends it


def main() -> None:
    parent, argv = int(sys.argv[1]), sys.argv[3:]
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    _signal.signal(SWEEP, _end)
    prctl(PR_SET_PDEATHSIG, SWEEP, 0, 0, 0)
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the signal was armed
        _end(SWEEP, None)
    me = os.getpid()
    child = os.fork()
    if child == 0:
        try:
            prctl(PR_SET_PDEATHSIG, _signal.SIGKILL, 0, 0, 0)  # were the supervisor itself killed, ARGV goes too
            if os.getppid() != me:  # it was, before the signal was armed
                os._exit(137)
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(2, f"{argv[0]}: {exc.strerror}\n".encode())
        os._exit(127)
    _signal.signal(_signal.SIGALRM, _overdue)
    for sig in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP):
        _signal.signal(sig, lambda signum, frame: _pass_on(child, signum))
    _, status = os.waitpid(child, 0)
    _signal.setitimer(_signal.ITIMER_REAL, 0)  # ARGV ended in time: its own status stands
    sweep()
    sys.exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


if __name__ == "__main__":
    main()
