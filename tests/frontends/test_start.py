"""The app as a person starts it: `rhapsody` in a real pseudo-terminal, against the loopback server.

The first frame is drawn before the settings are read and the session is built; what the
person typed ahead of it lands in the prompt. A session that
cannot be built (no key, a broken config) ends the app with one line, and no traceback.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest
from textual.worker import Worker, WorkerState

from rhapsody.loopback.script import say
from rhapsody.frontends.app.app import RhapsodyApp
from rhapsody.frontends.app.widgets import PromptInput
from tests import launch
from tests.conftest import MODEL, Stub, until

ANSI = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[@-Z\\-_]|[\x00-\x08\x0b-\x1f\x7f]")


CPR = b"\x1b[6n"
"""A cursor position request: a terminal answers it at once (plain mode's prompt waits ~1.5 s for it otherwise)."""


class Terminal:
    """`python -m rhapsody` in an 80x24 pty; `seen` is everything it printed, escape sequences removed.

    As a terminal emulator does, it answers each cursor position request (with the top-left cell), unless
    `answers_cpr` is False: a terminal that never answers (some multiplexers, serial consoles, `script`)."""

    raw = b""
    answered = 0
    """Cursor position requests answered so far."""
    answers_cpr = True

    def __init__(self, root: Path, env: dict[str, str], typed_ahead: bytes = b"", args: tuple[str, ...] = ()) -> None:
        self.raw = b""
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            launch.as_a_shell_starts_it()
            os.chdir(root)
            os.execve(sys.executable, [sys.executable, "-m", "rhapsody", *args], env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        if typed_ahead:  # in the terminal's buffer before the program reads anything
            os.write(self.fd, typed_ahead)

    @property
    def seen(self) -> str:
        return ANSI.sub(b"", self.raw).decode("utf-8", errors="replace")

    def read_until(self, predicate: object, within: float = 20.0) -> bool:
        """Read output until `predicate(seen)` holds or the program ends; whether it held."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if predicate(self.seen):  # type: ignore[operator]
                return True
            ready, _, _ = select.select([self.fd], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:  # the program ended and closed the terminal
                    return bool(predicate(self.seen))  # type: ignore[operator]
                if not chunk:
                    return bool(predicate(self.seen))  # type: ignore[operator]
                self.raw += chunk
                self._answer()
        return bool(predicate(self.seen))  # type: ignore[operator]

    def _answer(self) -> None:
        if not self.answers_cpr:
            return
        for _ in range(self.raw.count(CPR) - self.answered):
            self.answered += 1
            try:
                os.write(self.fd, b"\x1b[1;1R")
            except OSError:  # the program has gone
                return

    def poll(self) -> int | None:
        """The exit status once the program has ended (None while it runs)."""
        done, status = os.waitpid(self.pid, os.WNOHANG)
        return os.waitstatus_to_exitcode(status) if done else None

    def exit_status(self, within: float = 10.0) -> int | None:
        """The exit status once the program ends by itself (None: killed after `within` seconds)."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            self.read_until(lambda _s: False, within=0.1)
            status = self.poll()
            if status is not None:
                return status
        return None

    def close(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(self.fd)


class Forked(Terminal):
    """`python -m rhapsody` in an 80x24 pty, started by the worker's fork server (tests/launch.py) as a shell
    starts a program: its own process and session, the pty its controlling terminal; only the imports are
    done already. For the tests that are not about start-up. `controlling=False`: a session the terminal is not
    the controlling terminal of, so closing it sends no SIGHUP (a shell's job whose shell has not passed the
    signal on yet, a program started under `setsid`); the hung-up terminal itself is the sign. `fresh`: a
    fresh interpreter, for the tests of the boot. `answers_cpr=False`: a terminal that never answers where the
    cursor is."""

    def __init__(self, root: Path, env: dict[str, str], args: tuple[str, ...] = (), controlling: bool = True,
                 fresh: bool = False, answers_cpr: bool = True) -> None:
        self.raw = b""
        self.answers_cpr = answers_cpr
        self.child, self.fd = launch.terminal(list(args), cwd=root, env=env, controlling=controlling, fresh=fresh)
        self.pid = self.child.pid

    def poll(self) -> int | None:
        return self.child.poll()

    def close(self) -> None:
        self.child.kill()  # gone already, once its status was read: a no-op
        self.child.wait()
        os.close(self.fd)


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "RHAPSODY_", "PYTEST_"))}
    return {**env, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "TERM": "xterm-256color",
            "COLUMNS": "80", "LINES": "24", **extra}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def test_a_line_typed_ahead_with_enter_is_sent_once_the_session_exists(project: Path, home: Path,
                                                                      stub: Stub) -> None:
    """Before the app puts the terminal in raw mode, Enter arrives as a line feed (ctrl+j to the
    app, a new line in the prompt); rhapsody reads such complete lines itself and sends them."""
    stub.script(say("Ready when you are."))
    env = _env(home, ANTHROPIC_BASE_URL=stub.server.url, ANTHROPIC_API_KEY="sk-ant-test", RHAPSODY_MODEL=MODEL)
    term = Terminal(project, env, typed_ahead="say hello\rand then é\r".encode())
    try:
        assert term.read_until(lambda s: "Ready when you are." in s.replace("\n", "")) or stub.bodies()
        term.read_until(lambda _s: False, within=0.5)
        bodies = stub.bodies()
        assert len(bodies) == 1, bodies
        assert [b["text"] for b in bodies[0]["messages"][0]["content"]] == ["say hello\nand then é"]
    finally:
        term.close()


def test_typed_ahead_never_answers_the_trust_question(project: Path, home: Path) -> None:
    (project / ".rhapsody").mkdir()
    (project / ".rhapsody" / "config.toml").write_text('permission_mode = "yolo"\n')
    term = Terminal(project, _env(home, ANTHROPIC_API_KEY="sk-ant-test"), typed_ahead=b"y\r")
    try:
        assert term.read_until(lambda s: "[y/N]" in s), term.seen[-1000:]
        term.read_until(lambda _s: False, within=1.0)
        assert "trusted " not in term.seen.split("[y/N]")[-1]  # still waiting for its own answer
        os.write(term.fd, b"n\r")
        assert term.read_until(lambda s: "Not trusted" in s), term.seen[-1000:]
        assert not (home / ".config" / "rhapsody" / "config.toml").exists()
    finally:
        term.close()


def test_typed_ahead_of_the_first_frame_lands_in_the_prompt(project: Path, home: Path, stub: Stub) -> None:
    stub.script(say("Ready when you are."))
    env = _env(home, ANTHROPIC_BASE_URL=stub.server.url, ANTHROPIC_API_KEY="sk-ant-test", RHAPSODY_MODEL=MODEL)
    term = Terminal(project, env, typed_ahead=b"say hello")
    try:
        assert term.read_until(lambda s: "rhapsody: a coding agent" in s), term.seen[-2000:]
        assert term.read_until(lambda s: s.count("say hello") >= 2), term.seen[-2000:]  # the echo, then the prompt
        os.write(term.fd, b"\r")
        deadline = time.monotonic() + 20
        while not stub.bodies() and time.monotonic() < deadline:
            term.read_until(lambda _s: False, within=0.1)
        bodies = stub.bodies()
        assert len(bodies) == 1
        assert bodies[0]["messages"][0]["content"][0]["text"] == "say hello"
        assert term.read_until(lambda s: "Ready when you are" in s)
        # ctrl+c now quits (working, it stops). The status line repaints its own row when its state changes, and
        # the reply's last frame may be drawn after it, so "idle" is looked for after the reply's first words.
        assert term.read_until(lambda s: "idle" in s.split("Ready when you are", 1)[-1])
        os.write(term.fd, b"\x03")
        assert term.read_until(lambda s: "again to quit" in s), term.seen[-1000:]  # the first ctrl+c landed
        os.write(term.fd, b"\x03")
        assert term.exit_status() == 0
        assert "rhapsody --continue" in term.seen  # the parting line, printed after the app closed
    finally:
        term.close()


def test_a_session_that_cannot_be_built_ends_the_app_with_one_line(project: Path, home: Path) -> None:
    term = Terminal(project, _env(home))  # no ANTHROPIC_API_KEY
    try:
        assert term.exit_status(within=20.0) == 2
        after = term.seen.rsplit("rhapsody: a coding agent", 1)[-1]
        assert "ANTHROPIC_API_KEY is not set" in after
        assert "Traceback" not in term.seen
    finally:
        term.close()


def test_a_broken_config_ends_the_app_with_one_line_naming_the_file(project: Path, home: Path) -> None:
    (project / ".rhapsody").mkdir()
    (project / ".rhapsody" / "config.toml").write_text("permission_mode = [unclosed\n")
    term = Terminal(project, _env(home, ANTHROPIC_API_KEY="sk-ant-test"))
    try:
        assert term.exit_status(within=20.0) == 2
        assert re.search(r"rhapsody: \S*config\.toml: ", term.seen), term.seen[-1000:]
        assert "Traceback" not in term.seen
    finally:
        term.close()


async def test_the_first_frame_is_drawn_before_the_session_is_built(project: Path, stub: Stub) -> None:
    stub.script(say("Ready when you are."))
    shown: list[str] = []

    def boot() -> tuple[Any, Any, Any]:
        shown.extend(str(e.text) for e in app.transcript.entries)  # what the first frame held
        assert app.query_one(PromptInput).has_focus
        wiring = stub.wire(project)
        return wiring.agent, wiring.settings, None

    app = RhapsodyApp(boot=boot, root=project)
    async with app.run_test() as pilot:
        assert not app.ready
        early = PromptInput.Submitted("say hello", queue=False)
        await app.submitted(early)  # Enter before the session exists: held, then sent once
        await until(lambda: len(stub.bodies()) == 1 and not app.busy, within=30, pause=pilot.pause)
        assert app.ready and shown and "model        …" in shown[0]
        welcome = [e for e in app.transcript.entries if e.kind == "welcome"]
        assert not welcome  # the session started: the welcome left
        assert [m["content"][0]["text"] for m in stub.bodies()[0]["messages"]] == ["say hello"]
        assert any("Ready when you are." in e.text for e in app.transcript.entries)


async def test_a_git_refresh_that_ends_while_the_app_closes_is_no_crash(project: Path, stub: Stub) -> None:
    """The branch worker can finish after the screens are gone (a quick quit): its state change is let be."""

    def boot() -> tuple[Any, Any, Any]:
        wiring = stub.wire(project)
        return wiring.agent, wiring.settings, None

    app = RhapsodyApp(boot=boot, root=project)
    async with app.run_test() as pilot:
        await until(lambda: app.ready, pause=pilot.pause)
        worker = app.refresh_git()
    assert not app.screen_stack
    app.on_worker_state_changed(Worker.StateChanged(worker, WorkerState.SUCCESS))  # raised ScreenStackError


async def test_the_app_fills_in_its_welcome_once_the_session_exists(project: Path, stub: Stub) -> None:
    def boot() -> tuple[Any, Any, Any]:
        wiring = stub.wire(project)
        return wiring.agent, wiring.settings, None

    app = RhapsodyApp(boot=boot, root=project)
    async with app.run_test() as pilot:
        await until(lambda: app.ready and any(e.kind == "welcome" and MODEL in e.text for e in app.transcript.entries),
                    within=30, pause=pilot.pause)
        welcome = next(e for e in app.transcript.entries if e.kind == "welcome")
        assert f"model        {MODEL}" in welcome.text
        assert "…" not in welcome.text.split("\n")[3]


async def test_a_boot_that_fails_ends_the_app_and_keeps_the_reason(project: Path) -> None:
    from rhapsody.core.errors import ConfigError

    def boot() -> tuple[Any, Any, Any]:
        raise ConfigError("ANTHROPIC_API_KEY is not set")

    app = RhapsodyApp(boot=boot, root=project)
    async with app.run_test() as pilot:
        await until(lambda: app.boot_error is not None, within=30, pause=pilot.pause)
    assert isinstance(app.boot_error, ConfigError)
    assert app.return_code == 2


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_ends_the_app_with_the_terminal_restored(project: Path, home: Path, stub: Stub,
                                                          sig: signal.Signals) -> None:
    env = _env(home, ANTHROPIC_BASE_URL=stub.server.url, ANTHROPIC_API_KEY="sk-ant-test", RHAPSODY_MODEL=MODEL)
    term = Forked(project, env)  # the app's own signal handling, not its start-up
    try:
        assert term.read_until(lambda s: f"model        {MODEL}" in s), term.seen[-2000:]
        before = len(term.raw)
        os.kill(term.pid, sig)
        assert term.exit_status() == 128 + sig
        after = term.raw[before:]
        assert b"\x1b[?1049l" in after and b"\x1b[?25h" in after  # the main screen back, the cursor shown
        assert b"Traceback" not in term.raw
    finally:
        term.close()


@pytest.mark.parametrize("flags", [("--continue",), ("--resume", "nosuch")])
def test_nothing_to_resume_is_one_line_without_opening_the_screen(project: Path, home: Path,
                                                                   flags: tuple[str, ...]) -> None:
    term = Terminal(project, _env(home, ANTHROPIC_API_KEY="sk-ant-test"), args=flags)
    try:
        assert term.exit_status(within=20.0) == 2
        assert b"\x1b[?1049h" not in term.raw  # the alternate screen was never entered
        assert "rhapsody: no session" in term.seen and "Traceback" not in term.seen
    finally:
        term.close()


@pytest.mark.parametrize(("typed", "sent"), [(("hello there",), "hello there"), (("",), "The suggested task.")])
async def test_a_typed_ahead_message_replaces_the_suggested_one_and_enter_alone_sends_it(
        project: Path, stub: Stub, typed: tuple[str, ...], sent: str) -> None:
    stub.script(say("Hello back."))

    def boot() -> tuple[Any, Any, Any]:
        wiring = stub.wire(project)
        return wiring.agent, wiring.settings, None

    app = RhapsodyApp(boot=boot, root=project, initial="The suggested task.", typed_ahead=typed)
    async with app.run_test() as pilot:
        await until(lambda: bool(stub.bodies()) and not app.busy, within=30, pause=pilot.pause)
        assert app.query_one(PromptInput).text == ""  # nothing left to send by accident
    assert [b["text"] for b in stub.bodies()[0]["messages"][0]["content"]] == [sent]


def test_the_demo_sends_its_task_when_enter_is_pressed_before_the_app_is_live(project: Path, home: Path) -> None:
    """The demo's welcome says Enter sends the task; an Enter pressed as the welcome appears (before the app reads
    keys, while the terminal is still in line mode) does."""
    term = Terminal(project, _env(home), typed_ahead=b"\r", args=("--demo",))
    try:
        assert term.read_until(lambda s: "read_file inventory.py" in s, within=30), term.seen[-2000:]
    finally:
        term.close()
