"""The todo list through the real loop: written and updated by todo_write, drawn as an event, kept in the
history so a resume, a rewind (the list as of the rewind point) and both exports show it; a completed item
is a boundary the automatic seam may use (`todo_completed` on its run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rhapsody.commands.export import export_text
from rhapsody.core.events import TodoUpdated
from rhapsody.core.session.history import read_history
from rhapsody.core.session.session import Session
from rhapsody.core.event_json import as_json as event_dict
from rhapsody.loopback.script import call, say
from rhapsody.tools.handoff import harness_facts
from rhapsody.rewind.rewind import rewind, turns
from rhapsody.wiring import shadow

from tests.conftest import Stub, collect


def todos(*items: tuple[str, str]) -> list[dict[str, str]]:
    return [{"content": c, "status": s} for c, s in items]


FIRST = todos(("read app.py", "in_progress"), ("fix add", "pending"))
SECOND = todos(("read app.py", "done"), ("fix add", "in_progress"))
THIRD = todos(("read app.py", "done"), ("fix add", "done"))


def write(items: list[dict[str, str]], why: str) -> dict[str, Any]:
    return call(f"I will update my todo list: {why}.", "todo_write", todos=items)


def states(items: Any) -> list[tuple[str, str]]:
    return [(i.content, i.status) if hasattr(i, "content") else (i["content"], i["status"]) for i in items]


async def test_a_todo_list_written_updated_resumed_rewound_and_exported(stub: Stub, project: Path) -> None:
    stub.script(
        write(FIRST, "two steps, the first under way"), write(SECOND, "app.py is read"), say("Reading done."),
        write(THIRD, "add is fixed"), say("All done."),
    )
    wiring = stub.wire(project)
    events = await collect(wiring.agent.run("fix add"))
    shown = [e for e in events if isinstance(e, TodoUpdated)]
    assert [states(e.items) for e in shown] == [states(FIRST), states(SECOND)]
    assert event_dict(shown[0])["event"] == "todo_list" and event_dict(shown[0])["items"][0]["content"] == "read app.py"
    await collect(wiring.agent.run("now fix it"))
    assert states(wiring.session.todos.items()) == states(THIRD)
    runs = [r for r in read_history(wiring.session.path).records if r["kind"] == "tool_run"]
    assert [bool(r.get("todo_completed")) for r in runs] == [False, True, True]  # each call that finished an item
    assert "Todo list saved: todo 1/2 done." in str(stub.bodies()[2]["messages"][-1]["content"][0]["content"])

    facts = harness_facts(project, wiring.session)  # the field note re-states the list the harness recorded
    assert "### Todo list (todo 2/2 done)\n- [x] read app.py\n- [x] fix add" in facts

    resumed = Session.resume(project, wiring.session.path)
    assert states(resumed.todos.items()) == states(THIRD)

    store = shadow(project, wiring.settings)
    done = rewind(wiring.session, store, turns(wiring.session, store)[1], "conversation", overwrite=False)
    assert not done.error
    assert states(wiring.session.todos.items()) == states(SECOND)  # as of the rewind point
    assert states(Session.resume(project, wiring.session.path).todos.items()) == states(SECOND)

    for fmt in ("md", "html"):
        _, page = export_text(project, wiring.session.id, fmt)
        assert "todo 1/2 done" in page and "[&gt;] fix add" in page.replace("[>]", "[&gt;]")
        assert "todo 2/2 done" in page
