"""Keys people bring from other coding agents: ctrl+c stops the agent, inline questions, Esc Esc, shift+Tab."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from rhapsody.loopback.script import call, say
from rhapsody.frontends.app.app import RhapsodyApp
from rhapsody.frontends.app.approval import ApprovalPanel
from rhapsody.frontends.app.widgets import Foldable, PromptInput

from tests.conftest import SANDBOX, Stub
from tests.frontends.test_app_keys import NARRATE, ask_app, asking, idle, panel, plain_app, records, send, texts
from tests.conftest import held, type_text, until

LONG = " ".join(f"word{i}" for i in range(400))


async def test_ctrl_c_while_the_agent_streams_stops_it_and_keeps_what_streamed(stub: Stub, project: Path) -> None:
    talk, go = held({"content": [{"type": "text", "text": LONG}]})
    stub.script(talk, say("never"))
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        app.start_turn("talk")
        await until(lambda: app.transcript.live is not None and len("".join(app.transcript.live_text)) > 20, pause=pilot.pause)
        assert "Interrupt" in str(app.screen.active_bindings["ctrl+c"].binding.description)
        await pilot.press("ctrl+c")
        await idle(pilot)
        go.set()
        assert app.is_running and not app.busy
        kinds = [e.kind for e in app.transcript.entries]
        assert "assistant" in kinds and kinds[-1] == "interrupted"
        kept = [e.text for e in app.transcript.entries if e.kind == "assistant"][0]
        assert kept.startswith("word0") and "word399" not in kept
        assert app.screen.active_bindings["ctrl+c"].binding.description == "Quit"
    assert "interrupted" in [r["kind"] for r in records(app)]


async def test_ctrl_c_idle_clears_the_prompt_then_quits_on_an_empty_one_twice(stub: Stub, project: Path) -> None:
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        prompt = app.query_one(PromptInput)
        await type_text(pilot, "a draft")
        await pilot.press("ctrl+c")
        assert prompt.text == "" and app.is_running
        await pilot.press("up")  # the cleared draft comes back
        assert prompt.text == "a draft"
        await pilot.press("ctrl+c")
        await pilot.press("ctrl+c")  # empty now: the first of two
        assert app.is_running
        await pilot.press("ctrl+c")
        await pilot.pause()
    assert app.return_code == 0 and not app.is_running


async def test_a_slash_command_typed_in_the_question_runs_and_ctrl_n_queues_never_a_denial(
        stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command="touch one.txt"), say("done"), say("read the queued one"))
    app = ask_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        app.start_turn("go")
        await until(lambda: asking(app), pause=pilot.pause)
        await type_text(pilot, "/stats")
        await pilot.press("enter")
        await until(lambda: any("no seams yet" in t for t in texts(app)), pause=pilot.pause)
        assert asking(app) and panel(app).query_one("#reason").value == ""  # still asking, field empty
        await type_text(pilot, "then add a test")
        await pilot.press("ctrl+n")
        await until(lambda: any(e.kind == "hint" for e in app.transcript.entries), pause=pilot.pause)
        assert asking(app) and panel(app).query_one("#reason").value == ""
        await pilot.press("y", "enter")
        await idle(pilot)
    assert (project / "one.txt").exists()
    decisions = [(r["decision"], r["by"]) for r in records(app) if r["kind"] == "permission"]
    assert decisions == [("allow", "human")]
    hints = [r for r in records(app) if r["kind"] == "hint"]
    assert [(h["text"], h["mode"]) for h in hints] == [("then add a test", "queue")]


async def test_a_draft_queued_with_ctrl_n_as_the_question_opens_goes_to_the_queue(
        stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command="touch one.txt"), say("done"), say("ok"))
    over = asyncio.Event()  # the grace period lasts until the test ends it
    app = ask_app(stub, project, over.wait)
    async with app.run_test(size=(80, 24)) as pilot:
        app.start_turn("go")
        app.query_one(PromptInput).text = "also update the readme"
        await until(lambda: app.query(ApprovalPanel) and panel(app).has_focus, pause=pilot.pause)
        await pilot.press("ctrl+n")  # meant for the prompt's draft, pressed as the question appeared
        await until(lambda: any(e.kind == "hint" for e in app.transcript.entries), pause=pilot.pause)
        assert app.query_one(PromptInput).text == "" and not panel(app).ready
        over.set()
        await until(lambda: asking(app), pause=pilot.pause)
        assert panel(app).query_one("#reason").value == ""
        await pilot.press("escape")
        await idle(pilot)
    hints = [r for r in records(app) if r["kind"] == "hint"]
    assert [(h["text"], h["mode"]) for h in hints] == [("also update the readme", "queue")]


def folded_lines(app: RhapsodyApp, name: str) -> list[str]:
    """What the folded line of the first call of `name` shows, line by line."""
    fold = [w for w in app.transcript.query(Foldable) if w.entry.kind == "tool" and name in w.title][0]
    assert not fold.expanded
    return str(fold.render()).splitlines()


async def test_an_applied_edit_shows_its_diff_and_a_result_its_first_lines_live_and_on_resume(
        stub: Stub, project: Path) -> None:
    (project / "big.py").write_text("".join(f"v{i} = {i}\n" for i in range(40)))
    new = "".join(f"v{i} = {i * 2}\n" for i in range(40))
    stub.script(call(NARRATE, "write_file", path="big.py", content=new),
                call(NARRATE, "bash", command="seq 1 10"), call(NARRATE, "bash", command="seq 1 2"), say("done"))
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 40)) as pilot:
        await send(pilot, "double them")
        await idle(pilot)
        for resumed in (False, True):
            write = [x.strip() for x in folded_lines(app, "write_file")]
            assert write[1].startswith("⎿ @@") and "-v1 = 1" in write and "v0 = 0" in write, resumed
            assert len(write) == 1 + 12 + 1 and write[-1].strip().startswith("… ") and "more lines" in write[-1]
            seq = folded_lines(app, "seq 1 10")
            assert [x.strip() for x in seq[1:]] == ["⎿ 1", "2", "3", "4", "… 6 more lines"], resumed
            assert [x.strip() for x in folded_lines(app, "seq 1 2")[1:]] == ["⎿ 1", "2"]
            await app.surface.reload()  # rebuilt from history, as on resume
            await pilot.pause()


def test_the_peek_leaves_out_refused_failed_running_and_stripped_calls() -> None:
    from rhapsody.view.peek import peek

    assert peek("a\nb", "ok", 4, 12) == ["a", "b"]
    for state in ("denied", "error", "running", "asking", "interrupted"):
        assert peek("a\nb", state, 4, 12) == []
    assert peek("recall S:1\n\na\nb", "ok", 4, 12) == []
    assert peek("a\nb\nc", "exit", 0, 12) == []  # result_lines = 0: the line alone
    assert peek("a\nb\nc", "exit", 2, 12) == ["a", "b", "… 1 more line"]
    diff = "edited x.py\n\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b"
    assert peek(diff, "ok", 1, 12) == ["@@ -1 +1 @@", "-a", "+b"]
    assert peek("1\n2\n\n[exit code 3]", "exit", 4, 12) == ["1", "2"]  # the line says the exit code
    assert peek("# Field note\nfacts", "ok", 4, 12, "micro_handoff → ok (0.0 s)") == []  # the seam's line says it


async def test_escape_twice_clears_a_draft_that_up_brings_back_and_leaves_an_empty_prompt_alone(
        stub: Stub, project: Path) -> None:
    calls: list[str] = []
    app = plain_app(stub, project)
    app.escape_twice_on_empty = lambda: calls.append("empty")  # type: ignore[method-assign]
    async with app.run_test(size=(80, 24)) as pilot:
        prompt = app.query_one(PromptInput)
        await type_text(pilot, "a long draft")
        await pilot.press("escape")
        assert prompt.text == "a long draft"  # one Esc alone clears nothing
        await pilot.press("escape")
        assert prompt.text == ""
        await pilot.press("up")
        assert prompt.text == "a long draft"
        prompt.clear()
        await pilot.press("escape", "escape")
        assert calls == ["empty"] and app.is_running


async def test_shift_tab_cycles_ask_auto_edit_read_only_plan_and_never_into_yolo(stub: Stub, project: Path) -> None:
    app = ask_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        seen = []
        for _ in range(8):
            await pilot.press("shift+tab")
            seen.append(app.agent.toolbox.permission_mode)
        assert seen == ["auto-edit", "read-only", "plan", "ask"] * 2
        await pilot.press("shift+tab")
        await pilot.pause()
        assert "auto-edit" in str(app.query_one("#status").render())
        await app.surface.command("/permissions yolo")
        await pilot.press("shift+tab")  # out of yolo, to ask: lowering is always one key
        assert app.agent.toolbox.permission_mode == "ask"
    modes = [r["mode"] for r in records(app) if r["kind"] == "permission_mode"]
    assert modes == ["auto-edit", "read-only", "plan", "ask"] * 2 + ["auto-edit", "yolo", "ask"]


async def test_a_bang_command_runs_in_the_sandbox_is_shown_and_reaches_the_agent_as_the_humans_words(
        stub: Stub, project: Path, tmp_path: Path) -> None:
    stub.script(say("I see the listing you ran."))
    outside = tmp_path / "outside.txt"
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        await send(pilot, f"!ls; echo made > bang.txt; echo x > {outside}; echo $ANTHROPIC_API_KEY-none")
        await until(lambda: any(e.text.startswith("! ls") and "→ exit 0" in e.text for e in app.transcript.entries), pause=pilot.pause)
        entry = [e for e in app.transcript.entries if e.text.startswith("! ls")][0]
        assert "app.py" in entry.body and "-none" in entry.body
        assert not stub.server.requests  # nothing sent: it waits for the next message
        await send(pilot, "what did you see?")
        await idle(pilot)
    assert (project / "bang.txt").read_text() == "made\n"  # inside the project: the sandbox lets it write there
    assert not outside.exists() or SANDBOX == "off"  # outside it: refused, as for the agent's bash
    sent = stub.bodies()[0]["messages"][-1]["content"]
    texts_sent = [b["text"] for b in sent if b.get("type") == "text"]
    assert any(t.startswith("I ran `ls; echo made") and "(exit 0)" in t and "app.py" in t for t in texts_sent)
    hints = [r for r in records(app) if r["kind"] == "hint"]
    assert len(hints) == 1 and hints[0]["mode"] == "queue"


async def test_ctrl_g_edits_the_draft_in_the_editor_and_a_missing_editor_says_so(
        stub: Stub, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nprintf "%s\\n" "$(cat "$1") and a second line" > "$1"\n')
    editor.chmod(0o755)
    monkeypatch.setenv("VISUAL", str(editor))
    app = plain_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        prompt = app.query_one(PromptInput)
        await type_text(pilot, "first draft")
        await pilot.press("ctrl+g")
        await pilot.pause()
        assert prompt.text == "first draft and a second line"
        monkeypatch.setenv("VISUAL", str(tmp_path / "no-such-editor"))
        await pilot.press("ctrl+g")
        await pilot.pause()
        assert prompt.text == "first draft and a second line" and app.is_running
    import tempfile

    assert not list(Path(tempfile.gettempdir()).glob("rhapsody-prompt-*"))  # the draft file is gone


async def test_a_question_rings_by_default_and_a_long_turn_notifies_only_when_asked(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command="touch one.txt"), say("done"), say("again"))
    app = ask_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        app.start_turn("go")
        await until(lambda: asking(app), pause=pilot.pause)
        assert app.signals.sent == ["\a"]  # on by default for a question, as the bell
        await pilot.press("y", "enter")
        await idle(pilot)
        assert app.signals.sent == ["\a"]  # the end of a turn: not by default
        app.settings.notify, app.settings.notify_with, app.settings.notify_after = "waiting", "osc9", 0.0
        app.start_turn("more")
        await idle(pilot)
        assert app.signals.sent[-1] == "\x1b]9;rhapsody: the agent has finished and waits for you\x07"


def test_a_notification_never_carries_control_characters() -> None:
    from rhapsody.frontends.app.notify import sequence

    assert sequence("osc777", "bash\x07\x1b]0;owned;x waits") == "\x1b]777;notify;rhapsody;bash]0ownedx waits\x07"
    assert sequence("bell", "anything") == "\a"


async def test_help_taller_than_the_screen_opens_at_its_first_line_and_scrolls(stub: Stub, project: Path) -> None:
    from rhapsody.frontends.app.widgets import NoticeLine

    app = plain_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        await send(pilot, "/help")
        await until(lambda: [w for w in app.transcript.query(NoticeLine) if "/model" in w.entry.text], pause=pilot.pause)
        notice = [w for w in app.transcript.query(NoticeLine) if "/model" in w.entry.text][-1]
        view = app.transcript.region
        await until(lambda: view.y <= notice.region.y < view.y + 2, pause=pilot.pause)  # its first line is in view, at the top
        assert notice.region.height > view.height  # taller than the transcript at 80x24
        top = app.transcript.scroll_y
        await pilot.press("pagedown")
        await until(lambda: app.transcript.scroll_y > top, pause=pilot.pause)  # the page scrolls (a loaded machine takes a frame or more)


async def test_at_80_columns_the_seam_keeps_its_figures_and_a_stripped_call_its_recall_id(
        stub: Stub, project: Path) -> None:
    from tests.core.session.test_handoff_e2e import handoff_turn

    stub.script(call(NARRATE, "bash", command="cat app.py; echo " + "padding-words " * 6), say("add subtracts."),
                handoff_turn(), say("Noted."))
    app = plain_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        app.start_turn("check add")
        await idle(pilot)
        await app.surface.command("/handoff anyway")  # a seam this small would not pay: no question
        await idle(pilot)
        await pilot.pause()
        seam = [e for e in app.transcript.entries if e.kind == "seam"][-1]
        stripped = [e for e in app.transcript.entries if e.kind == "tool" and "recall" in e.text][0]
        shown = {}
        for entry in (seam, stripped):
            widget = app.transcript.widgets[entry]
            shown[entry.kind] = " ".join(strip.text.strip() for strip in widget.render_lines(widget.region.reset_offset))
        assert shown["seam"].removeprefix("▶ ").strip() == " ".join(seam.text.split())  # every figure, wrapped
        recall = "recall " + stripped.text.split(" · recall ", 1)[1]
        assert recall in shown["tool"] and app.transcript.widgets[stripped].size.height >= 2


async def test_the_resume_picker_has_a_title_searches_and_previews(stub: Stub, project: Path) -> None:
    from rhapsody.frontends.app.picker import SessionPicker

    from tests.conftest import collect

    stub.script(say("The total lives in report.py."), say("Tests are in test_app.py."))
    first = stub.wire(project)
    await collect(first.agent.run("where is the total computed?"))
    started_on = (project / ".git" / "HEAD").read_text().strip().removeprefix("ref: refs/heads/")
    subprocess.run(["git", "checkout", "-q", "-b", "feature-x"], cwd=project, check=True)
    second = stub.wire(project)
    await collect(second.agent.run("which file holds the tests?"))
    picker = SessionPicker(project)
    async with picker.run_test(size=(100, 24)) as pilot:
        title = str(picker.query_one("#title").render())
        assert title.startswith("Resume a session in") and "type to search" in title
        listing = picker.query_one("OptionList")
        lines = [str(listing.get_option_at_index(i).prompt) for i in range(listing.option_count)]
        assert len(lines) == 2 and all("just now" in x and "seams 0" in x for x in lines)
        assert any("which file holds the tests?" in x for x in lines)
        assert any("feature-x" in x and "which file" in x for x in lines)  # the branch each session started on
        assert any(started_on in x and "where is the total" in x for x in lines)
        preview = str(picker.query_one("#preview").render())
        assert "agent: " in preview and "1 request" in preview
        await type_text(pilot, "total")
        await pilot.pause()
        assert listing.option_count == 1 and "where is the total" in str(listing.get_option_at_index(0).prompt)
        assert "The total lives in report.py." in str(picker.query_one("#preview").render())
        await pilot.press("enter")
    assert picker.return_value == first.session.id


async def test_readline_keys_edit_the_prompt_and_ctrl_l_loads_earlier_entries(stub: Stub, project: Path) -> None:
    app = plain_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        prompt = app.query_one(PromptInput)
        await type_text(pilot, "fix the add function")
        await pilot.press("ctrl+w")
        assert prompt.text == "fix the add "
        await pilot.press("ctrl+u")
        assert prompt.text == ""
        await type_text(pilot, "keep this")
        await pilot.press("home", "ctrl+k")
        assert prompt.text == ""


async def test_ctrl_c_during_a_question_stops_the_turn_and_the_status_says_idle(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command="touch one.txt"), say("never"))
    app = ask_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        app.start_turn("go")
        await until(lambda: asking(app), pause=pilot.pause)
        await pilot.press("ctrl+c")
        await idle(pilot)
        await until(lambda: not app.query(ApprovalPanel), pause=pilot.pause)
        await until(lambda: str(app.query_one("#status").render()).lstrip().startswith("idle"), pause=pilot.pause)
        assert any(e.kind == "interrupted" for e in app.transcript.entries)
    assert not (project / "one.txt").exists()
