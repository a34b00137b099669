"""A real parse of a bash command line (tree-sitter-bash), for allow and deny rules.

`parse` returns the simple commands of a command line, each as its words with quotes
and backslashes removed, and an `opaque` reason when the line does something rules
cannot see through: command or process substitution, backgrounding, `eval`, `bash -c`,
redirection to a file, subshells, functions, control flow, here-documents, variable
assignments, or anything the parser does not understand. An opaque command never runs
by an allow rule; it asks. The only module that imports `tree_sitter`.
"""

from __future__ import annotations

import functools
from typing import Any

from rhapsody.core.permissions import ShellCommand

_LIST_NODES = {"program", "list", "pipeline"}
_LIST_TOKENS = {"&&", "||", ";", "|", "|&", "\n", ";;", "comment"}
_WORD_NODES = {"word", "string", "raw_string", "number", "concatenation", "simple_expansion", "expansion",
               "ansi_c_string", "translated_string", "string_content", "\"", "$"}
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
                 "systemd-run": "systemd-run", "xvfb-run": "xvfb-run", "catchsegv": "catchsegv"}
_RUNS_ARGUMENTS = {"find": ("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprintf", "-fls"),
                   "git": ("-c", "--config-env", "--exec-path", "-C", "--output", "--output-directory"),
                   "sort": ("-o", "--output"), "sed": ("-i", "--in-place"), "perl": ("-i",),
                   "tee": ("*",), "dd": ("of",), "script": ("-c", "--command"),
                   "vim": ("-c", "--cmd", "-S"), "vi": ("-c", "--cmd", "-S"), "nvim": ("-c", "--cmd", "-S"),
                   "gdb": ("-ex", "-x", "--command", "--eval-command"), "rsync": ("-e", "--rsh"),
                   "tar": ("--checkpoint-action", "--to-command", "--use-compress-program", "-I", "--info-script",
                           "--new-volume-script", "-F")}
"""Options with which a program runs another or writes a file the rule did not name (`*`: any argument)."""
_EVALUATING_BUILTINS = {"test", "[", "printf", "read", "unset", "declare", "typeset", "local", "let", "export",
                        "readonly", "mapfile", "readarray", "getopts", "wait", "shopt", "set", "caller", "hash"}
"""Builtins that evaluate a name or subscript they are given (`test -v 'a[$(cmd)]'` runs cmd)."""

_CONSTRUCTS = {"for_statement": "a for loop", "c_style_for_statement": "a for loop",
               "while_statement": "a while or until loop", "if_statement": "an if statement",
               "case_statement": "a case statement", "function_definition": "a function definition",
               "subshell": "a subshell ( … )", "compound_statement": "a command group { … }",
               "variable_assignment": "a variable assignment", "variable_assignments": "variable assignments",
               "declaration_command": "a declaration (declare, export, local, readonly)",
               "unset_command": "unset", "test_command": "a test [[ … ]]", "negated_command": "a negated command (!)",
               "heredoc_redirect": "a here-document (<<)", "herestring_redirect": "a here-string (<<<)",
               "arithmetic_expansion": "an arithmetic expansion $(( … ))", "command_substitution": "a command substitution",
               "process_substitution": "a process substitution", "ERROR": "text the parser does not understand"}
"""What a construct rules cannot see through is called when a refusal names it."""


def _contains(node_type: str) -> str:
    """Why a construct makes a command opaque, in words (`it contains a for loop`)."""
    return f"it contains {_CONSTRUCTS.get(node_type) or 'a ' + node_type.replace('_', ' ')}"


@functools.cache
def _parser() -> Any:
    import tree_sitter_bash
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_bash.language()))


def parse(command: str) -> ShellCommand:
    """The simple commands of `command` and, when rules cannot judge it, why."""
    if "\\\n" in command:  # bash joins `r\<newline>m` into rm; the parse would see two words
        return ShellCommand((), "it continues a line with a backslash")
    try:
        tree = _parser().parse(command.encode("utf-8", errors="surrogatepass"))
    except (ValueError, UnicodeError):
        return ShellCommand((), "the command could not be parsed")
    commands: list[tuple[str, ...]] = []
    reason = _walk(tree.root_node, commands)
    if not reason and tree.root_node.has_error:
        reason = "the command could not be parsed"
    return ShellCommand(tuple(commands), reason)


def _walk(node: Any, out: list[tuple[str, ...]]) -> str:
    """Collect simple commands under a list/pipeline node; the first opaque reason found, or ''."""
    if node.type in _LIST_NODES:
        for child in node.children:
            if child.type == "&":
                return "it runs something in the background (&)"
            if child.type in _LIST_TOKENS:
                continue
            reason = _walk(child, out)
            if reason:
                return reason
        return ""
    if node.type == "redirected_statement":
        return _redirected(node, out)
    if node.type == "command":
        return _command(node, out)
    return _contains(node.type)


def _redirected(node: Any, out: list[tuple[str, ...]]) -> str:
    body = node.child_by_field_name("body")
    for child in node.children:
        if child is body or child.id == getattr(body, "id", None):
            continue
        reason = _redirect(child)
        if reason:
            return reason
    return _walk(body, out) if body is not None else "it has a redirection without a command"


def _redirect(node: Any) -> str:
    if node.type != "file_redirect":
        return _contains(node.type)
    ops = [c for c in node.children if c.type not in ("file_descriptor", "word", "number", "string", "raw_string")]
    target = node.children[-1]
    op = ops[0].type if ops else ""
    if op in (">&", "<&") and target.type == "number":
        return ""  # 2>&1: a file descriptor, not a file
    if _text(target) in _SAFE_TARGETS:
        return ""
    if op == "<":
        return "it reads a file through a redirection"
    return "it redirects output to a file"


def _command(node: Any, out: list[tuple[str, ...]]) -> str:
    words: list[str] = []
    for child in node.children:
        if child.type == "command_name":
            child = child.children[0] if child.children else child
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
        if _has_substitution(child):
            return "it contains a command or process substitution (or an expansion that can run one)"
        if _has_type(child, "ansi_c_string"):
            return "it uses $'…' quoting, whose escapes rules do not decode"
        words.append(unquote(_text(child)))
    if not words:
        return "it has an empty command"
    reason = _opaque_name(words)
    if not reason:
        out.append(tuple(words))
    return reason


def _unnamed(node: Any) -> str:
    """Why the program word does not name its program as written: an expansion, a glob or a brace."""
    raw = _text(node)
    if "$" in raw:  # $x, ${x}, $'…': bash builds the name when it runs
        return "its program name comes from an expansion or $'…' quoting"
    if any(c in raw for c in "*?[") or ("{" in raw and ("," in raw or ".." in raw) and "}" in raw):
        return "its program name is a glob or a brace expansion"
    return ""


def _has_type(node: Any, kind: str) -> bool:
    return node.type == kind or any(_has_type(c, kind) for c in node.children)


def _has_substitution(node: Any) -> bool:
    if node.type in ("command_substitution", "process_substitution", "arithmetic_expansion"):
        return True
    if node.type == "expansion" and ("@" in _text(node) or "[" in _text(node)):
        return True  # ${x@P} prompt-expands a value (running $(...) in it); a subscript is arithmetic
    return any(_has_substitution(c) for c in node.children)


def _opaque_name(words: list[str]) -> str:
    name = words[0].rsplit("/", 1)[-1]
    versioned = name.rstrip("0123456789.") or name  # bash5.2, python3.11, ksh93
    if name in _OPAQUE_NAMES:
        return f"it runs another command through {_OPAQUE_NAMES[name]}"
    flags = _RUNS_ARGUMENTS.get(name, ())
    if any(_option(name, w, f) for w in words[1:] for f in flags) or words[1:2] == ["format-patch"] and name == "git":
        return f"{name} with these options can run other programs or write files"
    if name in _EVALUATING_BUILTINS and any(c in w for w in words[1:] for c in ("$(", "`", "[", "${")):
        return f"the builtin {name} would evaluate an expression in its arguments"
    if (name in SHELLS or versioned in SHELLS) and any(
            w.startswith("-") and "c" in w.lstrip("-") or w in ("-e", "-E") for w in words[1:]):
        return f"it runs code given to {name} as a string"
    if (name in SHELLS or versioned in SHELLS) and (
            all(w.startswith("-") for w in words[1:]) or any(w in ("-s", "-") for w in words[1:])):
        return f"{name} runs code read from its input"
    if name in AWKS and any(k in w for w in words[1:] for k in ("system", "|", "getline", "print >", "printf >")):
        return f"the {name} program can run commands or write files"
    return ""


def _option(name: str, word: str, flag: str) -> bool:
    """Whether `word` sets `flag`: `--output=x`, `-o`, a cluster such as `-uo` or `-i.bak`, `of=x` for dd."""
    if flag == "*":
        return not word.startswith("-")
    if word == flag or word.startswith(flag + "="):
        return True
    short = len(flag) == 2 and flag[0] == "-"
    return short and word.startswith("-") and not word.startswith("--") and (
        flag[1] in word[1:] if name != "git" else word.startswith(flag))


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
