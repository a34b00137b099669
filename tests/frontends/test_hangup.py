"""Nothing outlives its terminal: the terminal closed under rhapsody at each moment it can be.

Each test runs `python -m rhapsody` in a real pseudo-terminal against the loopback server, closes
the terminal's master side (as a killed pane or a dropped ssh connection does: the kernel hangs
the terminal up and sends SIGHUP to its session leader), and checks, with bounded waits: the
process is gone within `GONE_WITHIN` (the product's target is 2 s; this leaves room for a loaded
machine), no child it started is left (by pid), and the history reads back whole and resumes: the
next request, rebuilt from it, is accepted by the loopback server, which enforces the API's rules.

The program is forked from the worker's fork server (tests/launch.py), which has imported rhapsody and
Textual and nothing more: it is still a process of its own, the leader of its own session with the pty
as its controlling terminal (as a shell starts it), so the kernel's SIGHUP, the hung-up terminal, its
children and its exit status are its own. Only the tests of the boot itself start a fresh interpreter.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rhapsody.config.settings import Settings
from rhapsody.core.session.history import read_history
from rhapsody.frontends.app.app import RhapsodyApp
from rhapsody.loopback.script import call, say
from rhapsody.wiring import build
from tests import launch
from tests.conftest import GATE, MODEL, SANDBOX, Stub, collect, held, until, waited
from tests.frontends.test_start import Forked, _env

GONE_WITHIN = 5.0
WORDS = {"content": [{"type": "text", "text": " ".join(f"word{i}" for i in range(400))}]}
"""A reply of 400 words; held after its message and block starts and 8 deltas (320 characters, word30 among them)."""
NARRATE = "I will run the slow command now, to see how long the build takes before changing anything."
ASKED = "wants to run"
"""What the question panel says above the call it asks about."""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead: only its parent has not read its status yet
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def _pids_running(marker: str) -> list[int]:
    """Pids whose command line holds `marker` (the unique argument of a scripted `sleep`)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if marker.encode() in argv and _alive(int(entry.name)):
                found.append(int(entry.name))
    return found


def _closed(term: Forked) -> float:
    """Close the terminal under the program; the seconds until it was gone (fails past GONE_WITHIN)."""
    began = time.monotonic()
    os.close(term.fd)
    term.fd = os.open(os.devnull, os.O_RDONLY)  # Terminal.close() closes it again
    deadline = began + GONE_WITHIN
    while time.monotonic() < deadline:
        if term.poll() is not None:
            return time.monotonic() - began
        time.sleep(0.02)
    raise AssertionError(f"rhapsody was still running {GONE_WITHIN} s after its terminal closed")


def _history(project: Path) -> Path:
    files = list((project / ".rhapsody" / "history").glob("*.jsonl"))
    assert len(files) == 1, files
    return files[0]


def _kinds(project: Path) -> list[str]:
    read = read_history(_history(project))
    assert read.skipped == 0  # every line whole
    seqs = [r["seq"] for r in read.records]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    return [r["kind"] for r in read.records]


async def _resumes(stub: Stub, project: Path) -> None:
    """The session resumes, and the request rebuilt from its history is one the API accepts."""
    stub.script(say("resumed fine"))
    wiring = build(project, Settings(permission_mode="auto-edit", sandbox=SANDBOX), stub.model(), MODEL,
                   continue_last=True)
    events = await collect(wiring.agent.run("go on"))
    assert not [e for e in events if type(e).__name__ == "Failed"], events
    assert wiring.session.messages()[-1].texts() == ["resumed fine"]
    await wiring.close()


HOW = ["sighup", "vanished"]
"""How the terminal goes: closed under its session leader (the kernel sends SIGHUP), or closed with no signal."""


def _start(project: Path, home: Path, stub: Stub, *args: str, how: str = "sighup", fresh: bool = False,
           **env: str) -> Forked:
    full = _env(home, ANTHROPIC_BASE_URL=stub.server.url, ANTHROPIC_API_KEY="sk-ant-test", RHAPSODY_MODEL=MODEL,
                **env)
    return Forked(project, full, args=args, controlling=how == "sighup", fresh=fresh)


@pytest.mark.parametrize("how", HOW)
async def test_closed_mid_turn_the_command_dies_and_the_turn_is_recorded_interrupted(
        project: Path, home: Path, stub: Stub, how: str) -> None:
    marker = f"302.{HOW.index(how)}7"  # one per case: two cases on two workers never see each other's sleep
    stub.script(call(NARRATE, "bash", command=f"sleep {marker}"))
    term = _start(project, home, stub, "--permission-mode", "auto-edit", how=how)
    try:
        assert term.read_until(lambda s: f"model        {MODEL}" in s), term.seen[-2000:]
        os.write(term.fd, b"run the build\r")
        assert term.read_until(lambda _s: bool(_pids_running(marker)), 30), term.seen[-2000:]
        [sleeper] = _pids_running(marker)
        _closed(term)
        assert waited(lambda: not _alive(sleeper), 5), "the command outlived rhapsody"
    finally:
        term.close()
    kinds = _kinds(project)
    assert "interrupted" in kinds
    await _resumes(stub, project)


@pytest.mark.parametrize("how", HOW)
async def test_closed_while_a_reply_streams_what_streamed_is_kept_interrupted(project: Path, home: Path,
                                                                              stub: Stub, how: str) -> None:
    story, go = held(WORDS, after=10)
    stub.script(story)
    term = _start(project, home, stub, how=how)
    try:
        assert term.read_until(lambda s: f"model        {MODEL}" in s), term.seen[-2000:]
        os.write(term.fd, b"tell me a story\r")
        assert term.read_until(lambda s: "word30" in s, 30), term.seen[-2000:]
        _closed(term)
    finally:
        go.set()
        term.close()
    [interrupted] = [r for r in read_history(_history(project)).records if r["kind"] == "interrupted"]
    assert interrupted["partial_text"].startswith("word0 word1") and "word399" not in interrupted["partial_text"]
    await _resumes(stub, project)


@pytest.mark.parametrize("how", HOW)
async def test_closed_right_after_an_interrupt_it_ends(project: Path, home: Path, stub: Stub, how: str) -> None:
    """Esc, then the window closed at once: the turn's end (the branch read again, the footer redrawn) is under way."""
    story, go = held(WORDS, after=10)
    stub.script(story)
    term = _start(project, home, stub, how=how)
    try:
        assert term.read_until(lambda s: f"model        {MODEL}" in s), term.seen[-2000:]
        os.write(term.fd, b"tell me a story\r")
        assert term.read_until(lambda s: "word30" in s, 30), term.seen[-2000:]
        os.write(term.fd, b"\x1b")
        assert term.read_until(lambda s: "interrupted" in s, 30), term.seen[-2000:]
        _closed(term)
    finally:
        go.set()
        term.close()
    assert _kinds(project).count("interrupted") == 1
    await _resumes(stub, project)


@pytest.mark.parametrize("how", HOW)
async def test_closed_with_a_question_open_the_question_goes_and_the_session_resumes(
        project: Path, home: Path, stub: Stub, how: str) -> None:
    stub.script(call(NARRATE, "bash", command="sleep 300.0132", sandbox=False, justification="it needs the host"))
    term = _start(project, home, stub, "--permission-mode", "ask", how=how)
    try:
        assert term.read_until(lambda s: f"model        {MODEL}" in s), term.seen[-2000:]
        os.write(term.fd, b"run the build\r")
        assert term.read_until(lambda s: ASKED in s, 30), term.seen[-2000:]
        _closed(term)
    finally:
        term.close()
    assert not _pids_running("300.0132")  # never allowed, never run
    assert "interrupted" in _kinds(project)
    await _resumes(stub, project)


@pytest.mark.parametrize("how", HOW)
def test_closed_while_booting_it_ends(project: Path, home: Path, stub: Stub, how: str) -> None:
    """Closed as the first frame shows, while the session is being built (a fresh interpreter: the boot as it is)."""
    term = _start(project, home, stub, how=how, fresh=True)
    try:
        assert term.read_until(lambda s: "rhapsody" in s), term.seen[-2000:]
        _closed(term)
    finally:
        term.close()
    history = project / ".rhapsody" / "history"
    for path in history.glob("*.jsonl") if history.exists() else ():
        assert read_history(path).skipped == 0


@pytest.mark.parametrize("how,deaf", [("sighup", False), ("vanished", False), ("sighup", True)])
async def test_closed_with_the_editor_open_the_editor_goes_too(project: Path, home: Path, stub: Stub,
                                                               tmp_path: Path, how: str, deaf: bool) -> None:
    """`deaf`: an editor that ignores SIGHUP keeps the app's loop blocked on it; the deadline ends both."""
    editor = tmp_path / "editor.sh"
    pid_file = tmp_path / "editor.pid"
    ignore = "trap '' HUP\n" if deaf else ""
    editor.write_text(f"#!/bin/sh\n{ignore}echo $$ > {pid_file}\nexec sleep 300.0133\n")
    editor.chmod(0o755)
    stub.script(say("Ready when you are."))
    drafts = tmp_path / "tmp"
    drafts.mkdir()
    term = _start(project, home, stub, EDITOR=str(editor), VISUAL=str(editor), TMPDIR=str(drafts), how=how)
    try:
        assert term.read_until(lambda s: f"model        {MODEL}" in s), term.seen[-2000:]
        os.write(term.fd, b"say hello\r")
        assert term.read_until(lambda s: "Ready when you are." in s, 30), term.seen[-2000:]
        os.write(term.fd, b"\x07")  # ctrl+g
        assert waited(lambda: pid_file.exists() and pid_file.read_text().strip().isdigit(), 20)
        editor_pid = int(pid_file.read_text())
        assert [p.name[:16] for p in drafts.iterdir()] == ["rhapsody-prompt-"]  # the draft, open in the editor
        _closed(term)
        assert waited(lambda: not _alive(editor_pid), 5), "the editor outlived rhapsody"
    finally:
        term.close()
    assert not list(drafts.iterdir())  # the draft's private file is removed, however it ended
    assert "message" in _kinds(project)
    await _resumes(stub, project)


@pytest.mark.parametrize("how", HOW)
async def test_closed_during_a_seam_the_handoff_is_cancelled_and_the_session_resumes(
        project: Path, home: Path, stub: Stub, how: str) -> None:
    note = {"type": "tool_use", "name": "micro_handoff", "input": {"note": "done: nothing yet"}}
    writing, go = held({"content": [{"type": "text", "text": "Writing the note. " * 40}, note]})
    stub.script(call(NARRATE, "bash", command="true"), say("Ready when you are."), writing)
    term = _start(project, home, stub, "--permission-mode", "auto-edit", how=how)
    try:
        assert term.read_until(lambda s: f"model        {MODEL}" in s), term.seen[-2000:]
        os.write(term.fd, b"run it\r")
        assert term.read_until(lambda s: "Ready when you are." in s, 30), term.seen[-2000:]
        os.write(term.fd, b"\x0f")  # ctrl+o; a session this short may ask first, as a seam would not pay yet
        assert term.read_until(lambda s: "hand off anyway?" in s or "Writing the note." in s, 30), term.seen[-2000:]
        if "Writing the note." not in term.seen:
            os.write(term.fd, b"y")  # the note is asked for, and its reply is held after its first words
        assert term.read_until(lambda s: "Writing the note." in s, 30), term.seen[-2000:]
        _closed(term)
    finally:
        go.set()
        term.close()
    kinds = _kinds(project)
    assert "interrupted" in kinds and "handoff_failed" in kinds and "seam" not in kinds  # cancelled, not committed
    states = [r["state"] for r in read_history(_history(project)).records if r["kind"] == "handoff"]
    assert "asked" in states and "noted" not in states
    await _resumes(stub, project)


@pytest.mark.parametrize("how", HOW)
async def test_plain_mode_closed_with_a_question_open_ends(project: Path, home: Path, stub: Stub, how: str) -> None:
    stub.script(call(NARRATE, "bash", command="sleep 300.0136", sandbox=False, justification="it needs the host"))
    term = _start(project, home, stub, "--plain", "--permission-mode", "ask", how=how)
    try:
        assert term.read_until(lambda s: "›" in s, 30), term.seen[-2000:]
        os.write(term.fd, b"run the build\r")
        assert term.read_until(lambda s: "allow once (y, or Enter)" in s, 30), term.seen[-2000:]
        _closed(term)
    finally:
        term.close()
    assert not _pids_running("300.0136")  # never allowed, never run
    assert "interrupted" in _kinds(project)
    await _resumes(stub, project)


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("front", ["--plain", "-p"])
async def test_plain_and_headless_stop_save_and_exit(project: Path, home: Path, stub: Stub, front: str,
                                                     how: str) -> None:
    marker = f"301.{len(front)}{HOW.index(how)}7"  # one per case: two cases on two workers never see each other's sleep
    stub.script(call(NARRATE, "bash", command=f"sleep {marker}"))
    args = ("--plain", "--permission-mode", "auto-edit") if front == "--plain" else ("-p", "run the build")
    term = _start(project, home, stub, *args, how=how)
    try:
        if front == "--plain":
            assert term.read_until(lambda s: "›" in s, 30), term.seen[-2000:]
            os.write(term.fd, b"run the build\r")
        assert term.read_until(lambda _s: bool(_pids_running(marker)), 30), term.seen[-2000:]
        [sleeper] = _pids_running(marker)
        _closed(term)
        assert waited(lambda: not _alive(sleeper), 5), "the command outlived rhapsody"
    finally:
        term.close()
    assert "interrupted" in _kinds(project)
    await _resumes(stub, project)



async def test_headless_output_whose_reader_left_stops_the_run(project: Path, home: Path, stub: Stub) -> None:
    """`rhapsody -p … | head -1`: once the pipe's reader is gone, the run stops as a closed terminal stops it."""
    marker = "300.0139"
    stub.script(call(NARRATE, "bash", command=f"sleep {marker}"))
    env = _env(home, ANTHROPIC_BASE_URL=stub.server.url, ANTHROPIC_API_KEY="sk-ant-test", RHAPSODY_MODEL=MODEL)
    read, write = os.pipe()
    with open(os.devnull, "rb") as null:
        proc = launch.start(["-p", "run the build"], cwd=project, env=env, stdin=null.fileno(), stdout=write,
                            stderr=null.fileno())
    os.close(write)
    try:
        assert waited(lambda: bool(_pids_running(marker)), 30)
        [sleeper] = _pids_running(marker)
        os.close(read)  # the reader leaves
        assert proc.wait(GONE_WITHIN) == 128 + signal.SIGHUP
        assert waited(lambda: not _alive(sleeper), 5), "the command outlived rhapsody"
    finally:
        proc.kill()
        proc.wait()
    assert "interrupted" in _kinds(project)
    await _resumes(stub, project)


def _waiting_threads() -> list[str]:
    """What each thread other than this one is in the middle of: reading git, or waiting for the event loop."""
    frames = []
    for ident, frame in sys._current_frames().items():
        if ident == threading.get_ident():
            continue
        names = []
        while frame is not None:
            names.append(frame.f_code.co_name)
            frame = frame.f_back
        frames += [n for n in names if n in ("git_facts", "call_from_thread")]
    return frames


async def test_the_branch_is_read_by_a_thread_that_never_waits_for_the_loop(project: Path, stub: Stub) -> None:
    """A loop held by the app's shutdown never answers a thread that waits for it, and then the thread holds
    the exit: the thread that reads the branch hands its result over and ends, whatever the loop does."""

    def boot() -> tuple[Any, Any, Any]:
        wiring = stub.wire(project)
        return wiring.agent, wiring.settings, None

    app = RhapsodyApp(boot=boot, root=project)
    async with app.run_test() as pilot:
        await until(lambda: app.ready and "master" in app.status_bar.git, within=30, pause=pilot.pause)
        app.status_bar.git = ""
        app.refresh_git()
        await until(lambda: "git_facts" in _waiting_threads(), within=10, step=0.001)  # it reads (a few git calls)
        held = waited(lambda: not _waiting_threads(), 10)  # the loop held here, as a shutdown would hold it
        assert held, _waiting_threads()
        await until(lambda: "master" in app.status_bar.git, within=10, pause=pilot.pause)  # and the branch arrived


def test_under_nohup_a_hangup_leaves_the_run_alone(project: Path, home: Path, stub: Stub) -> None:
    """SIGHUP ignored when rhapsody starts (`nohup rhapsody -p …`): the run was meant to outlive its terminal."""
    stub.script(call(NARRATE, "bash", command=GATE), say("finished"))
    env = _env(home, ANTHROPIC_BASE_URL=stub.server.url, ANTHROPIC_API_KEY="sk-ant-test", RHAPSODY_MODEL=MODEL)
    with open(os.devnull, "r+b") as null:
        proc = launch.start(["-p", "run the build"], cwd=project, env=env, stdin=null.fileno(), stdout=null.fileno(),
                            stderr=null.fileno(), ignore=(signal.SIGHUP,))
    try:
        assert waited(lambda: '"kind":"permission","tool":"bash"' in _text(project), 30)  # the command runs
        proc.send_signal(signal.SIGHUP)
        (project / "go").touch()
        assert proc.wait(30) == 0
    finally:
        proc.kill()
        proc.wait()
    assert "interrupted" not in _kinds(project)
    assert read_history(_history(project)).records[-1]["kind"] != "interrupted"


def _text(project: Path) -> str:
    files = list((project / ".rhapsody" / "history").glob("*.jsonl")) if (project / ".rhapsody").exists() else []
    return files[0].read_text() if files else ""
