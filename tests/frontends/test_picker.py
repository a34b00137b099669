"""The resume picker reads the history folder the way the history reader does."""

from __future__ import annotations

import os
from pathlib import Path

from rhapsody.loopback.script import say

from tests.conftest import Stub, collect


async def test_a_pipe_named_like_a_history_file_does_not_hang_the_picker(stub: Stub, project: Path) -> None:
    from rhapsody.frontends.app.picker import SessionPicker

    stub.script(say("The total lives in report.py."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("where is the total computed?"))
    os.mkfifo(project / ".rhapsody" / "history" / "99991231-235959-ffffff.jsonl")  # the newest name; an archive can carry one
    picker = SessionPicker(project)  # returns at once: never opens the pipe for a blocking read
    assert [p.stem for p in picker.paths] == [wiring.session.id]
    async with picker.run_test(size=(100, 24)):
        listing = picker.query_one("OptionList")
        assert listing.option_count == 1 and "where is the total" in str(listing.get_option_at_index(0).prompt)
