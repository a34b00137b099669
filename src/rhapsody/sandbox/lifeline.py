"""Nothing outlives rhapsody: every process it starts dies with it, even after `kill -9`.

`preexec()` gives the child the parent-death signal (Linux `prctl(PR_SET_PDEATHSIG,
SIGKILL)`, armed between fork and exec; a child whose parent is already gone by then kills
itself). A `preexec_fn` makes Python fork rhapsody itself, so where util-linux has `setpriv` the
child arms the signal after exec instead: `run` for the calls rhapsody waits for, `dying_with_us`
(setpriv, then a one-line bash check of the parent) for those that may outlive the call.

That covers one process. Commands that start more (bash outside the sandbox, a hook, an MCP
server that spawns workers) run under `supervised(argv)`: a small supervisor (`sandbox/supervisor.py`)
in the command's own process group. It is the subreaper of everything the command starts (Linux
`PR_SET_CHILD_SUBREAPER`), so a process that leaves the group (`setsid -f`, a double fork) is
still its descendant. When the command exits, when rhapsody dies (the supervisor's own
parent-death signal) and when the caller asks (`SWEEP`, on a timeout), it kills every
descendant, then its group. Inside the sandbox bubblewrap's `--die-with-parent` and its PID
namespace do the same. Elsewhere than Linux both are no-ops (`preexec()` is None, `supervised`
returns argv unchanged): the exit-time cleanup in `sandbox/procs.py` remains.

The kernel sends the signal when the *thread* that started the child ends, so a child that
outlives one call is started from the event loop's thread (a worker thread only starts
children it waits for, as `subprocess.run` does).

Stdlib only.
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

PR_SET_PDEATHSIG = 1
SWEEP = signal.SIGUSR1
"""The supervisor's parent-death signal, and the caller's word to end the command and all it started
(SIGTERM stays what it is: a request to stop, passed on to the command; `sandbox/supervisor.py`)."""


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's prctl, looked up once in the parent (never between fork and exec)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def arm(sig: int, parent: int) -> None:
    """Ask for `sig` when the parent dies; if it already has (`parent` is no longer ours), act now."""
    prctl = _prctl()
    if prctl is not None:
        prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
    if os.getppid() != parent:
        os.kill(os.getpid(), sig)


def preexec() -> Callable[[], None] | None:
    """A `preexec_fn` giving the child SIGKILL when rhapsody dies; None where there is no such signal."""
    if _prctl() is None:
        return None
    return functools.partial(arm, signal.SIGKILL, os.getpid())


def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
    """`subprocess.run` for a short call the caller waits for (rhapsody's own git calls), the child dying with
    rhapsody: under `setpriv --pdeathsig KILL` where util-linux has it, which spares forking rhapsody itself
    (a preexec_fn forces a fork: docs/performance.md has the cost); else with `preexec()`."""
    setpriv = _setpriv()
    if setpriv is None:
        return subprocess.run(argv, preexec_fn=preexec(), **kwargs)
    return subprocess.run([setpriv, "--pdeathsig", "KILL", "--", *argv], **kwargs)


GUARD = 'case $PPID in "$0") exec "$@";; esac; exit 137'
"""What bash runs once setpriv has armed the parent-death signal (`arm`'s check, in the child): a parent that
died before that is no longer this process's parent, and then nothing is run. Only a keyword and special
builtins, which a function in the environment cannot stand in for in POSIX mode."""
GUARD_SHELL = "/bin/bash"
"""Bash, not /bin/sh: dash drops the variables whose names are not identifiers, exported functions among them,
from the environment it passes on; bash passes the environment on as it got it, but for PWD (the folder the
child starts in) and IFS (back at space, tab and newline), which every shell sets so for itself anyway."""


def dying_with_us(argv: list[str]) -> tuple[list[str], Callable[[], None] | None]:
    """The argv and `preexec_fn` that start a child which may outlive the call (a command, a worker) so that it
    dies with rhapsody: where util-linux has setpriv, `argv` under setpriv and `GUARD` and no preexec_fn, so the
    child is started without forking rhapsody (a tenth of the CPU: docs/performance.md); else `preexec()`. The
    program is the same process throughout (each step execs the next), so its pid and group are the caller's."""
    setpriv = _setpriv()
    if setpriv is None or not os.path.isfile(GUARD_SHELL):
        return argv, preexec()
    return [setpriv, "--pdeathsig", "KILL", "--", GUARD_SHELL, "--posix", "-c", GUARD, str(os.getpid()), *argv], None


@functools.cache
def _setpriv() -> str | None:
    return shutil.which("setpriv") if _prctl() is not None else None


def supervised(argv: list[str]) -> list[str]:
    """`argv` run under the supervisor (start it in a new session, and end it with `procs.stop`: a SIGKILL
    of its group would leave what the command moved out of the group to the init process)."""
    if _prctl() is None:
        return argv
    # run as a file, without site: importing the rhapsody package would cost ten times the start-up
    return [sys.executable, "-I", "-S", SUPERVISOR, str(os.getpid()), "--", *argv]


SUPERVISOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "supervisor.py")
