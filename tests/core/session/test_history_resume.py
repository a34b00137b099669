"""History on disk: permissions, torn lines, kill -9 and resume, newer versions."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from rhapsody.core.errors import HistoryError
from rhapsody.core.session.history import HistoryWriter, new_session_id, read_history
from rhapsody.core.session.recall import SESSION_ID
from rhapsody.core.session.session import Session
from rhapsody.loopback.script import call, say
from rhapsody.core.session import records as rec

from tests import launch
from tests.conftest import MODEL, SANDBOX, Stub, collect, waited

SLOW = "I will run a slow command that sleeps, so the process can be killed while the tool call is in flight."


def test_history_is_private_ignored_by_git_and_tolerates_a_torn_tail(tmp_path: Path) -> None:
    from rhapsody.core.session.history import history_dir

    folder = history_dir(tmp_path)
    writer = HistoryWriter(folder / "s.jsonl")
    writer.append(rec.MessageAdded(role="user", content=[{"type": "text", "text": "hi"}]))
    writer.close()
    path = folder / "s.jsonl"
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert (tmp_path / ".rhapsody" / ".gitignore").read_text() == "*\n"
    with path.open("ab") as f:
        f.write(b'{"v":1,"seq":1,"kind":"mess')
    read = read_history(path)
    assert read.torn_tail and len(read.records) == 1
    writer = HistoryWriter(path, next_seq=1)
    writer.append(rec.Hint(id="h1", text="x", mode="steer"))
    writer.close()
    read = read_history(path)
    assert [r["kind"] for r in read.records] == ["message", "hint"] and read.skipped == 1


def test_history_from_a_newer_version_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text(json.dumps({"v": 99, "seq": 0, "kind": "session"}) + "\n")
    with pytest.raises(HistoryError, match="newer rhapsody"):
        read_history(path)


def _first_history(folder: Path) -> str:
    """The text of the first history file in `folder` ('' while there is none)."""
    files = sorted(folder.glob("*.jsonl")) if folder.exists() else []
    return files[0].read_text() if files else ""


async def test_resume_after_kill_9_mid_tool_call_is_valid_and_complete(stub: Stub, project: Path) -> None:
    stub.script(
        call("I will look at the file list first to learn the project layout before running anything slow.",
             "find_files", pattern="*.py"),
        call(SLOW, "bash", command="sleep 30"),
        say("resumed fine"),
    )
    env = {**os.environ, "ANTHROPIC_BASE_URL": stub.server.url, "ANTHROPIC_API_KEY": "sk-test"}
    with open(os.devnull, "r+b") as null:  # forked from the worker's fork server (tests/launch.py): its own process
        proc = launch.start(["-p", "work", "--model", MODEL, "--cwd", str(project), "--permission-mode", "yolo"],
                            env=env, stdin=null.fileno(), stdout=null.fileno(), stderr=null.fileno())
    history = project / ".rhapsody" / "history"
    # until bash is permitted: the call is about to run, no result yet
    assert waited(lambda: '"kind":"permission","tool":"bash"' in _first_history(history), 20), "the bash call never started"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    [path] = history.glob("*.jsonl")
    before = read_history(path).records
    with path.open("ab") as f:
        f.write(b'{"v":1,"seq":999,"kind":"usa')
    session = Session.resume(project, path)
    records = read_history(path).records
    assert records[: len(before)] == before
    from rhapsody.config.settings import Settings
    from rhapsody.core.agent.loop import Agent
    from rhapsody.tools import default_toolbox
    from rhapsody.wiring import policy

    agent = Agent(session, stub.model(), default_toolbox(sandbox=SANDBOX), policy(Settings()))
    events = await collect(agent.run("continue please"))
    assert session.messages()[-1].texts() == ["resumed fine"]
    last = stub.bodies()[-1]["messages"]
    assert "rhapsody stopped before this call returned" in json.dumps(last[-1])
    assert not [e for e in events if type(e).__name__ == "Failed"]


async def test_undelivered_hint_is_delivered_first_on_resume(stub: Stub, project: Path) -> None:
    stub.script(say("one"), say("two"))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("first"))
    wiring.session.hint("remember the tabs")
    wiring.session.writer.close()
    session = Session.resume(project, wiring.session.path)
    assert [h.text for h in session.pending] == ["remember the tabs"]
    from rhapsody.config.settings import Settings
    from rhapsody.core.agent.loop import Agent
    from rhapsody.tools import default_toolbox
    from rhapsody.wiring import policy

    agent = Agent(session, stub.model(), default_toolbox(sandbox=SANDBOX), policy(Settings()))
    await collect(agent.run("next"))
    content = stub.bodies()[-1]["messages"][-1]["content"]
    assert [b["text"] for b in content] == ["remember the tabs", "next"]
    assert session.pending == []


def later_session(root: Path, like: Session, stamp: str) -> Session:
    """A new session whose id sorts after every real one (ids made in the same second may not)."""
    from rhapsody.core.session.history import history_dir
    from rhapsody.core.session.context import spec_fields

    session = Session(root, HistoryWriter(history_dir(root) / f"{stamp}.jsonl"), like.spec, stamp)
    session.append(rec.SessionStarted(session=stamp, cwd=str(root), version="0", **spec_fields(like.spec)))
    return session


async def test_a_session_without_a_turn_is_never_latest_and_leaves_no_file(
        stub: Stub, project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rhapsody.cli import parting_line
    from rhapsody.core.session.history import find_session
    from rhapsody.commands.stats import print_stats

    stub.script(say("Hello."))
    real = stub.wire(project)
    await collect(real.agent.run("hi"))
    assert parting_line(real.session, project).startswith(f"session {real.session.id} saved. Come back")
    empty = later_session(project, real.session, "99990101-000000-aaaaaa")  # opened after, never used
    assert find_session(project, None) == real.session.path
    assert print_stats(project, None, as_json=True) == 0
    assert json.loads(capsys.readouterr().out)["session"] == real.session.id
    assert parting_line(empty, project) == ""  # no "saved … come back" for nothing
    assert not empty.path.exists()
    assert real.session.path.exists() and find_session(project, None) == real.session.path
    switched = later_session(project, real.session, "99990101-000000-bbbbbb")
    switched.switch_model("claude-opus-4-1")  # more than a header: kept, though not latest
    assert parting_line(switched, project) == "" and switched.path.exists()
    assert find_session(project, None) == real.session.path
    assert find_session(project, switched.id) == switched.path  # named: still found


def test_sessions_begun_in_one_second_sort_in_the_order_they_began() -> None:
    """`--continue` resumes the last file in name order: a script that starts two sessions within one second
    must get the second, not whichever drew the larger random suffix."""
    made = []
    for _ in range(20):
        made.append(new_session_id())
        time.sleep(0.002)
    assert len({m[:15] for m in made}) <= 2, made  # a second boundary at most: most share their second
    assert made == sorted(made) and len(set(made)) == len(made)
    assert all(SESSION_ID.fullmatch(m) for m in made)  # the shape recall ids are read by
