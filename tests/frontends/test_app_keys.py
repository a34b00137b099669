"""Every keyboard path of the app, driven with real keys through Pilot against the loopback server."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from rhapsody.core.toolbox.approval import Grace, HumanApprover
from rhapsody.loopback.script import call, say
from rhapsody.frontends.app.app import RhapsodyApp
from rhapsody.frontends.app.approval import ApprovalPanel
from rhapsody.frontends.app.confirm import ConfirmScreen
from rhapsody.frontends.app.fullview import FullView
from rhapsody.frontends.app.widgets import Foldable, PromptInput

from tests.conftest import GATE, Stub, held, no_grace, send_keys, type_text, until
from tests.core.session.test_handoff_e2e import handoff_turn

NARRATE = "I will run this command now because the task needs its output; I expect it to succeed."



async def idle(pilot: Any) -> None:
    from textual.worker import WorkerCancelled

    try:
        await pilot.app.workers.wait_for_complete()
    except WorkerCancelled:
        pass
    await pilot.pause()


def asking(app: RhapsodyApp) -> ApprovalPanel | None:
    """The open question's panel once it takes answers (its grace period over), else None."""
    panels = list(app.query(ApprovalPanel))
    return panels[0] if panels and panels[0].ready else None


def panel(app: RhapsodyApp) -> ApprovalPanel:
    """The open question's panel."""
    return app.query_one(ApprovalPanel)


def ask_app(stub: Stub, project: Path, grace: Grace = no_grace) -> RhapsodyApp:
    """The app in ask mode; each question's grace period is `grace` (by default over at once)."""
    approver = HumanApprover(grace)
    wiring = stub.wire(project, approver=approver, permission_mode="ask")
    return RhapsodyApp(wiring.agent, wiring.settings, approver)


def plain_app(stub: Stub, project: Path) -> RhapsodyApp:
    wiring = stub.wire(project)
    return RhapsodyApp(wiring.agent, wiring.settings)


def records(app: RhapsodyApp) -> list[dict[str, Any]]:
    return [json.loads(line) for line in app.agent.session.path.read_text().splitlines()]


def texts(app: RhapsodyApp) -> list[str]:
    return [e.text for e in app.transcript.entries]


async def send(pilot: Any, text: str) -> None:
    pilot.app.query_one(PromptInput).text = text
    await pilot.press("enter")


async def test_typing_a_denial_never_approves_and_enter_denies_with_it(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command="wc -c app.py > size.txt"), say("ok, I will use stat"))
    app = ask_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        app.start_turn("size?")
        await until(lambda: asking(app), pause=pilot.pause)
        assert app.focused is not None and app.focused.id == "reason"
        await type_text(pilot, "add a test first, yes")
        await pilot.press("enter")
        await idle(pilot)
        assert any("→ denied by the human: add a test first" in t for t in texts(app))
    denied = [r for r in records(app) if r["kind"] == "permission"]
    assert [(r["decision"], r["by"]) for r in denied] == [("deny", "human")]
    assert "add a test first, yes" in denied[0]["reason"]
    assert app.agent.toolbox.rules.session_allow == []


async def test_escape_denies_and_the_diff_is_shown_for_an_edit(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "edit_file", path="app.py", old="a - b", new="a + b"), say("not changed"))
    app = ask_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        app.start_turn("fix")
        await until(lambda: asking(app), pause=pilot.pause)
        shown = panel(app).shown
        assert shown.syntax == "diff"
        body = shown.body
        assert "-    return a - b" in body and "+    return a + b" in body and "--- a/app.py" in body
        deny = [w for w in panel(app).query(".choice") if "deny" in str(w.render())][0]
        assert deny.region.bottom <= 24  # the deny line is on screen at 80x24
        said = [w for e, w in app.transcript.widgets.items() if e.kind == "assistant" and NARRATE in e.text][0]

        def in_view() -> bool:  # the agent's reason stays in view, above the question; each region read as it is now
            view, box = app.transcript.region, panel(app).region
            return box.height > 0 and view.y <= said.region.y and said.region.bottom <= view.bottom <= box.y

        await until(in_view, pause=pilot.pause)  # the panel laid out, below the transcript
        await pilot.press("escape")
        await idle(pilot)
    assert "a - b" in (project / "app.py").read_text()


async def test_lone_hotkeys_answer(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command="touch one.txt"), call(NARRATE, "bash", command="touch two.txt"),
                call(NARRATE, "bash", command="touch three.txt"), say("done"))
    app = ask_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        app.start_turn("go")
        for key in ("y", "a"):
            await until(lambda: asking(app), pause=pilot.pause)
            await pilot.press(key)
            assert app.query(ApprovalPanel)  # a key alone never answers
            await pilot.press("enter")
        await idle(pilot)
    assert all((project / n).exists() for n in ("one.txt", "two.txt", "three.txt"))


async def test_keys_typed_as_the_question_opens_are_discarded_and_shown_never_left_in_the_prompt(
        stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command="touch one.txt"), say("done"))
    over = asyncio.Event()  # the grace period lasts until the test ends it
    app = ask_app(stub, project, over.wait)
    async with app.run_test(size=(80, 24)) as pilot:
        app.start_turn("go")
        await until(lambda: app.query(ApprovalPanel) and panel(app).has_focus, pause=pilot.pause)
        await pilot.press("a", "enter", "y", "enter")  # meant for the prompt; the question just appeared
        assert not panel(app).ready
        said = str(panel(app).query_one("#enter-does", Static).render())
        assert "wait" in said and "'a⏎y⏎'" in said  # where they went: shown
        assert app.query_one(PromptInput).text == ""
        assert not (project / "one.txt").exists() and app.query(ApprovalPanel)  # no key answered the question
        over.set()
        await until(lambda: asking(app), pause=pilot.pause)
        assert panel(app).query_one("#reason").value == ""
        await pilot.press("escape")
        await idle(pilot)
        assert app.query_one(PromptInput).text == "" and not app.query(ApprovalPanel)
        assert app.focused is app.query_one(PromptInput)
    assert not (project / "one.txt").exists()
    assert app.agent.toolbox.rules.session_allow == []


async def test_unfold_at_once_full_view_and_focus_paths(stub: Stub, project: Path) -> None:
    long = "".join(f"line {i} of the output\n" for i in range(600)) + "the-very-end"
    (project / "big.txt").write_text(long)
    stub.script(call(NARRATE, "bash", command="cat big.txt"), say("read it"))
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        await send(pilot, "show it")
        await idle(pilot)
        fold = [w for w in app.transcript.query(Foldable) if "cat big.txt" in w.title][0]
        fold.focus()
        await pilot.pause()
        height = fold.size.height
        await pilot.press("enter")
        await pilot.pause()
        assert fold.expanded and fold.size.height > height + 10  # the body shows without a resize
        await pilot.press("enter")
        await until(lambda: isinstance(app.screen, FullView), pause=pilot.pause)
        assert "line 0 of" in app.screen.text and "the-very-end" in app.screen.text
        await type_text(pilot, "line 599")
        await pilot.press("enter")
        assert "match 1 of 1, line 600 of this text" in str(app.screen.query_one("#found", Static).render())
        await pilot.press("escape")
        await pilot.pause()
        fold.focus()
        await pilot.press("h", "i")
        prompt = app.query_one(PromptInput)
        assert app.focused is prompt and prompt.text == "hi"
        fold.focus()
        await pilot.press("tab")
        assert app.focused is prompt


async def test_an_unfolded_line_folds_again_from_the_keyboard_and_the_footer_says_each_key(
        stub: Stub, project: Path) -> None:
    (project / "big.txt").write_text("".join(f"line {i}\n" for i in range(2000)))
    stub.script(call(NARRATE, "bash", command="cat big.txt"), call(NARRATE, "bash", command="echo short"), say("ok"))
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        await send(pilot, "show it")
        await idle(pilot)

        def footer() -> str:
            return " ".join(f"{key}={b.binding.description}" for key, b in app.screen.active_bindings.items()
                            if b.binding.show and b.enabled)

        cut, whole = (next(w for w in app.transcript.query(Foldable) if c in w.title) for c in ("cat big", "echo short"))
        cut.focus()
        await pilot.pause()
        assert "enter=Unfold" in footer() and "escape=Clear" in footer()  # idle: Esc Esc clears the input
        folded = cut.size.height
        await pilot.press("enter")
        await pilot.pause()
        assert cut.expanded and "enter=Full view" in footer() and "escape=Fold" in footer()
        await pilot.press("escape")
        await pilot.pause()
        assert not cut.expanded and cut.size.height == folded and not isinstance(app.screen, FullView)
        await pilot.press("enter", "enter")
        await until(lambda: isinstance(app.screen, FullView), pause=pilot.pause)
        await pilot.press("escape")
        await until(lambda: not isinstance(app.screen, FullView), pause=pilot.pause)
        assert cut.expanded
        await pilot.press("left")
        await pilot.pause()
        assert not cut.expanded
        whole.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert whole.expanded and "enter=Fold" in footer()
        await pilot.press("enter")
        await pilot.pause()
        assert not whole.expanded


async def test_page_keys_scroll_from_the_prompt(stub: Stub, project: Path) -> None:
    from rhapsody.frontends.app.widgets import Entry

    app = plain_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.transcript.load([Entry("notice", f"notice {i}") for i in range(80)])
        await pilot.pause()
        end = app.transcript.scroll_y
        await pilot.press("pageup")
        await pilot.pause()
        assert app.transcript.scroll_y < end
        await pilot.press("home")
        await pilot.pause()
        assert app.transcript.scroll_y == 0
        await pilot.press("end")
        await pilot.pause()
        assert app.transcript.scroll_y == app.transcript.max_scroll_y


async def test_history_completion_and_local_commands(stub: Stub, project: Path) -> None:
    (project / ".gitignore").write_text("secret_build/\n")
    (project / "secret_build").mkdir()
    (project / "secret_build" / "inventory_gen.py").write_text("")
    (project / "src").mkdir()
    (project / "src" / "inventory.py").write_text("")
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        await send(pilot, "/frobnicate")
        await send(pilot, "/model nonsense-model")
        await pilot.pause()
        assert any("unknown command /frobnicate" in t for t in texts(app))
        assert any("unknown model nonsense-model" in t for t in texts(app))
        assert app.agent.session.spec.model != "nonsense-model" and not stub.bodies()
        await send(pilot, "/model nonsense-model --force")
        assert app.agent.session.spec.model == "nonsense-model"
        prompt = app.query_one(PromptInput)
        prompt.text = "look at @invpy"
        await pilot.pause()
        assert prompt.suggestions() == ["src/inventory.py"]
        await pilot.press("tab")
        assert prompt.text == "look at @src/inventory.py "
        prompt.text = ""
        await pilot.press("up")
        assert prompt.text == "/model nonsense-model --force"
        await pilot.press("up", "down")
        assert prompt.text == "/model nonsense-model --force"
    again = plain_app(stub, project)
    async with again.run_test(size=(100, 30)) as pilot:
        again.query_one(PromptInput).text = ""
        await pilot.press("up")
        assert again.query_one(PromptInput).text == "/model nonsense-model --force"


async def test_ctrl_o_during_a_turn_without_tools_ends_in_a_seam(stub: Stub, project: Path) -> None:
    slow, go = held({"content": [{"type": "text", "text": "A long answer with no tool call at all. " * 20}]})
    stub.script(call(NARRATE, "bash", command="echo earlier"), say("ran it"), slow, handoff_turn(), say("Noted."))
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        await send(pilot, "run something")
        await idle(pilot)
        app.start_turn("go")
        await until(lambda: app.transcript.live is not None, pause=pilot.pause)
        await app.action_handoff()
        assert isinstance(app.screen, ConfirmScreen)  # the earlier call's output is smaller than a note
        app.screen.action_answer(True)
        await until(lambda: app.agent.session.handoff.pending, pause=pilot.pause)
        assert app.transcript.live is not None  # wanted mid-reply
        go.set()
        await idle(pilot)
        kinds = [r["kind"] for r in records(app)]
        assert kinds.count("seam") == 1
        assert any(e.kind == "harness" and "Micro-handoff requested" in e.text for e in app.transcript.entries)
        status = str(app.query_one("#status", Static).render())
        seam = [r for r in records(app) if r["kind"] == "seam"][0]
        assert f"ctx ~{seam['after']['est_tokens']:,}" in status and "seams 1" in status


async def test_escape_cancels_a_handoff_request_and_says_so(stub: Stub, project: Path) -> None:
    slow, go = held({"content": [{"type": "text", "text": "A long answer with no tool call at all. " * 40}]})
    stub.script(slow, say("the answer to next"))
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        await send(pilot, "talk")
        await until(lambda: app.transcript.live is not None, pause=pilot.pause)
        await pilot.press("ctrl+o")
        assert app.transcript.live is not None and app.agent.session.handoff.pending  # Esc lands mid-reply
        await pilot.press("escape")
        await idle(pilot)
        go.set()
        assert any("micro-handoff cancelled" in t for t in texts(app))
        assert not app.agent.session.handoff.pending
        await send(pilot, "next")
        await idle(pilot)
        assert "the answer to next" in texts(app)
        assert not any(e.kind == "harness" and "Micro-handoff requested" in e.text for e in app.transcript.entries)
        await app.surface.reload()
        assert any("micro-handoff cancelled" in t for t in texts(app))


async def test_enter_then_ctrl_o_answers_the_message_then_hands_off(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command="echo earlier"), say("ran it"), say("here is what comes next"),
                handoff_turn(), say("Noted."))
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        await send(pilot, "run something")
        await idle(pilot)
        app.query_one(PromptInput).text = "what next?"
        app.agent.request_handoff()  # ctrl+o landing just before the turn starts
        await pilot.press("enter")
        await idle(pilot)
        first = stub.bodies()[2]["messages"][-1]["content"]
        assert [b["text"] for b in first if b["type"] == "text"] == ["what next?"]  # the ask comes after the answer
        assert "› what next?" in texts(app) and "here is what comes next" in texts(app)
        assert not any("what next?" in t for t in texts(app) if t.startswith("✎"))
        assert [r["kind"] for r in records(app)].count("seam") == 1


async def test_ctrl_o_with_nothing_to_strip_sends_no_request(stub: Stub, project: Path) -> None:
    slow, go = held({"content": [{"type": "text", "text": "Talking, no tools. " * 40}]})
    stub.script(say("hello"), slow)
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        await send(pilot, "hi")
        await idle(pilot)
        sent = len(stub.bodies())
        await pilot.press("ctrl+o")
        await idle(pilot)
        assert len(stub.bodies()) == sent and any("nothing to hand off: no tool calls yet" in t for t in texts(app))
        await send(pilot, "talk")
        await until(lambda: app.transcript.live is not None, pause=pilot.pause)
        await pilot.press("ctrl+o")  # mid-turn: the turn ends with no tool call, so no request follows
        assert app.transcript.live is not None  # still streaming
        go.set()
        await idle(pilot)
        assert len(stub.bodies()) == sent + 1
        assert "seam" not in [r["kind"] for r in records(app)] and not app.agent.session.handoff.pending
        assert sum("nothing to hand off: no tool calls yet" in t for t in texts(app)) == 2


async def test_a_finished_edit_unfolds_to_the_diff_it_applied(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "edit_file", path="app.py", old="a - b", new="a + b"),
                call(NARRATE, "write_file", path="new.txt", content="fresh\n"), say("fixed"))
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        await send(pilot, "fix")
        await idle(pilot)
        for live in (True, False):
            edit, write = [e for e in app.transcript.entries if e.kind == "tool"]
            assert "-    return a - b" in edit.body and "+    return a + b" in edit.body, live
            assert "+fresh" in write.body and "+++ b/new.txt" in write.body
            await app.surface.reload()  # rebuilt from history, as on resume
    sent = [b for m in stub.bodies()[1]["messages"] for b in m["content"] if isinstance(b, dict)
            and b.get("type") == "tool_result"]
    assert sent[0]["content"] in ("edited app.py: 1 replacement",
                                  [{"type": "text", "text": "edited app.py: 1 replacement"}])


async def test_hints_land_where_delivered_and_notes_survive_a_reload(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command=f"{GATE}; echo done"), say("finished"), say("queued seen"))
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        await send(pilot, "/stats")
        await send(pilot, "run it")
        await until(lambda: app.feed.calls, pause=pilot.pause)  # the call is running
        await send(pilot, "steer hint")
        app.query_one(PromptInput).text = "queued one"
        await pilot.press("ctrl+n")
        (project / "go").touch()  # the command ends once both hints are in
        await idle(pilot)
        kinds = [(e.kind, e.text) for e in app.transcript.entries]
        tool = next(i for i, (k, t) in enumerate(kinds) if k == "tool")
        hint = next(i for i, (k, t) in enumerate(kinds) if "steer hint" in t)
        queued = next(i for i, (k, t) in enumerate(kinds) if "queued one" in t)
        finished = next(i for i, (k, t) in enumerate(kinds) if t == "finished")
        assert tool < hint < finished < queued
        assert "[delivered · after the bash result]" in kinds[hint][1] and "end of turn" in kinds[queued][1]
        live = [t for _, t in kinds]
        await app.surface.reload()
        assert [e.text for e in app.transcript.entries if e.kind != "notice"] == [t for k, t in kinds if k != "notice"]
        assert any("no seams yet" in t for t in texts(app)) and len(live) == len(texts(app))


async def test_escape_marks_a_running_call_interrupted(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command="sleep 30"), say("never"))
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        app.start_turn("go")
        await until(lambda: app.feed.calls, pause=pilot.pause)
        await pilot.press("escape")
        await idle(pilot)
        tool = [e for e in app.transcript.entries if e.kind == "tool"][0]
        assert tool.state == "interrupted" and "→ interrupted" in tool.text
        await app.surface.reload()
        tool = [e for e in app.transcript.entries if e.kind == "tool"][0]
        assert tool.state == "interrupted"


async def test_escape_on_an_unfolded_line_interrupts_a_working_agent(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command="echo first"), call(NARRATE, "bash", command="sleep 30"), say("never"))
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        app.start_turn("go")
        await until(lambda: any("sleep 30" in call.input.get("command", "") for call, _ in app.feed.calls.values()), pause=pilot.pause)
        first = next(w for w in app.transcript.query(Foldable) if "echo first" in w.title)
        first.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert first.expanded
        await pilot.press("escape")  # the agent works: Esc stops it, wherever the focus is
        await idle(pilot)
        assert any(e.kind == "tool" and e.state == "interrupted" for e in app.transcript.entries)
        await pilot.press("escape")  # idle now: Esc folds the line
        await pilot.pause()
        assert not first.expanded


async def test_status_bar_fits_80_columns_and_keeps_context_and_cost(stub: Stub, project: Path) -> None:
    app = plain_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        line = str(app.query_one("#status", Static).render()).rstrip()
        assert len(line) <= 80 and "ctx ~" in line and "$" in line and str(project) not in line
    wide = plain_app(stub, project)
    async with wide.run_test(size=(120 + len(str(project)), 24)) as pilot:  # room for the line and the path
        await pilot.pause()
        assert str(project).replace(str(Path.home()), "~") in str(wide.query_one("#status", Static).render())


async def test_liveness_and_tool_lines_at_80_columns(stub: Stub, project: Path) -> None:
    slow, go = held({"content": [{"type": "text", "text": "Visible words streaming slowly. " * 40}]})
    command = f"{GATE}; for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do echo number-$i; done; echo finished"
    stub.script(slow, call(NARRATE, "bash", command=command), say("done"))
    app = plain_app(stub, project)
    async with app.run_test(size=(160, 24)) as pilot:
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        status = str(app.query_one("#status", Static).render()).rstrip()
        assert len(status) < 80 and not status.endswith("│")
        await send(pilot, "talk")
        await until(lambda: app.transcript.live is not None, pause=pilot.pause)
        await until(lambda: "writing" in str(app.query_one("#status", Static).render()), pause=pilot.pause)
        go.set()
        await idle(pilot)
        await send(pilot, "run")
        await until(lambda: app.feed.calls, pause=pilot.pause)
        await pilot.pause()
        tool = [w for w in app.transcript.query(Foldable) if w.entry.kind == "tool"][-1]
        shown = str(tool.render())
        assert shown.endswith("… running") and len(shown) <= 80
        (project / "go").touch()
        await idle(pilot)
        bar = app.query_one("Footer")  # it redraws its keys when the turn ends (ctrl+c: Interrupt, then Quit)
        await until(lambda: max((key.region.right for key in bar.query("FooterKey")), default=0) > 0, pause=pilot.pause)
        assert all(key.region.right <= 80 for key in bar.query("FooterKey"))


def contrast(a: Any, b: Any) -> float:
    def lum(c: Any) -> float:
        parts = [v / 255 for v in (c[0], c[1], c[2])] if isinstance(c, tuple) else [v / 255 for v in (c.r, c.g, c.b)]
        lin = [p / 12.92 if p <= 0.03928 else ((p + 0.055) / 1.055) ** 2.4 for p in parts]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def eight_bit(*colors: Any) -> list[Any]:
    from rich.color import ColorSystem

    return [c.rich_color.downgrade(ColorSystem.EIGHT_BIT).get_truecolor() for c in colors]


async def test_focused_lines_are_readable_and_keys_typed_while_focus_moves_land_in_order(
        stub: Stub, project: Path) -> None:
    from textual import events

    from rhapsody.frontends.app.widgets import Entry

    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        for kind in ("harness", "tool", "seam", "thinking"):
            await app.transcript.add(Entry(kind, f"⚙ [rhapsody] a {kind} line", "its body", key=kind))
        await pilot.pause()
        for line in app.transcript.query(Foldable):
            line.focus()
            await pilot.pause()
            background = line.background_colors[1]
            color = background + line.styles.color  # the text colour as painted (muted text has alpha)
            assert contrast(background, color) >= 4.5, line.entry.kind
            assert contrast(*eight_bit(background, color)) >= 4.5, line.entry.kind  # as tmux's 256 colours show it
        for key, char in (("tab", None), ("a", "a"), ("b", "b"), ("c", "c"), ("home", None), ("X", "X")):
            app.post_message(events.Key(key, char))  # all queued at once, as a fast typist's keys arrive
        await until(lambda: app.query_one(PromptInput).text.endswith("Xabc"), pause=pilot.pause)
        await pilot.pause()  # what the keys queued (tab's completions) is handled before the app closes


async def test_command_outputs_survive_continue_in_place(stub: Stub, project: Path) -> None:
    stub.script(say("first answer"), say("second answer"))
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        await send(pilot, "one")
        await idle(pilot)
        await send(pilot, "/model nonsense-model")
        await send(pilot, "/stats")
        await send(pilot, "two")
        await idle(pilot)
        live = texts(app)
    assert any("nonsense-model" in t for t in live)
    from rhapsody.wiring import build

    resumed_wiring = build(project, app.settings, stub.model(), app.agent.session.spec.model, continue_last=True)
    again = RhapsodyApp(resumed_wiring.agent, resumed_wiring.settings)
    async with again.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        resumed = texts(again)
        kinds = [e.kind for e in again.transcript.entries if "nonsense-model" in e.text]
    cues = ("first answer", "› /model nonsense-model", "unknown model nonsense-model", "› /stats", "no seams yet",
            "› two", "second answer")
    for shown in (live, resumed):  # each command above its own output, live and after --continue alike
        order = [next(i for i, t in enumerate(shown) if t.startswith(cue)) for cue in cues]
        assert order == sorted(order)
    assert kinds == ["user", "error"]  # the echo, then the refusal
    assert [t for t in live if t.startswith("› /")] == [t for t in resumed if t.startswith("› /")]


async def test_help_palette_yolo_and_long_outputs(stub: Stub, project: Path) -> None:
    from rhapsody.frontends.app.widgets import Entry

    app = ask_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        commands = {c.title: c.help for c in app.get_system_commands(app.screen)}
        assert {"/model", "/recall", "/permissions"} <= set(commands)
        assert all(len(commands[n]) <= 74 for n in ("/model", "/recall", "/permissions", "/stats"))
        assert commands["/stats"] == "every seam of this session, before → after, and what the seams saved"
        assert commands["/help"] == "list the commands and keys"  # in the palette, "this list" would be the palette
        await send(pilot, "/help")
        assert any("shift+tab" in t and "ctrl+n" in t for t in texts(app))
        assert "ask" not in str(app.query_one("#status", Static).render()).split("│")[1]
        await send(pilot, "/permissions yolo")
        assert any(t.startswith("⚠ yolo") for t in texts(app))
        assert "yolo" in str(app.query_one("#status", Static).render())
        body = "\n".join(f"line {i:04d} " + "x" * 50 for i in range(200))
        await app.transcript.add(Entry("tool", "bash long → ok (0.1 s)", body, key="long"))
        line = [w for w in app.transcript.query(Foldable) if w.entry.key == "long"][0]
        line.expanded = True
        shown = str(line.render()).splitlines()
        assert shown[-1].startswith("[…") and shown[-2].endswith("x" * 50)


async def test_the_question_uses_its_share_of_the_rows_at_80x24_and_leaves_the_transcript_in_view(stub: Stub, project: Path) -> None:
    content = "".join(f"line {i}\n" for i in range(60))
    (project / "long.txt").write_text(content)
    stub.script(call(NARRATE, "write_file", path="long.txt", content=content.replace("line", "row")), say("ok"))
    app = ask_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        app.start_turn("rewrite")
        await until(lambda: asking(app), pause=pilot.pause)
        await pilot.pause()
        box, preview = panel(app), panel(app).query_one("#preview")
        assert box.region.bottom <= 24 - 5 and box.region.height >= 13 and preview.region.height >= 5
        assert app.transcript.region.height >= 4  # the transcript stays in view above the question
        await pilot.press("escape")
        await idle(pilot)


def on_screen(app: RhapsodyApp) -> list[str]:
    """The transcript as mounted, top to bottom: the kind of each entry (a reply's chunks as one), notices with their text."""
    owner = {widget: entry for entry, widget in app.transcript.widgets.items()}
    shown: list[str] = []
    for widget in app.transcript.children:
        entry = owner.get(widget)
        kind = "assistant" if entry is None and "live" in widget.classes else (entry.kind if entry else "")
        item = f"notice {entry.text}" if entry is not None and kind == "notice" else kind
        if item and not (item == "assistant" and shown[-1:] == ["assistant"]):
            shown.append(item)
    return shown


STREAMED = "Streaming a reply slowly.\n"


@pytest.mark.parametrize("turns,order", [
    # long enough that the live reply moves on to a second widget mid-stream; the stream waits after its
    # first text delta until the notice is on screen (a "delay" between events would wait 78 times)
    ([{"content": [{"type": "text", "text": STREAMED * 120}], "hold": 3}], ["user", "assistant", "user", "notice"]),
    # the reply ends in a call: history has the call's line with the reply, the notice after both. The notice is
    # recorded when the app has shown the reply's end; released at once, the agent can run the call and the next
    # request before a slow app gets there, so the next reply waits (after its first event) until it has
    ([{**call(STREAMED * 40, "bash", command="echo hi"), "hold": 3}, {**say("done"), "hold": 1}],
     ["user", "assistant", "tool", "user", "notice", "assistant"]),  # "user": the command's echo
])
async def test_a_notice_said_while_a_reply_streams_shows_where_the_rebuild_shows_it(
        stub: Stub, project: Path, turns: list[dict[str, Any]], order: list[str]) -> None:
    go, noted = threading.Event(), threading.Event()
    gates = iter([go, noted])
    stub.script(*[{**t, "hold": (t["hold"], next(gates))} if "hold" in t else t for t in turns])
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        app.start_turn("talk")
        await until(lambda: app.transcript.live is not None, pause=pilot.pause)
        await app.surface.command("/stats")  # the Enter handler's own call, as Enter makes it while the reply streams
        await pilot.pause()
        during, chunks = on_screen(app), len(app.transcript.live_chunks)
        go.set()
        await until(lambda: any(r.kind == "notice" for r in app.agent.session.records), pause=pilot.pause)
        noted.set()
        await idle(pilot)
        live = on_screen(app)
        await app.surface.reload()
        rebuilt = on_screen(app)
    assert during[-1].startswith("notice no seams yet") and "assistant" in during  # shown at once, below the reply
    assert chunks == 0  # said while the first widget of the reply streamed
    assert live == rebuilt and [s.split()[0] for s in rebuilt] == order
    kinds = [r["kind"] for r in records(app)]
    assert kinds.index("notice") > kinds.index("message", 1)  # recorded after the reply


async def test_palette_lists_rhapsody_commands(stub: Stub, project: Path) -> None:
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        names = [c.title for c in app.get_system_commands(app.screen)]
        assert "/stats" in names and "/handoff" in names
        await pilot.press("ctrl+p")
        await until(lambda: app.screen is not app.screen_stack[0], pause=pilot.pause)
        await pilot.press("escape")
        await until(lambda: app.screen is app.screen_stack[0], pause=pilot.pause)
        await pilot.press("x")
        assert app.query_one(PromptInput).text.endswith("x")  # keys reach the input after the palette


async def test_sending_from_the_prompt_scrolls_the_transcript_to_the_bottom(stub: Stub, project: Path) -> None:
    app = plain_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(3):
            await send(pilot, "/help")
        await pilot.pause()
        view = app.transcript
        assert view.max_scroll_y > 20
        await pilot.press("pageup", "pageup")
        await pilot.pause()
        assert view.scroll_y < view.max_scroll_y
        for command, said in (("/stats", "no seams yet"), ("/help", "/model")):
            await send(pilot, command)
            await until(lambda: said in app.transcript.entries[-1].text and app.transcript.entries[-1] in app.transcript.widgets, pause=pilot.pause)
            shown = app.transcript.widgets[app.transcript.entries[-1]]
            if command == "/stats":  # a short output: the bottom
                await until(lambda: view.scroll_y == view.max_scroll_y, pause=pilot.pause)
            else:  # taller than the view: seen from its first line
                await until(lambda: view.region.y <= shown.region.y < view.region.y + 2, pause=pilot.pause)
                assert view.scroll_y < view.max_scroll_y
            await pilot.press("pageup")
            await pilot.pause()


async def test_up_past_the_first_transcript_line_loads_earlier_entries_then_stays(stub: Stub, project: Path) -> None:
    from rhapsody.frontends.app.widgets import Entry

    app = plain_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        await send(pilot, "/stats")  # an input the prompt's history would bring back on Up
        await pilot.pause()
        await app.transcript.load([Entry("tool", f"bash echo {i} → ok (0.0 s)", f"{i}", f"t{i}", "ok")
                                   for i in range(70)])
        assert app.transcript.first_mounted > 0
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert isinstance(app.focused, Foldable) and app.focused.entry.key == "t69"
        for i in reversed(range(69)):  # each Up one line, across t30, the first mounted, where t0 to t29 load
            send_keys(pilot, "up")
            await until(lambda: isinstance(app.focused, Foldable) and app.focused.entry.key == f"t{i}")
        await pilot.press("up", "up")  # past the first line: it stays
        assert isinstance(app.focused, Foldable) and app.focused.entry.key == "t0"
        assert app.transcript.first_mounted == 0 and app.query_one(PromptInput).text == ""
        await pilot.press("down")
        assert isinstance(app.focused, Foldable) and app.focused.entry.key == "t1"


async def test_up_keys_in_one_burst_each_move_one_line(stub: Stub, project: Path) -> None:
    from rhapsody.frontends.app.widgets import Entry

    app = plain_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.transcript.load([Entry("tool", f"bash echo {i} → ok (0.0 s)", f"{i}", f"t{i}", "ok")
                                   for i in range(12)])
        await pilot.press("ctrl+t")
        await until(lambda: isinstance(app.focused, Foldable) and app.focused.entry.key == "t11", pause=pilot.pause)
        send_keys(pilot, *["up"] * 5)  # key repeat, or arrows pasted: all queued before the first is handled
        await until(lambda: isinstance(app.focused, Foldable) and app.focused.entry.key == "t6", pause=pilot.pause)
        send_keys(pilot, "down", "down", "up", "down", "down")
        await until(lambda: isinstance(app.focused, Foldable) and app.focused.entry.key == "t9", pause=pilot.pause)
        await pilot.pause()
        assert isinstance(app.focused, Foldable) and app.focused.entry.key == "t9"  # no key handled twice
        assert app.query_one(PromptInput).text == ""


async def test_model_alone_lists_the_known_names_and_an_unknown_one_suggests_the_closest(stub: Stub,
                                                                                        project: Path) -> None:
    from rhapsody.providers.lazy import sdk_models

    app = plain_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        await send(pilot, "/model")
        await pilot.pause()
        shown = texts(app)[-1]
        assert shown.startswith(f"model: {app.agent.session.spec.model}")
        assert len(sdk_models()) > 3 and all(m in shown for m in sdk_models() if not m[-8:].isdigit())
        real = next(m for m in sdk_models() if "sonnet" in m and not m[-8:].isdigit())  # whatever the SDK lists
        typo = real.replace("sonnet", "sonet")
        await send(pilot, f"/model {typo}")
        await pilot.pause()
        error = texts(app)[-1]
        assert f"unknown model {typo} (closest: {real}" in error and "/model lists" in error


async def recalled(app: RhapsodyApp, pilot: Any) -> str:
    """Run the scripted call, hand off, `/recall slow`: the recall output the app shows."""
    await send(pilot, "run the slow check")
    await idle(pilot)
    await send(pilot, "/handoff anyway")
    await idle(pilot)
    await send(pilot, "/recall slow")
    await until(lambda: any("narration before" in t for t in texts(app)), pause=pilot.pause)
    return next(t for t in texts(app) if "narration before" in t)


async def test_recall_shows_the_human_the_matched_output_as_written_without_match_markers(
        stub: Stub, project: Path) -> None:
    command = "echo 'speed=[slow]'; echo speed=slow"
    stub.script(call(NARRATE, "bash", command=command), say("ran it"), handoff_turn(), say("Noted."))
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        shown = await recalled(app, pilot)
    result = next(b["content"] for r in records(app) if r["kind"] == "message" and r["role"] == "user"
                  for b in r["content"] if b.get("type") == "tool_result" and "speed" in json.dumps(b["content"]))
    written = result if isinstance(result, str) else "".join(b["text"] for b in result)
    snippet = shown.split("\n  result: ", 1)[1].split("\n  narration before:", 1)[0]
    snippet = snippet.replace("\n" + " " * len("  result: "), "\n")  # later lines hang under the label
    assert "speed=[slow]" in snippet and snippet.strip("…") in written  # byte for byte what the command printed
    assert "[[slow]]" not in shown and "[speed" not in shown


async def test_recall_shows_the_end_of_a_long_narration_cut_at_a_word_to_the_human_and_the_model_alike(
        stub: Stub, project: Path) -> None:
    from rhapsody.tools.handoff import recall_text

    narration = " ".join([NARRATE] * 4)
    stub.script(call(narration, "bash", command="echo speed=slow"), say("ran it"), handoff_turn(), say("Noted."))
    app = plain_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        shown = (await recalled(app, pilot)).split("narration before: ")[1]
        model = recall_text(project, app.agent.session, "slow", False).split("narration before: ")[1]
    shown, model = shown.split("\n")[0], model.split("\n")[0]
    assert shown == model  # the person and the model read the same words
    assert shown.startswith("…") and len(shown) <= 200 and narration.endswith(shown[1:])  # the words before the call
    assert f" {shown[1:]}" in narration  # cut between words


async def test_recall_indents_every_later_line_of_a_snippet_under_its_label(stub: Stub, project: Path) -> None:
    from rhapsody.tools.handoff import recall_text

    (project / "notes.txt").write_text("first line\nspeed=slow\nsecond line\nthird line\n")
    stub.script(call(NARRATE, "bash", command="cat notes.txt"), say("ran it"), handoff_turn(), say("Noted."))
    app = plain_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        shown = await recalled(app, pilot)
        model = recall_text(project, app.agent.session, "slow", False)
    lines = shown.splitlines()[1:]
    assert "second line" in shown and not lines[0].startswith(" ")  # the recall id, at the margin
    labels = [line for line in lines if line.startswith("  ") and not line.startswith("   ")]
    assert [line.split(":")[0].strip() for line in labels] == ["result", "narration before"]
    assert all(line.startswith(" " * len("  result: ")) for line in lines[1:] if line not in labels)
    assert "\nsecond line" in model or "second line" not in model  # the model's text is left as it was


async def test_help_wrapped_at_80_columns_keeps_its_hanging_indent(stub: Stub, project: Path) -> None:
    from rhapsody.frontends.app.widgets import NoticeLine

    app = plain_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        await send(pilot, "/help")
        await pilot.pause()
        notice = [w for w in app.transcript.query(NoticeLine) if "/model" in w.entry.text][-1]
        width = notice.content_size.width
        shown = [notice.render_line(y).text.rstrip() for y in range(notice.size.height)]
        assert 60 < width < 80 and all(len(line) <= width for line in shown)
        labels = {line.split("  ")[0] for line in app.transcript.entries[-1].text.splitlines()}
        assert all(line.split("  ")[0] in labels or line.startswith(" " * 14) for line in shown)
        model = next(i for i, line in enumerate(shown) if line.startswith("/model"))
        assert shown[model + 1].startswith(" " * 14) and shown[model + 1].strip()
        assert notice.size.height == len(shown)


async def test_at_completion_never_offers_build_or_cache_artefacts(stub: Stub, project: Path, tmp_path: Path) -> None:
    from rhapsody.frontends.prompt_aids import project_files

    assert not (project / ".gitignore").exists()
    for root in (project, tmp_path / "not-a-repo"):
        (root / "__pycache__").mkdir(parents=True)
        (root / "__pycache__" / "inventory.cpython-311.pyc").write_bytes(b"\0")
        (root / "inventory.py").write_text("")
        (root / "lib.pyc").write_bytes(b"\0")
        (root / "node_modules" / "x").mkdir(parents=True)
        (root / "node_modules" / "x" / "inventory.js").write_text("")
        files = project_files(root)
        assert "inventory.py" in files
        assert not [f for f in files if "__pycache__" in f or f.endswith(".pyc") or "node_modules" in f
                    or f.startswith(".git/")], root
    app = plain_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        prompt = app.query_one(PromptInput)
        prompt.text = "look at @inv"
        await pilot.pause()
        assert prompt.suggestions() == ["inventory.py"]


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_an_unfolded_body_wraps_every_line_and_cuts_none(stub: Stub, project: Path, size: tuple[int, int]) -> None:
    from rhapsody.frontends.app.widgets import Entry

    word = "compute_the_weighted_average_" + "_".join(["of_every_item_grouped_by_their_level"] * 6)
    body = "\n".join(["short line one", f"x = {word}", "a line of words " * 20])
    app = plain_app(stub, project)
    async with app.run_test(size=size) as pilot:
        await app.transcript.add(Entry("tool", "bash report → ok (0.1 s)", body, key="wide"))
        line = [w for w in app.transcript.query(Foldable) if w.entry.key == "wide"][0]
        line.expanded = True
        await pilot.pause()
        shown = [line.render_line(y).text.strip() for y in range(line.size.height)]
        assert not any("…" in row for row in shown)
        joined = "".join(shown).replace(" ", "")
        assert word in joined and joined.count("alineofwords") == 20


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_an_unfolded_error_says_its_message_once(stub: Stub, project: Path, size: tuple[int, int]) -> None:
    stub.script(call(NARRATE, "bash", command="curl https://example.com", sandbox=False), say("no"))
    app = plain_app(stub, project)
    async with app.run_test(size=size) as pilot:
        app.start_turn("fetch")
        await idle(pilot)
        line = [w for w in app.transcript.query(Foldable) if "curl" in w.title][0]
        assert "→ error" in line.title and "saying why" in line.title  # the folded line says why, cut to fit
        line.focus()
        await pilot.press("enter")
        await pilot.pause()
        shown = " ".join(line.render_line(y).text.strip() for y in range(line.size.height))
        message = "sandbox: false needs a justification saying why the command cannot run in the sandbox"
        assert shown.count("saying why") == 1 and " ".join(message.split()) in " ".join(shown.split())
        assert "…" not in shown and shown.startswith("▼ bash curl https://example.com → error (")
