"""A real parse of a bash command line (tree-sitter-bash), for allow and deny rules.

`parse` returns the simple commands of a command line, each as its words with quotes
and backslashes removed, and an `opaque` reason when the line is outside the small grammar
rules may judge. The grammar is positive: a command line is simple commands joined by `|`,
`|&`, `&&`, `||`, `;` or a newline; a simple command is words, and redirections only to a
file descriptor (`2>&1`) or `/dev/null`-like targets; a word is a plain literal (no quote,
backslash, `$`, backtick, glob (`*?[`), brace, parenthesis, `<`, `>`, `;`, `&`, `|` or blank),
a single-quoted string, a double-quoted string with no `$`, backslash or backtick, or such
pieces written together: bash passes each word exactly as the rules read it (no variable,
glob or brace can turn into `-rf` or `--output=x`). Every node the walk meets must
be one of those, the raw text of each word is checked itself (no backtick, `$(`, `${`, `$[`,
`<(`, `>(`, `$'` or `$"` anywhere in it, whatever the parser made of it), and every byte
between the nodes must be a blank (a newline only between commands), so a construct the
parser misreads cannot hide in a word or between words. Anything else (an expansion with an
operator, any substitution, arithmetic, backgrounding, subshells, functions, control flow,
here-documents, assignments, comments, text the parser does not understand) is opaque, as
are programs that run other code (`eval`, `bash -c`, `xargs`, ...). An opaque command never
runs by an allow rule; it asks. The only module that imports `tree_sitter`.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from typing import Any

from rhapsody.core.access.permissions import ParsedCommand
from rhapsody.sandbox import lifeline

_LIST_NODES = {"program", "list", "pipeline"}
_SEPARATORS = {"&&", "||", ";", "|", "|&"}
_WORD_NODES = {"word", "string", "raw_string", "number", "concatenation"}
_PLAIN = re.compile(r"[^\s`$\\'\"()<>;&|*?\[{]+")
"""An unquoted literal word: none of bash's quoting, expansion, glob, brace, operator or blank characters."""
_SINGLE = re.compile(r"'[^']*'")
_DOUBLE = re.compile(r'"[^"$`\\]*"')
_NEVER = ("`", "$(", "${", "$[", "<(", ">(", "$'", '$"')
"""Text that never belongs to a word rules judge, however the parser split it."""
_BLANKS = re.compile(rb"[ \t]*")
_BLANK_LINES = re.compile(rb"[ \t\n]*")
_SAFE_TARGETS = {"/dev/null", "/dev/stdout", "/dev/stderr"}
SHELLS = {"bash", "sh", "dash", "zsh", "ksh", "fish", "busybox", "python", "python3", "perl", "ruby", "node", "rbash",
          "mksh", "tcsh", "csh", "pypy", "pypy3", "php", "lua", "tclsh", "deno", "bun"}
AWKS = {"awk", "gawk", "mawk", "nawk"}
_OPAQUE_NAMES = {"eval": "eval", "source": "source", ".": "source", "exec": "exec", "xargs": "xargs",
                 "env": "env", "command": "command", "builtin": "builtin", "sudo": "sudo", "nohup": "nohup",
                 "time": "time", "nice": "nice", "timeout": "timeout", "setsid": "setsid", "watch": "watch",
                 "trap": "trap", "alias": "alias", "doas": "doas", "su": "su", "stdbuf": "stdbuf",
                 "mapfile": "mapfile's callback", "readarray": "readarray's callback", "complete": "complete",
                 "compgen": "compgen", "bind": "bind", "enable": "enable", "fc": "fc", "history": "history",
                 "coproc": "coproc", "hash": "hash", "ionice": "ionice", "chroot": "chroot", "flock": "flock",
                 "strace": "strace", "ltrace": "ltrace", "unshare": "unshare", "taskset": "taskset", "chrt": "chrt",
                 "prlimit": "prlimit", "setpriv": "setpriv", "fakeroot": "fakeroot", "valgrind": "valgrind",
                 "parallel": "parallel", "firejail": "firejail", "runuser": "runuser", "pkexec": "pkexec",
                 "systemd-run": "systemd-run", "xvfb-run": "xvfb-run", "catchsegv": "catchsegv",
                 "setarch": "setarch", "linux32": "linux32", "linux64": "linux64", "run-parts": "run-parts",
                 "ssh-agent": "ssh-agent", "nsenter": "nsenter", "sg": "sg", "numactl": "numactl", "cgexec": "cgexec",
                 "dbus-run-session": "dbus-run-session", "unbuffer": "unbuffer", "chronic": "chronic",
                 "torsocks": "torsocks", "proxychains": "proxychains", "proxychains4": "proxychains4", "npx": "npx",
                 "expect": "expect"}
_EDITOR = ("-c", "--cmd", "-S", "+")
_CC = ("-wrapper", "-fplugin", "-B", "-specs", "--specs")
_SSH = ("-o", "-F", "-S", "-D")
_RUNS_ARGUMENTS = {"find": ("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"),
                   "git": ("-c", "--config-env", "--exec-path", "-C", "--output", "--output-directory", "--git-dir",
                           "--work-tree"),
                   "sort": ("-o", "--output", "--compress-program"), "sed": ("-i", "--in-place", "-f", "--file"),
                   "perl": ("-i",), "tee": ("*",), "dd": ("of",), "script": ("-c", "--command"),
                   "vim": _EDITOR, "vi": _EDITOR, "nvim": _EDITOR, "ex": _EDITOR, "view": _EDITOR, "vimdiff": _EDITOR,
                   "emacs": ("--eval", "-l", "--load", "-f", "--funcall", "--script", "-x"),
                   "gdb": ("-ex", "-x", "--command", "--eval-command"), "rsync": ("-e", "--rsh", "--rsync-path"),
                   "tar": ("--checkpoint-action", "--to-command", "--use-compress-program", "-I", "--info-script",
                           "--new-volume-script", "-F", "--rsh-command", "--rmt-command"),
                   "ssh": _SSH, "scp": _SSH, "sftp": _SSH, "man": ("-P", "--pager", "-H", "--html"),
                   "make": ("--eval", "-E", "-f", "--file", "--makefile", "-C", "--directory"),
                   "node": ("-p", "--print", "--eval", "-r", "--require", "--import", "--loader"),
                   "php": ("-r", "-B", "-R", "-E", "-F"), "deno": ("eval",), "bun": ("--eval", "-p", "--print"),
                   "zip": ("-TT", "--unzip-command"), "gcc": _CC, "cc": _CC, "g++": _CC, "c++": _CC, "clang": _CC,
                   "npm": ("exec", "x", "explore"), "rg": ("--pre",), "fd": ("-x", "--exec", "-X", "--exec-batch"),
                   "fdfind": ("-x", "--exec", "-X", "--exec-batch")}
"""Options with which a program runs another or writes a file the rule did not name (`*`: any argument; `+`: any
word starting with it). A long option matches when abbreviated too (`--checkpoint-act`, `--to-comm`): GNU getopt
and git take any unambiguous prefix."""
_GIT_RUNS = {"difftool": ("*",), "mergetool": ("*",), "filter-branch": ("*",), "bisect": ("*",), "config": ("*",),
             "send-email": ("*",), "rebase": ("-x", "--exec"), "grep": ("-O", "--open-files-in-pager"),
             "submodule": ("foreach",), "clone": ("-u", "--upload-pack", "--template", "-c", "--config"),
             "init": ("--template",), "fetch": ("--upload-pack",), "pull": ("--upload-pack",),
             "ls-remote": ("--upload-pack",), "archive": ("--exec", "-o", "--output"),
             "push": ("--receive-pack", "--exec"), "bundle": ("create",)}
"""git subcommands that run a program their arguments name (`rebase -x`, `difftool -x`, `bisect run`,
`submodule foreach`, `--upload-pack`), install hooks (`--template`), write a file the rule did not name
(`archive -o`, `bundle create`) or set what a later `git log` runs (`config core.pager`); `*`: any use."""
_GIT_VALUED = {"--git-dir", "--work-tree", "--namespace", "--super-prefix", "--attr-source"}
_EVALUATING_BUILTINS = {"test", "[", "printf", "read", "unset", "declare", "typeset", "local", "let", "export",
                        "readonly", "mapfile", "readarray", "getopts", "wait", "shopt", "set", "caller", "hash"}
"""Builtins that evaluate a name or subscript they are given (`test -v 'a[$(cmd)]'` runs cmd)."""
_SETTERS = {"read", "getopts", "let"}
"""Builtins that set a shell variable from text they decode or read: `printf -v x '%b' 'a\\x5b\\x24(cmd)\\x5d'; let x`
and `printf -v PS4 '%b' '\\x24(cmd)'; set -x; echo` run cmd with no `$(` ever written (`printf -v` too)."""

_CONSTRUCTS = {"for_statement": "a for loop", "c_style_for_statement": "a for loop",
               "while_statement": "a while or until loop", "if_statement": "an if statement",
               "case_statement": "a case statement", "function_definition": "a function definition",
               "subshell": "a subshell ( … )", "compound_statement": "a command group { … }",
               "variable_assignment": "a variable assignment", "variable_assignments": "variable assignments",
               "declaration_command": "a declaration (declare, export, local, readonly)",
               "unset_command": "unset", "test_command": "a test [[ … ]]", "negated_command": "a negated command (!)",
               "heredoc_redirect": "a here-document (<<)", "herestring_redirect": "a here-string (<<<)",
               "arithmetic_expansion": "an arithmetic expansion $(( … ))", "command_substitution": "a command substitution",
               "process_substitution": "a process substitution", "ERROR": "text the parser does not understand",
               "expansion": "a parameter expansion ${…}", "ansi_c_string": "$'…' quoting",
               "translated_string": "$\"…\" quoting", "comment": "a comment"}
"""What a construct rules cannot see through is called when a refusal names it."""


def _contains(node_type: str) -> str:
    """Why a construct makes a command opaque, in words (`it contains a for loop`)."""
    return f"it contains {_CONSTRUCTS.get(node_type) or 'a ' + node_type.replace('_', ' ')}"


@functools.cache
def _parser() -> Any:
    import tree_sitter_bash
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_bash.language()))


def parse(command: str) -> ParsedCommand:
    """The simple commands of `command` and, when it is outside the grammar rules judge, why."""
    if "\\\n" in command:  # bash joins `r\<newline>m` into rm; the parse would see two words
        return ParsedCommand((), "it continues a line with a backslash")
    try:
        source = command.encode("utf-8", errors="surrogatepass")
        tree = _parser().parse(source)
    except (ValueError, UnicodeError):
        return ParsedCommand((), "the command could not be parsed")
    commands: list[tuple[str, ...]] = []
    root = tree.root_node
    reason = _walk(root, source, commands) or _gaps(source, [root], 0, len(source), _BLANK_LINES)
    if not reason and root.has_error:
        reason = "the command could not be parsed"
    return ParsedCommand(tuple(commands), reason)


def _gaps(source: bytes, nodes: list[Any], start: int, end: int, allowed: re.Pattern[bytes]) -> str:
    """Why the text between `nodes` (from `start` to `end`) is more than blanks, or ''."""
    for node in nodes:
        if not allowed.fullmatch(source[start:node.start_byte]):
            return "it has text between its words that the parser did not read"
        start = node.end_byte
    return "" if allowed.fullmatch(source[start:end]) else "it has text between its words that the parser did not read"


def _walk(node: Any, source: bytes, out: list[tuple[str, ...]]) -> str:
    """Collect the simple commands under a list or pipeline node; the first reason it is outside the grammar, or ''."""
    if node.type in _LIST_NODES:
        for child in node.children:
            if child.type == "&":
                return "it runs something in the background (&)"
            if child.type in _SEPARATORS and _text(child) == child.type:
                continue
            reason = _walk(child, source, out)
            if reason:
                return reason
        return _gaps(source, node.children, node.start_byte, node.end_byte, _BLANK_LINES)
    if node.type == "redirected_statement":
        return _redirected(node, source, out)
    if node.type == "command":
        return _command(node, source, out)
    return _contains(node.type)


def _redirected(node: Any, source: bytes, out: list[tuple[str, ...]]) -> str:
    body = node.child_by_field_name("body")
    if body is None:
        return "it has a redirection without a command"
    for child in node.children:
        if child.id != body.id:
            reason = _redirect(child)
            if reason:
                return reason
    return _walk(body, source, out) or _gaps(source, node.children, node.start_byte, node.end_byte, _BLANKS)


def _redirect(node: Any) -> str:
    """Only to a file descriptor (`2>&1`) or a target such as /dev/null; anything else is outside the grammar."""
    if node.type != "file_redirect":
        return _contains(node.type)
    target = node.children[-1]
    ops = [_text(c) for c in node.children[:-1] if c.type != "file_descriptor"]
    if any(word in _text(node) for word in _NEVER) or len(ops) != 1 or not _PLAIN.fullmatch(_text(target)):
        return "it has a redirection rules cannot read"
    if ops[0] in (">&", "<&") and target.type == "number":
        return ""  # 2>&1: a file descriptor, not a file
    if _text(target) in _SAFE_TARGETS and ops[0] in (">", ">>", "&>", "&>>", ">|"):
        return ""
    if ops[0] == "<":
        return "it reads a file through a redirection"
    return "it redirects output to a file"


def _command(node: Any, source: bytes, out: list[tuple[str, ...]]) -> str:
    words: list[str] = []
    for child in node.children:
        if child.type == "command_name":
            child = child.children[0] if child.child_count == 1 else child
            reason = _unnamed(child)
            if reason:
                return reason
        if child.type in ("file_redirect", "herestring_redirect"):
            reason = _redirect(child)
            if reason:
                return reason
            continue
        if child.type not in _WORD_NODES:
            return _contains(child.type)
        if not _literal(child):
            return ("it has a word that is not a plain or quoted literal (a variable, a glob, a brace, a "
                    "substitution, $'…' quoting or an escape)")
        words.append(unquote(_text(child)))
    if not words:
        return "it has an empty command"
    reason = _opaque_name(words) or _gaps(source, node.children, node.start_byte, node.end_byte, _BLANKS)
    if not reason:
        out.append(tuple(words))
    return reason


def _literal(node: Any) -> bool:
    """Whether a word node is in the grammar, judged on its raw text (the parser's split only narrows it)."""
    text = _text(node)
    if any(never in text for never in _NEVER):
        return False
    if node.type in ("word", "number"):
        return _PLAIN.fullmatch(text) is not None
    if node.type == "raw_string":
        return _SINGLE.fullmatch(text) is not None
    if node.type == "string":
        return _DOUBLE.fullmatch(text) is not None
    if node.type == "concatenation":
        pieces = node.children
        return bool(pieces) and all(_literal(p) for p in pieces) and all(
            a.end_byte == b.start_byte for a, b in zip(pieces, pieces[1:])) and (
            pieces[0].start_byte, pieces[-1].end_byte) == (node.start_byte, node.end_byte)
    return False


def _unnamed(node: Any) -> str:
    """Why the program word does not name its program as written: an expansion, a glob or a brace."""
    raw = _text(node)
    if "$" in raw:  # $x, ${x}, $'…': bash builds the name when it runs
        return "its program name comes from an expansion or $'…' quoting"
    if any(c in raw for c in "*?[") or ("{" in raw and ("," in raw or ".." in raw) and "}" in raw):
        return "its program name is a glob or a brace expansion"
    return ""


def _opaque_name(words: list[str]) -> str:
    name = words[0].rsplit("/", 1)[-1]
    versioned = name.rstrip("0123456789.") or name  # bash5.2, python3.11, ksh93
    if name in _OPAQUE_NAMES:
        return f"it runs another command through {_OPAQUE_NAMES[name]}"
    flags = _RUNS_ARGUMENTS.get(name, ())
    args = words[1:]
    if name == "tar" and args and not args[0].startswith("-"):
        args[0] = "-" + args[0]  # tar's old style: `tar cIf PROG out.tar` is `tar -c -I PROG -f out.tar`
    if any(_option(name, w, f) for w in args for f in flags) or name == "git" and _git_runs(words):
        return f"{name} with these options can run other programs or write files"
    if name in ("sed", "gsed") and _sed_runs(tuple(_sed_scripts(words[1:]))):
        return f"the {name} script can run commands or write files (e, w, W, r)"
    if name in _SETTERS or name == "printf" and any(w.startswith("-v") for w in words[1:]):
        return f"the builtin {name} sets a shell variable, which a later command could evaluate"
    if name in _EVALUATING_BUILTINS and any(c in w for w in words[1:] for c in ("$", "`", "[")):
        return f"the builtin {name} would evaluate an expression in its arguments"
    if (name in SHELLS or versioned in SHELLS) and any(  # -c, -e in a cluster too: `perl -ne`, `ruby -pe`
            w.startswith("-") and ("c" in w.lstrip("-") or not w.startswith("--") and any(k in w for k in "eE"))
            for w in words[1:]):
        return f"it runs code given to {name} as a string"
    if (name in SHELLS or versioned in SHELLS) and (
            all(w.startswith("-") for w in words[1:]) or any(w in ("-s", "-") for w in words[1:])):
        return f"{name} runs code read from its input"
    if name in AWKS and any(k in w for w in words[1:] for k in ("system", "|", "getline", ">", "@")) or (
            name in AWKS and any(_option(name, w, f) for w in words[1:]
                                 for f in ("-f", "--file", "-i", "--include", "-l", "--load", "-E", "--exec", "-W"))):
        return f"the {name} program can run commands or write files"
    return ""


def _option(name: str, word: str, flag: str) -> bool:
    """Whether `word` sets `flag`: `--output=x`, `-o`, a cluster such as `-uo` or `-i.bak`, `of=x` for dd."""
    if flag == "*":
        return not word.startswith("-")
    if flag == "+":
        return word.startswith("+")
    if word == flag or word.startswith(flag + "="):
        return True
    given = word.split("=", 1)[0]
    if flag.startswith("--") and given.startswith("--") and len(given) > 2 and flag.startswith(given):
        return True  # --checkpoint-act=exec=…: getopt_long and git take an unambiguous prefix
    short = len(flag) == 2 and flag[0] == "-"
    return short and word.startswith("-") and not word.startswith("--") and (
        flag[1] in word[1:] if name != "git" else word.startswith(flag))


def _git_runs(words: list[str]) -> bool:
    """Whether a git command's subcommand runs a program or writes a file its words name (`_GIT_RUNS`)."""
    rest = words[1:]
    while rest and rest[0].startswith("-"):
        rest = rest[2:] if rest[0] in _GIT_VALUED else rest[1:]
    if not rest:
        return False
    if rest[0] == "format-patch" or _GIT_RUNS.get(rest[0]) == ("*",):
        return True
    return any(_option("git-" + rest[0], w, f) for w in rest[1:] for f in _GIT_RUNS.get(rest[0], ()))


def _sed_scripts(args: list[str]) -> list[str]:
    """The scripts of a sed command: each `-e` value (`-e S`, `-eS`, `-ne S`, `--expression=S`), else its first
    operand."""
    scripts: list[str] = []
    operands: list[str] = []
    take = False
    for word in args:
        if take:
            scripts.append(word)
            take = False
        elif word.startswith("--") and len(word.split("=")[0]) > 2 and "--expression".startswith(word.split("=")[0]):
            scripts.append(word.partition("=")[2])
            take = "=" not in word
        elif word.startswith("-") and not word.startswith("--") and "e" in word:
            scripts.append(word[word.index("e") + 1:])
            take = not scripts[-1]
        elif not word.startswith("-") or word == "-":
            operands.append(word)
    return scripts or operands[:1]


@functools.lru_cache(maxsize=256)
def _sed_runs(scripts: tuple[str, ...]) -> bool:
    """Whether a sed script holds a command that runs a program, writes or reads a file (`e`, `w`, `W`, `r`, the
    `s///e` and `s///w` flags), as GNU sed's own parser reads it: `sed --sandbox`, which refuses exactly those,
    compiles the script against empty input (nothing runs). A parse of rhapsody's own missed `s/[/]/x/;1e cmd/`
    and `:x/;1e cmd;/`. Without GNU sed, or when the check fails in any way, the answer is yes."""
    sed = shutil.which("sed")
    if sed is None:
        return True
    argv = [sed, "--sandbox", "-n", *[part for script in scripts for part in ("-e", script)], "/dev/null"]
    try:
        done = lifeline.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return True
    return done.returncode != 0


def _text(node: Any) -> str:
    return bytes(node.text).decode("utf-8", errors="replace")


def unquote(word: str) -> str:
    """A word as bash passes it: quotes and backslash escapes removed (expansions kept as written)."""
    out: list[str] = []
    quote = ""
    i = 0
    while i < len(word):
        ch = word[i]
        if quote == "'":
            quote = "" if ch == "'" else quote
            out.append("" if ch == "'" else ch)
        elif ch == "\\" and i + 1 < len(word):
            i += 1
            out.append(word[i] if not (quote == '"' and word[i] not in '"\\$`\n') else ch + word[i])
        elif ch in "'\"" and (not quote or quote == ch):
            quote = "" if quote else ch
        elif ch == "$" and not quote and i + 1 < len(word) and word[i + 1] in "'\"":
            pass  # $'...' and $"...": the quotes follow
        else:
            out.append(ch)
        i += 1
    return "".join(out)
