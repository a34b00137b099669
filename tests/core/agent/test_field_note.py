"""The field note: the request says what leaves and what to write; the harness quotes the last failure."""

from __future__ import annotations

import json
from pathlib import Path

from rhapsody.core.session.last_failure import failed_tests, last_failure
from rhapsody.core.session.records import ToolRun
from rhapsody.loopback.script import call, say

from tests.conftest import Stub, collect
from tests.core.session.test_handoff_e2e import handoff_turn

FAILING = (
    "printf '%s\\n' '==== short test summary info ====' "
    "'FAILED tests/test_parse.py::test_empty - ValueError: empty input at parser.py:88' "
    "'FAILED tests/test_parse.py::test_unicode[é] - AssertionError' '2 failed, 9 passed in 0.12s'; exit 1"
)


async def test_note_quotes_the_last_failing_command_and_its_failed_tests(stub: Stub, project: Path) -> None:
    stub.script(
        call("I will run the tests to see which ones fail before I touch the parser.", "bash", command=FAILING),
        call("Now a quick check that the project root is where I think it is.", "bash", command="pwd"),
        say("Two tests fail."), handoff_turn(), say("Noted."),
    )
    wiring = stub.wire(project)
    await collect(wiring.agent.run("run the tests"))
    wiring.agent.request_handoff()
    await collect(wiring.agent.run())
    asked = json.dumps(stub.bodies()[3]["messages"][-1])
    for phrase in ("leaves your context", "line numbers", "verbatim", "next steps first", "short", "with its reason",
                   "tried and failed", "goes into a file in the project"):
        assert phrase in asked, phrase
    note = next((project / ".rhapsody" / "notes").glob("*.md")).read_text()
    assert "### Last failing command (exit 1; verbatim)" in note
    assert "FAILED tests/test_parse.py::test_empty - ValueError: empty input at parser.py:88\n" in note
    assert "2 failed, 9 passed in 0.12s\n\n[exit code 1]\n```" in note
    assert "Failed tests (2): tests/test_parse.py::test_empty, tests/test_parse.py::test_unicode[é]" in note
    assert note.index("## Next steps and open") < note.index("## Done")


async def test_with_memory_on_the_request_points_recipes_at_the_memory(stub: Stub, project: Path) -> None:
    (project / "docs" / "memory").mkdir(parents=True)
    stub.script(say("ok"), handoff_turn(), say("noted"))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("hello"))
    wiring.agent.request_handoff()
    await collect(wiring.agent.run())
    assert "project memory now (`docs/memory/`" in json.dumps(stub.bodies()[1]["messages"][-1], ensure_ascii=False)


def test_failed_test_names_from_common_runners_are_bounded() -> None:
    output = "\n".join([
        "--- FAIL: TestParse (0.00s)",
        "test tokens::splits ... FAILED",
        "FAIL: test_add (tests.test_app.AppTest)",
        "  ✕ renders the header (5 ms)",
        "tests/a.py::test_x FAILED",
        *[f"FAILED tests/b.py::test_{n}" for n in range(40)],
    ])
    names = failed_tests(output)
    assert names[:5] == ["TestParse", "tokens::splits", "test_add (tests.test_app.AppTest)", "renders the header",
                         "tests/a.py::test_x"]
    assert len(names) == 30


def test_no_failure_means_no_section_and_a_later_success_is_said() -> None:
    ok = ToolRun(tool_use_id="a", name="bash", command="make", exit_code=0)
    assert last_failure([ok], {"a": "fine"}) == ""
    bad = ToolRun(tool_use_id="b", name="bash", command="make", exit_code=2)
    text = last_failure([bad, ok.model_copy(update={"tool_use_id": "c"})], {"b": "x\n```\ny ```` z\n"})
    assert "(a later run of the same command succeeded)" in text and "`````\nx\n```\ny ```` z\n`````" in text
