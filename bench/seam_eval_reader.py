"""The loopback "model" of the seam evaluation: answers only from what a request carries.

For each question the evaluation aims the reader at the answer's pattern. On every request
it looks for that pattern in the request body itself (its text blocks and tool results,
recall search listings excepted: those are snippets, not values). Found: it answers the
value. Not found and `recall` offered: it searches recall, then fetches the hits by id,
one request each, at most FETCHES of them. Otherwise it answers UNKNOWN. Nothing is known
to it but the body it receives, so an arm scores only what that arm's context holds.
"""

from __future__ import annotations

import re
from typing import Any

from rhapsody.loopback.script import call, say

FETCHES = 3
IN_CONTEXT = "I read it in a tool result earlier in this session, and that result is still in my context."
RECALLED = "I read it before the seam; recall brought my own tool result back, verified."
GONE = "I read files before the seam, but that output is no longer in my context and I can run nothing to check it."
NEVER = "I searched everything I had stripped and fetched the best hits: I never saw that value in this session."
LOOKUP = "The value was in a tool result the seam removed from my context, so I will look it up with recall."


class Reader:
    """Answers only from what a request carries; uses `recall` when the value is not there."""

    def __init__(self) -> None:
        self.pattern = re.compile("$^")
        self.query = ""

    def aim(self, pattern: str, query: str) -> None:
        """The next question's answer pattern (group 1) and what to search recall for."""
        self.pattern, self.query = re.compile(pattern), query

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        turn = _current_turn(body["messages"])
        calls = [b for m in turn if m["role"] == "assistant" for b in _blocks(m) if b.get("type") == "tool_use"]
        found = self.pattern.search(_visible(body["messages"]))
        if found:
            return say(f"{RECALLED if calls else IN_CONTEXT}\n{found.group(1)}")
        if "recall" not in {t["name"] for t in body.get("tools", [])}:
            return say(f"{GONE}\nUNKNOWN")
        if not calls:
            return call(LOOKUP, "recall", query=self.query)
        listing = _result_of(turn, calls[0]["id"])
        ids = [line.split()[0] for line in listing.splitlines() if re.match(r"^\S+:\S+ \(", line)][:FETCHES]
        fetched = {c["input"].get("id") for c in calls}
        remaining = [i for i in ids if i not in fetched]
        return call(LOOKUP, "recall", id=remaining[0]) if remaining else say(f"{NEVER}\nUNKNOWN")


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _texts(messages: list[dict[str, Any]]) -> list[str]:
    return [b.get("text", "") for m in messages for b in _blocks(m) if b.get("type") == "text"]


def _current_turn(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages since the newest user message that carries text of its own."""
    start = max((i for i, m in enumerate(messages) if m["role"] == "user" and _texts([m])), default=0)
    return messages[start:]


def _result_of(messages: list[dict[str, Any]], tool_use_id: str) -> str:
    for m in messages:
        for b in _blocks(m):
            if b.get("type") == "tool_result" and b.get("tool_use_id") == tool_use_id:
                content = b.get("content")
                return content if isinstance(content, str) else " ".join(c.get("text", "") for c in content or [])
    return ""


def _visible(messages: list[dict[str, Any]]) -> str:
    """Every text and tool result of the request, except recall's search listings (snippets, not values)."""
    searches = {b["id"] for m in messages for b in _blocks(m)
                if b.get("type") == "tool_use" and b.get("name") == "recall" and "query" in b.get("input", {})}
    parts = _texts(messages)
    for m in messages:
        for b in _blocks(m):
            if b.get("type") == "tool_result" and b.get("tool_use_id") not in searches:
                parts.append(_result_of([m], b["tool_use_id"]))
    return "\n".join(parts)
