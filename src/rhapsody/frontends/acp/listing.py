"""`session/list`: the project's rhapsody sessions with a turn, newest first, for the client's history menu."""

from __future__ import annotations

import datetime
from pathlib import Path

from acp.schema import ListSessionsResponse, SessionInfo

from rhapsody.core.session import records as rec
from rhapsody.core.session.history import read_session, sessions
from rhapsody.core.errors import HistoryError
from rhapsody.frontends.recap import first_typed
from rhapsody.view.render import one_line

PAGE = 50
"""Sessions per answer; the cursor is the index of the next."""


def listed(root: Path, cursor: str | None) -> ListSessionsResponse:
    """One page of the project's sessions that hold a turn, titled by the human's first message."""
    found = list(reversed(list(sessions(root))))
    start = int(cursor) if cursor and cursor.isdigit() else 0
    page: list[SessionInfo] = []
    index = start
    while index < len(found) and len(page) < PAGE:
        info = _info(found[index], root)
        if info is not None:
            page.append(info)
        index += 1
    return ListSessionsResponse(sessions=page, next_cursor=str(index) if index < len(found) else None)


def _info(path: Path, root: Path) -> SessionInfo | None:
    """A session as the client lists it (None: no turn in it, or unreadable)."""
    try:
        records = rec.parsed(read_session(path).records)
    except (HistoryError, rec.InvalidRecord, OSError):
        return None
    title = first_typed(records)
    if not title:
        return None
    updated = datetime.datetime.fromtimestamp(path.stat().st_mtime, datetime.timezone.utc).isoformat()
    return SessionInfo(session_id=path.stem, cwd=str(root), title=one_line(title, 80), updated_at=updated)
