"""Fourth attack pass on the layers around the sandbox: settings, allow rules, the tools that run
outside the sandbox and the files rhapsody writes for itself. Each test failed on main before the
fix it names (2026-12-01); the attacks that held are listed in docs/security.md."""

from __future__ import annotations

from rhapsody.core.session.records import parsed
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rhapsody.cli import main
from rhapsody.core.errors import HistoryError
from rhapsody.core.access.permissions import Call, Rules, decide_call
from rhapsody.core.session.session import Session
from rhapsody.loopback.script import call, say
from rhapsody.tools.shell import parse

from tests.conftest import MODEL, Stub, collect
from tests.test_cli import rhapsody

HOSTILE_ID = "20261201-000000-abcdef"


def plant_history(project: Path, session: str) -> Path:
    """A history a cloned repository commits (or a downloaded one): its session record names `session`."""
    folder = project / ".rhapsody" / "history"
    folder.mkdir(parents=True)
    records = [{"v": 1, "seq": 0, "ts": 1.0, "kind": "session", "session": session, "cwd": str(project),
                "version": "0", "model": MODEL, "system": "s", "tools": []},
               {"v": 1, "seq": 1, "ts": 2.0, "kind": "message", "role": "user", "content": "hi"}]
    path = folder / f"{HOSTILE_ID}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_own_files_boundary_a_history_cannot_name_where_its_export_is_written(
        project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`rhapsody export` named its page after the session record's `session`: `../../../outside/pwned`
    wrote `outside/pwned.html` beside the project. Now the history is refused, one line, status 2."""
    outside = tmp_path / "outside"
    outside.mkdir()
    plant_history(project, "../../../outside/pwned")
    assert main(["export", "--html", "--cwd", str(project)]) == 2
    assert "is not a session id" in capsys.readouterr().err
    assert list(outside.iterdir()) == [] and not (project / ".rhapsody" / "exports").exists()


def test_own_files_boundary_a_resumed_history_cannot_name_where_field_notes_go(
        project: Path, tmp_path: Path, stub: Stub) -> None:
    """A resumed session took its id from the record, and micro_handoff writes `notes/ID-seamN.md`: the
    note of `../../../outside/x` landed outside. Resuming such a history is now a one-line error."""
    path = plant_history(project, "../../../outside/x")
    with pytest.raises(HistoryError, match="is not a session id"):
        Session.resume(project, path)
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": stub.server.url}
    result = rhapsody("-p", "go", "--resume", HOSTILE_ID, "--cwd", str(project), "--model", MODEL, env=env)
    assert result.returncode == 2 and "is not a session id" in result.stderr and "Traceback" not in result.stderr


# Each runs a second program, or writes a file its allow rule never named, in the real bash (the test
# checks that first): `{M}` is a marker outside the repository. Each was allowed by `bash:PROGRAM*`.
SECOND_PROGRAM = [
    "tar cf /dev/null --checkpoint=1 --checkpoint-act=exec='touch {M}' f",  # an abbreviated long option
    "tar xf ../x.tar --to-comm='touch {M}'",
    "make --ev='x: ; touch {M}' x",
    "sort --out={M} f",
    "sed -n '1e touch {M}' f",  # sed's e command runs its text
    "sed 's|hi|touch {M}|e' f",  # the s command's e flag runs the result
    "sed -e'1e touch {M}' f",
    "sed -n 'w {M}' f",  # sed's w command writes a file
    "sed 's/[/]/x/;1e touch {M};/' f",  # a slash in a bracket expression is no delimiter to sed
    "sed -n ':x/;1e touch {M};/' f",  # a label ends at the semicolon
    "perl -ne 'system(\"touch {M}\")' f",  # -e inside a cluster of perl's options
    "awk 'BEGIN{{print \"x\" > \"{M}\"}}'",
    "find . -maxdepth 0 -fprint0 {M}",
    "git ls-remote --upload-pack='touch {M}; false' .",
    "git grep -O'touch {M}' hi",
    "git difftool -y -x 'touch {M}' HEAD~1",
    "git rebase -x 'touch {M}' HEAD~1",
    "git archive -o {M} HEAD",
    "git bundle create {M} HEAD",
    "make --eval='x: ; touch {M}' x",
    "tar cIf 'touch {M}; cat' /dev/null f",  # tar's old-style option cluster: I takes the next word
    "sed --expr='1e touch {M}' f",
    "git --git-dir=evil.git --work-tree=. status",  # a config the model wrote with write_file names a program
]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository with two commits, a Makefile and an archive beside it."""
    top = tmp_path_factory.mktemp("lab")
    repo = top / "r"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    (repo / "f").write_text("hi\n")
    (repo / "Makefile").write_text("all:\n")
    for step in (["init", "-q"], ["add", "."], ["commit", "-qm", "1"]):
        subprocess.run([*git, *step], cwd=repo, check=True)
    (repo / "f").write_text("hi\nthere\n")
    subprocess.run([*git, "commit", "-qam", "2"], cwd=repo, check=True)
    subprocess.run(["tar", "cf", str(top / "x.tar"), "f"], cwd=repo, check=True)
    subprocess.run(["git", "init", "-q", "--bare", "evil.git"], cwd=repo, check=True)
    (repo / "evil.git" / "config").write_text(f"[core]\n\tbare = false\n\tfsmonitor = touch {top / 'M'}; false\n")
    return repo


@pytest.mark.parametrize("form", SECOND_PROGRAM)
def test_rules_boundary_an_allow_rule_for_a_program_never_runs_another_unasked(form: str, lab: Path) -> None:
    marker = lab.parent / "M"
    marker.unlink(missing_ok=True)
    command = form.format(M="../M")  # relative: the folder pytest makes has the letters sed's commands use
    env = {**os.environ, "GIT_EDITOR": "true", "GIT_SEQUENCE_EDITOR": "true", "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["bash", "-c", command], cwd=lab, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                   timeout=20)
    subprocess.run(["git", "rebase", "--abort"], cwd=lab, capture_output=True)
    assert marker.exists(), f"the form no longer runs anything in bash: {command}"
    program = command.split()[0]
    for allow in (f"bash:{program}*", "bash"):
        rules = Rules(allow=[allow], parse=parse)
        for confinement in ("off", "workspace-write"):
            verdict = decide_call("ask", rules, Call("bash", command, True, False, confinement=confinement)).verdict
            assert verdict == "ask", (allow, confinement)


async def test_rules_boundary_an_abbreviated_option_does_not_run_unasked_headless(
        stub: Stub, project: Path, tmp_path: Path) -> None:
    """Headless, ask mode, sandbox off, the user allows `bash:tar*`: `--checkpoint-act=exec=` (getopt's
    prefix of --checkpoint-action) ran a command on the host; now it is refused (no human to ask)."""
    marker = tmp_path / "outside-marker"
    command = f"tar cf /dev/null --checkpoint=1 --checkpoint-act=exec='touch {marker}' app.py"
    stub.script(call("I will archive the file to check it is readable.", "bash", command=command), say("done"))
    wiring = stub.wire(project, permission_mode="ask", sandbox="off", allow=["bash:tar*"])
    await collect(wiring.agent.run("go"))
    assert not marker.exists()
    assert "no human can answer here" in json.dumps(stub.bodies()[-1])


def test_own_files_boundary_a_seam_record_shows_only_a_field_note_never_a_secret_file(
        project: Path, tmp_path: Path) -> None:
    """A committed history's seam record names its field note; `note_path = ".env"` put the user's own
    `.env` (created after cloning) unmasked into the resumed view and into `rhapsody export`'s page,
    the file meant for sharing. A note is now read only from `.rhapsody/notes/`."""
    from rhapsody.commands.export import page_html
    from rhapsody.core.session.records import Seam
    from rhapsody.view.render import seam_entry

    (project / ".env").write_text("STRIPE=sk_live_hunter2abcdefghijkl\nhunter2-plain\n")
    (project / "private").mkdir()
    (project / "private" / "plan.txt").write_text("hunter2-plan\n")
    figures = {"est_tokens": 10, "request_bytes": 100, "tool_use": 1, "text_blocks": 1}
    for note_path in (".env", "private/plan.txt", ".rhapsody/notes/../../.env"):
        record = {"v": 1, "seq": 2, "ts": 3.0, "kind": "seam", "seam": 1, "boundary": 1, "before": figures,
                  "after": figures, "asked_est_tokens": 10, "note_path": note_path}
        assert "hunter2" not in seam_entry(Seam.model_validate(record), project).body, note_path
        head = {"v": 1, "seq": 0, "ts": 1.0, "kind": "session", "session": HOSTILE_ID, "model": MODEL,
                "system": "s", "tools": []}
        message = {"v": 1, "seq": 1, "ts": 2.0, "kind": "message", "role": "user",
                   "content": [{"type": "text", "text": "hi"}]}
        assert "hunter2" not in page_html(parsed([head, message, record]), project, HOSTILE_ID), note_path
    notes = project / ".rhapsody" / "notes"
    notes.mkdir(parents=True)
    (notes / f"{HOSTILE_ID}-seam1.md").write_text("# Field note\nthe real note\n")
    record = {"kind": "seam", "seam": 1, "boundary": 1, "before": figures, "after": figures,
              "note_path": f".rhapsody/notes/{HOSTILE_ID}-seam1.md"}
    assert "the real note" in seam_entry(Seam.model_validate(record), project).body


# Programs whose arguments name a program to run, where the program may be missing on the test machine
# (ripgrep, fd, ssh, man pages, node): their manuals say so; each was allowed by `bash:PROGRAM*`.
NAMED_PROGRAM = [
    "rg --pre=./x.sh pattern", "fd -x touch", "fdfind --exec-batch rm", "ssh -o ProxyCommand='touch M' host",
    "ssh -oProxyCommand=x h", "scp -S ./prog a b:c", "man -P 'touch M' ls", "man --pager=x ls",
    "node -p 'require(\"fs\")'", "node --eval 1", "setarch x86_64 touch M", "run-parts ./hooks",
    "ssh-agent touch M", "npx cowsay", "npm exec -- touch M", "vim '+!touch M' x", "emacs --eval x",
    "gcc -wrapper touch,x x.c", "zip -T -TT 'touch M' x.zip f", "git submodule foreach touch M",
    "git bisect run touch M", "git filter-branch --tree-filter 'touch M' HEAD", "git config core.pager 'touch M'",
    "git clone --template=./tpl . copy", "git push --receive-pack=x .", "sort --compress-program=./x -S 1 f",
    "ruby -ne 'system(1)'", "perl -lpe 1 f", "awk -W exec=./x.awk", "gawk -Wexec=./x.awk",
]


@pytest.mark.parametrize("command", NAMED_PROGRAM)
def test_rules_boundary_options_that_name_a_program_ask(command: str) -> None:
    rules = Rules(allow=[f"bash:{command.split()[0]}*"], parse=parse)
    assert decide_call("ask", rules, Call("bash", command, True, False, confinement="off")).verdict == "ask"
    assert parse(command).opaque


CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4K\x07"  # OSC 52: the terminal puts `rm -rf ~` on the clipboard
ERASE = "\x1b[1A\x1b[2K"  # cursor up, erase the line: the tool line above disappears


def test_output_boundary_headless_text_never_sends_the_models_escape_sequences(
        stub: Stub, project: Path, tmp_path: Path) -> None:
    """`rhapsody -p` wrote the model's text to the terminal as it came: a model talked into it by a file
    it read could set the clipboard (OSC 52) or erase the line that shows which tool ran."""
    stub.script(call("I will list the files to see what the project holds.", "find_files", pattern="*.py"),
                say(f"{ERASE}all good{CLIPBOARD} done"))
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": stub.server.url}
    result = rhapsody("-p", "go", "--cwd", str(project), "--model", MODEL, env=env)
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "all good\\x1b]52;c;cm0gLXJmIH4K\\x07 done" in result.stdout  # shown, escaped


async def test_output_boundary_plain_mode_never_sends_the_models_escape_sequences(stub: Stub, project: Path) -> None:
    from tests.frontends.test_plain import plain_exchange

    stub.script(say(f"{ERASE}all good{CLIPBOARD} done"))
    printed = await plain_exchange(stub.wire(project), "go", " done")
    assert "\x1b" not in printed and "\x07" not in printed
    assert "all good\\x1b]52;c;" in printed  # the model's text was shown, escaped


def test_tools_boundary_a_projects_own_git_never_runs_through_an_empty_path_entry(
        stub: Stub, project: Path, tmp_path: Path) -> None:
    """With an empty PATH entry (`PATH=/usr/bin:`, common in hand-edited profiles), rhapsody's own git calls,
    made outside the sandbox, found the repository's committed `./git` first: the git tool's confinement
    check ran it on the host. PATH now keeps absolute folders only."""
    marker = tmp_path / "ran-outside"
    fake = project / "git"
    fake.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    fake.chmod(0o755)
    stub.script(call("I will look at the repository's status to see what changed.", "git", action="status"),
                say("done"))
    path = f"{Path(sys.executable).parent}::{os.environ['PATH']}"
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": stub.server.url, "PATH": path}
    result = rhapsody("-p", "go", "--cwd", str(project), "--model", MODEL, env=env, cwd=project)
    assert result.returncode in (0, 4), result.stderr
    assert not marker.exists()
    assert "?? git" in json.dumps(stub.bodies()[-1])  # the real git answered


def test_output_boundary_a_cloned_projects_server_names_never_reach_the_terminal_raw(
        stub: Stub, project: Path) -> None:
    """An untrusted `.mcp.json` names a server `x<OSC 52>y`: the line saying it waits for trust went to the
    terminal as written, in headless text mode and in `rhapsody mcp list` (the trust question escaped it)."""
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {f"x{CLIPBOARD}y": {"command": "true"}}}))
    stub.script(say("ok done"))
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": stub.server.url}
    for args in (("-p", "go", "--model", MODEL), ("mcp", "list")):
        result = rhapsody(*args, "--cwd", str(project), env=env)
        assert result.returncode == 0, result.stderr
        shown = result.stdout + result.stderr
        assert "\x1b" not in shown and "\x07" not in shown, args
        assert "x\\x1b]52;c;" in shown, args  # still named, escaped
