"""One turn's own state, beyond its rounds (core/round.py).

Imports: stdlib only.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Turn:
    """Where the turn's records start, the requests it made, and how often a Stop hook sent it back to work."""

    start: int = 0
    steps: int = 0
    stops: int = 0
