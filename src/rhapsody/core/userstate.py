"""Where rhapsody keeps the state it later trusts as its own: in the user's state folder, never the project.

A project's `.rhapsody/` arrives with a clone or an archive, so nothing rhapsody reads back
as its own (the checkpoint repository, its index and lock; recall indexes) may live there:
a cloned project could plant it. It lives under `$XDG_STATE_HOME/rhapsody/` (else
`~/.local/state/rhapsody/`): `projects/NAME-KEY/` per project, named after the resolved
project root and keyed by a hash of it (a `root` file in it names the root for a person
looking; a project that moves gets a fresh folder), and `recall/` for the indexes of
history files, keyed the same way by the history's resolved path.

Stdlib only.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from rhapsody.core.session.history import private_dir, write_private

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def state_home() -> Path:
    """rhapsody's folder in the user's state folder (`$XDG_STATE_HOME` when absolute, as the spec says)."""
    base = os.environ.get("XDG_STATE_HOME", "")
    folder = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"
    return folder / "rhapsody"


def project_state_path(root: Path) -> Path:
    """The project's folder in the user's state folder (not created): readable name, then a key of the resolved root."""
    resolved = root.resolve()
    key = hashlib.sha256(os.fsencode(resolved)).hexdigest()[:20]
    name = _UNSAFE.sub("_", resolved.name)[:40].strip("._") or "root"
    return state_home() / "projects" / f"{name}-{key}"


def project_state(root: Path) -> Path:
    """The same folder, created 0700 with its `root` file (StorageError with one line when it cannot be)."""
    folder = private_dir(project_state_path(root))
    note = folder / "root"
    if not os.path.lexists(note):
        write_private(note, f"{root.resolve()}\n")
    return folder


def keyed_path(folder: str, path: Path, suffix: str) -> Path:
    """A file of rhapsody's state folder standing for `path` (not created): `folder/STEM-KEY{suffix}`."""
    resolved = path.resolve()
    key = hashlib.sha256(os.fsencode(resolved)).hexdigest()[:20]
    return state_home() / folder / f"{_UNSAFE.sub('_', resolved.stem)[:60]}-{key}{suffix}"
