"""A checkpoint that finds nothing changed takes the last commit again; any change, or another rhapsody's
checkpoint in between, makes a new one that holds the tree as it is."""

from __future__ import annotations

import mmap
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rhapsody.rewind.shadow import Shadow
from rhapsody.tools.gitscope import mount_kinds, settle_ns, stamps


def test_nothing_changed_takes_the_last_commit_again_and_a_change_does_not(project: Path) -> None:
    shadow = Shadow(project)
    first = shadow.snapshot("one").commit
    assert shadow.snapshot("two").commit == first
    (project / "new.txt").write_text("new\n")
    second = shadow.snapshot("three").commit
    assert second != first
    assert [c.path for c in shadow.changes(first, second)] == ["new.txt"]
    (project / "new.txt").write_text("newer\n")  # same size, same folder: only the file's own stamp moves
    third = shadow.snapshot("four").commit
    assert shadow.blobs([shadow.changes(second, third)[0].new_blob]) != {}
    assert shadow.snapshot("five").commit == third


def test_another_processes_checkpoint_in_between_is_not_taken_for_nothing_changed(project: Path) -> None:
    mine, theirs = Shadow(project), Shadow(project)
    first = mine.snapshot("mine").commit
    (project / "theirs.txt").write_text("theirs\n")
    assert theirs.snapshot("theirs").commit != first  # the index file now holds theirs.txt
    again = mine.snapshot("mine again").commit
    assert "theirs.txt" in {c.path for c in mine.changes(first, again)}


def _git_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `git` first on PATH that notes each call, then runs the real one: the log it writes."""
    real = shutil.which("git")
    assert real is not None
    shim = tmp_path / "shim"
    shim.mkdir()
    log = tmp_path / "git-calls.log"
    (shim / "git").write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {real} "$@"\n')
    (shim / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}:{os.environ['PATH']}")
    log.write_text("")
    return log


def _settle(root: Path) -> None:
    """Wait until what `root` holds has stood long enough for a checkpoint to trust its stamps."""
    time.sleep(settle_ns(stamps((root,))[0], mount_kinds()) / 1e9 + 0.02)


def _backdated(root: Path) -> None:
    """Every file's modification time put 10 s back, as a project's files written before the session are: git reads
    a file again while its time falls in the second its index was written, and the stamp scan keeps nothing then."""
    old = time.time_ns() - 10_000_000_000
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in [*files, *(d for d in dirs if os.path.islink(os.path.join(folder, d)))]:
            os.utime(os.path.join(folder, name), ns=(old, old), follow_symlinks=False)


def _settled_checkpoint(shadow: Shadow, root: Path) -> str:
    """A checkpoint whose scan saw every stamp settled and no file as new as its index: the next one may find the
    tree unchanged without git."""
    _backdated(root)
    _settle(root)
    return shadow.snapshot("settled", thorough=False).commit


def test_a_settled_small_tree_unchanged_costs_no_git_process_and_every_kind_of_change_is_seen(
        project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _git_counted(tmp_path, monkeypatch)
    (project / "pkg").mkdir()
    (project / "pkg" / "mod.py").write_text("x = 1\n")
    (project / "link").symlink_to("app.py")
    shadow = Shadow(project)
    shadow.snapshot("first")
    base = _settled_checkpoint(shadow, project)
    calls = log.read_text()
    assert shadow.snapshot("between calls", thorough=False).commit == base
    assert shadow.snapshot("the turn's own").commit == base
    assert log.read_text() == calls  # neither ran git: the whole tree was looked at by its stamps

    def rewritten_in_place() -> None:  # the same size, in the same folder: only the file's own stamps move
        target = project / "app.py"
        target.write_text(target.read_text().replace("a - b", "b - a"))

    changes = [
        ("app.py", rewritten_in_place),
        ("pkg/new.py", lambda: (project / "pkg" / "new.py").write_text("y = 2\n")),
        ("pkg/mod.py", lambda: (project / "pkg" / "mod.py").chmod(0o755)),  # the mode alone
        ("pkg/mod.py", lambda: (project / "pkg" / "mod.py").unlink()),
        ("link", lambda: ((project / "link").unlink(), (project / "link").symlink_to("pkg"))),
        ("moved.py", lambda: (project / "pkg" / "new.py").rename(project / "moved.py")),
    ]
    for path, change in changes:
        before = _settled_checkpoint(shadow, project)
        change()
        after = shadow.snapshot("between calls", thorough=False).commit
        assert path in {c.path for c in shadow.changes(before, after)}, path


def test_stamps_newer_than_their_settle_time_are_not_trusted_and_the_next_checkpoint_asks_git(
        project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write in the same tick as a checkpoint's scan could leave every stamp as the scan saw it: a scan whose
    newest stamp is younger than its file system's settle time (50 ms here, where the kernel stamps in
    nanoseconds; 2 s elsewhere) keeps nothing, and the next checkpoint asks git, which reads the file."""
    log = _git_counted(tmp_path, monkeypatch)
    _backdated(project)
    newest = max(max(st.st_mtime_ns, st.st_ctime_ns) for st in
                 [os.lstat(project)] + [os.lstat(os.path.join(folder, name)) for folder, dirs, files in os.walk(project)
                                        if ".git" not in Path(folder).relative_to(project).parts
                                        for name in [*dirs, *files] if name != ".git"])
    settle = settle_ns(stamps((project / "app.py",))[0], mount_kinds())
    now = [newest + settle - 5_000_000]
    shadow = Shadow(project, clock=lambda: now[0])
    first = shadow.snapshot("scanned 5 ms too soon", thorough=False).commit
    calls = log.read_text().count("ls-files")
    assert shadow.snapshot("again", thorough=False).commit == first
    assert log.read_text().count("ls-files") == calls + 1  # nothing was kept: git looked again
    now[0] = newest + settle + 5_000_000
    shadow.snapshot("scanned 5 ms after", thorough=False)
    calls = log.read_text().count("ls-files")
    assert shadow.snapshot("again", thorough=False).commit == first
    assert log.read_text().count("ls-files") == calls  # kept: the stamps alone said nothing changed


def test_another_processes_checkpoint_after_a_settled_one_is_not_taken_for_nothing_changed(project: Path) -> None:
    mine, theirs = Shadow(project), Shadow(project)
    mine.snapshot("mine")
    first = _settled_checkpoint(mine, project)
    theirs.snapshot("theirs")  # the same tree, but the index file is written again
    (project / "theirs.txt").write_text("theirs\n")
    assert theirs.snapshot("theirs").commit != first
    os.remove(project / "theirs.txt")  # the tree stands as mine last saw it, folder stamps aside
    assert {c.path for c in mine.changes(first, mine.snapshot("mine again").commit)} == set()


def _changed_after(shadow: Shadow, root: Path, change: Callable[[], object]) -> set[str]:
    before = _settled_checkpoint(shadow, root)
    change()
    return {c.path for c in shadow.changes(before, shadow.snapshot("after", thorough=False).commit)}


def test_what_git_reads_beyond_the_trees_stamps_still_decides(project: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by a hostile review of the stamp scan: a top-level `.rhapsody` that is a file (the scan's exclude is a
    folder's), a nested repository that stops being one by a change inside its `.git`, and the user's own excludes
    file outside the tree each change what git lists without a stamp of the tree moving."""
    config = tmp_path / "config"
    (config / "git").mkdir(parents=True)
    (config / "git" / "ignore").write_text("*.tmp\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    (project / "n.tmp").write_text("t\n")
    (project / ".rhapsody").write_text("one\n")
    shadow = Shadow(project)
    shadow.snapshot("first")
    assert ".rhapsody" in _changed_after(shadow, project, lambda: (project / ".rhapsody").write_text("two\n"))
    assert "n.tmp" in _changed_after(shadow, project, lambda: (config / "git" / "ignore").write_text("*.xyz\n"))

    subprocess.run(["git", "init", "-q", str(project / "sub")], check=True)
    (project / "sub" / "f.txt").write_text("s\n")
    nested = Shadow(project)
    assert any(x[0] == "sub" for x in nested.snapshot("a nested repository").left_out)
    assert "sub/f.txt" in _changed_after(nested, project, lambda: (project / "sub" / ".git" / "HEAD").unlink())


def test_a_write_through_a_memory_map_that_moves_no_stamp_is_seen_while_git_would_read_the_file(
        project: Path) -> None:
    """A write to a page of a shared mapping already written moves neither time. git reads a file again while
    its modification time falls in the second the index was written ("racily clean"); the stamp scan keeps
    nothing then, so the next checkpoint asks git, as it always did."""
    target = project / "db.bin"
    shadow = Shadow(project)
    for attempt in range(5):  # the file and the index written within one second (a loaded machine may split them)
        while time.time() % 1 > 0.3:
            time.sleep(0.02)
        target.write_bytes(b"A" * 4096)
        with target.open("r+b") as f:
            mapped = mmap.mmap(f.fileno(), 4096)
        mapped[0:1] = str(attempt).encode()  # new content each time: the index is written again
        shadow.snapshot("first")
        if target.stat().st_mtime_ns // 1_000_000_000 == shadow.index.stat().st_mtime_ns // 1_000_000_000:
            break
        mapped.close()
    else:
        pytest.fail("the file and the index were never written within one second")
    try:
        _settle(project)
        before = shadow.snapshot("settled", thorough=False).commit
        mapped[1:2] = b"C"  # the page is dirty already: no new stamp
        after = shadow.snapshot("after", thorough=False).commit
    finally:
        mapped.close()
    assert [c.path for c in shadow.changes(before, after)] == ["db.bin"]


def test_a_folder_that_became_a_file_and_a_file_that_became_a_folder_are_checkpointed(project: Path) -> None:
    (project / "pkg").mkdir()
    (project / "pkg" / "mod.py").write_text("x = 1\n")
    (project / "lib.py").write_text("y = 2\n")
    shadow = Shadow(project)
    first = shadow.snapshot("first").commit
    shutil.rmtree(project / "pkg")
    (project / "pkg").write_text("now a file\n")
    (project / "lib.py").unlink()
    (project / "lib.py").mkdir()
    (project / "lib.py" / "x.py").write_text("z = 3\n")
    second = shadow.snapshot("second").commit
    assert {c.path for c in shadow.changes(first, second)} == {"pkg", "pkg/mod.py", "lib.py", "lib.py/x.py"}
