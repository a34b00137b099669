"""The structure is held by tools: import-linter contracts and mypy --strict, run with the suite.

The contracts and mypy's settings live in pyproject.toml; this test runs both as the
command line would and fails with their output.
"""

from __future__ import annotations

import ast
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import type_checks
from tests.conftest import waited

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "src" / "rhapsody"


@pytest.mark.timeout(300)  # mypy without its cache takes a while on a busy machine
def test_import_contracts_hold_and_mypy_strict_is_clean(tmp_path: Path) -> None:
    started = os.environ.get(type_checks.STARTED_ENV)  # by tests/conftest.py as the whole suite began
    folder = Path(started) if started else tmp_path
    if not started:
        subprocess.run([sys.executable, type_checks.__file__, str(folder)], cwd=REPO, timeout=280, check=True)
    assert waited(lambda: (folder / type_checks.RESULT).exists(), 280), "the type and import checks never ended"
    said = json.loads((folder / type_checks.RESULT).read_text(encoding="utf-8"))
    failures = [f"$ {name} (exit {code})\n{out[-6000:]}" for name, (code, out) in said.items() if code != 0]
    assert not failures, "\n\n".join(failures)


def test_what_the_first_frame_needs_imports_no_pydantic_and_no_core() -> None:
    """The app paints before its session is built (docs/performance.md): the modules on the way to
    the first frame must not import pydantic, the SDK or the loop. A heavy import added at the top
    of one of them would slow every start without failing anything else."""
    assert loaded("import rhapsody.cli, rhapsody.commands.trust, rhapsody.demo, rhapsody.frontends.app.app",
                  ("pydantic", "anthropic", "rhapsody.core.agent.loop", "rhapsody.config.settings", "rhapsody.view.render",
                   "rhapsody.core.events", "rhapsody.wiring"), lazy_too=False) == []


def test_what_runs_before_the_early_frame_imports_no_textual_no_asyncio_and_no_pydantic() -> None:
    """The command line draws the app's first screen before it imports anything heavy (docs/performance.md):
    what `rhapsody` imports on the way to that frame (the parser, the trust check, the welcome's words) must
    load neither Textual, nor asyncio, nor pydantic; a module of `rhapsody.tools` pulling in the toolbox did."""
    assert loaded("import rhapsody.cli as cli; from rhapsody.sandbox.exec_path import keep_absolute; "
                  "import rhapsody.commands.trust, rhapsody.frontends.first_frame; cli._parser(); "
                  "from rhapsody.frontends.app.status import starting_text",
                  ("textual", "asyncio", "pydantic", "anthropic", "rhapsody.core.toolbox.orchestrator")) == []


def test_reading_the_settings_imports_neither_asyncio_nor_the_session() -> None:
    """The early frame names the model once the settings are read, before the agent is built
    (docs/performance.md): reading them must not pull in the loop's modules on the way. The hooks'
    settings pulled in the hook runner, and with it the session, the record types and asyncio."""
    assert loaded("from pathlib import Path; from rhapsody.config.settings import load_settings, permission_mode; "
                  "permission_mode(load_settings(Path.cwd(), {}), True)",
                  ("asyncio", "rhapsody.hook_runner", "rhapsody.core.session.session", "rhapsody.core.session.records",
                   "rhapsody.core.agent.loop", "anthropic", "textual")) == []


def loaded(code: str, heavy: tuple[str, ...], lazy_too: bool = True) -> list[str]:
    """Which of `heavy` a fresh interpreter has imported after running `code` (a module still behind
    a lazy import counts only with `lazy_too`)."""
    probe = (f"import sys; {code}; print(sorted(m for m in {heavy!r} if m in sys.modules "
             f"and ({lazy_too!r} or type(sys.modules[m]).__name__ != '_LazyModule')))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return ast.literal_eval(out.stdout.strip())  # type: ignore[no-any-return]


def test_no_code_outside_the_type_check_names_something_undefined() -> None:
    """mypy checks src/; the tests and the benches are checked for names that do not exist (a
    name lost in a merge fails only when its test runs, which a skipped or rare path may never do)."""
    from pyflakes.api import checkPath
    from pyflakes.reporter import Reporter

    found: list[str] = []

    class Collect(Reporter):
        def __init__(self) -> None:
            super().__init__(io.StringIO(), io.StringIO())

        def flake(self, message: Any) -> None:
            if type(message).__name__ in ("UndefinedName", "UndefinedLocal", "UndefinedExport"):
                found.append(str(message))

        def syntaxError(self, filename: str, msg: str, lineno: int, offset: int | None, text: str | None) -> None:
            found.append(f"{filename}:{lineno}: {msg}")

    checked = sorted([*(REPO / "tests").rglob("*.py"), *(REPO / "bench").rglob("*.py")])
    assert Path(__file__).resolve() in checked and any(p.parent.name == "bench" for p in checked), "the scan sees both"
    for path in checked:
        checkPath(str(path), Collect())
    assert not found, "\n".join(found)


FRONT_END_REACH_INS = {"record", "append", "hint", "take_hints", "request_handoff", "replace_session"}
"""What a front end must not call on the session or the agent's parts: changing the agent is `Agent.submit`'s."""


def reach_ins(path: Path) -> list[str]:
    """`X.session.<write>(…)`, any `X.toolbox.…` and any `X.checkpointer` in one module, as `line: text`."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Attribute):
            continue
        inner = node.value
        parent = inner.attr if isinstance(inner, ast.Attribute) else inner.id if isinstance(inner, ast.Name) else ""
        if (parent == "session" and node.attr in FRONT_END_REACH_INS) or parent == "toolbox" \
                or node.attr == "checkpointer":
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_front_end_changes_the_agent_but_through_submit() -> None:
    """The front ends write no record, set no toolbox field and read no checkpoint store: every change is an
    operation (core/agent/ops.py) given to `Agent.submit`."""
    front_ends = sorted((SRC / "frontends").rglob("*.py"))
    assert len(front_ends) > 10  # the scan saw the front ends
    found = {str(p.relative_to(SRC)): reach_ins(p) for p in front_ends}
    assert {p: lines for p, lines in found.items() if lines} == {}
    assert reach_ins(SRC / "commands" / "slash.py")  # the scan finds what it looks for (commands may reach in)


SHARED_CLASS_NAMES: dict[str, str] = {
    "Agent": "rhapsody.Agent (api.py) is the Python API's documented public name (docs/python-api.md); it wraps "
             "the loop's Agent (core/agent/loop.py), which 12 modules of src/ and 7 test files import by that name",
}
"""Class names two modules under src/rhapsody may both define, each with why; every other name is one class."""


def class_names() -> dict[str, list[str]]:
    """Each module-level class name under src/rhapsody → the modules that define it."""
    found: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        if "demo_project" in path.parts:
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(str(path.relative_to(SRC)))
    return found


def test_each_class_name_is_one_class() -> None:
    """One name, one class: a reader never has to ask which `Turn` or `Notice` a line means."""
    names = class_names()
    assert len(names) > 300 and "RewindPoint" in names  # the scan saw the source
    shared = {name: where for name, where in names.items() if len(where) > 1}
    assert {name: where for name, where in shared.items() if name not in SHARED_CLASS_NAMES} == {}
    assert sorted(set(SHARED_CLASS_NAMES) - set(shared)) == []  # a name no longer shared leaves the list


KNOWN_CIRCLES: dict[frozenset[str], str] = {}
"""Circles still open, each with what ends it: a new circle fails, and so does one that is gone but still listed."""


def circles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """Every set of modules that import each other round a circle (the graph's strong components of two or more)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm; the graph is a few hundred modules deep at most
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(edges.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = {stack.pop()}
            while node not in component:
                component.add(stack.pop())
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_the_circle_finder_finds_a_circle_of_three_and_none_in_a_chain() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}) == [frozenset({"a", "b", "c"})]
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_module_imports_itself_round_a_circle() -> None:
    """Every import counts, inside functions and under TYPE_CHECKING too (as the contracts count them)."""
    import grimp

    graph = grimp.build_graph("rhapsody", include_external_packages=False, exclude_type_checking_imports=False)
    edges = {m: {x for x in graph.find_modules_directly_imported_by(m) if x.startswith("rhapsody.")}
             for m in graph.modules if m.startswith("rhapsody.")}
    assert len(edges) > 150 and sum(map(len, edges.values())) > 500  # the whole package was read
    found = set(circles(edges))
    new = sorted(sorted(c) for c in found - set(KNOWN_CIRCLES))
    assert not new, f"modules that import each other round a circle: {new}"
    gone = sorted(sorted(c) for c in set(KNOWN_CIRCLES) - found)
    assert not gone, f"circles broken: take them out of KNOWN_CIRCLES: {gone}"


def unread_sdk_parts() -> list[tuple[str, str]]:
    """The (SDK, part) pairs pyproject.toml's mypy settings leave unread: `anthropic.resources.beta.*` → (anthropic, beta)."""
    import tomllib

    settings = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = [m for o in settings["tool"]["mypy"].get("overrides", []) if o.get("follow_imports") == "error"
                for m in o["module"]]
    return sorted({(p.split(".")[0], p.split(".")[2]) for p in patterns if p.split(".")[1] in ("types", "resources")})


def sdk_reach(path: Path, sdk: str, parts: set[str]) -> list[str]:
    """Where one module imports one of `sdk`'s `parts` or reads an attribute of that name (`client.beta`)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        if any(n.split(".")[0] == sdk and parts & set(n.split(".")[1:]) for n in names) or \
                (isinstance(node, ast.Attribute) and node.attr in parts):
            found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_code_reaches_the_sdk_parts_the_type_check_leaves_unread(tmp_path: Path) -> None:
    """mypy reads only the SDK parts src/ uses (pyproject.toml): an import of another is mypy's error, and a
    way in through the client (`client.beta.messages…`) would be typed Any unseen, so none is in the one module
    that imports each SDK (tests/providers/test_vertex_and_bedrock.py holds that there is one)."""
    unread = unread_sdk_parts()
    assert {"anthropic", "openai"} == {sdk for sdk, _ in unread} and ("anthropic", "beta") in unread
    importer = {"anthropic": SRC / "providers" / "anthropic.py", "openai": SRC / "providers" / "openai.py"}
    found = [line for sdk in importer for line in sdk_reach(importer[sdk], sdk, {p for s, p in unread if s == sdk})]
    assert found == []
    probe = tmp_path / "probe.py"  # the scan finds what it looks for
    probe.write_text("import anthropic\nfrom anthropic.types.beta import BetaMessage\nc.beta.messages.create()\n")
    assert [line.split(": ", 1)[0] for line in sdk_reach(probe, "anthropic", {"beta"})] == ["probe.py:2", "probe.py:3"]
