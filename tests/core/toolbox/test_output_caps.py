"""Every cap rhapsody applies to tool output writes the one cut marker, and the one reader knows each."""

from __future__ import annotations

from types import SimpleNamespace

from rhapsody.core.toolbox.output_caps import Original, original_size
from rhapsody.mcp.results import outcome
from rhapsody.tools.paths import cap_text
from rhapsody.sandbox.procs import Bounded


def test_a_character_cap_is_recognised_with_its_original_size() -> None:
    text = "x" * 12_345
    assert original_size(cap_text(text, 1000)) == Original(12_345, "characters")
    assert original_size(cap_text(text, 20_000)) is None


def test_a_process_output_cap_is_recognised_in_bytes() -> None:
    kept = Bounded(2000)
    kept.add(b"".join(b"%d\n" % i for i in range(1, 30001)))
    text = kept.text()
    assert "cap 2,000" in text
    assert original_size(text) == Original(168_894, "bytes")
    assert str(original_size(text)) == "168,894 bytes"


def test_an_mcp_result_cap_is_recognised() -> None:
    item = SimpleNamespace(type="text", text="y" * 5000)
    result = SimpleNamespace(structured_content=None, content=[item], is_error=False)  # the SDK's shape
    assert original_size(outcome(result, 1000).content) == Original(5000, "characters")
