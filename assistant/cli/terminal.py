"""Reading a typed line at the terminal without ever losing a Ctrl-C."""

from __future__ import annotations

import select
import sys
from collections.abc import Callable

from rich.console import Console

WAKE_S = 0.2
"""How often the wait for a line lets Python look for a Ctrl-C (at most this late)."""


def read_line(console: Console, prompt: str = "", prompt_style: str = "",
              stop: Callable[[], bool] | None = None) -> str:
    """A line typed at the terminal, after `prompt` (plain text, shown in `prompt_style`:
    Parley's consoles print no markup, so a "[bold]" in it would be shown as typed);
    EOFError on Ctrl-D and KeyboardInterrupt on Ctrl-C, whichever thread the kernel gave
    the Ctrl-C to.

    The kernel hands a process's SIGINT to any thread that does not block it. When that is
    one of llama.cpp's, onnxruntime's or PortAudio's, Python notes it, but a main thread
    asleep in `input()`'s read() is never woken to raise it: the Ctrl-C is lost and Parley
    hangs until Enter. So the wait for a line is a select() that wakes every `WAKE_S`, and
    Python raises a noted Ctrl-C between two waits. The terminal reads a line at a time:
    once stdin is readable, a whole line (or Ctrl-D) is there and `input()` returns at once.
    `stop`: asked at each wake; once it says so, the wait ends with "" (a reply's question
    the user stopped with Ctrl-C).
    """
    if prompt:
        console.print(prompt, style=prompt_style, end="")
    stdin = sys.stdin
    try:
        descriptor = stdin.fileno()
    except (AttributeError, OSError, ValueError):
        descriptor = None  # not a real file (a test's): nothing to wait on
    if descriptor is not None:
        while not select.select([descriptor], [], [], WAKE_S)[0]:
            if stop is not None and stop():
                return ""
    return console.input("")
