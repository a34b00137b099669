"""Every git call rhapsody makes, hardened: the tool the agent uses, harness facts, memory, the demo.

A cloned repository is untrusted input, and git runs programs its config names: the
fsmonitor hook, hooks, the pager, external diff and textconv drivers, clean/smudge/process
filters, gpg, credential helpers. Every call here overrides those with `-c` (and the
environment: no system config, `cat` as pager, no prompts, no optional locks), filter and
diff drivers found in the repository's config by name. The agent's `git` tool runs in the
read-only sandbox as well. A repository that reaches outside the project (`tools/gitscope.py`)
is refused before any call; pathspecs are literal (`:/` and other magic are inert) and the
tool's path must resolve inside the root; the tool's output leaves out the files a
`read_file` would refuse. The only module that imports `git` (gitpython).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import subprocess
import time
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field

from rhapsody.core.access.credentials import is_credential, locations
from rhapsody.core.access.permissions import PROTECTED_READS, SANDBOXED, Confinement, Mode, SandboxSetting
from rhapsody.core.toolbox.protocol import Tool, ToolContext, ToolFailure, ToolOutcome
from rhapsody.prompts import load
from rhapsody.tools import gitscope
from rhapsody.sandbox import lifeline, procs, bwrap as sandbox
from rhapsody.tools.paths import confine
from rhapsody.sandbox.bwrap import scrubbed_env
from rhapsody.tools.search import readable_hidden

STATIC = (
    ("core.fsmonitor", "false"), ("core.hooksPath", "/dev/null"), ("core.pager", "cat"), ("pager.log", "false"),
    ("pager.diff", "false"), ("pager.status", "false"), ("diff.external", ""), ("core.editor", "true"),
    ("sequence.editor", "true"), ("commit.gpgSign", "false"), ("tag.gpgSign", "false"), ("log.showSignature", "false"),
    ("credential.helper", ""), ("protocol.allow", "never"), ("core.sshCommand", "false"), ("core.askPass", ""),
    ("core.alternateRefsCommand", ""), ("gc.auto", "0"), ("maintenance.auto", "false"), ("core.untrackedCache", "false"),
    ("status.submoduleSummary", "false"), ("diff.submodule", "short"), ("submodule.recurse", "false"),
    ("diff.ignoreSubmodules", "all"), ("fetch.recurseSubmodules", "false"), ("push.recurseSubmodules", "no"),
    ("safe.bareRepository", "explicit"), ("core.logAllRefUpdates", "false"), ("rerere.enabled", "false"),
    *((f"protocol.{name}.allow", "never") for name in ("file", "ext", "fd", "git", "ssh", "http", "https")),
)
"""Overrides applied to every git call (highest precedence, like `git -c`). A protocol the repository allows by
name outranks `protocol.allow`, so each is named (a partial clone fetches a missing object through its remote,
whose `uploadpack` is a command); no reflog is written (a `logs/HEAD` linked to a shell's start-up file would get a
line holding the repository's `user.name`); no recorded resolution is replayed (an `rr-cache/` the repository ships
turns rerere on, and its files, linked outside, would be written and read through by a commit)."""
_DRIVER = re.compile(r"^(filter|diff|merge)\.(.+)\.(clean|smudge|process|textconv|command|driver|required|cachetextconv)$",
                     re.IGNORECASE)
_PROTOCOL = re.compile(r"^protocol\.(.+)\.allow$", re.IGNORECASE)
_NO_PROGRAMS = ("--no-ext-diff", "--no-textconv")
_NO_NESTED = "--ignore-submodules=all"
"""A nested repository's own config (fsmonitor, filters) would run were git to look inside it."""
TIMEOUT = 30.0


def overrides(root: Path, found: gitscope.Verdict) -> list[tuple[str, str]]:
    """STATIC plus every filter, diff or merge driver the config names, disabled: the names the repository check
    listed in this call where it ran (`gitscope.Findings`), else listed now."""
    names = found.names
    if names is None:
        try:
            listed = lifeline.run(["git", "config", "--list", "--name-only", "-z"], cwd=root, env=_base_env(),
                                  stdin=subprocess.DEVNULL, capture_output=True, timeout=TIMEOUT).stdout
        except (OSError, subprocess.TimeoutExpired):
            listed = b""
        names = tuple(listed.decode("utf-8", errors="surrogateescape").split("\0"))  # a name as git wrote it
    drivers: list[tuple[str, str]] = []
    for name in names:
        match = _DRIVER.match(name.strip())
        if match:
            drivers.append((name.strip(), "false" if match.group(3).lower() in ("required", "cachetextconv") else ""))
        elif _PROTOCOL.match(name.strip()):
            drivers.append((name.strip(), "never"))
    return [*STATIC, *dict.fromkeys(drivers)]


def _base_env(literal: bool = True) -> dict[str, str]:
    env = {k: v for k, v in scrubbed_env().items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_PAGER="cat", PAGER="cat", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0",
               GIT_NO_LAZY_FETCH="1",
               GIT_NO_REPLACE_OBJECTS="1", GIT_ASKPASS="", SSH_ASKPASS="", GIT_EDITOR="true", GIT_SEQUENCE_EDITOR="true")
    if literal:
        env["GIT_LITERAL_PATHSPECS"] = "1"
    return env


def hardened_env(pairs: list[tuple[str, str]], literal: bool = True) -> dict[str, str]:
    """The environment for git: the base plus `pairs` as GIT_CONFIG_COUNT/KEY/VALUE (git >= 2.31); pathspecs
    literal unless the caller marks each one itself (the tool's exclusions need magic)."""
    env = _base_env(literal)
    env["GIT_CONFIG_COUNT"] = str(len(pairs))
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def git_argv(pairs: list[tuple[str, str]], *args: str) -> list[str]:
    """`git` with every override as `-c` (git before 2.31 ignores the environment form), but for a name holding `=`:
    `-c` splits at the first one, so `filter.x.clean=CMD.clean=` would set `filter.x.clean` to CMD. Such a name
    goes in the environment form alone (`hardened_env`; the check refuses one in the repository's own config)."""
    argv = ["git", "--no-pager"]
    for key, value in pairs:
        if "=" not in key:
            argv += ["-c", f"{key}={value}"]
    return [*argv, *args]


def run_git(root: Path, *args: str, check: bool = True, pairs: list[tuple[str, str]] | None = None,
            verdicts: gitscope.Verdicts | None = None) -> str:
    """Run one hardened git command in `root` on rhapsody's own account; stdout, or '' when it fails and not check.
    A repository that reaches outside the project is refused (GitError with the reason when check)."""
    found = checked(root, verdicts)
    if found.verdict is not None:
        if check:
            raise GitError(found.verdict)
        return ""
    return _git(root, *args, check=check, pairs=overrides(root, found) if pairs is None else pairs)


VERDICTS = gitscope.Verdicts()
"""The repository checks of this process, each bound to the stamps of what it read (tools/gitscope.py)."""


def checked(root: Path, verdicts: gitscope.Verdicts | None = None) -> gitscope.Verdict:
    """The repository check for `root`, with what it found: kept while nothing it read has changed, else run now."""
    key = root.resolve()
    return (verdicts or VERDICTS).found(key, lambda *args: _git(key, *args, check=False, pairs=list(STATIC)))


def refusal(root: Path, verdicts: gitscope.Verdicts | None = None) -> str | None:
    """Why the repository git finds for `root` must not be used (one line), None when it is the project's own.
    The whole check runs again whenever anything it read has changed since it last ran."""
    return checked(root, verdicts).verdict


def _git(root: Path, *args: str, check: bool = True, pairs: list[tuple[str, str]]) -> str:
    try:
        done = lifeline.run(git_argv(pairs, *args), cwd=root, env=hardened_env(pairs), stdin=subprocess.DEVNULL,
                            capture_output=True, timeout=TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git {args[0]}: {exc}") from None
    if done.returncode != 0 and check:
        lines = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
        raise GitError(lines[-1] if lines else f"git {args[0]} failed")
    return done.stdout.decode("utf-8", errors="replace") if done.returncode == 0 else ""


class GitError(Exception):
    """A git command failed (not a repository, bad revision...)."""


def repo_root(root: Path) -> Path | None:
    """The working tree that holds `root`, or None (also for a refused repository): what the check found."""
    return checked(root).top


_LINKS: dict[Path, tuple[tuple[gitscope.Stamp, ...], list[str]]] = {}
"""Each root's submodule paths, with the stamps (the check's and the index file's) they were read under."""


def gitlinks(root: Path, verdicts: gitscope.Verdicts | None = None) -> list[str]:
    """Paths the index records as submodules (mode 160000): where a user's `git status` recurses. Listed again
    only when the repository check's stamps or the index file's changed since (a large index lists slowly)."""
    verdicts = verdicts or VERDICTS
    key = root.resolve()
    found = checked(key, verdicts)
    index = _index_file(found)
    if found.verdict is not None or index is None:
        return []  # refused, or no repository
    before = gitscope.stamps((index,))
    known = _LINKS.get(key)
    if known is not None and known[0] == (*found.stamps, *before):
        return list(known[1])
    started = time.time_ns()
    try:
        listed = _git(key, "ls-files", "--stage", "-z", check=False, pairs=list(STATIC))
    except GitError:
        return []
    links = [entry.split("\t", 1)[1] for entry in listed.split("\0") if entry.startswith("160000 ") and "\t" in entry]
    if verdicts.kept(key) is found and gitscope.stamps((index,)) == before and verdicts.settled(before, started):
        _LINKS[key] = ((*found.stamps, *before), links)
    return links


def _index_file(found: gitscope.Verdict) -> Path | None:
    """The index file of the repository the check found (the git directory's, a worktree's own), None for none."""
    heads = [p for p in found.paths if p.name == "HEAD"]
    return heads[0].parent / "index" if heads else None


def head_branch(root: Path) -> str:
    """The branch checked out in `root`'s own `.git` folder, read from its HEAD file (no git process, so it
    costs nothing at start-up); "" for a detached HEAD, a `.git` file or link, or no repository."""
    head = root / ".git" / "HEAD"
    try:
        if (root / ".git").is_symlink() or not (root / ".git").is_dir() or head.is_symlink():
            return ""
        text = head.read_text(encoding="utf-8", errors="replace")[:300].strip()
    except OSError:
        return ""
    name = text.removeprefix("ref: refs/heads/")
    return name if name != text and name.isprintable() else ""


def git_facts(root: Path) -> dict[str, Any]:
    """Git root, branch, HEAD and dirty files (porcelain v1 lines), measured by the harness; for a repository
    that reaches outside the project, no root and the one-line refusal."""
    found = checked(root)
    if found.verdict is not None:
        return {"git_root": None, "refused": found.verdict}
    if found.top is None:
        return {"git_root": None}
    status = _git(root, "status", "--porcelain=v2", "--branch", _NO_NESTED, check=False, pairs=overrides(root, found))
    branch, head, dirty = "(detached)", "(no commits)", []
    for line in status.splitlines():
        if line.startswith("# branch.head ") and line[14:] != "(detached)":
            branch = line[14:]
        elif line.startswith("# branch.oid ") and line[13:] != "(initial)":
            head = line[13:25]
        elif not line.startswith("#"):
            dirty.append(_porcelain_v1(line))
    return {"git_root": str(found.top), "branch": branch, "head": head, "dirty": dirty}


def _porcelain_v1(line: str) -> str:
    """A porcelain v2 entry in the v1 shape (`XY path`)."""
    kind, _, rest = line.partition(" ")
    if kind in ("?", "!"):
        return f"{kind}{kind} {rest}"
    fields = rest.split(" ", {"1": 7, "2": 8, "u": 9}.get(kind, 7))
    xy = fields[0].replace(".", " ")
    path = fields[-1].split("\t")[0]
    return f"{xy} {path}"


def git_blob(data: bytes) -> str:
    """The git blob id of `data` (what `git hash-object` prints), computed without git."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def commit_paths(root: Path, path: Path | str, message: str) -> str | None:
    """Commit changes under `path` alone (hooks never run); the commit id, None when nothing changed or no repo."""
    if repo_root(root) is None:
        return None
    target = str(root / path)
    run_git(root, "add", "--all", "--", target)
    if not run_git(root, "diff", "--cached", "--name-only", *_NO_PROGRAMS, _NO_NESTED, "--", target).strip():
        return None
    run_git(root, "commit", "--no-verify", "-q", "-m", message, "--", target)
    return run_git(root, "rev-parse", "HEAD").strip()


def last_commit_time(root: Path, file: Path) -> float | None:
    """Unix time of the last commit touching `file`, None when never committed or no repo."""
    stamp = run_git(root, "log", "-1", "--format=%ct", *_NO_PROGRAMS, "--", str(file), check=False).strip()
    return float(stamp) if stamp else None


def path_sizes(root: Path, path: str, limit: int) -> list[tuple[int, str, int, int]]:
    """(commit time, short id, files, bytes) of `path` at each of its last `limit` commits, oldest first."""
    log = run_git(root, "log", f"-{limit}", "--format=%H %ct", *_NO_PROGRAMS, "--", path, check=False).split("\n")
    out = []
    for line in reversed([l for l in log if l.strip()]):
        sha, stamp = line.split()
        listing = run_git(root, "ls-tree", "-r", "-l", sha, "--", path, check=False).splitlines()
        sizes = [int(parts[3]) for parts in (l.split(None, 4) for l in listing) if len(parts) >= 4 and parts[3].isdigit()]
        if sizes:
            out.append((int(stamp), sha[:10], len(sizes), sum(sizes)))
    return out


def init_repository(root: Path, files: list[str], message: str, user: tuple[str, str]) -> None:
    """Make `root` a git repository whose first commit, by `user` (name, email), holds `files`; no hooks run."""
    import git

    repo = git.Repo.init(root)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", user[0])
        cw.set_value("user", "email", user[1])
    repo.index.add(files)
    repo.index.commit(message, skip_hooks=True)


class GitInput(BaseModel):
    action: Literal["status", "diff", "log"] = Field(description="status, diff (working tree vs HEAD) or log.")
    path: str | None = Field(None, description="Limit diff or log to this path.")
    limit: int = Field(20, ge=1, le=500, description="Commits shown by log.")


class Git(Tool):
    """Read the repository's status, diff and log."""

    name: ClassVar[str] = "git"
    description: ClassVar[str] = load("tools/git")
    Input: ClassVar[type[BaseModel]] = GitInput
    writes: ClassVar[bool] = False
    reads_files: ClassVar[bool] = True

    def __init__(self, setting: SandboxSetting = "workspace-write") -> None:
        self.setting = setting

    def path_of(self, args: GitInput) -> str | None:
        """The path a diff or log is limited to."""
        return args.path

    def confinement(self, permission_mode: Mode) -> Confinement:
        """git only reads: the read-only sandbox whenever there is one."""
        if self.setting == "off":
            return "off"
        return "read-only" if sandbox.bwrap_path() else "unavailable"

    async def run(self, args: GitInput, ctx: ToolContext) -> ToolOutcome:
        found = await asyncio.to_thread(checked, ctx.root)
        if found.verdict is not None:
            raise ToolFailure(found.verdict)
        pathspec = _literal(ctx.root, args.path, ctx.protected)
        pairs = await asyncio.to_thread(overrides, ctx.root, found)
        has_head = args.action != "diff" or bool(await asyncio.to_thread(
            _git, ctx.root, "rev-parse", "-q", "--verify", "HEAD", check=False, pairs=pairs))
        argv = git_argv(pairs, *_tool_args(args, has_head, pathspec), *_hidden_pathspecs(ctx.read_deny),
                        *_credential_pathspecs(ctx.root, ctx.protected))
        fds: tuple[int, ...] = ()
        if ctx.confinement in SANDBOXED:
            argv, fds = sandbox.wrap(argv, ctx.root, "read-only", protected=ctx.protected)
        done = await procs.run(argv, str(ctx.root), hardened_env(pairs, literal=False), TIMEOUT, ctx.output_cap, fds)
        text = hide_protected(done.output.strip(), args.action, ctx.read_deny, ctx.root, ctx.protected)
        if done.exit_code != 0:
            if "not a git repository" in text:
                raise ToolFailure(f"{ctx.root} is not inside a git repository")
            if args.action == "log" and "does not have any commits" in text:
                return ToolOutcome("(no commits yet)")
            raise ToolFailure(f"git {args.action} failed: {text[-2000:]}")
        return ToolOutcome(text or {"status": "(clean)", "diff": "(no changes)", "log": "(no commits yet)"}[args.action])


def _hidden_pathspecs(read_deny: tuple[str, ...]) -> list[str]:
    """Exclusions for secret-looking files and read deny rules: a diff would print their contents."""
    secret = [f":(exclude,icase,glob)**/{pattern}" for pattern in PROTECTED_READS]
    denied = [f":(exclude,glob){pattern.removeprefix('./')}" for pattern in read_deny]
    return [*secret, ":(exclude,icase,glob).rhapsody/**", *denied]


def _credential_pathspecs(root: Path, protected: tuple[str, ...]) -> list[str]:
    """Exclusions for credential locations inside the root (a project at the home folder, a dotfiles repository)."""
    base = root.resolve()
    inside = [p for p in locations(protected) if base in p.parents]
    return [f":(exclude,literal){p.relative_to(base).as_posix()}" for p in inside]


def _literal(root: Path, given: str | None, protected: tuple[str, ...]) -> str:
    """The tool's path as one literal pathspec, relative to the root it must resolve inside (`:/`, `:(glob)`
    and other magic name a file of that name, nothing more)."""
    target = confine(root, given or ".", protected)
    return ":(literal)" + (target.relative_to(root.resolve()).as_posix() or ".")


_DIFF_HEAD = re.compile(r"^diff --git ", re.MULTILINE)


def hide_protected(text: str, action: str, read_deny: tuple[str, ...], root: Path | None = None,
                   protected: tuple[str, ...] = ()) -> str:
    """`text` without the diff sections or status lines of files `read_file` would refuse (secret-looking,
    rhapsody's state, read deny rules, credential locations under `root`): a second net under the pathspec
    exclusions. (The tool's paths are relative to the root: status by default, diff by `--relative`.)"""
    def hidden(names: str) -> bool:
        return _names_hidden(names, read_deny, root, protected)

    if action == "status":
        return "\n".join(line for line in text.splitlines() if not hidden(line[3:]))
    if action != "diff":
        return text
    starts = [m.start() for m in _DIFF_HEAD.finditer(text)]
    pieces = [text[a:b] for a, b in zip([0, *starts], [*starts, len(text)])]
    kept = [p for p in pieces if not (p.startswith("diff --git ") and hidden(p.split("\n", 1)[0][11:]))]
    left_out = len(pieces) - len(kept)
    note = f"\n[{left_out} file(s) not shown: they may hold secrets, or a read rule hides them]" if left_out else ""
    return "".join(kept).rstrip("\n") + note


def _names_hidden(names: str, read_deny: tuple[str, ...], root: Path | None, protected: tuple[str, ...]) -> bool:
    """Whether any path a diff header or status line may name is hidden (every split is tried: a path can
    hold ` b/` or ` -> `, and git quotes unusual names)."""
    candidates = {names, names.strip('"')}
    for sep in (" b/", '" "b/', " -> "):
        for i in [m.start() for m in re.finditer(re.escape(sep), names)]:
            candidates.update({names[:i], names[i + len(sep):]})
    paths = {c.strip('"').removeprefix("a/").removeprefix("b/") for c in candidates}
    return any(p and (readable_hidden(p, read_deny) or (root is not None and is_credential(root / p, protected)))
               for p in paths)


def _tool_args(args: GitInput, has_head: bool, pathspec: str) -> list[str]:
    paths = ["--", pathspec]
    if args.action == "status":
        return ["status", "--short", "--branch", _NO_NESTED, *paths]
    if args.action == "diff":
        return ["diff", "--relative", *_NO_PROGRAMS, _NO_NESTED, *(["HEAD"] if has_head else []), *paths]
    return ["log", f"-{args.limit}", "--oneline", "--decorate", *_NO_PROGRAMS, *paths]
