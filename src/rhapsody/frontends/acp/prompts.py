"""What a `session/prompt` carries, as the text rhapsody's loop takes, and the commands a client lists.

Text blocks are the human's words; a resource link to a file in the project becomes an `@path` word
(so it attaches as the app attaches it), one elsewhere its address; an embedded text resource (the
client's copy of a file or a selection) follows the words as a fenced block naming its address.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from acp.schema import (AvailableCommand, AvailableCommandInput, EmbeddedResourceContentBlock, ResourceContentBlock, TextContentBlock,
                        TextResourceContents, UnstructuredCommandInput)

from rhapsody.commands.custom import load
from rhapsody.commands.slash import COMMANDS

LEFT_OUT = ("/quit", "/clear", "/resume")
"""Commands the client does itself: it closes a session, opens a new one, loads an old one."""


def prompt_text(blocks: list[Any], root: Path) -> str:
    """The prompt's blocks as one message (images and audio are not taken: the capability says so)."""
    words: list[str] = []
    context: list[str] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            words.append(block.text)
        elif isinstance(block, ResourceContentBlock):
            words.append(mention(block.uri, root))
        elif isinstance(block, EmbeddedResourceContentBlock) and isinstance(block.resource, TextResourceContents):
            context.append(f"{block.resource.uri}:\n```\n{block.resource.text}\n```")
    return "\n\n".join(part for part in (" ".join(words).strip(), *context) if part)


def mention(uri: str, root: Path) -> str:
    """A linked resource as a word: `@path` for a file in the project, else its address."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return uri
    path = Path(unquote(parsed.path))
    try:
        return "@" + path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return uri


def available_commands(root: Path) -> list[AvailableCommand]:
    """The slash commands a client offers: rhapsody's own (less those the client does itself), then the
    project's custom commands."""
    own = [AvailableCommand(name=name[1:], description=_described(help_text),
                            input=_input(help_text)) for name, help_text in COMMANDS.items() if name not in LEFT_OUT]
    custom = [AvailableCommand(name=c.name.lstrip("/"), description=c.description or "(custom command)",
                               input=hinted(c.argument_hint) if c.argument_hint else None)
              for c in load(root, tuple(COMMANDS))[0].values()]
    return own + custom


def _described(help_text: str) -> str:
    """A command's help without its argument synopsis (`[anyway]: write…` is `write…`)."""
    head, colon, rest = help_text.partition(": ")
    return rest if colon and (head.startswith("[") or head.isupper() or " " not in head) else help_text


def _input(help_text: str) -> AvailableCommandInput | None:
    head, colon, _ = help_text.partition(": ")
    return hinted(head) if colon and _described(help_text) != help_text else None


def hinted(hint: str) -> AvailableCommandInput:
    """A command's free-text argument, with the hint the client shows until it is typed."""
    return AvailableCommandInput(root=UnstructuredCommandInput(hint=hint))
