"""The bubblewrap sandbox, attacked for real: a hostile model scripted through the loopback server."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import shutil
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from rhapsody.core.session.history import read_history
from rhapsody.loopback.script import call, say
from rhapsody.sandbox.bwrap import bwrap_path

from tests.conftest import Stub, collect, waited

pytestmark = pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed (.ci/run installs it)")
NARRATE = "I will run this command now because the task needs it, and I expect it to tell us something."
KEY = "sk-ant-api03-sandbox-test-secret-0123456789"


async def bash_results(stub: Stub, project: Path, *commands: str, mode: str = "auto-edit", **settings: object) -> list[dict]:
    stub.script(*[call(NARRATE, "bash", command=c) for c in commands], say("done"))
    wiring = stub.wire(project, permission_mode=mode, **settings)
    await collect(wiring.agent.run("go"))
    bodies = stub.bodies()
    return [bodies[i + 1]["messages"][-1]["content"][0] for i in range(len(commands))]


async def test_auto_edit_runs_a_sandboxed_write_inside_the_root_without_asking(stub: Stub, project: Path) -> None:
    [result] = await bash_results(stub, project, "echo made > made.txt && cat made.txt")
    assert not result.get("is_error") and (project / "made.txt").read_text() == "made\n"


async def test_writes_outside_the_root_and_into_git_config_and_hooks_fail(stub: Stub, project: Path) -> None:
    hook = project / ".git" / "hooks" / "pre-commit"
    results = await bash_results(
        stub, project,
        "echo '[core]\n\tfsmonitor = touch /tmp/owned' >> .git/config",
        "printf '#!/bin/sh\\ntouch owned\\n' > .git/hooks/pre-commit",
        f"touch {project.parent}/escaped.txt; touch /etc/rhapsody-escaped",
        "mkdir -p .rhapsody && echo 'permission_mode = \"yolo\"' > .rhapsody/config.toml",
    )
    assert all(r.get("is_error") for r in results)
    assert "fsmonitor" not in (project / ".git" / "config").read_text()
    assert not hook.exists()
    assert not (project.parent / "escaped.txt").exists() and not Path("/etc/rhapsody-escaped").exists()
    assert not (project / ".rhapsody" / "config.toml").exists()


async def test_no_network_from_the_sandbox(stub: Stub, project: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    try:
        [result] = await bash_results(stub, project, f"echo hello > /dev/tcp/127.0.0.1/{port} && echo connected")
        with pytest.raises(TimeoutError):
            listener.accept()
    finally:
        listener.close()
    assert result.get("is_error") and "connected" not in result["content"]


async def test_the_key_is_not_reachable_through_proc_or_the_environment(stub: Stub, project: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-0123456789abcdef")
    results = await bash_results(
        stub, project,
        "cat /proc/$PPID/environ | base64 -w0; echo; cat /proc/1/environ | rev",
        "env | base64 -w0; ls /proc | head -50 | tr '\\n' ' '",
    )
    text = json.dumps(results) + json.dumps(stub.bodies())
    for leak in (KEY, KEY[::-1], base64.b64encode(KEY.encode()).decode()[:24], "tok-0123456789abcdef"):
        assert leak not in text
    listed = results[1]["content"].split("\n")[-2].split()
    assert "self" in listed, listed  # the commands ran: the sandbox's own /proc was listed
    assert str(os.getpid()) not in listed


async def test_secret_files_read_empty_in_the_sandbox_even_through_a_link(stub: Stub, project: Path) -> None:
    (project / ".env").write_text("API_TOKEN=hunter2-very-secret\n")
    (project / "keys").mkdir()
    (project / "keys" / "server.PEM").write_text("-----BEGIN PRIVATE KEY-----\nabc\n")
    (project / "notes").mkdir()
    os.symlink("../.env", project / "notes" / "config.txt")
    [result] = await bash_results(stub, project, "cat .env notes/config.txt keys/server.PEM | base64 -w0; echo end")
    assert not result.get("is_error") and result["content"].startswith("end") and "aHVudGVy" not in result["content"] and "hunter2" not in result["content"]
    assert base64.b64encode(b"-----BEGIN").decode()[:8] not in result["content"]
    assert (project / ".env").read_text().startswith("API_TOKEN=")  # masked inside only


@pytest.mark.parametrize("where", ["/dev/shm", "/run"])
async def test_a_project_kept_where_the_sandbox_mounts_its_own_folder_still_has_its_secrets_masked(
        stub: Stub, _project_template: Path, where: str) -> None:
    # /dev/shm and /run are fresh in the sandbox; the project is bound in on top wherever it lives. Its
    # secrets there are the project's, not the host's: masked like anywhere else, through a link too.
    if not os.path.isdir(where) or not os.access(where, os.W_OK):
        pytest.skip(f"{where} is not a folder this user can write")
    base = Path(tempfile.mkdtemp(prefix="rhapsody-test-", dir=where))
    try:
        project = Path(shutil.copytree(_project_template, base / "proj", symlinks=True))
        (project / ".env").write_text("API_TOKEN=hunter2-very-secret\n")
        (project / "notes").mkdir()
        os.symlink("../.env", project / "notes" / "config.txt")
        [result] = await bash_results(stub, project, "cat .env notes/config.txt; echo end; mktemp")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert not result.get("is_error"), result
    assert result["content"].startswith("end") and "hunter2" not in result["content"]


def test_the_empty_file_bound_over_secrets_is_made_once_and_nothing_is_left_when_rhapsody_is_killed(
        tmp_path: Path) -> None:
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp"), "XDG_STATE_HOME": str(tmp_path / "state")}
    killed = ("import os, signal; from rhapsody.sandbox.bwrap import empty_file; from pathlib import Path; "
              "print(empty_file(Path('/nowhere/proj')), flush=True); "
              "os.kill(os.getpid(), signal.SIGKILL)")

    def made() -> Path:
        run = subprocess.run([sys.executable, "-c", killed], env=env, capture_output=True, text=True)
        assert run.returncode == -signal.SIGKILL, run.stderr
        return Path(run.stdout.strip())

    first = made()
    assert first == tmp_path / "state" / "rhapsody" / "sandbox-empty" and first.read_bytes() == b""
    assert (first.stat().st_mode & 0o777) == 0o444 and not list((tmp_path / "tmp").iterdir())
    inode = first.stat().st_ino
    assert made() == first and first.stat().st_ino == inode  # the same file again
    first.chmod(0o644)
    first.write_text("not empty any more")
    assert made() == first and first.read_bytes() == b"" and (first.stat().st_mode & 0o777) == 0o444
    assert not list((tmp_path / "tmp").iterdir()) and sorted(p.name for p in first.parent.iterdir()) == ["sandbox-empty"]


def test_an_empty_file_with_a_second_name_is_replaced_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A hard link planted where the file goes (by a session whose state folder a command could write)
    # would let its other, writable name fill every mask later.
    from rhapsody.sandbox import bwrap

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr(bwrap, "_EMPTY", [])
    folder = tmp_path / "state" / "rhapsody"
    folder.mkdir(parents=True)
    (tmp_path / "plant").write_text("")
    (tmp_path / "plant").chmod(0o444)
    os.link(tmp_path / "plant", folder / "sandbox-empty")
    made = Path(bwrap.empty_file(tmp_path / "proj"))
    assert made == folder / "sandbox-empty" and made.stat().st_nlink == 1
    assert made.stat().st_ino != (tmp_path / "plant").stat().st_ino and (tmp_path / "plant").stat().st_nlink == 1


async def test_rhapsody_run_in_its_own_state_folder_cannot_fill_the_masks_or_write_its_state(
        stub: Stub, tmp_path: Path, _project_template: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "st"))
    project = Path(shutil.copytree(_project_template, tmp_path / "st" / "rhapsody", symlinks=True))
    (project / ".env").write_text("API_TOKEN=hunter2-very-secret\n")
    results = await bash_results(stub, project, "chmod 644 sandbox-empty; echo ATTACKER > sandbox-empty; "
                                 "mkdir -p projects && touch projects/planted; cat .env; echo end", "cat .env; echo end")
    assert all("hunter2" not in r["content"] and "ATTACKER" not in r["content"] for r in results), results
    assert results[1]["content"].startswith("end")
    assert not (project / "projects" / "planted").exists()


async def test_a_temporary_folder_named_outside_the_sandbox_is_its_own_tmp_inside(
        stub: Stub, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # pam_tmpdir's TMPDIR=/tmp/user/1000 names a folder the sandbox's fresh /tmp does not have
    (tmp_path / "user").mkdir()
    for var in ("TMPDIR", "TMP", "TEMP"):
        monkeypatch.setenv(var, str(tmp_path / "user"))
    [result] = await bash_results(stub, project, "mktemp && echo $TMPDIR $TMP $TEMP && "
                                                 "python3 -c 'import tempfile; print(tempfile.gettempdir())'")
    assert not result.get("is_error"), result
    made, named, python = result["content"].splitlines()[:3]
    assert made.startswith("/tmp/tmp.") and named == "/tmp /tmp /tmp" and python == "/tmp"
    assert not list((tmp_path / "user").iterdir())  # nothing written to the host's folder


def _running(marker: str) -> bool:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                return True
        except OSError:
            continue
    return False


def _wait_gone(marker: str, bound: float = 10.0) -> bool:
    return waited(lambda: not _running(marker), bound)


async def test_a_backgrounded_process_dies_when_the_command_ends(stub: Stub, project: Path) -> None:
    await bash_results(stub, project, "sleep 987301 & setsid sleep 987302 & nohup sleep 987303 >/dev/null 2>&1 & echo ok")
    assert all(_wait_gone(f"sleep 98730{i}") for i in (1, 2, 3))


async def test_a_backgrounded_process_dies_when_the_command_ends_without_a_sandbox(stub: Stub, project: Path) -> None:
    await bash_results(stub, project, "sleep 987311 & echo ok", mode="yolo", sandbox="off")
    assert _wait_gone("sleep 987311")


RUNNER = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path
    from rhapsody.core.session.context import RequestSpec
    from rhapsody.core.session.session import Session
    from rhapsody.core.toolbox.protocol import ToolContext
    from rhapsody.tools import default_toolbox
    from rhapsody.sandbox.procs import install_exit_cleanup

    install_exit_cleanup()
    root = Path(sys.argv[1])
    ctx = ToolContext(root, Session.start(root, RequestSpec(model="m", system="s", tools=[])), 600, 2000)
    print("ready", flush=True)
    asyncio.run(default_toolbox("yolo", sandbox=sys.argv[3]).run("bash", {"command": sys.argv[2]}, ctx))
""")


@pytest.mark.parametrize("sig,sandbox", [(signal.SIGKILL, "workspace-write"), (signal.SIGTERM, "off"),
                                         (signal.SIGHUP, "off"), (signal.SIGTERM, "workspace-write")])
def test_commands_die_with_rhapsody(project: Path, sig: int, sandbox: str) -> None:
    marker = f"sleep 98{sig:02d}{len(sandbox)}7"
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, str(project), f"{marker} & {marker}", sandbox],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        assert waited(lambda: _running(marker))
        proc.send_signal(sig)
        proc.wait(timeout=10)
        assert _wait_gone(marker)
    finally:
        proc.kill()
        proc.wait()


async def test_yes_costs_bounded_memory_and_says_what_was_cut(stub: Stub, project: Path) -> None:
    [result] = await bash_results(stub, project, "timeout 2 yes", output_cap=2000)
    assert len(result["content"]) < 3000
    assert "bytes cut from the middle" in result["content"] and "cap 2,000" in result["content"]


async def test_leaving_the_sandbox_is_refused_headless_and_recorded(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command=f"touch {project.parent}/out.txt", sandbox=False,
                     justification="I need to write outside"), say("ok"))
    wiring = stub.wire(project, permission_mode="yolo")
    await collect(wiring.agent.run("go"))
    result = stub.bodies()[1]["messages"][-1]["content"][0]
    assert result["is_error"] and "outside the sandbox" in result["content"] and "unsandboxed:" in result["content"]
    assert not (project.parent / "out.txt").exists()
    records = [r for r in read_history(wiring.session.path).records if r["kind"] == "permission"]
    assert records[-1]["decision"] == "deny"


async def test_a_user_unsandboxed_rule_lets_a_justified_call_leave(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command=f"touch {project.parent}/out.txt", sandbox=False,
                     justification="the release script writes next to the project"), say("ok"))
    wiring = stub.wire(project, permission_mode="auto-edit", allow=["unsandboxed:touch *"])
    await collect(wiring.agent.run("go"))
    assert (project.parent / "out.txt").exists()


async def test_an_in_tree_hooks_folder_is_read_only_in_the_sandbox(stub: Stub, project: Path) -> None:
    with (project / ".git" / "config").open("a") as f:
        f.write("[core]\n\thooksPath = .husky\n")
    (project / ".husky").mkdir()
    [result] = await bash_results(stub, project, "printf '#!/bin/sh\\ntouch owned\\n' > .husky/pre-commit")
    assert result.get("is_error") and not (project / ".husky" / "pre-commit").exists()


async def test_git_cannot_be_swapped_or_redirected_but_commits_still_work(stub: Stub, project: Path) -> None:
    with (project / ".git" / "config").open("a") as f:
        f.write("[include]\n\tpath = ../shared.gitconfig\n")
    (project / "shared.gitconfig").write_text("")
    evil = "[core]\n\tfsmonitor = touch owned\n"
    results = await bash_results(
        stub, project,
        "mv .git .git-old && git init -q",
        f"mkdir -p evil && cp .git/config evil/config && printf '{evil}' >> evil/config && echo $PWD/evil > .git/commondir",
        f"printf '{evil}' > .git/config.worktree",
        f"printf '{evil}' >> shared.gitconfig",
        "echo x > f.txt && git add f.txt && git -c user.name=t -c user.email=t@x commit -qm f && git log --oneline",
    )
    assert results[0].get("is_error") and not (project / ".git-old").exists()
    assert "removed .git/commondir" in results[1]["content"] and not (project / ".git" / "commondir").exists()
    assert "removed .git/config.worktree" in results[2]["content"]
    assert results[3].get("is_error") and (project / "shared.gitconfig").read_text() == ""
    assert not results[4].get("is_error") and " f" in results[4]["content"]


async def test_host_sockets_under_run_are_unreachable(stub: Stub, project: Path) -> None:
    path = Path("/run") / f"rhapsody-test-{os.getpid()}.sock"
    if not os.access("/run", os.W_OK):
        pytest.skip("/run is not writable here")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)
    server.settimeout(0.5)
    try:
        [result] = await bash_results(stub, project, f"python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); "
                                                      f"s.connect('{path}'); print('connected')\"")
        with pytest.raises(TimeoutError):
            server.accept()
    finally:
        server.close()
        path.unlink()
    assert "connected" not in result["content"].replace("not connected", "")


async def test_no_unix_sockets_but_socketpairs_work(stub: Stub, project: Path) -> None:
    results = await bash_results(stub, project, "python3 -c 'import socket; socket.socket(socket.AF_UNIX)'",
                                 "python3 -c 'import socket; socket.socketpair(); print(\"pair ok\")'")
    assert results[0].get("is_error") and "Permission denied" in results[0]["content"]
    assert "pair ok" in results[1]["content"]


async def test_nested_repositories_and_git_files_inside_the_root_are_frozen_too(stub: Stub, project: Path) -> None:
    import git

    git.Repo.init(project / "vendor" / "lib")
    (project / "wt").mkdir()
    git.Repo.init(project / "store", bare=True)
    (project / "wt" / ".git").write_text(f"gitdir: {project / 'store'}\n")
    results = await bash_results(
        stub, project,
        "echo '[core] fsmonitor = touch owned' >> vendor/lib/.git/config",
        "echo '[core] fsmonitor = touch owned' >> store/config",
        "echo 'gitdir: /tmp/elsewhere' > wt/.git",
        "mv vendor/lib/.git vendor/lib/.old",
    )
    assert all(r.get("is_error") for r in results), results
    assert "fsmonitor" not in (project / "vendor" / "lib" / ".git" / "config").read_text()
    assert "fsmonitor" not in (project / "store" / "config").read_text()
    assert (project / "wt" / ".git").read_text().startswith(f"gitdir: {project}")


async def test_a_command_cannot_leave_an_mcp_config_behind(stub: Stub, project: Path) -> None:
    results = await bash_results(stub, project, "echo '{\"mcpServers\": {\"x\": {\"command\": \"touch\"}}}' > .mcp.json")
    assert "removed .mcp.json" in results[0]["content"] and not (project / ".mcp.json").exists()


async def test_an_existing_mcp_config_is_read_only(stub: Stub, project: Path) -> None:
    (project / ".mcp.json").write_text('{"mcpServers": {}}')
    results = await bash_results(stub, project, "echo '{}' > .mcp.json", "rm -f .mcp.json")
    assert all(r.get("is_error") for r in results) and (project / ".mcp.json").read_text() == '{"mcpServers": {}}'


@pytest.mark.parametrize("where", ["node_modules/dep", "sub"])
async def test_a_submodule_a_command_plants_loses_its_programs_even_in_skipped_folders(stub: Stub, project: Path,
                                                                                     where: str) -> None:
    marker = project.parent / "ran-by-planted-submodule"
    plant = (f"mkdir -p {where} && cd {where} && git init -q && git config user.email a@b && git config user.name a "
             "&& echo x > f && git add f && git commit -qm s && sha=$(git rev-parse HEAD) && "
             f"git config core.fsmonitor 'touch {marker}; false' && git config user.name kept && "
             f"printf '#!/bin/sh\\ntouch {marker}\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && "
             f"cd {project} && git update-index --add --cacheinfo 160000,$sha,{where} && echo planted")
    results = await bash_results(stub, project, plant)
    assert "planted" in str(results[0]) and "core.fsmonitor" in str(results[0])
    subprocess.run(["git", "status"], cwd=project, capture_output=True, timeout=30)  # the user, later
    nested = project / where
    (nested / "f").write_text("y\n")
    subprocess.run(["git", "commit", "-qam", "user commit"], cwd=nested, capture_output=True, timeout=30)
    assert not marker.exists()
    assert subprocess.run(["git", "config", "user.name"], cwd=nested, capture_output=True, text=True).stdout == "kept\n"


@pytest.mark.parametrize("layout", ["plain", "git-file"])
async def test_a_hooks_path_that_does_not_exist_yet_cannot_be_filled(stub: Stub, project: Path, layout: str) -> None:
    subprocess.run(["git", "config", "core.hooksPath", ".githooks"], cwd=project, check=True)
    if layout == "git-file":
        (project / ".git").rename(project / "gitdata")
        (project / ".git").write_text("gitdir: gitdata\n")
    marker = project.parent / "ran-by-new-hooks-path"
    cmd = (f"mkdir -p .githooks; printf '#!/bin/sh\\ntouch {marker}\\n' > .githooks/pre-commit; "
           "chmod +x .githooks/pre-commit; echo tried")
    results = await bash_results(stub, project, cmd)
    assert "tried" in str(results[0])
    (project / "app.py").write_text("x = 1\n")
    subprocess.run(["git", "commit", "-qam", "user commit"], cwd=project, capture_output=True, timeout=30)
    assert not marker.exists()
