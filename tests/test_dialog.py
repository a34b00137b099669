"""The permission question and the full view at every terminal size, and denied edits as the human sees them."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widget import Widget

from rhapsody.loopback.script import call, say
from rhapsody.tui.approval import ApprovalScreen

from .conftest import Stub
from .test_app_keys import NARRATE, ask_app, idle, until


def on_screen(widget: Widget, size: tuple[int, int]) -> bool:
    """Whether the widget is drawn, whole, inside a terminal of `size`."""
    region = widget.region
    return bool(region.height) and region.y >= 0 and region.bottom <= size[1] and region.right <= size[0]


def answer_area(screen: ApprovalScreen) -> list[Widget]:
    return [*screen.query(".choice"), screen.query_one("#reason"), screen.query_one("#enter-does")]


@pytest.mark.parametrize("sizes", [[(160, 48), (80, 24)], [(80, 24), (160, 48), (80, 24)],
                                   [(160, 48), (80, 24), (160, 48)]])
async def test_the_answer_area_stays_on_screen_after_every_resize(stub: Stub, project: Path,
                                                                  sizes: list[tuple[int, int]]) -> None:
    content = "".join(f"line {i}\n" for i in range(179))
    (project / "long.txt").write_text(content)
    stub.script(call(NARRATE, "write_file", path="long.txt", content=content.replace("line", "row")), say("ok"))
    app = ask_app(stub, project)
    async with app.run_test(size=sizes[0]) as pilot:
        app.start_turn("rewrite")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen) and app.screen.focused is not None)
        screen = app.screen
        assert isinstance(screen, ApprovalScreen)
        for size in sizes[1:]:
            await pilot.resize_terminal(*size)
            await pilot.pause(0.1)
            await pilot.pause()
            assert all(on_screen(w, size) for w in answer_area(screen)), size
            preview = screen.query_one("#preview")
            assert preview.region.height >= 3 and on_screen(screen.query_one("#approval"), size)
        await pilot.press("escape")
        await idle(pilot)


async def test_the_transcript_does_not_show_through_beside_the_question_at_160x48(stub: Stub, project: Path) -> None:
    words = "Two files: inventory.py holds the stock and report.py sums total_value. " * 4
    stub.script(call(words, "edit_file", path="app.py", old="a - b", new="a + b"), say("not changed"))
    app = ask_app(stub, project)
    async with app.run_test(size=(160, 48)) as pilot:
        app.start_turn("fix")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen) and app.screen.focused is not None)
        await pilot.pause()
        box = app.screen.query_one("#approval").region
        rows = [strip.text for strip in app.screen._compositor.render_strips()]
        beside = [row[: box.x] + row[box.right:] for row in rows]
        assert box.x > 0 and all(not side.strip() for side in beside), [s for s in beside if s.strip()]
        await pilot.press("escape")
        await idle(pilot)
