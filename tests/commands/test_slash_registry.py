"""Slash commands are a registry: one function per command, its help written once, and what the palette,
/help and completion list is what the registry holds."""

from __future__ import annotations

from pathlib import Path

from rhapsody.commands import slash
from rhapsody.commands.slash import COMMANDS, REGISTRY, Outcome, command, run_command
from rhapsody.frontends.prompt_aids import command_names

from tests.conftest import Stub


def test_every_listed_command_is_a_registered_function_with_its_help() -> None:
    assert list(COMMANDS) == list(REGISTRY)
    assert {"/handoff", "/unhandoff", "/rewind", "/permissions", "/help", "/quit"} <= set(REGISTRY)
    assert all(COMMANDS[name] == REGISTRY[name].help and callable(REGISTRY[name].run) for name in REGISTRY)


def test_a_command_registered_once_runs_and_is_listed_by_help_and_completion(stub: Stub, project: Path) -> None:
    agent = stub.wire(project).agent

    @command("/echo", "WORDS: say the words back")
    def _echo(agent: object, arg: str, keys: object) -> Outcome:
        return Outcome(f"echo: {arg}")

    try:
        assert run_command(agent, "/echo  hello there ").text == "echo: hello there"
        assert "/echo         WORDS: say the words back" in run_command(agent, "/help").text
        assert "/echo" in command_names(project)
    finally:
        del slash.REGISTRY["/echo"], slash.COMMANDS["/echo"]
    assert run_command(agent, "/echo hi").error  # gone from the registry: an unknown command again
