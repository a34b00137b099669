"""`--what-if checkpoint`: the replay places the live policy's seams (natural boundaries, where they pay, the
share as the net) on an imported session with long human pauses, commits and test runs, and prices them."""

from __future__ import annotations

from rhapsody.core.session.records import parse
from rhapsody.core.session.records import parsed
import json
from pathlib import Path
from typing import Any

from rhapsody.core.accounting import whatif
from rhapsody.core.session.history import read_history
from rhapsody.core.accounting.natural_seam import Boundaries
from rhapsody.core.accounting.whatif import NoteCost, calibrate, parse_policy

from tests.core.accounting.test_whatif import rhapsody
from tests.transcripts import _Claude, claude_paused_session, claude_session, dump

NOTE = NoteCost(2500, 600, "default")


def imported(project: Path, tmp_path: Path, lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    source = dump(lines, tmp_path / "session.jsonl")
    assert rhapsody("import", str(source), cwd=project).returncode == 0
    return read_history(next((project / ".rhapsody" / "history").glob("*.jsonl"))).records


def boundary_requests(records: list[dict[str, Any]]) -> set[float]:
    """The times of the requests that follow a natural boundary (what the policy may seam before)."""
    fold, seen, times = Boundaries(), False, set()
    for record in records:
        if record["kind"] == "request":
            if seen:
                times.add(float(record["ts"]))
            seen = False
        elif fold.see(parse(record)) is not None:
            seen = True
    return times


def test_checkpoint_seams_fall_only_at_boundaries_and_bill_less_than_every_fixed_count(
        project: Path, tmp_path: Path) -> None:
    records = imported(project, tmp_path, claude_paused_session(turns=6, calls=20))
    fit = calibrate(parsed(records), 0.1)
    sent, seams, _ = whatif._plan(parsed(records), parse_policy("checkpoint"), whatif.note_cost([parsed(records)]),
                                  200_000, fit, 0.1)
    asked = [s.ts for s, nxt in zip(sent, sent[1:]) if nxt.ts == s.ts + 1]  # a seam's two requests: ts, ts + 1
    assert seams == len(asked) >= 3
    assert set(asked) <= boundary_requests(records)  # never mid-task
    result = rhapsody("stats", "--what-if", "sweep", "--json", cwd=project)
    report = json.loads(result.stdout)
    rows = {p["label"]: p for p in report["policies"]}
    assert rows["checkpoint"]["seams"] == seams
    assert rows["checkpoint"]["billed_input_tokens"] < report["without_seams"]["billed_input_tokens"] * 0.7
    assert all(rows["checkpoint"]["billed_input_tokens"] <= rows[f"every={n}"]["billed_input_tokens"]
               for n in (10, 50, 100))
    text = rhapsody("stats", "--what-if", "checkpoint", cwd=project).stdout
    assert "\ncheckpoint " in text


def test_a_session_without_boundaries_gets_only_the_net(project: Path, tmp_path: Path) -> None:
    records = imported(project, tmp_path, claude_session(200))  # one prompt, 200 calls, no commit or test run
    fit = calibrate(parsed(records), 0.1)
    check = whatif.run(parsed(records), parse_policy("checkpoint"), NOTE, 200_000, 0.1, fit)
    share = whatif.run(parsed(records), parse_policy("share=0.4"), NOTE, 200_000, 0.1, fit)
    assert check.seams == share.seams >= 1 and check.billed_input_tokens == share.billed_input_tokens
    assert parse_policy("checkpoint=0.6").label == "checkpoint=0.6"


def a_large_result_then_the_end(calls: int = 60) -> list[dict[str, Any]]:
    """One prompt, `calls` calls with one-line results, then one whole file read (~40k tokens), the turn's end,
    and the person's last message with its one answer: the turn end comes a request after the large result."""
    c = _Claude(3, model="claude-opus-4-6", autocompact=None)
    c.user("Check each value, then read the generated table.")
    for i in range(calls):
        call = c.call(i)
        c.assistant([{"type": "text", "text": f"Step {i}: I will check value_{i}."}, call])
        c.result(call, f"value_{i}: ok")
    read = c.call(calls, "Read", file_path="/home/ana/proj/table.txt")
    c.assistant([{"type": "text", "text": "I will read the generated table."}, read])
    c.result(read, "\n".join(f"{n:6d}  row {n} of the table, every column filled in" for n in range(3_300)))
    c.assistant([{"type": "text", "text": "Every value checks out and the table is complete."}], stop="end_turn")
    c.clock.tick(60)
    c.user("Thanks, that is all.")
    c.assistant([{"type": "text", "text": "You are welcome."}], stop="end_turn")
    return c.lines


def test_a_turn_end_right_after_a_large_result_does_not_seam_for_requests_that_never_come(
        project: Path, tmp_path: Path) -> None:
    """The old guess of the requests ahead (as many as since the last seam: 62 here) seamed at this turn end
    for the 40k-token read that had just come, and the session ended a request later: the seam cost more
    than it saved. The horizon counts what the traffic has already been carried (about 2 requests' worth:
    the read one request ago, the one-line results for their share), so the seam waits; on the old code this
    replay places one seam and bills more than no seams."""
    records = parsed(imported(project, tmp_path, a_large_result_then_the_end()))
    fit = calibrate(records, 0.1)
    note = whatif.note_cost([records])
    none = whatif.run(records, None, note, 200_000, 0.1, fit)
    check = whatif.run(records, parse_policy("checkpoint"), note, 200_000, 0.1, fit)
    assert check.seams == 0 and check.billed_input_tokens <= none.billed_input_tokens
    forced = whatif.run(records, parse_policy("every=61"), note, 200_000, 0.1, fit)  # a seam at that turn end
    assert forced.seams == 1 and forced.billed_input_tokens > none.billed_input_tokens  # it would not have paid
