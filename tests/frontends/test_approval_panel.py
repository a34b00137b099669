"""The permission question and the full view at every terminal size, and denied edits as the human sees them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from textual.widget import Widget
from textual.widgets import Input, Static, TextArea

from rhapsody.view import render
from rhapsody.core.session.messages import ToolUseBlock
from rhapsody.core.toolbox.approval import Approval
from rhapsody.loopback.script import call, say
from rhapsody.frontends.app.approval import ApprovalPanel
from rhapsody.frontends.app.fullview import FullView
from rhapsody.frontends.app.widgets import Foldable

from tests.conftest import Stub, collect
from tests.frontends.test_app_keys import NARRATE, ask_app, asking, idle, panel, plain_app
from tests.conftest import until


def on_screen(widget: Widget, size: tuple[int, int]) -> bool:
    """Whether the widget is drawn, whole, inside a terminal of `size`."""
    region = widget.region
    return bool(region.height) and region.y >= 0 and region.bottom <= size[1] and region.right <= size[0]


def answer_area(screen: ApprovalPanel) -> list[Widget]:
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
        await until(lambda: asking(app), pause=pilot.pause)
        screen = panel(app)
        for size in sizes[1:]:
            await pilot.resize_terminal(*size)
            await until(lambda: screen.region.width == size[0] and all(on_screen(w, size) for w in answer_area(screen)), pause=pilot.pause)
            preview = screen.query_one("#preview")
            assert preview.region.height >= 3 and on_screen(screen, size)
            assert app.transcript.region.height >= 4 and app.transcript.region.bottom <= screen.region.y
        await pilot.press("escape")
        await idle(pilot)


async def test_the_agents_words_stay_in_view_above_the_question_at_160x48(stub: Stub, project: Path) -> None:
    words = "Two files: inventory.py holds the stock and report.py sums total_value. " * 4
    stub.script(call(words, "edit_file", path="app.py", old="a - b", new="a + b"), say("not changed"))
    app = ask_app(stub, project)
    async with app.run_test(size=(160, 48)) as pilot:
        app.start_turn("fix")
        await until(lambda: asking(app), pause=pilot.pause)

        def split() -> tuple[str, str]:
            box = panel(app).region
            rows = [strip.text for strip in app.screen._compositor.render_strips()]
            return "\n".join(rows[: box.y]), "\n".join(rows[box.bottom:])

        def settled() -> bool:
            """The screen once laid out around the panel: the status bar says so once its next refresh has drawn it,
            and the transcript, shrunk to make room, keeps its end in view once its anchor has scrolled it there
            (a frame in between shows its rows blank). An unplaced panel's region is empty: all would read as below."""
            above, below = split()
            return panel(app).region.height > 0 and "waiting for you" in below and "report.py sums" in above

        await until(settled, pause=pilot.pause)
        above, below = split()
        assert "report.py sums total_value" in above and "› fix" in above  # the transcript, not a blank screen
        assert "waiting for you" in below and "esc Deny" in below  # the status bar and the footer, under the prompt
        await pilot.press("escape")
        await idle(pilot)


async def deny_edit_in_app(stub: Stub, project: Path, size: tuple[int, int], reason: str) -> tuple[Any, str]:
    """Deny an edit of app.py with `reason` in the app; the app and the denied call's line."""
    stub.script(call(NARRATE, "edit_file", path="app.py", old="a - b", new="a + b"), say("not changed"))
    app = ask_app(stub, project)
    async with app.run_test(size=size) as pilot:
        app.start_turn("fix")
        await until(lambda: asking(app), pause=pilot.pause)
        panel(app).query_one("#reason", Input).value = reason
        await pilot.press("enter")
        await idle(pilot)
        fold = [w for w in app.transcript.query(Foldable) if "edit_file" in w.title][0]
        folded = str(fold.render())
        fold.expanded = True
        return app, folded + "\n" + str(fold.render())


async def test_a_denied_edit_unfolds_to_the_diff_it_proposed_then_the_reason_also_on_resume(
        stub: Stub, project: Path) -> None:
    app, shown = await deny_edit_in_app(stub, project, (100, 30), "check the sum start value")
    assert "a - b" in (project / "app.py").read_text()  # not applied
    body = shown.split("\n", 2)[2]
    assert "-    return a - b" in body and "+    return a + b" in body
    assert body.index("+    return a + b") < body.index("denied by the human: check the sum start value")
    session = app.agent.session
    lines = [line for _, line in render.record_lines(session.records, project, session.id, session.conversation)]
    resumed = [x for x in lines if x.kind == "tool" and "edit_file" in x.text][0]
    assert resumed.state == "denied" and "+    return a + b" in resumed.body and resumed.body == body.rstrip()


async def test_a_write_to_a_secret_file_denied_keeps_no_diff_in_history(stub: Stub, project: Path) -> None:
    (project / ".env").write_text("TOKEN=abc123\n")
    stub.script(call(NARRATE, "write_file", path=".env", content="TOKEN=xyz\n"), say("ok"))
    wiring = stub.wire(project, permission_mode="ask")

    async def deny(*_: Any, **__: Any) -> Approval:
        return Approval(False, words="no")

    wiring.agent.toolbox.approver = deny
    await collect(wiring.agent.run("go"))
    history = wiring.session.path.read_text()
    assert '"write_file"' in history and (project / ".env").read_text() == "TOKEN=abc123\n"  # asked, denied
    assert "abc123" not in history


@pytest.mark.parametrize("width", [80, 160])
async def test_a_denied_edit_line_keeps_tool_and_path_says_denied_once_and_wraps_its_reason(
        stub: Stub, project: Path, width: int) -> None:
    reason = "check the sum start value, it should begin at zero and not at one, as the report expects " * 2
    _, shown = await deny_edit_in_app(stub, project, (width, 24), reason.strip())
    folded = shown.split("\n▼", 1)[0]  # the folded line, whole: the widget wraps it
    assert folded.startswith("▶ edit_file app.py → denied by the human: check the sum")
    assert folded.count("denied") == 1 and "not at one, as the" in folded and len(folded) > 80  # past 80: wrapped
    plain = render.plain(render.tool_line(render.ToolView(
        ToolUseBlock(id="t", name="edit_file", input={"path": "app.py"}), "denied", output=f"denied by the human: {reason}")))
    assert plain.count("denied") == 1 and plain.endswith(reason.strip())  # plain mode prints the whole reason


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_the_full_view_of_a_capped_read_says_it_is_capped_and_numbers_lines_once(
        stub: Stub, project: Path, size: tuple[int, int]) -> None:
    (project / "big.txt").write_text("".join(f"row {i}: the quick brown fox jumps over\n" for i in range(3000)))
    stub.script(call(NARRATE, "read_file", path="big.txt"), say("read it"))
    app = plain_app(stub, project)
    async with app.run_test(size=size) as pilot:
        app.start_turn("read big.txt")
        await idle(pilot)
        fold = [w for w in app.transcript.query(Foldable) if "read_file big.txt" in w.title][0]
        fold.focus()
        await pilot.press("enter", "enter")
        await until(lambda: isinstance(app.screen, FullView), pause=pilot.pause)
        await pilot.pause()
        view = app.screen
        assert isinstance(view, FullView)
        title = str(view.query_one(".why", Static).render())
        was = re.search(r"output was ([\d,]+) characters", view.text).group(1)  # type: ignore[union-attr]
        assert "the result as the agent received it: capped to" in title and f"of {was} characters" in title
        area = view.query_one("#fulltext", TextArea)
        assert not area.show_line_numbers and area.gutter_width == 0
        first = area.render_line(1).text
        assert first.split()[:3] == ["1", "row", "0:"]  # the file's own number, alone
        await pilot.press("escape")


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_a_capped_bash_output_says_so_on_its_line_and_in_the_full_view(
        stub: Stub, project: Path, size: tuple[int, int]) -> None:
    stub.script(call(NARRATE, "bash", command="seq 1 30000"), say("counted"))
    app = plain_app(stub, project)
    async with app.run_test(size=size) as pilot:
        app.start_turn("count")
        await idle(pilot)
        fold = [w for w in app.transcript.query(Foldable) if "seq 1 30000" in w.title][0]
        assert "→ exit 0" in fold.title and "· output capped" in str(fold.render())
        fold.focus()
        await pilot.press("enter", "enter")
        await until(lambda: isinstance(app.screen, FullView), pause=pilot.pause)
        await pilot.pause()
        assert isinstance(app.screen, FullView)
        title = str(app.screen.query_one(".why", Static).render())
        assert "the result as the agent received it: capped to" in title and "of 168,894 bytes" in title


async def test_the_full_view_of_a_long_write_holds_the_diff_it_applied(stub: Stub, project: Path) -> None:
    content = "".join(f"row {i}: the quick brown fox jumps over\n" for i in range(300))
    stub.script(call(NARRATE, "write_file", path="long.txt", content=content), say("written"))
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        app.start_turn("write it")
        await idle(pilot)
        fold = [w for w in app.transcript.query(Foldable) if "write_file long.txt" in w.title][0]
        fold.focus()
        await pilot.press("enter", "enter")
        await until(lambda: isinstance(app.screen, FullView), pause=pilot.pause)
        view = app.screen
        assert isinstance(view, FullView)
        assert view.text.startswith("wrote long.txt") and "+row 299: the quick brown fox" in view.text
        await pilot.press("escape")


@pytest.mark.parametrize(("command", "offered"), [("touch one.txt", "1, 2 or 3,"),
                                                  ("for f in *.py; do echo $f; done", "1 or 2,")])
async def test_the_answer_field_lists_only_the_answers_offered(stub: Stub, project: Path, command: str,
                                                               offered: str) -> None:
    stub.script(call(NARRATE, "bash", command=command), say("done"))
    app = ask_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        app.start_turn("go")
        await until(lambda: asking(app), pause=pilot.pause)
        screen = panel(app)
        assert screen.query_one("#reason", Input).placeholder.startswith(offered)
        assert bool(screen.rules) == ("2. allow" in " ".join(str(c.render()) for c in screen.query(Static)))
        await pilot.press("escape")
        await idle(pilot)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_the_full_view_wraps_a_test_report_at_its_spaces(stub: Stub, project: Path, size: tuple[int, int]) -> None:
    name = "test_category_report_puts_the_largest_first"
    row = f"{name} (test_inventory.FormatTest.{name}) ... FAIL"
    app = plain_app(stub, project)
    async with app.run_test(size=size) as pilot:
        await app.push_screen(FullView("bash python3 -m unittest → exit 1 (0.4 s)", "\n".join([row] * 30)))
        await pilot.pause()
        area = app.screen.query_one("#fulltext", TextArea)
        shown = [area.render_line(y).text.strip() for y in range(area.size.height)]
        words = {name, f"(test_inventory.FormatTest.{name})", "...", "FAIL"}
        assert shown[0].startswith(name) and all(set(line.split()) <= words for line in shown if line)
        await pilot.press("escape")


async def test_the_full_view_still_breaks_a_word_longer_than_a_line(stub: Stub, project: Path) -> None:
    word = "x" * 200
    app = plain_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.push_screen(FullView("bash long → ok (0.1 s)", word))
        await pilot.pause()
        area = app.screen.query_one("#fulltext", TextArea)
        shown = [area.render_line(y).text.strip() for y in range(area.size.height)]
        assert "".join(shown) == word and len([line for line in shown if line]) == 3
        await pilot.press("escape")
