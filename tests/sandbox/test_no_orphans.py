"""Nothing outlives rhapsody (issue 18, item 6): for each kind of process rhapsody starts, a real
parent process starts it through rhapsody's own code, the test kills the parent with SIGKILL (an OOM
kill, a crashed terminal), and every process it started must be gone within a bounded wait."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO

import pytest

from rhapsody.config.hooks import HookCommand, HookMatcher
from rhapsody.core.session import records as rec
from rhapsody.core.session.context import RequestSpec
from rhapsody.core.session.session import Session
from rhapsody.core.toolbox.protocol import ToolContext
from rhapsody.hook_runner import HookRunner
from rhapsody.loopback.script import call
from rhapsody.sandbox import lifeline
from rhapsody.sandbox.bwrap import bwrap_path

from rhapsody.tools import default_toolbox
from tests import launch, orphan_parent
from tests.conftest import MODEL, Stub, waited

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
REPO = Path(__file__).resolve().parents[2]


def marked(marker: str, but: int) -> list[int]:
    """Live processes (zombies have no command line) whose command line carries `marker`, other than `but`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == but:
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def fake_program(folder: Path, name: str, marker: str) -> None:
    """`name` on PATH as a program that runs long, its command line carrying `marker`."""
    folder.mkdir(exist_ok=True)
    script = folder / name
    script.write_text(f"#!/bin/sh\nexec python3 -c 'import time; time.sleep(300)' {marker}\n")
    script.chmod(0o755)


def kill_parent_and_watch(kind: str, root: Path, expected: int, env: dict[str, str] | None = None,
                          rhapsody: list[str] | None = None) -> None:
    """`rhapsody`: the parent is `python -m rhapsody RHAPSODY`, forked from the worker's fork server
    (tests/launch.py: its own process, its children its own), instead of tests/orphan_parent.py."""
    marker = str(root)
    with tempfile.TemporaryFile() as err, open(os.devnull, "r+b") as null:
        parent: subprocess.Popen[bytes] | launch.Child
        if rhapsody is None:
            parent = subprocess.Popen([sys.executable, "-m", "tests.orphan_parent", kind, marker], cwd=REPO,
                                      env=env or dict(os.environ), stdin=null, stdout=null, stderr=err)
        else:
            parent = launch.start(rhapsody, cwd=REPO, env=env or dict(os.environ), stdin=null.fileno(),
                                  stdout=null.fileno(), stderr=err.fileno())
        _watch(kind, marker, expected, parent, err)


def _watch(kind: str, marker: str, expected: int, parent: subprocess.Popen[bytes] | launch.Child,
           err: IO[bytes]) -> None:
    try:
        started = waited(lambda: len(marked(marker, parent.pid)) >= expected, 30)
        assert started, f"the {kind} children never started: {parent.poll()} {_read(err)!r}"
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert waited(lambda: not marked(marker, parent.pid), 10), f"{kind} children outlived their parent"
    finally:
        parent.kill()
        for pid in marked(marker, parent.pid):
            os.kill(pid, signal.SIGKILL)


def _read(f: IO[bytes]) -> bytes:
    f.seek(0)
    return f.read()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "a.txt").write_text(("a" * 40 + "!\n") * 50)  # catastrophic for (a+)+$
    return folder


def test_search_child_dies_with_its_parent(root: Path) -> None:
    kill_parent_and_watch("search", root, expected=1)


def test_ripgrep_dies_with_its_parent(root: Path, tmp_path: Path) -> None:
    fake_program(tmp_path / "bin", "rg", str(root))
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    kill_parent_and_watch("ripgrep", root, expected=1, env=env)


def test_git_dies_with_its_parent(root: Path, tmp_path: Path) -> None:
    fake_program(tmp_path / "bin", "git", str(root))
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    kill_parent_and_watch("git", root, expected=1, env=env)


def test_bash_outside_the_sandbox_and_what_it_backgrounds_die_with_their_parent(root: Path) -> None:
    kill_parent_and_watch("bash-off", root, expected=3)  # bash and both sleepers (and the supervisor)


@pytest.mark.skipif(bwrap_path() is None, reason="needs bubblewrap")
def test_sandboxed_bash_and_what_it_backgrounds_die_with_their_parent(root: Path) -> None:
    kill_parent_and_watch("bash-sandboxed", root, expected=3)


def test_a_hook_dies_with_its_parent(root: Path) -> None:
    """A Stop hook that runs long, started by rhapsody's hook runner, outside the sandbox."""
    kill_parent_and_watch("hook", root, expected=1)


HAS_SETSID = shutil.which("setsid") is not None


@pytest.mark.skipif(not HAS_SETSID, reason="util-linux's setsid is not installed")
def test_what_a_hook_starts_in_the_background_or_moves_out_of_its_group_dies_with_its_parent(root: Path) -> None:
    kill_parent_and_watch("hook-background", root, expected=3)


@pytest.mark.skipif(not HAS_SETSID, reason="util-linux's setsid is not installed")
def test_what_bash_outside_the_sandbox_moves_out_of_its_group_dies_with_its_parent(root: Path) -> None:
    kill_parent_and_watch("bash-off-moved", root, expected=2)


def _toolbox_bash(root: Path, command: str, timeout: float | None = None) -> str:
    args: dict[str, object] = {"command": command, **({"timeout": timeout} if timeout else {})}
    ctx = ToolContext(root, Session.start(root, RequestSpec(model="m", system="s", tools=[])), 300, 20000)
    outcome, _ = asyncio.run(default_toolbox("yolo", sandbox="off").run("bash", args, ctx))
    return outcome.content


@pytest.mark.skipif(not HAS_SETSID, reason="util-linux's setsid is not installed")
@pytest.mark.parametrize("ending", ["exits", "times out"])
def test_what_bash_outside_the_sandbox_moves_out_of_its_group_dies_when_the_command_ends(root: Path,
                                                                                         ending: str) -> None:
    marker = str(root)
    moved = f"setsid -f {orphan_parent.SLEEPER} {marker} {orphan_parent.QUIET}"
    tail = "echo moved" if ending == "exits" else "echo moved; sleep 60"
    try:
        shown = _toolbox_bash(root, f"{moved}; {tail}", timeout=None if ending == "exits" else 1)
        assert "moved" in shown and ("timeout" in shown) == (ending == "times out")
        assert waited(lambda: not marked(marker, os.getpid()), 10), "what the command moved out outlived it"
    finally:
        for pid in marked(marker, os.getpid()):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not HAS_SETSID, reason="util-linux's setsid is not installed")
def test_what_a_hook_moves_out_of_its_group_dies_when_the_hook_times_out(root: Path) -> None:
    marker = str(root)
    session = Session.start(root, RequestSpec(model="m", system="s", tools=[]))
    command = f"setsid -f {orphan_parent.SLEEPER} {marker} {orphan_parent.QUIET}; sleep 60"
    runner = HookRunner({"Stop": [HookMatcher(hooks=[HookCommand(command=command, timeout=1)])]}, root)
    try:
        asyncio.run(runner.fire(session, "Stop", {}))
        assert [r.exit_code for r in rec.of(session.records, rec.Hook)] == [None]  # it timed out
        assert waited(lambda: not marked(marker, os.getpid()), 10), "what the hook moved out outlived it"
    finally:
        for pid in marked(marker, os.getpid()):
            os.kill(pid, signal.SIGKILL)


def test_mcp_server_dies_with_rhapsody(root: Path, tmp_path: Path) -> None:
    """rhapsody itself (`rhapsody mcp list`) starts a stdio server that never answers, and is killed."""
    config = tmp_path / "xdg" / "rhapsody" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[mcp_servers.slow]\ncommand = "python3"\nstartup_timeout_sec = 120\n'
                      f'args = ["-c", "import time; time.sleep(300)", "{root}"]\n', encoding="utf-8")
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    kill_parent_and_watch("mcp", root, expected=1, env=env, rhapsody=["mcp", "list", "--cwd", str(root)])


def test_a_command_rhapsody_ran_outside_the_sandbox_dies_with_rhapsody(stub: Stub, root: Path, tmp_path: Path) -> None:
    """rhapsody itself, headless against the loopback server, runs a scripted model's command with the
    sandbox off (one job in the background, one in the foreground) and is killed with SIGKILL mid-command."""
    sleeper = f"python3 -c 'import time; time.sleep(300)' {root}"
    stub.script(call("I start the long job in the background and the short one in front, then wait for both.",
                     "bash", command=f"{sleeper} & {sleeper}"))
    config = tmp_path / "xdg" / "rhapsody" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('sandbox = "off"\n', encoding="utf-8")
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "ANTHROPIC_API_KEY": "k",
           "ANTHROPIC_BASE_URL": stub.server.url}
    kill_parent_and_watch("headless rhapsody", root, expected=2, env=env,
                          rhapsody=["-p", "run the jobs", "--cwd", str(root), "--model", MODEL, "--permission-mode",
                                    "yolo"])


PDEATHSIG = ("import ctypes, os; n = ctypes.c_int(); ctypes.CDLL(None).prctl(2, ctypes.byref(n), 0, 0, 0); "
             "print(os.getpid(), os.getppid(), n.value)")  # 2: PR_GET_PDEATHSIG


@pytest.mark.skipif(lifeline._setpriv() is None, reason="util-linux's setpriv is not installed")
def test_a_child_started_to_outlive_the_call_is_the_program_itself_armed_to_die_with_us() -> None:
    argv, preexec = lifeline.dying_with_us([sys.executable, "-c", PDEATHSIG])
    assert preexec is None  # so Python starts it without forking this process
    done = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    out, _ = done.communicate(timeout=30)
    assert out.split() == [str(done.pid), str(os.getpid()), str(int(signal.SIGKILL))]


@pytest.mark.skipif(lifeline._setpriv() is None, reason="util-linux's setpriv is not installed")
def test_a_child_whose_parent_died_before_it_was_armed_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    argv, _ = lifeline.dying_with_us(["touch", str(marker)])
    guard = argv.index(lifeline.GUARD)
    assert argv[guard + 1] == str(os.getpid())
    argv[guard + 1] = str(os.getpid() + 1_000_000)  # as if this process had gone and the child were reparented
    assert subprocess.run(argv).returncode == 137
    assert not marker.exists()


@pytest.mark.skipif(lifeline.dying_with_us(["true"])[1] is not None, reason="no setpriv or no /bin/bash")
def test_a_child_started_to_outlive_the_call_gets_the_environment_as_it_was_given() -> None:
    env = {"PATH": os.environ["PATH"], "A-B": "not an identifier", "BASH_FUNC_greet%%": "() {  echo hello\n}",
           "SHLVL": "7", "LC_ALL": "C.UTF-8"}  # LC_ALL: Python's own child would add LC_CTYPE to a C locale
    argv, _ = lifeline.dying_with_us([sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"])
    seen = json.loads(subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout)
    assert {k: v for k, v in seen.items() if k != "PWD"} == env  # the program's own folder: bash sets it anyway
    argv, _ = lifeline.dying_with_us(["bash", "-c", "greet"])
    assert subprocess.run(argv, env=env, capture_output=True, text=True).stdout == "hello\n"  # an exported function
