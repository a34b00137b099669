"""Project memory (seed 001): Markdown files in the repository, versioned by git.

`layout` lays out the folder, builds the memory map that goes into the system prompt at the
start of each conversation, writes dialog logs and commits them; `recorder` writes a dialog
log per task or seam; `stats` and `audit` measure and check the memory. The agent itself
reads and edits memory with the ordinary file tools.
"""

from __future__ import annotations

from rhapsody.memory.audit import Finding, audit
from rhapsody.memory.layout import FILES, FOLDERS, LayoutError, commit_memory, init, memory_map, write_dialog
from rhapsody.memory.recorder import DialogRecorder
from rhapsody.memory.stats import Access, accesses, format_stats, size_over_time, stats

__all__ = [
    "FILES", "FOLDERS", "Access", "LayoutError", "DialogRecorder", "Finding", "accesses", "audit", "commit_memory",
    "format_stats", "init", "memory_map", "size_over_time", "stats", "write_dialog",
]
