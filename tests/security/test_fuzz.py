"""Bad input never crashes rhapsody: fuzzed tool arguments, history lines, config and request files."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rhapsody.config.settings import load_settings
from rhapsody.core.session.context import RequestSpec
from rhapsody.core.errors import ConfigError, HistoryError, InputError
from rhapsody.core.session.history import read_history
from rhapsody.core.session.messages import Request
from rhapsody.core.session.session import Session
from rhapsody.core.toolbox.protocol import ToolContext, ToolOutcome
from rhapsody.commands.strip import strip_report
from rhapsody.tools import default_toolbox

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=50),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
KEYS = ["path", "content", "old", "new", "command", "pattern", "start_line", "end_line", "action", "query", "id",
        "done", "open", "working_directory", "timeout", "replace_all", "page"]
arguments = st.dictionaries(st.sampled_from(KEYS), json_values | st.integers(1, 400).map(lambda n: "x" * 50 * n), max_size=6) | json_values
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def ctx(tmp_path_factory: pytest.TempPathFactory) -> ToolContext:
    root = tmp_path_factory.mktemp("fuzzroot")
    (root / "a.txt").write_text("alpha\nbeta\n")
    return ToolContext(root, Session.start(root, RequestSpec(model="m", system="s", tools=[])), 2, 2000)


@FUZZ
@given(name=st.sampled_from(["read_file", "write_file", "edit_file", "bash", "find_files", "search_text", "git",
                             "recall", "micro_handoff", "nope"]), args=arguments)
def test_any_tool_arguments_give_an_outcome_never_an_exception(ctx: ToolContext, name: str, args: object) -> None:
    toolbox = default_toolbox("read-only", sandbox="off")  # fuzzed commands are validated and refused, never run
    outcome, _ = asyncio.run(toolbox.run(name, args, ctx))
    assert isinstance(outcome, ToolOutcome) and isinstance(outcome.content, str)


@FUZZ
@given(lines=st.lists(st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()), max_size=20))
def test_malformed_history_lines_are_skipped_or_refused_clearly(tmp_path: Path, lines: list[bytes]) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(b"\n".join(lines))
    try:
        read = read_history(path)
    except HistoryError as exc:
        assert "newer rhapsody" in str(exc) or " line " in str(exc)
        assert "\n" not in str(exc)
        return
    assert all(isinstance(r, dict) and isinstance(r["kind"], str) for r in read.records)
    try:
        strip_report(path)
    except InputError as exc:
        assert "\n" not in str(exc)


@FUZZ
@given(text=st.text(max_size=300))
def test_malformed_config_is_a_one_line_config_error(tmp_path: Path, text: str) -> None:
    folder = tmp_path / ".rhapsody"
    folder.mkdir(exist_ok=True)
    (folder / "config.toml").write_text(text)
    try:
        load_settings(tmp_path)
    except ConfigError as exc:
        assert str(exc).strip()


@FUZZ
@given(body=json_values)
def test_any_json_as_a_request_body_is_read_or_refused_with_a_reason(body: object) -> None:
    try:
        Request.from_api(body)
    except ValueError as exc:
        assert str(exc) and "\n" not in str(exc).strip()
