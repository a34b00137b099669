"""Checkpoints and rewind through the real loop: write_file, edit_file and sandboxed bash change the
tree, then files, conversation or both go back; the user's .git stays byte-identical throughout."""

from __future__ import annotations

from rhapsody.core.session.records import dumped
import hashlib
import os
import stat
from pathlib import Path

from rhapsody.core.session.checkpoints import points
from rhapsody.core.session.history import read_history
from rhapsody.core.session.session import Session
from rhapsody.loopback.script import call, say
from rhapsody.rewind.rewinder import CheckpointRewinder
from rhapsody.rewind.rewind import clean, rewind, turns
from rhapsody.rewind.shadow import Shadow
from rhapsody.wiring import Wiring, shadow
from rhapsody.commands.slash import run_command
from rhapsody.core.errors import RhapsodyError

from tests.conftest import Stub, collect

BASH = "mkdir -p gen && echo made > gen/out.txt && rm old.txt && chmod +x tool.sh"


def first_turn() -> list[dict[str, object]]:
    """Writes notes.txt, edits app.py, then bash creates gen/out.txt, deletes old.txt and makes tool.sh executable."""
    return [
        call("I will write the notes file with two lines, expecting it to be created.", "write_file",
             path="notes.txt", content="one\ntwo\n"),
        call("Now I fix the operator in app.py with an exact edit, expecting one line changed.", "edit_file",
             path="app.py", old="a - b", new="a + b"),
        call("Next a shell command creates gen/out.txt, removes old.txt and marks tool.sh executable.", "bash",
             command=BASH),
        say("Done: notes written, add fixed, gen made, old.txt removed."),
    ]


def second_turn() -> list[dict[str, object]]:
    """Appends a line to notes.txt with bash."""
    return [call("I will append a third line to notes.txt with the shell, expecting three lines.", "bash",
                 command="echo three >> notes.txt"),
            say("Appended.")]


def seed(project: Path) -> None:
    """Files the turns change: an untracked file bash deletes, a script bash makes executable."""
    (project / "old.txt").write_text("old\n")
    (project / "tool.sh").write_text("#!/bin/sh\n")
    os.chmod(project / "tool.sh", 0o640)


def git_hashes(project: Path) -> dict[str, str]:
    """SHA-256 of every file under .git, by path."""
    out = {}
    for folder, _, files in os.walk(project / ".git"):
        for name in files:
            path = Path(folder) / name
            out[str(path.relative_to(project))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def tree(project: Path) -> dict[str, tuple[bytes, int]]:
    """Every file outside .git and .rhapsody: bytes and permission bits."""
    out = {}
    for folder, dirs, files in os.walk(project):
        dirs[:] = [d for d in dirs if d not in (".git", ".rhapsody")]
        for name in files:
            path = Path(folder) / name
            out[str(path.relative_to(project))] = (path.read_bytes(), stat.S_IMODE(path.lstat().st_mode))
    return out


async def two_turns(stub: Stub, project: Path) -> Wiring:
    seed(project)
    stub.script(*first_turn(), *second_turn())
    wiring = stub.wire(project)
    await collect(wiring.agent.run("make the files"))
    await collect(wiring.agent.run("add a third line"))
    return wiring


async def test_every_turn_and_each_writing_call_is_checkpointed_and_reads_are_not(stub: Stub, project: Path) -> None:
    wiring = await two_turns(stub, project)
    records = read_history(wiring.session.path).records
    marks = [(r["at"], r.get("name")) for r in records if r["kind"] == "checkpoint"]
    assert marks == [("turn", None), ("tool", "write_file"), ("tool", "edit_file"), ("tool", "bash"), ("end", None),
                     ("turn", None), ("tool", "bash"), ("end", None)]
    runs = {r["tool_use_id"] for r in records if r["kind"] == "tool_run"}
    assert {r["tool_use_id"] for r in records if r["kind"] == "checkpoint" and r["at"] == "tool"} <= runs


async def test_rewinding_files_brings_back_the_tree_bash_changes_included_and_git_untouched(
        stub: Stub, project: Path) -> None:
    seed(project)
    before, git_before = tree(project), git_hashes(project)
    wiring = await two_turns(stub, project)
    assert (project / "gen" / "out.txt").exists() and not (project / "old.txt").exists()
    listed = turns(wiring.session, shadow(project, wiring.settings))
    assert [t.point.text for t in listed] == ["make the files", "add a third line"]
    assert {p for p, _, _ in listed[0].files} == {"notes.txt", "app.py", "gen/out.txt", "old.txt", "tool.sh"}
    assert (listed[0].added, listed[0].removed) == (4, 2)  # notes 2, app 1, gen 1; app 1, old 1
    messages = wiring.session.messages()
    done = rewind(wiring.session, shadow(project, wiring.settings), listed[0], "files", overwrite=False)
    assert not done.error, done.text
    assert tree(project) == before  # tool.sh back to 0640: the executable bit goes, the other bits stay
    assert not (project / "gen").exists()
    assert git_hashes(project) == git_before
    assert wiring.session.messages() == messages  # the conversation is as it was


async def test_a_files_rewind_can_itself_be_undone(stub: Stub, project: Path) -> None:
    wiring = await two_turns(stub, project)
    after = tree(project)
    store = shadow(project, wiring.settings)
    rewind(wiring.session, store, turns(wiring.session, store)[0], "files", overwrite=False)
    undo = turns(wiring.session, store)[-1]
    assert undo.point.kind == "rewind"
    assert not rewind(wiring.session, store, undo, "files", overwrite=False).error
    owner = {path: (data, mode & 0o700) for path, (data, mode) in tree(project).items()}
    assert owner == {path: (data, mode & 0o700) for path, (data, mode) in after.items()}  # git keeps the x bit only


async def test_files_changed_outside_rhapsody_are_named_and_kept_unless_overwrite(stub: Stub, project: Path) -> None:
    wiring = await two_turns(stub, project)
    (project / "notes.txt").write_text("mine\n")  # the person edits after the turn ended
    store = shadow(project, wiring.settings)
    first = turns(wiring.session, store)[0]
    asked = rewind(wiring.session, store, first, "files", overwrite=False)
    assert asked.error and "notes.txt" in asked.text and "app.py" not in asked.text
    assert (project / "notes.txt").read_text() == "mine\n"
    assert not rewind(wiring.session, store, first, "files", overwrite=True).error
    assert not (project / "notes.txt").exists()


async def test_rewinding_the_conversation_keeps_the_later_branch_on_disk_and_out_of_the_next_request(
        stub: Stub, project: Path) -> None:
    wiring = await two_turns(stub, project)
    store = shadow(project, wiring.settings)
    second = turns(wiring.session, store)[1]
    before = wiring.session.figures.context
    done = rewind(wiring.session, store, second, "conversation", overwrite=False)
    assert done.prompt == "add a third line"
    assert (project / "notes.txt").read_text() == "one\ntwo\nthree\n"  # files untouched
    now = wiring.session.request_and_size()[2]  # the estimate of the request the rewound context makes
    assert wiring.session.figures.context == now < before  # the status bar's context fell with the rewind
    stub.script(say("Sure."))
    await collect(wiring.agent.run("something else"))
    sent = stub.bodies()[-1]["messages"]
    texts = [b.get("text") for m in sent for b in (m["content"] if isinstance(m["content"], list) else [])]
    assert "make the files" in texts and "something else" in texts and "add a third line" not in texts
    resumed = Session.resume(project, wiring.session.path)
    assert [m.api for m in resumed.messages()] == [m.api for m in wiring.session.messages()]
    on_disk = [r for r in read_history(wiring.session.path).records if r["kind"] == "message"]
    assert any("add a third line" in str(r["content"]) for r in on_disk)
    assert [p.text for p in points(resumed.records, resumed.conversation.abandoned)] == [
        "make the files", "something else"]


async def test_rewinding_both_restores_files_and_conversation(stub: Stub, project: Path) -> None:
    seed(project)
    before = tree(project)
    wiring = await two_turns(stub, project)
    store = shadow(project, wiring.settings)
    done = rewind(wiring.session, store, turns(wiring.session, store)[0], "both", overwrite=False)
    assert done.prompt == "make the files" and not done.error
    assert tree(project) == before
    assert wiring.session.messages() == []


async def test_a_project_that_is_not_a_git_repository_is_checkpointed_and_restored(stub: Stub, tmp_path: Path) -> None:
    project = tmp_path / "plain"
    project.mkdir()
    (project / "app.py").write_text("def add(a, b):\n    return a - b\n")
    (project / ".gitignore").write_text("build/\n")
    (project / "build").mkdir()
    (project / "build" / "big.o").write_bytes(b"x")
    seed(project)
    before = tree(project)
    wiring = await two_turns(stub, project)
    (project / "build" / "big.o").write_bytes(b"changed")  # ignored: never recorded, never restored
    store = shadow(project, wiring.settings)
    assert not rewind(wiring.session, store, turns(wiring.session, store)[0], "files", overwrite=False).error
    assert tree(project) == {**before, "build/big.o": (b"changed", before["build/big.o"][1])}
    assert not (project / ".git").exists()


async def test_a_file_over_the_size_limit_is_left_out_named_and_a_restore_that_needs_it_refused(
        stub: Stub, project: Path) -> None:
    (project / "data.bin").write_bytes(b"0" * 2_000_000)
    stub.script(call("I will overwrite data.bin with a short text, expecting it to shrink.", "bash",
                     command="echo small > data.bin"), say("Shrunk."))
    wiring = stub.wire(project, checkpoint_max_file_mb=1)
    await collect(wiring.agent.run("shrink data"))
    first = next(r for r in dumped(wiring.session.records) if r["kind"] == "checkpoint")
    mtime = first["left_out"][0][3]
    assert first["left_out"] == [["data.bin", 2_000_000, "over 1 MB", mtime]] and mtime > 0
    store = shadow(project, wiring.settings)
    done = rewind(wiring.session, store, turns(wiring.session, store)[0], "files", overwrite=True)
    assert done.error and "data.bin" in done.text and "nothing was changed" in done.text
    assert (project / "data.bin").read_text() == "small\n"


async def test_restore_never_follows_a_link_out_of_the_root(stub: Stub, project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (project / "sub").mkdir()
    (project / "sub" / "f.txt").write_text("kept\n")
    stub.script(call("I will remove sub with the shell, expecting the folder gone.", "bash", command="rm -r sub"),
                say("Removed."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("remove sub"))
    (project / "sub").symlink_to(outside)  # someone puts an ignored link where the folder was
    (project / ".gitignore").write_text("/sub\n")
    store = shadow(project, wiring.settings)
    done = rewind(wiring.session, store, turns(wiring.session, store)[0], "files", overwrite=True)
    assert done.error and "'sub' is a symbolic link" in done.text and "nothing was changed" in done.text
    assert (project / ".gitignore").exists()
    (project / ".gitignore").unlink()  # not ignored, the link is part of the tree: the restore replaces it
    assert not rewind(wiring.session, store, turns(wiring.session, store)[0], "files", overwrite=True).error
    assert not (project / "sub").is_symlink() and (project / "sub" / "f.txt").read_text() == "kept\n"
    assert list(outside.iterdir()) == []


async def test_a_planted_shadow_config_is_refused_and_old_checkpoints_are_cleaned(stub: Stub, project: Path) -> None:
    wiring = await two_turns(stub, project)
    store = shadow(project, wiring.settings)
    first = turns(wiring.session, store)[0].point.commit
    assert store.has(first)
    clean(store, keep_days=30, max_bytes=1e12, now=__import__("time").time() + 31 * 86400, grace="now")
    assert not store.has(first)
    config = store.git_dir / "config"
    config.write_text(config.read_text() + "[core]\n\tfsmonitor = touch pwned\n")
    fresh = Shadow(project)
    assert not fresh.has(first) and not (project / "pwned").exists()
    wiring.agent.toolbox.checkpointer, wiring.agent.rewinder = fresh, CheckpointRewinder(fresh)
    said = run_command(wiring.agent, "/rewind")
    assert said.error and "is not the one rhapsody writes" in said.text and not (project / "pwned").exists()


async def test_calls_of_the_rewound_branch_stay_in_recall(stub: Stub, project: Path) -> None:
    from rhapsody.core.session.recall import search

    wiring = await two_turns(stub, project)
    assert search(wiring.session.path, "three") == []  # still in the context: nothing to recall
    store = shadow(project, wiring.settings)
    rewind(wiring.session, store, turns(wiring.session, store)[1], "conversation", overwrite=False)
    hits = search(wiring.session.path, "three")
    assert [h.tool for h in hits] == ["bash"] and "echo three" in hits[0].verbatim


def test_checkpoints_run_no_filter_and_convert_no_line_ending(project: Path) -> None:
    """Filters named in the user's global config or the project's .git/config, picked by .gitattributes, never
    run (they are programs), and a checkpoint holds a file's bytes exactly (no eol conversion)."""
    evil = f"[filter \"evil\"]\n\tclean = touch {project}/pwned-clean\n\tsmudge = touch {project}/pwned-smudge\n"
    (Path(os.environ["HOME"]) / ".gitconfig").write_text(evil)
    with open(project / ".git" / "config", "a") as config:
        config.write(evil + "[core]\n\tautocrlf = true\n\tfsmonitor = touch pwned-fsmonitor\n")
    (project / ".gitattributes").write_text("* filter=evil text eol=crlf\n")
    (project / "mixed.txt").write_bytes(b"one\r\ntwo\nthree\r\n")
    store = Shadow(project)
    first = store.snapshot("a").commit
    (project / "mixed.txt").write_bytes(b"changed\n")
    second = store.snapshot("b").commit
    change = next(c for c in store.changes(second, first) if c.path == "mixed.txt")
    assert store.blobs([change.new_blob])[change.new_blob] == b"one\r\ntwo\nthree\r\n"
    assert not [p for p in project.iterdir() if p.name.startswith("pwned")]


async def test_rewinding_the_conversation_across_a_seam_brings_back_the_context_before_it(
        stub: Stub, project: Path) -> None:
    from tests.core.session.test_handoff_e2e import handoff_turn

    stub.script(call("I will print a marker with the shell so the seam has a call to strip.", "bash",
                     command="echo marker-42"), say("Printed."), say("Yes."), handoff_turn(), say("Note written."),
                say("After the seam."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("print the marker"))
    await collect(wiring.agent.run("and again"))
    wiring.agent.request_handoff()
    await collect(wiring.agent.run())
    await collect(wiring.agent.run("go on"))

    def calls() -> list[str]:
        return [b.name for m in wiring.session.messages() for b in m.tool_uses()]

    assert wiring.session.conversation.seams and calls() == ["micro_handoff"]
    store = shadow(project, wiring.settings)
    listed = turns(wiring.session, store)
    assert [t.point.text for t in listed] == ["print the marker", "and again", "go on"]  # not the harness's request
    rewind(wiring.session, store, listed[2], "conversation", overwrite=False)
    assert wiring.session.conversation.seams  # "go on" came after the seam: it stays
    rewind(wiring.session, store, listed[1], "conversation", overwrite=False)
    assert not wiring.session.conversation.seams and calls() == ["bash"]
    stub.script(say("Again."))
    await collect(wiring.agent.run("and again, differently"))
    sent = stub.bodies()[-1]["messages"]
    assert [b["name"] for m in sent for b in m["content"] if b.get("type") == "tool_use"] == ["bash"]
    resumed = Session.resume(project, wiring.session.path)
    assert [m.api for m in resumed.messages()] == [m.api for m in wiring.session.messages()]


async def test_the_size_cap_removes_the_oldest_checkpoints_first(stub: Stub, project: Path) -> None:
    import time

    wiring = await two_turns(stub, project)
    store = shadow(project, wiring.settings)
    commits = [r["commit"] for r in dumped(wiring.session.records) if r["kind"] == "checkpoint"]
    assert clean(store, keep_days=30, max_bytes=1e12, now=time.time(), grace="now") == len(commits)
    assert clean(store, keep_days=30, max_bytes=1e12, now=time.time(), grace="now") == -1  # at most once a day
    (store.git_dir / "rhapsody-cleaned").unlink()
    big = store.size_bytes()
    kept = clean(store, keep_days=30, max_bytes=big - 1, now=time.time(), grace="now")
    assert 0 <= kept < len(commits) and store.size_bytes() < big
    assert store.has(commits[-1]) or kept == 0
    assert not store.has(commits[0])


async def test_a_deleted_link_comes_back_as_a_link_and_its_target_outside_is_untouched(
        stub: Stub, project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("theirs\n")
    (project / "out").symlink_to(outside)
    (project / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(project / "run.sh", 0o755)
    stub.script(call("I will remove the link and the script with the shell, expecting both gone.", "bash",
                     command="rm out run.sh"), say("Removed."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("remove them"))
    store = shadow(project, wiring.settings)
    assert not rewind(wiring.session, store, turns(wiring.session, store)[0], "files", overwrite=False).error
    assert (project / "out").is_symlink() and os.readlink(project / "out") == str(outside)
    assert outside.read_text() == "theirs\n"
    assert stat.S_IMODE((project / "run.sh").stat().st_mode) == 0o755


async def test_a_checkpoint_that_cannot_be_taken_is_recorded_and_the_turn_goes_on(stub: Stub, project: Path) -> None:
    from rhapsody.view.render import record_lines

    store = Shadow(project)
    store.ensure()
    (store.git_dir / "config").write_text("[core]\n\tfsmonitor = touch pwned\n")  # not rhapsody's: refused
    stub.script(*first_turn())
    wiring = stub.wire(project)
    await collect(wiring.agent.run("make the files"))
    assert (project / "notes.txt").exists() and not (project / "pwned").exists()
    failed = [r for r in dumped(wiring.session.records) if r["kind"] == "checkpoint_failed"]
    assert [r["at"] for r in failed] == ["turn", "tool", "tool", "tool", "end"]
    assert "its config is not the one rhapsody writes" in failed[0]["reason"] and "\n" not in failed[0]["reason"]
    lines = record_lines(wiring.session.records, project, wiring.session.id, wiring.session.conversation)
    assert any(line.kind == "error" and "checkpoint not taken" in line.text for _, line in lines)
    assert turns(wiring.session, shadow(project, wiring.settings)) == []


def test_a_shadow_half_built_when_killed_is_built_again_and_planted_links_are_not_followed(
        project: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("keep\n")
    state = Shadow(project).home
    state.mkdir(parents=True)
    (state / "checkpoints.new").symlink_to(elsewhere)  # as if planted, or a half-built shadow
    commit, _ = Shadow(project).take("first")
    assert Shadow(project).has(commit) and (elsewhere / "keep.txt").read_text() == "keep\n"
    (state / "checkpoints.lock").unlink()
    (state / "checkpoints.lock").symlink_to(elsewhere / "lock")
    try:
        Shadow(project).take("second")
        raise AssertionError("took a checkpoint through a linked lock")
    except RhapsodyError as exc:
        assert "cannot lock" in str(exc) and not (elsewhere / "lock").exists()
