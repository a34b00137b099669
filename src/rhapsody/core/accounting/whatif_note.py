"""What one seam costs in the what-if: the notes a project's histories hold, else the stated default, or
`--note-tokens`; and the what-if's token count of one part of a request.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rhapsody.core.accounting.seam_cost import DEFAULT_NOTE_TOKENS, NOTE_AIM_CHARS, NOTE_OUTPUT_TOKENS
from rhapsody.core.session import records as rec
from rhapsody.core.session.messages import ToolResultBlock, ToolUseBlock, compact_json
from rhapsody.core.session.strip import HANDOFF_TOOL

DEFAULT_NOTE_ADDED = DEFAULT_NOTE_TOKENS
DEFAULT_NOTE_OUTPUT = NOTE_OUTPUT_TOKENS


@dataclass(frozen=True)
class NoteCost:
    """What one seam adds: context tokens (ask, note, index) and output tokens (writing the note)."""

    added: int
    output: int
    basis: str
    """Where the figures come from, said in the output."""


def given_note(tokens_added: int) -> NoteCost:
    """The note cost given on the command line (`--note-tokens`), a quarter of it written as output (the ratio
    of bench/note_sweep.py)."""
    return NoteCost(tokens_added, max(1, tokens_added // 4),
                    f"given with --note-tokens: {tokens_added:,} tokens added to the context and "
                    f"{max(1, tokens_added // 4):,} output tokens per seam")


def note_cost(histories: Sequence[Sequence[rec.Record]]) -> NoteCost:
    """The mean cost of the notes these histories hold; the stated default when there are none.

    What a note added is best read off a seam that measured it (`before` minus `asked_est_tokens`);
    seams written before that field have the `micro_handoff` call and its result, which stay in the
    context, measured instead."""
    blocks = [b for h in histories for r in rec.of(h, rec.MessageAdded) for b in r.content]
    calls = {b.id: b for b in blocks if isinstance(b, ToolUseBlock) and b.name == HANDOFF_TOOL}
    pairs = [tokens(calls[b.tool_use_id].dump()) + tokens(b.dump()) for b in blocks
             if isinstance(b, ToolResultBlock) and b.tool_use_id in calls]
    measured = [r.before.est_tokens - r.asked_est_tokens for h in histories for r in rec.of(h, rec.Seam)
                if r.asked_est_tokens is not None]
    added, how = (measured, "seam(s) that measured it") if measured else (pairs, "field note(s) (the call and its result)")
    if not added:
        return NoteCost(DEFAULT_NOTE_ADDED, DEFAULT_NOTE_OUTPUT,
                        f"no field note written in this project yet: default {DEFAULT_NOTE_ADDED:,} tokens added to the "
                        f"context (what the caps let a seam leave: the note of ~{NOTE_AIM_CHARS:,} characters the prompts "
                        f"ask for, the harness facts and the index at their caps, the ask) and {DEFAULT_NOTE_OUTPUT:,} "
                        "output tokens per seam; --note-tokens N for another")
    mean = round(sum(added) / len(added))
    outputs = [tokens(c.input) for c in calls.values()]
    out = round(sum(outputs) / len(outputs)) if outputs else DEFAULT_NOTE_OUTPUT
    return NoteCost(mean, out, f"estimated from {len(added)} {how} in this project's histories: ~{mean:,} tokens "
                               f"added to the context and ~{out:,} output tokens per seam")


def tokens(part: Any) -> int:
    """Tokens of one part of a request as the what-if counts them (compact JSON characters / 4)."""
    return max(1, -(-len(compact_json(part)) // 4))
