"""Keys people bring from other coding agents: ctrl+c stops the agent, inline questions, Esc Esc, shift+Tab."""

from __future__ import annotations

from pathlib import Path

from rhapsody.loopback.script import say
from rhapsody.tui.widgets import PromptInput

from .conftest import Stub
from .test_app_keys import idle, plain_app, records, until

LONG = " ".join(f"word{i}" for i in range(400))


async def test_ctrl_c_while_the_agent_streams_stops_it_and_keeps_what_streamed(stub: Stub, project: Path) -> None:
    stub.script({"content": [{"type": "text", "text": LONG}], "delay": 0.05}, say("never"))
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        app.start_turn("talk")
        await until(pilot, lambda: app.transcript.live is not None and len("".join(app.transcript.live_text)) > 20)
        assert "Interrupt" in str(app.screen.active_bindings["ctrl+c"].binding.description)
        await pilot.press("ctrl+c")
        await idle(pilot)
        assert app.is_running and not app.busy
        kinds = [e.kind for e in app.transcript.entries]
        assert "assistant" in kinds and kinds[-1] == "interrupted"
        kept = [e.text for e in app.transcript.entries if e.kind == "assistant"][0]
        assert kept.startswith("word0") and "word399" not in kept
        assert app.screen.active_bindings["ctrl+c"].binding.description == "Quit"
    assert "interrupted" in [r["kind"] for r in records(app)]


async def test_ctrl_c_idle_clears_the_prompt_then_quits_on_an_empty_one_twice(stub: Stub, project: Path) -> None:
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        prompt = app.query_one(PromptInput)
        await pilot.press(*"a draft")
        await pilot.press("ctrl+c")
        assert prompt.text == "" and app.is_running
        await pilot.press("up")  # the cleared draft comes back
        assert prompt.text == "a draft"
        await pilot.press("ctrl+c")
        await pilot.press("ctrl+c")  # empty now: the first of two
        assert app.is_running
        await pilot.press("ctrl+c")
        await pilot.pause()
    assert app.return_code == 0 and not app.is_running
