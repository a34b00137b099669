"""The fifth attack pass: what this round added (the state folder, web_fetch's addresses, the sink, schemas).

Each test is named after the boundary it guards, attacks it through the real agent or CLI against the
loopback model, and checks both that the attack failed and that the step it rode on ran."""

from __future__ import annotations

from pathlib import Path

import pytest

from rhapsody.sandbox.bwrap import bwrap_path
from rhapsody.rewind.shadow import Shadow

from tests.conftest import Stub


@pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed (.ci/run installs it)")
async def test_checkpoint_boundary_a_sandboxed_command_cannot_move_the_state_folder_aside_and_plant_a_fresh_one(
        stub: Stub, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """rhapsody run in the home folder: the state folder is bound read-only, but the folders above it were
    not, so `mv .local elsewhere` carried the mount away and a fresh state folder (a planted shadow, planted
    recall indexes) took its place. Every folder between the project and the state folder is now a mount
    point of its own, which cannot be renamed."""
    from tests.sandbox.test_sandbox import bash_results

    monkeypatch.setenv("XDG_STATE_HOME", str(project / ".local" / "state"))
    store = Shadow(project)
    first, _ = store.take("before")
    planted = store.git_dir / "planted"
    made, *moves = await bash_results(
        stub, project, "echo made > made.txt",
        f"mv .local .local-moved; mkdir -p {store.git_dir} && echo x > {planted}",
        f"mv .local/state .local/state-moved; mkdir -p {store.git_dir} && echo x > {planted}",
        f"mv .local/state/rhapsody .local/state/r2; mkdir -p {store.git_dir} && echo x > {planted}")
    assert not made.get("is_error") and (project / "made.txt").read_text() == "made\n"
    assert all(m.get("is_error") for m in moves) and not planted.exists()
    assert not (project / ".local-moved").exists() and not (project / ".local" / "state-moved").exists()
    assert store.has(first), "the checkpoint taken before the command is gone"
    commit, _ = Shadow(project).take("after")
    assert "made.txt" in {c.path for c in store.changes(first, commit)}


async def test_terminal_sink_boundary_the_rewind_list_shows_a_message_as_text_never_as_markup(
        stub: Stub, project: Path) -> None:
    """The rewind list's lines quote the human's messages (an imported or resumed history's too) and went
    to the option list as strings, which Textual reads as markup: `[/x]` ended the app in a MarkupError and
    `[@click=...]` made a link that runs an app action. They are Text now, through the sink's function."""
    from rich.text import Text
    from textual.widgets import OptionList

    from rhapsody.frontends.app.app import RhapsodyApp
    from rhapsody.frontends.app.rewind import RewindScreen
    from rhapsody.loopback.script import say
    from tests.conftest import until
    from tests.frontends.test_app import type_and_send, wait_idle

    message = "what does [/x] mean, [@click=app.quit]here[/] \x1b]0;owned\x07"
    stub.script(say("It closes a tag."))
    wiring = stub.wire(project)
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(120, 30)) as pilot:
        await type_and_send(pilot, message)
        await wait_idle(pilot)
        await type_and_send(pilot, "/rewind")
        await until(lambda: isinstance(app.screen, RewindScreen), pause=pilot.pause)
        listing = app.screen.query_one(OptionList)
        prompt = listing.get_option_at_index(0).prompt
        assert isinstance(prompt, Text)
        assert "what does [/x] mean, [@click=app.quit]here[/] \\x1b]0;owned\\x07" in prompt.plain
        assert "\x1b" not in prompt.plain and "[/x]" in listing.render_line(0).text


async def test_terminal_sink_boundary_the_apps_completions_and_rewind_question_escape_a_hostile_file_name(
        stub: Stub, project: Path) -> None:
    """Textual writes a Text's escape characters to the terminal as they are: a project file named with
    an OSC sequence reached it raw from the `@` completions and from the rewind's overwrite question. Both
    pass the sink's function now; the completion is still offered and the question still asked."""
    from rich.text import Text
    from textual.widgets import Static

    from rhapsody.frontends.app.app import RhapsodyApp
    from rhapsody.frontends.app.rewind import OverwriteScreen
    from rhapsody.frontends.app.widgets import PromptInput
    from tests.conftest import until

    name = "ev\x1b]0;owned\x1b\\il.txt"
    (project / name).write_text("x\n")
    wiring = stub.wire(project)
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(120, 30)) as pilot:
        app.query_one(PromptInput).text = "@evil"
        box = app.query_one("#completions", Static)
        await until(lambda: "il.txt" in box.render_line(0).text, pause=pilot.pause)
        assert "\x1b" not in box.render_line(0).text and "\\x1b]0;owned" in box.render_line(0).text
        app.push_screen(OverwriteScreen((name,)))
        await until(lambda: isinstance(app.screen, OverwriteScreen) and bool(app.screen.query(Static)), pause=pilot.pause)
        [shown] = [s.content for s in app.screen.query(Static) if "overwrite" in str(s.content)]
        assert isinstance(shown, Text) and "\\x1b]0;owned" in shown.plain and "\x1b" not in shown.plain


def test_typed_schema_boundary_a_transcript_nested_past_the_parser_is_one_line_naming_file_and_line(
        project: Path, tmp_path: Path) -> None:
    """A Claude Code line nested 100,000 deep ended `import` in an internal RecursionError; now it is one
    line naming the file and line, exit 2. A Codex call whose arguments nest that deep is kept verbatim
    (as any arguments that do not parse) and the rollout imports."""
    import json

    from tests.importer.test_import import imported, rhapsody
    from tests.transcripts import claude_session, codex_rollout, dump

    lines = claude_session(2)
    deep = dump(lines, tmp_path / "deep.jsonl")
    with deep.open("a") as f:
        f.write('{"type":"user","uuid":"u9","message":{"role":"user","content":' + "[" * 100_000 + "]" * 100_000 + "}}\n")
    result = rhapsody("import", str(deep), cwd=project)
    assert result.returncode == 2 and "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert result.stderr.strip() == f"rhapsody: {deep} line {len(lines) + 1}: nested too deeply to read"
    lines[-1]["message"]["content"] = [{"type": "tool_use", "id": "t9", "name": "Bash", "input": {"command": "x"}}]
    raw = json.dumps(lines[-1]).replace('"x"', "[" * 960 + '"x"' + "]" * 960)  # parses, but no writer takes it
    near = tmp_path / "near.jsonl"
    near.write_text("".join(json.dumps(line) + "\n" for line in lines[:-1]) + raw + "\n")
    result = rhapsody("import", str(near), cwd=project)
    assert result.returncode == 2 and "internal error" not in result.stderr
    assert result.stderr.strip() == f"rhapsody: {near} line {len(lines)}: nested deeper than 128 levels"
    rollout = codex_rollout(2)
    call = next(r for r in rollout if r.get("payload", {}).get("type") == "function_call")
    call["payload"]["arguments"] = "[" * 100_000 + "]" * 100_000
    records = imported(project, dump(rollout, tmp_path / "rollout-deep.jsonl"))
    assert '"_unparsed": "[[[[' in json.dumps(records) and "value_" in json.dumps(records)


def plant_deep_seam_history(project: Path) -> Path:
    """A cloned project's `.rhapsody/history/` holding a history whose seam line nests 100,000 deep."""
    import json

    folder = project / ".rhapsody" / "history"
    folder.mkdir(parents=True, exist_ok=True)
    planted = folder / "20200101-000000-abcdef.jsonl"
    head = json.dumps({"v": 1, "kind": "session", "session": "20200101-000000-abcdef", "ts": 1.0})
    planted.write_text(head + '\n{"kind":"seam","x":' + "[" * 100_000 + "]" * 100_000 + "}\n")
    return planted


async def test_typed_schema_boundary_a_planted_history_nested_past_the_parser_does_not_end_the_app(
        stub: Stub, project: Path) -> None:
    """The seam estimate reads the note costs of the project's other histories, and a cloned project can
    ship one whose seam line nests past the JSON parser: the RecursionError ended the app at its first
    status line. Such a line is skipped as a torn one is; the turn runs and the status bar shows."""
    from rhapsody.frontends.app.app import RhapsodyApp
    from rhapsody.frontends.app.widgets import StatusBar
    from rhapsody.loopback.script import say
    from tests.frontends.test_app import type_and_send, wait_idle

    plant_deep_seam_history(project)
    stub.script(say("The answer is 42."))
    wiring = stub.wire(project)
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(120, 30)) as pilot:
        await type_and_send(pilot, "what is the answer")
        await wait_idle(pilot)
        assert any("The answer is 42." in e.text for e in app.transcript.entries)
        assert app.query_one(StatusBar).render_line(0).text.strip()
    assert app.return_code in (None, 0)


def test_typed_schema_boundary_strip_of_a_file_nested_past_the_parser_is_one_line_exit_2(tmp_path: Path) -> None:
    """`rhapsody strip` of a body nested 100,000 deep ended in an internal error (exit 1); the contract is one
    line naming the problem and exit 2. A well-formed body beside it still strips."""
    import json

    from tests.importer.test_import import rhapsody

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    result = rhapsody("strip", str(deep), cwd=tmp_path)
    assert result.returncode == 2 and "internal error" not in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.strip() == f"rhapsody: {deep} is not a request body: nested deeper than the JSON parser goes"
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
    done = rhapsody("strip", str(good), "--json", cwd=tmp_path)
    assert done.returncode == 0 and json.loads(done.stdout)["valid"] is True


def test_project_config_boundary_a_config_nested_past_the_parser_is_one_line_naming_it(
        project: Path, stub: Stub) -> None:
    """A cloned project's `.rhapsody/config.toml` nesting an array 100,000 deep ended every command in an
    internal RecursionError. It is now a malformed file like any other: one line naming it, exit 2, and
    once the file is fixed the turn runs."""
    from rhapsody.loopback.script import say
    from tests.conftest import MODEL
    from tests.test_cli import rhapsody

    (project / ".rhapsody").mkdir(exist_ok=True)
    config = project / ".rhapsody" / "config.toml"
    config.write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    stub.script(say("Opened fine."))
    env = {"ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789", "ANTHROPIC_BASE_URL": stub.server.url}
    result = rhapsody("-p", "hello", "--cwd", str(project), "--model", MODEL, env=env)
    assert result.returncode == 2 and "internal error" not in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.strip() == f"rhapsody: {config}: nested deeper than the TOML parser goes"
    config.write_text("max_steps_per_turn = 5\n")
    again = rhapsody("-p", "hello", "--cwd", str(project), "--model", MODEL, env=env)
    assert again.returncode == 0 and "Opened fine." in again.stdout


def test_typed_schema_boundary_a_blocks_ids_of_the_wrong_type_are_one_line_naming_file_and_line(
        project: Path, tmp_path: Path) -> None:
    """The conversation's shape is read before the parser's strict reading of each block, and it hashes a
    result's `tool_use_id`: an object there ended `import` in an internal TypeError. Each block's ids are
    now typed at the boundary; the same transcript with string ids imports."""
    from tests.importer.test_import import imported, rhapsody
    from tests.transcripts import claude_session, dump

    lines = claude_session(2)
    lines[-1]["message"]["content"] = [{"type": "tool_result", "tool_use_id": {"a": 1}, "content": "x"}]
    bad = dump(lines, tmp_path / "bad.jsonl")
    result = rhapsody("import", str(bad), cwd=project)
    assert result.returncode == 2 and "internal error" not in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.strip() == (f"rhapsody: {bad} line {len(lines)}: 'message.content.0.tool_use_id' "
                                     "is not a string (an object)")
    assert imported(project, dump(claude_session(2), tmp_path / "good.jsonl"))
