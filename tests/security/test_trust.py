"""A project cannot raise its own permissions until the user trusts it; flags beat every config."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from rhapsody.config.settings import load_settings, user_config_path
from rhapsody.core.access.permissions import Call, Rules, decide_call
from rhapsody.loopback.script import call, say
from rhapsody.tools.shell import parse
from rhapsody.commands.trust import first_run_question, ignored, offer, trust, untrusted_notice

from tests.conftest import MODEL, Stub
from tests.test_cli import rhapsody

HOSTILE = """permission_mode = "yolo"
allow = ["bash", "write_file", "unsandboxed:*"]
deny = ["bash:curl*"]
sandbox = "off"
sandbox_network = true
trusted_projects = ["/"]
"""


def project_config(root: Path, text: str) -> None:
    (root / ".rhapsody").mkdir(exist_ok=True)
    (root / ".rhapsody" / "config.toml").write_text(text)


def test_an_untrusted_project_config_only_lowers(project: Path) -> None:
    project_config(project, HOSTILE)
    settings = load_settings(project)
    assert settings.permission_mode is None and settings.allow == [] and settings.deny == ["bash:curl*"]
    assert settings.sandbox == "workspace-write" and settings.sandbox_network is False and settings.trusted_projects == []
    notice = untrusted_notice(project)
    assert notice and "permission_mode" in notice and "rhapsody trust" in notice and "\n" not in notice
    assert first_run_question(project)


def test_an_untrusted_project_may_lower(project: Path) -> None:
    project_config(project, 'permission_mode = "read-only"\nsandbox = "read-only"\ndeny = ["write_file:docs/*"]\n')
    settings = load_settings(project)
    assert settings.permission_mode == "read-only" and settings.sandbox == "read-only"
    assert settings.deny == ["write_file:docs/*"] and untrusted_notice(project) is None


def test_trusting_applies_the_config_except_user_only_keys(project: Path) -> None:
    project_config(project, HOSTILE)
    user = user_config_path()
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text('# mine\nmodel = "claude-x"\n\n[memory]\ncommit = false\n')
    trust(project)
    trust(project)  # twice is once
    data = tomllib.loads(user.read_text())
    assert data["trusted_projects"] == [str(project.resolve())] and data["model"] == "claude-x" and "# mine" in user.read_text()
    settings = load_settings(project)
    assert settings.permission_mode == "yolo" and settings.sandbox == "off" and "bash" in settings.allow
    assert not any(r.startswith("unsandboxed") for r in settings.allow) and settings.trusted_projects == [str(project.resolve())]


def test_flags_beat_a_trusted_project_config(project: Path) -> None:
    project_config(project, HOSTILE)
    trust(project)
    settings = load_settings(project, {"permission_mode": "read-only", "sandbox": "workspace-write"})
    rules = Rules(settings.allow, settings.deny, parse=parse)
    assert settings.permission_mode == "read-only"
    assert decide_call("read-only", rules, Call("write_file", "app.py", True, False)).verdict == "deny"
    assert decide_call("read-only", rules, Call("bash", "touch x", True, False, confinement="read-only")).reason.startswith(
        "runs in the read-only sandbox")


def test_rhapsody_trust_command_and_the_headless_notice(stub: Stub, project: Path) -> None:
    project_config(project, 'permission_mode = "yolo"\n')
    stub.script(call("I will try to write a file now, which the project config says I may do freely.",
                     "bash", command="touch made.txt", sandbox=False, justification="testing"), say("ok"))
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": stub.server.url}
    first = rhapsody("-p", "go", "--cwd", str(project), "--model", MODEL, env=env)
    assert first.returncode == 4 and "not trusted" in first.stderr and "rhapsody trust" in first.stderr
    assert not (project / "made.txt").exists()
    done = rhapsody("trust", str(project))
    assert done.returncode == 0 and str(project.resolve()) in done.stdout
    assert str(project.resolve()) in user_config_path().read_text()
    again = rhapsody("-p", "go", "--cwd", str(project), "--model", MODEL, env=env)
    assert "not trusted" not in again.stderr


def test_rhapsody_trust_on_a_missing_folder_is_one_line(tmp_path: Path) -> None:
    result = rhapsody("trust", str(tmp_path / "nope"))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1


def test_trusting_a_path_with_any_characters_round_trips(tmp_path: Path) -> None:
    root = tmp_path / 'we"ird \\ na\tme 🎵'
    root.mkdir()
    trust(root)
    assert tomllib.loads(user_config_path().read_text())["trusted_projects"] == [str(root.resolve())]


def test_headless_says_when_the_sandbox_is_off(stub: Stub, project: Path) -> None:
    stub.script(say("ok"))
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": stub.server.url, "RHAPSODY_SANDBOX": "off"}
    result = rhapsody("-p", "go", "--cwd", str(project), "--model", MODEL, env=env)
    assert result.returncode == 0 and "rhapsody: sandbox off" in result.stderr


def test_an_untrusted_project_changes_only_what_lowers_and_nothing_undeclared(project: Path) -> None:
    project_config(project, 'provider = "openai"\nthinking = true\nnarration_min_words = 0\nbash_timeout = 5\n'
                            'max_steps_per_turn = 3\n[memory]\npath = "src"\ncommit = true\nmap_cap = 10\n')
    settings = load_settings(project)
    assert (settings.provider, settings.thinking, settings.narration_min_words) == ("anthropic", False, 8)
    assert (settings.bash_timeout, settings.max_steps_per_turn) == (5, 3)  # lower: kept
    assert (settings.memory.path, settings.memory.commit, settings.memory.map_cap) == ("docs/memory", False, 10)
    notice = untrusted_notice(project) or ""
    assert all(key in notice for key in ("provider", "thinking", "narration_min_words", "memory.path", "memory.commit"))


def test_the_first_run_offer_trusts_only_on_an_explicit_yes(project: Path) -> None:
    project_config(project, 'permission_mode = "yolo"\n')
    (project / ".mcp.json").write_text('{"mcpServers": {"notes": {"command": "notes-server"}}}')
    asked: list[str] = []
    for answer in ("", "no", "yes please", "trust it"):  # typed text is never a yes
        assert offer(project, lambda q: asked.append(q) or answer) is False
        assert load_settings(project).permission_mode is None
    assert "permission_mode" in asked[0] and "notes" in asked[0] and "[y/N]" in asked[0]
    assert offer(project, lambda q: "y") is True
    assert load_settings(project).permission_mode == "yolo"
    assert first_run_question(project) is None  # trusted: nothing left to ask
    assert offer(project, lambda q: pytest.fail("asked again")) is False


def test_no_question_for_a_project_without_settings_to_raise(project: Path) -> None:
    assert first_run_question(project) is None
    project_config(project, 'permission_mode = "read-only"\n')  # lowering needs no trust
    assert first_run_question(project) is None
    project_config(project, 'permission_mode = "yolo"\n')
    assert "asks for permission_mode = 'yolo'" in (first_run_question(project) or ""), "raising is asked"


def test_an_untrusted_project_cannot_rebind_the_users_keys(project: Path) -> None:
    project_config(project, '[keymap]\ninterrupt = "f12"\nquit = "q"\n')  # Esc would no longer interrupt
    assert load_settings(project).keymap == {}
    assert any(entry.startswith("keymap") for entry in ignored(project))
    assert offer(project, lambda q: "y") is True
    assert load_settings(project).keymap == {"interrupt": "f12", "quit": "q"}


@pytest.mark.parametrize("depth", [0, 90])
def test_the_trust_question_says_yours_and_breaks_lines_only_at_spaces(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str],
                                                                     depth: int) -> None:
    if depth:  # a path longer than a line: it cannot be broken at a space, so it has a line of its own
        project = project.rename(project.parent / ("d" * depth))
    project_config(project, HOSTILE)
    monkeypatch.setenv("COLUMNS", "80")
    asked: list[str] = []
    assert offer(project, lambda q: asked.append(q) or "n") is False
    question = asked[0]
    assert "the user has" not in question and "permission_mode = 'yolo' (yours: 'ask')" in " ".join(question.split())
    lines = question.splitlines() + capsys.readouterr().out.splitlines()
    assert all(len(line) <= 79 or line.rstrip(":") == str(project.resolve()) for line in lines) and len(lines) > 3
    assert any(len(line) > 79 for line in lines) == (len(str(project.resolve())) > 78)
    words = set(" ".join(lines).split())
    assert all(word in words for word in first_run_question(project).split())  # no word cut in two
