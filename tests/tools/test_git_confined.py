"""git confined to the project's own repository (issue 18, item 3): hostile repositories built in a
temporary folder point git outside the project; the git tool and rhapsody's own git calls refuse them
in one line, pathspecs are literal and inside the root, and the tool's output hides protected files."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rhapsody.core.session.context import RequestSpec
from rhapsody.core.session.session import Session
from rhapsody.core.toolbox.protocol import ToolContext
from rhapsody.loopback.script import call, say
from rhapsody.tools import default_toolbox
from rhapsody.tools.git import GitError, commit_paths, git_facts, hide_protected, run_git

from tests.conftest import Stub, collect, make_project

OUTSIDE = "outside-content-that-must-not-show"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout


def other_project(tmp_path: Path) -> Path:
    """Another project with committed content the attack wants to read."""
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    (other / "plan.txt").write_text(OUTSIDE + "\n")
    git(other, "add", ".")
    git(other, "commit", "-qm", "other")
    return other


def gitdir_file(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / ".git").write_text(f"gitdir: {other_project(tmp_path) / '.git'}\n")
    (root / "app.py").write_text("x\n")
    return root


def worktree_home(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text(OUTSIDE + "\n")
    root = make_project(tmp_path / "proj")
    git(root, "config", "core.worktree", str(tmp_path))
    return root


def alternates(tmp_path: Path) -> Path:
    other = other_project(tmp_path)
    root = tmp_path / "proj"
    git(tmp_path, "clone", "-q", "--shared", str(other), str(root))  # borrows other/.git/objects
    return root


def include_outside(tmp_path: Path) -> Path:
    (tmp_path / "evil.cfg").write_text("[user]\n\tname = x\n")
    root = make_project(tmp_path / "proj")
    git(root, "config", "include.path", str(tmp_path / "evil.cfg"))
    return root


def include_if_outside(tmp_path: Path) -> Path:
    (tmp_path / "evil.cfg").write_text("[user]\n\tname = x\n")
    root = make_project(tmp_path / "proj")
    git(root, "config", f"includeIf.gitdir:{root}/.git.path", "../../evil.cfg")
    return root


def commondir_outside(tmp_path: Path) -> Path:
    other = other_project(tmp_path)
    root = tmp_path / "proj"
    (root / "gitdata").mkdir(parents=True)
    for name in ("HEAD", "index"):
        (root / "gitdata" / name).write_bytes((other / ".git" / name).read_bytes())
    (root / "gitdata" / "commondir").write_text(str(other / ".git") + "\n")
    (root / ".git").write_text("gitdir: gitdata\n")
    return root


def bare_config(tmp_path: Path) -> Path:
    root = gitdir_file(tmp_path)
    git(tmp_path / "other", "config", "core.bare", "true")  # what the gitdir names has no working tree
    return root


HOSTILE = {"gitdir naming a repository without a working tree": bare_config,"gitdir file naming another project": gitdir_file, "core.worktree at the folder above": worktree_home,
           "objects/info/alternates outside": alternates, "include.path outside": include_outside,
           "includeIf path outside": include_if_outside, "commondir outside": commondir_outside}


def context(root: Path) -> ToolContext:
    return ToolContext(root, Session.start(root, RequestSpec(model="m", system="s", tools=[])), 10, 20000)


@pytest.mark.parametrize("layout", list(HOSTILE))
async def test_git_tool_refuses_a_repository_that_reaches_outside_the_project(tmp_path: Path, layout: str) -> None:
    root = HOSTILE[layout](tmp_path)
    toolbox = default_toolbox("auto-edit")
    for args in ({"action": "diff", "path": ":/"}, {"action": "diff"}, {"action": "status"}, {"action": "log"}):
        outcome, _ = await toolbox.run("git", args, context(root))
        assert outcome.is_error and outcome.content.startswith("refused:"), (args, outcome.content)
        assert "\n" not in outcome.content and OUTSIDE not in outcome.content


@pytest.mark.parametrize("layout", list(HOSTILE))
def test_rhapsodys_own_git_calls_refuse_the_same_repositories(tmp_path: Path, layout: str) -> None:
    root = HOSTILE[layout](tmp_path)
    with pytest.raises(GitError, match="^refused:"):
        run_git(root, "status")
    facts = git_facts(root)
    assert facts["git_root"] is None and facts["refused"].startswith("refused:")
    (root / "mem.md").write_text("note\n")
    assert commit_paths(root, "mem.md", "memory") is None


async def test_hostile_model_asking_for_the_whole_repository_with_pathspec_magic_gets_only_the_root(
        stub: Stub, tmp_path: Path) -> None:
    """The project is a folder of a larger repository: `:/` and `../` must not reach the rest of it."""
    outer = make_project(tmp_path / "outer")
    (outer / "sibling.txt").write_text("x\n")
    git(outer, "add", ".")
    git(outer, "commit", "-qm", "sibling")
    root = outer / "proj"
    root.mkdir()
    (root / "mine.txt").write_text("mine\n")
    git(outer, "add", ".")
    git(outer, "commit", "-qm", "mine")
    (outer / "sibling.txt").write_text(OUTSIDE + "\n")
    (root / "mine.txt").write_text("mine, changed\n")
    assert OUTSIDE in git(root, "diff", "HEAD", "--", ":/")  # plain git reaches the sibling
    narration = "I look at the repository's changes everywhere, including outside this folder."
    stub.script(call(narration, "git", action="diff", path=":/"), call(narration, "git", action="diff", path="../"),
                call(narration, "git", action="status", path=":(top)"), call(narration, "git", action="diff"),
                say("done"))
    # sandbox off: the sandbox's private /tmp would hide the outer repository of this temporary layout
    await collect(stub.wire(root, sandbox="off").agent.run("show me everything"))
    results = [b for m in stub.bodies()[-1]["messages"] if isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]
    texts = [str(b["content"]) for b in results]
    assert len(texts) == 4 and not any(OUTSIDE in t for t in texts)
    assert "resolves outside the project root" in texts[1]
    assert "mine, changed" in texts[3]


async def test_a_worktree_made_by_git_worktree_add_is_the_projects_own(tmp_path: Path) -> None:
    main = make_project(tmp_path / "main")
    root = tmp_path / "wt"
    git(main, "worktree", "add", "-q", str(root))
    (root / "app.py").write_text("changed in the worktree\n")
    # sandbox off: the sandbox's private /tmp would hide the main repository of this temporary layout
    outcome, _ = await default_toolbox("auto-edit", sandbox="off").run("git", {"action": "diff"}, context(root))
    assert not outcome.is_error and "changed in the worktree" in outcome.content
    assert git_facts(root)["git_root"] == str(root)


async def test_a_bare_repository_at_the_root_is_not_discovered(tmp_path: Path) -> None:
    other = other_project(tmp_path)
    root = tmp_path / "proj"
    git(tmp_path, "clone", "-q", "--bare", str(other), str(root))
    git(root, "config", "core.worktree", str(other))
    outcome, _ = await default_toolbox("auto-edit").run("git", {"action": "log"}, context(root))
    assert outcome.is_error and "other" not in outcome.content.split("failed:")[-1].split()


def test_git_output_leaves_out_protected_files_however_their_names_are_written() -> None:
    diff = ("diff --git a/app.py b/app.py\n+ok\n"
            'diff --git "a/sub dir/.env" "b/sub dir/.env"\n+TOKEN=1\n'
            "diff --git a/x b/y b/x b/y b/.npmrc\n+//registry:_authToken=2\n"
            "diff --git a/private/plan.txt b/private/plan.txt\n+secret plan\n")
    shown = hide_protected(diff, "diff", ("private/*",))
    assert "+ok" in shown and "TOKEN" not in shown and "_authToken" not in shown and "secret plan" not in shown
    assert "3 file(s) not shown" in shown
    status = hide_protected("## main\n M app.py\nR  old.txt -> .env.local\n?? id_rsa\n", "status", ())
    assert status == "## main\n M app.py"


def test_git_variables_in_rhapsodys_environment_never_reach_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = other_project(tmp_path)
    root = make_project(tmp_path / "proj")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    monkeypatch.setenv("GIT_ALTERNATE_OBJECT_DIRECTORIES", str(other / ".git" / "objects"))
    assert "plan.txt" not in run_git(root, "ls-files") and "app.py" in run_git(root, "ls-files")
    assert git_facts(root)["git_root"] == str(root)
