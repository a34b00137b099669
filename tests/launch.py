"""`python -m rhapsody ARGS` for tests, in a process forked from one that has already imported rhapsody.

A headless run spends most of its start-up importing (the SDK alone is about a second of pydantic
classes), and the suite starts a few hundred of them. `run` keeps the process real: its own pid,
working folder, environment, standard streams, exit status and signals, `sys.argv` and `sys.path[0]`
as `-m` sets them; only the imports are done once per test worker, in a fork server (this file run as
a script) that imports and never calls anything, so no cache or state of rhapsody is shared between
runs. `RHAPSODY_TEST_EXEC=1` starts every run with a fresh interpreter instead, to compare.

Its output goes to files, not pipes: `run` returns when the process exits, with what it had written,
even if something it started still holds them open (`subprocess.run` would wait for that too).

`start` and `terminal` fork the same way for a test that holds the process while it runs (on pipes it
reads, in a pseudo-terminal it closes): the child can be a session leader with the pty as its
controlling terminal, or start with a signal ignored, as a shell or `nohup` would start it; `Child`
gives its pid, signals and exit status as `Popen` does (its parent is the server, so the status comes
over the request's socket rather than from `waitpid`). Tests of start-up itself (import time, the
first frame, the boot) start a fresh interpreter: directly, or with `fresh=True`.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import fcntl
import gc
import importlib
import importlib.util
import json
import locale
import os
import runpy
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

WARM = ("rhapsody.cli", "rhapsody.providers.anthropic", "rhapsody.providers.openai", "rhapsody.commands.slash",
        "rhapsody.frontends.headless", "rhapsody.wiring")
"""What a headless run imports before its first request (a module that moved is skipped, not an error)."""
APP = (*WARM, "rhapsody.frontends.app.app")
"""What the full-screen app imports too, for the runs in a terminal."""
ACP = (*WARM, "rhapsody.frontends.acp")
"""What `rhapsody acp` imports too (the protocol's schema)."""
FRONT_ENDS = ("rhapsody.frontends.app", "rhapsody.frontends.acp")
"""Packages only the servers that name them import, all of each (the headless server imports the rest)."""
TRANSPORT = ("anyio._backends._asyncio", "httpcore2", "h11", "sqlite3", "truststore")
"""What a run imports as its SDK client makes the first request."""
READ_AT_IMPORT = ("TEXTUAL_", "ESCDELAY")
"""Variables Textual reads once, as it is imported: a run where one the server's imports read differs from the
server's starts afresh (the others read then, `HOME` by `sysconfig` and the SDKs' logging switches, decide
nothing a run does; `TEXTUAL_SNAPSHOT_TEMPDIR`, set in the workers, is not read at import)."""
PYTEST = ("pytest", "_pytest.pytester", "xdist.plugin", "xdist.looponfail", "xdist.remote", "execnet",
          "pytest_asyncio.plugin", "pytest_timeout", "pytest_textual_snapshot", "syrupy", "_hypothesis_pytestplugin",
          "hypothesis", "hypothesis.strategies", "anyio.pytest_plugin", "platformdirs.pytest_plugin", "jinja2")
"""What a test worker imports before its first test beside rhapsody: pytest and the plugins installed (the
`pytest11` entry points), and what the tests' modules import at their top."""
WORKER = (*APP, "rhapsody.frontends.acp", *PYTEST)
"""What the server the workers of a run fork from has imported (`as_worker`): every front end too, and the test
modules themselves, from their rewritten caches (`_tests_ahead`)."""
WORKER_FLAG = "--test-worker"
EXEC_ENV = "RHAPSODY_TEST_EXEC"
SHARED_ENV = "RHAPSODY_TEST_FORK_SERVERS"
"""Names the folder where a whole-suite run's controller started one headless fork server for all its workers
(`share`, called by tests/conftest.py); the front ends' servers are forked from it once, by the first worker
that needs each. Unset, each worker starts its own."""


def run(args: list[str], *, cwd: Path | str | None = None, env: dict[str, str] | None = None, timeout: float = 60,
        input: str | None = None, stdin: int | None = None) -> subprocess.CompletedProcess[str]:
    """`subprocess.run([python, "-m", "rhapsody", *args], capture_output=True, text=True, ...)`, forked warm.

    `stdin=subprocess.DEVNULL` gives it /dev/null; otherwise, without `input`, it shares this process's."""
    argv = [sys.executable, "-m", "rhapsody", *args]
    if os.environ.get(EXEC_ENV) == "1":
        return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout, input=input,
                              stdin=stdin)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, open(os.devnull, "rb") as null:
        given = null.fileno() if stdin == subprocess.DEVNULL else 0
        fed, feeder = (given, None) if input is None else _fed(input)
        child = start(args, cwd=cwd, env=env, stdin=fed, stdout=out.fileno(), stderr=err.fileno())
        if feeder is not None:
            os.close(fed)
            feeder.start()
        try:
            status = child.wait(timeout)
        finally:
            child.kill()  # gone already unless the wait ended early: a timeout, an interrupt
            child.wait()
            if feeder is not None:
                feeder.join()
        said = [_text(f) for f in (out, err)]
    return subprocess.CompletedProcess(argv, status, said[0], said[1])


def start(args: list[str], *, cwd: Path | str | None = None, env: dict[str, str] | None = None, stdin: int = 0,
          stdout: int = 1, stderr: int = 2, session: bool = False, terminal: bool = False,
          warm: tuple[str, ...] = WARM, ignore: tuple[signal.Signals, ...] = (), fresh: bool = False) -> Child:
    """`python -m rhapsody ARGS` forked warm on the given descriptors, not waited for (as `Popen` starts it).

    `session`: its own session (`start_new_session`); `terminal`: and its standard input, a pty's slave side,
    its controlling terminal, as a shell or `pty.fork` makes it. `warm`: what the server it forks from
    has imported (`APP`, `ACP`: a front end's modules too). `ignore`: signals it starts with ignored, as
    `nohup` starts a program. `fresh` (or `RHAPSODY_TEST_EXEC=1`): the forked child execs a fresh
    interpreter, for tests of start-up."""
    request = _request([sys.executable, "-m", "rhapsody", *args], cwd, env, session=session or terminal,
                       terminal=terminal, ignore=ignore, fresh=fresh)
    return _server(WARM if request["fresh"] else warm).start(request, [stdin, stdout, stderr])


def python(code: str, *, stdin: int, stdout: int, stderr: int = 2, cwd: Path | str | None = None) -> Child:
    """`python -c CODE` forked from the run's worker server (`WORKER`: rhapsody, the SDKs, pytest and the test
    modules imported, no test run) on the given descriptors, not waited for. A test that needs a process of its
    own holding some state (tests/killed_child.py) gets one without the imports; `RHAPSODY_TEST_EXEC=1`: a
    fresh interpreter."""
    request = _request([sys.executable, "-c", code], cwd, None, code=code)
    return _server(WARM if request["fresh"] else WORKER).start(request, [stdin, stdout, stderr])


def _request(argv: list[str], cwd: Path | str | None, env: dict[str, str] | None, *, session: bool = False,
             terminal: bool = False, ignore: tuple[signal.Signals, ...] = (), fresh: bool = False,
             code: str | None = None) -> dict[str, Any]:
    """What the server forks: `argv` in `cwd` (this process's by default) with `env` (this process's); a fresh
    interpreter where asked or `RHAPSODY_TEST_EXEC=1`; `code`, the `-c` program a forked child runs itself."""
    request = {"argv": argv, "cwd": str(cwd or os.getcwd()), "env": dict(os.environ if env is None else env),
               "session": session, "terminal": terminal, "ignore": [int(s) for s in ignore],
               "fresh": fresh or os.environ.get(EXEC_ENV) == "1"}
    if code is not None:
        request["code"] = code
    return request


def terminal(args: list[str], *, cwd: Path | str, env: dict[str, str], size: tuple[int, int] = (24, 80),
             controlling: bool = True, fresh: bool = False) -> tuple[Child, int]:
    """`python -m rhapsody ARGS` forked warm in a new pseudo-terminal of `size` (rows, columns); the
    process and the terminal's master side. `controlling=False`: its session has no controlling terminal."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", *size, 0, 0))
    try:
        child = start(args, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave, session=True,
                      terminal=controlling, warm=APP, fresh=fresh)
    except BaseException:
        os.close(master)
        raise
    finally:
        os.close(slave)
    return child, master


class Child:
    """A process the fork server started: its pid, and its exit status as `Popen.returncode` gives it."""

    def __init__(self, conn: socket.socket, argv: list[str]) -> None:
        self.conn, self.args = conn, argv
        self.returncode: int | None = None
        self.said = _Lines(conn)
        self.pid = self.said.next(None)

    def poll(self) -> int | None:
        """The exit status, or None while it runs."""
        if self.returncode is None:
            try:
                self._ended(self.said.next(0))
            except BlockingIOError:
                pass
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Its exit status once it ends; `subprocess.TimeoutExpired` past `timeout` (it keeps running)."""
        if self.returncode is None:
            try:
                self._ended(self.said.next(timeout))
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
        assert self.returncode is not None
        return self.returncode

    async def wait_async(self, step: float = 0.01) -> int:
        """`wait()` for a test in an event loop: the loop runs on while it waits."""
        while self.poll() is None:
            await asyncio.sleep(step)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """As `Popen.send_signal`: nothing once it has ended."""
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def _ended(self, status: int) -> None:
        self.returncode = status
        self.conn.close()


def _text(f: IO[bytes]) -> str:
    """As `text=True` decodes: the locale's encoding, universal newlines."""
    f.seek(0)
    data = f.read().decode(locale.getpreferredencoding(False))
    return data.replace("\r\n", "\n").replace("\r", "\n")


class _Server:
    """This worker's fork server: started on first use, stopped when the worker exits. One that imports more
    than the headless modules is forked from the headless one, so it imports only what that one lacks."""

    def __init__(self, warm: tuple[str, ...]) -> None:
        self.folder = tempfile.mkdtemp(prefix="rhapsody-launch-")
        self.path = os.path.join(self.folder, "s")
        self.proc: subprocess.Popen[bytes] | None = None
        self.forked: Child | None = None
        if warm == WARM:
            # its standard input is a pipe this process holds open: the server ends when this process does
            self.proc = subprocess.Popen([sys.executable, __file__, self.path, *warm], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            assert self.proc.stdout is not None and self.proc.stdout.readline() == b"ready\n", "the fork server did not start"
        else:
            conn = socket.socket(socket.AF_UNIX)
            conn.connect(_server(WARM).path)
            conn.sendall(json.dumps({"serve": [n for n in warm if n not in WARM], "path": self.path}).encode())
            self.forked = Child(conn, ["serve", *warm])  # its pid comes once it listens
        atexit.register(self.stop)

    def alive(self) -> bool:
        try:
            return (self.proc or self.forked).poll() is None  # type: ignore[union-attr]
        except ConnectionError:  # the server it was forked from went away
            return False

    def start(self, request: dict[str, Any], fds: list[int]) -> Child:
        """Fork the child `request` describes on `fds` (its standard input, output and error)."""
        conn = socket.socket(socket.AF_UNIX)
        try:
            conn.connect(self.path)
            socket.send_fds(conn, [json.dumps(request).encode()], fds)
            return Child(conn, request["argv"])
        except BaseException:
            conn.close()
            raise

    def stop(self) -> None:
        for proc in (self.proc, self.forked):
            if proc is not None:
                try:
                    proc.kill()
                    proc.wait()
                except ConnectionError:  # its own standard input ends it with this process
                    pass
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
        """The next number; `TimeoutError` past `timeout`, `BlockingIOError` at once for a timeout of 0."""
        self.conn.settimeout(timeout)
        while b"\n" not in self.buffer:
            chunk = self.conn.recv(64)
            if not chunk:
                raise ConnectionError("the fork server went away")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return int(line)


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


_running: dict[tuple[int, tuple[str, ...]], _Server | _Shared] = {}


def _server(warm: tuple[str, ...]) -> _Server | _Shared:
    """This process's server for `warm`: the run's, where its controller started one (`share`), else its own (a
    fork of a test process gets its own; one that died is started again)."""
    key = (os.getpid(), warm)
    server = _running.get(key)
    if server is None or not server.alive():
        shared = _Shared.find(warm)
        server = _running[key] = shared if shared is not None else _Server(warm)
    return server


def share() -> tuple[subprocess.Popen[bytes], str]:
    """Start the run's headless fork server for every worker to fork from, before they start: the process
    (its standard input is a pipe the caller holds, so it ends with the caller) and the folder `SHARED_ENV`
    names. Each worker would otherwise import the SDKs once more for its own. Not waited for: it imports
    while the workers collect, and a worker's first request waits for its socket."""
    folder = tempfile.mkdtemp(prefix="rhapsody-launch-")
    proc = subprocess.Popen([sys.executable, __file__, os.path.join(folder, _Shared.name(WARM)), *WARM],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    Path(folder, _Shared.name(WARM) + ".pid").write_text(str(proc.pid))
    return proc, folder


class _Shared:
    """A fork server of the run (`share`), used by every worker: it forks each request as a worker's own does."""

    WAIT = 60.0
    """How long a worker waits for the run's server to listen before starting one of its own."""

    def __init__(self, path: str, pid: int) -> None:
        self.path, self.pid = path, pid

    @staticmethod
    def name(warm: tuple[str, ...]) -> str:
        if warm == WORKER:
            return "w"
        return "s" if warm == WARM else "s-" + "-".join(n.rsplit(".", 1)[-1] for n in warm if n not in WARM)

    @classmethod
    def find(cls, warm: tuple[str, ...]) -> _Shared | None:
        """The run's server for `warm`; the front ends' forked from the headless one on first use (one worker at a
        time decides, under a lock). None when there is no run's server, or it went away."""
        folder = os.environ.get(SHARED_ENV)
        if not folder or not os.path.isdir(folder):
            return None
        headless = cls._known(folder, WARM)
        if headless is None:
            return None
        if warm == WARM:
            return headless
        with open(os.path.join(folder, "lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            found = cls._known(folder, warm)
            if found is not None:
                return found
            path = os.path.join(folder, cls.name(warm))
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
            conn = headless.connect()
            conn.sendall(json.dumps({"serve": [n for n in warm if n not in WARM], "path": path}).encode())
            pid = Child(conn, ["serve", *warm]).pid  # it tells its pid once it listens; it ends with the run
            Path(path + ".pid").write_text(str(pid))
            return cls(path, pid)

    @classmethod
    def _known(cls, folder: str, warm: tuple[str, ...]) -> _Shared | None:
        path = os.path.join(folder, cls.name(warm))
        try:
            shared = cls(path, int(Path(path + ".pid").read_text()))
        except (OSError, ValueError):
            return None
        return shared if shared.alive() else None

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except OSError:
            return False
        return True

    def connect(self) -> socket.socket:
        """A connection to the server, once it listens (it may still be importing)."""
        deadline = time.monotonic() + self.WAIT
        while True:
            conn = socket.socket(socket.AF_UNIX)
            try:
                conn.connect(self.path)
                return conn
            except (FileNotFoundError, ConnectionRefusedError):
                conn.close()
                if time.monotonic() > deadline or not self.alive():
                    raise
                time.sleep(0.01)
            except BaseException:
                conn.close()
                raise

    def start(self, request: dict[str, Any], fds: list[int]) -> Child:
        """Fork the child `request` describes on `fds` (its standard input, output and error)."""
        conn = self.connect()
        try:
            socket.send_fds(conn, [json.dumps(request).encode()], fds)
            return Child(conn, request["argv"])
        except BaseException:
            conn.close()
            raise


def worker_spec() -> str:
    """The `--tx` of one xdist worker forked from the run's worker server instead of started afresh: xdist runs
    `python tests/launch.py --test-worker -u -c BOOTSTRAP` (`as_worker`) where it would run `python -u -c BOOTSTRAP`."""
    import shlex

    return "popen//python=" + shlex.join([sys.executable, os.path.abspath(__file__), WORKER_FLAG])


def _pass_on(child: Child, signum: int) -> None:
    """A signal to the stand-in, sent on to the worker (not `Child.send_signal`: its look at the socket would leave
    it non-blocking under the `wait` the signal interrupted, which then fails rather than waits)."""
    if child.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signum)


def as_worker(args: list[str]) -> None:
    """`python ARGS` (xdist's `-u -c BOOTSTRAP`), forked from the run's worker server (`WORKER`: forked from the
    headless one by the first worker that asks): each worker of a whole-suite run would otherwise import the SDKs,
    Textual, pytest and its plugins for itself, some 3 core-seconds before it collects (docs/performance.md,
    "The suite"). This process stays as the worker's stand-in for xdist, which started it: it passes on a
    SIGTERM and ends with the worker's exit status. Without the run's server it execs the fresh interpreter."""
    argv = [sys.executable, *args]
    try:
        server = _Shared.find(WORKER) if os.environ.get(EXEC_ENV) != "1" else None
        child = None if server is None else server.start(
            _request(argv, None, None, code=args[args.index("-c") + 1]), [0, 1, 2])  # not fresh: no EXEC_ENV here
    except (OSError, ValueError):  # the server went away: a fresh worker, as without one
        child = None
    if child is None:
        os.execv(sys.executable, argv)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):  # the worker alone holds xdist's pipes, so each side sees the other's end
        os.dup2(null, fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # in xdist's process group, the worker gets the terminal's own
    signal.signal(signal.SIGTERM, lambda signum, frame: _pass_on(child, signum))
    try:
        status = child.wait()
    except ConnectionError:  # the server was killed: so was its worker, as far as xdist can tell
        status = -signal.SIGKILL
    if status < 0:
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    sys.exit(status)


# -- the server side ----------------------------------------------------------------------------------


def _serve(path: str, warm: list[str]) -> None:
    """Import rhapsody, then fork one child per request and report its exit status on the request's socket."""
    # Run as a script, the server has tests/ first on its path, whose packages would shadow others of the
    # same name as it imports (tests/mcp, the `mcp` SDK): the socket's folder instead, which holds nothing
    # to import; each child puts its own folder there, as `-m` does.
    sys.path[0] = os.path.dirname(path)
    _import(warm)
    _import([*every_module("rhapsody"), *TRANSPORT])
    gc.freeze()  # what every child inherits stays out of its collector's scans (tests/conftest.py)
    listener = _listen(path)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    _loop(listener)


_read: set[str] = set()
"""The `READ_AT_IMPORT` variables this server's imports read."""


def every_module(package: str) -> list[str]:
    """Every module of `package` a run may import, but none of another front end's package nor a `__main__`.

    Each forked run imported those the entry modules leave to first use itself: some 120 modules and 0.1 to
    0.2 s of CPU a run, a few hundred runs in the suite (docs/performance.md, "The suite"). Importing runs
    each module's top level only, which defines and reads no variable of the environment (a module that
    fails to import here is left to the run, which fails as it would have)."""
    import pkgutil

    others = tuple(f for f in FRONT_ENDS if not package.startswith(f))
    found: list[str] = []

    def walk(folders: list[str], prefix: str) -> None:  # by the folders: nothing is imported to find them
        for info in pkgutil.iter_modules(folders, prefix):
            if info.name.endswith(".__main__") or info.name.startswith(others):
                continue
            found.append(info.name)
            if info.ispkg:
                walk([os.path.join(getattr(info.module_finder, "path", ""), info.name.rpartition(".")[2])],
                     info.name + ".")

    walk(list(importlib.import_module(package).__path__), package + ".")
    return found


def _import(names: list[str]) -> None:
    """Import `names`, noting the variables in `READ_AT_IMPORT` they read."""
    environ = type(os.environ)
    getitem = environ.__getitem__

    def noted(self: Any, key: str) -> str:
        if key.startswith(READ_AT_IMPORT):
            _read.add(key)
        return getitem(self, key)

    environ.__getitem__ = noted  # type: ignore[method-assign]  # `get`, `in` and `os.getenv` read through it
    try:
        for name in names:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - moved, or failing: the run imports it itself, as it would have
                pass
    finally:
        environ.__getitem__ = getitem  # type: ignore[method-assign]


def _tests_ahead() -> int:
    """The workers' head start on collecting: the conftest and every test module imported here, once, from the
    rewritten `.pyc` tests/rewrite_ahead.py wrote (what pytest's own import hook would run, for a module one test
    module imports from another too), so each forked worker's collection finds them imported, as a second
    import in one process would. A module without a fresh cache, or one that fails, is left to the workers,
    which import it as they would have. How many were imported here."""
    tests = Path(__file__).resolve().parent
    root = str(tests.parent)
    sys.path.insert(0, root)  # as pytest's `prepend` import mode puts it, for the modules' own imports
    try:
        from _pytest.assertion import rewrite as rw

        from tests.rewrite_ahead import pyc_of
    except ImportError:  # a pytest without these helpers: no head start
        sys.path.remove(root)
        return 0
    finder = _RewrittenTests(tests, lambda source: rw._read_pyc(source, pyc_of(rw, source)))
    sys.meta_path.insert(0, finder)
    try:
        for path in [tests / "conftest.py", *sorted(tests.rglob("test_*.py"))]:
            name = ".".join(path.relative_to(tests.parent).with_suffix("").parts)
            before = set(sys.modules)
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - the worker imports it itself and reports what fails
                for left in set(sys.modules) - before:  # what this one began, a module half made among them
                    if left.startswith("tests."):
                        del sys.modules[left]
    finally:
        sys.meta_path.remove(finder)
        sys.path.remove(root)
    return finder.loaded


class _RewrittenTests:
    """Finds `tests.…test_*` and the conftest as pytest's import hook would: from their rewritten cache, and
    nowhere else (without one, the import fails here and is left to the worker)."""

    def __init__(self, tests: Path, cached: Callable[[Path], Any]) -> None:
        self.tests = tests
        self.cached = cached
        """A source's rewritten code from its cache, None when it has no fresh one (pytest's `_read_pyc`)."""
        self.loaded = 0

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        leaf = name.rpartition(".")[2]
        if not name.startswith("tests.") or not (leaf.startswith("test_") or leaf == "conftest"):
            return None
        source = self.tests.parent.joinpath(*name.split(".")).with_suffix(".py")
        code = self.cached(source) if source.is_file() else None
        if code is None:
            raise ImportError(f"{name}: no fresh rewritten cache; left to the workers")
        return importlib.util.spec_from_file_location(name, source, loader=_Rewritten(code, self))


class _Rewritten:
    def __init__(self, code: Any, finder: _RewrittenTests) -> None:
        self.code = code
        self.finder = finder

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: Any) -> None:
        exec(self.code, module.__dict__)  # noqa: S102 - the module's own code, its asserts rewritten by pytest
        self.finder.loaded += 1


def _listen(path: str) -> socket.socket:
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(16)
    return listener


def _loop(listener: socket.socket) -> None:
    """Serve until the test process ends (this server's standard input closes)."""
    watch = selectors.DefaultSelector()
    watch.register(listener, selectors.EVENT_READ)
    watch.register(sys.stdin, selectors.EVENT_READ)
    while True:
        for key, _ in watch.select():
            if key.fileobj is sys.stdin:
                return  # the test process ended
            if key.fileobj is listener:
                conn, _ = listener.accept()
                pid = _start(conn, listener)
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


def _start(conn: socket.socket, listener: socket.socket) -> int:
    """Fork the child that runs the request read from `conn` (a program, or a server that imports more); its pid."""
    data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    request = json.loads(data)
    pid = os.fork()
    if pid:
        for fd in fds:
            os.close(fd)
        if "serve" not in request:  # a server tells its pid itself, once it listens
            _tell(conn, pid)
        return pid
    code = 1
    try:  # whatever happens, this process never returns to the server's loop
        code = _more(request, conn, listener) if "serve" in request else _child(request, fds)
    except BaseException:  # noqa: BLE001 - a failure before the program ran: said on its stderr
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


def _more(request: dict[str, Any], conn: socket.socket, listener: socket.socket) -> int:
    """Become a server of its own that has imported `request["serve"]` too; its pid on `conn` once it listens."""
    listener.close()
    for name in os.listdir("/proc/self/fd"):  # the other children's descriptors stay with the server that has them
        if int(name) > 2 and int(name) != conn.fileno():
            try:
                os.close(int(name))
            except OSError:
                pass
    _import(request["serve"])
    _import([m for front in FRONT_ENDS if any(n.startswith(front) for n in request["serve"])
             for m in every_module(front)])
    if "pytest" in request["serve"]:  # the workers' server
        _tests_ahead()
    gc.freeze()
    mine = _listen(request["path"])
    _tell(conn, os.getpid())
    conn.close()
    _loop(mine)
    return 0


def _child(request: dict[str, Any], fds: list[int]) -> int:
    """Become `python -m rhapsody ARGS` in the request's folder and environment; the exit status."""
    _take(fds, request)
    stale = any(os.environ.get(k) != request["env"].get(k) for k in _read)  # what the imports saw differs
    if request["fresh"] or stale:
        os.execve(sys.executable, request["argv"], request["env"])
    os.environ.clear()
    os.environ.update(request["env"])
    if request.get("code") is not None:
        return _code(request["code"])
    # the streams the interpreter would have opened on them (Textual's driver reads the `__std*__` ones)
    sys.stdin = sys.__stdin__ = open(0, "r", closefd=False)
    sys.stdout = sys.__stdout__ = open(1, "w", closefd=False)
    sys.stderr = sys.__stderr__ = open(2, "w", closefd=False, errors="backslashreplace", buffering=1)
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


def _code(code: str) -> int:
    """Become `python -u -c CODE` (a test worker, `as_worker`): its streams, `__main__`, path and signals as that
    interpreter would have them; the exit status."""
    import io
    import tempfile as temp
    import types

    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.stdin = sys.__stdin__ = open(0, "r", closefd=False)
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), errors="backslashreplace",
                                                   write_through=True)
    sys.argv = ["-c"]
    sys.path[0] = ""  # as `-c` does: the working folder
    temp.tempdir = None  # read again from the environment the request gave
    main = sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        exec(compile(code, "<string>", "exec"), main.__dict__)
        status: object = 0
    except SystemExit as exc:
        status = exc.code
    except BaseException:  # noqa: BLE001 - printed as the interpreter would, then status 1
        import traceback

        traceback.print_exc()
        status = 1
    threading._shutdown()  # type: ignore[attr-defined]  # as the interpreter does: its threads are waited for
    return _exited(status)


def _take(fds: list[int], request: dict[str, Any]) -> None:
    """The request's descriptors as 0, 1 and 2 and nothing else open; its session, terminal, signals, folder."""
    for number, fd in enumerate(fds):
        os.dup2(fd, number, inheritable=True)
    for name in os.listdir("/proc/self/fd"):  # as close_fds does: nothing of the server's stays open
        if int(name) > 2:
            try:
                os.close(int(name))
            except OSError:
                pass
    if request["session"]:
        os.setsid()
    if request["terminal"]:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)  # as opening the slave in a new session makes it
    as_a_shell_starts_it()
    for number in request["ignore"]:
        signal.signal(number, signal.SIG_IGN)
    os.chdir(request["cwd"])


SHELL_DEFAULTS = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM)
"""The signals a terminal's shell starts a program with at their defaults. The suite itself may run with some
ignored (`nohup`, a background job of a script: bash ignores SIGINT and SIGQUIT there), and a child would
inherit that, so the tests of hang-ups and signals would test the wrong start."""


def as_a_shell_starts_it() -> None:
    """In a child about to become the program under test: `SHELL_DEFAULTS` back at their defaults."""
    for number in SHELL_DEFAULTS:
        signal.signal(number, signal.SIG_DFL)


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
    if sys.argv[1] == WORKER_FLAG:
        as_worker(sys.argv[2:])
    else:
        _serve(sys.argv[1], sys.argv[2:])
