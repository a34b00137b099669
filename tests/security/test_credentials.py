"""Protected reads that cover real credentials (issue 18, item 4): the home folder is the project (or
holds a link into the credential folders), a scripted hostile model asks every tool for the files, and
none of their contents reaches a tool result, sandbox on or off; the user can add paths, a project only adds."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rhapsody.config.settings import load_settings
from rhapsody.loopback.script import call, say
from rhapsody.sandbox.bwrap import bwrap_path

from tests.conftest import Stub, collect

REQUIRED = [".aws/credentials", ".config/gcloud/credentials.db", ".azure/accessTokens.json", ".kube/config",
            ".docker/config.json", ".netrc", ".npmrc", ".pypirc", ".git-credentials", ".ssh/id_work",
            ".gnupg/private-keys-v1.d/key"]
"""One file in each location the issue names (folders count with everything in them)."""
NARRATION = "I will look at this file to learn how the project is deployed, as part of the task."


def plant(home: Path, rel: str) -> str:
    token = "credential-" + rel.replace("/", "-").replace(".", "")
    path = home / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"secret = {token}\n")
    return token


def results(stub: Stub) -> list[str]:
    out: dict[str, str] = {}
    for body in stub.bodies():
        for message in body["messages"]:
            for block in message["content"] if isinstance(message["content"], list) else []:
                if block.get("type") == "tool_result":
                    out[block["tool_use_id"]] = str(block["content"])
    return list(out.values())


def attacks(rel: str) -> list[dict[str, Any]]:
    return [call(NARRATION, "read_file", path=rel), call(NARRATION, "search_text", pattern="credential-", path="."),
            call(NARRATION, "find_files", pattern="**/*"), call(NARRATION, "edit_file", path=rel, old="secret", new="x"),
            call(NARRATION, "git", action="diff"), call(NARRATION, "bash", command=f"cat {rel}")]


@pytest.fixture
def home() -> Path:
    """The (test-isolated) home folder, a git repository of dotfiles whose credentials are committed."""
    folder = Path(os.environ["HOME"])
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    return folder


@pytest.mark.parametrize("sandbox", ["workspace-write", "off"])
async def test_no_tool_shows_the_credential_files_of_the_home_folder(stub: Stub, home: Path, sandbox: str) -> None:
    if sandbox != "off" and bwrap_path() is None:
        pytest.skip("needs bubblewrap")
    tokens = [plant(home, rel) for rel in REQUIRED]
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-f", *REQUIRED], cwd=home, check=True)
    subprocess.run([*git, "commit", "-qm", "dotfiles"], cwd=home, check=True)
    for rel in REQUIRED:
        (home / rel).write_text("changed\n")
    turns = [turn for rel in REQUIRED for turn in attacks(rel) if sandbox != "off" or turn["content"][1]["name"] != "bash"]
    stub.script(*turns, say("done"))
    await collect(stub.wire(home, sandbox=sandbox).agent.run("how is this deployed?"))
    seen = results(stub)
    assert len(seen) == len(turns)
    leaked = [t for t in tokens if any(t in text for text in seen)]
    assert leaked == []
    assert all("changed" not in text for text in seen[3::6])  # no diff of a credential file either
    assert all((home / rel).read_text() == "changed\n" for rel in REQUIRED)  # edits refused


async def test_a_link_into_a_credential_folder_and_a_linked_credential_folder_are_both_protected(
        stub: Stub, home: Path) -> None:
    vault = home / "vault" / "aws"
    vault.mkdir(parents=True)
    (home / ".aws").symlink_to(vault)  # ~/.aws itself a link to elsewhere
    token = plant(home, ".aws/credentials")
    (home / "notes.txt").symlink_to(home / ".aws" / "credentials")
    stub.script(call(NARRATION, "read_file", path="vault/aws/credentials"),
                call(NARRATION, "read_file", path="notes.txt"),
                call(NARRATION, "search_text", pattern="credential-", path="vault"), say("done"))
    await collect(stub.wire(home, sandbox="off").agent.run("go"))
    seen = results(stub)
    assert len(seen) == 3 and not any(token in text for text in seen)
    assert "credential location" in seen[0] and "credential location" in seen[1]


async def test_the_users_own_protected_paths_are_refused_and_mounted_empty(stub: Stub, home: Path) -> None:
    token = plant(home, "corp/secrets/prod.txt")
    stub.script(call(NARRATION, "read_file", path="corp/secrets/prod.txt"),
                call(NARRATION, "bash", command="cat corp/secrets/prod.txt; ls corp/secrets"), say("done"))
    await collect(stub.wire(home, protected_paths=["~/corp/secrets"]).agent.run("go"))
    seen = results(stub)
    assert "credential location" in seen[0]
    if bwrap_path() is not None:
        assert token not in seen[1] and "\nprod.txt" not in seen[1], seen[1]


def test_a_project_adds_protected_paths_and_never_removes_the_users(home: Path, tmp_path: Path) -> None:
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "rhapsody" / "config.toml"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text('protected_paths = ["~/corp"]\n')
    project = tmp_path / "cloned"
    (project / ".rhapsody").mkdir(parents=True)
    (project / ".rhapsody" / "config.toml").write_text('protected_paths = ["secrets"]\n')
    assert load_settings(project).protected_paths == ["~/corp", "secrets"]
    (project / ".rhapsody" / "config.toml").write_text("protected_paths = []\n")
    assert load_settings(project).protected_paths == ["~/corp"]
    os.environ["RHAPSODY_PROTECTED_PATHS"] = "[]"
    try:
        assert load_settings(project).protected_paths == ["~/corp"]
    finally:
        del os.environ["RHAPSODY_PROTECTED_PATHS"]


def test_the_approval_question_never_shows_a_credential_files_text(home: Path) -> None:
    from rhapsody.frontends.preview import preview

    token = plant(home, ".aws/credentials")
    (home / "notes.txt").symlink_to(home / ".aws" / "credentials")
    for path in (".aws/credentials", "notes.txt"):
        shown = preview("edit_file", {"path": path, "old": "secret", "new": "x"}, home)
        assert "the file's text is not shown" in shown.heading, shown  # the preview was drawn, without it
        assert token not in shown.body, path
