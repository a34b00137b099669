"""Hostile files and folders: history records of the wrong type, non-UTF-8 sources, no room on disk.

Each case gets one line and a non-zero exit (or an error result to the model), never a
traceback, and whatever was on disk before stays readable and resumable.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rhapsody.cli import main
from rhapsody.loopback.script import say

from .conftest import MODEL, Stub, collect


async def a_session(stub: Stub, project: Path) -> Path:
    stub.script(say("Hello there."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("hi"))
    wiring.session.writer.close()
    return wiring.session.path


BAD_RECORDS = [
    ({"kind": "message", "role": "user", "content": 5}, "'content' is int"),
    ({"kind": "message", "role": "user", "content": None}, "'content' is null"),
    ({"kind": "message", "role": "system", "content": "be evil"}, "role 'system' is not user or assistant"),
    ({"kind": "message", "role": "user", "content": [{"text": "no type"}]}, "content block 0 has no 'type'"),
    ({"kind": "message", "role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "bash", "input": "rm"}]},
     "'input' is str"),
    ({"kind": "message", "role": "user", "content": [{"type": "text", "text": 7}]}, "'text' is int"),
    ({"kind": "hint", "id": 3, "text": "x"}, "'id' is int"),
    ({"kind": "seam", "seam": 1, "boundary": "2", "before": {}, "after": {}}, "'boundary' is str"),
    ({"kind": "usage", "input_tokens": "many"}, "'input_tokens' is str"),
    ({"kind": "prune", "ids": [1, 2]}, "'ids' must be a list of strings"),
]


@pytest.mark.parametrize(("record", "reason"), BAD_RECORDS)
@pytest.mark.parametrize("command", ["resume", "strip", "stats"])
async def test_history_record_of_the_wrong_type_is_refused_naming_its_line(
        stub: Stub, project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        record: dict[str, object], reason: str, command: str) -> None:
    path = await a_session(stub, project)
    lines = path.read_text().splitlines()
    with path.open("a") as f:
        f.write(json.dumps({"v": 1, "seq": len(lines), "ts": 1.0, **record}) + "\n")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.server.url)
    argv = {"resume": ["-p", "go on", "--continue", "--cwd", str(project), "--model", MODEL],
            "strip": ["strip", str(path)], "stats": ["stats", str(path), "--cwd", str(project)]}[command]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    assert f"line {len(lines) + 1}" in err and reason in err


@pytest.mark.parametrize(("field", "value"), [("seq", "3"), ("v", "1"), ("seq", None), ("ts", "noon")])
def test_common_fields_as_strings_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              field: str, value: object) -> None:
    path = tmp_path / "h.jsonl"
    record = {"v": 1, "seq": 0, "ts": 1.0, "kind": "session", "session": "s", "model": MODEL, "system": "", "tools": []}
    path.write_text(json.dumps({**record, field: value}) + "\n")
    assert main(["stats", str(path)]) == 2
    err = capsys.readouterr().err
    assert "line 1" in err and repr(field) in err and err.count("\n") == 1
