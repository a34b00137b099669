"""The typed history: docs/history-format.md and the record models say the same, and the writer
refuses a record of the wrong shape before a byte of it reaches the disk."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rhapsody.core.session import records as rec
from rhapsody.core.errors import HistoryError
from rhapsody.core.session.history import HistoryWriter, read_history

DOC = Path(__file__).resolve().parents[3] / "docs" / "history-format.md"
HEADING = re.compile(r"^`([a-z_]+)`: ")
ENVELOPE = {"v", "seq", "ts", "kind"}


def documented() -> dict[str, str]:
    """Each record kind's section of the doc: from its "`kind`: …" paragraph to the next one (or heading)."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    previous = ""
    for line in DOC.read_text(encoding="utf-8").splitlines():
        match = HEADING.match(line)
        if match and not previous.strip():
            current = sections.setdefault(match.group(1), [])
        elif line.startswith("#"):
            current = None
        if current is not None:
            current.append(line)
        previous = line
    return {kind: "\n".join(lines) for kind, lines in sections.items()}


def examples() -> dict[str, list[dict[str, object]]]:
    """The doc's example records by kind (`{…}` and `[…]` stand for an empty object and list).

    By their own `kind`, not by where they stand: a seam's variant may be shown beside the
    record that explains it."""
    found: dict[str, list[dict[str, object]]] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("    {"):
            record = json.loads(line.strip().replace("{…}", "{}").replace("[…]", "[]"))
            found.setdefault(str(record["kind"]), []).append(record)
    return found


def test_every_kind_in_the_union_is_documented_and_every_documented_kind_exists() -> None:
    assert set(documented()) == set(rec.MODELS)
    assert set(examples()) == set(rec.MODELS), "every kind has an example, and every example a known kind"


@pytest.mark.parametrize("kind", sorted(rec.MODELS))
def test_each_kind_is_documented_with_its_fields_and_its_examples_parse(kind: str) -> None:
    model = rec.MODELS[kind]
    shown = examples().get(kind, [])
    assert shown, f"{kind}: no example record"
    for example in shown:
        assert isinstance(rec.parse(example), model)
    prose = documented()[kind]
    keys = {key for example in shown for key in example}
    for name in set(model.model_fields) - ENVELOPE - keys:
        assert re.search(rf"`\"?{name}\b", prose), f"{kind}: field {name!r} is neither in an example nor in the text"


def test_a_kind_this_version_does_not_know_reads_as_other_and_keeps_its_fields() -> None:
    record = rec.parse({"v": 1, "seq": 3, "ts": 1.0, "kind": "from_the_future", "x": [1]})
    assert isinstance(record, rec.Other) and record.kind == "from_the_future" and record.model_extra == {"x": [1]}


def test_open_kinds_keep_fields_they_do_not_declare_and_closed_kinds_refuse_them() -> None:
    run = rec.parse({"kind": "tool_run", "tool_use_id": "t", "name": "bash", "command": "ls", "imported": True})
    assert isinstance(run, rec.ToolRun) and run.command == "ls" and run.model_extra == {"imported": True}
    with pytest.raises(rec.InvalidRecord, match="hint record: unknown field 'colour'"):
        rec.parse({"kind": "hint", "id": "h1", "text": "x", "colour": "red"})


def test_a_record_of_the_wrong_shape_is_refused_when_built_so_the_writer_never_sees_it(tmp_path: Path) -> None:
    from pydantic import ValidationError

    path = tmp_path / "h.jsonl"
    writer = HistoryWriter(path)
    writer.append(rec.Hint(id="h1", text="keep it short", mode="steer"))
    size = path.stat().st_size
    with pytest.raises(ValidationError, match="boundary"):
        writer.append(rec.Seam.model_validate({"seam": 1, "before": {}, "after": {}}))
    with pytest.raises(ValidationError, match="ids"):
        writer.append(rec.HintsDelivered.model_validate({"ids": [1], "message_seq": 0}))
    assert path.stat().st_size == size, "nothing of a refused record is written"
    written = writer.append(rec.ModelSwitched(model="claude-opus-4-5"))
    assert written.seq == 1, "a refused record takes no sequence number"
    assert isinstance(written, rec.ModelSwitched) and written.model == "claude-opus-4-5" and written.ts > 0
    read = read_history(path, typed=True)
    assert [type(r) for r in read.typed] == [rec.Hint, rec.ModelSwitched] and read.records[1] == rec.dump(written)


def test_append_writes_the_model_it_is_given_and_returns_it_numbered_as_session_records_hold_it(
        tmp_path: Path) -> None:
    """`session.append(rec.X(...))` is the one way in: the line on disk is the model's fields as set (a field
    left None is absent, as a hand-written `**({...} if x else {})` left it), the envelope first."""
    from rhapsody.core.session.context import RequestSpec
    from rhapsody.core.session.session import Session

    session = Session.start(tmp_path, RequestSpec(model="claude-opus-4-5", system="s", tools=[]))
    returned = session.append(rec.NoticeShown(text="hello", shown="as is", error=None))
    assert isinstance(returned, rec.NoticeShown) and session.records[-1] is returned
    assert returned.seq == len(session.records) - 1
    line = json.loads(session.path.read_bytes().splitlines()[-1])
    assert list(line)[:4] == ["v", "seq", "ts", "kind"]
    assert line == {"v": 1, "seq": returned.seq, "ts": returned.ts, "kind": "notice", "text": "hello", "shown": "as is"}
    hint = session.hint("shorter")
    assert session.pending_hints() == [hint] and session.pending_hints() == [hint], "looking takes nothing"
    resumed = Session.resume(tmp_path, session.path)
    assert [type(r) for r in resumed.records[:3]] == [rec.SessionStarted, rec.NoticeShown, rec.Hint]
    assert resumed.records[1] == returned and resumed.pending_hints()[0].text == "shorter"


def test_of_last_and_first_pick_typed_records_by_kind_in_order() -> None:
    records: list[rec.Record] = [
        rec.Hint(id="h1", text="a"), rec.Seam(boundary=1, seam=1, before=rec.Shape(), after=rec.Shape()),
        rec.Prune(ids=["t"], before=rec.Shape(), after=rec.Shape()), rec.Hint(id="h2", text="b"),
        rec.Seam(boundary=4, seam=2, before=rec.Shape(), after=rec.Shape()),
    ]
    seams = list(rec.of(records, rec.Seam))
    assert [s.seam for s in seams] == [1, 2] and all(isinstance(s, rec.Seam) for s in seams)
    assert [type(r) for r in rec.of(records, rec.Seam, rec.Prune)] == [rec.Seam, rec.Prune, rec.Seam]
    latest = rec.last(records, rec.Hint)
    assert latest is not None and latest.id == "h2"
    oldest = rec.first(records, rec.Seam, rec.Prune)
    assert isinstance(oldest, rec.Seam) and oldest.boundary == 1
    assert rec.last(records, rec.Unseam) is None and list(rec.of([], rec.Seam)) == []


def test_a_tools_facts_are_a_typed_model_written_flat_into_its_run_record(tmp_path: Path) -> None:
    """Each tool's facts (`rec.FileFacts`, `rec.ShellFacts`…) become typed fields of its `tool_run` record."""
    facts = rec.FileFacts(path="a.py", op="write", diff="+x")
    run = rec.ToolRun(tool_use_id="t1", name="write_file", **facts.model_dump(exclude_unset=True))
    writer = HistoryWriter(tmp_path / "h.jsonl")
    written = writer.append(run)
    line = json.loads((tmp_path / "h.jsonl").read_bytes().splitlines()[-1])
    assert {k: line[k] for k in ("path", "op", "diff")} == {"path": "a.py", "op": "write", "diff": "+x"}
    assert written.path == "a.py" and written.op == "write" and "refused" not in line
    with pytest.raises(ValueError):
        rec.ShellFacts.model_validate({"command": "ls", "confinement": 3})


def test_reading_pauses_the_collector_and_leaves_it_as_it_was(tmp_path: Path) -> None:
    import gc

    from rhapsody.core.session.history import collector_paused

    path = tmp_path / "h.jsonl"
    HistoryWriter(path).append(rec.Hint(id="h1", text="x"))
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    read_history(path)
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        read_history(path)
        assert not gc.isenabled(), "a caller that paused the collector keeps it paused"
    finally:
        gc.enable()
    with pytest.raises(HistoryError), collector_paused():
        raise HistoryError("x")
    assert gc.isenabled(), "resumed after an error too"
