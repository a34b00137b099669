"""The second window, through the real loop on the loopback server with a small window: a session far
longer than the window holds in words goes on turn after turn; the oldest seams' words leave the context
as whole segments, their field notes stay, and recall finds a word from the first turn."""

from __future__ import annotations

from rhapsody.core.session.records import dumped
import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from rhapsody.core.events import Failed, SeamCommitted
from rhapsody.core.session.recall import search
from rhapsody.core.session.shelf import KEEP_SEAMS
from rhapsody.loopback.script import call, say
from rhapsody.tools.handoff import recall_text

from tests.conftest import Stub, collect
from tests.core.session.test_handoff_e2e import NOTE

WINDOW = 12_000
"""The loopback's window in its own count (a token per four characters of each part's JSON)."""
TURNS = 36
CALLS = 3
ASKED = re.compile(r"Turn (\d+): read app.py")


def word(turn: int) -> str:
    """A word found in one turn's words only (the human's message and the agent's answer)."""
    return f"quokka{turn:03d}zebra"


class Worker:
    """An agent that works without end: each turn a few narrated reads, then an answer that repeats the human's
    word; it writes its field note when asked (by the handoff request or at the window), then ends its turn."""

    def __init__(self, thinking: bool = False) -> None:
        self.lock = threading.Lock()
        self.calls = 0
        self.thinking = thinking

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        turn = self._turn(body)
        if self.thinking:  # signed by the loopback, which refuses a request that changed what one was bound to
            turn = {**turn, "content": [{"type": "thinking", "thinking": "what next"}, *turn["content"]]}
        return turn

    def _turn(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            last = body["messages"][-1]
            blocks = last["content"] if isinstance(last["content"], list) else [{"type": "text", "text": last["content"]}]
            text = " ".join(b.get("text", "") for b in blocks if b.get("type") == "text")
            if "Micro-handoff requested" in text or "call the `micro_handoff` tool" in text:
                return {"content": [{"type": "text", "text": "Writing my field note now, as the harness asked."},
                                    {"type": "tool_use", "name": "micro_handoff", "input": NOTE}]}
            if any(b.get("type") == "tool_result" and "Field note, seam" in json.dumps(b) for b in blocks):
                return say("Note written.")
            turn = max((int(n) for n in ASKED.findall(json.dumps(body["messages"]))), default=0)
            done = sum(1 for m in body["messages"][-2 * CALLS:] if m["role"] == "assistant"
                       and any(b.get("type") == "tool_use" and b.get("name") == "read_file" for b in m["content"]))
            if done >= CALLS:
                return say(f"Turn {turn} is done: I read app.py {CALLS} times and {word(turn)} is the word you "
                           "gave me; the add function still subtracts, so the bug is at app.py:2 " + "as said " * 40)
            self.calls += 1
            return call(f"Step {self.calls}: I will read app.py to look at the add function once more, expecting "
                        "the same two lines as before.", "read_file", path="app.py")


@pytest.mark.parametrize("thinking", [False, True])
async def test_a_session_longer_than_the_window_goes_on_and_recalls_its_first_words(stub: Stub, project: Path,
                                                                                     thinking: bool) -> None:
    stub.server.window = WINDOW
    stub.responder = Worker(thinking)
    wiring = stub.wire(project, context_window=WINDOW, thinking=thinking)
    events = []
    for turn in range(1, TURNS + 1):
        events += await collect(wiring.agent.run(f"Turn {turn}: read app.py and remember the word {word(turn)}. "
                                                 + "Keep going with the same care as before. " * 12))
    assert not [e for e in events if isinstance(e, Failed)]
    session = wiring.session
    records = dumped(session.records)
    shelves = [r for r in records if r["kind"] == "shelve"]
    seams = [r for r in records if r["kind"] == "seam"]
    assert shelves and len(seams) > KEEP_SEAMS + 2
    assert any(isinstance(e, SeamCommitted) and e.shelved for e in events)
    bodies = stub.bodies()
    assert all(stub.server.prompt_tokens(b) <= WINDOW for b in bodies)  # none refused: every request fitted
    assert thinking == any('"type": "thinking"' in json.dumps(b["messages"]) for b in bodies)  # and sent back
    assert len({json.dumps([b["system"], b.get("tools")]) for b in bodies}) == 1  # system and tools byte-identical
    latest = bodies[-1]
    assert latest["messages"][0]["content"][0]["text"].startswith("[rhapsody] Second window:")
    assert word(1) not in json.dumps(latest["messages"])  # the first hour's words left the context...
    gone = shelves[-1]["notes_seams"]  # the notes leave only once they alone fill half the window
    for seam in seams[gone:]:  # ...and every later seam's field note stayed, in place
        assert f"Field note, seam {seam['seam']} " in json.dumps(latest["messages"])
    hits = search(session.path, word(1))
    assert hits and hits[0].id.startswith(f"{session.id}:words-")
    assert word(1) in recall_text(project, session, word(1), all_sessions=False)
    assert word(TURNS) in json.dumps(latest["messages"])  # the newest words are all there
