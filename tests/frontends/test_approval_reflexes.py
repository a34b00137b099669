"""A permission question answered the way Claude Code users answer one: Enter takes the highlighted
default (allow once), a digit picks as numbered on screen, and the grace period still swallows keys."""

from __future__ import annotations

from typing import Any

import asyncio
from pathlib import Path


from rhapsody.core.toolbox.approval import HumanApprover
from rhapsody.frontends.app.approval import ApprovalPanel, Choice
from rhapsody.loopback.script import call, say

from tests.conftest import Stub, plain_mode
from tests.conftest import type_text, until
from tests.frontends.test_app_keys import NARRATE, ask_app, asking, idle, panel, records
from rhapsody.core.session.records import dump
from tests.frontends.test_plain import end_grace


def human_decisions(app_records: list[Any]) -> list[tuple[object, object]]:
    dicts = [r if isinstance(r, dict) else dump(r) for r in app_records]
    return [(r["decision"], r["by"]) for r in dicts if r["kind"] == "permission"]


async def test_enter_on_the_empty_field_allows_once_the_highlighted_answer(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command="touch one.txt"), say("done"))
    app = ask_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        app.start_turn("go")
        await until(lambda: asking(app), pause=pilot.pause)
        lines = [str(c.render()) for c in panel(app).query(Choice)]
        assert lines[0].startswith("❯ 1. allow once") and lines[-1].startswith("  ") and "deny" in lines[-1]
        assert panel(app).query(Choice).first().has_class("-enter")
        await pilot.press(*"n")  # the highlight follows what Enter would give
        assert [c.has_class("-enter") for c in panel(app).query(Choice)][-1]
        await pilot.press("backspace", "enter")
        await idle(pilot)
    assert (project / "one.txt").exists()
    assert human_decisions(records(app)) == [("allow", "human")]


async def test_digits_pick_as_numbered_and_1_is_never_a_denial_with_reason_1(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command="touch one.txt"), call(NARRATE, "bash", command="touch two.txt"),
                call(NARRATE, "bash", command="mkdir three"), say("done"))
    app = ask_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        app.start_turn("go")
        await until(lambda: asking(app), pause=pilot.pause)
        first = panel(app)
        await pilot.press("1")  # alone: answered at once, no Enter needed
        await until(lambda: not first.is_attached, pause=pilot.pause)
        await until(lambda: asking(app), pause=pilot.pause)
        offered = panel(app).rules
        assert offered and "2. allow" in str(panel(app).query(Choice)[1].render())
        await pilot.press("2")  # the session rule, as numbered on screen
        await until(lambda: asking(app) and panel(app).argument == "mkdir three", pause=pilot.pause)
        await pilot.press("3")  # deny, the last number
        await idle(pilot)
    assert (project / "one.txt").exists() and (project / "two.txt").exists()
    assert not (project / "three").exists()
    assert human_decisions(records(app)) == [("allow", "human"), ("allow", "human"), ("deny", "human")]
    assert app.agent.toolbox.rules.session_allow == list(offered)
    sent = [b["text"] for body in stub.bodies() for m in body["messages"] if m["role"] == "user"
            for b in (m["content"] if isinstance(m["content"], list) else []) if b.get("type") == "text"]
    assert "1" not in sent and "3" not in sent  # no digit reached the agent as the human's words


async def test_a_digit_after_words_is_part_of_the_reason(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command="touch one.txt"), say("ok"))
    app = ask_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        app.start_turn("go")
        await until(lambda: asking(app), pause=pilot.pause)
        await type_text(pilot, "run test 1 first")
        await pilot.press("enter")
        await idle(pilot)
    assert not (project / "one.txt").exists()
    denied = [r for r in records(app) if r["kind"] == "permission"]
    assert [(r["decision"], r["by"]) for r in denied] == [("deny", "human")] and "run test 1 first" in denied[0]["reason"]


async def test_a_1_or_enter_typed_in_the_grace_period_answers_nothing(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command="touch one.txt"), say("done"))
    over = asyncio.Event()  # the grace period lasts until the test ends it
    app = ask_app(stub, project, over.wait)
    async with app.run_test(size=(80, 24)) as pilot:
        app.start_turn("go")
        await until(lambda: app.query(ApprovalPanel) and panel(app).has_focus, pause=pilot.pause)
        await pilot.press("1", "enter")
        await pilot.pause()
        assert app.query(ApprovalPanel) and not panel(app).ready and "1⏎" in panel(app).discarded
        over.set()
        await until(lambda: asking(app), pause=pilot.pause)
        await pilot.pause()
        assert asking(app) and not (project / "one.txt").exists()  # still asking after the grace period
        await pilot.press("escape")
        await idle(pilot)
    assert human_decisions(records(app)) == [("deny", "human")]


async def test_plain_mode_an_empty_line_allows_once_and_a_lone_digit_picks_at_once(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command="touch one.txt"), call(NARRATE, "bash", command="touch two.txt"),
                call(NARRATE, "bash", command="mkdir three"), say("done"))
    over = asyncio.Event()
    approver = HumanApprover(grace=over.wait)
    wiring = stub.wire(project, approver=approver, permission_mode="ask")
    async with plain_mode(wiring, approver) as (pipe, out, task):
        pipe.send_text("make the files\r")
        await until(lambda: out.getvalue().count("? bash wants to run") == 1)
        pipe.send_text("\r")  # within the grace period: not the default answer
        await until(lambda: "so it is not the answer" in out.getvalue())
        assert not (project / "one.txt").exists()
        await end_grace(over)
        assert "1 = allow once (y, or Enter)" in out.getvalue()
        pipe.send_text("\r")  # after it: Enter takes the default, allow once
        await until(lambda: out.getvalue().count("? bash wants to run") == 2)
        await end_grace(over)
        pipe.send_text("1")  # alone, no Enter
        await until(lambda: out.getvalue().count("? bash wants to run") == 3)
        await end_grace(over)
        last = "3" if "3 = deny (n)" in out.getvalue().rsplit("? bash wants to run", 1)[1] else "2"
        pipe.send_text(last)  # the last number denies
        await until(lambda: not wiring.agent.busy)
        pipe.send_text("/quit\r")
        assert await asyncio.wait_for(task, 10) == 0
    assert (project / "one.txt").exists() and (project / "two.txt").exists() and not (project / "three").exists()
    assert human_decisions(wiring.session.records) == [("allow", "human"), ("allow", "human"), ("deny", "human")]
    assert "denied by the human" in out.getvalue() and "denied by the human: " not in out.getvalue()
