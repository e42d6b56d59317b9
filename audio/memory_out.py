"""Audio out into memory, for headless replay and tests: `MemorySpeaker`."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from audio.echo import FarEnd
from audio.pcm import to_int16
from audio.playback import AudioOutput


class Clock(Protocol):
    """What MemorySpeaker needs of time; the `time` module is one."""

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float, /) -> None: ...


@dataclass
class _Scheduled:
    pcm: np.ndarray
    rate: int
    start: float
    """Clock time at which this chunk starts (or started) playing."""

    @property
    def seconds(self) -> float:
        return len(self.pcm) / self.rate

    def played(self, now: float) -> float:
        return min(self.seconds, max(0.0, now - self.start))


class MemorySpeaker(AudioOutput):
    """Plays into memory, for headless replay and tests.

    `realtime=True`: chunks play back to back at real-time pace on `clock`, so `stop()`
    mid-sentence keeps only what had played. No thread is needed: the playhead is computed
    from the clock, which makes it exact with a fake clock. `realtime=False`: each chunk
    counts as played the moment it is queued. `keep_chunks=False`: audio that has played is
    let go at the start of the next reply (`reset_counter`), so a long replay does not keep
    every reply's audio (44 KB a second); `chunks` then holds the current reply's.
    """

    def __init__(self, realtime: bool = False, clock: Clock = time,
                 keep_chunks: bool = True, far_end: FarEnd | None = None) -> None:
        self.realtime = realtime
        self.far_end = far_end
        """With `realtime`, gets each chunk with the time it starts playing (replay's
        simulated echo)."""
        self.clock = clock
        self.keep_chunks = keep_chunks
        self._let_go = 0.0
        """Seconds of audio played and let go (keep_chunks=False)."""
        self._items: list[_Scheduled] = []
        self._end = float("-inf")
        """Clock time at which everything queued has played."""
        self._counted = 0.0
        """Seconds played before the last reset_counter()."""
        self._lock = threading.Lock()

    def play(self, pcm: np.ndarray, sample_rate: int, cancel_echo: bool = True) -> None:
        pcm = to_int16(pcm)
        now = self.clock.monotonic()
        with self._lock:
            start = max(now, self._end) if self.realtime else now - len(pcm) / sample_rate
            item = _Scheduled(pcm, sample_rate, start)
            self._items.append(item)
            self._end = max(self._end, start + item.seconds)
        if self.far_end is not None and self.realtime:
            self.far_end.push(pcm if cancel_echo else np.zeros_like(pcm), sample_rate,
                              at=start)

    def stop(self) -> None:
        now = self.clock.monotonic()
        with self._lock:
            self._items = [item for item in self._items if item.played(now) > 0]
            for item in self._items:
                item.pcm = item.pcm[: round(item.played(now) * item.rate)]
            self._end = min(self._end, now)
        if self.far_end is not None:
            self.far_end.clear()

    def wait(self, timeout: float | None = None) -> bool:
        waited = 0.0
        while True:
            with self._lock:
                remaining = self._end - self.clock.monotonic()
            if remaining <= 0:
                return True
            if timeout is not None and waited >= timeout:
                return False
            # Short sleeps, so a stop() from another thread ends the wait promptly.
            step = min(remaining, 0.02, *(() if timeout is None else (timeout - waited,)))
            self.clock.sleep(step)
            waited += step

    @property
    def speaking(self) -> bool:
        with self._lock:
            return self.clock.monotonic() < self._end

    @property
    def played_seconds(self) -> float:
        return self._played_total(self.clock.monotonic()) - self._counted

    def reset_counter(self) -> None:
        now = self.clock.monotonic()
        if not self.keep_chunks:
            with self._lock:
                done = [item for item in self._items if item.played(now) >= item.seconds]
                self._let_go += sum(item.seconds for item in done)
                self._items = [item for item in self._items if item.played(now) < item.seconds]
        self._counted = self._played_total(now)

    def _played_total(self, now: float) -> float:
        with self._lock:
            return self._let_go + sum(item.played(now) for item in self._items)

    @property
    def chunks(self) -> list[tuple[np.ndarray, int]]:
        """(pcm, rate) of what has been played so far; a chunk still playing is cut at now."""
        now = self.clock.monotonic()
        with self._lock:
            return [(item.pcm[: round(item.played(now) * item.rate)], item.rate)
                    for item in self._items if item.played(now) > 0]
