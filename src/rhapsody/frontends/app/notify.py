"""Telling a person in another window that the agent waits for them: the terminal bell, or a desktop
notification by OSC 9 (iTerm2, WezTerm, kitty, Windows Terminal) or OSC 777 (VTE terminals)."""

from __future__ import annotations

def sequence(how: str, message: str) -> str:
    """What to write to the terminal; the message keeps printable characters only (a tool name or path
    chosen by the model can never end the sequence early or start another)."""
    safe = "".join(c for c in message if c.isprintable() and c != ";")[:200]
    if how == "osc9":
        return f"\x1b]9;{safe}\x07"
    if how == "osc777":
        return f"\x1b]777;notify;rhapsody;{safe}\x07"
    return "\a"


def wanted(setting: str, reason: str) -> bool:
    """Whether `setting` (off, approvals, waiting) signals for `reason` (approval, or turn_end)."""
    return setting == "waiting" or (setting == "approvals" and reason == "approval")


class Signals:
    """What was written to the terminal to say the agent waits, and the choice of whether and how to."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        """Each sequence written (the bell or a notification), oldest first."""

    def signal(self, setting: str, how: str, reason: str, message: str) -> str | None:
        """The sequence to write for `reason` under the settings `notify` (`setting`) and `notify_with` (`how`);
        None when the settings want none."""
        if not wanted(setting, reason):
            return None
        text = sequence(how, message)
        self.sent.append(text)
        return text
