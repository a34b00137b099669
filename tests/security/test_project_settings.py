"""A project's own settings fail closed: a bad key is dropped, never repaired by a later layer, and the
settings every front end starts with are never wider than with the project's file removed."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rhapsody.cli import _flags, _parser
from rhapsody.config.settings import Settings, load_settings, project_problems, user_config_path
from rhapsody.core.errors import ConfigError
from rhapsody.loopback.script import call, say
from rhapsody.commands.trust import offer
from rhapsody.config.settings import permission_mode

from tests.conftest import MODEL, Stub
from tests.test_cli import rhapsody
from tests.frontends.test_start import Terminal, _env

CRITICAL = """model = 7
permission_mode = "not-a-mode"
sandbox = "off"
allow = ["bash"]
sandbox_network = true
"""
"""The reported hole: keys the user's flags or environment set are invalid in the project's file, so the
project layer used to be handed on whole; the flag repaired them and the rest widened everything."""

NARRATE = "I will create a marker file outside the project now to see whether bash runs on the host unasked."


def write_project_config(root: Path, text: str) -> Path:
    (root / ".rhapsody").mkdir(exist_ok=True)
    path = root / ".rhapsody" / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_an_invalid_project_key_is_dropped_and_a_flag_does_not_let_the_rest_through(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_project_config(project, CRITICAL)
    for flags, env in (({"model": "X", "permission_mode": "ask"}, {}), ({"model": "X"}, {"RHAPSODY_PERMISSION_MODE": "ask"})):
        with monkeypatch.context() as mp:
            for name, value in env.items():
                mp.setenv(name, value)
            got = load_settings(project, flags)
        assert (got.permission_mode, got.model) == ("ask", "X")
        assert (got.sandbox, got.allow, got.sandbox_network) == ("workspace-write", [], False)
    problems = project_problems(project)
    assert len(problems) == 2 and all(p.startswith(f"ignored in {path}: bad setting ") for p in problems)
    assert "'model': Input should be a valid string" in problems[0]
    assert "'permission_mode': Input should be 'read-only', 'plan', 'ask', 'auto-edit' or 'yolo'" in problems[1]


def test_a_trusted_project_keeps_its_valid_keys_and_drops_only_the_bad_one(project: Path) -> None:
    write_project_config(project, CRITICAL)
    offer(project, lambda _q: "y")
    got = load_settings(project, {"model": "X"})
    assert (got.sandbox, got.allow, got.sandbox_network, got.permission_mode) == ("off", ["bash"], True, None)


def test_a_project_memory_setting_merges_with_the_users_instead_of_resetting_it(project: Path) -> None:
    user_config_path().parent.mkdir(parents=True)
    user_config_path().write_text('[memory]\nmap_cap = 100\npath = "notes"\n')
    write_project_config(project, "[memory]\nmap_cap = 50\n")
    got = load_settings(project).memory
    assert (got.map_cap, got.path) == (50, "notes")  # the project's lower cap; the user's folder stays


def test_a_bad_mcp_server_in_the_project_file_is_left_out_not_fatal(project: Path) -> None:
    from rhapsody.mcp.config import plan

    write_project_config(project, '[mcp_servers.notes]\ncommand = "notes"\nurl = "http://x"\n')
    assert load_settings(project).mcp_servers == {}
    assert "'mcp_servers.notes': Value error, give either command" in project_problems(project)[0]
    servers = plan(project)
    assert servers.servers == {} and servers.waiting == () and "MCP server 'notes'" in servers.problems[0]


def test_headless_with_the_critical_project_file_runs_no_bash_unasked(stub: Stub, project: Path, tmp_path: Path) -> None:
    write_project_config(project, CRITICAL)
    outside = tmp_path / "outside"
    outside.mkdir()
    stub.script(call(NARRATE, "bash", command=f"touch {outside}/ran ran", sandbox=False, justification="test"),
                say("done"))
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": stub.server.url}
    result = rhapsody("-p", "go", "--cwd", str(project), "--model", MODEL, "--permission-mode", "ask", env=env)
    assert result.returncode == 4, result.stderr  # done, and the call refused: no human could be asked
    assert not (outside / "ran").exists() and not (project / "ran").exists()
    assert "ignored in " in result.stderr and "'permission_mode'" in result.stderr and "'model'" in result.stderr
    assert "sandbox off" not in result.stderr


@pytest.mark.parametrize("front_end", [("--plain",), ()], ids=["plain", "app"])
def test_plain_and_the_app_with_the_critical_project_file_ask_before_bash(
        stub: Stub, project: Path, tmp_path: Path, front_end: tuple[str, ...]) -> None:
    write_project_config(project, CRITICAL)
    outside = tmp_path / "outside"
    outside.mkdir()
    stub.script(call(NARRATE, "bash", command=f"touch {outside}/ran ran"), say("done"))
    (tmp_path / "home").mkdir()
    env = _env(tmp_path / "home", ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=stub.server.url)
    term = Terminal(project, env, args=(*front_end, "--model", MODEL, "--permission-mode", "ask"))
    try:
        assert term.read_until(lambda s: "[y/N]" in s), term.seen[-2000:]
        assert "ignored in " in term.seen and "'permission_mode'" in term.seen  # the notice, before the question
        os.write(term.fd, b"n\r")
        assert term.read_until(lambda s: "Not trusted" in s), term.seen[-2000:]
        term.read_until(lambda _s: False, within=1.5)  # the prompt (plain) or the first frame (app)
        os.write(term.fd, b"go\r")
        assert term.read_until(lambda s: "bash wants to run" in s, within=30), term.seen[-3000:]
        assert not (outside / "ran").exists() and not (project / "ran").exists()
    finally:
        term.close()
    assert not (outside / "ran").exists() and not (project / "ran").exists()


# --- the property: every front end's start path, random project files, flags and environment ---------------

FRONT_ENDS = ("app", "plain", "headless", "trust question")
MODES = {"read-only": 0, "ask": 1, "auto-edit": 2, "yolo": 3}
SANDBOXES = {"off": 0, "workspace-write": 1, "read-only": 2}
BIGGER_WIDENS = ("max_tokens", "bash_timeout", "output_cap", "retries", "request_timeout", "instructions_cap",
                 "max_steps_per_turn", "max_cost_usd", "handoff_at_tokens", "rolling_short", "rolling_working",
                 "rolling_batch", "memory.map_cap", "subagent_max_tool_calls", "subagent_max_tokens",
                 "subagent_max_cost_usd")
ON_WIDENS = ("parallel_tools", "thinking", "exact_tokens", "sandbox_network", "memory.commit")
MUST_EQUAL = ("provider", "model", "subagent_model", "keymap", "mcp_servers", "hooks", "trusted_projects", "memory.path")
NO_DIRECTION = ("context", "retry_base_delay", "memory.stale_days", "handoff_at_share", "context_window", "checkpoints",
                "checkpoint_max_file_mb", "checkpoints_keep_days", "checkpoints_max_mb", "notify",
                "notify_with", "notify_after", "result_lines", "diff_lines", "seam_policy", "cache_ttl")
SPECIAL = ("permission_mode", "sandbox", "allow", "deny", "narration_min_words", "protected_paths")


def _get(s: Settings, key: str) -> Any:
    head, _, rest = key.partition(".")
    return getattr(getattr(s, head), rest) if rest else getattr(s, head)


def widenings(ours: Settings, theirs: Settings, interactive: bool) -> list[str]:
    """What `ours` lets rhapsody do that `theirs` does not, stated here independently of rhapsody's own table."""
    out = []
    if MODES[permission_mode(ours, interactive)] > MODES[permission_mode(theirs, interactive)]:
        out.append("permission_mode")
    if SANDBOXES[ours.sandbox] < SANDBOXES[theirs.sandbox]:
        out.append("sandbox")
    if not set(ours.allow) <= set(theirs.allow):
        out.append("allow")
    if not set(theirs.deny) <= set(ours.deny):
        out.append("deny")
    if not set(theirs.protected_paths) <= set(ours.protected_paths):
        out.append("protected_paths")
    if ours.narration_min_words < theirs.narration_min_words:
        out.append("narration_min_words")
    for key in BIGGER_WIDENS:
        mine, user = _get(ours, key), _get(theirs, key)
        if user is not None and (mine is None or mine > user):
            out.append(key)
    out += [key for key in ON_WIDENS if _get(ours, key) and not _get(theirs, key)]
    out += [key for key in MUST_EQUAL if _get(ours, key) != _get(theirs, key)]
    return out


def test_the_property_names_every_setting() -> None:
    named = {*BIGGER_WIDENS, *ON_WIDENS, *MUST_EQUAL, *NO_DIRECTION, *SPECIAL}
    fields = {f"memory.{k}" for k in Settings.model_fields["memory"].annotation.model_fields}  # type: ignore[union-attr]
    assert named == (set(Settings.model_fields) - {"memory"}) | fields  # a new setting must be placed above


TEXT = st.text(st.characters(exclude_categories=("Cs", "Cc")), max_size=12)
JUNK = st.one_of(st.integers(-5, 10**6), st.floats(allow_nan=False, allow_infinity=False, width=32), st.booleans(),
                 TEXT, st.lists(TEXT, max_size=3),
                 st.dictionaries(st.sampled_from(["a", "command", "url", "path"]), TEXT, max_size=2))
GOOD: dict[str, st.SearchStrategy[Any]] = {
    "permission_mode": st.sampled_from(list(MODES)), "sandbox": st.sampled_from(list(SANDBOXES)),
    "sandbox_network": st.booleans(), "allow": st.lists(st.sampled_from(["bash", "bash:ls*", "write_file", "*",
                                                                          "unsandboxed:*", "read_file:.env"]), max_size=3),
    "deny": st.lists(st.sampled_from(["bash:rm*", "bash:curl*", "write_file:*"]), max_size=2),
    "provider": st.sampled_from(["anthropic", "openai", "bedrock"]), "model": st.sampled_from(["m1", MODEL]),
    "narration_min_words": st.integers(-1, 40), "max_tokens": st.integers(0, 10**5), "bash_timeout": st.floats(-1, 10**4),
    "max_steps_per_turn": st.integers(0, 50), "max_cost_usd": st.floats(-1, 100), "parallel_tools": st.booleans(),
    "thinking": st.booleans(), "exact_tokens": st.booleans(), "context": st.sampled_from(["manual", "rolling", "x"]),
    "handoff_at_tokens": st.integers(0, 10**6), "keymap": st.dictionaries(st.sampled_from(["interrupt", "quit"]),
                                                                         st.sampled_from(["f12", "q"]), max_size=2),
    "trusted_projects": st.just(["/"]), "retries": st.integers(-1, 20),
    "mcp_servers": st.dictionaries(st.sampled_from(["evil", "notes"]), st.fixed_dictionaries(
        {"command": st.sampled_from(["sh", "notes-server"])}), max_size=1),
    "memory": st.fixed_dictionaries({}, optional={"path": st.sampled_from(["src", "../x", "docs/memory"]),
                                                  "commit": st.booleans(), "map_cap": st.integers(-1, 10**5),
                                                  "nope": st.integers()}),
    "subagent_model": st.sampled_from(["m1", MODEL]), "subagent_max_tool_calls": st.integers(-1, 100),
    "subagent_max_tokens": st.integers(-1, 10**7), "subagent_max_cost_usd": st.floats(-1, 100),
    "colour": st.just("blue"), "mcp": st.just({"x": 1}), "hooks": st.just(["sh"]),
}
project_files = st.dictionaries(st.sampled_from(sorted(GOOD)), st.none(), max_size=8).flatmap(
    lambda keys: st.fixed_dictionaries({k: st.one_of(GOOD[k], JUNK) for k in keys}))
USERS = ["", 'permission_mode = "yolo"\nsandbox = "off"\nallow = ["bash:ls*"]\n', 'permission_mode = "read-only"\n',
         'sandbox = "read-only"\ndeny = ["bash:rm*"]\nmax_steps_per_turn = 5\n', 'trusted_projects = ["/elsewhere"]\n',
         'allow = ["bash"]\n[memory]\ncommit = true\nmap_cap = 10\n', 'sandbox_network = true\nbash_timeout = 10\n']
FLAGS = st.lists(st.sampled_from([("--model", "X"), ("--permission-mode", "ask"), ("--permission-mode", "yolo"),
                                  ("--permission-mode", "read-only"), ("--provider", "anthropic"), ("--thinking",),
                                  ("--narration-min-words", "3"), ("--context", "rolling"), ("--parallel-tools",),
                                  ("--handoff-at-tokens", "5000")]), max_size=3)
ENV = st.dictionaries(st.sampled_from(["RHAPSODY_PERMISSION_MODE", "RHAPSODY_SANDBOX", "RHAPSODY_SANDBOX_NETWORK",
                                       "RHAPSODY_MODEL", "RHAPSODY_BASH_TIMEOUT", "RHAPSODY_MAX_STEPS_PER_TURN"]),
                      st.sampled_from(["ask", "yolo", "read-only", "off", "workspace-write", "true", "false", "7",
                                       "not-a-mode"]), max_size=2)


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


def toml(data: dict[str, Any]) -> str:
    return "".join(f"{json.dumps(k)} = {toml_value(v)}\n" for k, v in data.items())


def start_settings(front_end: str, root: Path, argv: list[str]) -> Settings:
    """The settings as `rhapsody` builds them for `front_end`: the real parser, the trust question answered no."""
    ns = _parser().parse_args(argv + {"plain": ["--plain"], "headless": ["-p", "task"]}.get(front_end, []))
    if front_end == "trust question":
        offer(root, lambda _q: "n")
    return load_settings(root, _flags(ns))


def outcome(front_end: str, root: Path, argv: list[str]) -> Settings | str:
    try:
        return start_settings(front_end, root, argv)
    except ConfigError as exc:
        return f"error: {exc}"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(project_file=project_files, user=st.sampled_from(USERS), flags=FLAGS, env=ENV,
       front_end=st.sampled_from(FRONT_ENDS))
def test_a_project_never_widens_what_the_user_has_in_any_front_end(
        project_file: dict[str, Any], user: str, flags: list[tuple[str, ...]], env: dict[str, str], front_end: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    argv = [part for flag in flags for part in flag]
    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CONFIG_HOME", f"{folder}/config")
        for name, value in env.items():
            mp.setenv(name, value)
        root = Path(folder, "proj")
        root.mkdir()
        Path(folder, "config", "rhapsody").mkdir(parents=True)
        user_config_path().write_text(user, encoding="utf-8")
        config = write_project_config(root, toml(project_file))
        ours = outcome(front_end, root, argv)
        config.unlink()
        theirs = outcome(front_end, root, argv)
    capsys.readouterr()
    if isinstance(theirs, str) or isinstance(ours, str):
        assert ours == theirs  # the user's own bad setting is the one error; the project's never is
        return
    assert widenings(ours, theirs, interactive=front_end != "headless") == []
    assert os.environ.get("RHAPSODY_PERMISSION_MODE") is None  # the environment is back as it was
