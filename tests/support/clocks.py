"""Time in tests: clocks that move only when a test moves them, and the one real wait.

- `ManualClock`: time that moves when told (`now += s`) or slept on.
- `SteppedClock`: a manual clock whose `sleep()` also waits for the test's go-ahead.
- `MicrophoneClock`: time as a 16 kHz microphone's samples count it.

Each can be passed where Parley takes a clock function (`clock`, `clock.monotonic`) and a
sleep function (`clock.sleep`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np

HUNG_S = 30.0
"""Only a hung test waits this long: no assertion depends on how fast the machine is."""


def wait_until(condition: Callable[[], object], what: str) -> None:
    """Wait (in real time) until `condition()` holds; fail naming `what` after HUNG_S."""
    deadline = time.monotonic() + HUNG_S
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.005)


class ManualClock:
    """Time that moves only when told (`now += s`, `now = t`, or `sleep(s)`)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class SteppedClock(ManualClock):
    """A manual clock whose `sleep()` moves it on, then waits for the test's go-ahead: the
    test decides exactly where another thread's wait is when it acts."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = threading.Condition()
        self.sleeps = 0
        """Sleeps begun."""
        self.allowed = 0
        """Sleeps allowed to end."""

    def sleep(self, seconds: float) -> None:
        with self.changed:
            self.now += seconds
            self.sleeps += 1
            self.changed.notify_all()
            if not self.changed.wait_for(lambda: self.allowed >= self.sleeps, HUNG_S):
                raise AssertionError("the test never let the sleeper go on")

    def until(self, condition: Callable[[], object]) -> None:
        with self.changed:
            assert self.changed.wait_for(condition, HUNG_S)

    def allow(self, sleeps: int) -> None:
        with self.changed:
            self.allowed = sleeps
            self.changed.notify_all()


class MicrophoneClock:
    """Time as a 16 kHz microphone's samples count it, for a voice loop and its speaker.

    It moves only as the test feeds audio, so how much of a reply plays while the user
    talks is a count of samples, whatever the machine's speed. A speaker's `sleep()` waits
    until that much audio has been fed.
    """

    rate = 16000

    def __init__(self) -> None:
        self.samples = 0
        self.fed = threading.Condition()

    def __call__(self) -> float:
        return self.monotonic()

    def monotonic(self) -> float:
        with self.fed:
            return self.samples / self.rate

    def sleep(self, seconds: float) -> None:
        with self.fed:
            until = self.samples + seconds * self.rate
            if not self.fed.wait_for(lambda: self.samples >= until, HUNG_S):
                raise AssertionError("the test stopped feeding audio")

    def feed(self, sink: Callable[[np.ndarray], None], pcm: np.ndarray,
             before_frame: Callable[[int], None] | None = None) -> None:
        """Feed `pcm` to `sink` in 30 ms frames, as a microphone delivers them;
        `before_frame(offset)` runs before each, with the frame's first sample in `pcm`."""
        step = self.rate * 30 // 1000
        for offset in range(0, len(pcm), step):
            if before_frame is not None:
                before_frame(offset)
            frame = pcm[offset:offset + step]
            with self.fed:  # the frame has been captured: its time has passed
                self.samples += len(frame)
                self.fed.notify_all()
            sink(frame)
