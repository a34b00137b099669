"""The run's temporary folder (tests/memory_tmp.py): chosen once, inherited by every process, never another user's."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests import memory_tmp


def test_the_workers_and_what_they_start_use_the_folder_the_run_chose(tmp_path: Path) -> None:
    folder = memory_tmp.chosen()
    child = subprocess.run([sys.executable, "-c", "import tempfile; print(tempfile.gettempdir())"],
                           capture_output=True, text=True, check=True).stdout.strip()
    if folder is None:  # RHAPSODY_TEST_TMP=disk, a TMPDIR of the user's, or no memory file system to spare
        assert not str(tmp_path).startswith(str(memory_tmp.MEMORY / "rhapsody-tests-"))
        return
    assert tmp_path.is_relative_to(folder) and Path(tempfile.gettempdir()) == folder and Path(child) == folder


def test_a_folder_that_is_not_this_users_own_is_not_used(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")  # a link planted where the folder would be
    (tmp_path / "open").mkdir(mode=0o755)
    os.chmod(tmp_path / "open", 0o777)  # a folder others can write into
    assert memory_tmp._own_folder(tmp_path / "link") is None
    assert memory_tmp._own_folder(tmp_path / "open") is None
    assert memory_tmp._own_folder(tmp_path / "made") == tmp_path / "made"  # made for this user, 0700
    assert (os.lstat(tmp_path / "made").st_mode & 0o777) == 0o700


def test_only_a_tmpfs_mount_point_counts_as_memory(tmp_path: Path) -> None:
    assert not memory_tmp._memory(tmp_path)  # a folder, not a mount point
    assert not memory_tmp._memory(tmp_path / "missing")


def test_a_folder_named_that_cannot_be_used_is_one_line_and_a_failed_run(tmp_path: Path) -> None:
    env = {**os.environ, memory_tmp.ENV: str(tmp_path / "missing")}
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p", "no:randomly",
                          "tests/test_memory_tmp.py"], capture_output=True, text=True, env=env,
                         cwd=Path(__file__).parent.parent)
    said = (run.stdout + run.stderr).strip().splitlines()
    assert run.returncode == 4 and "Traceback" not in run.stderr, run.stderr
    assert [line for line in said if "RHAPSODY_TEST_TMP=" in line] == [
        f"ERROR: RHAPSODY_TEST_TMP={tmp_path / 'missing'}: not a folder this user can write (or 'disk' for TMPDIR's)"]
