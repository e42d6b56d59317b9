"""A reply started at the user's first pause, held back until the pause proves to be the end.

The transcript of a pause is ready before the end-of-speech wait is over, so the reply can
start then too: on a scratch copy of the conversation, with what it would show and say
held back. When the wait ends with no more speech the speculation is committed: what it
held is shown and played at once and it goes on as the turn's reply. If the user goes on
talking it is dropped: generation stops and nothing it held reaches the screen, the
speaker, the history or the replay's record.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future

import numpy as np

from assistant.events import Event
from assistant.tools import ToolOutput, ToolRefused, ToolRun
from assistant.voice.turns import TurnRecord
from audio.playback import AudioOutput
from models.base import CancelToken

DECISION_WAIT_S = 30.0
"""A speculation nobody decides on this long (the microphone went away) is dropped."""


class HeldOutput(AudioOutput):
    """An output that keeps what it is given until `release()` (or forgets it on `discard()`)."""

    def __init__(self, output: AudioOutput) -> None:
        self._output = output
        self._held: list[tuple[np.ndarray, int]] = []
        self._open = False
        self._discarded = False
        self._lock = threading.Lock()

    def play(self, pcm: np.ndarray, sample_rate: int, cancel_echo: bool = True) -> None:
        with self._lock:
            if self._discarded:
                return
            if not self._open:
                self._held.append((pcm, sample_rate))
                return
        self._output.play(pcm, sample_rate)

    def release(self) -> None:
        """Play what was held, and pass everything on from now."""
        with self._lock:
            held, self._held, self._open = self._held, [], True
            for pcm, rate in held:
                self._output.play(pcm, rate)

    def discard(self) -> None:
        with self._lock:
            self._held.clear()
            self._discarded = True

    def stop(self) -> None:
        if self._open:
            self._output.stop()
        else:
            self.discard()

    def wait(self, timeout: float | None = None) -> bool:
        return self._output.wait(timeout) if self._open else True

    @property
    def speaking(self) -> bool:
        return self._open and self._output.speaking

    @property
    def played_seconds(self) -> float:
        return self._output.played_seconds if self._open else 0.0

    def reset_counter(self) -> None:
        self._output.reset_counter()


class Speculation:
    """One pause's speculative reply: its events and audio held until it is decided."""

    def __init__(self, sample: int, transcript: Future, record: TurnRecord,
                 output: AudioOutput) -> None:
        self.sample = sample
        """Where the user's speech stopped: the utterance that ends there commits it."""
        self.transcript = transcript
        self.record = record
        self.output = HeldOutput(output)
        self.cancel = CancelToken()
        self.committed = False
        self._decided = threading.Event()
        self.lock = threading.Lock()
        """Held while the turn's start moves (the commit): timings are set under it."""
        self._held: list[tuple[float, Event]] = []
        self._on_commit: list[Callable[[], None]] = []

    @property
    def held_events(self) -> list[Event]:
        """What it would have shown so far, had it been committed."""
        with self.lock:
            return [event for _, event in self._held]

    @property
    def decided(self) -> bool:
        return self._decided.is_set()

    def emit(self, at: float, event: Event, show: Callable[[float, Event], None]) -> None:
        """Show `event` now if committed, else hold it (dropped with the speculation)."""
        with self.lock:
            if not self._decided.is_set():
                self._held.append((at, event))
                return
        if self.committed:
            show(at, event)

    def when_committed(self, action: Callable[[], None]) -> None:
        """Run `action` at the commit (now, if it was committed already)."""
        with self.lock:
            if not self._decided.is_set():
                self._on_commit.append(action)
                return
        if self.committed:
            action()

    def commit(self, started: float, show: Callable[[float, Event], None],
               first: Sequence[Event] = (), now: float | None = None) -> bool:
        """The wait ended with no more speech: the turn began at `started`. False if it was
        dropped before (the caller then answers the utterance the ordinary way). `first`
        is shown ahead of what was held (how the turn ended comes before what was heard)."""
        with self.lock:
            if self._decided.is_set():
                return self.committed
            shift_ms = (started - self.record.started) * 1000
            self.record.started = started
            timings = self.record.timings
            timings.shift(shift_ms)  # timed from the pause until now: from the turn's start
            if timings.first_audio_ms is not None:  # held until now
                released_ms = 0.0 if now is None else round((now - started) * 1000, 1)
                timings.first_audio_ms = max(released_ms, timings.first_audio_ms)
            self.committed = True
            for event in first:
                show(started, event)
            for at, event in self._held:
                show(at, event)
            self._held.clear()
            self.output.release()
            for action in self._on_commit:
                action()
            self._on_commit.clear()
            # Decided last: a reply that waited for it (a guarded tool) goes on as the
            # turn's current reply, its scratch conversation confirmed (the actions above).
            self._decided.set()
        return True

    def drop(self) -> None:
        """The user went on talking (or Parley is closing): forget all of it."""
        with self.lock:
            if self._decided.is_set():
                return
            self._decided.set()
            self._held.clear()
            self._on_commit.clear()
        self.cancel.cancel()
        self.output.discard()

    def wait(self, timeout: float = DECISION_WAIT_S) -> bool:
        """Block until decided; True if committed. Undecided after `timeout`: dropped."""
        if not self._decided.wait(timeout):
            self.drop()
        return self.committed

    def wait_decided(self, timeout: float) -> bool:
        """Whether it was decided within `timeout` (left undecided otherwise, unlike `wait`)."""
        return self._decided.wait(timeout)

    def guard(self, run: ToolRun) -> ToolRun:
        """A tool that changes something (a timer) runs only once the turn is confirmed."""

        def guarded(arguments: dict) -> ToolOutput | str:
            if not self.wait():
                raise ToolRefused("the user went on talking")
            return run(arguments)

        return guarded
