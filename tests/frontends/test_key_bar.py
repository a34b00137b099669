"""The key bar under the status line draws what the focused line's keys do, and is rebuilt only when that changes."""

from __future__ import annotations

from pathlib import Path

from textual.widgets._footer import FooterKey

from rhapsody.frontends.app.app import RhapsodyApp
from rhapsody.frontends.app.widgets import Entry, Foldable

from tests.conftest import Stub, until
from tests.frontends.test_app_keys import plain_app


def drawn(app: RhapsodyApp) -> list[str]:
    """The descriptions the key bar draws, left to right."""
    return [key.description for key in app.query(FooterKey)]


async def test_the_key_bar_follows_the_focus_and_keeps_its_keys_while_they_say_the_same(stub: Stub,
                                                                                         project: Path) -> None:
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.transcript.load([Entry("tool", f"bash echo {i} → ok (0.0 s)", f"{i}", f"t{i}", "ok")
                                   for i in range(3)])
        await until(lambda: "Queue" in drawn(app), pause=pilot.pause)
        at_prompt = drawn(app)
        assert "Unfold" not in at_prompt
        await pilot.press("ctrl+t")
        await until(lambda: "Unfold" in drawn(app), pause=pilot.pause)
        keys = list(app.query(FooterKey))
        await pilot.press("up")  # the line above has the same keys: the bar keeps its widgets
        assert isinstance(app.focused, Foldable) and app.focused.entry.key == "t1"
        assert list(app.query(FooterKey)) == keys
        await pilot.press("enter")  # unfolded, its Enter folds it: the bar says so
        await until(lambda: "Unfold" not in drawn(app) and "Fold" in drawn(app), pause=pilot.pause)
        assert app.focused.expanded
        await pilot.press("tab")
        await until(lambda: drawn(app) == at_prompt, pause=pilot.pause)
