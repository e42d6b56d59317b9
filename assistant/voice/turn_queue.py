"""What waits for the reply worker: one typed item per kind of turn, in the order they came.

Audio, typed lines, timers and replies started at a pause all queue here, so one reply
is answered and spoken at a time while the microphone goes on listening.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from assistant.timers import Timer
from assistant.voice.speculation import Speculation
from assistant.voice.turns import TurnRecord


@dataclass(frozen=True)
class HeardTurn:
    """An utterance the segmenter ended: answered once its transcript is ready."""

    record: TurnRecord
    transcript: Future
    """Resolves to `(Transcript, clock time it was ready)`."""
    cut: bool
    """The utterance reached the maximum length and was cut there (more speech follows)."""


@dataclass(frozen=True)
class TypedTurn:
    """A line typed instead of said."""

    record: TurnRecord
    text: str


@dataclass(frozen=True)
class TimerRang:
    """A timer went off: chimed and announced once the speaker is free."""

    record: TurnRecord
    timer: Timer


@dataclass(frozen=True)
class SpeculativeTurn:
    """A pause's transcript, answered ahead and held back until the end-of-speech wait
    decides (`Speculation`)."""

    speculation: Speculation

    @property
    def record(self) -> TurnRecord:
        return self.speculation.record


@dataclass(frozen=True)
class Stop:
    """The loop is closing: the reply worker ends when it takes this."""


QueuedTurn = HeardTurn | TypedTurn | TimerRang | SpeculativeTurn


class TurnQueue(queue.Queue):
    """The reply worker's queue; `on_put` runs after each item is queued (it stops the
    work between turns, so the reply goes first)."""

    def __init__(self, on_put: Callable[[], None]) -> None:
        super().__init__()
        self._on_put = on_put

    def put(self, item: QueuedTurn | Stop, block: bool = True,
            timeout: float | None = None) -> None:
        super().put(item, block, timeout)
        self._on_put()

    def put_back(self, items: list[QueuedTurn | Stop]) -> None:
        """Items taken but not finished (while a reply waited for the user's answer) go
        back to the front, in their order; their tasks still count as unfinished."""
        if not items:
            return
        with self.not_empty:
            self.queue.extendleft(reversed(items))
            self.not_empty.notify(len(items))

    def wait_done(self, timeout: float | None = None) -> bool:
        """Until every queued item was taken and finished; False after `timeout`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self.all_tasks_done:
                if not self.unfinished_tasks:
                    return True
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self.all_tasks_done.wait(left if left is not None else 0.5)
