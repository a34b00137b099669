"""The repository check's kept verdict (tools/gitscope.py `Verdicts`): bound to the stamps of what it read.

Each attack lets a first call check and keep a clean verdict, then plants, as a hostile command
outside the sandbox would, what would point git elsewhere or name a program; the second call
must run the check again (the count of checks rises) and no planted program may run."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from rhapsody.tools import gitscope
from rhapsody.tools.git import GitError, checked, git_facts, gitlinks, refusal, run_git
from rhapsody.rewind.shadow import Shadow

from tests.security.test_git_hostile import hostile


def kept(project: Path) -> gitscope.Verdicts:
    """Verdicts whose first check of `project` is kept (no settle time: the test's files are new)."""
    verdicts = gitscope.Verdicts(settle_ns=0)
    assert run_git(project, "rev-parse", "HEAD", verdicts=verdicts).strip()
    assert verdicts.checks == 1
    return verdicts


def outside_repo(tmp_path: Path) -> Path:
    other = tmp_path / "elsewhere"
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    return other


def test_an_unchanged_repository_is_checked_once_and_a_settling_one_every_time(project: Path) -> None:
    verdicts = kept(project)
    for _ in range(3):
        assert refusal(project, verdicts) is None
        assert gitlinks(project, verdicts) == []
    assert verdicts.checks == 1
    fresh = gitscope.Verdicts(settle_ns=gitscope.SETTLE_NS)  # everything here was written less than 2 s ago
    refusal(project, fresh)
    refusal(project, fresh)
    assert fresh.checks == 2


def test_a_stamp_is_trusted_after_50_ms_where_the_kernel_stamps_in_nanoseconds_and_after_2_s_elsewhere(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = project / ".git" / "config"
    config.write_text(config.read_text(encoding="utf-8"), encoding="utf-8")  # written now
    now = [time.time_ns()]
    verdicts = gitscope.Verdicts(clock=lambda: now[0])
    found = checked(project, verdicts)
    assert found.verdict is None and verdicts.checks == 1 and verdicts.kept(project) is None  # written just now
    newest = max(max(s[2], s[3]) for s in found.stamps if s is not None)
    kinds = gitscope.mount_kinds()
    if kinds.get(os.lstat(config).st_dev) not in gitscope.FINE_KINDS:
        pytest.skip("the test's folder is not on a local file system that stamps in nanoseconds")
    assert not verdicts.settled(found.stamps, newest + 45_000_000)  # a change now could still carry its stamp
    assert verdicts.settled(found.stamps, newest + 55_000_000)
    now[0] = newest + 55_000_000
    fine = gitscope.Verdicts(clock=lambda: now[0])
    for _ in range(3):
        assert refusal(project, fine) is None
    assert fine.checks == 1  # kept
    config.write_text(config.read_text(encoding="utf-8") + "[core]\n\tfsmonitor = false\n", encoding="utf-8")
    assert refusal(project, fine) is None and fine.checks == 2  # a change after it is seen
    # Elsewhere two seconds: a file system not named, one that takes its stamps from another clock, whole seconds
    dev = found.stamps[0][0] if found.stamps[0] is not None else 0
    for other in ({}, {dev: "nfs4"}, {dev: "fuse.sshfs"}, {dev: "vfat"}):
        assert gitscope.settle_ns((dev, 1, newest, newest, 1), other) == gitscope.SETTLE_NS
    assert gitscope.settle_ns((dev, 1, newest, newest, 1), {dev: "ext4"}) == gitscope.FINE_SETTLE_NS
    whole = newest - newest % 1_000_000_000
    assert gitscope.settle_ns((dev, 1, whole, newest, 1), {dev: "ext4"}) == gitscope.SETTLE_NS
    assert gitscope.settle_ns((dev, 1, newest, whole, 1), {dev: "ext4"}) == gitscope.SETTLE_NS
    monkeypatch.setattr(gitscope, "mount_kinds", lambda: {})
    assert not verdicts.settled(found.stamps, newest + 1_900_000_000)
    assert verdicts.settled(found.stamps, newest + 2_100_000_000)


def test_a_mount_table_line_that_cannot_be_read_names_nothing_and_never_raises() -> None:
    text = "\n".join([
        "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw",
        "23 22 0:25 / /mnt\\040-\\040ext4\\040x rw shared:2 - tmpfs tmpfs rw",  # a folder named "mnt - ext4 x"
        "24 22 0:26 / /a rw - btrfs /dev/a rw", "25 22 0:26 / /b rw - nfs4 srv:/b rw",  # one device, two kinds
        "26 22 4294967296:1 / /c rw - tmpfs t rw", "27 22 \u00b2:1 / /d rw - tmpfs t rw",  # 2**32, a superscript two
        "28 22 \u0661:1 / /e rw - tmpfs t rw", "29 22 1:2:3 / /f rw - tmpfs t rw", "30 22 0:27 / /g rw",
        "", "\0", "31 22 0:28 / /h rw - ", ])
    assert gitscope.kinds_of(text) == {os.makedev(254, 0): "ext4", os.makedev(0, 25): "tmpfs",
                                       os.makedev(0, 26): ""}


def test_a_commondir_planted_between_two_calls_is_refused(project: Path, tmp_path: Path) -> None:
    verdicts = kept(project)
    other = outside_repo(tmp_path)
    (project / ".git" / "commondir").write_text(str(other / ".git") + "\n")
    with pytest.raises(GitError, match="outside"):
        run_git(project, "status", verdicts=verdicts)
    assert verdicts.checks == 2
    assert gitlinks(project, verdicts) == []  # the submodule listing asks the same check


def test_an_include_outside_planted_in_the_config_is_refused_and_its_fsmonitor_never_runs(
        project: Path, tmp_path: Path) -> None:
    verdicts = kept(project)
    marker = tmp_path / "fsmonitor-ran"
    evil = tmp_path / "evil.config"
    evil.write_text(f'[core]\n\tfsmonitor = "touch {marker}; false"\n')
    with (project / ".git" / "config").open("a") as f:
        f.write(f"[include]\n\tpath = {evil}\n")
    with pytest.raises(GitError, match="config includes"):
        run_git(project, "status", verdicts=verdicts)
    assert verdicts.checks == 2
    assert not marker.exists()


def test_an_include_of_a_file_outside_is_refused_before_it_exists_or_its_condition_holds(project: Path,
                                                                                        tmp_path: Path) -> None:
    """git skips a missing include and one whose condition does not hold; either can start to count without a
    change to the repository's config (the file made, a branch switched), so neither may name a file outside."""
    for line in (f"[include]\n\tpath = {tmp_path / 'later.config'}",
                 f'[includeIf "onbranch:elsewhere"]\n\tpath = {tmp_path / "branch.config"}'):
        config = (project / ".git" / "config").read_text()
        (project / ".git" / "config").write_text(config + line + "\n")
        assert "outside" in (refusal(project, gitscope.Verdicts(settle_ns=0)) or "")
        (project / ".git" / "config").write_text(config)
        assert refusal(project, gitscope.Verdicts(settle_ns=0)) is None


def test_fsmonitor_and_hooks_planted_between_two_calls_are_checked_again_and_never_run(
        project: Path, tmp_path: Path) -> None:
    verdicts = kept(project)
    marker = tmp_path / "a-program-ran"
    hostile(project, marker)
    run_git(project, "status", verdicts=verdicts)
    assert verdicts.checks == 2  # the config changed: checked again
    run_git(project, "add", "app.py", verdicts=verdicts)
    run_git(project, "commit", "-q", "-m", "x", verdicts=verdicts)
    assert "x" in run_git(project, "log", "-1", "--format=%s", verdicts=verdicts)  # the commit was made
    assert not marker.exists()


def test_a_git_file_planted_in_a_subfolder_between_two_calls_moves_the_check(project: Path, tmp_path: Path) -> None:
    sub = project / "sub"
    sub.mkdir()
    verdicts = gitscope.Verdicts(settle_ns=0)
    assert refusal(sub, verdicts) is None
    other = outside_repo(tmp_path)
    (sub / ".git").write_text(f"gitdir: {other / '.git'}\n")
    assert "outside" in (refusal(sub, verdicts) or "")
    assert verdicts.checks == 2


def test_a_checkpoint_needs_no_check_of_the_project_repository(project: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    other = outside_repo(tmp_path)
    (project / ".git" / "commondir").write_text(str(other / ".git") + "\n")
    shadow = Shadow(project)
    commit = shadow.snapshot("first").commit  # the shadow pins its own git directory: the project's is never read
    assert shadow.has(commit)
    assert refusal(project, gitscope.Verdicts(settle_ns=0)) is not None


def test_an_included_link_retargeted_outside_between_two_calls_is_refused(project: Path, tmp_path: Path) -> None:
    (project / "safe.config").write_text("[core]\n\tbare = false\n")
    (project / "links").mkdir()
    (project / "links" / "inc.config").symlink_to(project / "safe.config")
    with (project / ".git" / "config").open("a") as f:
        f.write("[include]\n\tpath = ../links/inc.config\n")
    verdicts = kept(project)
    (tmp_path / "evil.config").write_text("[core]\n\tbare = false\n")
    (project / "links" / "inc.config").unlink()
    (project / "links" / "inc.config").symlink_to(tmp_path / "evil.config")
    assert "config includes" in (refusal(project, verdicts) or "")
    assert verdicts.checks == 2


def test_a_filter_planted_in_the_users_global_config_after_a_kept_check_never_runs(project: Path,
                                                                                  tmp_path: Path) -> None:
    """A kept verdict names no config (it can change where no stamp shows): the call lists it again and disables
    a filter defined after the check, here in the user's global file, which the check never stamps."""
    marker = tmp_path / "a-filter-ran"
    (project / ".gitattributes").write_text("* filter=planted\n")  # no such filter yet: the files as they are
    (project / "app.py").write_text("changed = True\n")
    verdicts = kept(project)
    Path(os.environ["HOME"], ".gitconfig").write_text(
        f'[filter "planted"]\n\tclean = "touch {marker}; cat"\n\trequired = true\n')
    run_git(project, "add", "--all", verdicts=verdicts)
    assert verdicts.checks == 1  # the verdict held; its config was listed again
    assert not marker.exists()
    assert "app.py" in run_git(project, "diff", "--cached", "--name-only", verdicts=verdicts).split()


@pytest.mark.parametrize("line", ["[include] path = ../cfg/extra.config", "[include]\n\tpath = ../cfg/extra.config ; a/b",
                                  "[include]\n\tpath = ../c\\\nfg/extra.config"])
def test_an_include_as_git_reads_it_is_watched_until_its_file_appears(project: Path, tmp_path: Path,
                                                                      line: str) -> None:
    """Includes are taken from git's own listing, not from the file's text: on the section's line, after a
    comment with a slash, across a continued line, the file they name is stamped before it exists."""
    marker = tmp_path / "a-filter-ran"
    (project / "cfg").mkdir()
    with (project / ".git" / "config").open("a") as f:
        f.write(line + "\n")
    (project / ".gitattributes").write_text("* filter=planted\n")
    (project / "app.py").write_text("changed = True\n")
    verdicts = kept(project)
    (tmp_path / "outside.config").write_text("[core]\n\tquotePath = true\n")
    (project / "cfg" / "extra.config").write_text(f'[filter "planted"]\n\tclean = "touch {marker}; cat"\n'
                                                   f'[include]\n\tpath = {tmp_path / "outside.config"}\n')
    assert "config includes" in (refusal(project, verdicts) or "")  # the check ran again, and refuses
    assert verdicts.checks == 2
    assert not marker.exists()


def test_an_include_outside_is_refused_from_a_folder_of_the_repository_too(project: Path, tmp_path: Path) -> None:
    """git names the config files relative to the working tree's top, wherever the project's root is in it."""
    (tmp_path / "outside.config").write_text("[core]\n\tquotePath = true\n")
    with (project / ".git" / "config").open("a") as f:
        f.write("[include]\n\tpath = ../../outside.config\n")
    (project / "sub").mkdir()
    for root in (project, project / "sub"):
        assert "outside" in (refusal(root, gitscope.Verdicts(settle_ns=0)) or "")


@pytest.mark.parametrize("broken", ["head", "format"])
def test_a_repository_git_cannot_read_yet_is_checked_again_at_every_call(project: Path, tmp_path: Path,
                                                                         broken: str) -> None:
    """A `.git` git finds no repository in (no HEAD, a format it does not know) is mended in place, without a
    change to any stamp of a "no repository" verdict: such a verdict is never kept, and the filter never runs."""
    marker = tmp_path / "a-filter-ran"
    with (project / ".git" / "config").open("a") as f:
        f.write(f'[filter "planted"]\n\tclean = "touch {marker}; cat"\n\trequired = true\n')
    (project / ".gitattributes").write_text("* filter=planted\n")
    (project / "app.py").write_text("changed = True\n")
    head, config = (project / ".git" / "HEAD").read_text(), (project / ".git" / "config").read_text()
    if broken == "head":
        (project / ".git" / "HEAD").unlink()
    else:
        (project / ".git" / "config").write_text(config.replace("repositoryformatversion = 0", "repositoryformatversion = 99"))
    verdicts = gitscope.Verdicts(settle_ns=0)
    assert run_git(project, "status", "--short", check=False, verdicts=verdicts) == ""
    if broken == "head":
        (project / ".git" / "HEAD").write_text(head)
    else:
        with (project / ".git" / "config").open("r+") as f:  # in place: the file's identity stays
            f.write(config.replace("repositoryformatversion = 0", "repositoryformatversion = 00"))
            f.truncate()
    run_git(project, "add", "--all", verdicts=verdicts)
    assert verdicts.checks == 2
    assert not marker.exists()
    assert "app.py" in run_git(project, "diff", "--cached", "--name-only", verdicts=verdicts).split()


def test_the_checks_findings_spare_git_facts_a_second_listing_and_a_second_rev_parse(
        project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """git_facts asks git for the working tree and the config names once, in the check, then runs `status`."""
    log = tmp_path / "git-calls"
    shim = tmp_path / "bin"
    shim.mkdir()
    real = shutil.which("git")
    (shim / "git").write_text(f'#!/bin/sh\nfor a; do case $a in -c) skip=1;; *) if [ -z "$skip" ]; then '
                              f'case $a in -*) ;; *) echo "$a" >> {log}; break;; esac; fi; skip=;; esac; done\n'
                              f'exec {real} "$@"\n')
    (shim / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}{os.pathsep}{os.environ['PATH']}")
    facts = git_facts(project)
    assert facts["git_root"] == str(project.resolve()) and facts["branch"] in ("main", "master")
    assert log.read_text().split() == ["rev-parse", "config", "status"]
