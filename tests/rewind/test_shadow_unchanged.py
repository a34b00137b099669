"""A checkpoint that finds nothing changed takes the last commit again; any change, or another rhapsody's
checkpoint in between, makes a new one that holds the tree as it is."""

from __future__ import annotations

from pathlib import Path

from rhapsody.rewind.shadow import Shadow


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
