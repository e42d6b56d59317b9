"""A timer going off in voice: a chime and the announcement, again until the user answers."""

from __future__ import annotations

import time
from collections.abc import Callable

from assistant.events import Event, ReplyDone, Sentence
from assistant.timers import Timer, finished_event
from assistant.voice.turns import TurnRecord
from audio.chime import chime
from models.base import CancelToken


class RingsTimers:
    """The voice loop's part for timers (a mixin: it uses the loop's queue and speaker)."""

    def ring(self, timer: Timer) -> None:
        """A timer went off (on the timers' thread): announce it once the speaker is free."""
        record = self._record("timer")
        self._turns.put((record, timer))

    def _ring(self, record: TurnRecord, timer: Timer) -> None:
        """Chime and announce, again after a pause, until the user speaks or types."""
        finished = finished_event(timer)
        self._emit(record, finished)
        since = self.clock()

        def announce(on_event: Callable[[Event], None], cancel: CancelToken) -> ReplyDone:
            on_event(Sentence(finished.text))
            return ReplyDone(finished.text)

        for number in range(self.settings.ring_times):
            if number and not self._unanswered_for(self.settings.ring_gap_s, since):
                return
            self._reply(record, announce, sound=chime(self.tts.sample_rate))
            if record.interrupted:
                return

    def _unanswered_for(self, seconds: float, since: float) -> bool:
        """Wait `seconds`; False as soon as the user speaks, types or stops Parley."""
        deadline = self.clock() + seconds
        while True:
            if (self._speech_started_at > since or self._interrupted_at > since
                    or not self._turns.empty() or self._closing):
                return False
            if self.clock() >= deadline:
                return True
            time.sleep(0.02)

