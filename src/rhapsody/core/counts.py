"""How a count is said: `1 word`, `2 words`; every front end and tool prints counts through it.

Imports nothing outside the standard library.
"""

from __future__ import annotations


def counted(n: int, noun: str, plural: str = "") -> str:
    """`n` and `noun`, the noun plural unless `n` is 1 (`plural` when adding an s is wrong)."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
