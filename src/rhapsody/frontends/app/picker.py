"""The session picker for `rhapsody --resume` without an id, and for `/resume` inside the app.

A title, a search field (fuzzy, over the first and last messages), one line per session (age,
size, seams, the git branch it started on, first message, last message) and a preview of the highlighted one: its last exchange,
the files changed, requests, seams and cost, as the recap printed on leaving says them. A file in
the history folder that is no rhapsody history is not listed, and a line above the list says which
and why, in the words every command uses for a bad file.

| Key | Action |
| :- | :- |
| (type) | Search. |
| up, down | Move through the sessions. |
| enter | Resume the highlighted session. |
| escape | Cancel. |
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import BindingType
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, OptionList, Static
from textual.widgets.option_list import Option

from rhapsody.core.session import records as rec
from rhapsody.core.session.history import has_turns, not_history, read_leniently, read_plain, sessions
from rhapsody.frontends.prompt_aids import fuzzy
from rhapsody.view.sink import visible

SHOWN = 100
"""Newest sessions the picker reads."""


def age(seconds: float) -> str:
    """How long ago, in the largest whole unit."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return "just now"


@dataclass(frozen=True)
class Summary:
    """What the picker says of one session; each part worked out once, on first use."""

    path: Path
    records: list[rec.Record]
    """The records that read as their types (a malformed one is left out: `read_leniently`)."""
    modified: float
    size: int
    problem: str = ""
    """Why the file is no rhapsody history ('' when it is one): the picker says so rather than skip it unseen."""

    @classmethod
    def read(cls, path: Path) -> Summary | None:
        """Read a history file leniently (a bad line is skipped, as the history reader does); None when it cannot
        be read (a link, a pipe: see `read_plain`)."""
        try:
            data = read_plain(path)
            info = path.stat()
        except OSError:
            return None
        read = read_leniently(data)
        return cls(path, read.typed, info.st_mtime, info.st_size, not_history(read))

    @cached_property
    def turns(self) -> bool:
        """Whether it holds a message (as `has_turns` says): an empty session is nothing to resume."""
        return rec.first(self.records, rec.MessageAdded) is not None

    @cached_property
    def first(self) -> str:
        """The first message the human typed."""
        from rhapsody.frontends.recap import first_typed

        return first_typed(self.records)

    @cached_property
    def last(self) -> str:
        """The last message the human typed."""
        from rhapsody.frontends.recap import last_exchange

        return last_exchange(self.records)[0]

    @cached_property
    def branch(self) -> str:
        """The git branch the session started on (an imported one: its source's); "" when not recorded."""
        head = self.records[0] if self.records else None
        imported = rec.first(self.records[:3], rec.Import)
        if not isinstance(head, rec.SessionStarted):
            return ""
        return head.branch or str((rec.extra(imported, "git_branch") if imported else "") or "")

    @cached_property
    def parent(self) -> tuple[str, str]:
        """A sub-agent's session: its parent session and its id there (`sa1`); ("", "") for any other."""
        head = self.records[0] if self.records else None
        link = head.parent if isinstance(head, rec.SessionStarted) else None
        if link is None:
            return "", ""
        return link.session, link.subagent

    @cached_property
    def seams(self) -> int:
        """How many seams the session made."""
        return sum(1 for _ in rec.of(self.records, rec.Seam))

    def line(self, now: float) -> str:
        """One line: age, size, seams, branch, first message, and the last one when it differs."""
        from rhapsody.view.render import one_line

        last = f"  … {one_line(self.last, 40)}" if self.last and self.last != self.first else ""
        branch = f"{one_line(self.branch, 20)}  " if self.branch else ""
        return (f"{age(now - self.modified):>11}  {self.size / 1024:>6.1f} KB  seams {self.seams}  {branch}"
                f"{one_line(self.first, 50) or '(no request yet)'}{last}")

    @cached_property
    def preview(self) -> str:
        """The highlighted session's recap."""
        from rhapsody.frontends.recap import recap_lines

        return "\n".join([f"session {self.path.stem}", *recap_lines(self.records)])


class Picking:
    """What the picker does, as an app of its own (`--resume`) or a screen of the app (`/resume`)."""

    BINDINGS: ClassVar[list[BindingType]] = [("escape", "cancel", "Cancel")]
    CSS: ClassVar[str] = """
    #title { height: 1; text-style: bold; padding: 0 1; }
    #problems { height: auto; max-height: 4; padding: 0 1; color: $warning; }
    #search { margin: 0 1; }
    OptionList { height: 1fr; }
    #preview { height: auto; max-height: 8; padding: 0 1; color: $text-muted; border-top: solid $panel; }
    """
    query_one: Any
    query: Any

    def setup(self, root: Path, exclude: str = "") -> None:
        """Read the newest sessions with a turn (`exclude`: the one already open)."""
        self.root = root
        newest = list(reversed(list(sessions(root))))[:SHOWN]
        read = [s for s in (Summary.read(p) for p in newest if p.stem != exclude) if s is not None]
        self.summaries = {s.path.stem: s for s in read if s.turns and not s.problem}
        self.paths = [s.path for s in self.summaries.values()]
        self.problems = [f"{s.path} is not a rhapsody history file ({s.problem})" for s in read if s.problem]
        """One line per file set aside, shown above the list."""
        self.set_aside = {s.path for s in read if s.problem}

    def done(self, session: str | None) -> None:
        """End with the session picked (None: cancelled)."""
        raise NotImplementedError

    def compose(self) -> ComposeResult:
        yield Static(Text(visible(f"Resume a session in {self.root}: type to search, Enter resumes, Esc cancels")), id="title")
        if self.problems:
            yield Static(Text(visible(set_aside(self.problems))), id="problems")
        yield Input(placeholder="search the first and last messages", id="search")
        yield OptionList(*self.options(""))
        yield Static("", id="preview")
        yield Footer()

    def options(self, query: str) -> list[Option]:
        """The sessions whose first or last message matches `query` (all when empty), newest first."""
        now = time.time()
        keys = {s: f"{self.summaries[s].first} {self.summaries[s].last}" for s in self.summaries}
        matched = set(fuzzy(query, list(keys.values()), len(keys))) if query.strip() else set(keys.values())
        # Text, not a string: a string is read as markup, and a history's words are not rhapsody's
        return [Option(Text(visible(self.line_of(s, now))), id=s) for s in under_parents(self.summaries)
                if keys[s] in matched]

    def line_of(self, stem: str, now: float) -> str:
        """A session's line; a sub-agent's indented under its parent, named by its id there."""
        summary = self.summaries[stem]
        parent, sid = summary.parent
        return f"    ⤷ {sid} {summary.line(now).lstrip()}" if parent else summary.line(now)

    def on_mount(self) -> None:
        self.show_preview()

    def on_input_changed(self, event: Input.Changed) -> None:
        listing = self.query_one(OptionList)
        listing.clear_options()
        listing.add_options(self.options(event.value))
        listing.highlighted = 0 if listing.option_count else None
        self.show_preview()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        listing = self.query_one(OptionList)
        if listing.highlighted is not None:
            self.done(listing.get_option_at_index(listing.highlighted).id)

    def on_key(self, event: Any) -> None:
        """Up and Down move through the sessions while the search field has the focus."""
        listing = next(iter(self.query(OptionList)), None)
        if listing is None:  # no session to pick
            return
        if event.key in ("up", "down") and not listing.has_focus:
            (listing.action_cursor_up if event.key == "up" else listing.action_cursor_down)()
            event.stop()

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self.show_preview()

    def show_preview(self) -> None:
        listing = self.query_one(OptionList)
        index = listing.highlighted
        shown = self.summaries[listing.get_option_at_index(index).id or ""].preview if index is not None else ""
        self.query_one("#preview", Static).update(Text(visible(shown) or "no session matches"))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.done(event.option.id)

    def action_cancel(self) -> None:
        self.done(None)


class SessionPicker(Picking, App[str | None]):
    """Pick one of the project's sessions, newest first; typing searches."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.setup(root)

    def done(self, session: str | None) -> None:
        """End the picker's app with the session picked."""
        self.exit(session)


class PickerScreen(Picking, ModalScreen[str | None]):
    """`/resume` in the app: the picker over the app's screen, without the session already open."""

    CSS = ""  # the app's picker styles, scoped to this screen below: the app has a #preview of its own
    DEFAULT_CSS = """
    PickerScreen { background: $background; }
    PickerScreen #title { height: 1; text-style: bold; padding: 0 1; }
    PickerScreen #problems { height: auto; max-height: 4; padding: 0 1; color: $warning; }
    PickerScreen #search { margin: 0 1; }
    PickerScreen OptionList { height: 1fr; }
    PickerScreen #preview { height: auto; max-height: 8; padding: 0 1; color: $text-muted; border-top: solid $panel; }
    """

    def __init__(self, root: Path, exclude: str = "") -> None:
        super().__init__()
        self.setup(root, exclude)

    def compose(self) -> ComposeResult:
        if not self.summaries:
            yield Static(Text(f"no other session with a turn in {self.root}; Esc goes back"), id="title")
            yield Footer()
            return
        yield from super().compose()

    def on_mount(self) -> None:
        if self.summaries:
            self.show_preview()
            self.query_one("#search", Input).focus()  # typing searches at once, as in `rhapsody -r`

    def done(self, session: str | None) -> None:
        """Close the screen with the session picked."""
        self.dismiss(session)


def under_parents(summaries: dict[str, Summary]) -> list[str]:
    """The sessions newest first, each sub-agent's right under its parent (its own place when the parent is not
    listed), in the order it was started."""
    children: dict[str, list[str]] = {}
    for stem, summary in summaries.items():
        parent = summary.parent[0]
        if parent in summaries:
            children.setdefault(parent, []).append(stem)
    placed = {stem for listed in children.values() for stem in listed}
    order: list[str] = []
    for stem in summaries:
        if stem not in placed:
            order += [stem, *sorted(children.get(stem, []))]
    return order


def set_aside(problems: list[str], shown: int = 3) -> str:
    """The notice for files the picker could not list: one line each, the first few."""
    more = len(problems) - shown
    return "\n".join(problems[:shown] + ([f"… and {more} more not listed"] if more > 0 else []))


def pick_session(root: Path) -> str | None:
    """Run the picker; None when cancelled."""
    from rhapsody.core.errors import HistoryError

    picker = SessionPicker(root)
    if not picker.summaries and not any(has_turns(p) for p in sessions(root) if p not in picker.set_aside):
        why = f"; {picker.problems[0]}" + (f" (and {len(picker.problems) - 1} more)" if picker.problems[1:] else "")
        raise HistoryError(f"no sessions with a turn to resume in {root}" + (why if picker.problems else ""))
    return picker.run()
