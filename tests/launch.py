"""`python -m rhapsody ARGS` for tests, in a process forked from one that has already imported rhapsody.

A headless run spends most of its start-up importing (the SDK alone is about a second of pydantic
classes), and the suite starts a few hundred of them. `run` keeps the process real: its own pid,
working folder, environment, standard streams, exit status and signals, `sys.argv` and `sys.path[0]`
as `-m` sets them; only the imports are done once per test worker, in a fork server (this file run as
a script) that imports and never calls anything, so no cache or state of rhapsody is shared between
runs. `RHAPSODY_TEST_EXEC=1` starts every run with a fresh interpreter instead, to compare.

Its output goes to files, not pipes: `run` returns when the process exits, with what it had written,
even if something it started still holds them open (`subprocess.run` would wait for that too).

Tests of start-up itself (import time, the first frame, a terminal) start their process directly.
"""

from __future__ import annotations

import atexit
import importlib
import json
import locale
import os
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

WARM = ("rhapsody.cli", "rhapsody.providers.anthropic", "rhapsody.providers.openai", "rhapsody.commands.slash",
        "rhapsody.frontends.headless", "rhapsody.wiring")
"""What a headless run imports before its first request (a module that moved is skipped, not an error)."""
EXEC_ENV = "RHAPSODY_TEST_EXEC"


def run(args: list[str], *, cwd: Path | str | None = None, env: dict[str, str] | None = None, timeout: float = 60,
        input: str | None = None, stdin: int | None = None) -> subprocess.CompletedProcess[str]:
    """`subprocess.run([python, "-m", "rhapsody", *args], capture_output=True, text=True, ...)`, forked warm.

    `stdin=subprocess.DEVNULL` gives it /dev/null; otherwise, without `input`, it shares this process's."""
    argv = [sys.executable, "-m", "rhapsody", *args]
    if os.environ.get(EXEC_ENV) == "1":
        return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout, input=input,
                              stdin=stdin)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, open(os.devnull, "rb") as null:
        given = null.fileno() if stdin == subprocess.DEVNULL else None
        status = _server().launch(argv, str(cwd or os.getcwd()), dict(os.environ if env is None else env),
                                  out, err, input, given, timeout)
        said = [_text(f) for f in (out, err)]
    return subprocess.CompletedProcess(argv, status, said[0], said[1])


def _text(f: IO[bytes]) -> str:
    """As `text=True` decodes: the locale's encoding, universal newlines."""
    f.seek(0)
    data = f.read().decode(locale.getpreferredencoding(False))
    return data.replace("\r\n", "\n").replace("\r", "\n")


class _Server:
    """This worker's fork server: started on first use, stopped when the worker exits."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="rhapsody-launch-")
        self.path = os.path.join(self.folder, "s")
        # its standard input is a pipe this process holds open: the server ends when this process does
        self.proc = subprocess.Popen([sys.executable, __file__, self.path], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert self.proc.stdout is not None and self.proc.stdout.readline() == b"ready\n", "the fork server did not start"
        atexit.register(self.stop)

    def launch(self, argv: list[str], cwd: str, env: dict[str, str], out: IO[bytes], err: IO[bytes],
               input: str | None, given: int | None, timeout: float) -> int:
        """Run `argv` forked in `cwd` with `env`; its exit status (minus the signal that killed it)."""
        stdin, feeder = (0 if given is None else given, None) if input is None else _fed(input)
        with socket.socket(socket.AF_UNIX) as conn:
            conn.connect(self.path)
            request = json.dumps({"argv": argv, "cwd": cwd, "env": env}).encode()
            socket.send_fds(conn, [request], [stdin, out.fileno(), err.fileno()])
            if feeder is not None:
                os.close(stdin)
                feeder.start()
            said = _Lines(conn)
            pid = said.next(None)
            try:
                return said.next(timeout)
            except TimeoutError:
                _kill(pid)
                said.next(None)
                raise subprocess.TimeoutExpired(argv, timeout) from None
            except BaseException:  # a test's own timeout, an interrupt: the child goes, as subprocess.run does
                _kill(pid)
                said.next(None)
                raise
            finally:
                if feeder is not None:
                    feeder.join()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        for name in (self.path, self.folder):
            try:
                os.remove(name) if name == self.path else os.rmdir(name)
            except OSError:
                pass


class _Lines:
    """Numbers, one a line, read from a socket (a timed-out read leaves it usable, as a socket file does not)."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn, self.buffer = conn, b""

    def next(self, timeout: float | None) -> int:
        self.conn.settimeout(timeout)
        while b"\n" not in self.buffer:
            chunk = self.conn.recv(64)
            if not chunk:
                raise ConnectionError("the fork server went away")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return int(line)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _fed(text: str) -> tuple[int, threading.Thread]:
    """A pipe's read end and the thread that writes `text` into it, as `input=` does."""
    read, write = os.pipe()

    def feed() -> None:
        with open(write, "wb") as pipe:
            try:
                pipe.write(text.encode(locale.getpreferredencoding(False)))
            except BrokenPipeError:
                pass

    return read, threading.Thread(target=feed, daemon=True)


_running: dict[int, _Server] = {}


def _server() -> _Server:
    """This process's server (a fork of a test process gets its own; one that died is started again)."""
    server = _running.get(os.getpid())
    if server is None or server.proc.poll() is not None:
        server = _running[os.getpid()] = _Server()
    return server


# -- the server side ----------------------------------------------------------------------------------


def _serve(path: str) -> None:
    """Import rhapsody, then fork one child per request and report its exit status on the request's socket."""
    for name in WARM:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError:
            pass
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(16)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    watch = selectors.DefaultSelector()
    watch.register(listener, selectors.EVENT_READ)
    watch.register(sys.stdin, selectors.EVENT_READ)
    while True:
        for key, _ in watch.select():
            if key.fileobj is sys.stdin:
                return  # the test process ended
            if key.fileobj is listener:
                conn, _ = listener.accept()
                pid = _start(conn)
                _tell(conn, pid)
                watch.register(os.pidfd_open(pid), selectors.EVENT_READ, (pid, conn))
            else:
                pid, conn = key.data
                watch.unregister(key.fileobj)
                os.close(key.fd)
                status = os.waitpid(pid, 0)[1]
                _tell(conn, os.waitstatus_to_exitcode(status))
                conn.close()


def _tell(conn: socket.socket, number: int) -> None:
    try:
        conn.sendall(f"{number}\n".encode())
    except OSError:  # the test that asked has gone
        pass


def _start(conn: socket.socket) -> int:
    """Fork the child that runs the request read from `conn`; its pid."""
    request, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    pid = os.fork()
    if pid:
        for fd in fds:
            os.close(fd)
        return pid
    os._exit(_child(json.loads(request), fds))


def _child(request: dict[str, Any], fds: list[int]) -> int:
    """Become `python -m rhapsody ARGS` in the request's folder and environment; the exit status."""
    for number, fd in enumerate(fds):
        os.dup2(fd, number, inheritable=True)
    for name in os.listdir("/proc/self/fd"):  # as close_fds does: nothing of the server's stays open
        if int(name) > 2:
            try:
                os.close(int(name))
            except OSError:
                pass
    sys.stdin = open(0, "r", closefd=False)  # the streams the interpreter would have opened on them
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", closefd=False, errors="backslashreplace")
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = request["argv"][2:]
    sys.path[0] = request["cwd"]  # as `-m` does
    try:
        runpy.run_module("rhapsody", run_name="__main__", alter_sys=True)
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # noqa: BLE001 - printed as the interpreter would, then status 1
        import traceback

        traceback.print_exc()
        code = 1
    return _exited(code)


def _exited(code: object) -> int:
    """What the interpreter does on the way out: `atexit`, a `SystemExit` text to stderr, streams flushed."""
    import atexit as handlers

    handlers._run_exitfuncs()
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return int(code or 0)


if __name__ == "__main__":
    _serve(sys.argv[1])
