"""Shared fixtures: the loopback Messages API server, a git project, a wired agent."""

from __future__ import annotations

import asyncio
import gc
import importlib
import io
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from rhapsody.loopback.script import ScriptedResponder
from rhapsody.loopback.server import LoopbackServer
from rhapsody.sandbox.bwrap import bwrap_path

from tests import launch, memory_tmp, type_checks
from tests.rewrite_ahead import compile_ahead, rewrite_ahead

if TYPE_CHECKING:  # the SDK, gitpython, Textual and the assembly load where a test first needs them: an xdist
    # controller runs no test, and importing them cost it 1.6 s before its workers could start
    from rhapsody.core.events import Event
    from rhapsody.core.toolbox.approval import Approver
    from rhapsody.providers.anthropic import AnthropicModel
    from rhapsody.wiring import Wiring

MODEL = "claude-sonnet-5-5"
SANDBOX = "workspace-write" if bwrap_path() else "off"
"""Tests that are not about the sandbox run without it where bubblewrap is missing (the sandbox
tests then skip; .ci/run installs bubblewrap so CI runs them all)."""


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))  # checkpoints live there
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def _project_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository `project` copies, made once per worker with a home of its own, as each test's is."""
    with pytest.MonkeyPatch.context() as env:
        home = tmp_path_factory.mktemp("template-home")
        env.setenv("HOME", str(home))
        env.setenv("XDG_CONFIG_HOME", str(home / ".config"))
        return make_project(tmp_path_factory.mktemp("template") / "proj")


@pytest.fixture
def project(tmp_path: Path, _project_template: Path) -> Path:
    """A git repository with one commit and a small Python file: a copy of one made once per worker, so each
    test has its own (2 ms of CPU where making it took 12, five git processes)."""
    return Path(shutil.copytree(_project_template, tmp_path / "proj", symlinks=True))


def make_project(root: Path) -> Path:
    """Make `root` a git repository with one commit and a small Python file."""
    import git

    root.mkdir()
    repo = git.Repo.init(root)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "Test")
        cw.set_value("user", "email", "test@example.com")
    (root / "app.py").write_text("def add(a, b):\n    return a - b\n", encoding="utf-8")
    repo.index.add(["app.py"])
    repo.index.commit("initial")
    return root


TLS = ssl.create_default_context()
"""The TLS context of every test's client: the loopback speaks plain HTTP, so no test uses it, and a context per
client (the CA bundle loaded each time) cost ~20 ms of CPU a client, several hundred clients a run."""


class Stub:
    """A running loopback server plus helpers to wire agents against it."""

    def __init__(self) -> None:
        self.responder = ScriptedResponder([])
        self.server = LoopbackServer(self._respond).start()

    def _respond(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.responder(body)

    def script(self, *turns: dict[str, Any]) -> None:
        self.responder = ScriptedResponder(list(turns))

    def model(self, retries: int = 3) -> AnthropicModel:
        import anthropic

        from rhapsody.providers.anthropic import AnthropicModel

        client = anthropic.AsyncAnthropic(base_url=self.server.url, api_key="sk-test-key", max_retries=0, timeout=5.0,
                                          http_client=anthropic.DefaultAsyncHttpxClient(verify=TLS))
        return AnthropicModel(client, retries=retries, base_delay=0.0)

    def wire(self, root: Path, retries: int = 3, approver: Approver | None = None, **settings: Any) -> Wiring:
        from rhapsody.config.settings import Settings
        from rhapsody.wiring import build

        settings.setdefault("permission_mode", "yolo")
        settings.setdefault("sandbox", SANDBOX)
        return build(root, Settings(**settings), self.model(retries), MODEL, approver=approver)

    def bodies(self) -> list[dict[str, Any]]:
        return self.server.bodies()


@pytest.fixture
def stub() -> Iterator[Stub]:
    s = Stub()
    yield s
    s.server.stop()


GATE = "for i in $(seq 1000); do [ -e go ] && break; sleep 0.01; done"
"""A bash command that runs until the test creates `go` in the project (at most ~10 s): the
test acts while the tool is in flight, however slow the machine, then lets it finish."""


# A reply held mid-stream: the stream's counterpart of GATE.

def held(turn: dict[str, Any], after: int = 3) -> tuple[dict[str, Any], threading.Event]:
    """`turn` streamed up to its first `after` events, then paused until the test sets the event returned.

    The default 3 is the message's start, its first block's start and that block's first delta (a text's
    first 40 characters): the test acts while the reply streams, however slow the machine, and the rest then
    arrives at full speed. A test that ends the turn itself sets the event afterwards, so the server's
    thread ends at once rather than after its HOLD_LIMIT."""
    go = threading.Event()
    return {**turn, "hold": (after, go)}, go


def no_wait(waited: list[float]) -> Callable[[float], Awaitable[None]]:
    """A sleep that passes at once and keeps the seconds asked for: a test checks a wait without waiting it."""

    async def sleep(seconds: float) -> None:
        waited.append(seconds)

    return sleep


async def no_grace() -> None:
    """A permission question's grace period where a test does not test it: over at once, not GRACE seconds."""


async def until(condition: Callable[[], object], within: float = 10.0,
                pause: Callable[[float], Awaitable[Any]] = asyncio.sleep, step: float = 0.01) -> None:
    """Wait until `condition()` holds, checking every `step` seconds; fail after `within` seconds.

    In the app, `pause=pilot.pause`: the app handles its queued messages between checks."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {within} s")
        await pause(step)


def send_keys(pilot: Any, *keys: str) -> None:
    """Send `keys` (characters or key names, as `pilot.press` takes them) to the app through its driver, as a
    terminal sends them, and return without waiting: the caller waits for what the keys should do."""
    import unicodedata

    from textual import events
    from textual.keys import REPLACED_KEYS, _character_to_key, _get_unicode_name_from_key

    app = pilot.app
    for key in keys:  # the events `pilot.press` makes (textual.app.App._press_keys)
        if len(key) == 1 and not key.isalnum():
            key = _character_to_key(key)
        try:
            char: str | None = unicodedata.lookup(_get_unicode_name_from_key(REPLACED_KEYS.get(key, key)))
        except KeyError:
            char = key if len(key) == 1 else None
        event = events.Key(key, char)
        event.set_sender(app)
        app._driver.send_message(event)


async def type_text(pilot: Any, text: str) -> None:
    """Type `text` into the app, one key event a character, then wait as `pilot.press` waits after its last key.

    `pilot.press(*text)` waits for the process to go idle after every key (twice, in steps of 20 ms); a person
    typing a word does not wait for the app between keys. Where what happens between two keys is what a test
    checks (a key during a grace period, a focus change), it presses them one at a time."""
    from textual._wait import wait_for_idle

    send_keys(pilot, *text)
    await wait_for_idle(0)
    await pilot.app.animator.wait_until_complete()
    await wait_for_idle(0)
    await pilot._wait_for_screen()


@asynccontextmanager
async def plain_mode(wiring: Wiring, *args: Any, **kwargs: Any) -> AsyncIterator[tuple[Any, io.StringIO, asyncio.Task[int]]]:
    """Plain mode running on `wiring` in this loop: the pipe its keys come from, what it printed, its task.

    `args` and `kwargs` go on to `run_plain` (an approver, `initial=`); the test types `/quit` (or closes
    the pipe) and awaits the task."""
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from rhapsody.frontends.plain import run_plain

    out = io.StringIO()
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        yield pipe, out, asyncio.create_task(run_plain(wiring.agent, wiring.settings, *args, out=out, **kwargs))


_CHECKS = pytest.StashKey[tuple[subprocess.Popen[bytes], str]]()
_SHARED = pytest.StashKey[tuple[subprocess.Popen[bytes], str]]()


def _whole_suite(config: pytest.Config) -> bool:
    """Whether this run is the whole suite: no path, -k or -m given."""
    return not (config.option.file_or_dir or config.option.keyword or config.option.markexpr)


WORKERS_PER_CORE = 2
MAX_WORKERS = 16


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """How many workers `-n auto` (pyproject's default) starts: for the whole suite, two per core, because a
    quarter of a test's time on one worker is spent waiting (on its children, the loopback, the app's timers),
    and a second worker per core computes meanwhile; for a run of a few files, at most two, whose start-up
    (each worker imports the SDKs and collects) would cost more than it saves. `PYTEST_XDIST_AUTO_NUM_WORKERS`
    still decides where it is set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cores = len(os.sched_getaffinity(0))
    return min(WORKERS_PER_CORE * cores, MAX_WORKERS) if _whole_suite(config) else min(2, cores)



def pytest_collection_finish(session: pytest.Session) -> None:
    """Once collected, a worker holds the SDKs', Textual's and rhapsody's modules, hundreds of thousands of
    objects that live as long as it does: frozen out of the cyclic collector's scans, which would walk them
    all again at every full collection during the tests (docs/performance.md, "The suite").

    A full collection then waits for a hundred younger ones instead of ten: each app a test starts is some
    30,000 objects that outlive the young collections and die with the test, so at Python's default every
    few tests paid a full collection of everything alive (about a tenth of the app tests' CPU)."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, 100)


def pytest_configure(config: pytest.Config) -> None:
    """Before any worker starts, the run's temporary folder is chosen (tests/memory_tmp.py) and the modules
    the run's processes import are compiled once (tests/rewrite_ahead.py). A whole-suite run (no path, -k or
    -m given) also starts the type and import checks in the background at once: a cold mypy then overlaps
    the other tests (tests/test_architecture.py reads the result); on several workers, it also starts the
    one fork server they all fork `python -m rhapsody` from (tests/launch.py, `share`), and the workers
    themselves are forked from a server forked from it (`as_worker`), not started afresh."""
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", 0):  # this process runs tests
        from tests import shared_css

        shared_css.install()  # every app it starts parses each stylesheet once (tests/shared_css.py)
    if hasattr(config, "workerinput"):
        return
    memory_tmp.choose()  # the temporary files on /dev/shm where it can (tests/memory_tmp.py), for every process
    compile_ahead(Path(__file__).parent)  # before any worker, fork server or run imports rhapsody
    if type_checks.STARTED_ENV in os.environ or not _whole_suite(config):
        return
    folder = tempfile.mkdtemp(prefix="rhapsody-checks-")
    os.environ[type_checks.STARTED_ENV] = folder  # the xdist workers, started after this, inherit it
    proc = subprocess.Popen([sys.executable, type_checks.__file__, folder], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    config.stash[_CHECKS] = (proc, folder)
    if (config.option.numprocesses or 0) > 1:  # before the workers start: each would rewrite every test module
        rewrite_ahead(config, Path(__file__).parent)
    if (config.option.numprocesses or 0) > 1 and launch.SHARED_ENV not in os.environ:
        server, shared = launch.share()  # one headless fork server for all the workers, not one each
        os.environ[launch.SHARED_ENV] = shared
        config.stash[_SHARED] = (server, shared)
        if config.option.tx == ["popen"] * len(config.option.tx):  # -n's workers, forked from it too
            config.option.tx = [launch.worker_spec()] * len(config.option.tx)


def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Textual keeps each widget's style cache as a key of a cache of its own (`StylesCache.get_inner_outer`, up to
    1,024 entries), and with it every line the widget drew: after a few dozen app tests, some 80,000 more
    objects in a worker, walked again at every full collection. Emptied after each test instead."""
    styles_cache = sys.modules.get("textual._styles_cache")
    cached = getattr(getattr(styles_cache, "StylesCache", None), "get_inner_outer", None)
    if cached is not None and hasattr(cached, "cache_clear"):
        cached.cache_clear()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A worker's last tests' garbage collected until none is left, then what lives frozen: pytest's closing
    search for errors raised while objects are collected runs five full collections of the worker's heap
    (half a second each at the end of a whole run), and finds the same with nothing left to walk."""
    if hasattr(session.config, "workerinput"):
        while gc.collect():
            pass
        gc.freeze()


def pytest_testnodeready(node: object) -> None:
    """The controller's closing summary imports hypothesis (its plugin's look for observability output), a second
    of CPU after the last test while the other core stands idle: imported instead as the first worker is ready,
    while they all collect. In this thread, as the summary would: an import in a thread of its own raced the
    imports of this one, and the summary once found the module half made (a circular import error)."""
    importlib.import_module("hypothesis.internal.observability")


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop the background checks if the run ended first, and remove what they wrote; stop the run's fork
    servers (the front ends' end with the headless one's standard input)."""
    shared = config.stash.get(_SHARED, None)
    if shared is not None:
        server, folder = shared
        assert server.stdin is not None
        server.stdin.close()  # its loop ends, and so do the servers forked from it
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:  # still importing
            server.kill()
            server.wait()
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(launch.SHARED_ENV, None)
    started = config.stash.get(_CHECKS, None)
    if started is None:
        return
    proc, folder = started
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    shutil.rmtree(folder, ignore_errors=True)
    os.environ.pop(type_checks.STARTED_ENV, None)


def waited(condition: Callable[[], bool], within: float = 10.0, step: float = 0.02) -> bool:
    """`until` for tests outside an event loop: whether `condition()` held within `within` seconds."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


async def collect(agen: AsyncIterator[Event]) -> list[Event]:
    """Drain an event stream."""
    async with aclosing(agen) as events:
        return [e async for e in events]
