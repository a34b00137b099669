"""The conversation model: Messages API content blocks and messages as pydantic values.

Owns loading request bodies and dumping them back. Every model allows extra fields and
dumps only what was set, so a block read from disk or from a request body is written back
with the same keys and the same text, byte for byte. Unknown block types (images,
documents, server tool blocks, anything newer than this code) load as `OtherBlock` and
pass through untouched.

Imports: stdlib and pydantic only.
"""

from __future__ import annotations

import hashlib
import json
from functools import cached_property
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError
from rhapsody.core.json_types import JsonObject


UNPARSED_KEY = "_unparsed"
"""Tool-use `input` key holding arguments that could not be read as a JSON object, verbatim."""
INVALID_KEY = "_invalid"
"""Tool-use `input` key saying why the arguments under UNPARSED_KEY were refused."""
MAX_NESTING = 64
"""How deep a tool call's arguments may nest; deeper ones are refused, not walked by every reader after."""


def nested_within(value: Any, limit: int = MAX_NESTING) -> bool:
    """Whether JSON-shaped `value` nests no deeper than `limit` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return False
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return True


class _Block(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)

    def dump(self) -> JsonObject:
        """The block as the Messages API expects it, with only the keys that were set."""
        data = self.model_dump(mode="json", exclude_unset=True, by_alias=True)
        if "type" in data:
            return data
        block_type: str = getattr(self, "type")  # every block class declares its own Literal type
        return {"type": block_type, **data}


class TextBlock(_Block):
    """Visible text: what the agent narrates or the human types."""

    type: Literal["text"] = "text"
    text: str


class ThinkingBlock(_Block):
    """Model thinking; the signature binds it to everything before it."""

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str = ""


class RedactedThinkingBlock(_Block):
    """Encrypted thinking that must be passed back unchanged."""

    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str


class ToolUseBlock(_Block):
    """A tool call the model made."""

    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: Any = Field(default_factory=dict)


class ToolResultBlock(_Block):
    """The harness's answer to one tool call; content is a string or a list of blocks."""

    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: Any = None
    is_error: bool | None = None

    def text(self) -> str:
        """All text of the result, joined; non-text parts are named, not rendered."""
        if isinstance(self.content, str):
            return self.content
        if isinstance(self.content, list):
            parts = []
            for item in self.content:
                if isinstance(item, dict) and item.get("type") == "text":
                    parts.append(str(item.get("text", "")))
                elif isinstance(item, dict):
                    parts.append(f"[{item.get('type', 'block')}]")
            return "\n".join(parts)
        return ""


class OtherBlock(_Block):
    """Any block type this code does not model (image, document, server tools...)."""

    type: str


def _block_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if kind in _KNOWN else "other"


_KNOWN = {"text", "thinking", "redacted_thinking", "tool_use", "tool_result"}

Block = Annotated[
    Union[
        Annotated[TextBlock, Tag("text")],
        Annotated[ThinkingBlock, Tag("thinking")],
        Annotated[RedactedThinkingBlock, Tag("redacted_thinking")],
        Annotated[ToolUseBlock, Tag("tool_use")],
        Annotated[ToolResultBlock, Tag("tool_result")],
        Annotated[OtherBlock, Tag("other")],
    ],
    Discriminator(_block_tag),
]

THINKING_TYPES = ("thinking", "redacted_thinking")


class Message(BaseModel):
    """One message of the conversation.

    `content` is always a list of blocks; `string_content` remembers that the source gave
    a plain string so an untouched message dumps back in the same form.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    role: Literal["user", "assistant"]
    content: list[Block]
    string_content: bool = Field(default=False, exclude=True)

    @classmethod
    def from_api(cls, data: Any) -> Message:
        """Read one message as the Messages API writes it (string or block content)."""
        if not isinstance(data, dict):
            raise ValueError("a message must be an object")
        content = data.get("content")
        if isinstance(content, str):
            return cls.model_validate({"role": data.get("role"), "content": [TextBlock(text=content)], "string_content": True})
        return cls.model_validate({"role": data.get("role"), "content": content})

    def to_api(self) -> JsonObject:
        """The message as the Messages API expects it (a shared, cached dict: do not mutate)."""
        return self.api

    @cached_property
    def api(self) -> JsonObject:
        """The API form, computed once: the message is frozen."""
        if self.string_content and len(self.content) == 1 and isinstance(self.content[0], TextBlock):
            return {"role": self.role, "content": self.content[0].text}
        return {"role": self.role, "content": [b.dump() for b in self.content]}

    @cached_property
    def api_size(self) -> tuple[int, int]:
        """(bytes, characters) of the compact JSON of the API form, computed once."""
        return self._api_measures[:2]

    @cached_property
    def api_digest(self) -> str:
        """SHA-256 of the compact JSON of the API form, computed once (the what-if's cache model keys on it)."""
        return self._api_measures[2]

    @cached_property
    def _api_measures(self) -> tuple[int, int, str]:
        text = compact_json(self.api)
        data = text.encode("utf-8", "surrogatepass")
        return len(data), len(text), hashlib.sha256(data).hexdigest()

    def tool_uses(self) -> list[ToolUseBlock]:
        """The tool calls in this message, in order."""
        return [b for b in self.content if isinstance(b, ToolUseBlock)]

    def texts(self) -> list[str]:
        """The text of every text block, in order."""
        return [b.text for b in self.content if isinstance(b, TextBlock)]


class Request(BaseModel):
    """A Messages API request body: the parts rhapsody reads, everything else kept."""

    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)

    model: str = ""
    system: Any = None
    tools: list[JsonObject] = Field(default_factory=list)
    messages: list[Message]

    @classmethod
    def from_api(cls, data: Any) -> Request:
        """Read a request body; raises ValueError with a one-line reason when malformed."""
        if not isinstance(data, dict):
            raise ValueError("the request body must be a JSON object")
        if not isinstance(data.get("messages"), list):
            raise ValueError("the request body has no 'messages' list")
        messages = []
        for i, item in enumerate(data["messages"]):
            try:
                messages.append(Message.from_api(item))
            except (ValidationError, ValueError) as exc:
                raise ValueError(f"invalid request body at messages.{i}{_where(exc)}") from None
        rest = {k: v for k, v in data.items() if k != "messages"}
        try:
            return cls(messages=messages, **rest)
        except ValidationError as exc:
            raise ValueError(f"invalid request body at{_where(exc)}") from None

    def to_api(self) -> JsonObject:
        """The request body, with only the keys that were set."""
        body = self.model_dump(mode="json", exclude_unset=True, exclude={"messages"})
        body["messages"] = [m.to_api() for m in self.messages]
        return body


def _where(exc: Exception) -> str:
    if not isinstance(exc, ValidationError):
        return f": {exc}"
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ()) if p not in _TAGS)
    return f"{'.' + loc if loc else ''}: {err['msg']}"


_TAGS = {"text", "thinking", "redacted_thinking", "tool_use", "tool_result", "other"}


def compact_json(body: Any) -> str:
    """The compact JSON form rhapsody measures request sizes with."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)
