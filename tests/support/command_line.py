"""The real `main()` run in the test's process as from a shell: none of the user's settings,
what is typed piped into stdin, and (for `parley chat`) a stand-in language model."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import IO

from assistant.cli.main import main
from assistant.session.settings import Settings
from models.base import ChatModel


def flat(settings: Settings) -> SimpleNamespace:
    """Every setting by its flag's name (`.ctx`, `.barge_in`), whichever part holds it."""
    values = {"debug": settings.debug}
    for part in (settings.model, settings.tools, settings.saving, settings.speech,
                 settings.listening, settings.serve):
        values.update(vars(part))
    return SimpleNamespace(**values)


def without_user_settings(monkeypatch, home: str | Path = "/nonexistent") -> None:
    """No PARLEY_* variable, and a HOME without ~/.config/parley/config.toml."""
    for name in [name for name in os.environ if name.startswith("PARLEY_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))


def piped(monkeypatch, stdin: str | bytes | IO[str]) -> None:
    """`stdin` (text, bytes, or a file the test writes to) piped in, as `parley < file`."""
    if isinstance(stdin, str):
        stdin = stdin.encode()
    if isinstance(stdin, bytes):
        stdin = io.TextIOWrapper(io.BytesIO(stdin))
    monkeypatch.setattr(sys, "stdin", stdin)


def chat_through_main(monkeypatch, capsys, model: ChatModel | None, lines: str, *flags: str,
                      code: int = 0) -> str:
    """`parley chat FLAGS` as typed at the shell, `lines` piped in, with `model` as the
    language model. It must exit with `code`: then its stdout (and nothing on stderr) for 0,
    its stderr for anything else."""
    monkeypatch.setattr("assistant.session.engines.load_model", lambda args: model)
    without_user_settings(monkeypatch)
    piped(monkeypatch, lines)
    assert main(["chat", *flags]) == code
    captured = capsys.readouterr()
    if code:
        return captured.err
    assert captured.err == ""
    return captured.out
