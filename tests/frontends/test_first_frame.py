"""The early frame: the app's first screen written by the command line before Textual is imported.

`rhapsody` runs in a real 80x24 pseudo-terminal; what it writes is played onto a grid of
cells (character and colours), the little a screen needs for these bytes: cursor moves,
colours, text. The early frame must hold the welcome with the model named, and the app
that replaces it must paint the same cells: nothing moves, nothing blanks in between.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rhapsody.frontends.first_frame import screen
from tests.conftest import MODEL, make_project
from tests.frontends.test_start import Terminal, _env, home  # noqa: F401 - the fixture

ROWS, COLS = 24, 80
TOKEN = re.compile(r"\x1b\[(\d+);(\d+)H|\x1b\[([0-9;]*)m|\x1b\[[0-9;?<>=$]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
                   r"|\x1b[@-Z\\-_]|\r|\n|[^\x1b\r\n]")
Grid = list[list[tuple[str, str]]]
APP_STARTS = "\x1b[?1000h"
"""Textual's driver turns on mouse reporting first thing: what comes before it is the command line's own."""


def play(data: str) -> list[Grid]:
    """The screen after `data`, and before that the screen each time a frame began at the top left."""
    grid: Grid = [[(" ", "")] * COLS for _ in range(ROWS)]
    row = col = 0
    style, shots = "", []
    for m in TOKEN.finditer(data):
        text = m.group(0)
        if m.group(1):
            if (m.group(1), m.group(2)) == ("1", "1"):
                shots.append([line[:] for line in grid])
            row, col = int(m.group(1)) - 1, int(m.group(2)) - 1
        elif m.group(3) is not None:
            style = "" if m.group(3) in ("", "0") else m.group(3)
        elif text == "\r":
            col = 0
        elif text == "\n":
            row = min(row + 1, ROWS - 1)
        elif text >= " " and col < COLS:
            grid[row][col] = (text, style)
            col += 1
    return [*shots, grid]


def words(grid: Grid, row: int) -> str:
    """Row `row` (1-based) as text."""
    return "".join(ch for ch, _ in grid[row - 1]).strip()


@pytest.fixture
def short() -> Iterator[Path]:
    """A project whose path fits the welcome unwrapped at 80 columns (pytest's own folders do not)."""
    folder = Path(tempfile.mkdtemp(prefix="ff-"))
    yield make_project(folder / "proj")
    shutil.rmtree(folder, ignore_errors=True)


def test_the_app_paints_on_the_early_frames_cells(short: Path, home: Path) -> None:
    project = short
    env = _env(home, ANTHROPIC_API_KEY="sk-ant-test", RHAPSODY_MODEL=MODEL)
    term = Terminal(project, env)
    try:
        assert term.read_until(lambda s: "^p palette" in s and "idle" in s), term.seen[-2000:]
        term.read_until(lambda _s: False, within=0.3)
    finally:
        term.close()
    data = term.raw.decode("utf-8", errors="replace")
    assert APP_STARTS in data, data[-500:]
    early, *later = play(data[:data.index(APP_STARTS)])[-1:] + play(data)[-1:]
    shown = [words(early, row) for row in range(1, ROWS + 1)]
    assert any(f"model        {MODEL}" in line for line in shown), shown  # the session was built behind it
    assert words(early, ROWS - 1) == "starting…"
    final = later[-1]
    caret = (ROWS - 3, 2)  # the prompt's cursor blinks
    moved = [(r + 1, c + 1) for r in range(ROWS - 2) for c in range(COLS)
             if early[r][c] != final[r][c] and (r, c) != caret]
    assert not moved, (moved[:10], words(early, moved[0][0]), words(final, moved[0][0]))
    welcome = next(row for row in range(1, ROWS + 1) if MODEL in words(early, row))
    for shot in play(data[data.index(APP_STARTS):])[1:]:  # every frame the app began: the welcome never left
        assert MODEL in words(shot, welcome)


def test_no_early_frame_where_the_welcome_would_wrap() -> None:
    assert screen("short\nlines", 80, 24) is not None
    assert screen("x" * 75, 80, 24) is None  # the app would wrap it: the frame would not be the app's
    assert screen("\n".join(["line"] * 18), 80, 24) is None  # taller than the transcript: the app scrolls it


@pytest.mark.parametrize("args, config", [
    ([], ""),
    (["--permission-mode", "plan"], ""),
    (["--model", "claude-opus-4-1"], 'sandbox = "off"\n'),
    ([], 'permission_mode = "read-only"\n'),
])
def test_the_welcome_drawn_before_the_agent_is_built_is_the_one_the_agent_shows(
        project: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], config: str) -> None:
    """The early frame names the model, the permissions and the sandbox once the settings are read,
    while the agent is built from them (cli._built): the same words the built agent's welcome says,
    from the flags, the project's file or the defaults (the SDK's newest Sonnet, `ask`)."""
    import asyncio

    from rhapsody import cli
    from rhapsody.config.settings import permission_mode
    from rhapsody.frontends.app.status import decided_welcome, welcome_text

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    if config:
        (project / ".rhapsody").mkdir()
        (project / ".rhapsody" / "config.toml").write_text(config)
    ns = cli._parser().parse_args(args)
    settings, model = cli._settings_and_model(ns, project)
    early = decided_welcome(project, cli._new_model_id(settings), permission_mode(settings, True), settings)
    wiring, _approver = cli.wire(ns, project, settings, model)
    try:
        assert early == welcome_text(wiring.agent, settings)
        assert "…" not in early and f"model        {wiring.agent.session.spec.model}" in early
    finally:
        asyncio.run(wiring.close())
    if args[:1] == ["--permission-mode"]:
        assert "permissions  plan" in early
    if config.startswith("permission_mode"):  # an untrusted project may lower the mode
        assert "permissions  read-only" in early
