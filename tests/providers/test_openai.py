"""The openai provider: the real `openai` client against the loopback chat-completions endpoint."""

from __future__ import annotations

import json
from contextlib import aclosing
from pathlib import Path
from typing import Any

import openai
import pytest

from rhapsody.config.settings import Settings
from rhapsody.core.events import Failed, NarrationViolation, RetryCountdown, Retrying, SeamCommitted, ThinkingDelta, ToolFinished, ToolStarted
from rhapsody.core.session.history import read_history
from rhapsody.core.session.messages import Message
from rhapsody.core.pricing import priced
from rhapsody.core.session.strip import authored_texts
from rhapsody.loopback.chat import chat_bodies
from rhapsody.loopback.script import call, say
from rhapsody.loopback.server import Fault
from rhapsody.providers.openai import OpenAIModel
from rhapsody.providers.pick import installed
from rhapsody.core.session.session_figures import figures
from rhapsody.frontends.app.status import status_line
from rhapsody.wiring import Wiring, build

from tests.conftest import SANDBOX, Stub, collect, no_wait
from tests.test_cli import rhapsody
from tests.core.session.test_handoff_e2e import handoff_turn, step

LOCAL = "llama3.1:8b"
NARRATION = "I will list the project files to find the module under test, expecting app.py."


class ChatStub(Stub):
    """The loopback server, driven through the real openai client."""

    def client(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=self.server.url + "/v1", api_key="sk-test-key", max_retries=0, timeout=5.0)

    def wire(self, root: Path, retries: int = 3, approver: Any = None, **settings: Any) -> Wiring:
        settings.setdefault("permission_mode", "yolo")
        model = OpenAIModel(self.client(), retries=retries, base_delay=0.0)
        settings.setdefault("sandbox", SANDBOX)
        return build(root, Settings(provider="openai", model=LOCAL, **settings), model, LOCAL, approver=approver)

    def bodies(self) -> list[dict[str, Any]]:
        return chat_bodies(self.server)


@pytest.fixture
def chat() -> Any:
    s = ChatStub()
    yield s
    s.server.stop()


def roles(body: dict[str, Any]) -> list[str]:
    return [m["role"] for m in body["messages"]]


async def test_narrated_call_runs_and_its_result_comes_back_as_a_tool_message(chat: ChatStub, project: Path) -> None:
    chat.script(call(NARRATION, "bash", command="ls"), say("There is app.py."))
    wiring = chat.wire(project)
    events = await collect(wiring.agent.run("what files are there?"))
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert len(finished) == 1 and not finished[0].is_error and "app.py" in finished[0].output
    first, second = chat.bodies()
    assert first["stream"] is True and first["parallel_tool_calls"] is False
    assert "bash" in [t["function"]["name"] for t in first["tools"]] and "temperature" not in first
    assert roles(second) == ["system", "user", "assistant", "tool"]
    assistant, tool = second["messages"][2:]
    assert assistant["content"] == NARRATION
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"command": "ls"}
    assert tool["tool_call_id"] == assistant["tool_calls"][0]["id"] and "app.py" in tool["content"]
    usage = wiring.session.figures.usage
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    assert usage["cache_read_input_tokens"] > 0  # the second request's prefix was the first's


async def test_unnarrated_call_is_refused_with_an_error_result(chat: ChatStub, project: Path) -> None:
    chat.script({"content": [{"type": "tool_use", "name": "bash", "input": {"command": "touch made.txt"}}]},
                say("Sorry, narrating next time."))
    wiring = chat.wire(project)
    events = await collect(wiring.agent.run("make a file"))
    assert any(isinstance(e, NarrationViolation) for e in events)
    assert not (project / "made.txt").exists()
    tool = chat.bodies()[1]["messages"][-1]
    assert tool["role"] == "tool" and tool["content"].startswith("Error:") and "narrat" in tool["content"]


async def test_hint_typed_during_a_tool_lands_as_user_text_after_the_tool_results(chat: ChatStub, project: Path) -> None:
    chat.script(call(NARRATION, "bash", command="ls"), say("Only Python files, then: app.py."))
    wiring = chat.wire(project)
    async with aclosing(wiring.agent.run("list files")) as stream:
        async for event in stream:
            if isinstance(event, ToolStarted):
                wiring.session.hint("only the .py files please")
    second = chat.bodies()[1]
    assert roles(second)[-2:] == ["tool", "user"]
    assert second["messages"][-1]["content"] == "only the .py files please"


async def test_seam_strips_tool_traffic_and_keeps_every_authored_word_byte_for_byte(chat: ChatStub, project: Path) -> None:
    chat.script(step(1), step(2), say("Two markers printed."), handoff_turn(), say("Note written."),
                say("I remember both markers from my narration."))
    wiring = chat.wire(project)
    await collect(wiring.agent.run("print markers"))
    wiring.agent.request_handoff()
    seams = [e for e in await collect(wiring.agent.run()) if isinstance(e, SeamCommitted)]
    await collect(wiring.agent.run("what do you remember?"))
    assert len(seams) == 1
    final = chat.bodies()[-1]
    calls = [c["function"]["name"] for m in final["messages"] for c in m.get("tool_calls") or []]
    assert calls == ["micro_handoff"] and roles(final).count("tool") == 1
    written = [t for r in read_history(wiring.session.path).records if r["kind"] == "message"
               for t in authored_texts([Message(role=r["role"], content=r["content"])])]
    sent = "\n\n".join(m["content"] for m in final["messages"][1:] if m["role"] != "tool" and m["content"])
    position = 0
    for text in written[:-1]:
        found = sent.find(text, position)
        assert found >= 0, text
        position = found + len(text)


async def test_thinking_streams_but_never_goes_back(chat: ChatStub, project: Path) -> None:
    chat.script({"content": [{"type": "thinking", "thinking": "the user wants a listing"},
                             *call(NARRATION, "bash", command="ls")["content"]]}, say("done"))
    wiring = chat.wire(project)
    events = await collect(wiring.agent.run("list"))
    assert [e.text for e in events if isinstance(e, ThinkingDelta)] == ["the user wants a listing"]
    assert "the user wants a listing" not in json.dumps(chat.bodies()[1])


async def test_overload_and_a_cut_stream_are_retried_and_the_partial_answer_is_dropped(chat: ChatStub, project: Path) -> None:
    chat.script(say("Here is the whole answer."))
    chat.server.inject(Fault("status", status=429, retry_after=0), Fault("sse_error", after_events=2),
                       Fault("truncate", after_events=3))
    wiring = chat.wire(project)
    events = await collect(wiring.agent.run("hi"))
    assert [e.attempt for e in events if isinstance(e, Retrying)] == [1, 2, 3]
    messages = [r for r in read_history(wiring.session.path).records if r["kind"] == "message"]
    assert messages[-1]["content"] == [{"type": "text", "text": "Here is the whole answer."}]


async def test_a_retry_after_is_obeyed_and_counted_down_as_on_the_anthropic_provider(chat: ChatStub, project: Path) -> None:
    chat.script(say("Here after the wait."))
    chat.server.inject(Fault("status", status=429, retry_after=1.2))
    wiring = chat.wire(project)
    waited: list[float] = []
    wiring.agent.model.sleep = no_wait(waited)  # type: ignore[attr-defined]
    events = await collect(wiring.agent.run("hi"))
    retry = next(e for e in events if isinstance(e, Retrying))
    assert (retry.delay, retry.asked) == (1.2, 1.2) and waited == pytest.approx([0.2, 1.0])
    assert [e.remaining for e in events if isinstance(e, RetryCountdown)] == [1.2, 1.0]


async def test_rejected_request_is_one_failure_line(chat: ChatStub, project: Path) -> None:
    chat.server.inject(Fault("status", status=404, retry_after=None))
    wiring = chat.wire(project)
    failed = [e for e in await collect(wiring.agent.run("hi")) if isinstance(e, Failed)]
    assert len(failed) == 1 and "no such model" in failed[0].message and "--model" in failed[0].message


async def test_loopback_refuses_an_unanswered_tool_call_as_a_real_server_would(chat: ChatStub) -> None:
    messages = [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
                {"role": "user", "content": "and?"}]
    with pytest.raises(openai.BadRequestError, match="call_1"):
        await chat.client().chat.completions.create(model=LOCAL, messages=messages, stream=True)  # type: ignore[arg-type]


def test_unknown_model_is_never_priced(chat: ChatStub, project: Path) -> None:
    assert not priced(LOCAL) and priced("claude-sonnet-4-5") and priced("us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    assert priced("claude-sonnet-4-5@20250929")
    wiring = chat.wire(project)
    line = status_line(figures(wiring.session.records), wiring.session, "", "idle", 200)
    assert "cost unknown" in line and "%)" not in line


def test_headless_openai_run_from_the_shell(chat: ChatStub, project: Path) -> None:
    chat.script(say("Hello from a local model."))
    env = {"OPENAI_BASE_URL": chat.server.url + "/v1", "RHAPSODY_RETRIES": "0"}
    result = rhapsody("-p", "hi", "--provider", "openai", "--model", LOCAL, "--cwd", str(project), env=env)
    assert result.returncode == 0, result.stderr
    assert "Hello from a local model." in result.stdout
    assert chat.bodies()[0]["model"] == LOCAL


@pytest.mark.parametrize("args,env,fragment", [
    (["--provider", "openai"], {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, "needs --model"),
    (["--provider", "openai", "--model", LOCAL], {}, "OPENAI_BASE_URL"),
    (["--provider", "bedrock", "--model", "us.anthropic.claude-sonnet-4-5-20250929-v1:0"], {}, "AWS_REGION"),
    (["--provider", "bedrock"], {"AWS_REGION": "us-east-1"}, "Bedrock's form"),
    (["--provider", "vertex", "--model", "claude-sonnet-4-5@20250929"], {"CLOUD_ML_REGION": "us-east5"},
     "ANTHROPIC_VERTEX_PROJECT_ID"),
    pytest.param(["--provider", "bedrock", "--model", "us.anthropic.claude-sonnet-4-5-20250929-v1:0"],
                 {"AWS_REGION": "us-east-1"}, "pip install 'rhapsody[bedrock]'",
                 marks=pytest.mark.skipif(installed("boto3"), reason="the bedrock extra is installed")),
    pytest.param(["--provider", "vertex", "--model", "claude-sonnet-4-5@20250929"],
                 {"CLOUD_ML_REGION": "us-east5", "ANTHROPIC_VERTEX_PROJECT_ID": "p"}, "pip install 'rhapsody[vertex]'",
                 marks=pytest.mark.skipif(installed("google.auth"), reason="the vertex extra is installed")),
])
def test_missing_provider_setting_is_one_line_and_exit_2(project: Path, args: list[str], env: dict[str, str],
                                                         fragment: str, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from rhapsody.cli import main

    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "AWS_REGION", "AWS_DEFAULT_REGION", "ANTHROPIC_VERTEX_PROJECT_ID",
                 "CLOUD_ML_REGION"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["-p", "hi", "--cwd", str(project), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rhapsody: ") and fragment in err[0]


async def test_cost_limit_never_fires_on_a_guessed_price(chat: ChatStub, project: Path) -> None:
    chat.script(say("one"), say("two"))
    wiring = chat.wire(project, max_cost_usd=0.0000001)
    await collect(wiring.agent.run("first"))
    events = await collect(wiring.agent.run("second"))
    assert not any(type(e).__name__ == "LimitsExceeded" for e in events) and len(chat.bodies()) == 2


async def test_stats_of_a_local_model_session_price_nothing(chat: ChatStub, project: Path) -> None:
    from rhapsody.commands.stats import billing

    chat.script(say("hello"))
    wiring = chat.wire(project)
    await collect(wiring.agent.run("hi"))
    figures = billing(read_history(wiring.session.path, typed=True).typed)
    assert figures["model"] == LOCAL and figures["billed_input_usd"] is None
    assert figures["billed_input_usd_without_seams"] is None and figures["billed_input_tokens"] > 0
