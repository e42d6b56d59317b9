"""A timer going off in voice: a chime and the announcement, again until the user answers."""

from __future__ import annotations

import time
from collections.abc import Callable

from assistant.events import Event, ReplyDone, Sentence
from assistant.timers import Timer, finished_event
from assistant.voice.turn_log import TurnLog
from assistant.voice.turns import TurnRecord, VoiceSettings
from audio.chime import chime
from models.base import CancelToken
from models.speech import SpokenAudio

Answer = Callable[[Callable[[Event], None], CancelToken], ReplyDone | None]
Speak = Callable[[TurnRecord, Answer, SpokenAudio], None]
"""Says what an answer produces, after a sound (the reply worker's `speak`)."""


class Ringer:
    """Rings a timer on the reply worker: it speaks through the worker's `speak`, and stops
    as soon as `answered_since(t)` says the user spoke, typed or stopped Parley after `t`."""

    def __init__(self, settings: VoiceSettings, log: TurnLog, sample_rate: int,
                 speak: Speak, answered_since: Callable[[float], bool]) -> None:
        self.settings = settings
        self.log = log
        self.sample_rate = sample_rate
        """The voice's rate, for the chime (made before any speech)."""
        self.speak = speak
        self.answered_since = answered_since

    def ring(self, record: TurnRecord, timer: Timer) -> None:
        """Chime and announce, again after a pause, until the user speaks or types."""
        finished = finished_event(timer)
        self.log.emit(record, finished)
        since = self.log.clock()

        def announce(on_event: Callable[[Event], None], cancel: CancelToken) -> ReplyDone:
            on_event(Sentence(finished.text))
            return ReplyDone(finished.text)

        for number in range(self.settings.ring_times):
            if number and not self._unanswered_for(self.settings.ring_gap_s, since):
                return
            self.speak(record, announce, SpokenAudio(chime(self.sample_rate), self.sample_rate))
            if record.interrupted:
                return

    def _unanswered_for(self, seconds: float, since: float) -> bool:
        """Wait `seconds`; False as soon as the user speaks, types or stops Parley."""
        clock = self.log.clock
        deadline = clock() + seconds
        while True:
            if self.answered_since(since):
                return False
            if clock() >= deadline:
                return True
            time.sleep(0.02)
