"""The request body goes to the Anthropic API as prepared bytes: the SDK's own bytes, each unchanged
message serialised once, with the SDK's retries, error mapping and event stream kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import pytest

from rhapsody.core.errors import ContextTooLong, ModelError
from rhapsody.core.events import ModelResponse, Retrying, TextDelta, TurnEnded
from rhapsody.core.session.handoff import commit_seam
from rhapsody.core.session.messages import TextBlock
from rhapsody.loopback.script import call, say
from rhapsody.loopback.server import Fault, LoopbackServer, Recorded
from rhapsody.providers.anthropic import AnthropicModel
from rhapsody.providers.prepared import PreparedBodies
from rhapsody.wiring import Wiring
from rhapsody.core.session import records as rec

from tests.conftest import MODEL, Stub, collect

STEP = "I will list the Python files to see the layout before changing anything in the project."


async def sdk_request(stub: Stub, body: dict[str, Any]) -> Recorded:
    """The request the SDK's own `messages.create` makes of `body`, as the server received it."""
    client = anthropic.AsyncAnthropic(base_url=stub.server.url, api_key="sk-test-key", max_retries=0, timeout=5.0)
    stream = await client.messages.create(**body, stream=True)
    async with stream:
        async for _ in stream:
            pass
    return stub.server.requests[-1]


async def sent_request(stub: Stub, model: AnthropicModel, body: dict[str, Any]) -> Recorded:
    """The request rhapsody's adapter makes of `body`, as the server received it."""
    events = [e async for e in model.stream(body)]
    assert isinstance(events[-1], ModelResponse)
    return stub.server.requests[-1]


async def same_as_sdk(stub: Stub, wiring: Wiring) -> int:
    """Send the session's next request both ways; assert the bytes match; how many messages were serialised."""
    body = wiring.session.request_and_size()[0]
    model = wiring.agent.model
    assert isinstance(model, AnthropicModel)
    ours, sdk = await sent_request(stub, model, body), await sdk_request(stub, body)
    assert (ours.path, ours.headers, ours.raw) == (sdk.path, sdk.headers, sdk.raw)
    assert json.loads(ours.raw)["messages"] == body["messages"]
    return model.prepared.serialised


async def test_each_body_is_the_sdks_bytes_across_seams_and_rewinds(stub: Stub, project: Path) -> None:
    stub.script(call(STEP, "find_files", pattern="*.py"), call(STEP, "find_files", pattern="*.md"), say("Listed."),
                *[say("Again.")] * 12)
    wiring = stub.wire(project)
    assert isinstance((await collect(wiring.agent.run("go")))[-1], TurnEnded)
    model = wiring.agent.model
    assert isinstance(model, AnthropicModel)
    assert model.prepared.serialised <= 3  # the run's last request reused what the one before had serialised
    session = wiring.session

    session.append_message("user", [TextBlock(text="and the tests?")])
    # the answer and the new message, and the last request's newest, which has lost its cache breakpoint
    assert await same_as_sdk(stub, wiring) == 3
    assert await same_as_sdk(stub, wiring) == 1  # nothing changed: only the breakpoint's copy is new

    commit_seam(session)  # the strip rewrites every earlier message: none may be reused as it was
    assert len(session.messages()) < 8
    await same_as_sdk(stub, wiring)

    session.append_message("assistant", [TextBlock(text="The tests pass.")])
    session.append_message("user", [TextBlock(text="now the docs")])
    await same_as_sdk(stub, wiring)
    session.append(rec.ConversationRewind(to=len(session.conversation.messages) - 2))  # back before the last two
    await same_as_sdk(stub, wiring)
    assert session.messages()[-1].texts() != ["now the docs"]


def test_prepared_bytes_reuse_only_the_same_message_objects() -> None:
    prepared = PreparedBodies(("max_tokens", "messages", "model", "stream"))
    first = {"role": "user", "content": [{"type": "text", "text": "naïve “quotes” ✓"}]}
    body = {"model": MODEL, "messages": [first], "max_tokens": 10, "stream": True}
    assert prepared.encode(body) == json.dumps(
        {"max_tokens": 10, "messages": [first], "model": MODEL, "stream": True},
        ensure_ascii=False, separators=(",", ":")).encode()
    assert prepared.serialised == 1
    equal_copy = json.loads(json.dumps(first))  # equal, but another object: serialised afresh
    second = {"role": "assistant", "content": "ok"}
    assert prepared.encode({**body, "messages": [equal_copy, second]}) is not None
    assert prepared.serialised == 2
    assert prepared.encode({**body, "messages": [equal_copy, second]}) is not None
    assert prepared.serialised == 0


@pytest.mark.parametrize("body", [
    {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "x"}], "unknown_field": 1},
    {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": [{"type": "text", "text": "x",
                                                                                 "score": float("nan")}]}]},
    {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": {"a", "set"}}]},
])
def test_a_body_the_sdks_form_cannot_hold_is_left_to_the_sdk(body: dict[str, Any]) -> None:
    prepared = PreparedBodies(("max_tokens", "messages", "model"))
    assert prepared.encode(body) is None
    plain = {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]}
    assert prepared.encode(plain) is not None, "the same encoder takes a body its form can hold"


async def test_an_overloaded_answer_is_retried_with_the_same_bytes(stub: Stub) -> None:
    stub.script(say("Answered after one overload."))
    stub.server.inject(Fault("status", status=529, retry_after=0))
    model = stub.model(retries=2)
    body = {"model": MODEL, "max_tokens": 100, "messages": [{"role": "user", "content": "hello"}]}
    events = [e async for e in model.stream(body)]
    assert any(isinstance(e, Retrying) and "529" in e.reason for e in events)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Answered after one overload."
    assert isinstance(events[-1], ModelResponse) and events[-1].stop_reason == "end_turn"
    overloaded, answered = stub.server.requests
    assert (overloaded.status, answered.status) == (529, 200)
    assert overloaded.raw == answered.raw == (await sdk_request(stub, body)).raw
    assert model.prepared.serialised == 0  # the retry reused the first attempt's bytes
    longer = {**body, "messages": [*body["messages"], {"role": "assistant", "content": "hi"},
                                   {"role": "user", "content": "again"}]}
    stub.script(say("Again."))
    assert isinstance([e async for e in model.stream(longer)][-1], ModelResponse)
    assert model.prepared.serialised == 2  # the first message's bytes were kept from the retried request


async def test_a_refusal_for_length_and_an_unknown_model_end_as_they_did() -> None:
    server = LoopbackServer(lambda body: say("never"), models=("claude-known",), window=50).start()
    try:
        client = anthropic.AsyncAnthropic(base_url=server.url, api_key="k", max_retries=0, timeout=5.0)
        model = AnthropicModel(client, retries=3, base_delay=0)
        long = {"model": "claude-known", "max_tokens": 10, "messages": [{"role": "user", "content": "word " * 400}]}
        with pytest.raises(ContextTooLong, match="prompt is too long"):
            [e async for e in model.stream(long)]
        assert model.prepared.serialised == 1
        with pytest.raises(ModelError, match="unknown model"):
            [e async for e in model.stream({**long, "model": "claude-unknown"})]
        assert model.prepared.serialised == 0  # it went as prepared bytes, the message's kept from the refusal
        assert [r.status for r in server.requests] == [400, 404]  # neither was retried
    finally:
        server.stop()
