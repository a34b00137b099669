"""The strip as a pure function: properties over generated conversations, and edge cases."""

from __future__ import annotations

from hypothesis import given, settings

from rhapsody.core.session.messages import Message, Request
from rhapsody.core.session.strip import authored_sha256, strip, validity_problems

from tests.strategies import conversations


@settings(max_examples=300, deadline=None)
@given(conversations())
def test_strip_keeps_authored_text_stays_valid_and_is_idempotent(messages: list[Message]) -> None:
    assert validity_problems(messages) == []
    after = strip(messages)
    assert authored_sha256(after) == authored_sha256(messages)
    assert validity_problems(after) == []
    assert strip(after) == after
    for message in after:
        for block in message.content:
            assert block.type not in ("thinking", "redacted_thinking")
            if block.type == "tool_use":
                assert block.name == "micro_handoff"


@settings(max_examples=200, deadline=None)
@given(conversations())
def test_strip_with_boundary_leaves_messages_after_it_untouched(messages: list[Message]) -> None:
    cut = len(messages) // 2
    after = strip(messages, cut)
    tail = messages[cut:]
    flat_after = [b for m in after for b in m.content]
    flat_tail = [b for m in tail for b in m.content]
    assert flat_after[len(flat_after) - len(flat_tail):] == flat_tail


def test_text_blocks_are_never_joined_when_neighbours_merge() -> None:
    messages = [Message.from_api(m) for m in [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": [{"type": "text", "text": "A"}, {"type": "tool_use", "id": "t1", "name": "bash", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "B"}]},
    ]]
    after = strip(messages)
    assert [m.role for m in after] == ["user", "assistant"]
    assert [b.text for b in after[1].content] == ["A", "B"]


def test_unknown_blocks_images_and_string_content_pass_through_byte_for_byte() -> None:
    body = {
        "model": "m", "system": [{"type": "text", "text": "sys"}], "max_tokens": 5, "metadata": {"k": "v"},
        "messages": [
            {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAA"}},
                                         {"type": "text", "text": "héllo \u2028 😀", "cache_control": {"type": "ephemeral"}}]},
            {"role": "assistant", "content": [{"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"q": 1}},
                                              {"type": "web_search_tool_result", "tool_use_id": "s1", "content": []},
                                              {"type": "text", "text": "done"}]},
            {"role": "user", "content": "plain string"},
        ],
    }
    request = Request.from_api(body)
    assert request.to_api() == body
    stripped = request.model_copy(update={"messages": strip(request.messages)}).to_api()
    assert stripped == body


@settings(max_examples=100, deadline=None)
@given(conversations())
def test_cached_sizes_and_incremental_view_match_a_full_rebuild(messages: list[Message]) -> None:
    from rhapsody.core.session.context import Conversation, RequestSpec, build_request, measure, measure_messages
    from rhapsody.core.session.records import parse

    conv = Conversation()
    for i, m in enumerate(messages):
        conv.apply(parse({"kind": "message", "seq": i, "role": m.role, "content": [b.dump() for b in m.content]}))
        if i == len(messages) // 2:
            conv.active()
            conv.apply(parse({"kind": "seam", "seq": -1, "boundary": i + 1, "before": {}, "after": {}}))
    fresh = Conversation.from_records([])
    fresh.messages, fresh.seams = list(conv.messages), list(conv.seams)
    assert conv.active() == fresh.active()
    spec = RequestSpec(model="m", system="s", tools=[{"name": "t", "input_schema": {}}])
    assert measure_messages(spec, conv.active()) == measure(build_request(spec, conv.active()))
