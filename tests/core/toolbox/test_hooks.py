"""Hooks end to end: real hook scripts (bash, python) run by the real loop against the loopback server."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from rhapsody.config.settings import load_settings
from rhapsody.core.events import Notice, ToolFinished, TurnEnded
from rhapsody.core.session.history import read_history
from rhapsody.core.toolbox.approval import Approval
from rhapsody.loopback.script import call, say
from rhapsody.commands.trust import trust, untrusted_notice
from rhapsody.wiring import build

from tests.conftest import MODEL, Stub, collect, until
from tests.core.session.test_handoff_e2e import handoff_turn

RM = "I will clear the build folder so the next build starts from nothing at all."
WRITE = "I will write notes.txt with the summary so the human can read it later."

CLAUDE_GUARD = r'''#!/usr/bin/env python3
# A PreToolUse guard as written for Claude Code, unchanged.
import json, sys
data = json.load(sys.stdin)
if data.get("tool_name") == "Bash" and "rm -rf" in data.get("tool_input", {}).get("command", ""):
    print("BLOCKED: rm -rf is not allowed here; delete files one by one.", file=sys.stderr)
    sys.exit(2)
sys.exit(0)
'''


def script(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)
    return str(path)


def hook(event: str, command: str, matcher: str = "", timeout: float = 10.0) -> dict[str, Any]:
    return {event: [{"matcher": matcher, "hooks": [{"type": "command", "command": command, "timeout": timeout}]}]}


def hook_records(path: Path) -> list[dict[str, Any]]:
    return [r for r in read_history(path).records if r["kind"] == "hook"]


def result_of(stub: Stub, request: int) -> dict[str, Any]:
    content = stub.bodies()[request]["messages"][-1]["content"]
    return dict(next(b for b in content if b["type"] == "tool_result"))


async def test_claude_code_guard_script_unchanged_blocks_rm_and_the_model_reads_why(
        stub: Stub, project: Path, tmp_path: Path) -> None:
    guard = script(tmp_path, "guard.py", CLAUDE_GUARD)
    (project / "build").mkdir()
    stub.script(call(RM, "bash", command="rm -rf build"), say("Understood, I will keep build/."))
    wiring = stub.wire(project, hooks=hook("PreToolUse", guard, matcher="Bash|Edit"))
    events = await collect(wiring.agent.run("clean up"))
    assert (project / "build").is_dir()
    result = result_of(stub, 1)
    assert result["is_error"] is True
    assert "denied by a PreToolUse hook: BLOCKED: rm -rf is not allowed here" in result["content"]
    assert [e.refused for e in events if isinstance(e, ToolFinished)][0].startswith("denied by a PreToolUse hook")
    records = read_history(wiring.session.path).records
    [run] = hook_records(wiring.session.path)
    assert (run["event"], run["exit_code"], run["outcome"]) == ("PreToolUse", 2, "blocked")
    assert run["duration_ms"] >= 0 and "rm -rf" in run["reason"]
    permission = next(r for r in records if r["kind"] == "permission")
    assert (permission["decision"], permission["by"]) == ("deny", "hook")


async def test_hook_reads_claude_code_fields_and_a_json_deny_stops_a_write(
        stub: Stub, project: Path, tmp_path: Path) -> None:
    seen = tmp_path / "seen.json"
    deny = script(tmp_path, "deny.sh", f'''#!/bin/bash
cat > {seen}
echo '{{"hookSpecificOutput": {{"hookEventName": "PreToolUse", "permissionDecision": "deny",
  "permissionDecisionReason": "notes go in docs/"}}}}'
''')
    stub.script(call(WRITE, "write_file", path="notes.txt", content="hi"), say("I will use docs/ instead."))
    wiring = stub.wire(project, hooks=hook("PreToolUse", deny, matcher="Write"))
    await collect(wiring.agent.run("write notes"))
    assert not (project / "notes.txt").exists()
    assert "notes go in docs/" in result_of(stub, 1)["content"]
    given = json.loads(seen.read_text())
    assert given["hook_event_name"] == "PreToolUse" and given["tool_name"] == "Write"
    assert given["tool_input"]["file_path"] == str((project / "notes.txt").resolve())
    assert given["session_id"] == wiring.session.id and given["transcript_path"] == str(wiring.session.path)
    assert given["cwd"] == str(project) and given["rhapsody_tool"] == "write_file"
    assert given["tool_use_id"] == stub.bodies()[1]["messages"][-2]["content"][-1]["id"]


async def test_a_hooks_allow_never_skips_a_question_and_its_ask_asks(stub: Stub, project: Path, tmp_path: Path) -> None:
    allow = script(tmp_path, "allow.sh", '#!/bin/bash\necho \'{"decision": "approve"}\'\n')
    notified = tmp_path / "notified.json"
    notify = script(tmp_path, "notify.sh", f"#!/bin/bash\ncat > {notified}\n")
    asked: list[str] = []

    async def answer(tool: str, argument: str, why: str, args: object = None, rules: object = ()) -> Approval:
        asked.append(why)
        return Approval(False)

    stub.script(call(WRITE, "write_file", path="notes.txt", content="hi"), say("Not written."))
    wiring = stub.wire(project, permission_mode="ask", hooks={**hook("PreToolUse", allow), **hook("Notification", notify)})
    wiring.agent.toolbox.approver = answer
    await collect(wiring.agent.run("write notes"))
    assert len(asked) == 1 and not (project / "notes.txt").exists()
    await until(lambda: notified.exists() and notified.stat().st_size > 0)
    assert "permission to use write_file" in json.loads(notified.read_text())["message"]

    ask = script(tmp_path, "ask.sh", '#!/bin/bash\necho \'{"hookSpecificOutput": {"permissionDecision": "ask", '
                                     '"permissionDecisionReason": "writes need a look"}}\'\n')
    stub.script(call(WRITE, "write_file", path="notes.txt", content="hi"), say("Not written."))
    yolo = stub.wire(project, permission_mode="yolo", hooks=hook("PreToolUse", ask))
    yolo.agent.toolbox.approver = answer
    await collect(yolo.agent.run("write notes"))
    assert asked[-1] == "a PreToolUse hook asks: writes need a look"
    assert not (project / "notes.txt").exists()


async def test_a_hook_past_its_timeout_is_killed_with_one_line_and_the_call_runs(
        stub: Stub, project: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    slow = script(tmp_path, "slow.sh", f"#!/bin/bash\necho $$ > {pidfile}\nsleep 30\n")
    stub.script(call(WRITE, "write_file", path="notes.txt", content="hi"), say("Written."))
    wiring = stub.wire(project, hooks=hook("PreToolUse", slow, timeout=0.5))
    started = time.monotonic()
    events = await collect(wiring.agent.run("write notes"))
    assert time.monotonic() - started < 10
    assert (project / "notes.txt").read_text() == "hi"
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert len(notices) == 1 and notices[0].startswith("hook PreToolUse `")
    assert notices[0].endswith("` timed out after 0.5s (killed)")
    [run] = hook_records(wiring.session.path)
    assert run["outcome"] == "timeout" and run["exit_code"] is None
    pid = int(pidfile.read_text())
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


async def test_a_crashing_hook_is_one_line_and_the_turn_goes_on(stub: Stub, project: Path, tmp_path: Path) -> None:
    crash = script(tmp_path, "crash.py", "#!/usr/bin/env python3\nraise RuntimeError('hook bug')\n")
    stub.script(call(WRITE, "write_file", path="notes.txt", content="hi"), say("Written."))
    wiring = stub.wire(project, hooks=hook("PostToolUse", crash))
    events = await collect(wiring.agent.run("write notes"))
    assert (project / "notes.txt").read_text() == "hi"
    [line] = [e.text for e in events if isinstance(e, Notice)]
    assert line.startswith("hook PostToolUse `") and "` exited 1: RuntimeError: hook bug" in line
    assert isinstance(events[-1], TurnEnded)
    assert hook_records(wiring.session.path)[0]["outcome"] == "error"


async def test_post_tool_use_context_and_exit_2_reach_the_model_in_the_result(
        stub: Stub, project: Path, tmp_path: Path) -> None:
    lint = script(tmp_path, "lint.sh", "#!/bin/bash\necho 'lint: notes.txt lacks a trailing newline' >&2\nexit 2\n")
    stub.script(call(WRITE, "write_file", path="notes.txt", content="hi"), say("I will add the newline."))
    wiring = stub.wire(project, hooks=hook("PostToolUse", lint, matcher="write_file"))
    await collect(wiring.agent.run("write notes"))
    content = result_of(stub, 1)["content"]
    assert "[PostToolUse hook] lint: notes.txt lacks a trailing newline" in content
    assert (project / "notes.txt").exists()


async def test_tool_hooks_and_the_model_see_secrets_masked_and_a_hook_on_another_tool_is_not_run(
        stub: Stub, project: Path, tmp_path: Path) -> None:
    token = "ghp_" + "a1B2" * 9  # a credential shape: masked whatever its source
    said = "hunter2-mcp-header-value"  # a value made secret after start-up (an MCP server's): the runner knows not
    pre, post = tmp_path / "pre.json", tmp_path / "post.json"
    save = script(tmp_path, "save.sh", f"#!/bin/bash\ncat > {pre}\n")
    lint = script(tmp_path, "lint.sh", f"#!/bin/bash\ncat > {post}\necho 'lint saw {said}' >&2\nexit 2\n")
    stub.script(call(WRITE, "write_file", path="notes.txt", content=token),
                call("I will read notes.txt back to check that the summary landed as written.", "read_file",
                     path="notes.txt"), say("Checked."))
    wiring = stub.wire(project, hooks={**hook("PreToolUse", save, matcher="write_file"),
                                       **hook("PostToolUse", lint, matcher="read_file")})
    wiring.agent.toolbox.add_secrets([said])
    await collect(wiring.agent.run("write and check notes"))
    assert (project / "notes.txt").read_text() == token
    assert json.loads(pre.read_text())["tool_input"]["content"] == "[masked secret]"
    assert "[masked secret]" in json.loads(post.read_text())["tool_response"]["output"]
    content = result_of(stub, 2)["content"]
    assert token not in content and said not in content
    assert content.endswith("[PostToolUse hook] lint saw [masked secret]")
    assert [r["event"] for r in hook_records(wiring.session.path)] == ["PreToolUse", "PostToolUse"]


async def test_user_prompt_submit_adds_context_or_blocks_the_prompt(stub: Stub, project: Path, tmp_path: Path) -> None:
    context = script(tmp_path, "ctx.sh", "#!/bin/bash\necho 'Sprint goal: ship 2.0'\n")
    stub.script(say("Noted."))
    wiring = stub.wire(project, hooks=hook("UserPromptSubmit", context))
    await collect(wiring.agent.run("what next?"))
    user = stub.bodies()[0]["messages"][-1]["content"]
    assert [b["text"] for b in user] == ["what next?", "Sprint goal: ship 2.0"]

    block = script(tmp_path, "block.sh", "#!/bin/bash\necho 'no prompts about passwords' >&2\nexit 2\n")
    blocked = stub.wire(project, hooks=hook("UserPromptSubmit", block))
    events = await collect(blocked.agent.run("print the password"))
    assert len(stub.bodies()) == 1
    assert [e.text for e in events if isinstance(e, Notice)] == [
        "prompt not sent: a UserPromptSubmit hook blocked it: no prompts about passwords"]


async def test_stop_hook_sends_the_agent_back_once_using_stop_hook_active(
        stub: Stub, project: Path, tmp_path: Path) -> None:
    stop = script(tmp_path, "stop.py", '''#!/usr/bin/env python3
import json, sys
if not json.load(sys.stdin)["stop_hook_active"]:
    print(json.dumps({"decision": "block", "reason": "Run the tests before you stop."}))
''')
    stub.script(say("Done."), say("Tests run: all pass."))
    wiring = stub.wire(project, hooks=hook("Stop", stop))
    events = await collect(wiring.agent.run("finish"))
    assert len(stub.bodies()) == 2 and isinstance(events[-1], TurnEnded)
    assert [b["text"] for b in stub.bodies()[1]["messages"][-1]["content"]] == ["Run the tests before you stop."]
    assert [r["outcome"] for r in hook_records(wiring.session.path)] == ["blocked", "ok"]


async def test_post_handoff_hook_gets_the_saved_field_note(stub: Stub, project: Path, tmp_path: Path) -> None:
    copy = tmp_path / "filed.md"
    file_it = script(tmp_path, "file.sh", f"#!/bin/bash\nin=$(cat)\njq -r .note <<< \"$in\" > {copy}\njq -r .note_path <<< \"$in\" >> {copy}\n")
    stub.script(call(RM.replace("clear", "list"), "bash", command="ls"), say("Listed."), handoff_turn(), say("Noted."))
    wiring = stub.wire(project, hooks=hook("PostHandoff", file_it))
    await collect(wiring.agent.run("list"))
    wiring.agent.request_handoff()
    await collect(wiring.agent.run())
    filed = copy.read_text()
    assert "fixed add() in app.py" in filed and filed.rstrip().endswith(".md")
    note_path = Path(filed.rstrip().splitlines()[-1])
    assert note_path.is_file() and "fixed add() in app.py" in note_path.read_text()


async def test_an_untrusted_projects_hooks_do_not_run_until_it_is_trusted(stub: Stub, project: Path) -> None:
    marker = project.parent / "ran"
    (project / ".rhapsody").mkdir()
    (project / ".rhapsody" / "config.toml").write_text(
        f'[[hooks.UserPromptSubmit]]\nhooks = [{{type = "command", command = "touch {marker}"}}]\n', encoding="utf-8")
    stub.script(say("Hello."), say("Hello again."))
    settings = load_settings(project, {"permission_mode": "yolo", "sandbox": "off"})
    assert settings.hooks == {}
    assert "hooks (starts programs)" in (untrusted_notice(project) or "")
    await collect(build(project, settings, stub.model(), MODEL).agent.run("hi"))
    assert not marker.exists()
    trust(project)
    trusted = load_settings(project, {"permission_mode": "yolo", "sandbox": "off"})
    await collect(build(project, trusted, stub.model(), MODEL).agent.run("hi"))
    assert marker.exists()


async def test_pre_handoff_output_goes_after_the_request_for_the_note(stub: Stub, project: Path, tmp_path: Path) -> None:
    extra = script(tmp_path, "extra.sh", "#!/bin/bash\necho 'Also name the ticket: RH-42.'\n")
    stub.script(call(RM.replace("clear", "list"), "bash", command="ls"), say("Listed."), handoff_turn(), say("Noted."))
    wiring = stub.wire(project, hooks=hook("PreHandoff", extra))
    await collect(wiring.agent.run("list"))
    wiring.agent.request_handoff()
    await collect(wiring.agent.run())
    asked = [b["text"] for b in stub.bodies()[2]["messages"][-1]["content"]]
    assert asked[-1] == "Also name the ticket: RH-42." and "micro_handoff" in asked[-2]
    assert [r["event"] for r in hook_records(wiring.session.path)] == ["PreHandoff"]
