"""A human's reason for denying a call is their own text: delivered after the tool results,
kept byte for byte across seams, counted by the authored-text audit."""

from __future__ import annotations

from rhapsody.core.session.records import dump
from pathlib import Path
from typing import Any

from rhapsody.core.events import DenialDelivered, SeamCommitted
from rhapsody.core.session.history import read_history
from rhapsody.core.toolbox.approval import Approval
from rhapsody.loopback.script import call, say

from tests.conftest import Stub, collect
from tests.core.session.test_handoff_e2e import handoff_turn, texts_of

REASON = "  No — don't touch build/; it holds Ana's benchmark data.\n\tUse /tmp/scratch instead ✓ "


async def deny_with_reason(tool: str, argument: str, why: str, args: object = None, rules: object = ()) -> Approval:
    return Approval(False, words=REASON)


async def test_denial_reason_survives_a_seam_byte_for_byte(stub: Stub, project: Path) -> None:
    stub.script(
        call("I will clear the build folder so the next build starts from nothing.", "bash", command="rm -rf build"),
        say("Understood, I will leave build/ alone."),
        handoff_turn(), say("Noted."),
        say("I remember why build/ is off limits."),
    )
    wiring = stub.wire(project, permission_mode="ask")
    wiring.agent.toolbox.approver = deny_with_reason
    events = await collect(wiring.agent.run("clean up"))
    denials = [e for e in events if isinstance(e, DenialDelivered)]
    assert [(d.call.name, d.text) for d in denials] == [("bash", REASON)]
    after_denial = stub.bodies()[1]["messages"][-1]["content"]
    assert [b["type"] for b in after_denial] == ["tool_result", "text"]
    assert after_denial[1]["text"] == REASON and "their reason follows" in after_denial[0]["content"]

    wiring.agent.request_handoff()
    seams = [e for e in await collect(wiring.agent.run()) if isinstance(e, SeamCommitted)]
    assert len(seams) == 1
    await collect(wiring.agent.run("why is build/ off limits?"))
    after_seam = stub.bodies()[-1]
    kinds = [b.get("type") for m in after_seam["messages"] if isinstance(m["content"], list) for b in m["content"]]
    assert kinds.count("tool_result") == 1  # only the handoff's; the denied call's result left
    assert REASON in texts_of(after_seam)  # the human's words, byte for byte, as their own block
    records = read_history(wiring.session.path).records
    denial = [r for r in records if r["kind"] == "denial"]
    assert denial and denial[0]["text"] == REASON and denial[0]["name"] == "bash"
    assert dump(seams[0].record)["before"]["text_blocks"] == dump(seams[0].record)["after"]["text_blocks"]


async def test_a_denial_without_words_adds_no_text(stub: Stub, project: Path) -> None:
    stub.script(call("I will clear the build folder so the next build starts clean.", "bash", command="rm -rf build"),
                say("ok"))
    wiring = stub.wire(project, permission_mode="ask")

    async def deny(tool: str, argument: str, why: str, args: object = None, rules: object = ()) -> Approval:
        return Approval(False, words="   ")

    wiring.agent.toolbox.approver = deny
    events = await collect(wiring.agent.run("clean up"))
    assert not [e for e in events if isinstance(e, DenialDelivered)]
    content: list[dict[str, Any]] = stub.bodies()[1]["messages"][-1]["content"]
    assert [b["type"] for b in content] == ["tool_result"] and "denied by the human" in content[0]["content"]


async def test_in_the_app_a_typed_denial_reason_reaches_the_request_after_a_seam(stub: Stub, project: Path) -> None:
    from rhapsody.core.toolbox.approval import HumanApprover
    from rhapsody.frontends.app.app import RhapsodyApp

    from tests.frontends.test_app_keys import asking, panel

    from tests.conftest import no_grace, until
    from tests.frontends.test_app import wait_idle

    typed = "  not build/ — it holds Ana's benchmark data ✓  "
    stub.script(
        call("I will clear the build folder so the next build starts from nothing.", "bash", command="rm -rf build"),
        say("Understood, build/ stays."), handoff_turn(), say("Noted."), say("build/ holds the benchmark data."),
    )
    approver = HumanApprover(grace=no_grace)
    wiring = stub.wire(project, approver=approver, permission_mode="ask")
    app = RhapsodyApp(wiring.agent, wiring.settings, approver)
    async with app.run_test(size=(100, 30)) as pilot:
        app.start_turn("clean up")
        await until(lambda: asking(app), pause=pilot.pause)
        panel(app).query_one("#reason").value = typed
        await pilot.press("enter")  # Enter denies with the words in the field
        await wait_idle(pilot)
        await app.surface.command("/handoff anyway")
        await wait_idle(pilot)
        app.start_turn("why not build/?")
        await wait_idle(pilot)
    assert wiring.session.conversation.seams, "the seam was committed"
    after_seam = stub.bodies()[-1]
    kinds = [b.get("type") for m in after_seam["messages"] if isinstance(m["content"], list) for b in m["content"]]
    assert kinds.count("tool_use") == 1 and typed in texts_of(after_seam)
