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
    assert isinstance(run, rec.ToolRun) and run.model_extra == {"command": "ls", "imported": True}
    with pytest.raises(rec.InvalidRecord, match="hint record: unknown field 'colour'"):
        rec.parse({"kind": "hint", "id": "h1", "text": "x", "colour": "red"})


def test_the_writer_refuses_a_record_of_the_wrong_shape_before_writing_it(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    writer = HistoryWriter(path)
    writer.append("hint", id="h1", text="keep it short", mode="steer")
    size = path.stat().st_size
    with pytest.raises(rec.InvalidRecord, match="seam record without 'boundary'"):
        writer.append("seam", seam=1, before={}, after={})
    with pytest.raises(rec.InvalidRecord, match="'ids' item 0 is int"):
        writer.append("hint_delivered", ids=[1], message_seq=0)
    assert path.stat().st_size == size, "nothing of a refused record is written"
    entry = writer.append("model", model="claude-opus-4-5")
    assert entry.raw["seq"] == 1, "a refused record takes no sequence number"
    assert isinstance(entry.record, rec.Model) and entry.record.model == "claude-opus-4-5"
    read = read_history(path, typed=True)
    assert [type(r) for r in read.typed] == [rec.Hint, rec.Model] and read.records[1] == entry.raw


def test_reading_pauses_the_collector_and_leaves_it_as_it_was(tmp_path: Path) -> None:
    import gc

    from rhapsody.core.session.history import collector_paused

    path = tmp_path / "h.jsonl"
    HistoryWriter(path).append("hint", id="h1", text="x")
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
