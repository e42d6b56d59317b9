"""Where the config file is found, through the real `main()`: `--config FILE`,
`--config=FILE`, PARLEY_CONFIG, else ~/.config/parley/config.toml; one file is read, the
environment and flags still win over it, and a bad file is one line and exit code 2."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from assistant.cli.main import main
from assistant.errors import ConfigError
from tests.support.command_line import flat, without_user_settings


@dataclass
class Home:
    folder: Path
    seen: list = field(default_factory=list)
    """The settings of every `parley chat` run, taken as it builds its conversation."""

    @property
    def settings(self):
        assert self.seen, "parley stopped before building the conversation"
        return self.seen[-1]


@pytest.fixture
def home(tmp_path, monkeypatch) -> Home:
    """An empty home folder, no PARLEY_* variable set, and `parley chat` stopping once it
    has its settings."""
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    home = Home(tmp_path / "home")
    home.folder.mkdir()
    without_user_settings(monkeypatch, home.folder)

    def load_conversation(args, timers=None, max_messages=None, idle_summaries=False,
                          tools=None, model=None):
        home.seen.append(flat(args))
        raise ConfigError("stopped by the test")

    monkeypatch.setattr("assistant.session.engines.load_conversation", load_conversation)
    return home


def default_file(home: Home, text: str) -> Path:
    path = home.folder / ".config" / "parley" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return path


def every_file(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_the_default_file_in_the_home_folder_is_read_and_never_written(home, monkeypatch):
    default_file(home, "ctx = 4096\nanswer-tokens = 100\nmax-tool-calls = 1\n")
    before = every_file(home.folder)
    monkeypatch.setenv("PARLEY_ANSWER_TOKENS", "200")
    assert main(["chat", "--max-tool-calls", "3"]) == 2
    args = home.settings
    # The file fills what nothing else set; the environment and a flag still win over it.
    assert (args.ctx, args.answer_tokens, args.max_tool_calls) == (4096, 200, 3)
    assert every_file(home.folder) == before


def test_without_any_config_file_the_defaults_hold_and_nothing_is_created(home):
    assert main(["chat"]) == 2
    args = home.settings
    assert (args.ctx, args.answer_tokens, args.max_tool_calls) == (8192, 1024, 4)
    assert list(home.folder.iterdir()) == []  # no ~/.config/parley made


def test_parley_config_names_the_file_instead_of_the_default(home, tmp_path, monkeypatch):
    default_file(home, "ctx = 1024\nanswer-tokens = 100\n")
    named = tmp_path / "elsewhere.toml"
    named.write_text("ctx = 4096\n")
    monkeypatch.setenv("PARLEY_CONFIG", str(named))
    assert main(["chat"]) == 2
    args = home.settings
    # One file is read, not a merge: the default file's answer-tokens does not count.
    assert (args.ctx, args.answer_tokens) == (4096, 1024)


@pytest.mark.parametrize("form", ["--config FILE", "--config=FILE", "chat --config FILE"])
def test_the_config_flag_beats_parley_config(home, tmp_path, monkeypatch, form):
    named = tmp_path / "flag.toml"
    named.write_text("ctx = 2048\n")
    ignored = tmp_path / "broken.toml"
    ignored.write_text("ctx = \n")  # would be exit code 2 if it were read
    monkeypatch.setenv("PARLEY_CONFIG", str(ignored))
    argv = {"--config FILE": ["--config", str(named), "chat"],
            "--config=FILE": [f"--config={named}", "chat"],
            "chat --config FILE": ["chat", "--config", str(named)]}[form]
    assert main(argv) == 2
    assert home.settings.ctx == 2048


def test_the_environment_beats_a_file_named_by_parley_config(home, tmp_path, monkeypatch):
    named = tmp_path / "parley.toml"
    named.write_text("ctx = 4096\nbarge-in = true\nllm-name = \"from-file\"\n")
    monkeypatch.setenv("PARLEY_CONFIG", str(named))
    monkeypatch.setenv("PARLEY_CTX", "2048")
    monkeypatch.setenv("PARLEY_BARGE_IN", "no")
    assert main(["chat"]) == 2
    args = home.settings
    assert (args.ctx, args.barge_in, args.llm_name) == (2048, False, "from-file")


def test_parley_config_naming_a_missing_file_is_one_line_and_exit_2(home, tmp_path, capsys,
                                                                    monkeypatch):
    missing = tmp_path / "nowhere.toml"
    monkeypatch.setenv("PARLEY_CONFIG", str(missing))
    assert main(["chat"]) == 2
    assert capsys.readouterr().err == f"parley: no config file at {missing}\n"
    assert home.seen == []


def where(found_by: str, home: Home, tmp_path: Path, monkeypatch, text: bytes) -> Path:
    """Writes a config file found the way `found_by` says; returns its path."""
    if found_by == "home":
        path = default_file(home, "")
    else:
        path = tmp_path / "parley.toml"
        monkeypatch.setenv("PARLEY_CONFIG", str(path))
    path.write_bytes(text)
    return path


@pytest.mark.parametrize("found_by", ["home", "PARLEY_CONFIG"])
@pytest.mark.parametrize("text, says", [
    (b"ctx = \n", "is not valid TOML"),
    (b"[voice\nbarge-in = true\n", "is not valid TOML"),
    (b"ctx = 4096\xff\n", "is not valid TOML"),  # not UTF-8
    (b"ctx = 4096\ncolour = 'blue'\n", "unknown setting(s) colour"),
    (b"[speech]\nvoice = 'joe'\n", "unknown setting(s) speech"),  # settings are top-level
])
def test_a_bad_file_found_either_way_is_one_line_naming_it_and_exit_2(
        home, tmp_path, monkeypatch, capsys, found_by, text, says):
    path = where(found_by, home, tmp_path, monkeypatch, text)
    assert main(["chat"]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"parley: {path}") and says in captured.err
    assert captured.err.count("\n") == 1 and captured.out == ""
    assert home.seen == []  # nothing ran
