"""Tools against real files, real subprocesses and a real git repository."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from rhapsody.core.session.context import RequestSpec
from rhapsody.core.session.session import Session
from rhapsody.core.toolbox.protocol import ToolContext, ToolOutcome
from rhapsody.tools import default_toolbox
from rhapsody.loopback.script import say

from tests.conftest import SANDBOX, Stub, collect, until


@pytest.fixture
def ctx(project: Path) -> ToolContext:
    session = Session.start(project, RequestSpec(model="m", system="s", tools=[]))
    return ToolContext(project, session, bash_timeout=5, output_cap=2000)


async def run(ctx: ToolContext, name: str, mode: str = "yolo", **args: object) -> ToolOutcome:
    outcome, _ = await default_toolbox(mode, sandbox=SANDBOX).run(name, args, ctx)
    return outcome


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "sub/../../x", "link/secret"])
async def test_paths_outside_the_project_are_refused(ctx: ToolContext, tmp_path: Path, path: str) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret").write_text("s")
    os.symlink(tmp_path / "outside", ctx.root / "link")
    for tool, extra in (("read_file", {}), ("write_file", {"content": "x"})):
        outcome = await run(ctx, tool, path=path, **extra)
        assert outcome.is_error and "outside the project root" in outcome.content


async def test_read_range_and_device_files(ctx: ToolContext) -> None:
    (ctx.root / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    outcome = await run(ctx, "read_file", path="f.txt", start_line=3, end_line=4)
    assert "lines 3-4 of 10" in outcome.content and "line 3" in outcome.content and "line 5" not in outcome.content
    os.mkfifo(ctx.root / "fifo")
    refused = await run(ctx, "read_file", path="fifo")
    assert refused.is_error and "not a regular file" in refused.content


async def test_file_tool_errors_name_the_path_as_given_with_its_folders(ctx: ToolContext) -> None:
    from rhapsody.core.session.messages import ToolUseBlock
    from rhapsody.view.render import ToolView, tool_line

    missing = await run(ctx, "read_file", path="nope/missing.py")
    assert missing.is_error and "no such file: nope/missing.py" in missing.content  # what the model receives
    call = ToolUseBlock(id="t1", name="read_file", input={"path": "nope/missing.py"})
    shown = tool_line(ToolView(call, "error", 0, None, missing.content)).text
    assert shown.endswith("no such file: nope/missing.py")  # and what the human sees
    edit = await run(ctx, "edit_file", path="nope/missing.py", old="a", new="b")
    assert edit.is_error and "no such file: nope/missing.py" in edit.content
    (ctx.root / "sub").mkdir()
    os.mkfifo(ctx.root / "sub" / "fifo")
    fifo = await run(ctx, "read_file", path="sub/fifo")
    assert fifo.is_error and "refused: sub/fifo is not a regular file" in fifo.content
    (ctx.root / "sub" / "ro.txt").write_text("x")
    os.chmod(ctx.root / "sub" / "ro.txt", 0o444)
    if not os.access(ctx.root / "sub" / "ro.txt", os.W_OK):  # root can write anything
        locked = await run(ctx, "write_file", path="sub/ro.txt", content="y")
        assert locked.is_error and "refused: sub/ro.txt is read-only" in locked.content


async def test_edit_needs_exactly_one_match(ctx: ToolContext) -> None:
    (ctx.root / "e.txt").write_text("x = 1\nx = 1\n")
    many = await run(ctx, "edit_file", path="e.txt", old="x = 1", new="x = 2")
    assert many.is_error and "occurs 2 times" in many.content
    none = await run(ctx, "edit_file", path="e.txt", old="y", new="z")
    assert none.is_error and "not found" in none.content
    ok = await run(ctx, "edit_file", path="e.txt", old="x = 1\nx", new="x = 3\nx")
    assert not ok.is_error and (ctx.root / "e.txt").read_text() == "x = 3\nx = 1\n"


async def test_bash_timeout_kills_the_whole_process_group(ctx: ToolContext) -> None:
    start = time.monotonic()
    # Without the sandbox: $! must be a host pid (the sandboxed case is in test_sandbox.py).
    command = "(sleep 30; echo late > late.txt) & echo $! > bg.pid; sleep 30"
    outcome, _ = await default_toolbox("yolo", sandbox="off").run("bash", {"command": command, "timeout": 0.5}, ctx)
    assert time.monotonic() - start < 5
    assert outcome.is_error and "killed after 0.5 s timeout" in outcome.content
    background = int((ctx.root / "bg.pid").read_text())
    await until(lambda: not alive(background), within=5)  # the background job went with the group


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie waiting for its parent to reap it does not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


async def test_bash_reports_exit_code_and_caps_output_keeping_head_and_tail(ctx: ToolContext) -> None:
    outcome = await run(ctx, "bash", command="seq 1 5000; exit 3")
    assert outcome.is_error and outcome.exit_code == 3 and "[exit code 3]" in outcome.content
    assert outcome.content.startswith("1\n2\n") and "5000" in outcome.content and "cut from the middle" in outcome.content


async def test_read_only_mode_refuses_writes_and_runs_bash_in_a_read_only_sandbox(ctx: ToolContext) -> None:
    for name, args in (("bash", {"command": "touch x"}), ("write_file", {"path": "x", "content": ""})):
        outcome = await run(ctx, name, mode="read-only", **args)
        assert outcome.is_error and "read-only" in outcome.content.lower()
    assert not (ctx.root / "x").exists()
    if SANDBOX == "off":
        return  # no bubblewrap here: read-only mode refuses bash (the line above)
    listing = await run(ctx, "bash", mode="read-only", command="ls && git log --oneline")
    assert not listing.is_error and "app.py" in listing.content and "initial" in listing.content


async def test_git_status_and_search(ctx: ToolContext) -> None:
    (ctx.root / "app.py").write_text("def add(a, b):\n    return a + b\n")
    status = await run(ctx, "git", action="status")
    assert "M app.py" in status.content
    diff = await run(ctx, "git", action="diff")
    assert "+    return a + b" in diff.content
    found = await run(ctx, "search_text", pattern=r"return a \+ b")
    assert "app.py:2:" in found.content
    files = await run(ctx, "find_files", pattern="**/*.py")
    assert "app.py" in files.content and ".rhapsody" not in files.content


async def test_broken_tool_arguments_from_the_model_do_not_crash_the_loop(stub: Stub, project: Path) -> None:
    narration = "I will read a file with arguments that are not what the schema asks for, to see the error."
    stub.script(
        {"content": [{"type": "text", "text": narration}, {"type": "tool_use", "name": "read_file", "input": {"path": 5}}]},
        {"content": [{"type": "text", "text": narration}, {"type": "tool_use", "name": "read_file", "raw_input": '{"path": "app'}]},
        {"content": [{"type": "text", "text": narration}, {"type": "tool_use", "name": "no_such_tool", "input": {}}]},
        say("I give up gracefully."),
    )
    wiring = stub.wire(project)
    events = await collect(wiring.agent.run("go"))
    assert type(events[-1]).__name__ == "TurnEnded"
    results = [m["content"][0] for m in stub.bodies()[-1]["messages"] if m["role"] == "user" and isinstance(m["content"], list)
               and m["content"][0].get("type") == "tool_result"]
    assert len(results) == 3 and all(r.get("is_error") for r in results)
    assert "Invalid arguments for read_file" in results[0]["content"]
    assert "Unknown tool" in results[2]["content"]


async def test_counts_of_one_are_said_in_the_singular(ctx: ToolContext) -> None:
    from rhapsody.core.session.records import Unseam
    from rhapsody.view.render import resumed_line, undo_text, violation_line

    assert "✗ bash not run: 1 word of narration, 8 required" in violation_line("bash", 1, 8).text
    assert "0 words of narration" in violation_line("bash", 0, 8).text
    assert "(1 message," in resumed_line("S", 1, 0.0).text
    undone = undo_text(Unseam(kind="unseam", seam=1, boundary=1, returned_calls=1, verified=True,
                                returned_sha256="ab" * 32))
    assert "the 1 call put back hashes to the SHA-256" in undone
    (ctx.root / "one.txt").write_text("only line\n")
    assert "one.txt has 1 line;" in (await run(ctx, "read_file", path="one.txt", start_line=5)).content
    assert (await run(ctx, "find_files", pattern="one.*")).content.startswith("1 file\n")
    assert "edited one.txt: 1 replacement" == (await run(ctx, "edit_file", path="one.txt", old="only", new="one")).content
    written = await run(ctx, "write_file", path="w.txt", content="x")
    assert written.content == "wrote w.txt: 1 character, 1 line"
