"""`rhapsody stats [SESSION]`: every seam of a session as a table, with session totals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rhapsody.core.errors import HistoryError
from rhapsody.core.history import find_session, read_history
from rhapsody.core.session import USAGE_KEYS


def seam_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per seam: the recorded figures plus the API-reported input just after."""
    rows = []
    for i, record in enumerate(records):
        if record["kind"] != "seam":
            continue
        after_usage = next((r for r in records[i + 1 :] if r["kind"] == "usage"), None)
        reported_after = sum(int(after_usage.get(k) or 0) for k in USAGE_KEYS[:3]) if after_usage else None
        undone = any(r["kind"] == "unseam" and r.get("seam") == record["seam"] for r in records[i + 1 :])
        rows.append({**record, "reported_input_after": reported_after, "undone": undone})
    return rows


def print_stats(root: Path, session_id: str | None) -> int:
    """Print the seam table; returns the exit status."""
    from rich.console import Console
    from rich.table import Table

    given = Path(session_id) if session_id else None
    path = given if given is not None and given.is_file() else find_session(root, session_id)
    records = read_history(path).records
    if not records or records[0]["kind"] != "session":
        raise HistoryError(f"{path} is not a rhapsody history file (no session record first)")
    table = Table(title=f"seams of session {path.stem}")
    for column in ("seam", "msgs", "tool calls", "thinking", "bytes", "reduction", "est. tokens", "API input"):
        table.add_column(column, justify="right")
    for row in seam_rows(records):
        b, a = row["before"], row["after"]
        reduction = 1 - a["request_bytes"] / b["request_bytes"] if b["request_bytes"] else 0
        after_api = "—" if row["reported_input_after"] is None else f"{row['reported_input_after']:,}"
        table.add_row(
            f"{row['seam']}{' (undone)' if row['undone'] else ''}",
            f"{b['messages']} → {a['messages']}",
            f"{b['tool_use']} → {a['tool_use']}",
            f"{b['thinking']} → {a['thinking']}",
            f"{b['request_bytes']:,} → {a['request_bytes']:,}",
            f"{reduction:.1%}",
            f"{b['est_tokens']:,} → {a['est_tokens']:,}",
            f"{row.get('reported_input_before', 0):,} → {after_api}",
        )
    console = Console()
    console.print(table)
    totals = {k: sum(int(r.get(k) or 0) for r in records if r["kind"] == "usage") for k in USAGE_KEYS}
    counts = {k: sum(1 for r in records if r["kind"] == k) for k in ("request", "tool_run", "violation", "hint")}
    console.print(
        f"requests {counts['request']}, tool calls {counts['tool_run']}, narration violations {counts['violation']}, "
        f"hints {counts['hint']}; tokens in {totals['input_tokens']:,}, cache write "
        f"{totals['cache_creation_input_tokens']:,}, cache read {totals['cache_read_input_tokens']:,}, "
        f"out {totals['output_tokens']:,}"
    )
    return 0
