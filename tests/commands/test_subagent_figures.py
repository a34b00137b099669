"""`rhapsody stats` and the export count what a sub-agent spent, at its own model, and what it kept out of the
parent's context, priced as the parent's cache would have carried it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rhapsody.cli import main
from rhapsody.core.session.history import read_history
from rhapsody.core.pricing import WRITE_5M_MULT, price_of
from rhapsody.core.session.session_figures import figures
from rhapsody.loopback.script import say

from tests.conftest import MODEL, Stub, collect
from tests.core.agent.test_subagents import FOUND, child_read, delegate

CHEAP = "claude-haiku-4-5"


async def test_stats_and_the_export_count_the_sub_agents_spend_and_what_it_kept_out(
        stub: Stub, project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stub.script(delegate(model=CHEAP), child_read(), say(FOUND), say("Found."), say("Nothing more."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("is add right?"))
    await collect(wiring.agent.run("anything else?"))
    records = read_history(wiring.session.path).records
    (ended,) = [r for r in records if r["kind"] == "subagent" and r["state"] == "done"]
    child = figures(read_history(project / ".rhapsody" / "history" / f"{ended['session']}.jsonl", typed=True).typed)
    assert main(["stats", wiring.session.id, "--json", "--cwd", str(project)]) == 0
    got = json.loads(capsys.readouterr().out)["subagents"]
    assert got["subagents"] == 1 and got["tool_calls"] == 1
    assert got["tokens"] == child.tokens_spent and got["cost_usd"] == pytest.approx(child.cost, abs=1e-6)
    assert ended["model"] == CHEAP and child.model == CHEAP and child.cost > 0  # priced at its own model
    kept = ended["kept_out_tokens"]
    assert kept > 0 and got["kept_out_tokens"] == kept and got["carried_by"] == 2  # the parent's next two requests
    price = price_of(MODEL)[0]
    expected = kept * price.input * (WRITE_5M_MULT + price.read_mult) / 1e6
    assert got["kept_out_usd"] == pytest.approx(expected, abs=1e-6)
    assert main(["stats", wiring.session.id, "--cwd", str(project)]) == 0
    assert f"sub-agents 1: 1 tool calls, {child.tokens_spent:,} tokens" in capsys.readouterr().out
    assert main(["export", wiring.session.id, "--md", "-o", "-", "--cwd", str(project)]) == 0
    page = capsys.readouterr().out
    assert f"kept out of this context: ~{kept:,} tokens" in page and "⤶ sub-agent sa1 done" in page
