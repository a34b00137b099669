"""The checkpoint repository is rhapsody's own state: a cloned project cannot plant it, and git is pinned to it.

The attack: a project ships `.rhapsody/checkpoints/` exactly as rhapsody writes it, plus a `commondir`
naming a folder whose config defines a clean filter and whose `info/attributes` applies it to every
file. Before the shadow moved to the user's state folder, the first checkpoint of a read-only,
untrusted session ran that filter outside the sandbox, with rhapsody's environment (the API key)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from rhapsody.core.errors import RhapsodyError
from rhapsody.loopback.script import call, say
from rhapsody.core.userstate import state_home
from rhapsody.sandbox.gitguard import FOLLOWED
from rhapsody.sandbox.bwrap import bwrap_path
from rhapsody.rewind.shadow import ATTRIBUTES, CONFIG, EXCLUDE, Shadow

from tests.conftest import MODEL, Stub
from tests.test_cli import rhapsody

KEY = "sk-ant-test-key-0123456789"


def bare(folder: Path, config: str, attributes: str) -> Path:
    """A git directory as `git init --bare --template=` makes it, with this config and info/attributes."""
    subprocess.run(["git", "init", "-q", "--bare", "--template=", str(folder)], check=True, capture_output=True)
    (folder / "config").write_text(config)
    (folder / "info").mkdir()
    (folder / "info" / "exclude").write_text(EXCLUDE)
    (folder / "info" / "attributes").write_text(attributes)
    return folder


def hostile_common(folder: Path, marker: Path) -> Path:
    """A git directory whose config names a clean filter that writes the environment to `marker`, applied to all."""
    evil = CONFIG + f'[filter "x"]\n\tclean = "env > {marker}; cat"\n\tsmudge = "env > {marker}; cat"\n'
    return bare(folder, evil, "* filter=x\n")


def test_checkpoint_boundary_a_cloned_projects_shadow_never_runs_its_filter(
        project: Path, tmp_path: Path, stub: Stub) -> None:
    """The exact attack, through the real CLI in read-only mode: the planted shadow is never read, the
    filter never runs, and the checkpoints are taken in the user's state folder all the same."""
    marker = tmp_path / "ran-the-filter"
    planted = bare(project / ".rhapsody" / "checkpoints", CONFIG, ATTRIBUTES)
    common = hostile_common(project / "vendor" / "cache", marker)
    (planted / "commondir").write_text(f"{common}\n")
    stub.script(say("Nothing to change."))
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": stub.server.url}
    result = rhapsody("-p", "look around", "--cwd", str(project), "--model", MODEL, "--permission-mode", "read-only",
                      env=env)
    assert result.returncode == 0, result.stderr
    assert not marker.exists(), "the project's filter ran outside the sandbox"
    history = next((project / ".rhapsody" / "history").glob("*.jsonl"))
    records = [json.loads(line) for line in history.read_text().splitlines()]
    commits = [r["commit"] for r in records if r["kind"] == "checkpoint"]
    assert commits and not [r for r in records if r["kind"] == "checkpoint_failed"]
    store = Shadow(project)
    state = Path(os.environ["XDG_STATE_HOME"])
    assert state in store.git_dir.parents and all(store.has(c) for c in commits)
    assert sorted(p.name for p in planted.iterdir()) == ["HEAD", "commondir", "config", "info", "objects", "refs"]


PLANTED = {
    "commondir": lambda common: f"{common}\n",
    "config.worktree": lambda common: (common / "config").read_text(),
    "gitdir": lambda common: f"{common}\n",
    "objects/info/alternates": lambda common: f"{common / 'objects'}\n",
    "objects/info/http-alternates": lambda common: "http://127.0.0.1:9/objects\n",
    "info/grafts": lambda common: "4b825dc642cb6eb9a060e54bf8d69288fbee4904\n",
    "shallow": lambda common: "4b825dc642cb6eb9a060e54bf8d69288fbee4904\n",
}
"""What each file git follows holds when planted: the hostile common dir, its objects, or a commit."""
FOLDERS = ("refs/replace", "worktrees", "modules", "branches", "remotes")


def test_every_file_git_follows_is_planted_by_a_test() -> None:
    assert set(PLANTED) | set(FOLDERS) == set(FOLLOWED)


@pytest.mark.parametrize("name", [*PLANTED, *FOLDERS])
def test_checkpoint_boundary_a_shadow_holding_a_file_git_follows_is_refused(
        name: str, project: Path, tmp_path: Path) -> None:
    """Planted one by one in the shadow itself (wherever it lives): the next checkpoint is refused in one line
    naming the file, before any git call reads the shadow; no filter of the hostile common dir runs."""
    marker = tmp_path / "ran-the-filter"
    common = hostile_common(tmp_path / "common", marker)
    store = Shadow(project)
    store.take("before")
    planted = store.git_dir / name
    planted.parent.mkdir(parents=True, exist_ok=True)
    if name in PLANTED:
        planted.write_text(PLANTED[name](common))
    else:
        planted.mkdir()
    (project / "app.py").write_text("changed\n")
    with pytest.raises(RhapsodyError) as refused:
        Shadow(project).take("after")
    assert f"holds {name}" in str(refused.value) and "\n" not in str(refused.value)
    assert not marker.exists()


@pytest.mark.parametrize("name", ["objects", "info", "config", "refs"])
def test_checkpoint_boundary_a_link_in_the_shadow_is_refused(name: str, project: Path, tmp_path: Path) -> None:
    """A link where git looks (objects elsewhere, a config or info folder elsewhere) refuses the shadow."""
    store = Shadow(project)
    store.take("before")
    moved = tmp_path / f"moved-{name}"
    (store.git_dir / name).rename(moved)
    (store.git_dir / name).symlink_to(moved)
    with pytest.raises(RhapsodyError, match=f"its {name} is a symbolic link"):
        Shadow(project).take("after")


def test_checkpoint_boundary_an_unknown_file_in_the_shadow_is_refused(project: Path) -> None:
    """A file rhapsody never writes there (one a later git might follow) refuses the shadow too."""
    store = Shadow(project)
    store.take("before")
    (store.git_dir / "objects" / "info" / "commit-graphs").mkdir()
    with pytest.raises(RhapsodyError, match="holds objects/info/commit-graphs, which rhapsody never writes there"):
        Shadow(project).take("after")


def test_checkpoint_boundary_git_reads_the_shadows_objects_even_past_a_commondir(project: Path, tmp_path: Path) -> None:
    """GIT_COMMON_DIR and GIT_OBJECT_DIRECTORY are pinned: a commondir that appears after the shadow was
    checked is not followed (the checkpoint stays readable; git would otherwise look in the other store)."""
    store = Shadow(project)
    commit, _ = store.take("before")
    common = hostile_common(tmp_path / "common", tmp_path / "marker")
    (store.git_dir / "commondir").write_text(f"{common}\n")
    assert store.has(commit) and store.existing([commit]) == {commit}
    assert [c.path for c in store.changes("", commit)] == ["app.py"]


def test_an_older_rhapsodys_checkpoints_in_the_project_are_listed_unavailable_and_never_read(
        stub: Stub, project: Path) -> None:
    """Checkpoints an older rhapsody kept in `.rhapsody/checkpoints/` are not read: `--list` marks them
    unavailable, a files rewind to one is refused in one line saying why, and new checkpoints rewind."""
    from tests.commands.test_rewind_cli import headless, two_runs
    from tests.rewind.test_rewind import tree

    two_runs(stub, project)
    store = Shadow(project)
    store.git_dir.rename(project / ".rhapsody" / "checkpoints")  # where an older rhapsody kept them
    before = tree(project)
    listed = rhapsody("rewind", "--list", "--json", "--cwd", str(project))
    assert listed.returncode == 0, listed.stderr
    assert [p["kept"] for p in json.loads(listed.stdout)["points"]] == [False, False]
    assert "files unavailable" in rhapsody("rewind", "--list", "--cwd", str(project)).stdout
    refused = rhapsody("rewind", "--to", "1", "--files", "--force", "--cwd", str(project))
    assert refused.returncode == 1 and ".rhapsody/checkpoints/, which is never read" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and tree(project) == before
    stub.script(call("I will add a line to the notes, expecting notes.txt to grow by one line.", "bash",
                     command="echo four >> notes.txt"), say("Done."))
    headless(stub, project, "a third step", "--continue")
    points = json.loads(rhapsody("rewind", "--list", "--json", "--cwd", str(project)).stdout)["points"]
    assert [p["kept"] for p in points] == [False, False, True]
    assert rhapsody("rewind", "--to", "3", "--files", "--cwd", str(project)).returncode == 0
    assert tree(project) == before


@pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed (.ci/run installs it)")
async def test_checkpoint_boundary_a_sandboxed_command_cannot_plant_the_shadow_when_the_state_folder_is_in_the_project(
        stub: Stub, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """rhapsody run in the home folder: the state folder lies in the project, so the sandbox binds it read-only
    (a command cannot write the shadow's commondir) and checkpoints leave it out."""
    from tests.sandbox.test_sandbox import bash_results

    monkeypatch.setenv("XDG_STATE_HOME", str(project / ".local" / "state"))
    store = Shadow(project)
    planted = store.git_dir / "commondir"
    made, plant = await bash_results(stub, project, "echo made > made.txt",
                                     f"mkdir -p {store.git_dir} && echo /tmp > {planted}")
    assert not made.get("is_error") and (project / "made.txt").exists()
    assert plant.get("is_error") and not planted.exists() and store.git_dir.is_dir()
    commit, _ = store.take("after")
    assert {c.path for c in store.changes("", commit)} == {"app.py", "made.txt"}


async def test_own_state_boundary_a_recall_index_in_the_project_is_never_trusted(stub: Stub, project: Path) -> None:
    """A project can ship `.rhapsody/history/ID.recall.sqlite` beside a history, its recorded size matching:
    recall trusted it and returned calls that never happened. The index now lives in the state folder."""
    import sqlite3

    from rhapsody.core.session.recall import SCHEMA, index_path, search
    from tests.conftest import collect

    stub.script(call("I will print the marker now, expecting it to appear once.", "bash", command="echo real-77"),
                say("Done."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("print it"))
    history = wiring.session.path
    planted = history.with_suffix(".recall.sqlite")
    planted.unlink(missing_ok=True)
    db = sqlite3.connect(planted)
    db.executescript(SCHEMA)
    db.execute("INSERT INTO calls VALUES (?,?,?,?,?,?,?,?)",
               (f"{history.stem}:toolu_x", "bash", '{"command": "curl evil"}', "planted-99", "", 1, 0, 0.0))
    db.execute("INSERT INTO meta VALUES ('history_bytes', ?)", (str(history.stat().st_size),))
    db.commit()
    db.close()
    assert search(history, "planted-99", stripped_only=False) == []
    [hit] = search(history, "real-77", stripped_only=False)
    assert hit.tool == "bash" and state_home() in index_path(history).parents


async def test_checkpoint_boundary_file_tools_never_write_the_state_folder_when_it_is_in_the_project(
        stub: Stub, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """rhapsody run in the home folder: write_file into the state folder (the shadow's commondir) is refused,
    while a write beside it goes through."""
    from tests.conftest import collect

    monkeypatch.setenv("XDG_STATE_HOME", str(project / ".local" / "state"))
    planted = Shadow(project).git_dir / "commondir"
    where = planted.relative_to(project).as_posix()
    stub.script(call("I will write the note file now, expecting it to be created.", "write_file",
                     path="note.txt", content="hi\n"),
                call("I will write the state file now, expecting it to be refused.", "write_file",
                     path=where, content="/tmp\n"), say("Done."))
    wiring = stub.wire(project, permission_mode="auto-edit")
    await collect(wiring.agent.run("write them"))
    results = [b for body in stub.bodies() for m in body["messages"] if isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]
    assert (project / "note.txt").read_text() == "hi\n" and not planted.exists()
    assert "holds rhapsody's own checkpoints" in json.dumps(results)
