"""The one marker every output cap writes where it cut, and the one reader of it.

Tool output is capped in two ways: text by characters (read_file, search, MCP results) and a
process's stream by bytes (bash, git, search's ripgrep). Both write their cut through
`marker`, so `original_size` recognises every one and the front ends can say a result was
capped. Stdlib only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MARKER = re.compile(r"\n\[\.\.\. [\d,]+ (characters|bytes) cut from the middle; output was ([\d,]+) \1[^\n]*\.\.\.\]\n")


@dataclass(frozen=True)
class Original:
    """The size of an output before its middle was cut."""

    size: int
    unit: str
    """"characters" or "bytes"."""

    def __str__(self) -> str:
        return f"{self.size:,} {self.unit}"


def marker(cut: int, total: int, unit: str, kept: str = "") -> str:
    """The line put where `cut` of `total` `unit` were dropped; `kept` says what was kept, when given."""
    return f"\n[... {cut:,} {unit} cut from the middle; output was {total:,} {unit}{kept} ...]\n"


def original_size(text: str) -> Original | None:
    """How long the output was before a cap cut it; None when `text` holds no cut marker."""
    found = _MARKER.search(text)
    return Original(int(found.group(2).replace(",", "")), found.group(1)) if found else None


def cap_text(text: str, limit: int) -> str:
    """Keep the head and tail of `text` within `limit` characters, saying what was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}{marker(cut, len(text), 'characters')}{text[-half:]}"
