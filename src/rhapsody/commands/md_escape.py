"""Transcript text made inert for Markdown: it renders as the words it is, never as HTML, an image or a link.

An exported transcript (`export --md`) is pasted where Markdown renders (an issue, a wiki), and
its text comes from the model, tool output and web pages: a remote `<img>` there is a beacon, an
unclosed `<!--` hides every later line. Two forms:

- `plain`, for text that is not Markdown (the human's words, rhapsody's own lines): `&` and `<`
  become entities, backticks and `[` are escaped and backslashes doubled, so no code, HTML,
  image, link or reference definition can form, by construction;
- `inert`, for the model's Markdown: the same escapes outside code, while code fences and code
  spans are kept as they are (their text is literal) and a fence the text leaves open is
  closed, so no later line falls into it. The result is then parsed as CommonMark
  (markdown-it): text whose escaped form still yields HTML, an image or a link (a code span
  running over lines, say) is fenced whole instead, so what leaves is checked, not only
  escaped by rule.

Imports: stdlib and markdown_it only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from markdown_it import MarkdownIt
from markdown_it.token import Token

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_PIECE = re.compile(r"\\[!-/:-@\[-`{-~]|`+|[&<\[]")
"""A backslash escape (kept: its character is already literal), a backtick run (a code span's edge), or a
character to escape."""
_ESCAPE = {"&": "&amp;", "<": "&lt;", "[": "\\["}
UNSAFE = ("html_block", "html_inline", "image", "link_open")
"""Token types transcript text must never produce."""
_PARSER = MarkdownIt("commonmark")


def inert(text: str) -> str:
    """`text` as Markdown that shows its words and forms no HTML, image or link (checked by parsing it)."""
    escaped = escaped_markdown(text)
    return escaped if not any(unsafe(escaped)) else fenced(text)


def escaped_markdown(text: str) -> str:
    """`text` with `&`, `<` and `[` escaped outside code; code fences and spans verbatim, an open fence closed."""
    out: list[str] = []
    fence = ""
    for line in text.split("\n"):
        if fence:
            out.append(line)
            fence = "" if _closes(line, fence) else fence
            continue
        opened = _FENCE.fullmatch(line)
        if opened and not (opened.group(1)[0] == "`" and "`" in opened.group(2)):
            fence = opened.group(1)
            out.append(line)
        else:
            out.append(_inline(line))
    return "\n".join(out + ([fence] if fence else []))


def plain(text: str) -> str:
    """`text` as Markdown with no code, HTML, image or link by construction: backslashes doubled, and `` ` ``,
    `[` escaped, `&` and `<` as entities (for the human's words and rhapsody's own lines, which are not Markdown)."""
    return (text.replace("\\", "\\\\").replace("`", "\\`").replace("[", "\\[")
            .replace("&", "&amp;").replace("<", "&lt;"))


def fenced(text: str) -> str:
    """`text` whole in a code fence longer than any backtick or tilde run inside it: literal by construction."""
    longest = max((len(run) for run in re.findall(r"`+|~+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def unsafe(markdown: str) -> Iterator[Token]:
    """Every token of `markdown` that is HTML, an image or a link."""
    for token in _PARSER.parse(markdown):
        for each in (token, *(token.children or ())):
            if each.type in UNSAFE:
                yield each


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return len(line) - len(line.lstrip(" ")) <= 3 and len(stripped) >= len(fence) and set(stripped) == {fence[0]}


def _inline(line: str) -> str:
    """One line outside a fence: code spans verbatim (a run of N backticks to the next run of exactly N),
    backslash escapes kept, `&`, `<` and `[` escaped."""
    out: list[str] = []
    at = 0
    for piece in _PIECE.finditer(line):
        if piece.start() < at:
            continue  # inside a code span already copied
        out.append(line[at:piece.start()])
        at = piece.end()
        token = piece.group()
        if token[0] == "`":
            close = re.compile(rf"(?<!`){token}(?!`)").search(line, piece.end())
            at = close.end() if close else at
            out.append(line[piece.start():at])
        else:
            out.append(_ESCAPE.get(token, token))
    out.append(line[at:])
    return "".join(out)
