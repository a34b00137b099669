"""The last failing command and the tests it named, for the field note's harness facts.

The harness quotes them verbatim so the note never depends on the model having copied an
error correctly: the final lines of the newest command that failed, and the names of the
tests its output reports as failed (pytest, unittest, go test, cargo test, jest/vitest).

Imports: stdlib and rhapsody.core.session.records only.
"""

from __future__ import annotations

import re

from rhapsody.core.session import records as rec

TAIL_LINES = 20
TAIL_CHARS = 2000
MAX_TESTS = 30

_TEST_PATTERNS = (  # linear time over any output: one start per line, no scan past the line's end
    re.compile(r"^(?:FAILED|ERROR) (\S+)", re.M),  # pytest short summary (names with '::', checked after)
    re.compile(r"^(\S+) (?:FAILED|ERROR)\b", re.M),  # pytest -v (likewise)
    re.compile(r"^(?:FAIL|ERROR): (\w+ \([\w.]+\))", re.M),  # unittest
    re.compile(r"^[ \t]*--- FAIL: (\S+)", re.M),  # go test
    re.compile(r"^test (\S+) \.\.\. FAILED$", re.M),  # cargo test
    re.compile(r"^[ \t]*[✕×] (.+?)(?: \(\d+ ?m?s\))?$", re.M),  # jest / vitest
)
_PYTEST = _TEST_PATTERNS[:2]


def failed_tests(output: str) -> list[str]:
    """Names of failed tests in a test runner's output, in order of appearance, at most MAX_TESTS."""
    found: list[tuple[int, str]] = []
    for pattern in _TEST_PATTERNS:
        found += [(m.start(), m.group(1).strip()) for m in pattern.finditer(output)
                  if pattern not in _PYTEST or "::" in m.group(1)]
    names = list(dict.fromkeys(name for _, name in sorted(found)))
    return names[:MAX_TESTS]


def tail(output: str, lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> str:
    """The final `lines` lines of `output`, at most `chars` characters, verbatim."""
    text = "\n".join(output.rstrip("\n").splitlines()[-lines:])
    return text[-chars:]


def failed(run: rec.ToolRun) -> bool:
    """Whether a `tool_run` record is a command that failed."""
    return bool(run.command) and (run.exit_code not in (0, None) or run.is_error)


def last_failure(runs: list[rec.ToolRun], outputs: dict[str, str], tail_chars: int = TAIL_CHARS,
                 command_chars: int | None = None) -> str:
    """Markdown for the newest failed command among `runs` (tool_run records, oldest first); '' if none.

    `outputs` maps tool_use ids to the text of their results; the output's tail is at most `tail_chars`,
    and the command, with `command_chars`, is cut there (saying how long it was).
    """
    failures = [r for r in runs if failed(r)]
    if not failures:
        return ""
    run = failures[-1]
    output = outputs.get(run.tool_use_id, "")
    later_ok = any(r.command == run.command and not failed(r) for r in runs[runs.index(run) + 1:])
    command = run.command or ""
    if command_chars is not None and len(command) > command_chars:
        command = f"{command[:command_chars]}` … (cut: {len(command):,} characters; recall the call for all of it)"
    else:
        command += "`"
    code = run.exit_code
    status = f"exit {code}; verbatim" if code is not None else "verbatim; its source states no exit status"
    lines = [f"### Last failing command ({status})", f"`{command}"]
    if later_ok:
        lines.append("(a later run of the same command succeeded)")
    text = tail(output, chars=tail_chars)
    fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
    lines.append(f"Final lines of its output:\n{fence}\n{text}\n{fence}")
    tests = failed_tests(output)
    if tests:
        shown = ", ".join(tests)
        if command_chars is not None and len(shown) > 2 * command_chars:  # bounded like the command
            shown = shown[: shown.rfind(", ", 0, 2 * command_chars)] + ", …"
        lines.append(f"Failed tests ({len(tests)}{'+' if len(tests) >= MAX_TESTS else ''}): " + shown)
    return "\n".join(lines)
