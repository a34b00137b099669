"""One fold of the figures: every consumer reports the cost the session's history adds up to,
each request priced at the model that served it, across a `/model` switch."""

from __future__ import annotations

from rhapsody.core.session.records import dumped
import dataclasses
import io
import json
from pathlib import Path

import pytest

from rhapsody.commands.slash import stats_text
from rhapsody.core.pricing import cost
from rhapsody.frontends.headless import result_event, run_headless
from rhapsody.loopback.script import say
from rhapsody.commands.stats import print_stats
from rhapsody.frontends.app.status import status_line

from tests.conftest import MODEL as EXPENSIVE  # the model the stub wires first
from tests.conftest import Stub, collect

CHEAP = "claude-haiku-5-5"


async def test_a_model_switch_leaves_every_cost_figure_equal_and_the_limit_counts_the_dearer_past(
        stub: Stub, project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stub.script(say("first answer " * 300), say("second answer"), say("never sent"))
    wiring = stub.wire(project)
    session = wiring.session
    assert session.spec.model == EXPENSIVE
    await collect(wiring.agent.run("a long question " * 400))
    session.switch_model(CHEAP)
    await collect(wiring.agent.run("and a short one"))
    usages = [r for r in dumped(session.records) if r["kind"] == "usage"]
    assert len(usages) == 2
    by_hand = cost(EXPENSIVE, usages[0]) + cost(CHEAP, usages[1])
    at_current = cost(CHEAP, {k: usages[0][k] + usages[1][k] for k in session.figures.usage})
    assert by_hand > 3 * at_current  # the switch matters: a fold at the current model would be far off
    shown = f"${by_hand:.2f}"

    assert session.figures.cost == pytest.approx(by_hand)
    assert shown in status_line(session.figures, session, "", "idle", 200)
    assert f"cost {shown}" in stats_text(session)
    assert result_event(wiring.agent, 0, session.records)["cost_usd"] == pytest.approx(by_hand, abs=1e-6)
    print_stats(project, session.id, as_json=True)
    assert json.loads(capsys.readouterr().out)["cost_usd"] == pytest.approx(by_hand, abs=1e-6)

    # The limit sits between the cost at the current model and the cost as it happened: it must stop.
    limit = (by_hand + at_current) / 2
    wiring.agent.policy = dataclasses.replace(wiring.agent.policy, max_cost_usd=limit)
    err = io.StringIO()
    assert await run_headless(wiring.agent, "a third", out=io.StringIO(), err=err) == 3
    assert len(stub.bodies()) == 2
    recorded = [r for r in dumped(session.records) if r["kind"] == "limit"]
    assert recorded and recorded[-1]["value"] == pytest.approx(by_hand, abs=1e-4)
    assert f"${by_hand:.4f} spent" in err.getvalue()
