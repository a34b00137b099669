"""The walk a sandboxed command shares with the nested-repository guard, and the index that keeps it cheap.

The index trusts a folder's listing while the folder's stamp is unchanged; these tests run it
with a clock set ahead, so every listing is trusted at once (as a tree untouched for a while is),
and check that what changed since is still seen: a secret file is never readable because a
listing was stale.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from rhapsody.core.session.context import RequestSpec
from rhapsody.core.session.session import Session
from rhapsody.core.toolbox.protocol import ToolContext
from rhapsody.tools.bash import Bash, BashInput
from rhapsody.sandbox.bwrap import bwrap_path
from rhapsody.sandbox.tree_index import SETTLE_NS, TreeIndex, is_secret_name

SECRET = "API_TOKEN=hunter2-very-secret"


def trusting() -> TreeIndex:
    """An index whose clock runs ahead: every listing counts as settled the moment it is taken."""
    return TreeIndex(clock=lambda: time.time_ns() + 10 * SETTLE_NS)


def tree(project: Path) -> Path:
    for i in range(30):
        folder = project / f"pkg{i // 10}" / f"mod{i % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "code.py").write_text("x = 1\n")
    return project / "pkg1" / "mod3"


@pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed (.ci/run installs it)")
async def test_a_secret_file_the_previous_command_wrote_is_masked_in_the_next(project: Path) -> None:
    folder = tree(project)
    ctx = ToolContext(project, Session.start(project, RequestSpec(model="m", system="s", tools=[])), bash_timeout=20,
                      confinement="workspace-write")
    bash = Bash(index=trusting())
    first = await bash.run(BashInput(command="true"), ctx)  # every folder listed and trusted
    wrote = await bash.run(BashInput(command=f"printf '{SECRET}' > pkg1/mod3/.env"), ctx)
    (project / "pkg0" / "mod1" / "id_rsa").write_text("-----BEGIN PRIVATE KEY-----")  # the user's editor, between calls
    read = await bash.run(BashInput(command="cat pkg1/mod3/.env pkg0/mod1/id_rsa; echo end"), ctx)
    assert first.exit_code == 0 and wrote.exit_code == 0 and (folder / ".env").read_text() == SECRET
    assert read.exit_code == 0 and "end" in read.content
    assert "hunter2" not in read.content and "PRIVATE" not in read.content


def test_an_unchanged_folder_keeps_its_listing_and_a_changed_one_is_listed_again(project: Path) -> None:
    folder = tree(project)
    index = trusting()
    assert index.walk(project).secrets == []
    (folder / ".env").write_text(SECRET)
    (project / "pkg2" / "mod0" / "sub" / ".git").mkdir(parents=True)
    again = index.walk(project)
    assert again.secrets == [(folder / ".env").resolve()]
    assert again.nested == [(project / "pkg2" / "mod0" / "sub" / ".git").resolve()]
    assert index.walk(project) == again


def test_a_link_named_like_a_secret_masks_what_it_names_now(project: Path) -> None:
    folder = tree(project)
    os.symlink("../../vault/token.txt", folder / ".env")  # dangling: nothing to mask yet
    index = trusting()
    assert index.walk(project).secrets == []
    (project / "vault").mkdir()
    (project / "vault" / "token.txt").write_text(SECRET)  # the folder holding the link is unchanged
    assert index.walk(project).secrets == [(project / "vault" / "token.txt").resolve()]


def test_a_folder_moved_with_its_secret_is_still_walked(project: Path) -> None:
    folder = tree(project)
    (folder / "server.PEM").write_text("-----BEGIN PRIVATE KEY-----")
    index = trusting()
    assert index.walk(project).secrets == [(folder / "server.PEM").resolve()]
    folder.rename(project / "moved")
    assert index.walk(project).secrets == [(project / "moved" / "server.PEM").resolve()]


def test_secret_names_match_the_protected_patterns_case_insensitively() -> None:
    assert all(is_secret_name(n) for n in (".env", ".ENV.local", "prod.env", "Server.PEM", "id_rsa.pub", "a.tfstate.1"))
    assert not any(is_secret_name(n) for n in ("env.py", "keys.txt", "pem", "README.md", "x.envy"))
