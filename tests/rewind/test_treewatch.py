"""Checkpoints between a turn's calls in a large tree look only where inotify says the tree changed; each
turn's own checkpoint scans it all (and catches what no event reports: a write through a memory map)."""

from __future__ import annotations

import mmap
import subprocess
from pathlib import Path

from rhapsody.rewind.shadow import MAX_PATHS, WATCH_FROM, Shadow
from rhapsody.rewind.treewatch import TreeWatch


def large(root: Path) -> Path:
    for i in range(WATCH_FROM):
        folder = root / f"pkg{i // 100:02d}"
        folder.mkdir(exist_ok=True)
        (folder / f"f{i}.txt").write_text(f"{i}\n")
    return root


def paths(shadow: Shadow, old: str, new: str) -> set[str]:
    return {c.path for c in shadow.changes(old, new)}


def test_the_events_name_every_change_a_command_makes(project: Path) -> None:
    shadow = Shadow(large(project))
    shadow.snapshot("first")
    base = shadow.snapshot("watched").commit  # the index now counts WATCH_FROM files: the watch is armed
    (project / "pkg03" / "f300.txt").write_text("changed in place\n")
    (project / "pkg04" / "f400.txt").unlink()
    script = "mkdir -p new/deep && echo x > new/deep/made.txt && mv pkg05 moved && git init -q sub && echo s > sub/s.txt"
    subprocess.run(["bash", "-c", script], cwd=project, check=True)
    (project / "big.bin").write_bytes(b"\0" * (6 * 1024 * 1024))
    quick = shadow.snapshot("between calls", thorough=False)
    changed = paths(shadow, base, quick.commit)
    assert {"pkg03/f300.txt", "pkg04/f400.txt", "new/deep/made.txt", "moved/f500.txt", "pkg05/f500.txt"} <= changed
    assert {(x[0], x[2]) for x in quick.left_out} == {("big.bin", "over 5 MB"), ("sub", "a nested repository")}
    full = shadow.snapshot("turn")  # a whole scan finds nothing more: the same tree
    assert paths(shadow, quick.commit, full.commit) == set() and sorted(full.left_out) == sorted(quick.left_out)


def test_a_write_through_a_memory_map_is_caught_by_the_turns_whole_scan(project: Path) -> None:
    shadow = Shadow(large(project))
    shadow.snapshot("first")
    shadow.snapshot("watched")
    target = project / "pkg01" / "f100.txt"
    with target.open("r+b") as f:
        mapped = mmap.mmap(f.fileno(), 0)
    base = shadow.snapshot("after the file was closed", thorough=False).commit
    try:
        mapped[:3] = b"MAP"  # the kernel reports no event for this
        mapped.flush()
        assert shadow.snapshot("between calls", thorough=False).commit == base  # the limited scan missed it
    finally:
        mapped.close()
    turn = shadow.snapshot("turn").commit
    assert paths(shadow, base, turn) == {"pkg01/f100.txt"}
    assert target.read_bytes().startswith(b"MAP")


def test_a_watch_answers_none_after_its_root_moves_and_a_burst_scans_it_all(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / "a").mkdir(parents=True)
    watch = TreeWatch.start(root)
    assert watch is not None and watch.changed() == set()
    (root / "a" / "one").write_text("1")
    assert watch.changed() == {"a/one"}
    root.rename(tmp_path / "elsewhere")
    assert watch.changed() is None
    assert MAX_PATHS < WATCH_FROM
