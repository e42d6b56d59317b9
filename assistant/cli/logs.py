"""Logging: to stderr only, never a file; warnings by default, every stage with `--debug`."""

from __future__ import annotations

import logging
import sys

PARLEY_LOGGERS = ("assistant", "audio", "memory", "models")


class _CurrentStderr(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is now: voice moves the terminal's stderr to a new
    file descriptor (C libraries' noise goes to /dev/null), and tests capture it."""

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # logging sets it once in __init__
        pass


class _Brief(logging.Formatter):
    """One line per record: the traceback of a bug is for `--debug`, the user already got
    a clear message saying what happened."""

    def format(self, record: logging.LogRecord) -> str:
        brief = logging.makeLogRecord({**record.__dict__, "exc_info": None, "exc_text": None,
                                       "stack_info": None})
        return super().format(brief)


_HANDLER = _CurrentStderr()


def configure_logging(debug: bool) -> None:
    """Warnings (of Parley and its libraries) go to stderr; with `debug`, Parley's own
    debug lines too: each stage's timings, and the traceback of anything unexpected."""
    _HANDLER.setFormatter(
        logging.Formatter("%(relativeCreated)8.0f ms %(levelname)-7s %(name)s: %(message)s")
        if debug else _Brief("parley: %(levelname)s: %(message)s (--debug shows more)"))
    root = logging.getLogger()
    if _HANDLER not in root.handlers:
        root.addHandler(_HANDLER)
    root.setLevel(logging.WARNING)
    for name in PARLEY_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if debug else logging.NOTSET)
    # The MCP SDK logs a server's broken message or lost connection with its traceback;
    # Parley says what happened to that server in one line of its own (`--debug`: both).
    logging.getLogger("mcp").setLevel(logging.NOTSET if debug else logging.CRITICAL)
