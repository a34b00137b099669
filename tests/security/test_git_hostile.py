"""A hostile repository: its config names programs for every hook git has. None may run."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rhapsody.core.session.context import RequestSpec
from rhapsody.core.session.session import Session
from rhapsody.core.toolbox.protocol import ToolContext
from rhapsody.memory import commit_memory, size_over_time
from rhapsody.tools import default_toolbox
from rhapsody.tools.git import git_facts
from rhapsody.tools.handoff import harness_facts

from tests.conftest import Stub


def hostile(project: Path, marker: Path) -> None:
    """Point fsmonitor, pager, external diff, textconv, filters, hooks and gpg at a command that touches `marker`."""
    touch = f"sh -c 'touch {marker}; cat'"
    hooks = project / "githooks"
    hooks.mkdir()
    for name in ("pre-commit", "post-commit", "commit-msg", "prepare-commit-msg", "post-index-change"):
        (hooks / name).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (hooks / name).chmod(0o755)
        (project / ".git" / "hooks" / name).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (project / ".git" / "hooks" / name).chmod(0o755)
    with (project / ".git" / "config").open("a") as f:
        f.write(f"""[core]
\tfsmonitor = "touch {marker}; false"
\tpager = "touch {marker}; cat"
\thooksPath = githooks
[diff]
\texternal = "touch {marker}; true"
[diff "evil"]
\ttextconv = "{touch}"
\tcommand = "touch {marker}; true"
[filter "evil"]
\tclean = "{touch}"
\tsmudge = "{touch}"
\trequired = true
[log]
\tshowSignature = true
[gpg]
\tprogram = "touch {marker}; false"
[commit]
\tgpgSign = true
""")
    (project / ".gitattributes").write_text("* diff=evil filter=evil\n")
    (project / "app.py").write_text("def add(a, b):\n    return a + b\n")
    os.utime(project / "app.py", (1, 1))  # stat-dirty: status must look inside, where the clean filter would run


def test_the_hostile_config_does_run_programs_under_plain_git(project: Path, tmp_path: Path) -> None:
    marker = tmp_path / "plain-git-ran-it"
    hostile(project, marker)
    subprocess.run(["git", "status"], cwd=project, capture_output=True)
    assert marker.exists()  # so the tests below attack something real


@pytest.mark.parametrize("mode", ["read-only", "auto-edit", "yolo"])
async def test_git_tool_status_diff_log_run_nothing_from_the_repository(project: Path, tmp_path: Path, mode: str) -> None:
    marker = tmp_path / "ran"
    hostile(project, marker)
    ctx = ToolContext(project, Session.start(project, RequestSpec(model="m", system="s", tools=[])), 10, 20000)
    toolbox = default_toolbox(mode)
    for args in ({"action": "status"}, {"action": "diff"}, {"action": "log"}, {"action": "diff", "path": "app.py"}):
        outcome, _ = await toolbox.run("git", args, ctx)
        assert not outcome.is_error, outcome.content
    assert not marker.exists()
    diff, _ = await toolbox.run("git", {"action": "diff"}, ctx)
    assert "+    return a + b" in diff.content


def test_status_bar_harness_facts_and_memory_run_nothing(project: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    hostile(project, marker)
    facts = git_facts(project)
    assert facts["branch"] and any("app.py" in d for d in facts["dirty"])
    session = Session.start(project, RequestSpec(model="m", system="s", tools=[]))
    assert "git root" in harness_facts(project, session)
    (project / "docs" / "memory").mkdir(parents=True)
    (project / "docs" / "memory" / "note.md").write_text("# note\n")
    assert commit_memory(project, "docs/memory", "memory: note") is not None
    assert size_over_time(project, "docs/memory")
    assert not marker.exists()


async def test_git_tool_in_a_repository_without_commits(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    (root / "a.txt").write_text("a\n")
    ctx = ToolContext(root, Session.start(root, RequestSpec(model="m", system="s", tools=[])), 10, 20000)
    toolbox = default_toolbox("auto-edit")
    log, _ = await toolbox.run("git", {"action": "log"}, ctx)
    diff, _ = await toolbox.run("git", {"action": "diff"}, ctx)
    status, _ = await toolbox.run("git", {"action": "status"}, ctx)
    assert "no commits" in log.content and not diff.is_error and "a.txt" in status.content


async def test_file_tools_never_write_git_config_or_hooks_even_in_yolo(project: Path) -> None:
    with (project / ".git" / "config").open("a") as f:
        f.write("[core]\n\thooksPath = .husky\n")
    (project / ".husky").mkdir()
    os.symlink(".git/config", project / "cfg")
    ctx = ToolContext(project, Session.start(project, RequestSpec(model="m", system="s", tools=[])), 10, 20000)
    toolbox = default_toolbox("yolo")
    before = (project / ".git" / "config").read_text()
    for path in (".git/config", "./.git/hooks/pre-commit", "cfg", ".husky/pre-commit", "src/../.git/info/attributes"):
        outcome, _ = await toolbox.run("write_file", {"path": path, "content": "[core]\n\tfsmonitor = touch x\n"}, ctx)
        assert outcome.is_error and "refused" in outcome.content, path
    edit, _ = await toolbox.run("edit_file", {"path": "cfg", "old": "[core]", "new": "[core]\n\tpager = x"}, ctx)
    assert edit.is_error and (project / ".git" / "config").read_text() == before
    assert not (project / ".husky" / "pre-commit").exists()


@pytest.mark.parametrize("layout", ["config-link", "git-file", "hooks-link"])
async def test_file_tools_never_write_the_real_git_config_whatever_the_layout(project: Path, layout: str) -> None:
    if layout == "config-link":
        (project / ".git" / "config").rename(project / "gitconfig")
        (project / ".git" / "config").symlink_to("../gitconfig")
        targets = ["gitconfig", ".git/config"]
    elif layout == "git-file":
        (project / ".git").rename(project / "gitdata")
        (project / ".git").write_text("gitdir: gitdata\n")
        targets = ["gitdata/config", "gitdata/hooks/pre-commit"]
    else:
        shutil.rmtree(project / ".git" / "hooks")
        (project / "myhooks").mkdir()
        (project / ".git" / "hooks").symlink_to("../myhooks")
        targets = ["myhooks/pre-commit"]
    ctx = ToolContext(project, Session.start(project, RequestSpec(model="m", system="s", tools=[])), 10, 20000)
    toolbox = default_toolbox("yolo")
    for path in targets:
        outcome, _ = await toolbox.run("write_file", {"path": path, "content": "[core]\n\tfsmonitor = touch x\n"}, ctx)
        assert outcome.is_error and "refused" in outcome.content, path
    assert "fsmonitor" not in subprocess.run(["git", "config", "--list"], cwd=project, capture_output=True,
                                             text=True).stdout


async def test_git_diff_never_prints_secret_or_denied_files(project: Path) -> None:
    import git

    (project / "private").mkdir()
    (project / ".env").write_text("TOKEN=committed-secret-1\n")
    (project / "server.PEM").write_text("committed-secret-2\n")
    (project / "private" / "plan.txt").write_text("committed-secret-3\n")
    repo = git.Repo(project)
    repo.index.add([".env", "server.PEM", "private/plan.txt"])
    repo.index.commit("oops")
    for name in (".env", "server.PEM", "private/plan.txt"):
        (project / name).write_text("changed\n")
    (project / "app.py").write_text("def add(a, b):\n    return a + b\n")  # a change the diff does show
    ctx = ToolContext(project, Session.start(project, RequestSpec(model="m", system="s", tools=[])), 10, 20000)
    toolbox = default_toolbox("auto-edit", deny=["read_file:private/*"])
    outputs = [(await toolbox.run("git", args, ctx))[0].content
               for args in ({"action": "diff"}, {"action": "diff", "path": ".env"}, {"action": "diff", "path": "private"},
                            {"action": "log", "path": "server.PEM"})]
    assert "+    return a + b" in outputs[0] and "permission denied for git '.env'" in outputs[1], outputs
    assert not any("committed-secret" in out for out in outputs)


async def test_opening_the_app_on_a_hostile_repository_runs_nothing(stub: Stub, project: Path, tmp_path: Path) -> None:
    from rhapsody.frontends.app.app import RhapsodyApp

    from tests.conftest import until

    marker = tmp_path / "ran"
    hostile(project, marker)
    wiring = stub.wire(project, permission_mode="read-only")
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(lambda: bool(app.status_bar.git), pause=pilot.pause)  # the status bar read git
        assert "±" in app.status_bar.git
    assert not marker.exists()


def test_at_path_completion_lists_files_without_running_the_repositorys_programs(project: Path, tmp_path: Path) -> None:
    from rhapsody.frontends.prompt_aids import project_files

    marker = tmp_path / "ran"
    hostile(project, marker)
    files = project_files(project)
    assert "app.py" in files and not marker.exists()
    plain = tmp_path / "not-a-repo"
    (plain / "src").mkdir(parents=True)
    (plain / "src" / "main.py").write_text("")
    assert project_files(plain) == ["src/main.py"]  # outside git: a plain walk
