"""MCP tool results as rhapsody's tool outcomes.

Text stays text; images (PNG, JPEG, GIF, WebP) become image blocks; an embedded text
resource becomes text under its URI; audio, binary resources and resource links are named
in a line, not sent. Works on the SDK's result objects by their `type` field, so it needs
no `mcp` import (rhapsody.mcp.tools is the only importer).
"""

from __future__ import annotations

import json
from typing import Any

from rhapsody.core.toolbox.protocol import ToolOutcome
from rhapsody.tools.paths import cap_text
from rhapsody.core.json_types import JsonObject

IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


def outcome(result: Any, cap: int) -> ToolOutcome:
    """A tool result as rhapsody's outcome: text when it is all text, content blocks when images came."""
    blocks = [b for item in result.content for b in _blocks(item, cap)]
    if not blocks and result.structured_content is not None:
        blocks = [{"type": "text", "text": cap_text(json.dumps(result.structured_content, ensure_ascii=False), cap)}]
    text = "\n".join(b["text"] if b["type"] == "text" else f"[{b['source']['media_type']} image]" for b in blocks)
    has_image = any(b["type"] == "image" for b in blocks)
    return ToolOutcome(text or "(no output)", is_error=result.is_error, blocks=blocks if has_image else None)


def _blocks(item: Any, cap: int) -> list[JsonObject]:
    kind = getattr(item, "type", "unknown")
    if kind == "text":
        return [{"type": "text", "text": cap_text(item.text, cap)}] if item.text else []
    if kind == "image":
        return [_image(item.mime_type, item.data)]
    if kind == "resource":
        return [_resource(item.resource, cap)]
    if kind == "resource_link":
        return [_named(f"resource link {item.uri}{' (' + item.name + ')' if item.name else ''}")]
    if kind == "audio":
        return [_named(f"audio ({item.mime_type}, {len(item.data) * 3 // 4:,} bytes)")]
    return [_named(f"{kind} content")]


def _resource(res: Any, cap: int) -> JsonObject:
    """An embedded resource: text under its URI, an image as an image, other binaries named."""
    mime = getattr(res, "mime_type", None) or ""
    if isinstance(getattr(res, "text", None), str):
        return {"type": "text", "text": cap_text(f"[resource {res.uri}]\n{res.text}", cap)}
    blob = str(getattr(res, "blob", ""))
    if mime in IMAGE_TYPES:
        return _image(mime, blob)
    return _named(f"binary resource {res.uri} ({mime or 'unknown type'}, {len(blob) * 3 // 4:,} bytes)")


def _image(mime: str, data: str) -> JsonObject:
    if mime not in IMAGE_TYPES:
        return _named(f"image of type {mime}, which the model cannot take")
    return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}}


def _named(what: str) -> JsonObject:
    return {"type": "text", "text": f"[{what}: not shown to the model]"}
