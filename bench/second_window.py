"""The second window on a session of a few thousand calls, through the real loop on the loopback server.

    .venv/bin/python bench/second_window.py [--calls 3000] [--window 40000] [--file-kb 2]

The agent of tests/core/session/test_second_window.py (`Worker`: each turn the human gives a word, the agent
reads a file three times and answers with the word; it writes its field note when asked) works for
`--calls` tool calls against a loopback server that refuses any request over `--window` tokens, with
rhapsody's own `context_window` set to the same. The bench prints the turns, seams and shelves, the
largest request against the window, whether any turn failed, and whether `recall` finds the first
turn's word (which left the context long before the end).
"""

from __future__ import annotations

from rhapsody.core.session.records import dumped
import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rhapsody.core.events import Failed  # noqa: E402
from rhapsody.core.session.recall import search  # noqa: E402

from tests.conftest import Stub, collect, make_project  # noqa: E402
from tests.core.session import test_second_window as fixture  # noqa: E402


async def run(calls: int, window: int, file_kb: int) -> dict[str, object]:
    """Drive the session until `calls` tool calls ran; the figures the bench prints."""
    stub = Stub()
    try:
        stub.server.window = window
        worker = fixture.Worker()
        stub.responder = worker
        with tempfile.TemporaryDirectory() as tmp:
            project = make_project(Path(tmp) / "proj")
            (project / "app.py").write_text("def add(a, b):\n    return a - b\n" + "# padding line\n" * (file_kb * 68))
            wiring = stub.wire(project, context_window=window, sandbox="off")
            failed, turn, start = 0, 0, time.monotonic()
            while worker.calls < calls:
                turn += 1
                events = await collect(wiring.agent.run(f"Turn {turn}: read app.py and remember the word "
                                                        f"{fixture.word(turn)}. " + "Keep going with care. " * 12))
                failed += sum(1 for e in events if isinstance(e, Failed))
            records, bodies = dumped(wiring.session.records), stub.bodies()
            found = search(wiring.session.path, fixture.word(1))
            return {
                "calls": worker.calls, "turns": turn, "requests": len(bodies),
                "seams": sum(1 for r in records if r["kind"] == "seam"),
                "shelves": sum(1 for r in records if r["kind"] == "shelve"),
                "notes_shelved_up_to_seam": max((r.get("notes_seams", 0) for r in records if r["kind"] == "shelve"),
                                                default=0),
                "largest_request_tokens": max(stub.server.prompt_tokens(b) for b in bodies), "window": window,
                "failed_turns": failed,
                "first_word_in_last_request": fixture.word(1) in json.dumps(bodies[-1]["messages"]),
                "recall_finds_first_word": bool(found and ":words-" in found[0].id),
                "seconds": round(time.monotonic() - start, 1),
            }
    finally:
        stub.server.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--window", type=int, default=40_000)
    parser.add_argument("--file-kb", type=int, default=2)
    ns = parser.parse_args()
    print(json.dumps(asyncio.run(run(ns.calls, ns.window, ns.file_kb)), indent=1))


if __name__ == "__main__":
    main()
