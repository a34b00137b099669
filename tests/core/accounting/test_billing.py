"""What the seams saved: every request priced with prompt caching, with and without seams."""

from __future__ import annotations

from rhapsody.core.session.records import dumped
import json
from pathlib import Path
from typing import Any

import pytest

from rhapsody.cli import main
from rhapsody.commands.slash import run_command
from rhapsody.core.agent import ops
from rhapsody.core.session.history import read_history
from rhapsody.loopback.script import call, say

from tests.conftest import Stub, collect
from tests.core.session.test_handoff_e2e import handoff_turn


def big(n: int) -> dict[str, Any]:
    return call(f"Step {n}: I will list a long sequence so the context grows like a real session does.",
                "bash", command=f"seq {n} {n + 900}")


async def test_stats_prices_the_session_beside_the_same_requests_without_seams(
    stub: Stub, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stub.script(*[big(n) for n in range(6)], say("six listed"), handoff_turn(), say("noted"),
                *[big(n) for n in range(6, 12)], say("six more listed"))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("list"))
    wiring.agent.request_handoff()
    await collect(wiring.agent.run())
    await collect(wiring.agent.run("list more"))
    assert main(["stats", "--json", "--cwd", str(project), "--cache-read-mult", "0.1"]) == 0
    figures = json.loads(capsys.readouterr().out)
    usage = [r for r in read_history(wiring.session.path).records if r["kind"] == "usage"]
    expected = sum(u["input_tokens"] + 1.25 * u["cache_creation_input_tokens"] + 0.1 * u["cache_read_input_tokens"]
                   for u in usage)
    assert figures["requests"] == len(usage) == 16 and figures["seams"] == 1
    assert figures["billed_input_tokens"] == round(expected)
    assert abs(figures["billed_input_tokens_simulated"] - expected) / expected < 0.02  # the cache model fits
    assert figures["billed_input_tokens_without_seams"] > figures["billed_input_tokens"] > 0
    assert figures["input_tokens_without_seams"] > figures["input_tokens"]
    assert 0 < figures["saving"] < 1 and figures["saving_per_further_request"] > 0
    line = run_command(wiring.agent, "/stats").text.splitlines()[-1]
    assert line.startswith("billed input (cache reads 0.05×, writes 1.25×):") and "without (saved" in line
    assert wiring.agent.submit(ops.UndoHandoff()).ok  # nothing held out any more: a further request saves nothing
    assert "each further request saves ~0)" in run_command(wiring.agent, "/stats").text


async def test_right_after_a_seam_a_further_request_already_saves_what_it_stripped(
    stub: Stub, project: Path
) -> None:
    stub.script(*[big(n) for n in range(3)], say("listed"), handoff_turn(), say("noted"))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("list"))
    wiring.agent.request_handoff()
    await collect(wiring.agent.run())  # the last request sent was the note's, before the strip
    saves = run_command(wiring.agent, "/stats").text.rsplit("each further request saves ~", 1)[1]
    assert int(saves.rstrip(")").replace(",", "")) > 50  # cache-read equivalents (0.05×) of ~3,400 stripped tokens; ~0 before


async def test_without_a_seam_both_figures_come_from_the_same_requests(
    stub: Stub, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stub.script(big(1), big(2), say("done"))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("list"))
    assert main(["stats", "--json", "--cwd", str(project)]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["seams"] == 0 and figures["saving_per_further_request"] == 0
    assert figures["billed_input_tokens_without_seams"] == figures["billed_input_tokens_simulated"]
    assert figures["cache_read_multiplier"] == 0.05  # claude-sonnet-5-5's rate from the price table
    line = run_command(wiring.agent, "/stats").text.splitlines()[-1]
    assert line.endswith("no seams yet, so nothing saved") and "more" not in line and "without" not in line


async def test_stats_prices_each_request_at_the_model_that_served_it(
    stub: Stub, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rhapsody.core.pricing import PRICES

    stub.script(big(1), say("done"), big(2), say("done again"))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("list"))
    wiring.session.switch_model("claude-haiku-4-5")
    await collect(wiring.agent.run("list again"))
    assert main(["stats", "--json", "--cwd", str(project)]) == 0
    figures = json.loads(capsys.readouterr().out)
    records = read_history(wiring.session.path).records
    served = [r["model"] for r in records if r["kind"] == "request"]
    usage = [r for r in records if r["kind"] == "usage"]
    assert served == ["claude-sonnet-5-5"] * 2 + ["claude-haiku-4-5"] * 2 == [b["model"] for b in stub.bodies()]
    expected = sum((u["input_tokens"] + 1.25 * u["cache_creation_input_tokens"]
                    + PRICES[m].read_mult * u["cache_read_input_tokens"]) * PRICES[m].input / 1e6
                   for m, u in zip(served, usage))
    assert figures["model"] == "claude-haiku-4-5" and figures["billed_input_usd"] == round(expected, 4)
    tokens = sum(u["input_tokens"] + 1.25 * u["cache_creation_input_tokens"]
                 + PRICES[m].read_mult * u["cache_read_input_tokens"] for m, u in zip(served, usage))
    assert sum(u["cache_read_input_tokens"] for u in usage) > 0  # the rates matter to the figure
    assert figures["billed_input_tokens"] == round(tokens)  # not every request at haiku's rate
    assert figures["cache_read_multiplier"] is None
    line = run_command(wiring.agent, "/stats").text.splitlines()[-1]
    assert line.startswith(f"billed input (cache reads at each request's model rate, writes 1.25×): {round(tokens):,}")


async def test_stats_labels_the_context_cut_apart_from_the_api_input(
    stub: Stub, project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    stub.script(*[big(n) for n in range(3)], say("listed"), handoff_turn(), say("noted"), big(9), say("more"))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("list"))
    wiring.agent.request_handoff()
    await collect(wiring.agent.run())
    await collect(wiring.agent.run("list more"))
    assert main(["stats", "--cwd", str(project)]) == 0
    out = capsys.readouterr().out
    assert "note added" in out and "strip took" in out and "reduction" not in out
    assert "API input: before → after" in out
    assert "it can be higher than before: it is not the context." in out
    from rhapsody.core.session.records import Seam
    from rhapsody.view import render

    seam = next(r for r in dumped(wiring.session.records) if r["kind"] == "seam")
    shown = render.seam_line(Seam.model_validate(seam)).split("context ", 1)[1].split(" tokens", 1)[0]  # "~A → ~B", as the divider says
    assert shown in out


async def test_stats_of_a_session_without_seams_says_so_instead_of_an_empty_table(
    stub: Stub, project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    stub.script(big(1), say("listed"))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("list"))
    assert main(["stats", "--cwd", str(project)]) == 0
    out = capsys.readouterr().out
    assert f"no seams in session {wiring.session.id}" in out
    assert "seams of session" not in out and "context ~tokens" not in out  # no header without rows
    assert "requests 2, tool calls 1" in out and "no seams yet, so nothing saved" in out
