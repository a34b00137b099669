"""The docs name real tests: every test and test file README.md and docs/ cite exists, so a claim's
evidence cannot silently move or vanish (the security claims name the test that attacks them)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _tests() -> tuple[set[str], set[str]]:
    files = {p.relative_to(REPO).as_posix() for p in (REPO / "tests").rglob("*.py")}
    names = {n for f in files for n in re.findall(r"def (test_\w+)", (REPO / f).read_text(encoding="utf-8"))}
    return files, names


def _cited(text: str) -> tuple[set[str], set[str], set[str]]:
    paths = set(re.findall(r"\btests/[\w/]+\.py\b", text))
    shortened = set(re.findall(r"\b(test_\w+)…", text))
    names = {n for n in re.findall(r"\b(test_\w+)\b(?!…)", text) if n not in shortened}
    return paths, names, shortened


def test_every_test_the_docs_cite_exists() -> None:
    files, names = _tests()
    assert "test_every_test_the_docs_cite_exists" in names, "the scan finds the tests, this one among them"
    stems = {Path(f).stem for f in files}
    missing = []
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        paths, cited, shortened = _cited(doc.read_text(encoding="utf-8"))
        missing += [f"{doc.name}: {p}" for p in sorted(paths - files)]
        missing += [f"{doc.name}: {n}" for n in sorted(cited - names - stems)]
        missing += [f"{doc.name}: {n}…" for n in sorted(shortened) if not any(t.startswith(n) for t in names)]
    assert not missing, "\n".join(missing)


def test_the_check_sees_a_test_that_is_not_there() -> None:
    paths, names, shortened = _cited("`tests/core/test_gone.py::test_never_written` and `test_half_…`")
    files, known = _tests()
    assert paths - files == {"tests/core/test_gone.py"}
    assert "test_never_written" in names - known and shortened == {"test_half_"}
