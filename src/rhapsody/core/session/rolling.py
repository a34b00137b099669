"""The rolling context policy (seed 003), cut in batches so the prompt cache survives.

A *round* is one assistant message with tool calls and the results that answer it. The
newest `short` rounds keep their tool traffic verbatim. Older rounds form working memory:
each keeps its traffic while its score holds up. The agent scores a round inline, in the
narration of the next message, with `[keep N]` (0 = done with it, 1 when absent); a score
decays by `decay` per round of age. `[keep 3]` pins a round: the policy never prunes it,
and it does not take a place in working memory; the next micro-handoff strips it with
everything else. Rounds a seam already stripped are not counted at all: working memory
holds only rounds still visible. Text is never touched: a pruned round loses only its
tool_use and tool_result blocks, exactly as in a strip, and stays recallable.

Cutting at every round would change the request prefix every round and re-write the
prompt cache each time, which costs more than keeping everything. So working memory may
overfill by `batch` rounds; then one cut brings it back to `working` rounds, keeping the
best-scored, and the prefix stays still until the next overflow.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rhapsody.core.session.messages import Message, TextBlock, ToolUseBlock
from rhapsody.core.session.strip import HANDOFF_TOOL

KEEP = re.compile(r"\[keep\s*([0-3])\]", re.IGNORECASE)
PINNED = 3


@dataclass(frozen=True)
class RollingPolicy:
    """Sizes of the three stages; defaults from seed 003 (3 verbatim, 6 working)."""

    short: int = 3
    working: int = 6
    batch: int = 6
    decay: float = 0.85
    default_score: int = 1


@dataclass(frozen=True)
class TrafficRound:
    """One assistant message's tool calls, with the score the agent gave them."""

    index: int
    ids: tuple[str, ...]
    score: float


def rounds(messages: list[Message], pruned: set[str], boundary: int = 0) -> list[TrafficRound]:
    """Rounds still carrying tool traffic in the view, oldest first, each with its inline score.

    Rounds in `messages[:boundary]` (stripped by the latest seam) and rounds already pruned
    are not in the view and are left out.
    """
    found: list[tuple[int, tuple[str, ...]]] = []
    scores: dict[int, int] = {}
    last_round = -1
    for i, message in enumerate(messages):
        if message.role != "assistant":
            continue
        text = " ".join(b.text for b in message.content if isinstance(b, TextBlock))
        match = KEEP.search(text)
        if match and last_round >= 0:
            scores[last_round] = int(match.group(1))
        ids = tuple(b.id for b in message.content if isinstance(b, ToolUseBlock) and b.name != HANDOFF_TOOL)
        if ids:
            last_round = i
            if i >= boundary and not set(ids) <= pruned:
                found.append((i, ids))
    return [TrafficRound(i, ids, float(scores.get(i, -1))) for i, ids in found]


def plan_cut(messages: list[Message], pruned: set[str], policy: RollingPolicy, boundary: int = 0) -> list[str]:
    """Tool-use ids to prune now, or [] while working memory has not overflowed.

    `boundary` is the latest seam's: rounds before it are already out of the view.
    """
    live = rounds(messages, pruned, boundary)
    older = live[: max(0, len(live) - policy.short)]
    candidates = [r for r in older if r.score != PINNED]
    if len(candidates) <= policy.working + policy.batch:
        return []
    newest = len(candidates)
    ranked = sorted(
        enumerate(candidates),
        key=lambda pair: (_score(pair[1], policy) * policy.decay ** (newest - pair[0]), pair[0]),
        reverse=True,
    )
    keep = {candidates[k].index for k, _ in ranked[: policy.working]}
    return [id_ for r in candidates if r.index not in keep for id_ in r.ids]


def _score(round_: TrafficRound, policy: RollingPolicy) -> float:
    return round_.score if round_.score >= 0 else float(policy.default_score)
