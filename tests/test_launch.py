"""The suite's fork servers (tests/launch.py): the workers of a run share the one its controller started."""

from __future__ import annotations

import os
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
