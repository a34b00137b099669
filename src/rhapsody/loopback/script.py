"""Responders for the loopback server: turns played from a list or a JSON script file.

A turn is `{"content": [blocks], "stop_reason"?: str, "delay"?: seconds between events,
"hold"?: (n, threading.Event)}`: with a hold, the Messages stream waits after its first n events until
the event is set, so a test acts while a reply streams, however slow the machine, then lets it finish.
Blocks are text, thinking (the server signs it), tool_use (the server assigns the id;
`raw_input` sends arguments that are not valid JSON) or any other block type verbatim.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from rhapsody.core.errors import InputError
from rhapsody.core.json_types import JsonObject

EXHAUSTED = {"content": [{"type": "text", "text": "(the loopback script has no more turns)"}]}


class ScriptedResponder:
    """Plays turns in order, one per answered request; says so when it runs out."""

    def __init__(self, turns: list[JsonObject]) -> None:
        self.turns = list(turns)
        self.played = 0
        self._lock = threading.Lock()

    def __call__(self, body: JsonObject) -> JsonObject:
        with self._lock:
            if self.played >= len(self.turns):
                return EXHAUSTED
            turn = self.turns[self.played]
            self.played += 1
            return turn

    @classmethod
    def from_file(cls, path: Path) -> ScriptedResponder:
        """Load `{"turns": [...]}` or a bare list of turns from a JSON file."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read loopback script {path}: {exc}") from None
        turns = data.get("turns") if isinstance(data, dict) else data
        if not isinstance(turns, list):
            raise InputError(f"{path}: expected a list of turns or {{\"turns\": [...]}}")
        return cls(turns)


def say(text: str) -> JsonObject:
    """A turn of plain text that ends the turn."""
    return {"content": [{"type": "text", "text": text}]}


def call(narration: str, name: str, **arguments: Any) -> JsonObject:
    """A turn that narrates, then calls one tool."""
    return {"content": [{"type": "text", "text": narration}, {"type": "tool_use", "name": name, "input": arguments}]}
