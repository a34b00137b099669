"""Attacks on the trust boundary that currently get through.

Each test is an attack by a hostile model (scripted through the loopback server) or a
hostile repository (built in a temporary folder). Each one FAILS on the code it was
written against and is marked xfail(strict=True); a fix turns it into a passing test
(then drop the marker).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rhapsody.loopback.script import call, say
from rhapsody.tools.sandbox import bwrap_path

from .conftest import Stub, collect

NARRATE = "I will run this command now because the task needs it, and I expect it to tell us something."
needs_bwrap = pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed")


def nested_repo_with_filter(marker: Path) -> str:
    """A bash command (run inside the sandbox) that plants a nested repository whose own config
    names a clean filter, registers it as a submodule in the parent's index, and dirties it."""
    return (
        "git init -q sub && cd sub && git config user.email a@b && git config user.name a && "
        "echo x > f.txt && echo '* filter=evil' > .gitattributes && git add . && git commit -qm s && "
        f"git config filter.evil.clean 'sh -c \"touch {marker}; cat\"' && sha=$(git rev-parse HEAD) && cd .. && "
        "git update-index --add --cacheinfo 160000,$sha,sub && echo y >> sub/f.txt && echo planted"
    )


@needs_bwrap
@pytest.mark.xfail(strict=True, reason="rhapsody's unsandboxed git status (harness facts, status bar) recurses into a "
                                       "nested repo the sandboxed model planted; its own filter config runs outside "
                                       "the sandbox (overrides() only disables drivers named in the parent's config)")
async def test_nested_repo_filter_runs_outside_the_sandbox_via_handoff_facts(stub: Stub, project: Path) -> None:
    marker = project.parent / "escaped-via-submodule-filter"
    stub.script(
        call(NARRATE, "bash", command=nested_repo_with_filter(marker)),
        call(NARRATE, "micro_handoff", done=["x [measured]"], open=["y"], working_directory=str(project)),
        say("done"),
    )
    wiring = stub.wire(project, permission_mode="auto-edit")
    await collect(wiring.agent.run("go"))
    bodies = stub.bodies()
    assert "planted" in str(bodies[1]["messages"][-1]["content"])  # the sandboxed command itself worked
    assert not marker.exists(), "a program configured by the model ran outside the sandbox"
