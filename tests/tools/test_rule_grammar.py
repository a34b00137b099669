"""Allow rules judge only a small grammar of plain words, checked against the real bash.

A generated corpus of smuggling forms (allowed prefixes with a second program hidden in
substitutions, expansions, quoting, here-documents, separators...) runs in bash with a PATH
holding only harmless stand-ins and a marker program `cmd`; every form for which bash ran the
marker must ask under allow rules that name the prefixes, and must not run under a deny rule
naming the marker.
"""

from __future__ import annotations

import itertools
import json
import os
import select
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rhapsody.core.access.permissions import Call, Rules, decide_call
from rhapsody.loopback.script import call, say
from rhapsody.tools.shell import parse

from tests.conftest import Stub, collect

BASH = "/bin/bash"
PREFIXES = ["echo", "ls -la", "git status", "cat x |", "pytest -q", "printf '%s'", 'echo "$HOME" \'a b\'']
CARRIERS = [
    "`cmd`", "$(cmd)", "<(cmd)", ">(cmd)", "$(cmd)x", "x`cmd`", "a$(cmd)b", "'a'$(cmd)", "$( cmd )", "$(\ncmd\n)",
    "${x-`cmd`}", "${x-$(cmd)}", "${x:-$(cmd)}", "${x:-`cmd`}", "${x?`cmd`}", "${x:?$(cmd)}", "${x:=$(cmd)}",
    "${x=`cmd`}", "${HOME+`cmd`}", "${HOME:+$(cmd)}", "${HOME#$(cmd)}", "${HOME%`cmd`}", "${HOME/a/$(cmd)}",
    "${HOME//$(cmd)/b}", "${x:-<(cmd)}", "${x:->(cmd)}", "${HOME:$(cmd):1}", "${x-\"`cmd`\"}", "${x:-'a'$(cmd)}",
    "${x-${y-$(cmd)}}", "\"`cmd`\"", "\"$(cmd)\"", "\"${x-`cmd`}\"", "\"${x:-$(cmd)}\"", "\"a $(cmd) b\"",
    "\"$HOME$(cmd)\"", "\"${HOME+`cmd`}\"", "$\"$(cmd)\"", "$((1+$(cmd)))", "$((`cmd`))", "$[1+$(cmd)]",
    "$((x[$(cmd)]))", "\"$((1+$(cmd)))\"", "${x[$(cmd)]}", "${HOME[`cmd`]}", "{a,$(cmd)}", "{`cmd`,b}",
    "{a,b}$(cmd)", "a;cmd", "a&&cmd", "a||cmd", "a|cmd", "a&cmd", "a\ncmd", "a\n\ncmd", "a\r\ncmd", "a;\ncmd",
    "a; eval cmd", "a; eval 'cmd'", "a; eval \"cmd\"", "a | bash", "a | sh -s", "a; bash -c cmd", "a; sh -c 'cmd'",
    "a; env cmd", "a | xargs cmd", "a; nohup cmd", "a; $'\\x63md'", "a; $'\\143md'", "a; c''md", "a; \"cmd\"",
    "a; 'cmd'", "a; c\\md", "a; ${x:-cmd}", "a; $(echo cmd)", "a; `echo cmd`", "<<EOF\n$(cmd)\nEOF",
    "<<'EOF'\nx\nEOF\ncmd", "<<<$(cmd)", "<<<\"`cmd`\"", "<(cmd) >/dev/null", "2>$(cmd)", ">$(cmd)",
    "> >(cmd)", "2> >(cmd)", "x #\ncmd", "x # $(cmd)\ncmd", "(cmd)", "{ cmd; }", "a; f() { cmd; }; f",
    "a; if true; then cmd; fi", "a; for i in 1; do cmd; done", "a; while cmd; do break; done", "a; [[ $(cmd) ]]",
    "a; ! cmd", "a; X=1 cmd", "a; coproc cmd", "a; time cmd", "$(<x)$(cmd)", "\\$(cmd)$(cmd)", "'$(cmd)'`cmd`",
    "\"'\"$(cmd)\"'\"", "x\\\ny$(cmd)", "${x@P}$(cmd)", "${HOME@Q}`cmd`", "$(($(cmd)))", "$((`cmd`+1))",
    "a; exec cmd", "a; command cmd", "a; builtin eval cmd", "a; trap cmd EXIT", "a; . /dev/stdin <<<cmd",
]
SPECIAL = [
    "test -v 'a[$(cmd)]'", "[ -v 'a[$(cmd)]' ]", "printf -v 'a[$(cmd)]' x", "read 'a[$(cmd)]' </dev/null",
    "unset 'a[$(cmd)]'", "declare 'a[$(cmd)]=1'", "let 'a[$(cmd)]'", "export 'a[`cmd`]=1'", "local 'a[$(cmd)]'",
    "test -v \"a[`cmd`]\"", "printf -v \"a[\\$(cmd)]\" x", "x='$(cmd)'; echo ${x@P}", "echo x | xargs cmd",
    "find . -maxdepth 0 -exec cmd ';'", "env cmd", "bash -c cmd", "sh -c cmd", "echo cmd | bash", "timeout 5 cmd",
    "nice cmd", "nohup cmd", "echo ${BASH_COMMAND@P}$(cmd)", "echo $(cmd)", "cmd", "c\\md", "$'cmd'",
    "printf -v x '%b' 'a\\x5b\\x24(cmd)\\x5d'; let x", "printf -vx '%b' 'a\\x5b\\x24(cmd)\\x5d'; let x",
    "printf -v PS4 '%b' '\\x24(cmd)'; set -x; echo", "printf -v PS4 '%b' '\\x60cmd\\x60'; set -x; true",
    "shopt -s lastpipe; printf '%b\\n' '\\x24(cmd)' | read PS4; set -x; echo",
    "printf -v x '%b' 'a\\x5b\\x24(cmd)\\x5d'; let y=x",
]
CONTROLS = ["echo cmd", "ls 'cmd'", "echo \"cmd home\" '*' ~/x", "git status | cat", "echo a && ls -la; git status",
            "echo 'a b' | grep -v cmd"]
"""Plain forms that mention the marker without running it: the rules allow them."""
ALLOW = ["bash:echo*", "bash:ls*", "bash:git status*", "bash:cat*", "bash:grep*", "bash:pytest*", "bash:printf*",
         "bash:true*", "bash:test*", "bash:[*", "bash:read*", "bash:unset*", "bash:declare*", "bash:let*",
         "bash:export*", "bash:local*", "bash:find*", "bash:env*", "bash:bash*", "bash:sh*", "bash:xargs*",
         "bash:timeout*", "bash:nice*", "bash:nohup*", "bash:set*", "bash:shopt*", "bash:getopts*"]
"""Every prefix program is allowed; the marker `cmd` is not."""


def corpus() -> list[str]:
    """At least 500 forms: every prefix with every carrier, and the forms that need a program of their own."""
    forms = [f"{prefix} {carrier}" for prefix, carrier in itertools.product(PREFIXES, CARRIERS)]
    return list(dict.fromkeys([*forms, *SPECIAL, *CONTROLS]))


def stand_ins(folder: Path) -> Path:
    """A PATH with harmless programs for the prefixes, the real shells and wrappers, and the marker `cmd`."""
    bin_ = folder / "bin"
    bin_.mkdir()
    for name in ("ls", "git", "cat", "grep", "pytest"):
        (bin_ / name).write_text("#!/bin/sh\nexit 0\n")
    (bin_ / "cmd").write_text('#!/bin/sh\n: > "$MARK"\n')
    for path in bin_.iterdir():
        path.chmod(0o755)
    for name in ("bash", "sh", "env", "xargs", "find", "timeout", "nice", "nohup"):
        for where in ("/bin", "/usr/bin"):
            if Path(where, name).exists():
                (bin_ / name).symlink_to(Path(where, name))
                break
    return bin_


def run_all(forms: list[str], folder: Path) -> set[int]:
    """Run every form in bash (16 at a time); the indexes of those for which the marker ran."""
    bin_ = stand_ins(folder)
    marks, work = folder / "marks", folder / "work"
    marks.mkdir()
    work.mkdir()

    def one(index: int) -> None:
        env = {"PATH": str(bin_), "MARK": str(marks / str(index)), "HOME": str(folder), "LC_ALL": "C"}
        alive, held = os.pipe()  # every process the form starts inherits `held`
        try:
            subprocess.run([BASH, "-c", forms[index]], env=env, cwd=work, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10, pass_fds=(held,))
        except subprocess.TimeoutExpired:
            pass
        finally:
            os.close(held)
        drained(alive)  # a process substitution's child may still be starting when its shell has ended

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(one, range(len(forms))))
    return {int(p.name) for p in marks.iterdir()}


def drained(fd: int, within: float = 10.0) -> None:
    """Wait until no process holds the pipe's other end (end of file), for at most `within` seconds."""
    deadline = time.monotonic() + within
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while select.select([pipe], [], [], max(0.0, deadline - time.monotonic()))[0] and pipe.read(4096):
            pass


@pytest.mark.skipif(not os.access(BASH, os.X_OK), reason="needs bash")
def test_every_form_for_which_bash_runs_a_second_program_asks(tmp_path: Path) -> None:
    forms = corpus()
    ran = run_all(forms, tmp_path)
    assert len(forms) >= 500 and len(ran) >= 400, (len(forms), len(ran))
    allow = Rules(allow=ALLOW, parse=parse)
    deny = Rules(allow=["bash"], deny=["bash:cmd*"], parse=parse)
    slipped = [forms[i] for i in sorted(ran)
               if decide_call("ask", allow, Call("bash", forms[i], True, False, confinement="workspace-write")).verdict != "ask"]
    assert slipped == []
    for mode in ("ask", "auto-edit", "yolo", "read-only"):
        passed = [forms[i] for i in sorted(ran)
                  if decide_call(mode, deny, Call("bash", forms[i], True, False, confinement="workspace-write")).verdict == "allow"]
        assert passed == [], mode
    controls = [forms.index(c) for c in CONTROLS]
    assert not ran & set(controls)
    assert all(decide_call("ask", allow, Call("bash", c, True, False, confinement="workspace-write")).verdict == "allow"
               for c in CONTROLS)


@pytest.mark.parametrize("command", ["echo ${x-`cmd`}", "ls ${x:-$(cmd)}", "git status ${x?`cmd`}",
                                     "echo \"${x:-<(cmd)}\"", "echo ${x:=$(cmd)}", "echo ${x+`cmd`}"])
def test_a_substitution_inside_a_parameter_expansion_is_outside_the_grammar(command: str) -> None:
    shell = parse(command)
    assert shell.opaque and shell.commands == ()


def test_the_grammar_keeps_plain_words_and_quotes() -> None:
    shell = parse("git status -s | grep 'a $b' && echo \"x y\"z '*'; ls\nls 2>&1 >/dev/null")
    assert shell.opaque == ""
    assert shell.commands == (("git", "status", "-s"), ("grep", "a $b"), ("echo", "x yz", "*"), ("ls",), ("ls",))


EXPANDS_TO_RF = ["rm * x", "rm {-rf,x}", "rm $IFS-rf x", "rm -[r]f x", "rm -?f x", "rm \"$X\" x", "rm $X x"]
"""Each hands rm the word -rf in bash (in a folder holding a file named -rf, with X=-rf) though none is written."""


@pytest.mark.parametrize("command", EXPANDS_TO_RF)
def test_a_variable_glob_or_brace_does_not_slip_past_a_deny_rule(command: str, tmp_path: Path) -> None:
    (tmp_path / "-rf").touch()
    shown = subprocess.run([BASH, "-c", command.replace("rm ", "printf '<%s>' ", 1)], cwd=tmp_path, text=True,
                           capture_output=True, env={"X": "-rf", "PATH": os.environ["PATH"]}, timeout=10).stdout
    assert "<-rf>" in shown  # what rm would be given
    rules = Rules(allow=["bash"], deny=["bash:rm -rf*"], parse=parse)
    for mode in ("ask", "auto-edit", "yolo"):
        assert decide_call(mode, rules, Call("bash", command, True, False, confinement="workspace-write")).verdict != "allow"


async def test_smuggling_inside_an_expansion_does_not_run_headless(stub: Stub, project: Path) -> None:
    forms = ["echo ${x-`touch a`}", "ls ${x:-$(touch b)}", "git status ${x?`touch c`}", "echo \"${x:=$(touch d)}\""]
    narrate = "I will print a value now; the rule for echo should let this run without asking anyone."
    stub.script(*[call(narrate, "bash", command=c) for c in forms], say("done"))
    wiring = stub.wire(project, permission_mode="ask", allow=["bash:echo*", "bash:ls*", "bash:git status*"])
    await collect(wiring.agent.run("go"))
    assert not any((project / name).exists() for name in "abcd")
    assert json.dumps(stub.bodies()[-1]).count("no human can answer here") == len(forms)
