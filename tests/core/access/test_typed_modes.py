"""Permission modes, verdicts and who decided are closed sets (core.access.permissions): a settings file's string,
a `/permissions` argument, a hook's JSON answer and a history record are each taken as one of them or
refused, never carried along as a free string."""

from __future__ import annotations

from rhapsody.core.session.records import dumped
from pathlib import Path

import pytest

from rhapsody.commands.slash import run_command
from rhapsody.config.settings import load_settings
from rhapsody.config.files import user_config_path
from rhapsody.core.session import records as rec
from rhapsody.core.toolbox.approval import approval_for
from rhapsody.core.errors import ConfigError
from rhapsody.core.access.permissions import MODES, mode_named
from rhapsody.hook_runner import _from_json

from tests.conftest import Stub


def test_a_mode_in_the_settings_file_is_one_of_the_modes_and_a_misspelt_one_is_refused(project: Path) -> None:
    user = user_config_path()
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text('permission_mode = "auto-edit"\nsandbox = "read-only"\n', encoding="utf-8")
    settings = load_settings(project)
    assert settings.permission_mode == "auto-edit" and settings.sandbox == "read-only"
    user.write_text('permission_mode = "autoedit"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(project)
    assert "permission_mode" in str(caught.value) and "\n" not in str(caught.value)


def test_permissions_switches_only_to_a_mode_it_knows(stub: Stub, project: Path) -> None:
    agent = stub.wire(project, permission_mode="ask").agent
    refused = run_command(agent, "/permissions Yolo")
    assert refused.error and "unknown mode Yolo" in refused.text and agent.toolbox.permission_mode == "ask"
    run_command(agent, "/permissions read-only")
    assert agent.toolbox.permission_mode == "read-only"
    assert [r["mode"] for r in dumped(agent.session.records) if r["kind"] == "permission_mode"] == ["read-only"]
    assert [mode_named(m) for m in (*MODES, "YOLO", "", None)] == [*MODES, None, None, None]


@pytest.mark.parametrize("answer,decision", [
    ({"hookSpecificOutput": {"permissionDecision": "ask"}}, "ask"),
    ({"decision": "approve"}, "allow"), ({"decision": "block"}, "deny"), ({"decision": "deny"}, "deny"),
    ({"hookSpecificOutput": {"permissionDecision": "maybe"}}, None), ({"decision": "sure"}, None),
])
def test_a_hooks_answer_is_a_verdict_or_none(answer: dict[str, object], decision: str | None) -> None:
    verdict, _ = _from_json("PreToolUse", answer)
    assert verdict.decision == decision


@pytest.mark.parametrize("record", [
    {"kind": "permission", "tool": "bash", "argument": "ls", "decision": "perhaps", "by": "human"},
    {"kind": "permission", "tool": "bash", "argument": "ls", "decision": "allow", "by": "the cat"},
    {"kind": "permission", "tool": "bash", "argument": "ls", "decision": "allow", "by": "rules", "confinement": "jail"},
    {"kind": "permission_mode", "mode": "anything-goes"},
])
def test_a_permission_record_outside_the_closed_sets_is_refused(record: dict[str, object]) -> None:
    with pytest.raises(rec.InvalidRecord):
        rec.parse(record)


@pytest.mark.parametrize("typed,rules,allow,remember,words", [
    ("y", (), True, (), ""), (" A ", ("bash:ls",), True, ("bash:ls",), ""), ("a", (), False, (), "a"),
    ("n", (), False, (), ""), ("", (), True, (), ""), ("yes", (), False, (), "yes"),
    ("1", (), True, (), ""), ("2", (), False, (), ""), ("3", (), False, (), "3"),
    ("2", ("bash:ls",), True, ("bash:ls",), ""), ("3", ("bash:ls",), False, (), ""), ("12", (), False, (), "12"),
])
def test_one_table_of_replies_serves_every_front_end(typed: str, rules: tuple[str, ...], allow: bool,
                                                     remember: tuple[str, ...], words: str) -> None:
    answer = approval_for(typed, rules)
    assert (answer.allow, answer.remember, answer.words) == (allow, remember, words)
