"""The cache lifetime that pays: the 1-hour cache once the session's pauses make it cheaper, on the wire,
in the request records, and the status bar saying when the cache has gone cold."""

from __future__ import annotations

from rhapsody.core.session.records import parsed
from rhapsody.core.session.records import dumped
import time
from pathlib import Path
from typing import Any

import pytest

from rhapsody.core.accounting.cache_ttl import billed, choose
from rhapsody.core.session.session_figures import figures
from rhapsody.core.session.history import read_history
from rhapsody.config.settings import Settings
from rhapsody.frontends.app.app import RhapsodyApp
from rhapsody.loopback.script import say
from rhapsody.wiring import build

from tests.conftest import SANDBOX, Stub, collect
from tests.core.session.test_handoff_e2e import step
from tests.frontends.test_app import wait_idle
from tests.test_cli import rhapsody
from tests.transcripts import claude_paused_session, dump


def controls(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every cache_control of a request body (system's, then the newest message's)."""
    found = [b["cache_control"] for b in body["system"] if "cache_control" in b]
    last = body["messages"][-1]["content"]
    return found + [b["cache_control"] for b in last if isinstance(b, dict) and "cache_control" in b]


def test_the_rule_prices_both_lifetimes_over_the_requests_so_far() -> None:
    steady = [(0.0, 10_000), (30.0, 11_000), (60.0, 12_000)]  # no pause: the 1-hour writes only cost more
    assert billed(steady, "5m") == pytest.approx(10_000 * 1.25 + (10_000 * 0.1 + 1_000 * 1.25) + (11_000 * 0.1 + 1_000 * 1.25))
    assert billed(steady, "1h") == pytest.approx(10_000 * 2 + (10_000 * 0.1 + 1_000 * 2) + (11_000 * 0.1 + 1_000 * 2))
    assert choose(steady) == "5m" and choose([]) == "5m"
    paused = [(0.0, 50_000), (900.0, 51_000), (1800.0, 52_000)]  # a person back every 15 minutes
    assert billed(paused, "5m") == pytest.approx((50_000 + 51_000 + 52_000) * 1.25)
    assert billed(paused, "1h") == pytest.approx(50_000 * 2 + 50_000 * 0.1 + 1_000 * 2 + 51_000 * 0.1 + 1_000 * 2)
    assert choose(paused) == "1h"
    assert choose([(0.0, 50_000), (4000.0, 51_000)]) == "5m"  # past an hour both re-write: the cheaper writes win


def test_cold_means_past_the_lifetime_the_last_request_was_sent_with() -> None:
    five = figures(parsed([{"kind": "request", "ts": 1000.0}]))
    assert not five.cache_cold(1299.0) and five.cache_cold(1301.0)
    assert not figures(parsed([{"kind": "request", "ts": 1000.0, "cache_ttl": "1h"}])).cache_cold(1301.0)
    assert not figures([]).cache_cold(5000.0)


async def test_a_session_with_long_pauses_goes_out_with_the_1_hour_cache(stub: Stub, project: Path,
                                                                           tmp_path: Path) -> None:
    source = dump(claude_paused_session(turns=3, calls=6), tmp_path / "paused.jsonl")
    assert rhapsody("import", str(source), cwd=project).returncode == 0
    history = next((project / ".rhapsody" / "history").glob("*.jsonl"))
    stub.script(step(1), say("Done."))
    settings = Settings(permission_mode="yolo", sandbox=SANDBOX, handoff_at_share="off", seam_policy="threshold")
    wiring = build(project, settings, stub.model(), "claude-sonnet-5-5", resume=history.stem)
    await collect(wiring.agent.run("one more batch"))
    assert len(stub.bodies()) == 2
    assert [c.get("ttl") for b in stub.bodies() for c in controls(b)] == ["1h"] * 4  # both breakpoints, both requests
    sent = [r for r in read_history(history).records if r["kind"] == "request"][-2:]
    assert [r.get("cache_ttl") for r in sent] == ["1h", "1h"]


async def test_a_steady_session_keeps_the_5_minute_cache_and_a_setting_fixes_the_hour(stub: Stub, project: Path) -> None:
    stub.script(step(1), say("Done."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("print a marker"))
    assert all("ttl" not in c for b in stub.bodies() for c in controls(b)) and len(stub.bodies()) == 2
    assert not any("cache_ttl" in r for r in dumped(wiring.session.records) if r["kind"] == "request")
    stub.server.requests.clear()
    stub.script(say("Hello."))
    fixed = stub.wire(project, cache_ttl="1h")
    await collect(fixed.agent.run("hello"))
    assert [c.get("ttl") for c in controls(stub.bodies()[0])] == ["1h", "1h"]


async def test_the_status_bar_says_when_the_cache_has_gone_cold(stub: Stub, project: Path, tmp_path: Path) -> None:
    source = dump(claude_paused_session(turns=2, calls=3), tmp_path / "paused.jsonl")
    assert rhapsody("import", str(source), cwd=project).returncode == 0
    history = next((project / ".rhapsody" / "history").glob("*.jsonl"))
    settings = Settings(permission_mode="yolo", sandbox=SANDBOX, handoff_at_share="off", seam_policy="threshold")
    wiring = build(project, settings, stub.model(), "claude-sonnet-5-5", resume=history.stem)
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_idle(pilot)
        assert "cache cold" in str(app.query_one("#status").render())  # its last request was in 2025
        stub.script(say("Back."))
        app.start_turn("are you there")
        await wait_idle(pilot)
        status = str(app.query_one("#status").render())
        assert "cache cold" not in status and "cache " in status
    assert time.time() - dumped(wiring.session.records)[-1]["ts"] < 60


def test_the_cache_model_keeps_a_1_hour_entry_past_five_minutes_and_bills_its_write_at_2x() -> None:
    from rhapsody.core.accounting.billing import CacheModel
    from rhapsody.core.session.messages import Message, TextBlock

    messages = [Message(role="user", content=[TextBlock(text="x" * 3947)])]  # 4,000 characters of JSON: 1,000 tokens
    five, hour = CacheModel([[]], 0.1), CacheModel([[]], 0.1)  # a head of one token (no tools: `[]`)
    assert five.price(0.0, messages) == (1001, 1251.25) and hour.price(0.0, messages, ttl=3600) == (1001, 2002.0)
    assert five.price(900.0, messages) == (1001, 1251.25)  # expired: written again
    assert hour.price(900.0, messages, ttl=3600) == (1001, pytest.approx(100.1))  # read back


def test_the_what_if_prices_each_policy_with_the_lifetime_rhapsody_would_choose(project: Path, tmp_path: Path) -> None:
    import json

    from tests.transcripts import claude_session

    paused = dump(claude_paused_session(turns=4, calls=12), tmp_path / "paused.jsonl")
    assert rhapsody("import", str(paused), cwd=project).returncode == 0
    report = json.loads(rhapsody("stats", "--what-if", "checkpoint", "--json", cwd=project).stdout)
    base, (check,) = report["without_seams"], report["policies"]
    assert base["one_hour_requests"] > 0 and base["billed_ttl_choice"] < base["billed_input_tokens"]
    assert check["billed_ttl_choice"] <= check["billed_input_tokens"] and check["one_hour_requests"] > 0
    steady = tmp_path / "steady"
    steady.mkdir()
    assert rhapsody("import", str(dump(claude_session(60), tmp_path / "steady.jsonl")), cwd=steady).returncode == 0
    flat = json.loads(rhapsody("stats", "--what-if", "every=25", "--json", cwd=steady).stdout)["without_seams"]
    assert flat["one_hour_requests"] == 0 and flat["billed_ttl_choice"] == flat["billed_input_tokens"]


def test_one_report_holds_the_checkpoint_with_its_lifetime_choice_its_own_prompt_and_the_alternatives(
        project: Path, tmp_path: Path) -> None:
    import json

    paused = dump(claude_paused_session(turns=4, calls=12), tmp_path / "paused.jsonl")
    assert rhapsody("import", str(paused), cwd=project).returncode == 0
    report = json.loads(rhapsody("stats", "--what-if", "checkpoint", "--json", cwd=project).stdout)
    (check,) = report["policies"]
    assert check["label"] == "checkpoint" and check["seams"] > 0 and check["shelves"] == 0
    assert check["one_hour_requests"] > 0 and check["billed_ttl_choice"] < check["billed_input_tokens"]
    assert check["own_prompt"]["billed_input_tokens"] < check["billed_input_tokens"]  # the source's prefix is larger
    compaction, clearing = report["alternatives"]
    assert compaction["label"] == "source's compaction" and clearing["own_prompt"]["billed_input_tokens"] > 0
    assert not {"billed_ttl_choice", "one_hour_requests"} & (set(compaction) | set(clearing))  # seam rows only
    text = rhapsody("stats", "--what-if", "checkpoint", cwd=project).stdout
    header = next(line for line in text.splitlines() if line.startswith("policy"))
    assert header.index("1h cache where it pays") < header.index("rhapsody's prompt")
    row = next(line for line in text.splitlines() if line.startswith("checkpoint"))
    assert f"{check['billed_ttl_choice']:,} ({check['one_hour_requests']:,})" in row
    assert f"{check['own_prompt']['billed_input_tokens']:,}" in row
