"""What a slash command produced: its own module so that commands slash.py dispatches to (/rewind) build it
without importing slash.py back."""

from __future__ import annotations

from dataclasses import dataclass

from rhapsody.core.agent import ops


@dataclass(frozen=True)
class Outcome:
    """What a command produced: text to show, and what the front end should do next."""

    text: str = ""
    op: ops.Op | None = None
    """An operation for the front end to submit (`/handoff`, `/unhandoff`): the controller submits it, shows its
    receipt, and reads the work it starts."""
    quit: bool = False
    reload: bool = False
    """The transcript changed under the front end (a seam undone, a new session)."""
    in_history: bool = False
    """The text is also a history record the transcript shows once it is rebuilt."""
    error: bool = False
    prompt: str = ""
    """What to send as the human's message (a custom command's prompt); queued when a turn runs."""
    typed: str = ""
    """What the human typed with the command (its arguments): only these words attach images, never the
    command file's own text."""
    confirm: str = ""
    """A question for the human (the app asks it, plain mode asks y/N, headless refuses): yes runs `then`."""
    then: str = ""
    declined: str = "not handed off: the context stays as it is"
    """What is said when the human answers the question no."""
    refill: str = ""
    """Text to put back in the prompt (a rewound message, to edit and send again)."""
