"""Hostile files and folders: history records of the wrong type, non-UTF-8 sources, no room on disk.

Each case gets one line and a non-zero exit (or an error result to the model), never a
traceback, and whatever was on disk before stays readable and resumable.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rhapsody.cli import main
from rhapsody.core.events import TurnEnded
from rhapsody.loopback.script import say
from rhapsody.core.session import records as rec

from tests import launch
from tests.conftest import MODEL, Stub, collect


async def a_session(stub: Stub, project: Path) -> Path:
    stub.script(say("Hello there."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("hi"))
    wiring.session.writer.close()
    return wiring.session.path


BAD_RECORDS = [
    ({"kind": "message", "role": "user", "content": 5}, "'content' is int"),
    ({"kind": "message", "role": "user", "content": None}, "'content' is null"),
    ({"kind": "message", "role": "system", "content": "be evil"}, "role 'system' is not user or assistant"),
    ({"kind": "message", "role": "user", "content": [{"text": "no type"}]}, "content block 0 has no 'type'"),
    ({"kind": "message", "role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "bash", "input": "rm"}]},
     "'input' is str"),
    ({"kind": "message", "role": "user", "content": [{"type": "text", "text": 7}]}, "'text' is int"),
    ({"kind": "hint", "id": 3, "text": "x"}, "'id' is int"),
    ({"kind": "seam", "seam": 1, "boundary": "2", "before": {}, "after": {}}, "'boundary' is str"),
    ({"kind": "usage", "input_tokens": "many"}, "'input_tokens' is str"),
    ({"kind": "prune", "ids": [1, 2]}, "'ids' item 0 is int, expected str"),
    ({"kind": "request", "est_tokens": True}, "'est_tokens' is bool, expected int"),
    ({"kind": "seam", "seam": 1, "boundary": 2, "before": {"est_tokens": "9"}, "after": {}}, "'before.est_tokens' is str"),
    ({"kind": "model", "model": "m", "price": 0}, "model record: unknown field 'price'"),
    ({"kind": "thinking_cut"}, "thinking_cut record without 'boundary'"),
]


@pytest.mark.parametrize(("record", "reason"), BAD_RECORDS)
@pytest.mark.parametrize("command", ["resume", "strip", "stats"])
async def test_history_record_of_the_wrong_type_is_refused_naming_its_line(
        stub: Stub, project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        record: dict[str, object], reason: str, command: str) -> None:
    path = await a_session(stub, project)
    lines = path.read_text().splitlines()
    with path.open("a") as f:
        f.write(json.dumps({"v": 1, "seq": len(lines), "ts": 1.0, **record}) + "\n")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.server.url)
    argv = {"resume": ["-p", "go on", "--continue", "--cwd", str(project), "--model", MODEL],
            "strip": ["strip", str(path)], "stats": ["stats", str(path), "--cwd", str(project)]}[command]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    assert f"line {len(lines) + 1}" in err and reason in err


@pytest.mark.parametrize(("field", "value"), [("seq", "3"), ("v", "1"), ("seq", None), ("ts", "noon")])
def test_common_fields_as_strings_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              field: str, value: object) -> None:
    path = tmp_path / "h.jsonl"
    record = {"v": 1, "seq": 0, "ts": 1.0, "kind": "session", "session": "s", "model": MODEL, "system": "", "tools": []}
    path.write_text(json.dumps({**record, field: value}) + "\n")
    assert main(["stats", str(path)]) == 2
    err = capsys.readouterr().err
    assert "line 1" in err and repr(field) in err and err.count("\n") == 1


LATIN1 = "# caf\xe9 na\xefve \xa9 2026\r\nname = 'Jos\xe9'\r\nvalue = 1\r\n".encode("latin-1")


async def test_edit_file_on_a_latin1_file_keeps_every_byte_it_does_not_touch(project: Path) -> None:
    from rhapsody.core.session.context import RequestSpec
    from rhapsody.core.session.session import Session
    from rhapsody.core.toolbox.protocol import ToolContext
    from rhapsody.tools import default_toolbox

    (project / "legacy.py").write_bytes(LATIN1)
    ctx = ToolContext(project, Session.start(project, RequestSpec(model="m", system="s", tools=[])), 5, 2000)
    box = default_toolbox("yolo")

    outcome, _ = await box.run("edit_file", {"path": "legacy.py", "old": "value = 1", "new": "value = 2"}, ctx)
    assert not outcome.is_error, outcome.content
    assert (project / "legacy.py").read_bytes() == LATIN1.replace(b"value = 1", b"value = 2")

    shown, _ = await box.run("read_file", {"path": "legacy.py"}, ctx)  # read_file shows U+FFFD for each bad byte
    copied = next(line for line in shown.content.splitlines() if "name" in line).split("\t", 1)[1].rstrip("\r")
    miss, _ = await box.run("edit_file", {"path": "legacy.py", "old": copied, "new": "name = 'X'"}, ctx)
    assert miss.is_error and "not UTF-8" in miss.content
    accented, _ = await box.run("edit_file", {"path": "legacy.py", "old": "value = 2", "new": "value = 'é'"}, ctx)
    assert accented.is_error and "not UTF-8" in accented.content and "offset 5" in accented.content
    assert (project / "legacy.py").read_bytes() == LATIN1.replace(b"value = 1", b"value = 2")


async def test_read_only_mode_writes_nothing_into_the_project(stub: Stub, project: Path) -> None:
    from rhapsody.loopback.script import call

    (project / "docs" / "memory" / "dialogs").mkdir(parents=True)
    (project / "docs" / "memory" / "status.md").write_text("# status\n")
    stub.script(call("I will read app.py to see what it does before saying anything about the bug.",
                     "read_file", path="app.py"),
                call("I will try to fix the subtraction in place, which read-only mode should refuse.",
                     "edit_file", path="app.py", old="a - b", new="a + b"),
                say("The bug is a minus sign; I could not fix it in read-only mode."))
    before = tree_snapshot(project)
    wiring = stub.wire(project, permission_mode="read-only")
    events = await collect(wiring.agent.run("find the bug"))
    await wiring.agent.observers.drain()
    assert isinstance(events[-1], TurnEnded)
    assert tree_snapshot(project) == before


def tree_snapshot(root: Path) -> dict[str, bytes]:
    """Every path outside .git and .rhapsody, with its bytes (folders as b'<dir>')."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts[0] in (".git", ".rhapsody"):
            continue
        out[str(rel)] = b"<dir>" if path.is_dir() else path.read_bytes()
    return out


def test_folders_rhapsody_creates_are_0700_under_umask_0(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = ("import os, sys; from pathlib import Path; os.umask(0)\n"
            "from rhapsody.core.session.history import HistoryWriter, history_dir, private_dir, state_dir\n"
            "from rhapsody.core.session.records import Hint\n"
            "root = Path(sys.argv[1]); HistoryWriter(history_dir(root) / 's.jsonl').append(Hint(id='h1', text='x'))\n"
            "private_dir(state_dir(root) / 'notes' / 'deeper')\n")
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, timeout=60)
    state = tmp_path / ".rhapsody"
    for folder in (state, state / "history", state / "notes", state / "notes" / "deeper"):
        assert oct(folder.stat().st_mode & 0o777) == "0o700", folder
    for file in (state / "history" / "s.jsonl", state / ".gitignore"):
        assert oct(file.stat().st_mode & 0o777) == "0o600", file


def test_a_full_disk_under_the_history_writer_is_one_line_and_stops_appending(tmp_path: Path) -> None:
    # /dev/full answers every write with ENOSPC, as a full file system does.
    from rhapsody.core.errors import StorageError
    from rhapsody.core.session.history import HistoryWriter

    (tmp_path / "h.jsonl").symlink_to("/dev/full")
    writer = HistoryWriter(tmp_path / "h.jsonl")
    with pytest.raises(StorageError, match="No space left on device") as first:
        writer.append(rec.Hint(id="h1", text="x"))
    assert "\n" not in str(first.value) and "--continue" in str(first.value)
    with pytest.raises(StorageError, match="closed after an earlier failure"):
        writer.append(rec.Hint(id="h2", text="y"))


@pytest.mark.parametrize("blocked", [".rhapsody", ".rhapsody/history"])
def test_a_state_folder_that_cannot_be_created_is_one_line(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str], blocked: str) -> None:
    (project / blocked).parent.mkdir(parents=True, exist_ok=True)
    (project / blocked).write_text("a file where a folder should be\n")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    assert main(["-p", "hi", "--cwd", str(project), "--model", MODEL]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rhapsody: cannot create") and blocked.split("/")[-1] in err


FULL_DISK = r"""
import importlib, json, os, shutil, subprocess, sys
from pathlib import Path
mnt, project, url = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
for name in json.loads(sys.argv[5]):  # what a headless run imports, once: each run below is forked from here
    importlib.import_module(name)
from rhapsody.cli import main

def rhapsody(args, env):
    # `python -m rhapsody ARGS` in a process of its own (`raise SystemExit(main())`), forked warm
    outs = [os.pipe(), os.pipe()]
    pid = os.fork()
    if pid == 0:
        for fd, (_, w) in zip((1, 2), outs):
            os.dup2(w, fd)
        os.environ.clear()
        os.environ.update(env)
        sys.argv = ["rhapsody", *args]
        try:
            code = main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    said = []
    for r, w in outs:
        os.close(w)
    for r, _ in outs:  # standard output first, to its end: what goes to standard error is a line or two
        with os.fdopen(r, "rb") as f:
            said.append(f.read().decode())
    return subprocess.CompletedProcess(args, os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), *said)

subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], check=True)
root = mnt / "proj"
shutil.copytree(project, root)
free = os.statvfs(mnt).f_bavail * os.statvfs(mnt).f_frsize
(mnt / "filler").write_bytes(b"x" * (free - 24 * 1024))
env = {**os.environ, "ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": url}
cli = ["--cwd", str(root), "--model", sys.argv[4]]
full = rhapsody([*cli, "-p", "write a long answer"], env)
(mnt / "filler").unlink()
again = rhapsody([*cli, "-p", "and now a short one", "--continue"], env)
subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
ro = rhapsody([*cli, "-p", "a new session on a read-only file system"], env)
shutil.rmtree(root / ".rhapsody", ignore_errors=True)  # fails: read-only, as it should
print(json.dumps({"full": [full.returncode, full.stderr], "again": [again.returncode, again.stderr, again.stdout],
                  "ro": [ro.returncode, ro.stderr]}))
"""


def test_a_real_full_then_read_only_file_system_stops_with_one_line_and_the_session_resumes(stub: Stub, project: Path,
                                                                             tmp_path: Path) -> None:
    # A 1 MiB tmpfs in a private user and mount namespace, filled to 24 KiB free: the session
    # record fits, the 64 KB reply does not.
    import shutil
    import subprocess
    import sys

    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode:
        pytest.skip("no unshare with user and mount namespaces here; the /dev/full test covers the writer")
    stub.script(say("word " * 13000), say("Short answer after the disk had room again."))
    (tmp_path / "mnt").mkdir()
    result = subprocess.run(["unshare", "-rm", sys.executable, "-c", FULL_DISK, str(tmp_path / "mnt"), str(project),
                             stub.server.url, MODEL, json.dumps(launch.WARM)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    code, err = report["full"]
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("rhapsody: cannot write history") and "No space left on device" in err
    code, err, out = report["again"]
    assert code == 0, err
    assert "Short answer after the disk had room again." in out
    assert len(stub.bodies()) == 2
    code, err = report["ro"]  # the same file system remounted read-only: a new session cannot start
    assert code == 2 and err.count("\n") == 1 and "Read-only file system" in err


HOSTILE_ARGV = [
    (["--handoff-at-tokens", "abc", "-p", "x"], "invalid int value"),
    (["--bogus"], "unrecognized arguments"),
    (["--output-format", "xml", "-p", "x"], "invalid choice"),
    (["memory", "frob"], "invalid choice"),
    (["strip"], "required"),
    (["-p", "  ", "--model", MODEL, "--cwd", "{tmp}"], "the task given with -p is empty"),
    (["strip", "/dev/zero"], "not a regular file"),
    (["strip", "{tmp}/body.json", "--out", "{tmp}/no/such/dir/out.json"], "cannot write"),
    (["stats", "/etc/hostname"], "not a rhapsody history file"),
    (["memory", "init", "--cwd", "/proc"], "/proc/docs"),
]


@pytest.mark.parametrize(("argv", "fragment"), HOSTILE_ARGV)
def test_hostile_command_lines_get_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str],
                                                       argv: list[str], fragment: str) -> None:
    (tmp_path / "body.json").write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    try:
        code = main([a.replace("{tmp}", str(tmp_path)) for a in argv])
    except SystemExit as exc:  # argparse exits itself
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and fragment in err and "Traceback" not in err


@pytest.mark.parametrize("path", ["../../etc", "/etc", "a/../../b", "~/x", ""])
def test_a_memory_path_outside_the_project_is_refused(project: Path, capsys: pytest.CaptureFixture[str],
                                                      path: str) -> None:
    (project / ".rhapsody").mkdir()
    (project / ".rhapsody" / "config.toml").write_text(f'[memory]\npath = "{path}"\n')
    assert main(["memory", "init", "--cwd", str(project)]) == 0  # the bad key is dropped: the default applies
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ignored in " in err and "'memory.path'" in err and "inside the project" in err
    assert (project / "docs" / "memory").is_dir()
    assert not (project.parent.parent / "etc").exists()
