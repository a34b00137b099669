"""What the app asks Textual to redo while a reply streams and the clock ticks: no more than what changed."""

from __future__ import annotations

import threading
from pathlib import Path

from rhapsody.frontends.app.live import LiveReply

from tests.conftest import Stub, until
from tests.frontends.test_app_keys import plain_app

ORDER = {"first-of-type", "last-of-type", "first-child", "last-child", "empty", "odd", "even"}
"""Pseudo-classes that make a widget's style depend on its place among its siblings."""

REPLY = "The parser fails on empty input.\n\n```python\ndef parse(line):\n    return line.split()\n```\n\nFixed. " * 4


async def test_a_streamed_reply_is_one_widget_that_stays_as_the_finished_reply(stub: Stub, project: Path) -> None:
    go = threading.Event()
    stub.script({"content": [{"type": "text", "text": REPLY}], "hold": (6, go)})
    app = plain_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        app.start_turn("explain")
        await until(lambda: app.transcript.live is not None and "".join(app.transcript.live_text), pause=pilot.pause)
        live = app.transcript.live
        await pilot.pause()
        assert isinstance(live, LiveReply) and live.is_mounted
        assert list(live.children) == []  # no widget per block, mounted and restyled as the blocks arrive
        assert live.outer_size.height > 0
        go.set()
        await until(lambda: not app.busy, pause=pilot.pause)
        await pilot.pause()
        reply = next(e for e in app.transcript.entries if e.kind == "assistant")
        assert reply.text == REPLY
        assert app.transcript.widgets[reply] is live and live.is_mounted  # drawn as finished already: not re-mounted


async def test_no_style_rule_depends_on_a_widgets_place_among_its_siblings(stub: Stub, project: Path) -> None:
    """A rule with :last-child (or :odd, ...) makes Textual restyle every sibling, with all their descendants, of each
    widget mounted beside them; one whose last selector is `*` does so for every widget in the app."""
    app = plain_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        rules = app.stylesheet.rules
        assert len(rules) > 50  # the app's own stylesheet and Textual's widgets' are loaded
        assert [rule.css.splitlines()[0] for rule in rules if rule.pseudo_classes & ORDER] == []


async def test_the_status_line_repaints_its_row_without_laying_the_screen_out_again(stub: Stub, project: Path) -> None:
    app = plain_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        bar = app.status_bar
        await until(lambda: str(bar.render()).startswith(" idle"), pause=pilot.pause)
        layouts = bar._layout_updates  # Textual's count of the layouts this widget asked for
        shown = bar.content
        bar.tick()  # idle, nothing changed: nothing is drawn again
        assert bar.content is shown
        bar.set_state("working")
        assert bar.content is not shown
        await pilot.pause()
        assert str(bar.render()).startswith(" working")
        assert bar._layout_updates == layouts  # one row whatever it says


async def test_deltas_that_arrive_between_two_drawings_are_drawn_once_and_the_last_is_always_drawn(
        stub: Stub, project: Path) -> None:
    app = plain_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.transcript
        await view.stream_text("The parser ")
        live = view.live
        assert isinstance(live, LiveReply)
        await pilot.pause()
        layouts = live._layout_updates  # Textual's count of the layouts this widget asked for
        words = [f"word{i} " for i in range(30)]
        for word in words:  # a burst, as a fast stream delivers between two frames
            await view.stream_text(word)
        assert live._layout_updates - layouts <= 1
        expected = "The parser " + "".join(words)
        await until(lambda: live.content.text == expected, pause=pilot.pause)  # the last delta is drawn, soon
        assert "word29" in "".join(live.render_line(y).text for y in range(live.size.height))


async def test_a_focus_move_through_the_transcript_repaints_the_two_lines_without_a_layout(stub: Stub,
                                                                                            project: Path) -> None:
    from rhapsody.frontends.app.widgets import Entry, Foldable

    app = plain_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.transcript.load([Entry("tool", f"bash echo {i} → ok (0.0 s)", f"{i}", f"t{i}", "ok") for i in range(3)])
        await pilot.press("ctrl+t")
        await until(lambda: isinstance(app.focused, Foldable) and app.focused.entry.key == "t2", pause=pilot.pause)
        lines = app.transcript.foldables()
        layouts = [line._layout_updates for line in lines]
        await pilot.press("up")
        assert app.focused is lines[1] and lines[1].styles.outline_left[0] == "thick"
        assert lines[2].styles.outline_left[0] == ""  # the edge moved with the focus
        assert [line._layout_updates for line in lines] == layouts
