"""The command line as a Claude Code user types it: a prompt as the argument, -c/-r, piped input to -p,
and -p "/command" expanding a custom command. Real subprocesses against the loopback server."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from rhapsody.loopback.script import say

from tests import launch
from tests.conftest import MODEL, Stub
from tests.frontends.test_start import Forked, _env
from tests.test_cli import one_line_error


def headless(stub: Stub, project: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m rhapsody ARGS` on the loopback, `stdin` piped in (None: /dev/null)."""
    env = {**os.environ, "ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": stub.server.url}
    return launch.run([*args, "--cwd", str(project), "--model", MODEL], input=stdin,
                      stdin=subprocess.DEVNULL if stdin is None else None, env=env, timeout=60)


def first_text(stub: Stub, n: int = 0) -> str:
    content = stub.bodies()[n]["messages"][-1]["content"]
    return str(content if isinstance(content, str) else content[-1]["text"])


def test_piped_input_comes_before_the_task_given_with_p(stub: Stub, project: Path) -> None:
    stub.script(say("Summarised."))
    result = headless(stub, project, "-p", "summarise", stdin="hi\nthere\n")
    assert result.returncode == 0, result.stderr
    assert first_text(stub) == "hi\nthere\n\nsummarise"


def test_p_without_a_task_reads_the_task_from_standard_input(stub: Stub, project: Path) -> None:
    stub.script(say("Done."))
    result = headless(stub, project, "-p", stdin="list the files\n")
    assert result.returncode == 0, result.stderr
    assert first_text(stub) == "list the files" and "Done." in result.stdout


def test_p_with_nothing_to_do_is_one_line_and_sends_nothing(stub: Stub, project: Path) -> None:
    line = one_line_error(headless(stub, project, "-p", stdin=""))
    assert "empty" in line and "standard input" in line
    assert "both" in one_line_error(headless(stub, project, "-p", "one", "two"))
    assert not stub.bodies()


def test_p_slash_command_expands_a_custom_command_and_refuses_an_unknown_one(stub: Stub, project: Path) -> None:
    (project / ".claude" / "commands").mkdir(parents=True)
    (project / ".claude" / "commands" / "review.md").write_text("---\ndescription: review\n---\n"
                                                                "Review $1 for bugs, then $ARGUMENTS.\n")
    stub.script(say("Reviewed."))
    result = headless(stub, project, "-p", "/review app.py")
    assert result.returncode == 0, result.stderr
    assert first_text(stub) == "Review app.py for bugs, then app.py."
    assert "unknown command /nope" in one_line_error(headless(stub, project, "-p", "/nope"))
    assert "/stats" in one_line_error(headless(stub, project, "-p", "/stats"))
    assert len(stub.bodies()) == 1  # neither refused command reached the model


def test_c_continues_the_latest_session_and_r_resumes_one_by_id(stub: Stub, project: Path) -> None:
    stub.script(say("First."), say("Second."), say("Third."))
    assert headless(stub, project, "-p", "one").returncode == 0
    result = headless(stub, project, "-c", "-p", "two")
    assert result.returncode == 0, result.stderr
    said = [m["content"] for m in stub.bodies()[1]["messages"]]
    assert len(said) == 3 and "one" in str(said[0])  # the first turn, then the new message
    session = next((project / ".rhapsody" / "history").glob("*.jsonl")).stem
    assert headless(stub, project, "-r", session, "-p", "three").returncode == 0
    assert len(stub.bodies()[2]["messages"]) == 5
    assert len(list((project / ".rhapsody" / "history").glob("*.jsonl"))) == 1


def test_a_prompt_argument_opens_the_app_with_it_sent(project: Path, tmp_path: Path, stub: Stub) -> None:
    stub.script(say("Fixed it."))
    (tmp_path / "home").mkdir()
    env = _env(tmp_path / "home", ANTHROPIC_BASE_URL=stub.server.url, ANTHROPIC_API_KEY="sk-ant-test",
               RHAPSODY_MODEL=MODEL)
    term = Forked(project, env, args=("fix the test",))
    try:
        assert term.read_until(lambda s: "Fixed it." in s.replace("\n", "")), term.seen[-2000:]
        assert [m["content"][0]["text"] for m in stub.bodies()[0]["messages"]] == ["fix the test"]
        # idle drawn after the reply first appeared: the turn ended (a later repaint of the transcript may draw
        # the reply again after the status line, so not after its last appearance)
        assert term.read_until(lambda s: "idle" in s.split("Fixed it", 1)[-1])
        os.write(term.fd, b"\x03")
        assert term.read_until(lambda s: "again to quit" in s)
        os.write(term.fd, b"\x03")
        assert term.exit_status() == 0
    finally:
        term.close()
