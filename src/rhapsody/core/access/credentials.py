"""Where credentials live outside any project: the protected reads of every tool, sandbox on or off.

One list (`HOME_CREDENTIALS`, under the home folder and `$XDG_CONFIG_HOME`) plus the user's
own `protected_paths` setting. A path is protected when it, or a folder above it, is one of
these locations, compared both as written and with every symbolic link resolved on each
side (a link into `~/.aws`, or `~/.aws` itself a link to elsewhere). File tools refuse to
read or write them, search and listing leave them out, git output hides them, files
rhapsody reads on its own account skip them, and the sandbox mounts them empty
(`sandbox/bwrap.py`).

Imports: stdlib only.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

HOME_CREDENTIALS = (
    ".ssh", ".aws", ".gnupg", ".azure", ".kube", ".docker", ".config/gcloud", ".config/gh",
    ".config/rhapsody", ".netrc", ".git-credentials", ".npmrc", ".pypirc", ".pgpass", ".password-store",
    ".local/share/keyrings", ".config/anthropic", ".anthropic",
    # shell and REPL histories (tokens typed on a command line), other tools' credentials
    ".bash_history", ".zsh_history", ".zhistory", ".histfile", ".local/share/fish", ".python_history",
    ".psql_history", ".mysql_history", ".sqlite_history", ".node_repl_history", ".lesshst", ".viminfo",
    ".vault-token", ".cargo/credentials", ".cargo/credentials.toml", ".config/hub", ".config/glab-cli",
    ".terraform.d", ".m2/settings.xml", ".gradle/gradle.properties", ".config/git/credentials",
    ".config/op", ".config/doctl", ".config/helm", ".config/heroku", ".config/netlify", ".config/vercel",
    ".config/configstore", ".config/rclone", ".config/pip", ".pip", ".gem/credentials", ".composer/auth.json",
    ".nuget", ".yarnrc", ".yarnrc.yml", ".config/yarn", ".bundle/config", ".s3cfg", ".boto", ".oci",
    ".config/openai", ".config/github-copilot", ".mozilla", ".config/google-chrome", ".config/chromium",
    ".config/BraveSoftware", ".Xauthority", ".ICEauthority", ".config/Code/User/globalStorage",
    ".claude", ".claude.json", ".codex", ".config/gemini", ".gemini")
"""Paths under $HOME that hold credentials (folders count with everything in them)."""


def locations(extra: tuple[str, ...] = ()) -> list[Path]:
    """Every protected location as written: the home list (and its `$XDG_CONFIG_HOME` twins) and `extra`."""
    home = Path(os.path.expanduser("~"))
    paths = [home / rel for rel in HOME_CREDENTIALS]
    xdg = os.environ.get("XDG_CONFIG_HOME")
    if xdg:  # the user config (and other tools' credentials) live here instead of ~/.config
        paths += [Path(xdg) / rel.removeprefix(".config/") for rel in HOME_CREDENTIALS if rel.startswith(".config/")]
    return paths + [Path(os.path.expanduser(p)) for p in extra if os.path.isabs(os.path.expanduser(p))]


def is_credential(path: Path, extra: tuple[str, ...] = (), resolved: bool = False) -> bool:
    """Whether `path` (absolute), as written or resolved, is or lies inside a protected location
    (`resolved`: the caller knows no link is on the way, as in a walk that follows none)."""
    guarded = known(extra)
    real = path if resolved else path.resolve()
    return any(str(p) in guarded for p in (path, *path.parents, real, *real.parents))


def known(extra: tuple[str, ...] = ()) -> frozenset[str]:
    """Every protected location, as written and resolved: a walk that prunes these never enters one."""
    return _known(extra, os.path.expanduser("~"), os.environ.get("XDG_CONFIG_HOME", ""))


def absolute(root: Path, entries: list[str]) -> tuple[str, ...]:
    """The `protected_paths` setting made absolute: `~` expanded, relative entries under the project root."""
    return tuple(str((root / os.path.expanduser(entry)).resolve()) for entry in entries)


@functools.lru_cache(maxsize=16)
def _known(extra: tuple[str, ...], home: str, xdg: str) -> frozenset[str]:
    """The locations as written and resolved (keyed by the environment they were read from)."""
    listed = [str(p) for p in locations(extra)]
    return frozenset([*listed, *_resolved(listed)])


def _resolved(paths: list[str]) -> list[str]:
    """Each path as `os.path.realpath` gives it, the folders they share resolved once: a path whose last part is
    no link (or missing) is that part in its resolved folder; a link is resolved whole."""
    folders: dict[str, str] = {}
    out = []
    for path in paths:
        folder, name = os.path.split(path)
        if name in ("", ".", ".."):
            out.append(os.path.realpath(path))
            continue
        if folder not in folders:
            folders[folder] = os.path.realpath(folder)
        candidate = os.path.join(folders[folder], name)
        out.append(os.path.realpath(candidate) if os.path.islink(candidate) else candidate)
    return out
