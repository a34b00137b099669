"""The narration policy: a tool call runs only if visible text came before it.

"Text since the previous tool call" is counted in words over the text blocks of the
assistant message. With one call per message (the default) the count restarts after each
call; with parallel calls allowed, one narration covers the whole batch. Thinking never
counts: it is stripped at every seam, so it cannot carry the evidence.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from rhapsody.core.session.messages import Message, TextBlock, ToolUseBlock


def narration_words(message: Message, parallel: bool) -> dict[str, int]:
    """Words of visible narration before each tool call of `message`, by tool_use id."""
    words = 0
    found: dict[str, int] = {}
    for block in message.content:
        if isinstance(block, TextBlock):
            words += len(block.text.split())
        elif isinstance(block, ToolUseBlock):
            found[block.id] = words
            if not parallel:
                words = 0
    return found
