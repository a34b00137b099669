"""The micro-handoff strip, its audit and the request validity rules, as pure functions.

The strip removes every tool_use, tool_result, thinking and redacted_thinking block
before a seam, except the `micro_handoff` calls and their results; messages left empty
are dropped and same-role neighbours merged. Text blocks are never edited, joined or
reordered: merging two messages puts their block lists one after the other.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from rhapsody.core.session.records import Shape
from rhapsody.core.session.messages import (
    THINKING_TYPES,
    Block,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)

HANDOFF_TOOL = "micro_handoff"


def strip(
    messages: Sequence[Message],
    boundary: int | None = None,
    keep_tools: Iterable[str] = (HANDOFF_TOOL,),
) -> list[Message]:
    """Strip tool traffic and thinking from `messages[:boundary]` (all when None)."""
    return compact(strip_blocks(messages, boundary, keep_tools))


def strip_blocks(
    messages: Sequence[Message],
    boundary: int | None = None,
    keep_tools: Iterable[str] = (HANDOFF_TOOL,),
) -> list[Message]:
    """The strip without compaction: same length, stripped messages may be left empty."""
    cut = max(0, len(messages) if boundary is None else boundary)
    keep = frozenset(keep_tools)
    head = [_strip_entry(m, keep) for m in messages[:cut]]
    kept_ids = {i for entry in head for i in entry[1]}
    out = [_filtered(entry[0], lambda b: _survives(b, keep, kept_ids))
           if entry[2] and not kept_ids.isdisjoint(entry[2]) else entry[3] for entry in head]
    out.extend(messages[cut:])
    return out


_StripEntry = tuple[Message, tuple[str, ...], tuple[str, ...], Message]


def _strip_entry(message: Message, keep: frozenset[str]) -> _StripEntry:
    """A message, the ids of its kept calls, the ids its tool results answer, and the message stripped with
    none of its results kept: what the strip needs of it, read once (a history is stripped again at every seam)."""
    key = (id(message), keep)
    found = _STRIPPED.get(key)
    if found is None or found[0] is not message:
        if len(_STRIPPED) >= _MADE_MAX:
            _STRIPPED.clear()
        kept = tuple(b.id for b in message.content if isinstance(b, ToolUseBlock) and b.name in keep)
        answers = tuple(b.tool_use_id for b in message.content if isinstance(b, ToolResultBlock))
        alone = _filtered(message, lambda b: _survives(b, keep, set()))
        found = _STRIPPED[key] = (message, kept, answers, alone)
    return found


_STRIPPED: dict[tuple[int, frozenset[str]], _StripEntry] = {}
"""The strip's reading of each message stripped lately, by its identity and the tools kept."""


def shelve_blocks(messages: Sequence[Message], boundary: int, notes_boundary: int = 0) -> list[Message]:
    """The second window: of `messages[:boundary]` only the `micro_handoff` calls and their results (the
    field notes) stay, those from `notes_boundary` on; same length, messages left empty."""
    notes = {b.id for m in messages[notes_boundary:boundary] for b in m.content
             if isinstance(b, ToolUseBlock) and b.name == HANDOFF_TOOL}

    def keep(block: Block) -> bool:
        if isinstance(block, ToolUseBlock):
            return block.id in notes
        return isinstance(block, ToolResultBlock) and block.tool_use_id in notes

    return _filter_head(messages, boundary, keep)


def drop_tool_ids(messages: Sequence[Message], ids: set[str]) -> list[Message]:
    """Remove the tool_use and tool_result blocks of the given calls, wherever they are."""
    def keep(block: Block) -> bool:
        if isinstance(block, ToolUseBlock):
            return block.id not in ids
        if isinstance(block, ToolResultBlock):
            return block.tool_use_id not in ids
        return True

    return _filter_head(messages, len(messages), keep)


def drop_messages(messages: Sequence[Message], indexes: set[int]) -> list[Message]:
    """Empty the messages at `indexes` (a conversation rewind left them behind); same length."""
    return [_EMPTY[m.role] if i in indexes else m for i, m in enumerate(messages)]


def drop_thinking_blocks(messages: Sequence[Message], boundary: int) -> list[Message]:
    """Remove thinking from `messages[:boundary]`, used when the prefix they were bound to changed."""
    return _filter_head(messages, boundary, lambda b: b.type not in THINKING_TYPES)


def _filter_head(messages: Sequence[Message], cut: int, keep: Callable[[Block], bool]) -> list[Message]:
    return [message if i >= cut else _filtered(message, keep) for i, message in enumerate(messages)]


def _filtered(message: Message, keep: Callable[[Block], bool]) -> Message:
    blocks = [b for b in message.content if keep(b)]
    if len(blocks) == len(message.content):
        return message
    return _message(message.role, blocks) if blocks else _EMPTY[message.role]


def _message(role: str, blocks: list[Block]) -> Message:
    # The blocks are validated already; skipping validation keeps the strip cheap. The same blocks give the
    # same message object (it holds them, so their ids stay theirs): views rebuilt over one history share
    # their stripped messages, and with them each message's cached size and digest.
    key = (role, tuple(map(id, blocks)))
    found = _MADE.get(key)
    if found is None:
        if len(_MADE) >= _MADE_MAX:  # let go of the messages of views long rebuilt
            _MADE.clear()
        found = _MADE[key] = Message.model_construct(_FIELDS, role=role, content=blocks)
    return found


_FIELDS = {"role", "content"}
_MADE: dict[tuple[str, tuple[int, ...]], Message] = {}
"""The messages the strip built lately, by role and the identity of their blocks."""
_MADE_MAX = 1 << 16
_EMPTY = {role: Message.model_construct(_FIELDS, role=role, content=[]) for role in ("user", "assistant")}


def _survives(block: Block, keep: frozenset[str], kept_ids: set[str]) -> bool:
    if isinstance(block, ToolUseBlock):
        return block.name in keep
    if isinstance(block, ToolResultBlock):
        return block.tool_use_id in kept_ids
    return block.type not in THINKING_TYPES


def compact(messages: Iterable[Message]) -> list[Message]:
    """Drop empty messages and merge same-role neighbours, keeping every block in order."""
    runs: list[list[Message]] = []
    for message in messages:
        if not message.content:
            continue
        if runs and runs[-1][0].role == message.role:
            runs[-1].append(message)
        else:
            runs.append([message])
    return [run[0] if len(run) == 1 else _message(run[0].role, [b for m in run for b in m.content]) for run in runs]


def authored_texts(messages: Iterable[Message]) -> list[str]:
    """The ordered list of non-whitespace text blocks: what the human and agent wrote."""
    return [b.text for m in messages for b in m.content if isinstance(b, TextBlock) and b.text.strip()]


def authored_sha256(messages: Iterable[Message]) -> str:
    """SHA-256 of the authored texts, serialised as a JSON array of strings."""
    texts = authored_texts(messages)
    return hashlib.sha256(json.dumps(texts, ensure_ascii=False).encode("utf-8")).hexdigest()


def validity_problems(messages: Sequence[Message], require_user_last: bool = False) -> list[str]:
    """Every way `messages` breaks the Messages API's conversation rules (empty when valid)."""
    problems: list[str] = []
    if not messages:
        return ["the conversation is empty"]
    if messages[0].role != "user":
        problems.append("the first message is not from the user")
    if require_user_last and messages[-1].role != "user":
        problems.append("the conversation does not end with a user message")
    for i, message in enumerate(messages):
        if i and message.role == messages[i - 1].role:
            problems.append(f"messages {i - 1} and {i} are both {message.role} messages")
        problems.extend(_pairing_problems(messages, i))
    return problems


def _pairing_problems(messages: Sequence[Message], i: int) -> list[str]:
    message = messages[i]
    problems: list[str] = []
    if message.role == "user":
        previous = messages[i - 1] if i else None
        called = {b.id for b in previous.tool_uses()} if previous and previous.role == "assistant" else set()
        seen_other = False
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                if block.tool_use_id not in called:
                    problems.append(f"message {i}: tool_result {block.tool_use_id} has no tool_use before it")
                if seen_other:
                    problems.append(f"message {i}: tool_result {block.tool_use_id} comes after other content")
            else:
                seen_other = True
        return problems
    ids = [b.id for b in message.tool_uses()]
    if len(set(ids)) != len(ids):
        problems.append(f"message {i}: duplicate tool_use ids")
    if not ids:
        return problems
    after = messages[i + 1] if i + 1 < len(messages) else None
    answered = {b.tool_use_id for b in after.content if isinstance(b, ToolResultBlock)} if after else set()
    missing = [x for x in ids if x not in answered]
    if missing:
        problems.append(f"message {i}: tool_use {missing[0]} is not answered in the next message")
    return problems



def shape(messages: Sequence[Message], body_bytes: int, est_tokens: int) -> Shape:
    """Count blocks by type; sizes come from the caller, who built the request body."""
    counts: Counter[str] = Counter(b.type for m in messages for b in m.content)
    return Shape(
        messages=len(messages),
        text_blocks=counts["text"],
        tool_use=counts["tool_use"],
        tool_result=counts["tool_result"],
        thinking=counts["thinking"] + counts["redacted_thinking"],
        request_bytes=body_bytes,
        est_tokens=est_tokens,
    )
