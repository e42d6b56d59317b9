"""Benchmarks beside a busy process: what a desktop with other work running looks like.

On a quiet machine more threads look better; beside anything else that wants a core,
threads that spin while waiting for each other can collapse. Both are printed.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def one_busy_core() -> Iterator[None]:
    """Keep one core busy (a Python loop in another process) while the block runs."""
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        busy.kill()
        busy.wait()
