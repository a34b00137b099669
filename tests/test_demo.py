"""`rhapsody --demo`'s scripted agent through the real loop: it keeps its promises after a denied
edit, its test call's exit status is the tests', its field note says what happened, and the
seam divider's figures add up with the status bar's."""

from __future__ import annotations

from rhapsody.core.session.records import dump
from rhapsody.core.session.records import dumped
import re
from pathlib import Path
from typing import Any

from rhapsody.view import render
from rhapsody.core.events import Event, SeamCommitted, TextDelta, ToolFinished
from rhapsody.core.session.messages import ToolUseBlock
from rhapsody.core.session.records import Seam
from rhapsody.core.toolbox.approval import Approval
from rhapsody.demo import DEMO_ALLOW, DEMO_TASK, SAMPLE, DemoResponder, prepare_project
from rhapsody.core.session.session_figures import figures
from rhapsody.core.agent.turn_hooks import context_with
from rhapsody.wiring import Wiring

from tests.conftest import Stub, collect

REASON = "please add a test first"


class Human:
    """Answers permission questions: denies the first edit with words, allows everything else."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, tool: str, argument: str, why: str, args: object = None, rules: object = ()) -> Approval:
        self.asked.append(tool)
        if tool == "edit_file" and self.asked.count("edit_file") == 1:
            return Approval(False, words=REASON)
        return Approval(True)


def demo(stub: Stub, tmp_path: Path) -> tuple[Wiring, Human, Path]:
    stub.responder = DemoResponder(delay=0, pause=0)
    root = prepare_project(tmp_path)
    human = Human()
    wiring = stub.wire(root, permission_mode="ask", allow=DEMO_ALLOW, approver=human)
    wiring.agent.toolbox.approver = human
    return wiring, human, root


def said(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def finished(events: list[Event], name: str) -> list[ToolFinished]:
    return [e for e in events if isinstance(e, ToolFinished) and e.call.name == name]


async def test_after_a_denied_edit_the_next_message_proposes_it_again_and_reruns_the_tests(
        stub: Stub, tmp_path: Path) -> None:
    wiring, human, root = demo(stub, tmp_path)
    first = await collect(wiring.agent.run(DEMO_TASK))
    assert "Not fixed" in said(first) and "total = 1" in (root / "inventory.py").read_text()
    assert human.asked.count("edit_file") == 1

    again = await collect(wiring.agent.run("ok, please make the edit now"))
    assert human.asked.count("edit_file") == 2  # a new permission question
    assert [e.is_error for e in finished(again, "edit_file")] == [False]
    assert "total = 0" in (root / "inventory.py").read_text()
    tests = finished(again, "bash")
    assert [e.exit_code for e in tests] == [0] and "OK" in tests[0].output
    assert "Done. [measured] All 13 tests pass" in said(again)
    assert "The demo task is finished" not in said(again)


async def test_the_demo_test_call_exits_with_the_tests_status(stub: Stub, tmp_path: Path) -> None:
    wiring, _, _ = demo(stub, tmp_path)
    events = await collect(wiring.agent.run(DEMO_TASK))
    runs = finished(events, "bash")
    assert [e.exit_code for e in runs] == [1, 1]  # the bug is there, and the denied edit left it there
    assert all("FAILED (failures=6)" in e.output for e in runs)
    shown = [line.text for e in runs for line in render.event_lines(e)]
    assert all("→ exit 1" in text for text in shown), shown


async def test_the_field_note_after_a_denied_edit_says_what_happened(stub: Stub, tmp_path: Path) -> None:
    wiring, _, root = demo(stub, tmp_path)
    await collect(wiring.agent.run(DEMO_TASK))
    wiring.agent.request_handoff()
    await collect(wiring.agent.run())
    body = stub.bodies()[-1]
    spoken = [b["text"] for m in body["messages"] if m["role"] == "assistant" and isinstance(m["content"], list)
              for b in m["content"] if b.get("type") == "text"]
    call = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]
            if b.get("type") == "tool_use" and b["name"] == "micro_handoff"][-1]
    note = call["input"]
    assert not any("edit_file" in item for item in note["done"])
    assert any("edit_file inventory.py` was denied" in item and REASON in item for item in note["went_wrong"])
    assert note["open"] and "denied" in note["open"][0]
    assert REASON in note["open"][1]  # the human's reason, never acted on, stays open
    quoted = [q for item in note["done"] + note["went_wrong"] for q in re.findall(r"Narration before it: “(.*)”$", item)]
    assert len(quoted) == len(note["done"]) + len(note["went_wrong"]) == 6
    assert all(any(q in s for s in spoken) for q in quoted), quoted  # said in this session, whole
    assert any(q.startswith("Two files: inventory.py and test_inventory.py.") for q in quoted)
    assert not any("confirm the fix" in q for q in quoted)

    block = [b for m in wiring.session.conversation.messages for b in m.content
             if isinstance(b, ToolUseBlock) and b.name == "micro_handoff"][-1]
    summary = render.key_argument(block)
    written = (root / note_path(wiring)).read_text()
    done = written.split("## Done\n")[1].split("\n\n")[0].splitlines()
    still_open = written.split("## Next steps and open\n")[1].split("\n\n")[0].splitlines()
    assert summary == f"field note ({len(done)} done, {len(still_open)} open)" == "field note (3 done, 2 open)"


def note_path(wiring: Wiring) -> str:
    seam = [r for r in dumped(wiring.session.records) if r["kind"] == "seam"][-1]
    return str(seam["note_path"])


async def test_a_denial_reason_stays_open_and_no_handoff_is_suggested_after_a_seam(stub: Stub, tmp_path: Path) -> None:
    wiring, human, root = demo(stub, tmp_path)
    first = await collect(wiring.agent.run(DEMO_TASK))
    assert f"you said: “{REASON}”). I am a scripted demo agent and cannot act on your reason" in said(first)
    assert "Try the micro-handoff now" not in said(first) and "Or hand off first: **ctrl+o**" in said(first)
    wiring.agent.request_handoff()
    await collect(wiring.agent.run())
    again = await collect(wiring.agent.run("ok, please make the edit now"))
    spoken = said(again)
    assert "Done. [measured] All 13 tests pass" in spoken
    assert "ctrl+o" not in spoken and "micro-handoff" not in spoken  # a seam already happened
    assert f"Still open, because I could not act on it: your reason for denying a call, “{REASON}”" in spoken
    wiring.agent.request_handoff()
    await collect(wiring.agent.run())
    written = (root / note_path(wiring)).read_text()
    still_open = written.split("## Next steps and open\n")[1].split("\n\n")[0]
    assert REASON in still_open  # fixed, yet the words the human gave with the denial were never acted on


def test_a_hint_is_acknowledged_as_not_followed_and_kept_open() -> None:
    agent = DemoResponder(delay=0, pause=0)
    messages: list[dict[str, Any]] = [{"role": "user", "content": DEMO_TASK}]
    first = agent({"messages": messages})["content"]
    messages += [{"role": "assistant", "content": [dict(b, id="c1") if b["type"] == "tool_use" else b for b in first]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "2 files"},
                                              {"type": "text", "text": "check the reports too"}]}]
    second = agent({"messages": messages})["content"]
    reply = second[0]["text"]
    assert reply.startswith("Hint received: “check the reports too”. I am a scripted demo agent and cannot follow")
    assert "I'll take it into account" not in reply
    messages += [{"role": "assistant", "content": [dict(b, id="c2") if b["type"] == "tool_use" else b for b in second]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c2", "content": "code"},
                                              {"type": "text", "text": "[rhapsody] Micro-handoff requested."}]}]
    note = next(b for b in agent({"messages": messages})["content"] if b["type"] == "tool_use")["input"]
    assert any("check the reports too" in item and "not followed" in item for item in note["open"])


async def test_the_seam_divider_starts_from_the_figure_shown_when_the_handoff_was_asked(
        stub: Stub, tmp_path: Path) -> None:
    wiring, _, _ = demo(stub, tmp_path)
    await collect(wiring.agent.run(DEMO_TASK))
    shown_at_key = figures(wiring.session.records).context  # what the status bar shows at ctrl+o
    # the context the ask joins: the last request's figure plus the agent's closing answer, which is not the handoff's
    shown_before = context_with(wiring.session, [])
    assert shown_at_key < shown_before < shown_at_key + 400
    wiring.agent.request_handoff()
    seam = dump([e for e in await collect(wiring.agent.run()) if isinstance(e, SeamCommitted)][0].record)
    shown_after = figures(wiring.session.records).context
    before, after = seam["before"]["est_tokens"], seam["after"]["est_tokens"]
    line = render.seam_line(Seam.model_validate(seam))
    assert seam["asked_est_tokens"] == shown_before and after == shown_after
    assert line.startswith(f"seam 1: context ~{shown_before:,} → ~{shown_after:,} tokens (the handoff and its note "
                           f"added ~{before - shown_before:,}, the strip took ~{before - after:,}; ")


class Allow:
    """Answers every permission question with yes, as the demo's normal run does."""

    async def __call__(self, tool: str, argument: str, why: str, args: object = None, rules: object = ()) -> Approval:
        return Approval(True)


async def test_after_the_allowed_run_the_seam_shrinks_the_context_it_was_asked_from(stub: Stub, tmp_path: Path) -> None:
    stub.responder = DemoResponder(delay=0, pause=0)
    root = prepare_project(tmp_path)
    wiring = stub.wire(root, permission_mode="ask", allow=DEMO_ALLOW, approver=Allow())
    wiring.agent.toolbox.approver = Allow()
    events = await collect(wiring.agent.run(DEMO_TASK))
    assert [e.exit_code for e in finished(events, "bash")] == [1, 0]
    spoken = said(events)
    assert "Measured: 6 of 13 tests fail; one says “1 != 0”" in spoken
    assert "I expect all 13 to pass." in spoken and "Done. [measured] All 13 tests pass" in spoken
    shown_before = context_with(wiring.session, [])  # the context the ask joins
    wiring.agent.request_handoff()
    seam = dump([e for e in await collect(wiring.agent.run()) if isinstance(e, SeamCommitted)][0].record)
    assert seam["asked_est_tokens"] == shown_before
    # what stays is mostly the fixed part a seam cannot take: the system prompt and the 12 tool definitions
    assert seam["after"]["est_tokens"] < 0.62 * shown_before, render.seam_line(Seam.model_validate(seam))



def test_the_sample_project_is_copied_without_bytecode(tmp_path: Path) -> None:
    cache = SAMPLE / "__pycache__"
    made = not cache.exists()
    cache.mkdir(exist_ok=True)
    stray = cache / "inventory.cpython-311.pyc"
    stray.write_bytes(b"")
    try:
        root = prepare_project(tmp_path)
    finally:
        stray.unlink()
        if made:
            cache.rmdir()
    assert sorted(p.name for p in root.iterdir() if p.name != ".git") == ["README.md", "inventory.py", "test_inventory.py"]


async def test_after_clear_on_a_fixed_project_the_demo_never_claims_the_tests_fail(stub: Stub, tmp_path: Path) -> None:
    from rhapsody.commands.slash import run_command

    wiring, human, root = demo(stub, tmp_path)
    human.asked.append("edit_file")  # the first edit is allowed: the project gets fixed
    first = await collect(wiring.agent.run(DEMO_TASK))
    assert "Done. [measured]" in said(first) and "total = 0" in (root / "inventory.py").read_text()
    run_command(wiring.agent, "/clear")
    again = await collect(wiring.agent.run(DEMO_TASK))
    text = said(again)
    assert [e.exit_code for e in finished(again, "bash")][-1] == 0
    assert "still fail" not in text and "was denied" not in text
    assert "Nothing to fix. [measured] All 13 tests pass" in text
