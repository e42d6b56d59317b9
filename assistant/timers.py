"""Timers, in memory only: several at once, named or by duration, up to 24 hours.

The clock is injected: live Parley uses the monotonic clock and a thread that wakes at
the next end; replay `--fast` uses a clock it moves forward itself (`{"wait_s": N}`), and
calls `run_due()`. Nothing is written anywhere; ending Parley ends its timers.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from assistant.events import TimerFinished
from assistant.tools import ToolRefused

MAX_SECONDS = 24 * 3600


class TimerError(ToolRefused):
    """A timer request that cannot be done; the message is a sentence to say."""


@dataclass
class Timer:
    number: int
    seconds: int
    """The duration it was set for."""
    name: str = ""
    ends_at: float = 0.0
    """Clock time it goes off (while running)."""
    paused_left: float | None = None
    """Seconds left when paused; None while running."""
    finished: bool = field(default=False, repr=False)

    def left(self, now: float) -> float:
        return self.paused_left if self.paused_left is not None else max(0.0, self.ends_at - now)

    @property
    def description(self) -> str:
        """"10 minute pizza timer", "1 hour 30 minute timer"."""
        named = f"{self.name} " if self.name else ""
        return f"{duration_words(self.seconds, adjective=True)} {named}timer"


def finished_event(timer: Timer) -> TimerFinished:
    return TimerFinished(timer.name, timer.seconds, f"Your {timer.description} is done.")


def cancelled_line(timers: list[Timer], now: float) -> str:
    """What ending Parley says of the timers it cancels."""
    parts = [f"the {t.description} ({duration_words(round(t.left(now)))} left)" for t in timers]
    listed = ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]
    return f"Cancelled {'the running timer' if len(timers) == 1 else 'the running timers'}: " \
        f"{listed}."


def duration_words(seconds: float, adjective: bool = False) -> str:
    """5400 → "1 hour and 30 minutes" ("1 hour 30 minute" as an adjective)."""
    seconds = int(round(seconds))
    parts = []
    for unit, size in (("hour", 3600), ("minute", 60), ("second", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count} {unit}" + ("" if count == 1 or adjective else "s"))
    if not parts:
        return "0 second" if adjective else "0 seconds"
    if adjective:
        return " ".join(parts)
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


class Timers:
    """The running timers of one Parley session."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 on_finished: Callable[[Timer], None] | None = None,
                 background: bool = True) -> None:
        self.clock = clock
        self._listeners: list[Callable[[Timer], None]] = [on_finished] if on_finished else []
        """Told of each timer that goes off: what announces it (`when_finished`)."""
        self._timers: dict[int, Timer] = {}
        self._numbers = itertools.count(1)
        self._changed = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        if background:
            self._thread = threading.Thread(target=self._watch, name="timers", daemon=True)
            self._thread.start()

    # -- requests ---------------------------------------------------------------------

    def start(self, seconds: float, name: str = "") -> Timer:
        seconds = int(round(seconds))
        if seconds <= 0:
            raise TimerError("A timer needs a duration, for example “a timer for 10 minutes”.")
        if seconds > MAX_SECONDS:
            raise TimerError("Timers can be at most 24 hours long.")
        with self._changed:
            timer = Timer(next(self._numbers), seconds, name.strip().lower(),
                          ends_at=self.clock() + seconds)
            self._timers[timer.number] = timer
            self._changed.notify_all()
        return timer

    def running(self) -> list[Timer]:
        """Every timer not yet finished or cancelled, the one ending first first."""
        now = self.clock()
        with self._changed:
            return sorted(self._timers.values(), key=lambda t: t.left(now))

    def find(self, name: str = "", seconds: float | None = None) -> list[Timer]:
        """The timers a request means: by name, by the duration it was set for, or all."""
        timers = self.running()
        if name:
            timers = [t for t in timers if t.name == name.strip().lower()]
        if seconds is not None:
            timers = [t for t in timers if t.seconds == int(round(seconds))]
        return timers

    def cancel(self, timer: Timer) -> None:
        with self._changed:
            self._timers.pop(timer.number, None)
            self._changed.notify_all()

    def pause(self, timer: Timer) -> None:
        with self._changed:
            if timer.paused_left is None:
                timer.paused_left = timer.left(self.clock())
            self._changed.notify_all()

    def resume(self, timer: Timer) -> None:
        with self._changed:
            if timer.paused_left is not None:
                timer.ends_at = self.clock() + timer.paused_left
                timer.paused_left = None
            self._changed.notify_all()

    def change(self, timer: Timer, seconds: float) -> float:
        """Add (or, negative, remove) time; returns the seconds that were left before.

        Removing at least what is left finishes the timer now (`timer.finished`), without
        ringing: the answer to the request says it is done, and a ring right after would
        only say it again."""
        with self._changed:
            left = timer.left(self.clock())
            if left + seconds > MAX_SECONDS:
                raise TimerError("Timers can be at most 24 hours long.")
            if left + seconds <= 0:
                timer.finished = True
                self._timers.pop(timer.number, None)
            elif timer.paused_left is not None:
                timer.paused_left = left + seconds
            else:
                timer.ends_at = self.clock() + left + seconds
            self._changed.notify_all()
            return left

    # -- going off --------------------------------------------------------------------

    def run_due(self) -> list[Timer]:
        """Finish every timer whose time has come; returns them, in the order they ended."""
        now = self.clock()
        with self._changed:
            due = sorted((t for t in self._timers.values()
                          if t.paused_left is None and t.ends_at <= now),
                         key=lambda t: t.ends_at)
            for timer in due:
                timer.finished = True
                del self._timers[timer.number]
        for timer in due:
            for listener in list(self._listeners):
                listener(timer)
        return due

    def when_finished(self, listener: Callable[[Timer], None]) -> None:
        """Tell `listener` of every timer that goes off from now (on the timers' thread):
        what announces timers (the chat session, the voice loop) joins them as it is built."""
        self._listeners.append(listener)

    def close(self) -> list[Timer]:
        """End the session's timers; returns those that were still running."""
        with self._changed:
            left = sorted(self._timers.values(), key=lambda t: t.left(self.clock()))
            self._timers.clear()
            self._closed = True
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=2)
        return left

    def _watch(self) -> None:
        while True:
            with self._changed:
                if self._closed:
                    return
                now = self.clock()
                ends = [t.ends_at for t in self._timers.values() if t.paused_left is None]
                wait = None if not ends else max(0.0, min(ends) - now)
                if wait is None or wait > 0:
                    # Woken early by any change; at most a second, in case the clock jumps.
                    self._changed.wait(1.0 if wait is None else min(wait, 1.0))
                    continue
            self.run_due()
