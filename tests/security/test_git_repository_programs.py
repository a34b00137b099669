"""A repository's config, names and git directory never make rhapsody's own git calls run a program or write
outside the project (tools/git.py overrides, tools/gitscope.py refusals): the fourth pass's attacks.

Each builds a hostile repository in a temporary folder, as a cloned project would arrive, and drives the calls
rhapsody makes on its own account (`git_facts` for the status bar and the handoff, `commit_paths` for memory,
`last_commit_time`); a marker file shows whether a planted program ran."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rhapsody.tools import gitscope
from rhapsody.tools.git import STATIC, commit_paths, git_facts, last_commit_time, refusal


def _git(project: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(project), *args], check=True, capture_output=True, text=True).stdout


def test_a_driver_name_holding_an_equals_sign_is_refused_and_never_injects_a_command(project: Path,
                                                                                     tmp_path: Path) -> None:
    """`-c NAME=` splits at the first `=`: the override of `filter."evil.clean=CMD".clean` would set evil's clean
    filter to CMD. Such a name is refused, and never reaches git's command line."""
    marker = tmp_path / "injected"
    with (project / ".git" / "config").open("a") as f:
        f.write(f'[filter "evil.clean=touch {marker}; cat #"]\n\tclean = cat\n')
    (project / ".gitattributes").write_text("* filter=evil\n")
    (project / "app.py").write_text("changed = True\n")
    facts = git_facts(project)
    assert "no override" in facts.get("refused", "")
    assert commit_paths(project, "app.py", "m") is None  # a refused repository is no repository to rhapsody's calls
    assert not marker.exists()


def test_a_driver_name_that_is_not_utf8_is_refused(project: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with (project / ".git" / "config").open("ab") as f:
        f.write(b'[filter "ev\xffil"]\n\tclean = "touch ' + str(marker).encode() + b'; cat"\n')
    (project / ".gitattributes").write_bytes(b"* filter=ev\xffil\n")
    (project / "app.py").write_text("changed = True\n")
    assert "no override" in git_facts(project).get("refused", "")
    assert not marker.exists()


def test_a_partial_clone_missing_an_object_never_fetches_it_through_its_own_upload_pack(project: Path,
                                                                                        tmp_path: Path) -> None:
    """The repository allows the file protocol by name (which outranks `protocol.allow=never`) and names a command
    as its promisor remote's upload-pack; a missing tree would be fetched through it."""
    marker = tmp_path / "fetched"
    tree = _git(project, "rev-parse", "HEAD^{tree}").strip()
    with (project / ".git" / "config").open("a") as f:
        f.write(f'[extensions]\n\tpartialClone = origin\n[remote "origin"]\n\turl = {project}\n\tpromisor = true\n'
                f'\tuploadpack = "touch {marker}; git-upload-pack"\n[protocol "file"]\n\tallow = always\n')
    _git(project, "config", "core.repositoryformatversion", "1")
    (project / ".git" / "objects" / tree[:2] / tree[2:]).unlink()
    assert refusal(project, gitscope.Verdicts(settle_ns=0)) is None  # a repository of its own: not refused
    git_facts(project)
    last_commit_time(project, project / "app.py")
    assert not marker.exists()


@pytest.mark.parametrize("entry", ["logs/HEAD", "refs/heads/main", "COMMIT_EDITMSG", "objects/pack"])
def test_a_link_in_the_git_directory_that_git_writes_through_is_refused(project: Path, tmp_path: Path,
                                                                          entry: str) -> None:
    """A reflog linked to the user's shell start-up file (a line holding the repository's `user.name` appended to
    it by a memory commit), a branch linked to another repository's, a message file linked to a file outside."""
    victim = tmp_path / "bashrc"
    victim.write_text("# the user's own\n")
    _git(project, "config", "user.name", "x; touch /tmp/never #")
    link = project / ".git" / entry
    if link.is_dir():
        (tmp_path / "elsewhere").mkdir()
        link.rename(tmp_path / "moved-away")
        link.symlink_to(tmp_path / "elsewhere")
    else:
        link.unlink(missing_ok=True)
        link.symlink_to(victim)
    assert "is a link" in (refusal(project, gitscope.Verdicts(settle_ns=0)) or "")
    (project / "notes.md").write_text("remember\n")
    assert commit_paths(project, "notes.md", "memory: update") is None  # refused: as if there were no repository
    assert victim.read_text() == "# the user's own\n"


def test_a_link_planted_in_the_reflogs_after_a_kept_check_is_seen(project: Path, tmp_path: Path) -> None:
    verdicts = gitscope.Verdicts(settle_ns=0)
    assert refusal(project, verdicts) is None
    assert refusal(project, verdicts) is None and verdicts.checks == 1
    victim = tmp_path / "bashrc"
    victim.write_text("# the user's own\n")
    head = project / ".git" / "logs" / "HEAD"
    head.unlink()
    head.symlink_to(victim)
    assert "is a link" in (refusal(project, verdicts) or "")
    assert verdicts.checks == 2


@pytest.mark.parametrize("value", ["%(prefix)/etc/late.config", "/proc/self/cwd/cfg/late.config"])
def test_an_include_git_would_expand_on_its_own_is_refused(project: Path, value: str) -> None:
    with (project / ".git" / "config").open("a") as f:
        f.write(f"[include]\n\tpath = {value}\n")
    assert "expand on its own" in (refusal(project, gitscope.Verdicts(settle_ns=0)) or "")


def _outside_repository(tmp_path: Path) -> Path:
    other = tmp_path / "outside"
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    return other


@pytest.mark.parametrize("layout", ["gitfile", "commondir", "alternates"])
def test_a_link_on_the_way_to_the_git_directory_retargeted_after_a_kept_check_is_seen(project: Path, tmp_path: Path,
                                                                                        layout: str) -> None:
    """The path a `.git` file, a `commondir` or an alternates line names is stamped step by step as written: a
    link in a folder on the way, retargeted to another repository, moves git there with no resolved path changed."""
    other = _outside_repository(tmp_path)
    sub = project / "sub"
    (sub / "d").mkdir(parents=True)
    (sub / "link").symlink_to("d")
    if layout == "gitfile":
        (project / ".git").rename(sub / "d" / ".git")
        (project / ".git").write_text("gitdir: sub/link/.git\n")
        outside = other
    elif layout == "commondir":
        (project / ".git").rename(sub / "d" / ".git")
        (project / ".git").mkdir()
        for name in ("HEAD", "index"):
            (sub / "d" / ".git" / name).rename(project / ".git" / name)
        (sub / "d" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
        (project / ".git" / "commondir").write_text("../sub/link/.git\n")
        outside = other
    else:
        subprocess.run(["git", "init", "-q", str(sub / "d" / "store")], check=True)
        (project / ".git" / "objects" / "info" / "alternates").write_text("../../sub/link/store/.git/objects\n")
        outside = tmp_path
    verdicts = gitscope.Verdicts(settle_ns=0)
    assert refusal(project, verdicts) is None
    assert refusal(project, verdicts) is None and verdicts.checks == 1  # kept
    (sub / "link").unlink()
    (sub / "link").symlink_to(outside)
    assert "outside" in (refusal(project, verdicts) or "")
    assert verdicts.checks == 2


@pytest.mark.parametrize("line", ['"\\057etc\\057objects"', " objects-with-a-space", "objects\\"])
def test_an_alternates_line_git_reads_otherwise_is_refused(project: Path, line: str) -> None:
    """git C-unquotes a line that starts with a quote and keeps spaces; such a line is refused, not guessed at."""
    (project / ".git" / "objects" / "info" / "alternates").write_text(line + "\n")
    assert "alternates has a line" in (refusal(project, gitscope.Verdicts(settle_ns=0)) or "")


def test_a_config_include_naming_a_path_that_is_not_utf8_is_refused(project: Path, tmp_path: Path) -> None:
    """Read back under its replacement character, such a path would be resolved as another (a link outside)."""
    (project / "\udcff".encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape")).symlink_to(tmp_path)
    with (project / ".git" / "config").open("ab") as f:
        f.write(b"[include]\n\tpath = ../\xff/x.config\n")
    assert "not UTF-8" in (refusal(project, gitscope.Verdicts(settle_ns=0)) or "")


def test_a_shipped_rerere_cache_linked_outside_is_refused_and_rerere_never_replays(project: Path,
                                                                                   tmp_path: Path) -> None:
    """An `rr-cache/` turns rerere on: a commit would write a conflict's image through `thisimage` (linked to a
    file outside) and replay `postimage` (linked to a secret outside) into the project."""
    victim, secret = tmp_path / "victim", tmp_path / "secret"
    victim.write_text("precious\n")
    secret.write_text("key material\n")
    cache = project / ".git" / "rr-cache" / ("0" * 40)
    cache.mkdir(parents=True)
    (cache / "thisimage").symlink_to(victim)
    (cache / "postimage").symlink_to(secret)
    assert "is a link" in (refusal(project, gitscope.Verdicts(settle_ns=0)) or "")
    (cache / "thisimage").unlink()
    (cache / "postimage").unlink()
    assert refusal(project, gitscope.Verdicts(settle_ns=0)) is None
    assert ("rerere.enabled", "false") in STATIC  # and a commit of rhapsody's own never replays what it holds
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("layout", ["nul", "loop"])
def test_a_layout_the_check_cannot_follow_is_one_refusal_not_a_crash(project: Path, tmp_path: Path,
                                                                     layout: str) -> None:
    """A NUL in the `.git` file's path (git stops reading there), a link loop an include names."""
    if layout == "nul":
        (project / ".git").rename(project / "realgit")
        (project / ".git").write_bytes(b"gitdir: realgit\0junk\n")
    else:
        (project / "loop").symlink_to("loop")
        with (project / ".git" / "config").open("a") as f:
            f.write('[includeIf "gitdir:/nowhere/"]\n\tpath = ../loop\n')
    why = refusal(project, gitscope.Verdicts(settle_ns=0)) or ""
    assert why.startswith("refused:") and "\n" not in why
    facts = git_facts(project)
    assert facts["git_root"] is None and facts["refused"]


def test_a_git_directory_too_large_to_look_through_is_refused_and_its_own_entries_come_first(
        project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gitscope, "MAX_ENTRIES", 200)
    junk = project / ".git" / "logs" / "junk"
    junk.mkdir(parents=True)
    for i in range(300):
        (junk / str(i)).write_text("")
    assert "more than 200 entries" in (refusal(project, gitscope.Verdicts(settle_ns=0)) or "")
    (tmp_path / "victim").write_text("precious\n")
    (project / ".git" / "COMMIT_EDITMSG").symlink_to(tmp_path / "victim")
    assert "COMMIT_EDITMSG is a link" in (refusal(project, gitscope.Verdicts(settle_ns=0)) or "")
