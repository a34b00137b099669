"""Hypothesis strategies for valid Messages API conversations with tool traffic."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from rhapsody.core.session.messages import Message

words = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=30)
nonblank = words.filter(lambda s: s.strip() != "")


@st.composite
def conversations(draw: Any) -> list[Message]:
    """A valid conversation: thinking, parallel calls, hints after results, handoff calls, string content."""
    ids = iter(range(10**6))
    first = draw(nonblank)
    msgs: list[dict[str, Any]] = [{"role": "user", "content": first if draw(st.booleans()) else [{"type": "text", "text": first}]}]
    for _ in range(draw(st.integers(1, 8))):
        blocks: list[dict[str, Any]] = []
        if draw(st.booleans()):
            blocks.append({"type": "thinking", "thinking": draw(words), "signature": "sig"})
        if draw(st.integers(0, 5)) == 0:
            blocks.append({"type": "redacted_thinking", "data": "opaque"})
        blocks += [{"type": "text", "text": t} for t in draw(st.lists(words, max_size=2))]
        calls = []
        for _ in range(draw(st.integers(0, 3))):
            name = draw(st.sampled_from(["bash", "read_file", "micro_handoff", "grep"]))
            call = {"type": "tool_use", "id": f"toolu_{next(ids)}", "name": name, "input": {"x": draw(words)}}
            calls.append(call)
            blocks.append(call)
            if draw(st.booleans()):
                blocks.append({"type": "text", "text": draw(words)})
        if not blocks:
            blocks.append({"type": "text", "text": "ok"})
        msgs.append({"role": "assistant", "content": blocks})
        if calls:
            results: list[dict[str, Any]] = [
                {"type": "tool_result", "tool_use_id": c["id"],
                 "content": draw(st.one_of(words, st.just([{"type": "text", "text": "out"}])))}
                for c in calls
            ]
            results += [{"type": "text", "text": t} for t in draw(st.lists(nonblank, max_size=2))]
            msgs.append({"role": "user", "content": results})
        else:
            msgs.append({"role": "user", "content": [{"type": "text", "text": draw(nonblank)}]})
    return [Message.from_api(m) for m in msgs]
