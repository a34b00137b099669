"""The Textual app driven by Pilot against the loopback server and a real git project."""

from __future__ import annotations

import json
from pathlib import Path

from textual.widgets import Static

from rhapsody.loopback.script import call, say
from rhapsody.frontends.app.app import RhapsodyApp
from rhapsody.frontends.app.confirm import ConfirmScreen
from rhapsody.frontends.app.widgets import Foldable, PromptInput

from tests.conftest import GATE, Stub, held, type_text, until
from tests.core.session.test_handoff_e2e import handoff_turn

SLOW = "I will run a command that takes a moment, so there is time to type a hint while it runs."


async def type_and_send(pilot, text: str, key: str = "enter") -> None:  # type: ignore[no-untyped-def]
    prompt = pilot.app.query_one(PromptInput)
    prompt.text = text
    await pilot.press(key)


async def wait_idle(pilot) -> None:  # type: ignore[no-untyped-def]
    from textual.worker import WorkerCancelled

    try:
        await pilot.app.workers.wait_for_complete()
    except WorkerCancelled:
        pass
    await pilot.pause()


def texts(app: RhapsodyApp) -> list[str]:
    return [e.text for e in app.transcript.entries]


async def test_task_hint_and_handoff_through_the_app(stub: Stub, project: Path) -> None:
    stub.script(
        call(SLOW, "bash", command=f"{GATE}; echo slow-done"),
        say("Finished, and I saw the hint."),
        handoff_turn(),
        say("Note written."),
    )
    wiring = stub.wire(project)
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(100, 30)) as pilot:
        await type_and_send(pilot, "run the slow thing")
        await until(lambda: bool(app.feed.calls), pause=pilot.pause)  # the call is running
        await type_and_send(pilot, "prefer short output")
        assert any("[pending · next tool boundary] prefer short output" in t for t in texts(app))
        (project / "go").touch()
        await wait_idle(pilot)
        assert any("[delivered · after the bash result] prefer short output" in t for t in texts(app))
        second = stub.bodies()[1]["messages"][-1]["content"]
        assert [b["type"] for b in second] == ["tool_result", "text"] and second[1]["text"] == "prefer short output"
        assert any(e.kind == "tool" and "; echo slow-done → exit 0" in e.text for e in app.transcript.entries)

        await type_and_send(pilot, "/handoff")  # a short session: the note would outweigh the strip, so it asks
        assert isinstance(app.screen, ConfirmScreen) and "a seam would not pay now: the strip would take" in app.screen.text
        await pilot.press("y")
        await wait_idle(pilot)
        seams = [e for e in app.transcript.entries if e.kind == "seam"]
        assert len(seams) == 1 and "seam 1:" in seams[0].text and "Field note, seam 1" in seams[0].body
        assert "seams 1" in str(app.query_one("#status", Static).render())
        stripped = [e for e in app.transcript.entries if e.kind == "tool" and " · stripped · recall " in e.text]
        assert len(stripped) == 1 and "echo slow-done" in stripped[0].text
    records = [json.loads(line) for line in wiring.session.path.read_text().splitlines()]
    assert [r["kind"] for r in records].count("seam") == 1


async def test_escape_interrupts_and_keeps_what_streamed(stub: Stub, project: Path) -> None:
    long_text = "Streaming slowly so the human can interrupt me. " * 40
    talk, go = held({"content": [{"type": "text", "text": long_text}]})
    stub.script(talk, say("after"))
    wiring = stub.wire(project)
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(100, 30)) as pilot:
        # pilot.press waits for the screen to go idle, which a live stream never does,
        # so the turn is started and interrupted through the same methods the keys call.
        await app.submitted(PromptInput.Submitted("talk", queue=False))
        await until(lambda: "Streaming slowly" in "".join(app.transcript.live_text), pause=pilot.pause)
        app.action_interrupt()
        await wait_idle(pilot)
        go.set()
        assert any("interrupted" in t for t in texts(app))
    records = [json.loads(line) for line in wiring.session.path.read_text().splitlines()]
    interrupted = [r for r in records if r["kind"] == "interrupted"]
    assert interrupted and interrupted[0]["partial_text"].startswith("Streaming slowly")
    assert len(interrupted[0]["partial_text"]) < len(long_text)  # what streamed, not the whole reply
    kept = [r for r in records if r["kind"] == "message" and r["role"] == "assistant"]
    assert kept and kept[-1]["content"][0]["text"] == interrupted[0]["partial_text"]


async def test_resume_renders_seams_and_stripped_calls(stub: Stub, project: Path) -> None:
    stub.script(call(SLOW, "bash", command="echo hi"), say("done"), handoff_turn(), say("noted"))
    wiring = stub.wire(project)
    from tests.conftest import collect

    await collect(wiring.agent.run("go"))
    wiring.agent.request_handoff()
    await collect(wiring.agent.run())
    from rhapsody.config.settings import Settings
    from rhapsody.wiring import build

    resumed = build(project, Settings(), stub.model(), None, continue_last=True)
    app = RhapsodyApp(resumed.agent, resumed.settings)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        entries = app.transcript.entries
        tool = [e for e in entries if e.kind == "tool" and "bash" in e.text][0]
        assert tool.text.startswith("⊘ bash ") and f" · stripped · recall {wiring.session.id}:toolu_" in tool.text
        assert any(e.kind == "seam" for e in entries)
        assert any(isinstance(w, Foldable) and w.title.startswith('⊘ bash') for w in app.transcript.children)


async def test_resume_of_a_long_session_mounts_only_a_window(stub: Stub, project: Path) -> None:
    from rhapsody.frontends.app.widgets import WINDOW, Entry

    wiring = stub.wire(project)
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.transcript.load([Entry("assistant", f"message {i}") for i in range(3000)])
        await pilot.pause()
        assert len(app.transcript.widgets) == WINDOW
        await pilot.press("ctrl+l")
        await pilot.pause()
        assert len(app.transcript.widgets) == WINDOW + 50


async def test_slash_completion_and_queue_binding(stub: Stub, project: Path) -> None:
    stub.script(call(SLOW, "bash", command=GATE), say("first done"), say("queued done"))
    wiring = stub.wire(project)
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(100, 30)) as pilot:
        prompt = app.query_one(PromptInput)
        prompt.text = "/han"
        await pilot.pause()
        await pilot.pause()
        assert "/handoff" in str(app.query_one("#completions", Static).render())
        await pilot.press("tab")
        assert prompt.text == "/handoff "
        prompt.text = ""
        await type_and_send(pilot, "start")
        await until(lambda: bool(app.feed.calls), pause=pilot.pause)  # the call is running
        await type_and_send(pilot, "then this", key="ctrl+n")
        await until(lambda: bool(app.agent.session.pending), pause=pilot.pause)
        (project / "go").touch()
        await wait_idle(pilot)
        bodies = stub.bodies()
        assert bodies[-1]["messages"][-1]["content"][-1]["text"] == "then this"
        assert [b["type"] for b in bodies[1]["messages"][-1]["content"]] == ["tool_result"]


async def test_ctrl_c_twice_quits_and_the_picker_returns_a_session(stub: Stub, project: Path) -> None:
    from rhapsody.frontends.app.picker import SessionPicker

    stub.script(say("one"))
    wiring = stub.wire(project)
    from tests.conftest import collect

    await collect(wiring.agent.run("the first request"))
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("ctrl+c")
        assert app.is_running
        await pilot.press("ctrl+c")
        await pilot.pause()
    assert app.return_code == 0 and not app.is_running
    empty = stub.wire(project).session  # opened and never used: nothing to resume, not listed
    assert empty.path.exists()
    picker = SessionPicker(project)
    assert [p.stem for p in picker.paths] == [wiring.session.id]
    async with picker.run_test(size=(100, 20)) as pilot:
        await pilot.press("enter")
    assert picker.return_value == wiring.session.id


async def test_ask_mode_shows_the_question_and_each_answer_takes_effect(stub: Stub, project: Path) -> None:
    from tests.frontends.test_app_keys import ask_app, asking, records

    narrate = "I will create a marker file with touch so the effect of the permission answer is visible."
    stub.script(
        call(narrate, "bash", command="touch once.txt"),
        call(narrate, "bash", command="touch rule.txt"),
        call(narrate, "bash", command="touch again.txt"),
        call(narrate, "bash", command="rm once.txt"),
        say("done"),
    )
    app = ask_app(stub, project)

    async def answer(typed: str) -> None:
        await until(lambda: asking(app), pause=pilot.pause)
        await type_text(pilot, typed)
        await pilot.press("enter")

    async with app.run_test(size=(100, 30)) as pilot:
        app.start_turn("go")
        await answer("y")
        await answer("a")
        await answer("do not delete anything")
        await wait_idle(pilot)
    assert (project / "once.txt").exists() and (project / "rule.txt").exists() and (project / "again.txt").exists()
    denied, words = stub.bodies()[-1]["messages"][-1]["content"]
    assert denied["is_error"] and words["text"] == "do not delete anything"
    by = [(r["decision"], r["by"]) for r in records(app) if r["kind"] == "permission"]
    assert by == [("allow", "human"), ("allow", "human"), ("allow", "rules"), ("deny", "human")]


async def test_the_dialog_offers_no_session_rule_for_a_command_no_rule_can_allow(stub: Stub, project: Path) -> None:
    from rhapsody.frontends.app.approval import Choice

    from tests.frontends.test_app_keys import ask_app, asking, panel

    narrate = "I will loop over two numbers and print each one, to show what the loop does here."
    stub.script(call(narrate, "bash", command="for i in 1 2; do echo $i; done"), say("done"))
    app = ask_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        app.start_turn("go")
        await until(lambda: asking(app), pause=pilot.pause)
        screen = panel(app)
        assert [c.action for c in screen.query(Choice)] == ["allow", "deny"]
        assert "no rule can allow this command" in screen.why
        await pilot.press("a", "enter")
        await wait_idle(pilot)
    assert app.agent.toolbox.rules.session_allow == []


async def test_a_streamed_code_block_takes_the_same_lines_live_as_when_finished(stub: Stub, project: Path) -> None:
    from rhapsody.frontends.app.widgets import Entry

    wiring = stub.wire(project)
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.transcript
        await view.add(Entry("user", "› go"))
        await view.stream_text("Para one.\n\n```python\nx = 1\n```\n")
        live = view.live
        assert live is not None
        await until(lambda: live.outer_size.height >= 3, pause=pilot.pause)  # the paragraph, a gap, the code
        lines, gap = live.outer_size.height, live.styles.margin.bottom
        await view.end_text()
        final = view.widgets[view.entries[-1]]
        assert final is live  # the live reply is drawn as a finished one: its widget stays
        await pilot.pause()
        assert (final.outer_size.height, final.styles.margin.bottom) == (lines, gap)


async def test_an_unfolded_stripped_call_shows_its_recall_id_once(stub: Stub, project: Path) -> None:
    from rhapsody.frontends.app.widgets import Entry

    wiring = stub.wire(project)
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(80, 24)) as pilot:
        text = "⊘ bash python -m unittest test_inventory → exit 0 (0.2 s) · stripped · recall s:toolu_9"
        widget = await app.transcript.add(Entry("tool", text, "recall s:toolu_9\n\nOK", "toolu_9", "exit"))
        assert isinstance(widget, Foldable)
        widget.expanded = True
        await pilot.pause()
        shown = str(widget.render())
        assert shown.count("recall s:toolu_9") == 1 and shown.startswith("▼ ⊘ bash python -m unittest")
