"""Settings through the real `main()`: flag, then environment, then config file, then default;
bad values give one line and exit code 2; `--debug` shows a bug's traceback on stderr."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from assistant.cli.main import main
from assistant.conversation import Conversation
from assistant.errors import ConfigError
from assistant.tools import builtin_tools
from tests.support.command_line import flat, without_user_settings
from tests.support.fakes import ScriptedChatModel


@pytest.fixture
def seen(monkeypatch):
    """The settings `parley chat` would build its conversation from (it stops there)."""
    captured: list = []

    def load_conversation(args, timers=None, max_messages=None, idle_summaries=False,
                          tools=None, model=None):
        captured.append(flat(args))
        raise ConfigError("stopped by the test")

    monkeypatch.setattr("assistant.session.engines.load_conversation", load_conversation)
    without_user_settings(monkeypatch)
    return captured


def test_flag_beats_environment_beats_config_file_beats_default(tmp_path, monkeypatch, seen):
    config = tmp_path / "parley.toml"
    config.write_text("ctx = 4096\nmax-tool-calls = 1\nanswer-tokens = 100\n"
                      'barge-in = true\nllm-model = "/models/from-file.gguf"\n')
    monkeypatch.setenv("PARLEY_CTX", "1024")
    monkeypatch.setenv("PARLEY_MAX_TOOL_CALLS", "2")
    monkeypatch.setenv("PARLEY_BARGE_IN", "off")
    monkeypatch.setenv("PARLEY_LLM_MODEL", "/models/from-env.gguf")
    assert main(["--config", str(config), "chat", "--ctx", "2048"]) == 2
    args = seen[-1]
    # ctx: flag over environment and file; max-tool-calls, barge-in, llm-model: environment
    # over file (a whole number, a switch turned off, a path); answer-tokens: file over default.
    assert (args.ctx, args.max_tool_calls, args.answer_tokens) == (2048, 2, 100)
    assert args.barge_in is False and args.llm_model == Path("/models/from-env.gguf")
    assert args.llm_name == "default" and args.debug is False


def test_config_equals_file_is_read_like_config_space_file(tmp_path, seen):
    config = tmp_path / "parley.toml"
    config.write_text("ctx = 4096\n")
    main([f"--config={config}", "chat"])
    main(["chat", "--config", str(config)])
    assert [args.ctx for args in seen] == [4096, 4096]


def test_flags_before_and_after_the_command_both_count(seen):
    main(["--ctx", "2048", "chat", "--max-tool-calls", "2"])
    assert (seen[-1].ctx, seen[-1].max_tool_calls) == (2048, 2)


@pytest.mark.parametrize("name, value, says", [
    ("PARLEY_CTX", "abc", "PARLEY_CTX='abc' is not a whole number (for --ctx)"),
    ("PARLEY_LLM_TIMEOUT", "soon", "PARLEY_LLM_TIMEOUT='soon' is not a number"),
    ("PARLEY_BARGE_IN", "maybe", "PARLEY_BARGE_IN='maybe' is not true or false"),
])
def test_a_bad_environment_value_is_one_line_and_exit_2(monkeypatch, capsys, seen, name, value,
                                                        says):
    monkeypatch.setenv(name, value)
    assert main(["chat"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"parley: {says}") and err.count("\n") == 1
    assert not seen


@pytest.mark.parametrize("line, says", [
    ('ctx = "big"', "ctx = 'big' is not a whole number"),
    ("barge-in = 3", "barge-in = 3 is not true or false"),
    ("ctx = true", "ctx = True is not a whole number"),
    ("colour = 'blue'", "unknown setting(s) colour"),
    ("ctx = ", "is not valid TOML"),
])
def test_a_bad_config_file_is_one_line_naming_the_key_and_exit_2(tmp_path, capsys, seen, line,
                                                                 says):
    config = tmp_path / "parley.toml"
    config.write_text(line + "\n")
    assert main(["--config", str(config), "chat"]) == 2
    err = capsys.readouterr().err
    assert str(config) in err and says in err and err.count("\n") == 1
    assert not seen


def test_a_named_config_file_that_is_missing_is_an_error(tmp_path, capsys, seen):
    assert main(["--config", str(tmp_path / "none.toml"), "chat"]) == 2
    assert "no config file at" in capsys.readouterr().err


def test_help_works_whatever_the_environment_holds():
    result = subprocess.run([sys.executable, "-m", "assistant", "--help"], capture_output=True,
                            text=True, env={"PARLEY_CTX": "abc", "PATH": "/usr/bin:/bin"},
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert "usage: parley" in result.stdout and "--debug" in result.stdout
    assert result.stderr == ""


def run_chat_with_a_bug(monkeypatch, capsys, argv: list[str]) -> tuple[str, str]:
    """A piped chat whose second reply hits a bug inside the core."""
    model = ScriptedChatModel()
    model.enqueue("Hi.", "never said")
    monkeypatch.setattr("assistant.session.engines.load_conversation",
                        lambda args, timers=None, **_:
                        Conversation(model, builtin_tools()))
    import assistant.prompt as prompt

    real_fit = prompt.fit_history
    def fit_with_a_bug(messages, current_seq, *args, **kwargs):
        if any(m.content == "again" for m in messages):  # the second reply's prompt
            raise ZeroDivisionError("a bug in prompt fitting")
        return real_fit(messages, current_seq, *args, **kwargs)

    monkeypatch.setattr(prompt, "fit_history", fit_with_a_bug)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"hello\nagain\n/history\n")))
    monkeypatch.delenv("PARLEY_DEBUG", raising=False)
    assert main(argv) == 0
    captured = capsys.readouterr()
    # /history says when each message was said; these tests look at what was kept.
    return re.sub(r", \w{3} \d{1,2} \w{3} \d\d:\d\d:", ":", captured.out), captured.err


def test_debug_shows_a_bugs_traceback_and_the_conversation_is_kept(monkeypatch, capsys):
    out, err = run_chat_with_a_bug(monkeypatch, capsys, ["--debug", "chat"])
    assert "Something went wrong inside Parley (ZeroDivisionError: a bug in prompt fitting)" \
        in " ".join(out.split())  # the terminal may wrap it
    assert "#1 user: hello\n#2 assistant: Hi.\n" in out and "#3" not in out
    assert "Traceback (most recent call last)" in err and "fit_with_a_bug" in err
    assert "assistant.conversation: reply to #1 done in" in err  # a stage's timing


def test_without_debug_a_bug_is_one_line_on_stderr(monkeypatch, capsys):
    out, err = run_chat_with_a_bug(monkeypatch, capsys, ["chat"])
    assert "#1 user: hello\n#2 assistant: Hi.\n" in out
    assert err == "parley: ERROR: the reply to message #3 failed (--debug shows more)\n"
