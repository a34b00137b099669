"""The core stays free of front-end imports; every prompt renders; settings layer in order."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rhapsody import prompts
from rhapsody.config.settings import load_settings, user_config_path
from rhapsody.core.errors import ConfigError
from rhapsody.wiring import project_instructions, system_prompt

CORE_DIR = Path(__file__).parent.parent / "src/rhapsody/core"
CORE = sorted(".".join(p.relative_to(CORE_DIR).with_suffix("").parts).removesuffix(".__init__")
              for p in CORE_DIR.rglob("*.py") if p.name != "__init__.py" or p.parent != CORE_DIR)
PYDANTIC = {"pydantic", "pydantic_core", "typing_extensions", "annotated_types", "typing_inspection"}
"""pydantic and the packages it imports itself."""


def test_core_imports_only_the_stdlib_pydantic_and_itself() -> None:
    assert {"agent.loop", "session.session", "session.handoff_state", "session.messages"} <= set(CORE)
    code = "\n".join([
        "import sys",
        "before = set(sys.modules)",
        *(f"import rhapsody.core.{m}" for m in CORE),
        "new = set(sys.modules) - before",
        f"bad = sorted({{m.split('.')[0] for m in new if not m.startswith('_sysconfigdata')}} - set(sys.stdlib_module_names) - set({sorted(PYDANTIC | {'rhapsody'})!r}))",
        "bad += sorted(m for m in new if m.startswith('rhapsody.') and not m.startswith('rhapsody.core'))",
        "print(bad)",
        "raise SystemExit(1 if bad else 0)",
    ])
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_prompt_renders_and_strict_substitution_catches_drift(tmp_path: Path) -> None:
    names = prompts.names()
    assert {"system", "handoff", "continue", "narration_rule", "tools/micro_handoff"} <= set(names)
    for name in names:
        text = prompts.load(name)
        assert text.strip() and "<!--" not in text
    assert "{{" not in system_prompt(tmp_path, load_settings(tmp_path))
    with pytest.raises(KeyError, match="missing"):
        prompts.render("system", root="x", date="y")
    with pytest.raises(KeyError, match="unused"):
        prompts.render("handoff", extra="z")
    rule = prompts.load("narration_rule").format(words=2, required=8)
    assert "2" in rule and "8" in rule


def test_agents_md_is_bounded_and_says_when_cut(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("x" * 500)
    text = project_instructions(tmp_path, 100)
    assert "AGENTS.md cut at 100 of 500 characters" in text and text.count("x") == 100


def test_settings_layers_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = Path.home() / ".config" / "rhapsody"
    user.mkdir(parents=True)
    (user / "config.toml").write_text("narration_min_words = 3\nmax_tokens = 100\nbash_timeout = 9\n")
    (tmp_path / ".rhapsody").mkdir()
    (tmp_path / ".rhapsody" / "config.toml").write_text("narration_min_words = 4\nmax_tokens = 200\n")
    monkeypatch.setenv("RHAPSODY_MAX_TOKENS", "300")
    settings = load_settings(tmp_path, {"narration_min_words": 5})
    assert (settings.bash_timeout, settings.max_tokens, settings.narration_min_words) == (9, 300, 5)
    monkeypatch.setenv("RHAPSODY_MAX_TOKENS", "lots")
    with pytest.raises(ConfigError, match="max_tokens"):
        load_settings(tmp_path)


def test_every_bad_setting_is_named_in_one_line_with_where_it_was_set(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    user = user_config_path()
    user.parent.mkdir(parents=True)
    user.write_text('narration_min_wrds = 3\nbash_timeout = "ten"\n[memory]\npaht = "x"\n')
    monkeypatch.setenv("RHAPSODY_MAX_TOKENS", "lots")
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path, {"narration_min_words": -1})
    text = str(caught.value).replace("~", str(Path.home()))
    assert "\n" not in text and text.startswith("bad settings ")
    assert f"'narration_min_wrds' (from {user}) is not a setting, did you mean 'narration_min_words'?" in text
    assert f"'bash_timeout' (from {user}): " in text
    assert "'memory.paht' " in text and "did you mean 'path'?" in text
    assert "'max_tokens' (from RHAPSODY_MAX_TOKENS): " in text
    assert "'narration_min_words' (from --narration-min-words): " in text
    assert "Extra inputs" not in text
