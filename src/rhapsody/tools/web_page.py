"""A fetched page's HTML as Markdown, in a worker process that web_fetch's deadline can end.

A page is untrusted input of up to 2 MB: an HTML parser and a Markdown converter may take
time that grows faster than the page (deep nesting, thousands of unclosed tags), and on
rhapsody's event loop no timeout could stop them. So web_fetch runs this file as its own
process (`python -I web_page.py`, the HTML on stdin, the Markdown on stdout, no environment),
and kills it when the fetch's time is up. The page furniture is taken out on the parsed
tree, never by a regular expression over the text (one that looked for each `<script>`'s
closing tag took quadratic time on a page of unclosed ones).

Imports: stdlib, bs4 and markdownify only: it runs as a plain script, outside the package.
"""

from __future__ import annotations

import sys

FURNITURE = ("script", "style", "noscript", "iframe", "svg", "template")
"""Elements left out of the page with everything inside them."""


def to_markdown(html: str) -> str:
    """HTML as Markdown, scripts, styles and page furniture left out, blank runs collapsed."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "html.parser")
    for element in soup.find_all(FURNITURE):
        element.decompose()
    text = MarkdownConverter(heading_style="ATX", strip=["img"]).convert_soup(soup)
    out: list[str] = []
    for line in (line.rstrip() for line in text.splitlines()):
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip()


def main() -> int:
    """Read HTML (UTF-8) on stdin, write its Markdown (UTF-8) on stdout; one line on stderr when it fails."""
    sys.setrecursionlimit(20_000)  # deep pages convert; deeper ones fail with one line, not a stack
    html = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    try:
        page = to_markdown(html)
    except RecursionError:
        sys.stderr.write("the page nests its elements too deeply to convert\n")
        return 1
    sys.stdout.buffer.write(page.encode("utf-8", errors="replace"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
