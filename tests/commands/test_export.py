"""`rhapsody export` and `/export`: a real session (loopback model, real tools, two seams, a hint, an
approval and a denial with the human's reason) exported as HTML and Markdown, and opened in a real
headless Chromium."""

from __future__ import annotations

from rhapsody.core.session.records import dumped
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rhapsody.cli import main
from rhapsody.commands.slash import run_command
from rhapsody.core.events import ToolStarted
from rhapsody.core.session.history import read_history
from rhapsody.core.toolbox.approval import Approval
from rhapsody.commands.export import INLINE_CAP, export_text, page_html
from rhapsody.loopback.script import call, say
from rhapsody.commands.stats import billing

from tests.conftest import GATE, Stub, collect
from tests.core.session.test_handoff_e2e import handoff_turn

REASON = "not build/: it holds the benchmark data"
HINT = "keep each finding to one line"
SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


async def answer(tool: str, argument: str, why: str, args: object = None, rules: object = ()) -> Approval:
    """The human: allows an echo, denies removing build/ with a reason."""
    return Approval(False, words=REASON) if "rm " in argument else Approval(True)


async def two_seam_session(stub: Stub, project: Path) -> Path:
    """A session through the real loop and tools: calls, a hint, an approval, a denial, two seams."""
    stub.script(
        # printf, not echo: a read-only command would run without the question this test answers
        call("I will print a marker, to see the shell answers as expected.", "bash", command="printf marker-1"),
        call("I will clear build/ so the next build starts from nothing.", "bash", command="rm -rf build"),
        say("Understood, build/ stays."),
        handoff_turn(), say("Note written."),
        call("I will print a second marker, to check the shell after the seam.", "bash", command="printf marker-2"),
        say("Second marker printed."),
        handoff_turn(), say("Second note written."),
    )
    wiring = stub.wire(project, permission_mode="ask")
    wiring.agent.toolbox.approver = answer
    async for event in wiring.agent.run("print markers"):
        if isinstance(event, ToolStarted) and "marker-1" in str(event.call.input):
            wiring.session.hint(HINT)
    for task in (None, "one more marker", None):
        if task is None:
            wiring.agent.request_handoff()
        await collect(wiring.agent.run(task))
    assert sum(1 for r in dumped(wiring.session.records) if r["kind"] == "seam") == 2
    return wiring.session.path


async def test_html_export_shows_seams_notes_hints_approvals_and_both_charts(stub: Stub, project: Path) -> None:
    path = await two_seam_session(stub, project)
    sid, page = export_text(project, str(path), "html")
    assert sid == path.stem
    assert page.count('<section class="seam" id="seam-') == 2 and "fixed add() in app.py" in page  # the field notes
    assert re.search(rf"✎ h1 \[delivered · after the bash result\] {HINT}", page)  # the hint, where it landed
    assert "✓ bash printf marker-1: allowed by the human" in page
    assert f"denied by the human: {REASON}" in page
    assert re.search(r'<details class="line tool exit[^"]*stripped"><summary>⊘ bash printf marker-1', page)
    for chart in ("chart-context", "chart-billed"):
        svg = page[page.index(f'<svg id="{chart}"'):]
        svg = svg[: svg.index("</svg>")]
        assert svg.count('class="seam-mark"') == 2 and "<polyline" in svg
    assert "<script" not in page and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


async def test_context_chart_draws_the_sawtooth_the_seams_made(stub: Stub, project: Path) -> None:
    path = await two_seam_session(stub, project)
    records = read_history(path, typed=True).typed
    page = page_html(records, project, path.stem)
    svg = page[page.index('<svg id="chart-context"'):]
    points = svg[svg.index('points="') + 8:].split('"', 1)[0].split()
    xs = [float(p.split(",")[0]) for p in points]
    ys = [float(p.split(",")[1]) for p in points]  # SVG y grows downwards: a drop in context is a rise in y
    assert len(ys) == sum(1 for r in records if r.kind == "request") + 2 * 2  # each seam: its before and after
    drops = [a for (a, b), (c, d) in zip(zip(xs, ys), zip(xs[1:], ys[1:])) if a == c and d > b]
    marks = re.findall(r'<g class="seam-mark"><title>seam \d</title><line x1="([\d.]+)"', svg.split("</svg>")[0])
    assert [f"{x:.1f}" for x in drops] == marks  # the context falls straight down, on each seam's mark


async def test_billed_chart_ends_at_the_totals_rhapsody_stats_prints(stub: Stub, project: Path) -> None:
    path = await two_seam_session(stub, project)
    records = read_history(path, typed=True).typed
    figures = billing(records, per_request=True)
    assert round(sum(figures["billed_per_request"])) == figures["billed_input_tokens"]
    assert abs(sum(figures["billed_per_request_without_seams"]) - figures["billed_input_tokens_without_seams"]) <= 1
    assert "billed_per_request" not in billing(records)  # `rhapsody stats --json` stays as it was
    assert f"{figures['billed_input_tokens']:,}" in page_html(records, project, path.stem)


async def test_markdown_export_folds_calls_and_marks_the_seams(stub: Stub, project: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = await two_seam_session(stub, project)
    assert main(["export", str(path), "--md", "-o", "-", "--cwd", str(project)]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"# rhapsody session {path.stem}")
    assert text.count("**seam ") == 2 and "<details><summary>⊘ bash printf marker-1" in text
    assert "> › print markers" in text and REASON in text


def test_long_outputs_are_cut_with_a_note_and_secrets_masked(project: Path, tmp_path: Path) -> None:
    records: list[dict[str, Any]] = [
        {"v": 1, "seq": 0, "ts": 1.0, "kind": "session", "session": "s1", "model": "claude-sonnet-4-5", "system": ""},
        {"v": 1, "seq": 1, "ts": 1.0, "kind": "message", "role": "user", "content": [{"type": "text", "text": "go"}]},
        {"v": 1, "seq": 2, "ts": 1.0, "kind": "message", "role": "assistant", "content": [
            {"type": "text", "text": f"I will print the token {SECRET}, which I should not."},
            {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "yes | head"}}]},
        {"v": 1, "seq": 3, "ts": 1.0, "kind": "message", "role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "y\n" * 100_000}]},
    ]
    history = tmp_path / "old.jsonl"
    history.write_text("".join(json.dumps(r) + "\n" for r in records))
    for fmt in ("html", "md"):
        _, page = export_text(project, str(history), fmt)
        assert SECRET not in page and "[masked secret]" in page
        assert "more characters not shown here" in page and len(page) < INLINE_CAP + 20_000


async def test_slash_export_writes_a_private_page_under_rhapsody(stub: Stub, project: Path) -> None:
    stub.script(say("Nothing to do."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("hello"))
    outcome = run_command(wiring.agent, "/export")
    written = project / ".rhapsody" / "exports" / f"{wiring.session.id}.html"
    assert not outcome.error and str(written) in outcome.text
    assert written.stat().st_mode & 0o777 == 0o600 and "› hello" in written.read_text()
    missing = run_command(wiring.agent, "/export --md nosuch/s.md")  # no such folder: one line, nothing raised
    assert missing.error and missing.text.startswith("export failed: cannot write") and "\n" not in missing.text
    outcome = run_command(wiring.agent, "/export --md s.md")
    assert (project / "s.md").read_text().startswith("# rhapsody session")
    assert run_command(wiring.agent, "/export a b").error


async def test_an_export_while_a_turn_runs_says_the_running_reply_is_not_in_it_yet(stub: Stub, project: Path) -> None:
    stub.script(call("I will wait for the go file, so the export runs while I work.", "bash", command=GATE),
                say("Waited for go."))
    wiring = stub.wire(project, permission_mode="yolo")
    during = None
    async for event in wiring.agent.run("wait for go"):
        if isinstance(event, ToolStarted):
            during = run_command(wiring.agent, "/export --md")
            (project / "go").touch()
    page = (project / ".rhapsody" / "exports" / f"{wiring.session.id}.md")
    assert during is not None and not during.error and "a turn is running" in during.text
    assert "Waited for go." not in page.read_text()
    after = run_command(wiring.agent, "/export --md")
    assert after.text == f"exported to {page}" and "Waited for go." in page.read_text()


def test_export_of_a_missing_session_is_one_line_and_status_2(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "nosuch", "--cwd", str(project)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rhapsody: ") and err.count("\n") == 1


# -- a real browser ----------------------------------------------------------------------------


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium is not installed (.ci/run installs Debian's chromium; apt-get install chromium)")
    return found


async def test_page_opens_in_headless_chromium_with_charts_seams_and_no_console_errors(
        stub: Stub, project: Path, tmp_path: Path) -> None:
    binary = chromium()
    path = await two_seam_session(stub, project)
    page = tmp_path / "page.html"
    assert main(["export", str(path), "--html", "-o", str(page), "--cwd", str(project)]) == 0
    done = subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
         "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert '<svg id="chart-context"' in dom and '<svg id="chart-billed"' in dom
    assert dom.count('<g class="seam-mark">') == 4 and dom.count('<section class="seam" id="seam-') == 2
    assert "fixed add() in app.py" in dom and "<details" in dom
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []  # no script error, and nothing the page's policy had to block
