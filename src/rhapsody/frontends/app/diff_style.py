"""A unified diff in colour: the approval panel's preview and the transcript's applied edits both draw it."""

from __future__ import annotations

from rich.text import Text

DIFF_STYLES = (("+++", "bold #e6edf3"), ("---", "bold #e6edf3"), ("@@", "#79c0ff"), ("+", "#7ee787"),
               ("-", "#ff7b72"))
"""Colours with at least 4.5:1 contrast on the dialog's background."""


def diff_text(diff: str, headers: bool = True) -> Text:
    """A unified diff, coloured line by line; without `headers`, its ---/+++ file lines are left out."""
    text = Text()
    hunk = False
    for line in diff.splitlines(keepends=True):
        hunk = hunk or line.startswith("@@")
        if not headers and not hunk and line.startswith(("--- ", "+++ ")):  # a removed "-- x" line is "--- x"
            continue
        style = next((s for prefix, s in DIFF_STYLES if line.startswith(prefix)), "")
        text.append(line, style=style)
    return text
