"""The app's panels own their state and talk to the app by typed Textual messages (docs/architecture.md, "The app:
panels that own their state"): each one here runs in a bare Textual app that knows nothing of rhapsody's agent,
and what it asks of the app arrives as its message."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from textual.app import App, ComposeResult
from textual.message import Message

from rhapsody.frontends.app.approval import ApprovalPanel, question
from rhapsody.frontends.app.prompt import PromptInput

from tests.conftest import no_grace, until

SRC = Path(__file__).resolve().parents[2] / "src" / "rhapsody" / "frontends" / "app"


class Host(App[None]):
    """A bare app: it mounts one panel and keeps every message that bubbles up to it."""

    def __init__(self, panel: Any) -> None:
        super().__init__()
        self.panel = panel
        self.heard: list[Message] = []

    def compose(self) -> ComposeResult:
        yield self.panel

    def on_approval_panel_answered(self, message: ApprovalPanel.Answered) -> None:
        self.heard.append(message)

    def on_prompt_input_rewind(self, message: PromptInput.Rewind) -> None:
        self.heard.append(message)

    def on_prompt_input_quit(self, message: PromptInput.Quit) -> None:
        self.heard.append(message)


async def test_the_question_panel_answers_once_by_a_typed_message_naming_its_question(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("old\n")
    panel = question("write_file", "notes.txt", "ask mode asks before writing files",
                     {"path": "notes.txt", "content": "new\n"}, tmp_path, ("write_file:*",), grace=no_grace,
                     question_id="q7")
    app = Host(panel)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(lambda: panel.ready, pause=pilot.pause)
        await pilot.press("2")  # the session rule, numbered as on screen
        await until(lambda: app.heard, pause=pilot.pause)
        panel.action_deny()  # a second answer (a click after the key) is not sent
        await pilot.pause()
    [answered] = app.heard
    assert isinstance(answered, ApprovalPanel.Answered) and answered.question_id == "q7"
    assert answered.approval.allow and answered.approval.remember == ("write_file:*",)


async def test_the_prompt_keeps_its_own_esc_and_ctrl_c_twice_and_asks_the_app_only_to_rewind_or_quit() -> None:
    prompt = PromptInput("a draft", id="prompt")
    app = Host(prompt)
    async with app.run_test(size=(80, 24)) as pilot:
        prompt.escape()
        assert prompt.text == "a draft"  # one Esc alone clears nothing
        prompt.escape()
        assert prompt.text == "" and not app.heard  # twice: the draft is set aside, nothing asked of the app
        prompt.escape()
        prompt.escape()  # twice on the empty prompt: the app is asked to rewind
        await until(lambda: app.heard, pause=pilot.pause)
        assert [type(m) for m in app.heard] == [PromptInput.Rewind]
        prompt.clear_or_quit()
        await pilot.pause()
        assert len(app.heard) == 1  # once: only the toast says a second one quits
        prompt.clear_or_quit()
        await until(lambda: len(app.heard) == 2, pause=pilot.pause)
    assert isinstance(app.heard[1], PromptInput.Quit)


def test_the_app_keeps_no_panels_state() -> None:
    """`RhapsodyApp.__init__` sets none of the fields its panels own now (feed.py, status_bar.py, prompt.py,
    approval.py, palette.py, notify.py), and no module of the app grows past the size the house style allows."""
    tree = ast.parse((SRC / "app.py").read_text(encoding="utf-8"))
    init = next(f for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "RhapsodyApp"
                for f in c.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
    assigned = {t.attr for node in ast.walk(init) for t in getattr(node, "targets", [getattr(node, "target", None)])
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}
    assert {"feed", "surface", "worker"} <= assigned  # the scan read the app's own fields
    panels = {"hints", "calls", "subagents", "shells", "_thinking", "_rebuilt_to", "_typed", "_replying", "_held",
              "asking", "live", "_git", "_cold", "_esc_at", "_ctrl_c_at", "_palette_custom", "signalled", "rewinder"}
    assert assigned & panels == set()
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in SRC.glob("*.py") if p.name != "app.py"}
    assert sizes and max(sizes.values()) <= 350, sizes
