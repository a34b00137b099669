"""A hostile or broken server: malformed streams, bad tool arguments, lone surrogates, long retry-after.

Every case goes through the real SDK against the loopback server and ends as a retry, an
error tool_result or one line, never a traceback; the history stays valid and resumable.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rhapsody.core.errors import ModelError
from rhapsody.core.events import Failed, RetryCountdown, Retrying, ToolFinished, TurnEnded
from rhapsody.core.session.history import read_history
from rhapsody.core.agent.retry import MAX_RETRY_AFTER, RetryPolicy, retry_delay, retrying
from rhapsody.core.session.session import Session
from rhapsody.view.render import print_event
from rhapsody.loopback.script import call, say
from rhapsody.loopback.server import Fault

from tests.conftest import MODEL, Stub, collect, no_wait
from tests.test_cli import one_line_error, rhapsody

STEP = "I will append a line to log.txt so each executed run of this tool call is visible on disk."
NARRATION = "I will call the tool with arguments as the model produced them, to see what comes back."


@pytest.mark.parametrize(("fault", "reason"), [
    (Fault("garbage", after_events=3), "malformed data"),
    (Fault("bad_shape", after_events=3), "malformed content_block_delta event"),
    (Fault("html"), "text/html"),
    (Fault("truncate", after_events=3), "before message_stop"),
    (Fault("sse_error", after_events=3), "overloaded"),
])
async def test_malformed_stream_is_retried_with_its_reason_and_no_tool_runs_twice(
        stub: Stub, project: Path, fault: Fault, reason: str) -> None:
    stub.script(call(STEP, "bash", command="echo run >> log.txt"), say("Done."))
    stub.server.inject(fault)
    wiring = stub.wire(project)
    events = await collect(wiring.agent.run("go"))
    assert isinstance(events[-1], TurnEnded)
    retries = [e for e in events if isinstance(e, Retrying)]
    assert len(retries) == 1 and reason in retries[0].reason
    assert "\n" not in retries[0].reason
    assert (project / "log.txt").read_text() == "run\n"
    history = read_history(wiring.session.path)
    assert not any("lost to an injected fault" in json.dumps(r) for r in history.records)


def test_malformed_stream_until_retries_run_out_is_one_line_and_resumable(stub: Stub, project: Path) -> None:
    stub.script(say("Back again."))
    stub.server.inject(Fault("garbage", after_events=2), Fault("html"))
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": stub.server.url, "RHAPSODY_RETRIES": "1",
           "RHAPSODY_RETRY_BASE_DELAY": "0"}
    line = one_line_error(rhapsody("-p", "hi", "--cwd", str(project), "--model", MODEL, env=env))
    assert "failed 2 times" in line and "text/html" in line
    resumed = rhapsody("-p", "again", "--continue", "--cwd", str(project), env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert "Back again." in resumed.stdout


@pytest.mark.parametrize(("raw", "why"), [
    ("not json at all", "not valid JSON"),
    ('["a", "list"]', "a JSON list, not an object"),
    ('{"path": "\\ud800.py"}', "lone surrogate"),
    ('{"path": "a.py", "content": "x\\udc80y"}', "lone surrogate"),
])
async def test_tool_arguments_that_are_not_a_json_object_get_an_error_result_and_the_session_goes_on(
        stub: Stub, project: Path, raw: str, why: str) -> None:
    tool = "write_file" if "content" in raw else "read_file"
    stub.script({"content": [{"type": "text", "text": NARRATION}, {"type": "tool_use", "name": tool, "raw_input": raw}]},
                say("Understood, the arguments were bad."))
    wiring = stub.wire(project)
    events = await collect(wiring.agent.run("go"))
    assert isinstance(events[-1], TurnEnded)
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert len(finished) == 1 and finished[0].is_error and why in finished[0].output
    assert not (project / "a.py").exists()
    # The raw arguments are on record, the next request carried them back, and a resume is exact.
    second = stub.bodies()[1]["messages"]
    assert second[1]["content"][1]["input"]["_unparsed"].encode("ascii", "backslashreplace")
    assert second[2]["content"][0]["is_error"] is True
    resumed = Session.resume(project, wiring.session.path)
    assert resumed.request_and_size()[0]["messages"] == wiring.session.request_and_size()[0]["messages"]
    assert read_history(wiring.session.path).skipped == 0


async def test_raw_lone_surrogates_in_text_and_arguments_never_break_history_or_requests(stub: Stub, project: Path) -> None:
    # The SSE data itself carries an unescaped surrogate: json.loads of the event yields a lone one.
    stub.script({"content": [{"type": "text", "text": "I will read the file named with a bad character \ud800 now."},
                             {"type": "tool_use", "name": "read_file", "raw_input": '{"path": "x\udc80.py"}'}]},
                say("Done \udfff."))
    wiring = stub.wire(project)
    events = await collect(wiring.agent.run("task with a surrogate from argv \udcff"))
    assert isinstance(events[-1], TurnEnded)
    assert [e for e in events if isinstance(e, ToolFinished)][0].is_error
    assert wiring.session.messages()[-1].texts() == ["Done \ufffd."]
    history = read_history(wiring.session.path)
    assert history.skipped == 0 and not history.torn_tail
    assert len(stub.bodies()) == 2  # the human's surrogate reached the server as U+FFFD, not as a crash
    assert "\ufffd" in stub.bodies()[0]["messages"][0]["content"][0]["text"]
    Session.resume(project, wiring.session.path).request_and_size()


def test_retry_after_is_capped_at_sixty_seconds() -> None:
    assert MAX_RETRY_AFTER == 60.0
    assert retry_delay(100000.0, 1, 0.5) == 60.0
    assert retry_delay(3.0, 1, 0.5) == 3.0
    assert retry_delay(None, 3, 0.5) == 2.0


async def test_long_retry_after_is_capped_and_counted_down_in_events(stub: Stub, project: Path) -> None:
    stub.script(say("Answered after the wait."))
    stub.server.inject(Fault("status", status=429, retry_after=100000))
    wiring = stub.wire(project)
    wiring.agent.model.max_retry_after = 1.5  # the production cap is 60 s; the test keeps the wait short
    waited: list[float] = []
    wiring.agent.model.sleep = no_wait(waited)
    events = await collect(wiring.agent.run("go"))
    assert waited == [0.5, 1.0]  # the wait passed in the countdown's steps, on the test's clock
    assert isinstance(events[-1], TurnEnded)
    retry = next(e for e in events if isinstance(e, Retrying))
    assert (retry.delay, retry.asked) == (1.5, 100000.0)
    ticks = [e.remaining for e in events if isinstance(e, RetryCountdown)]
    assert ticks == [1.5, 1.0]
    out = io.StringIO()
    print_event(retry, out)
    assert "retry 1 in 1.5 s" in out.getvalue() and "server asked 100000 s" in out.getvalue()


async def test_html_page_every_time_fails_the_turn_with_one_line(stub: Stub, project: Path) -> None:
    stub.script(say("never"))
    stub.server.inject(*[Fault("html")] * 3)
    wiring = stub.wire(project, retries=2)
    events = await collect(wiring.agent.run("go"))
    assert isinstance(events[-1], Failed)
    assert "text/html" in events[-1].message and "\n" not in events[-1].message


EVENT_NAMES = st.sampled_from(["message_start", "content_block_start", "content_block_delta", "content_block_stop",
                               "message_delta", "message_stop", "ping", "error", "bogus"])
DATA = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                        st.sampled_from(["type", "index", "delta", "text", "content_block", "usage", "message"]),
                        inner, max_size=5), max_leaves=12)
EVENTS = st.lists(st.tuples(EVENT_NAMES, DATA | st.binary(max_size=40)), min_size=1, max_size=6)


def _sse(events: list[tuple[str, object]]) -> bytes:
    out = b""
    for name, data in events:
        body = data if isinstance(data, bytes) else json.dumps(data).encode()
        out += b"event: " + name.encode() + b"\ndata: " + body.replace(b"\n", b" ") + b"\n\n"
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=EVENTS, after=st.integers(0, 6))
def test_any_event_sequence_from_the_server_is_a_retry_or_a_reply_never_an_exception(
        stub: Stub, project: Path, events: list[tuple[str, object]], after: int) -> None:
    stub.script(say("The real answer."))
    stub.server.inject(Fault("garbage", after_events=after, payload=_sse(events)))
    wiring = stub.wire(project, retries=1)
    result = asyncio.run(collect(wiring.agent.run("go")))
    assert isinstance(result[-1], (TurnEnded, Failed))
    for event in result:
        if isinstance(event, (Retrying, Failed)):
            text = event.reason if isinstance(event, Retrying) else event.message
            assert "\n" not in text and len(text) < 1000


async def test_a_rejection_whose_message_spans_lines_ends_as_one_line(stub: Stub) -> None:
    body = {"model": "gpt-\nnope\n  at line 2", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(ModelError) as caught:
        await collect(stub.model().stream(body))
    assert "\n" not in str(caught.value) and "unknown model" in str(caught.value)


async def test_whatever_a_classifier_raises_ends_as_one_model_error_line() -> None:
    async def once(body: dict[str, object]) -> AsyncIterator[Retrying]:
        raise OSError("torn\nacross lines")
        yield  # an async generator

    def buggy(exc: Exception) -> tuple[str, float | None]:
        raise KeyError("a bug in the classifier")

    def rejecting(exc: Exception) -> tuple[str, float | None]:
        raise ModelError(f"rejected:\n{exc}")

    for classify in (buggy, rejecting):
        with pytest.raises(ModelError) as caught:
            await collect(retrying(once, {}, classify, RetryPolicy(retries=0)))
        assert "\n" not in str(caught.value) and "torn across lines" in str(caught.value)
