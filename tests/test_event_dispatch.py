"""Every front end's event dispatch is a `match` that ends in `assert_never`, so an event a front end forgets
fails mypy (tests/test_architecture.py runs it strict); no front end tells events apart with `isinstance`.

Read from the source's syntax tree: a new `isinstance(event, ev.X)` or a `match` that ends in a silent
`case _: pass` fails here, before mypy could miss it.
"""

from __future__ import annotations

import ast
from pathlib import Path

from rhapsody.core.event_json import EVENT_TYPES

SRC = Path(__file__).resolve().parent.parent / "src" / "rhapsody"
FRONT_ENDS = [*sorted((SRC / "frontends").rglob("*.py")), *sorted((SRC / "view").rglob("*.py")),
              *sorted((SRC / "memory").rglob("*.py")), *sorted((SRC / "commands").rglob("*.py")), SRC / "api.py"]
EVENT_NAMES = {cls.__name__ for cls in EVENT_TYPES}
EXHAUSTIVE = {"assert_never", "print_event", "event_lines", "apply", "event_updates"}
"""What a dispatch's last `case _:` may do: prove it is exhaustive, or hand the event on to a dispatch whose
own match is (the shared renderer; the app's `apply`, which shows it through `show`; the editor's session
updates, frontends/acp/updates.py)."""
DOCUMENTED = {("api.py", "_drain")}
"""The one documented place that picks events out with isinstance (it answers questions and stops at Idle,
passing every event on whole)."""
APP: set[str] = set()
"""Front-end files the checks leave out (none)."""


def _event_refs(node: ast.AST, imported: frozenset[str] = frozenset()) -> set[str]:
    """Event class names a node names: `ev.X` (rhapsody.core.events as `ev`), or `X` imported from it."""
    names = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
             and n.value.id in ("ev", "events")}
    names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in imported}
    return names & EVENT_NAMES


def _imported(tree: ast.Module) -> frozenset[str]:
    """The names a module imports from rhapsody.core.events."""
    return frozenset(alias.asname or alias.name for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and node.module == "rhapsody.core.events"
                     for alias in node.names)


def _functions(tree: ast.Module) -> dict[ast.AST, str]:
    owner: dict[ast.AST, str] = {}
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(fn):
                owner.setdefault(inner, fn.name) if inner is not fn else None
    return owner


def isinstance_dispatch(path: Path) -> list[str]:
    """`file:line function` for each isinstance on an event class."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    owner, imported = _functions(tree), _imported(tree)
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
                and len(node.args) == 2 and _event_refs(node.args[1], imported)):
            found.append(f"{path.name}:{node.lineno} {owner.get(node, '')}")
    return found


def silent_matches(path: Path) -> list[str]:
    """`file:line` for each match over events whose last case is not a wildcard that proves exhaustiveness."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = _imported(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Match):
            continue
        patterns = [p for case in node.cases for p in ast.walk(case.pattern) if isinstance(p, ast.MatchClass)]
        if not any(_event_refs(p.cls, imported) for p in patterns):
            continue
        last = node.cases[-1]
        wildcard = isinstance(last.pattern, ast.MatchAs) and last.pattern.pattern is None and last.guard is None
        calls = {n.func.id if isinstance(n.func, ast.Name) else getattr(n.func, "attr", "")
                 for n in ast.walk(ast.Module(body=last.body, type_ignores=[])) if isinstance(n, ast.Call)}
        if not (wildcard and calls & EXHAUSTIVE):
            found.append(f"{path.name}:{node.lineno}")
    return found


def unhandled(path: Path) -> dict[str, set[str]]:
    """For each match over a parameter typed as the whole `Event` union that ends in `assert_never`: the events no
    case of it names (what mypy would report)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = _imported(tree)
    found: dict[str, set[str]] = {}
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        whole = {a.arg for a in fn.args.args if a.annotation is not None
                 and ast.unparse(a.annotation) in ("ev.Event", "Event", "events.Event")}
        for node in ast.walk(fn):
            if (isinstance(node, ast.Match) and isinstance(node.subject, ast.Name) and node.subject.id in whole
                    and "assert_never" in ast.dump(ast.Module(body=node.cases[-1].body, type_ignores=[]))):
                named = {n for case in node.cases for p in ast.walk(case.pattern) if isinstance(p, ast.MatchClass)
                         for n in _event_refs(p.cls, imported)}
                found[f"{path.name}:{node.lineno}"] = EVENT_NAMES - named
    return found


def test_every_exhaustive_match_names_every_event() -> None:
    """The check mypy makes, made here too: a new event class fails until each dispatch has its case."""
    found = {where: left for path in FRONT_ENDS if path.name not in APP for where, left in unhandled(path).items()}
    assert len(found) >= 3 and {where: left for where, left in found.items() if left} == {}


def test_no_front_end_tells_events_apart_with_isinstance() -> None:
    found = [hit for path in FRONT_ENDS if path.name not in APP for hit in isinstance_dispatch(path)]
    assert [hit for hit in found if (hit.split(":")[0], hit.split()[-1]) not in DOCUMENTED] == []
    assert found, "the documented place is seen: the check reads real code"


def test_every_event_match_ends_in_assert_never() -> None:
    matches = sum(1 for path in FRONT_ENDS for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Match))
    assert [hit for path in FRONT_ENDS for hit in silent_matches(path)] == []
    assert matches >= 8  # render (3), plain, headless, the dialog recorder, the app (3)


def test_the_check_catches_a_forgotten_event(tmp_path: Path) -> None:
    """A dispatch written the old way, and a match that swallows the rest, are both found."""
    old = tmp_path / "old.py"
    old.write_text("def show(event):\n    if isinstance(event, ev.TextDelta):\n        pass\n"
                   "    match event:\n        case ev.Idle():\n            pass\n        case _:\n            pass\n")
    assert isinstance_dispatch(old) == ["old.py:2 show"] and silent_matches(old) == ["old.py:4"]
    forgot = tmp_path / "forgot.py"
    forgot.write_text("def show(event: ev.Event):\n    match event:\n        case ev.Idle():\n            pass\n"
                      "        case _:\n            assert_never(event)\n")
    assert unhandled(forgot) == {"forgot.py:2": EVENT_NAMES - {"Idle"}}
