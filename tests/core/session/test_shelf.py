"""The second window's rules on a session built seam by seam (real sessions, real seams, no model): whole
segments leave, oldest first; the newest seams' words and the notes stay; the notes leave only when they
alone fill the window; the view stays valid and reads the same after a resume."""

from __future__ import annotations

from rhapsody.core.session.records import dump, dumped
from pathlib import Path

from rhapsody.core.session.context import RequestSpec, build_request, measure_messages
from rhapsody.core.session.handoff import commit_seam
from rhapsody.core.session.messages import TextBlock, ToolResultBlock, ToolUseBlock
from rhapsody.core.session.recall import fetch, search
from rhapsody.core.session.session import Session
from rhapsody.core.session.shelf import KEEP_SEAMS, SHELF_AT, shelve_after_seam
from rhapsody.core.session.strip import authored_texts, validity_problems
from rhapsody.view.render import plain, record_lines


def segment(session: Session, n: int, words: int, note: int) -> None:
    """One stretch of work ending in a seam: the human's words, a narrated call, the field note, the answer."""
    add = session.append_message
    add("user", [TextBlock(text=f"task {n}: wombat{n}x " + "w" * words)])
    add("assistant", [TextBlock(text=f"reading for task {n}"), ToolUseBlock(id=f"r{n}", name="read_file", input={})])
    add("user", [ToolResultBlock(tool_use_id=f"r{n}", content="r" * 2000)])
    add("assistant", [TextBlock(text="the note"), ToolUseBlock(id=f"h{n}", name="micro_handoff", input={"n": n})])
    add("user", [ToolResultBlock(tool_use_id=f"h{n}", content=f"Field note, seam {n} " + "n" * note)])
    add("assistant", [TextBlock(text=f"noted {n}")])
    commit_seam(session)


def texts(session: Session) -> str:
    return " ".join(authored_texts(session.conversation.active()))


def notes(session: Session) -> list[str]:
    return [str(b.content)[:14] for m in session.conversation.active() for b in m.content
            if isinstance(b, ToolResultBlock)]


def test_the_oldest_seams_words_leave_as_whole_segments_and_the_notes_stay(project: Path) -> None:
    session = Session.start(project, RequestSpec(model="m", system="s", tools=[]))
    window, shelved = 20_000, []
    for n in range(1, 13):
        segment(session, n, words=3000, note=400)
        record = shelve_after_seam(session, window)
        if record:
            shelved.append(dump(record))
    assert shelved, "the words kept outgrew half the window"
    assert [r["seams"] for r in shelved] == sorted(r["seams"] for r in shelved)  # the shelf only moves on
    last = shelved[-1]
    size = measure_messages(session.spec, session.conversation.active())[1]
    assert last["after_tokens"] < last["before_tokens"] and size <= SHELF_AT * window
    kept = texts(session)
    assert kept.startswith("[rhapsody] Second window:")
    assert all(f"wombat{n}x" not in kept for n in range(1, last["seams"] + 1))  # whole segments left...
    assert all(f"wombat{n}x" in kept for n in range(last["seams"] + 1, 13))  # ...and only those
    assert last["seams"] <= 12 - KEEP_SEAMS
    assert notes(session) == ["Field note, se"] * 12  # every note, in place
    assert not validity_problems(session.conversation.active())
    hit = search(session.path, "wombat1x")[0]
    assert hit.id == f"{session.id}:words-0" and "wombat1x" in (fetch(project, hit.id) or "")
    assert "verified: message 0's words, verbatim from the history, moved out" in (fetch(project, hit.id) or "")
    shown = [plain(line) for _, line in record_lines(session.records, project, session.id)]
    assert sum(1 for line in shown if "! second window: the words of seams 1–" in line) == len(shelved)
    resumed = Session.resume(project, session.path)
    assert build_request(resumed.spec, resumed.conversation.active()) == build_request(
        session.spec, session.conversation.active())


def test_when_the_notes_alone_fill_the_window_the_oldest_leave_too(project: Path) -> None:
    session = Session.start(project, RequestSpec(model="m", system="s", tools=[]))
    for n in range(1, 16):
        segment(session, n, words=200, note=2400)
        shelve_after_seam(session, 12_000)
    shelf = session.conversation.shelf
    assert shelf is not None and 0 < shelf.notes_boundary <= shelf.boundary
    kept = notes(session)
    assert 0 < len(kept) < 15 and "left too" in texts(session)
    assert measure_messages(session.spec, session.conversation.active())[1] <= SHELF_AT * 12_000
    assert not validity_problems(session.conversation.active())


def test_nothing_leaves_while_the_words_fit(project: Path) -> None:
    session = Session.start(project, RequestSpec(model="m", system="s", tools=[]))
    for n in range(1, 5):
        segment(session, n, words=500, note=400)
        assert shelve_after_seam(session, 200_000) is None
    assert "wombat1x" in texts(session) and session.conversation.shelf is None
    assert search(session.path, "wombat1x") == []  # words still in the context are not recalled


def test_when_nothing_more_may_leave_nothing_is_recorded(project: Path) -> None:
    session = Session.start(project, RequestSpec(model="m", system="s", tools=[]))
    for n in range(1, 4):  # the words of the two newest seams always stay: only seam 1's may leave
        segment(session, n, words=6000, note=100)
        shelve_after_seam(session, 4000)
    shelves = [r for r in dumped(session.records) if r["kind"] == "shelve"]
    assert len(shelves) == 1 and shelves[0]["seams"] == 1
    assert shelve_after_seam(session, 4000) is None  # asked again: still nothing more, and no record
    assert sum(1 for r in dumped(session.records) if r["kind"] == "shelve") == 1
