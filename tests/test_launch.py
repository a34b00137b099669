"""The suite's fork servers (tests/launch.py): the workers of a run share the one its controller started."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from tests import launch
from tests.conftest import waited

REPO = Path(__file__).resolve().parent.parent
WORKER = """
import os, sys
from tests import launch
done = launch.run(["--version"])
app = launch.start(["--version"], warm=launch.APP, stdin=os.open(os.devnull, os.O_RDONLY),
                   stdout=os.open(os.devnull, os.O_WRONLY))
print(done.returncode, app.wait(30), type(launch._server(launch.WARM)).__name__,
      type(launch._server(launch.APP)).__name__)
"""


def _worker(folder: str) -> list[str]:
    """What one process of the run (as a test worker would) says after a headless run and an app run."""
    done = subprocess.run([sys.executable, "-c", WORKER], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={**os.environ, launch.SHARED_ENV: folder})
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def _children(pid: int) -> list[int]:
    return [int(n) for n in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def test_two_workers_fork_from_the_runs_one_server_and_share_the_front_ends_server() -> None:
    server, folder = launch.share()
    try:
        first, second = _worker(folder), _worker(folder)
        assert first == second == ["0", "0", "_Shared", "_Shared"]
        app = int(Path(folder, launch._Shared.name(launch.APP) + ".pid").read_text())
        assert _children(server.pid) == [app]  # one app server, forked from the run's; the runs have ended
        assert int(Path(folder, "s.pid").read_text()) == server.pid
    finally:
        assert server.stdin is not None
        server.stdin.close()
        assert server.wait(10) == 0  # its standard input closed: it ends, and the app server with it
        shutil.rmtree(folder)
    assert waited(lambda: not Path(f"/proc/{app}").exists() or "zombie" in Path(f"/proc/{app}/status").read_text())


def test_a_worker_whose_runs_server_has_gone_starts_its_own() -> None:
    server, folder = launch.share()
    try:
        server.kill()
        server.wait()
        said = _worker(folder)
        assert said == ["0", "0", "_Server", "_Server"]
    finally:
        shutil.rmtree(folder)


LOOKS = """
import json, os, signal, sys
line = sys.stdin.readline()
sys.stdout.write(json.dumps({"argv": sys.argv, "path0": sys.path[0], "cwd": os.getcwd(), "name": __name__,
                             "mark": os.environ.get("MARK"), "line": line, "int": str(signal.getsignal(signal.SIGINT)),
                             "term": str(signal.getsignal(signal.SIGTERM)), "ppid_is_xdists": os.getppid() == PARENT,
                             "warm": "rhapsody.frontends.app.app" in sys.modules}) + "\\n")  # no flush: -u writes through
sys.exit(int(line))
"""


def _as_xdist_starts_it(prefix: list[str], cwd: Path, folder: str | None) -> tuple[int, dict[str, object]]:
    """What `PREFIX -u -c LOOKS` says of itself, started on pipes as xdist's popen gateway starts a worker."""
    env = {**os.environ, "MARK": "m1"}
    env.pop(launch.SHARED_ENV, None)
    if folder is not None:
        env[launch.SHARED_ENV] = folder
    code = LOOKS.replace("PARENT", str(os.getpid()))
    proc = subprocess.Popen([*prefix, "-u", "-c", code], cwd=cwd, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate("3\n", timeout=60)
    return proc.returncode, json.loads(out)


def test_a_whole_suite_runs_workers_are_forked_warm_and_look_as_a_fresh_interpreter_would(tmp_path: Path) -> None:
    server, folder = launch.share()
    client = shlex.split(launch.worker_spec().removeprefix("popen//python="))
    try:
        fresh_status, fresh = _as_xdist_starts_it([sys.executable], tmp_path, None)
        forked_status, forked = _as_xdist_starts_it(client, tmp_path, folder)
        assert Path(folder, launch._Shared.name(launch.WORKER) + ".pid").exists()  # the worker server was forked
        alone_status, alone = _as_xdist_starts_it(client, tmp_path, None)  # no run's server: a fresh interpreter
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(10)
        shutil.rmtree(folder)
    assert fresh_status == forked_status == alone_status == 3
    assert fresh["warm"] is alone["warm"] is False and forked["warm"] is True
    assert fresh["ppid_is_xdists"] is True and forked["ppid_is_xdists"] is False  # its parent is the server
    for said in (forked, alone):
        assert {k: v for k, v in said.items() if k not in ("warm", "ppid_is_xdists")} == \
               {k: v for k, v in fresh.items() if k not in ("warm", "ppid_is_xdists")}
    assert fresh["argv"] == ["-c"] and fresh["path0"] == "" and fresh["cwd"] == str(tmp_path)


def test_every_test_module_a_worker_holds_has_its_asserts_rewritten() -> None:
    """A whole run's workers find the test modules imported by the server they are forked from (`_tests_ahead`):
    each must be the one pytest's import hook would have made, its asserts rewritten to say what differed."""
    held = {name: module for name, module in sys.modules.items()
            if name.startswith("tests.") and name.rpartition(".")[2].startswith(("test_", "conftest"))}
    assert "tests.test_launch" in held and "tests.conftest" in held
    assert [name for name, module in held.items() if "@pytest_ar" not in vars(module)] == []
