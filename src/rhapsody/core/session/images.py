"""Images from the human: a path in the prompt becomes an image block, stored once by hash.

A prompt word `@shot.png`, or a word that is the path of an existing PNG, JPEG, GIF or WebP
file (a dragged or pasted path, quoted or with escaped spaces), attaches that image. Its type
comes from its magic bytes, never the name; its size is capped. An image is a file read for
the provider, so it is confined as the file tools' reads are: resolved inside the project root
(an absolute or `~` path outside it, or a link to outside, is refused), never a protected path
(secret-looking names, `.rhapsody/`, credential locations, the user's `protected_paths`), and
read through descriptors opened component by component without following a link, so a link
swapped in after the check is refused, not followed (core/access/confined.py, as attached files are). Only the words the human typed attach:
a custom command's own text (a project's file) attaches nothing. The bytes are stored once
under `.rhapsody/images/SHA256.EXT` (mode 0600), and the message record holds a reference
block, so the history does not grow by the image at every resume:

    {"type": "image", "source": {"type": "stored", "sha256": "…", "media_type": "image/png",
                                 "name": "shot.png", "width": 640, "height": 480}}

`for_request` turns references into the API's base64 blocks when a request is built. An
image is the human's words: the strip keeps it at every seam, like their text.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import math
import shlex
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rhapsody.core.access import confined
from rhapsody.core.errors import StorageError
from rhapsody.core.session.history import STATE_DIR, private_dir, state_dir, write_private_bytes
from rhapsody.core.session.messages import Message, OtherBlock

MAX_BYTES = 5 * 1024 * 1024
"""The Messages API's limit for one image."""
EXTENSIONS = (".png", ".jpg", ".jpeg", ".gif", ".webp")
SUFFIX = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}
STORED = "stored"
"""The source type of a reference block (rhapsody's own; never sent)."""


@dataclass(frozen=True)
class Attached:
    """One image the human attached."""

    name: str
    sha256: str
    media_type: str
    width: int
    height: int

    def block(self) -> OtherBlock:
        """The reference block the message record keeps."""
        return OtherBlock.model_validate({"type": "image", "source": {
            "type": STORED, "sha256": self.sha256, "media_type": self.media_type, "name": self.name,
            "width": self.width, "height": self.height}})


def media_type(data: bytes) -> str | None:
    """The image type by magic bytes, or None when it is none of the four the API takes."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def dimensions(data: bytes, kind: str) -> tuple[int, int]:
    """Width and height from the header ((0, 0) when the header cannot be read)."""
    try:
        if kind == "image/png":
            width, height = struct.unpack(">II", data[16:24])
            return int(width), int(height)
        if kind == "image/gif":
            width, height = struct.unpack("<HH", data[6:10])
            return int(width), int(height)
        if kind == "image/webp":
            return _webp_size(data)
        return _jpeg_size(data)
    except struct.error:
        return 0, 0


def _webp_size(data: bytes) -> tuple[int, int]:
    chunk = data[12:16]
    if chunk == b"VP8X":
        return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
    if chunk == b"VP8L":
        bits = int.from_bytes(data[21:25], "little")
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    width, height = struct.unpack("<HH", data[26:30])
    return width & 0x3FFF, height & 0x3FFF


def _jpeg_size(data: bytes) -> tuple[int, int]:
    """Walk the JPEG segments to the first start-of-frame marker."""
    at = 2
    while at + 9 < len(data):
        if data[at] != 0xFF:
            return 0, 0
        marker = data[at + 1]
        length = struct.unpack(">H", data[at + 2:at + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[at + 5:at + 9])
            return width, height
        at += 2 + length
    return 0, 0


def mentioned(text: str, root: Path) -> list[tuple[str, Path, bool]]:
    """Words of the prompt that name an image: (word, path, whether `@` marked it), in order, once each."""
    try:
        words = shlex.split(text)
    except ValueError:  # an unbalanced quote: plain words still work
        words = text.split()
    found: dict[Path, tuple[str, Path, bool]] = {}
    for word in words:
        marked = word.startswith("@")
        name = word[1:] if marked else word
        name = name.rstrip(".,;:!?)") if not name.lower().endswith(EXTENSIONS) else name
        if not name.lower().endswith(EXTENSIONS):
            continue
        path = Path(name).expanduser()
        path = path if path.is_absolute() else root / path
        if marked or path.is_file():
            found.setdefault(path, (f"@{name}" if marked else name, path, marked))
    return list(found.values())


def attach(text: str, root: Path, protected: tuple[str, ...] = ()) -> tuple[list[Attached], list[str]]:
    """The images the prompt names, stored; and one line per image that could not be attached
    (`protected`: the user's `protected_paths`, which no image is read from either)."""
    images: list[Attached] = []
    refused: list[str] = []
    for word, path, _ in mentioned(text, root):
        try:
            images.append(store(root, path, protected))
        except (ValueError, StorageError) as exc:  # StorageError: .rhapsody/images cannot be written
            refused.append(f"image {word} not attached: {exc}")
    return images, refused


def store(root: Path, path: Path, protected: tuple[str, ...] = ()) -> Attached:
    """Read, check and store one image; ValueError with the reason when it cannot be attached."""
    data = read_confined(root, path, protected)
    kind = media_type(data)
    if kind is None:
        raise ValueError("not a PNG, JPEG, GIF or WebP image (by its content)")
    digest = hashlib.sha256(data).hexdigest()
    target = images_dir(root) / f"{digest}.{SUFFIX[kind]}"
    if not target.is_file():
        write_private_bytes(target, data)
    width, height = dimensions(data, kind)
    return Attached(path.name, digest, kind, width, height)


def read_confined(root: Path, path: Path, protected: tuple[str, ...] = ()) -> bytes:
    """The bytes of the image file at `path`, confined as the file tools' reads are; ValueError says why not."""
    return confined.read_confined(root, path, protected, MAX_BYTES, "images", "one image")


def images_dir(root: Path) -> Path:
    """`.rhapsody/images/`, private."""
    return private_dir(state_dir(root) / "images")


def label(block: dict[str, Any]) -> str:
    """How the transcript shows an image block: `[image NAME WxH]`."""
    source = block.get("source") if isinstance(block.get("source"), dict) else {}
    assert isinstance(source, dict)
    name = str(source.get("name") or source.get("media_type") or "image")
    size = f" {source['width']}x{source['height']}" if source.get("width") else ""
    return f"[image {name}{size}]"


def has_images(messages: list[Message]) -> bool:
    """Whether any message holds a stored image."""
    return any(_is_stored(b) for m in messages for b in m.content)


def image_tokens(messages: list[Message]) -> int:
    """Estimated tokens of the stored images: width × height / 750, as the API documents."""
    sources = [getattr(b, "source") for m in messages for b in m.content if _is_stored(b)]
    return sum(math.ceil(int(s.get("width", 0)) * int(s.get("height", 0)) / 750) for s in sources)


def for_request(messages: list[Message], root: Path) -> list[Message]:
    """The messages with every stored image as the API's base64 block (a missing file: a line saying so)."""
    return [_resolved(m, root) if any(_is_stored(b) for b in m.content) else m for m in messages]


def _is_stored(block: object) -> bool:
    return isinstance(block, OtherBlock) and block.type == "image" and \
        isinstance(getattr(block, "source", None), dict) and getattr(block, "source")["type"] == STORED


def _resolved(message: Message, root: Path) -> Message:
    content: list[Any] = []
    for block in message.content:
        if not _is_stored(block):
            content.append(block)
            continue
        source = getattr(block, "source")
        data = _data(str(root), str(source.get("sha256", "")), str(source.get("media_type", "")))
        content.append({"type": "image", "source": {"type": "base64", "media_type": source["media_type"], "data": data}}
                       if data else {"type": "text", "text": f"{label(block.dump())} (its stored copy is missing)"})
    return Message(role=message.role, content=content)


@functools.lru_cache(maxsize=16)
def _data(root: str, digest: str, kind: str) -> str:
    """The stored image as base64 ('' when it is gone or was changed on disk)."""
    path = Path(root) / STATE_DIR / "images" / f"{digest}.{SUFFIX.get(kind, 'img')}"
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return base64.b64encode(data).decode() if hashlib.sha256(data).hexdigest() == digest else ""
