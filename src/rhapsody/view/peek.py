"""What a finished tool call shows under its line before anyone unfolds it: the first lines of its
result, or of the diff an edit applied, then how many more lines unfolding shows.

A pure function of the line's body and state, so the live transcript and a resumed one show the
same lines.
"""

from __future__ import annotations

from rhapsody.core.toolbox.protocol import EXIT_TRAILER  # bash's last line, which the call's own line already says

UNSHOWN = ("micro_handoff",)
"""Tools whose result is not shown under the line: a handoff's note has the seam's own line."""

SHOWN = ("ok", "exit")
"""States whose result is shown: a refusal or failure says its reason on the line itself."""


def applied_diff(body: str) -> list[str]:
    """The hunks of the diff a write or edit applied (its body: the tool's output, then the diff), or []."""
    lines = body.splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.startswith("--- ") and lines[i + 1].startswith("+++ "):
            return lines[i + 2:]
    return []


def peek(body: str, state: str, result_lines: int, diff_lines: int, title: str = "") -> list[str]:
    """The lines shown under a call's line (`title`): up to `diff_lines` of an applied diff, else up to
    `result_lines` of the result, then `… N more lines`; none for a call still running, refused, failed or
    stripped, nor for a handoff."""
    if state not in SHOWN or body.startswith("recall ") or title.split(" ", 1)[0] in UNSHOWN:
        return []
    diff = applied_diff(body)
    lines, room = (diff, diff_lines) if diff else (EXIT_TRAILER.sub("", body).rstrip().splitlines(), result_lines)
    if not room or not lines:
        return []
    if len(lines) <= room:
        return lines
    more = len(lines) - room
    return lines[:room] + [f"… {more} more line{'s' if more != 1 else ''}"]
