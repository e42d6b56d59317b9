"""Ctrl-C that is not lost inside a C library's callback, nor raised inside an import."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager


def interrupts_kept() -> AbstractContextManager[None]:
    """Raise a Ctrl-C pressed inside the block once the block returns, if it was lost.

    Python raises KeyboardInterrupt wherever the main thread is running Python code. While
    llama.cpp loads a model that is often its log callback, and ctypes swallows an exception
    raised in a callback ("Exception ignored on calling ctypes callback"): the load would go
    on as if the key had never been pressed. The handler notes the press; if the interrupt
    did not come out of the block, it is raised here.
    """
    return _ctrl_c_noted(raise_at_once=True)


def interrupts_deferred() -> AbstractContextManager[None]:
    """Hold a Ctrl-C pressed inside the block until it returns, then raise it.

    While models load, imports run on several threads, and a KeyboardInterrupt raised in
    the main thread inside importlib's module-lock callback (`_get_module_lock.<locals>.cb`,
    between its taking of the import lock and its `try`) is "ignored" with the lock still
    held: every later import, on any thread, then waits forever. So the press is only
    noted here, and raised where no import is under way. The load is seconds long."""
    return _ctrl_c_noted(raise_at_once=False)


@contextmanager
def _ctrl_c_noted(raise_at_once: bool) -> Iterator[None]:
    """Notes a Ctrl-C pressed inside the block (and, with `raise_at_once`, raises it there
    as ever), and raises it once the block returns if it did not come out of it."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach the main thread only
        return
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous):
        yield  # ignored or the system default: nothing of Python's to lose
        return
    pressed: list[int] = []

    def note(signum, frame) -> None:
        pressed.append(signum)
        if raise_at_once:
            previous(signum, frame)

    signal.signal(signal.SIGINT, note)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if pressed:
        raise KeyboardInterrupt
