"""What a handoff added counts the handoff's own blocks only: a tool's output that came in while the
handoff was wanted is the context it was asked in, not the note's cost; the note's size is in stats."""

from __future__ import annotations

from rhapsody.core.session.records import dumped
import json
from pathlib import Path

import pytest

from rhapsody.cli import main
from rhapsody.core.session.context import measure_messages
from rhapsody.core.events import ToolStarted
from rhapsody.core.session.messages import Message, TextBlock
from rhapsody.core.accounting.seam_cost import of_session
from rhapsody.loopback.script import say

from tests.conftest import Stub, collect
from tests.core.session.test_handoff_e2e import handoff_turn, step
from tests.core.test_window import big


async def test_output_that_ran_while_the_handoff_was_wanted_is_not_counted_as_what_it_added(
        stub: Stub, project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stub.script(step(1), big(2), handoff_turn(), say("Noted."), step(3), say("Printed."))
    wiring = stub.wire(project, handoff_at_share="off")
    async for event in wiring.agent.run("print, then read a long block"):
        if isinstance(event, ToolStarted) and "2222" in str(event.call.input.get("command")):
            wiring.agent.request_handoff()  # pressed while the 16,000-character output is being made
    session = wiring.session
    seam = next(r for r in dumped(session.records) if r["kind"] == "seam")
    added = seam["before"]["est_tokens"] - seam["asked_est_tokens"]
    # By hand: the context just before the seam, less the handoff's own part (the ask text that followed the
    # block's result, the note call and its result, the agent's closing line).
    messages = session.conversation.messages[:seam["boundary"]]
    ask_at = next(i for i, m in enumerate(messages) if any(isinstance(b, TextBlock) and "micro_handoff" in b.text
                                                           for b in m.content))
    results = Message(role="user", content=[b for b in messages[ask_at].content if not isinstance(b, TextBlock)])
    without = measure_messages(session.spec, [*messages[:ask_at], results])[1]
    assert seam["asked_est_tokens"] == without
    assert 0 < added < 2000 < 4000 < seam["before"]["est_tokens"] - seam["after"]["est_tokens"]
    await collect(wiring.agent.run("one more"))
    assert of_session(session).adds == added  # the would-it-pay estimate uses the honest figure
    assert main(["stats", "--json", "--cwd", str(project)]) == 0
    row = json.loads(capsys.readouterr().out)["seam_rows"][0]
    note = (project / seam["note_path"]).read_bytes()
    assert row["note_bytes"] == len(note) > 300 and row["asked_est_tokens"] == without
    assert main(["stats", "--cwd", str(project)]) == 0
    text = capsys.readouterr().out
    assert "note bytes" in text and f"{len(note):,}" in text and f"~{added:,}" in text
