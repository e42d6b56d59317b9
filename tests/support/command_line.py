"""The real `main()` run in the test's process as from a shell: none of the user's settings,
and what is typed piped into stdin."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from typing import IO


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
