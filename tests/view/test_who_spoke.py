"""Who spoke: the recap, the picker and the export never give rhapsody's own messages or an imported tool's
text as the human's, and imported calls read as one line like rhapsody's own."""

from __future__ import annotations

from rhapsody.core.session.records import parsed
from rhapsody.core.session.records import dumped
from pathlib import Path

from rhapsody.commands.export import export_text
from rhapsody.core.session.messages import ToolUseBlock
from rhapsody.core.session.context import RequestSpec
from rhapsody.core.session.session import Session
from rhapsody.frontends.app.picker import Summary
from rhapsody.frontends.recap import recap_lines
from rhapsody.prompts import load
from rhapsody.view import render
from rhapsody.core.session import records as rec

from tests.importer.test_import import imported
from tests.transcripts import _Claude, dump

HUMAN = "Fix the failing parser test please."


def text(words: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": words}]


def native_session(project: Path) -> Session:
    """A session whose last user messages are rhapsody's own, as a handoff leaves them."""
    session = Session.start(project, RequestSpec(model="m", system="s", tools=[]))
    session.append(rec.MessageAdded(role="user", content=text(HUMAN)))
    session.append(rec.MessageAdded(role="assistant", content=text("Fixed: 13 passed.")))
    session.append(rec.MessageAdded(role="user", content=text(load("handoff").strip())))
    session.append(rec.MessageAdded(role="assistant", content=text("Field note written.")))
    session.append(rec.MessageAdded(role="user", content=text(load("continue").strip())))
    return session


def test_the_recap_and_the_pickers_preview_give_the_humans_words_not_rhapsodys(project: Path) -> None:
    session = native_session(project)
    assert dumped(session.records)[-1]["content"][0]["text"].startswith("[rhapsody]")  # what the old recap showed
    recap = recap_lines(session.records)
    assert recap[0] == f"  you: {HUMAN}" and not any("[rhapsody]" in line for line in recap)
    summary = Summary.read(session.path)
    assert summary is not None and summary.last == HUMAN and f"you: {HUMAN}" in summary.preview
    assert "[rhapsody]" not in summary.preview


def claude_transcript(tmp_path: Path) -> Path:
    c = _Claude(3)
    c.user("<command-name>/clear</command-name>\n<command-message>clear</command-message>\n<command-args></command-args>")
    c.user("<local-command-stdout></local-command-stdout>")
    c.user(HUMAN)
    read = c.call(1, "Read", file_path="/home/ana/proj/src/parser.py")
    c.assistant([{"type": "text", "text": "I will read the parser first."}, read])
    c.result(read, "1\tdef parse(tokens):")
    fetch = c.call(2, "WebFetch", url="https://docs.python.org/3/library/re.html", prompt="the flags")
    c.assistant([{"type": "text", "text": "I will check the re docs."}, fetch])
    c.result(fetch, "re.VERBOSE ...")
    c.assistant([{"type": "text", "text": "Fixed the bound."}], stop="end_turn")
    c.user("<task-notification>\n<task-id>b1</task-id>\n<status>completed</status>\n</task-notification>")
    c.user([{"type": "text", "text": "<system-reminder>\nThe todo list is empty.\n</system-reminder>"}])
    return dump(c.lines, tmp_path / "claude" / "s.jsonl")


def test_an_imported_tools_own_text_is_never_the_humans_and_its_calls_read_as_one_line(
        project: Path, tmp_path: Path) -> None:
    records = imported(project, claude_transcript(tmp_path))
    session_id = str(records[0]["session"])
    lines = [line for _, line in render.record_lines(parsed(records), project, session_id)]
    users = [line.text for line in lines if line.kind == "user"]
    assert users == [f"› {HUMAN}"]  # the one message the human typed
    own = [line.text for line in lines if line.kind == "harness"]
    assert any("<task-notification>" in t for t in own) and any("<command-name>/clear" in t for t in own)
    tools = [line.text for line in lines if line.kind == "tool"]
    assert tools[0].startswith("Read /home/ana/proj/src/parser.py → ok")
    assert tools[1].startswith("WebFetch https://docs.python.org/3/library/re.html → ok")
    assert not any("{" in t for t in tools)  # no arguments as JSON
    assert recap_lines(parsed(records))[0] == f"  you: {HUMAN}"
    markdown = export_text(project, session_id, "md")[1]
    assert f"> › {HUMAN}" in markdown and "> › <" not in markdown  # no tool text quoted as the human's


def test_web_fetch_and_codex_shell_calls_get_a_readable_line() -> None:
    fetch = ToolUseBlock(id="t1", name="web_fetch", input={"url": "https://example.org/a"})
    shell = ToolUseBlock(id="t2", name="shell", input={"command": ["bash", "-lc", "pytest -q"], "workdir": "/w"})
    todos = ToolUseBlock(id="t3", name="TodoWrite", input={"todos": [{"content": "a"}, {"content": "b"}]})
    assert render.key_argument(fetch) == "https://example.org/a"
    assert render.key_argument(shell) == "pytest -q"
    assert render.key_argument(todos) == "2 todos"
