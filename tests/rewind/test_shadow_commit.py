"""A checkpoint's commit is written by rhapsody itself, byte for byte the object `git commit-tree` would write,
and git reads it as its own (`fsck --strict`, `rev-parse`, `diff-tree`)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rhapsody.rewind.shadow import AUTHOR, Shadow


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata", "America/St_Johns"])  # +0000, +0530, -0330 or -0230
def test_the_commit_is_the_one_git_commit_tree_writes(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                      zone: str) -> None:
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        shadow = Shadow(project)
        snap = shadow.snapshot("rhapsody warm-up")
        tree = shadow._git("rev-parse", f"{snap.commit}^{{tree}}").decode().strip()
        for message in ("rhapsody s-1 turn 3 tool", "two\nlines", "ends with its line\n", "ends twice\n\n", ""):
            ours = shadow._commit(tree, message)
            text = shadow._git("cat-file", "commit", ours).decode()
            when = text.split("\n")[1].rsplit(" ", 2)[1:]  # author NAME <EMAIL> SECONDS ±HHMM
            assert when[1] == time.strftime("%z", time.localtime(int(when[0])))
            dates = {"GIT_AUTHOR_DATE": f"@{when[0]} {when[1]}", "GIT_COMMITTER_DATE": f"@{when[0]} {when[1]}"}
            theirs = shadow._git("commit-tree", tree, "-m", message, extra={**AUTHOR, **dates}).decode().strip()
            assert ours == theirs, (message, text)
        (project / "app.py").write_text("changed\n")
        after = shadow.snapshot("rhapsody s-1 turn 4 tool").commit
        assert [c.path for c in shadow.changes(snap.commit, after)] == ["app.py"]
        assert shadow._git("fsck", "--strict", "--no-dangling") == b""
        objects = shadow.git_dir / "objects"
        assert not list(objects.glob("*/tmp_obj_*"))  # nothing half-written is left
        assert {p.stat().st_mode & 0o777 for p in objects.glob("??/*")} == {0o444}
    finally:
        monkeypatch.undo()
        time.tzset()
