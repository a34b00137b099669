"""`rhapsody rewind` as a user meets it after headless runs: real subprocesses, sandboxed bash, and
kill -9 of the whole process group during a checkpoint and during a restore (each process forked from
the worker's fork server, tests/launch.py: its own session, group and children, none of the imports)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from rhapsody.core.session.history import find_session, read_history
from rhapsody.loopback.script import call, say
from rhapsody.rewind.shadow import Shadow

from tests import launch
from tests.conftest import MODEL, Stub
from tests.test_cli import one_line_error, rhapsody
from tests.rewind.test_rewind import first_turn, git_hashes, seed, tree

MANY = "mkdir -p many && for i in $(seq 1500); do echo $i > many/f$i.txt; done"


def headless(stub: Stub, project: Path, task: str, *more: str) -> None:
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": stub.server.url}
    done = rhapsody("-p", task, "--cwd", str(project), "--model", MODEL, *more, env=env)
    assert done.returncode == 0, done.stderr


def two_runs(stub: Stub, project: Path, second: str = "echo three >> notes.txt") -> None:
    """Two headless runs: the first writes, edits and runs bash; the second runs `second` in bash."""
    seed(project)
    stub.script(
        *first_turn()[:-1],  # its three writing calls
        say("Done."),
        call("I will run the second shell command now, expecting the files it names to change.", "bash",
             command=second),
        say("Done again."),
    )
    headless(stub, project, "make the files")
    headless(stub, project, "the second step", "--continue")


def test_list_and_rewind_files_then_conversation_from_the_command_line(stub: Stub, project: Path) -> None:
    seed(project)
    before, git_before = tree(project), git_hashes(project)
    two_runs(stub, project)
    listed = rhapsody("rewind", "--list", "--json", "--cwd", str(project))
    assert listed.returncode == 0, listed.stderr
    points = json.loads(listed.stdout)["points"]
    assert [p["text"] for p in points] == ["make the files", "the second step"]  # --continue: one session
    assert {f["path"] for f in points[0]["files"]} >= {"notes.txt", "app.py", "gen/out.txt", "old.txt"}
    done = rhapsody("rewind", "--to", "1", "--files", "--json", "--cwd", str(project))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["prompt"] == "" and tree(project)["app.py"] == before["app.py"]
    assert "notes.txt" not in tree(project) and tree(project)["old.txt"] == before["old.txt"]
    assert git_hashes(project) == git_before
    text = rhapsody("rewind", "--to", "1", "--conversation", "--cwd", str(project))
    assert text.returncode == 0 and "make the files" in text.stdout
    session = find_session(project, None)
    kinds = [r["kind"] for r in read_history(session).records]
    assert kinds.count("rewind") == 1 and kinds.count("restore") == 2


def test_bad_points_and_outside_changes_are_one_line(stub: Stub, project: Path) -> None:
    two_runs(stub, project)
    assert "no point 7" in one_line_error(rhapsody("rewind", "--to", "7", "--cwd", str(project)))
    assert "--list" in one_line_error(rhapsody("rewind", "--cwd", str(project)))
    (project / "app.py").write_text("mine\n")
    refused = rhapsody("rewind", "--to", "1", "--files", "--cwd", str(project))
    assert refused.returncode == 1 and "app.py" in refused.stderr and "--force" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and (project / "app.py").read_text() == "mine\n"
    forced = rhapsody("rewind", "--to", "1", "--files", "--force", "--cwd", str(project))
    assert forced.returncode == 0 and "a - b" in (project / "app.py").read_text()


def start(project: Path, *args: str, env: dict[str, str] | None = None) -> launch.Child:
    """`rhapsody ARGS` in its own session and process group (killed whole, git included), forked warm."""
    with open(os.devnull, "r+b") as null:
        return launch.start([*args, "--cwd", str(project)], env=env, stdin=null.fileno(), stdout=null.fileno(),
                            stderr=null.fileno(), session=True)


def kill_when(proc: launch.Child, ready: "object") -> None:
    deadline = time.monotonic() + 60
    while not ready():  # type: ignore[operator]
        assert proc.poll() is None, "finished before the kill"
        assert time.monotonic() < deadline
        time.sleep(0.001)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_kill_9_during_a_checkpoint_leaves_history_and_shadow_usable(stub: Stub, project: Path) -> None:
    two_runs(stub, project)
    subprocess.run(["bash", "-c", MANY], cwd=project, check=True)  # new files to hash: a slow checkpoint
    git_before = tree(project), git_hashes(project)
    lock = Shadow(project).index.with_name("rhapsody-index.lock")
    proc = start(project, "rewind", "--to", "1", "--files", "--force")
    kill_when(proc, lock.exists)
    records = read_history(find_session(project, None)).records  # readable: a torn tail at most
    store = Shadow(project)
    assert all(store.has(r["commit"]) for r in records if r["kind"] == "checkpoint")
    assert tree(project) == git_before[0] and git_hashes(project) == git_before[1]
    assert rhapsody("rewind", "--to", "1", "--files", "--force", "--cwd", str(project)).returncode == 0
    assert not (project / "many").exists() and "notes.txt" not in tree(project)


def test_kill_9_during_a_restore_leaves_whole_files_and_the_next_open_finishes_it(stub: Stub, project: Path) -> None:
    seed(project)
    before = tree(project)
    two_runs(stub, project, second=MANY)
    after = tree(project)
    history = find_session(project, None)
    proc = start(project, "rewind", "--to", "1", "--files", "--force")
    kill_when(proc, lambda: b'"state":"started"' in history.read_bytes())
    half = tree(project)
    assert all(half[p] in (before.get(p), after.get(p)) for p in half if not p.endswith(".rhapsody-restore"))
    assert read_history(history).records[-1]["kind"] in ("restore", "checkpoint")
    listed = rhapsody("rewind", "--list", "--cwd", str(project))
    assert listed.returncode == 0
    again = rhapsody("rewind", "--to", "1", "--files", "--force", "--json", "--cwd", str(project))
    assert again.returncode == 0, again.stderr
    assert tree(project) == before
    kinds = [(r["kind"], r.get("state")) for r in read_history(history).records if r["kind"] == "restore"]
    assert kinds[:2] == [("restore", "started"), ("restore", "done")]


@pytest.mark.parametrize("args", [("rewind", "--to", "x"), ("rewind", "--list", "--to", "1")])
def test_rewind_usage_errors_are_one_line(project: Path, args: tuple[str, ...]) -> None:
    one_line_error(rhapsody(*args, "--cwd", str(project)))


def test_kill_9_of_a_headless_turn_during_a_tool_checkpoint_resumes_and_rewinds(stub: Stub, project: Path) -> None:
    seed(project)
    before = tree(project)
    stub.script(
        call("I will create many files with the shell, expecting fifteen hundred of them in many/.", "bash",
             command=MANY),
        call("Now I write a summary file, expecting it to be created next to them.", "write_file",
             path="summary.txt", content="many\n"),
        say("Done."),
        say("Resumed and fine."),
    )
    env = {**os.environ, "ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": stub.server.url}
    proc = start(project, "-p", "make many", "--model", MODEL, env=env)
    lock = Shadow(project).index.with_name("rhapsody-index.lock")
    kill_when(proc, lambda: (project / "many").is_dir() and lock.exists())  # the checkpoint before write_file
    assert not (project / "summary.txt").exists()
    headless(stub, project, "go on", "--continue")
    history = read_history(find_session(project, None)).records
    assert any(r["kind"] == "resumed" for r in history)
    assert rhapsody("rewind", "--to", "1", "--files", "--cwd", str(project)).returncode == 0
    assert tree(project) == before
