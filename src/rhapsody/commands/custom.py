"""Custom slash commands: Markdown prompt files, in rhapsody's folders and in Claude Code's format.

Where they are read from, the user's own first (one of theirs wins over a project's of the same name):

    ~/.config/rhapsody/commands/   ~/.claude/commands/          the user's (any project)
    .rhapsody/commands/            .claude/commands/            the project's

`review.md` is `/review`; a subfolder makes a namespace, `frontend/component.md` is
`/frontend:component` (as Claude Code names them). The file is the prompt: `$ARGUMENTS` is
what follows the name, `$1`, `$2`… its words (quotes group them); without a placeholder the
arguments follow the prompt on a line of their own. Front matter between `---` lines may say
`description` and `argument-hint`, shown in completion, the palette and /help.

A command is prompt text, nothing more: sending it is the human sending that text. It
never widens a permission: `allowed-tools` (and any other key that would grant something)
is not applied; from a project not yet trusted, the human is told so when the command runs.
Nothing in the file is executed. A name never shadows a built-in command.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from rhapsody.config.files import user_config_path
from rhapsody.core.own_files import own_files, read_own
from rhapsody.view.sink import visible

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*(:[A-Za-z0-9][A-Za-z0-9_.\-]*)*$")
GRANTING = ("allowed-tools", "allowed_tools", "tools", "permissions", "permission-mode")
"""Front matter keys that would grant something in other agents; rhapsody never applies them."""
MAX_COMMANDS = 500
MAX_BYTES = 64_000


@dataclass(frozen=True)
class CustomCommand:
    """One prompt file as a slash command."""

    name: str
    """`/review`, `/frontend:component`."""
    prompt: str
    description: str
    argument_hint: str
    origin: str
    """"user" or "project"."""
    path: Path
    granting: tuple[str, ...] = ()
    """Front matter keys present that would grant a permission elsewhere (never applied here)."""

    def help_line(self) -> str:
        """`/name [hint]  description (project)`, as /help lists it."""
        head = f"{self.name} {self.argument_hint}".rstrip()
        return f"{head:<12}  {self.description or '(no description)'} ({self.origin}: {visible(self.path.name)})"

    def expand(self, arguments: str) -> str:
        """The prompt with `$ARGUMENTS` and `$1`… filled in from what followed the command's name."""
        try:
            words = shlex.split(arguments)
        except ValueError:  # an unclosed quote: plain words
            words = arguments.split()
        used = "$ARGUMENTS" in self.prompt or re.search(r"\$\d", self.prompt) is not None
        text = re.sub(r"\$(\d+)", lambda m: _word(words, int(m.group(1))), self.prompt.replace("$ARGUMENTS", arguments))
        return text if used or not arguments else f"{text.rstrip()}\n\n{arguments}"


def _word(words: list[str], n: int) -> str:
    return words[n - 1] if 0 < n <= len(words) else ""


def folders(root: Path) -> list[tuple[str, Path, Path]]:
    """(origin, the folder the files must lie in, the commands folder), the user's first."""
    config = user_config_path().parent
    home = Path.home()
    return [("user", config, config / "commands"), ("user", home / ".claude", home / ".claude" / "commands"),
            ("project", root, root / ".rhapsody" / "commands"), ("project", root, root / ".claude" / "commands")]


def load(root: Path, builtin: tuple[str, ...] = ()) -> tuple[dict[str, CustomCommand], list[str]]:
    """Every custom command of the project and the user, by name, and a line for each file set aside."""
    found: dict[str, CustomCommand] = {}
    notes: list[str] = []
    for origin, base, folder in folders(root):
        for path in own_files(base, folder, "**/*.md")[:MAX_COMMANDS]:
            name = "/" + ":".join(path.relative_to(folder).with_suffix("").parts)
            if name in builtin:
                notes.append(visible(f"{path}: not a command, {name} is built in"))
            elif not NAME.match(name[1:]):
                notes.append(visible(f"{path}: not a command name (letters, digits, . _ - only)"))
            elif name not in found:
                text = read_own(base, path, MAX_BYTES)
                if text is not None:
                    found[name] = parse(name, text, origin, path)
    return found, notes


def parse(name: str, text: str, origin: str, path: Path) -> CustomCommand:
    """A prompt file: optional front matter (`key: value` lines between `---`), then the prompt."""
    meta: dict[str, str] = {}
    body = text
    lines = text.splitlines(keepends=True)
    if lines and lines[0].strip() == "---":
        end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
        if end is not None:
            meta = dict(_field(line) for line in lines[1:end] if ":" in line)
            body = "".join(lines[end + 1:])
    granting = tuple(k for k in GRANTING if k in meta)
    # What completion, the palette and /help show is made safe here, once: a project chose it.
    return CustomCommand(name, body.strip("\n"), _shown(meta.get("description", "")),
                         _shown(meta.get("argument-hint", "")), origin, path, granting)


def _shown(value: str) -> str:
    """A front matter value as it is shown: one line, every control and format character escaped."""
    return visible(value).replace("\n", " ").replace("\t", " ")


def _field(line: str) -> tuple[str, str]:
    key, _, value = line.partition(":")
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    return key.strip().lower(), value


def granting_notice(command: CustomCommand, root: Path) -> str:
    """What the human is told when a command's file asks for permissions: never applied; '' when it asks none."""
    if not command.granting:
        return ""
    keys = ", ".join(command.granting)
    if command.origin == "project" and not _trusted(root):
        return (f"{command.name}: {keys} in {visible(command.path.name)} ignored: this project is not trusted, and its "
                "commands are prompt text only")
    return (f"{command.name}: {keys} in {visible(command.path.name)} not applied: a command is prompt text; permissions "
            "come from the allow rules in your config")


def _trusted(root: Path) -> bool:
    from rhapsody.config.settings import is_trusted
    from rhapsody.core.errors import ConfigError

    try:
        return is_trusted(root)
    except ConfigError:
        return False
