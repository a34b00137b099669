"""The rolling context policy: batch cuts by inline score, every word kept, valid requests, a still prefix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rhapsody.core.events import ContextPruned
from rhapsody.core.session.messages import Message
from rhapsody.core.session.rolling import RollingPolicy, plan_cut
from rhapsody.core.session.strip import authored_texts
from rhapsody.loopback.script import say
from rhapsody.tools.handoff import recall_text

from tests.conftest import Stub, collect


def round_turn(n: int, keep_previous: int) -> dict[str, Any]:
    text = f"[keep {keep_previous}] Round {n}: I will print marker {n} so the policy has a result to keep or drop."
    return {"content": [{"type": "text", "text": text},
                        {"type": "tool_use", "name": "bash", "input": {"command": f"echo rolling-marker-{n}"}}]}


async def test_long_session_cuts_in_batches_keeps_every_word_and_stays_valid(stub: Stub, project: Path) -> None:
    keeps = [3 if n % 5 == 0 else 0 for n in range(24)]
    stub.script(*[round_turn(n, keeps[n - 1] if n else 1) for n in range(24)], say("All rounds done."))
    wiring = stub.wire(project, context="rolling")
    events = await collect(wiring.agent.run("run 24 rounds"))
    cuts = [e.record for e in events if isinstance(e, ContextPruned)]
    assert 1 <= len(cuts) <= 2
    assert all(r.status == 200 for r in stub.server.requests)
    bodies = stub.bodies()
    final = bodies[-1]["messages"]
    all_texts = authored_texts(wiring.session.conversation.messages)
    assert authored_texts(Message.from_api(m) for m in final) == all_texts[:-1]
    kept = {b["input"]["command"] for m in final if isinstance(m["content"], list) for b in m["content"]
            if b.get("type") == "tool_use"}
    assert {"echo rolling-marker-0", "echo rolling-marker-5", "echo rolling-marker-10"} <= kept
    assert "echo rolling-marker-1" not in kept and "echo rolling-marker-23" in kept
    changed = 0
    for prev, cur in zip(bodies, bodies[1:]):
        old = [json.dumps(m, sort_keys=True) for m in prev["messages"][:-1]]
        new = [json.dumps(m, sort_keys=True) for m in cur["messages"][: len(old)]]
        changed += old != new
    assert changed == len(cuts), "the prefix moved only at cuts"
    assert "rolling-marker-1" in recall_text(project, wiring.session, "rolling-marker-1", all_sessions=False)


def test_no_cut_until_working_memory_overflows_its_batch() -> None:
    messages: list[Message] = [Message.from_api({"role": "user", "content": "go"})]
    for n in range(15):
        messages.append(Message.from_api({"role": "assistant", "content": [
            {"type": "text", "text": f"round {n}"}, {"type": "tool_use", "id": f"t{n}", "name": "bash", "input": {}}]}))
        messages.append(Message.from_api({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": "x"}]}))
    policy = RollingPolicy(short=3, working=6, batch=6)
    assert plan_cut(messages, set(), policy) == []  # 12 candidates: full, not over
    messages.append(Message.from_api({"role": "assistant", "content": [
        {"type": "text", "text": "round 15"}, {"type": "tool_use", "id": "t15", "name": "bash", "input": {}}]}))
    cut = plan_cut(messages, set(), policy)
    assert len(cut) == 7 and "t0" in cut and "t12" not in cut


def _rounds(n: int, first: int = 0, keep: dict[int, int] | None = None) -> list[Message]:
    out: list[Message] = []
    for k in range(first, first + n):
        score = (keep or {}).get(k - 1)
        text = (f"[keep {score}] " if score is not None else "") + f"round {k}"
        out.append(Message.from_api({"role": "assistant", "content": [
            {"type": "text", "text": text}, {"type": "tool_use", "id": f"t{k}", "name": "bash", "input": {}}]}))
        out.append(Message.from_api({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{k}", "content": "x"}]}))
    return out


def test_a_round_scored_3_is_never_pruned_however_old() -> None:
    messages = [Message.from_api({"role": "user", "content": "go"}), *_rounds(60, keep={0: 3})]
    pruned: set[str] = set()
    for end in range(3, len(messages) + 1, 2):
        pruned |= set(plan_cut(messages[:end], pruned, RollingPolicy()))
    assert "t0" not in pruned and "t1" in pruned and len(pruned) > 30


async def test_after_a_seam_working_memory_counts_only_visible_rounds(stub: Stub, project: Path) -> None:
    from tests.core.session.test_handoff_e2e import handoff_turn

    stub.script(*[round_turn(n, 1) for n in range(10)], say("ten done"), handoff_turn(), say("noted"),
                *[round_turn(n, 1) for n in range(10, 24)], say("fourteen more done"))
    wiring = stub.wire(project, context="rolling")
    first = await collect(wiring.agent.run("ten rounds"))
    wiring.agent.request_handoff()
    await collect(wiring.agent.run())
    second = await collect(wiring.agent.run("fourteen more"))
    assert not [e for e in first + second if isinstance(e, ContextPruned)]  # 14 visible: 3 short + 11 working < 6 + 6 + 1
    final = stub.bodies()[-1]["messages"]
    calls = [b["name"] for m in final if isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_use"]
    assert calls == ["micro_handoff"] + ["bash"] * 14


async def test_a_project_replaces_the_scoring_criteria_with_a_regular_file_only(stub: Stub, project: Path, tmp_path: Path) -> None:
    folder = project / ".rhapsody" / "prompts"
    folder.mkdir(parents=True)
    (folder / "rolling.md").write_text("Score 3 anything about the billing schema.\n")
    stub.script(say("hi"))
    await collect(stub.wire(project, context="rolling").agent.run("hello"))
    system = stub.bodies()[-1]["system"][0]["text"]
    assert "Score 3 anything about the billing schema." in system and "How to score" not in system
    assert "kept until the next micro-handoff" in system
    outside = tmp_path / "outside.md"
    outside.write_text("SECRET criteria from outside the project")
    (folder / "rolling.md").unlink()
    (folder / "rolling.md").symlink_to(outside)
    stub.script(say("hi"))
    await collect(stub.wire(project, context="rolling").agent.run("hello"))
    system = stub.bodies()[-1]["system"][0]["text"]
    assert "SECRET" not in system and "How to score" in system
