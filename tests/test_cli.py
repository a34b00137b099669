"""The command line as a user meets it: real subprocesses, one-line errors, exit codes."""

from __future__ import annotations

import json
import re
import os
import subprocess
from pathlib import Path

import pytest

from rhapsody.loopback.script import call, say

from tests import launch
from tests.conftest import MODEL, Stub


def rhapsody(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return launch.run(list(args), env={**os.environ, **(env or {})}, cwd=cwd, timeout=60)


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rhapsody"), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


REQUEST = {
    "model": "claude-x", "max_tokens": 100, "system": "be brief",
    "tools": [{"name": "bash", "input_schema": {"type": "object"}}],
    "messages": [
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "s"},
            {"type": "text", "text": "I will list the files."},
            {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "ls"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a\nb\n" * 500},
                                     {"type": "text", "text": "hint: only .py"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Two files."}]},
    ],
}


def test_strip_json_report_has_the_contract_keys(tmp_path: Path) -> None:
    src = tmp_path / "req.json"
    src.write_text(json.dumps(REQUEST))
    out = tmp_path / "out.json"
    result = rhapsody("strip", str(src), "--json", "--out", str(out))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    for side in ("before", "after"):
        assert set(report[side]) >= {"messages", "text_blocks", "tool_use", "tool_result", "thinking", "request_bytes", "est_tokens"}
    assert report["authored_sha256_before"] == report["authored_sha256_after"]
    assert report["before"]["tool_use"] == 1 and report["after"]["tool_use"] == 0 and report["after"]["thinking"] == 0
    assert report["after"]["messages"] == 4 and report["valid"] is True
    assert report["authored_chars"] == len("list files") + len("I will list the files.") + len("hint: only .py") + len("Two files.")
    assert report["reduction"] == round(1 - report["after"]["request_bytes"] / report["before"]["request_bytes"], 4)
    assert report["before"]["request_bytes"] == len(json.dumps(REQUEST, separators=(",", ":")).encode())
    stripped = json.loads(out.read_text())
    assert stripped["messages"][0]["content"] == "list files"
    assert [b["text"] for b in stripped["messages"][1]["content"]] == ["I will list the files."]
    assert stripped["messages"][2]["content"] == [{"type": "text", "text": "hint: only .py"}]


@pytest.mark.parametrize("content,fragment", [
    ("{not json", "not JSON"),
    ('{"model": "m"}', "no 'messages' list"),
    ('{"messages": [{"role": "robot", "content": "x"}]}', "messages.0.role"),
    ('[1, 2]', "must be a JSON object"),
])
def test_strip_malformed_file_is_one_line_and_exit_2(tmp_path: Path, content: str, fragment: str) -> None:
    src = tmp_path / "bad.json"
    src.write_text(content)
    line = one_line_error(rhapsody("strip", str(src), "--json"))
    assert fragment in line


def test_strip_missing_file_is_one_line(tmp_path: Path) -> None:
    assert "cannot read" in one_line_error(rhapsody("strip", str(tmp_path / "nope.json")))


def test_missing_key_is_one_line_and_exit_2(project: Path) -> None:
    line = one_line_error(rhapsody("-p", "hi", "--cwd", str(project)))
    assert "ANTHROPIC_API_KEY" in line


def test_malformed_config_names_the_key(project: Path) -> None:
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "rhapsody" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('narration_min_words = "many"\n')
    line = one_line_error(rhapsody("-p", "hi", "--cwd", str(project), env={"ANTHROPIC_API_KEY": "k"}))
    assert "narration_min_words" in line
    user.write_text("colour = 'blue'\n")
    assert "colour" in one_line_error(rhapsody("-p", "hi", "--cwd", str(project), env={"ANTHROPIC_API_KEY": "k"}))
    user.unlink()
    (project / ".rhapsody").mkdir(exist_ok=True)
    (project / ".rhapsody" / "config.toml").write_text("= broken\n")
    assert "config.toml" in one_line_error(rhapsody("-p", "hi", "--cwd", str(project), env={"ANTHROPIC_API_KEY": "k"}))


def test_unreachable_base_url_is_said_once_and_names_the_host(project: Path) -> None:
    key = "sk-ant-secret-value-123"
    env = {"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": "http://user:pw@127.0.0.1:9/v1?token=abc",
           "RHAPSODY_RETRIES": "1", "RHAPSODY_RETRY_BASE_DELAY": "0"}
    result = rhapsody("-p", "hi", "--cwd", str(project), "--model", MODEL, env=env)
    line = one_line_error(result)
    assert "connection to 127.0.0.1:9 failed" in line and "the API failed 2 times" in line
    assert "↻ retry 1 in 0.0 s: connection to 127.0.0.1:9 failed" in result.stdout
    both = result.stdout + result.stderr
    assert both.count("the API failed") == 1, both
    for secret in (key, "pw", "token", "abc"):
        assert secret not in both


def test_unknown_model_is_one_line(stub: Stub, project: Path) -> None:
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": stub.server.url}
    line = one_line_error(rhapsody("-p", "hi", "--cwd", str(project), "--model", "gpt-nope", env=env))
    assert "unknown model" in line


def test_malformed_history_on_resume_is_one_line(project: Path) -> None:
    folder = project / ".rhapsody" / "history"
    folder.mkdir(parents=True)
    (folder / "20260101-000000-abcdef.jsonl").write_text('{"v":1,"seq":0,"kind":"message"}\n')
    line = one_line_error(rhapsody("-p", "hi", "--continue", "--cwd", str(project), env={"ANTHROPIC_API_KEY": "k"}))
    assert "line 1" in line and "'role'" in line


def test_headless_run_prints_narration_and_tool_lines_and_writes_no_key(stub: Stub, project: Path) -> None:
    stub.script(call("I will list the Python files to see what the project holds before changing anything.",
                     "find_files", pattern="*.py"), say("One file: app.py."))
    key = "sk-ant-secret-value-123"
    env = {"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": stub.server.url}
    result = rhapsody("-p", "what is here?", "--cwd", str(project), "--model", MODEL, env=env)
    assert result.returncode == 0, result.stderr
    assert "I will list the Python files" in result.stdout and "find_files *.py → ok" in result.stdout
    assert "One file: app.py." in result.stdout
    assert stub.server.requests[0].headers.get("authorization") == f"Bearer {key}"
    for path in (project / ".rhapsody").rglob("*"):
        if path.is_file():
            assert key not in path.read_text(errors="replace"), path
    jsonl = rhapsody("-p", "again", "--cwd", str(project), "--model", MODEL, "--output-format", "jsonl", env=env)
    events = [json.loads(line)["event"] for line in jsonl.stdout.splitlines()]
    assert events[:2] == ["session", "turn_started"] and events[-2:] == ["turn_ended", "result"]
    assert all(re.fullmatch(r"[a-z]+(_[a-z]+)*", e) for e in events)  # one naming style for every event


def test_help_and_version(tmp_path: Path) -> None:
    result = rhapsody("--help")
    assert result.returncode == 0 and "rhapsody strip FILE" in result.stdout
    text = " ".join(result.stdout.split())
    permission = text.split("--permission-mode {read-only,plan,ask,auto-edit,yolo} ", 1)[1].split(" --continue")[0]
    for mode in ("read-only:", "plan:", "ask:", "auto-edit:", "yolo:", "default: ask; auto-edit with -p"):
        assert mode in permission, permission
    context = text.split("--context {manual,rolling} ", 1)[1].split(" --exact-tokens")[0]
    assert "seed" not in context and "manual (default)" in context and "rolling: old tool results leave" in context
    assert rhapsody("--version").stdout.startswith("rhapsody ")


@pytest.mark.parametrize("args", [("trust", "a", "b"), ("trust", "/nonexistent-folder"), ("mcp",), ("mcp", "frob"),
                                  ("mcp", "list", "--bogus"), ("stats", "--cache-read-mult", "x"),
                                  ("import", "/nonexistent-file"), ("export", "nosuch"), ("rewind", "--to", "x"),
                                  ("stats", "nosuch", "--what-if", "every=0")])
def test_added_commands_answer_bad_input_in_one_line(project: Path, args: tuple[str, ...]) -> None:
    one_line_error(rhapsody(*args, cwd=project))


def test_stats_counts_a_request_that_failed_to_connect_the_same_in_json_and_text(project: Path) -> None:
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "RHAPSODY_RETRIES": "0"}
    assert rhapsody("-p", "hi", "--cwd", str(project), "--model", MODEL, env=env).returncode == 2
    figures = json.loads(rhapsody("stats", "--json", "--cwd", str(project)).stdout)
    assert figures["requests"] == figures["counts"]["request"] == 1 and figures["answered_requests"] == 0
    text = rhapsody("stats", "--cwd", str(project), env={"COLUMNS": "200"}).stdout
    assert "requests 1," in text


def test_headless_ask_mode_counts_calls_refused_for_want_of_a_human_and_exits_4(stub: Stub, project: Path) -> None:
    turns = (call("I will remove the old file first because the task asks for a clean start here.", "bash",
                  command="rm app.py"),
             call("I will write the new file now, since removing the old one was not allowed here.", "write_file",
                  path="new.py", content="x = 1\n"),
             say("Both calls were refused."))
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": stub.server.url}
    stub.script(*turns)
    text = rhapsody("-p", "start clean", "--cwd", str(project), "--model", MODEL, "--permission-mode", "ask", env=env)
    assert text.returncode == 4, text.stderr
    assert text.stderr.splitlines()[-1] == ("rhapsody: 2 tool calls refused: no human to ask in headless mode; "
                                            "allow them with rules or another --permission-mode")
    stub.script(*turns)
    jsonl = rhapsody("-p", "start clean", "--cwd", str(project), "--model", MODEL, "--permission-mode", "ask",
                     "--output-format", "jsonl", env=env)
    result = json.loads(jsonl.stdout.splitlines()[-1])
    assert jsonl.returncode == 4 and result["exit_status"] == 4 and result["is_error"] is True
    assert result["tool_calls"] == result["refused_calls"] == result["refused_without_a_human"] == 2
    assert [d["tool_name"] for d in result["permission_denials"]] == ["bash", "write_file"]
    assert result["permission_denials"][0]["tool_input"] == {"command": "rm app.py"}
    assert "no human can answer here" in result["permission_denials"][1]["reason"]
    assert (project / "app.py").exists() and not (project / "new.py").exists()


def test_headless_refusal_by_a_deny_rule_is_counted_but_exits_0(stub: Stub, project: Path) -> None:
    (project / ".rhapsody").mkdir(exist_ok=True)
    (project / ".rhapsody" / "config.toml").write_text('deny = ["bash:rm*"]\n')
    stub.script(call("I will remove the old file first because the task asks for a clean start here.", "bash",
                     command="rm app.py"), say("It was refused."))
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": stub.server.url}
    result = rhapsody("-p", "start clean", "--cwd", str(project), "--model", MODEL, env=env)
    assert result.returncode == 0, result.stderr
    assert "rhapsody: 1 tool call refused by the permission mode or rules" in result.stderr


def test_a_setting_of_several_forms_is_named_once_with_what_each_form_wanted(project: Path) -> None:
    result = rhapsody("--handoff-at-share", "2", "-p", "hi", cwd=project)
    one_line_error(result)
    assert ("bad setting 'handoff_at_share' (from --handoff-at-share): Input should be less than 1, "
            "or Input should be 'off'") in result.stderr and "constrained-float" not in result.stderr
