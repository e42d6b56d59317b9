"""One way to run work on a thread and wait for it.

Waits are on an Event, never `Thread.join`: in CPython 3.11 a join interrupted by Ctrl-C
can mark a still-running thread as finished (bpo-45274), and Parley would then go on
(show the prompt, exit the interpreter) while native code still runs on that thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class Worker:
    """A daemon thread running `target` once; `wait()` tells when it has ended."""

    def __init__(self, target: Callable[[], object], name: str, start: bool = True) -> None:
        self._target = target
        self._done = threading.Event()
        self.name = name
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        if start:
            self.start()

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            self._target()
        except BaseException:  # a worker's failure is a bug: never lose its traceback
            log.exception("the %s worker failed", self.name)
        finally:
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """True once the target has returned (or raised); False after `timeout`."""
        return self._done.wait(timeout)


def run_interruptibly(target: Callable[[], object], on_interrupt: Callable[[], None]) -> None:
    """Run `target` on a worker so that Ctrl-C in this thread calls `on_interrupt` (which
    asks the work to stop) instead of abandoning it; returns when it has ended."""
    worker = Worker(target, "reply", start=False)
    try:
        worker.start()
    except KeyboardInterrupt:  # Ctrl-C as the reply starts: it starts cancelled
        on_interrupt()
    while True:
        try:
            if worker.wait():
                return
        except KeyboardInterrupt:
            on_interrupt()
