"""Rules mean what they say: every bypass of allow, deny, file and protected-read rules, attacked."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from rhapsody.core.session.context import RequestSpec
from rhapsody.core.access.permissions import Call, Rules, decide_call
from rhapsody.core.session.session import Session
from rhapsody.core.toolbox.protocol import ToolContext, ToolOutcome
from rhapsody.loopback.script import call, say
from rhapsody.tools import default_toolbox
from rhapsody.tools.shell import parse

from tests.conftest import Stub, collect, until

NARRATE = "I will run this command now because the task needs it, and I expect it to tell us something."
SMUGGLED = ["pytest & touch x", "pytest $(touch x)", "pytest `touch x`", "pytest <(touch x)", "pytest >(touch x)",
            "pytest > x", "pytest >> x", "pytest\ntouch x", "pytest; touch x", "pytest || touch x", "eval pytest",
            "bash -c 'pytest; touch x'", "pytest && sh -c 'touch x'", "X=$(touch x) pytest", "LD_PRELOAD=x.so pytest",
            "pytest \"$(touch x)\"", "(pytest; touch x)", "{ pytest; touch x; }", "pytest | xargs touch",
            "pytest; python3 -c 'open(\"x\",\"w\")'", "pytest <<EOF\n$(touch x)\nEOF", "f() { touch x; }; f",
            "pytest $((1+$(touch x)))", "if pytest; then touch x; fi", "pytest 2> x"]


@pytest.mark.parametrize("command", SMUGGLED)
def test_an_allow_rule_never_runs_a_smuggled_command(command: str) -> None:
    rules = Rules(allow=["bash:pytest*"], parse=parse)
    for confinement in ("workspace-write", "unavailable"):
        assert decide_call("ask", rules, Call("bash", command, True, False, confinement=confinement)).verdict == "ask"


@pytest.mark.parametrize("command", ["pytest -q", "pytest -q 2>&1 | pytest --co", "pytest >/dev/null 2>&1",
                                     "pytest 'tests/a b.py' && pytest"])
def test_an_allow_rule_runs_plain_commands(command: str) -> None:
    assert decide_call("ask", Rules(allow=["bash:pytest*"], parse=parse), Call("bash", command, True, False,
                  confinement="unavailable")).verdict == "allow"


@pytest.mark.parametrize(("command", "why"), [
    ("for f in *.py; do pytest $f; done", "because it contains a for loop"),
    ("while true; do pytest; done", "because it contains a while or until loop"),
    ("if pytest; then ls; fi", "because it contains an if statement"),
    ("(pytest)", "because it contains a subshell ( … )"),
    ("{ pytest; }", "because it contains a command group { … }"),
    ("X=1 pytest", "because it contains a variable assignment"),
    ("f() { pytest; }", "because it contains a function definition"),
    ("pytest <<EOF\nx\nEOF", "because it contains a here-document (<<)"),
    ("pytest 'open", "because it contains text the parser does not understand"),
])
def test_why_a_rule_cannot_judge_a_command_reads_as_english(command: str, why: str) -> None:
    reason = decide_call("ask", Rules(allow=["bash:pytest*"], parse=parse), Call("bash", command, True, False,
                    confinement="unavailable")).reason
    assert reason.endswith(why)


async def test_smuggled_commands_do_not_run_headless(stub: Stub, project: Path) -> None:
    stub.script(*[call(NARRATE, "bash", command=c) for c in SMUGGLED[:4]], say("done"))
    wiring = stub.wire(project, permission_mode="ask", allow=["bash:pytest*"])
    await collect(wiring.agent.run("go"))
    assert not (project / "x").exists()
    assert json.dumps(stub.bodies()[-1]).count("no human can answer here") == 4


CAUGHT = ["rm -rf x", "/bin/rm -rf x", "\\rm -rf x", "\"rm\" -rf x", "'rm' -rf x", "rm  -rf x", "rm\t-rf x",
          "r\\m -rf x", "env rm -rf x", "command rm -rf x", "exec rm -rf x", "nohup rm -rf x", "sudo rm -rf x",
          "timeout 5 rm -rf x", "bash -c 'rm -rf x'", "sh -c \"rm -rf x\"", "eval rm -rf x", "$(echo rm) -rf x",
          "true && rm -rf x", "true; rm -rf x", "true | rm -rf x", "(rm -rf x)", "{ rm -rf x; }",
          "if true; then rm -rf x; fi", "echo x | xargs rm -rf", "find . -name x -delete", "rm -fr x", "rm -r -f x",
          "rm -Rf x", "rm --recursive --force x", "busybox rm -rf x", "/usr/bin/busybox rm -fr x", "coproc rm -rf x",
          "coproc NAME { rm -rf x; }"]


@pytest.mark.parametrize("command", CAUGHT)
def test_deny_rules_catch_common_rewrites(command: str) -> None:
    rules = Rules(allow=["bash"], deny=["bash:rm -rf*"], parse=parse)
    for mode in ("ask", "auto-edit"):
        verdict = decide_call(mode, rules, Call("bash", command, True, False, confinement="workspace-write")).verdict
        assert verdict in ("deny", "ask"), (mode, verdict)


def test_deny_rules_are_a_convenience_and_say_so() -> None:
    """A program reached under another name still runs: docs/security.md says the sandbox is the boundary."""
    rules = Rules(deny=["bash:rm -rf*"], parse=parse)
    assert decide_call("auto-edit", rules, Call("bash", "unlink x", True, False, confinement="workspace-write")).verdict == "allow"
    assert decide_call("auto-edit", rules, Call("bash", "rm -r x", True, False, confinement="workspace-write")).verdict == "allow"
    assert "convenience" in Path(__file__).parents[2].joinpath("docs", "security.md").read_text()


@pytest.fixture
def ctx(project: Path) -> ToolContext:
    session = Session.start(project, RequestSpec(model="m", system="s", tools=[]))
    return ToolContext(project, session, bash_timeout=1, output_cap=4000)


async def run(ctx: ToolContext, name: str, allow: list[str] | None = None, deny: list[str] | None = None,
              **args: object) -> ToolOutcome:
    outcome, _ = await default_toolbox("yolo", allow, deny).run(name, args, ctx)
    return outcome


async def test_file_rules_match_the_resolved_path(ctx: ToolContext) -> None:
    root = ctx.root
    (root / "config").mkdir()
    (root / "src").mkdir()
    os.symlink("config", root / "cfglink")
    for path in ("config/x", "./config/x", str(root / "config" / "x"), "src/../config/x", "cfglink/x", "CONFIG/../config/x"):
        outcome = await run(ctx, "write_file", deny=["write_file:config/*"], path=path, content="owned")
        assert outcome.is_error and "denied by rule" in outcome.content, path
    assert not (root / "config" / "x").exists()


async def test_read_deny_rules_cover_links_and_search(ctx: ToolContext) -> None:
    root = ctx.root
    (root / "private").mkdir()
    (root / "private" / "plan.txt").write_text("the private plan\n")
    os.symlink("private/plan.txt", root / "plan-link.txt")
    deny = ["read_file:private/*"]
    for path in ("private/plan.txt", "./private/plan.txt", "plan-link.txt", str(root / "private" / "plan.txt")):
        outcome = await run(ctx, "read_file", deny=deny, path=path)
        assert outcome.is_error and "private plan" not in outcome.content, path
    for args in ({"pattern": "private plan"}, {"pattern": "private plan", "path": "private"}):
        found = await run(ctx, "search_text", deny=deny, **args)
        assert "the private plan" not in found.content
    listed = await run(ctx, "find_files", deny=deny, pattern="**/*.txt")
    assert "private/plan.txt" not in listed.content


async def test_protected_reads_hold_through_links_and_case(ctx: ToolContext) -> None:
    root = ctx.root
    (root / ".env").write_text("TOKEN=hunter2-very-secret\n")
    (root / "notes").mkdir()
    os.symlink(".env", root / "envlink")
    os.symlink("../.env", root / "notes" / "config.txt")
    (root / "server.PEM").write_text("-----BEGIN RSA PRIVATE KEY-----\nhunter2-pem\n")
    for path in ("envlink", "notes/config.txt", "server.PEM", ".ENV", "./.env"):
        outcome = await run(ctx, "read_file", path=path)
        assert outcome.is_error and "hunter2" not in outcome.content, path
    found = await run(ctx, "search_text", pattern="hunter2")
    assert "hunter2" not in found.content


async def test_listing_and_search_never_follow_a_link_out_of_the_root(ctx: ToolContext,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    os.symlink("/etc", ctx.root / "etclink")
    os.symlink("/etc/passwd", ctx.root / "passwd")
    listed = await run(ctx, "find_files", pattern="etclink/*")
    assert "(no files match)" in listed.content
    everything = await run(ctx, "find_files", pattern="**")
    assert "etclink" not in everything.content and "passwd" not in everything.content
    for path in (str(ctx.root / "empty-bin"),):  # no ripgrep on PATH: the Python fallback must hold too
        os.mkdir(path)
        monkeypatch.setenv("PATH", path)
        for args in ({"pattern": "root:"}, {"pattern": "root:", "path": "etclink"}):
            found = await run(ctx, "search_text", **args)
            assert "root:x" not in found.content and "/bin/" not in found.content


async def test_a_catastrophic_regex_is_stopped_at_the_time_limit(ctx: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    (ctx.root / "evil.txt").write_text("a" * 40 + "!\n")
    os.mkdir(ctx.root / "empty-bin")
    monkeypatch.setenv("PATH", str(ctx.root / "empty-bin"))
    start = time.monotonic()
    found = await run(ctx, "search_text", pattern="(a+)+$")
    assert time.monotonic() - start < 5
    assert found.is_error and "time limit" in found.content


async def test_edit_file_is_no_oracle_for_a_secret_file(ctx: ToolContext) -> None:
    (ctx.root / ".env").write_text("TOKEN=hunter2\n")
    outcome = await run(ctx, "edit_file", path=".env", old="TOKEN=h", new="TOKEN=h")
    assert outcome.is_error and "may hold secrets" in outcome.content


async def test_a_hostile_glob_costs_names_times_parts(ctx: ToolContext) -> None:
    deep = ctx.root.joinpath(*["abc"] * 40)
    deep.mkdir(parents=True)
    (deep / ("a" * 60)).write_text("x")
    start = time.monotonic()
    found = await run(ctx, "find_files", pattern="**/" * 15 + "*a*a*a*a*a*a*a*a*a*a*a*a*b")
    assert time.monotonic() - start < 5 and "(no files match)" in found.content


async def test_cancelling_a_search_kills_it(ctx: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from tests.sandbox.test_sandbox import _running, _wait_gone

    (ctx.root / "evil.txt").write_text("a" * 40 + "!\n")
    os.mkdir(ctx.root / "empty-bin")
    monkeypatch.setenv("PATH", str(ctx.root / "empty-bin"))
    ctx.bash_timeout = 60
    task = asyncio.ensure_future(run(ctx, "search_text", pattern="(a+)+$"))
    await until(lambda: _running("rhapsody.tools.search"))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _wait_gone("rhapsody.tools.search")


async def test_file_tools_never_write_an_mcp_config(ctx: ToolContext) -> None:
    outcome = await run(ctx, "write_file", path="./.mcp.json", content='{"mcpServers": {}}')
    assert outcome.is_error and "refused" in outcome.content and not (ctx.root / ".mcp.json").exists()
