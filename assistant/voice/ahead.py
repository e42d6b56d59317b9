"""The voice loop's part from pauses and utterances to turns (a mixin of `VoiceLoop`).

At each pause the loop transcribes what was said so far and, with `speculative_reply`,
queues a `Speculation` on the reply worker: it answers on a scratch copy of the
conversation, held back until the end-of-speech wait decides (`assistant.voice.speculation`).
The utterance that ends the wait commits it, or is answered the ordinary way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from contextlib import nullcontext
from dataclasses import replace

import numpy as np

from assistant.events import Event
from assistant.voice.speculation import Speculation
from assistant.voice.turns import TurnRecord, event_json
from audio.segmenter import SpeechPaused, Utterance
from models.errors import EngineError
from models.speech import Transcript

log = logging.getLogger(__name__)


class AnswersAhead:
    """Starts, commits and drops the loop's speculative replies; every event of a turn goes
    through `_emit`, which holds back those of a reply not yet committed."""

    def _paused(self, event: SpeechPaused) -> None:
        """Transcribe what was said up to this pause, and start answering it, while the
        end-of-speech wait decides whether the user has finished."""
        future = self._stt.submit(self._transcribe, event.pcm)
        speculation = None
        if self.settings.speculative_reply and not self._closing:
            speculation = Speculation(event.sample, future, TurnRecord("audio", self.clock()),
                                      self.output)
        self._replace_speculative((event.sample, future, speculation))
        if speculation is not None:
            self._turns.put((speculation.record, speculation))

    def _replace_speculative(self, new: tuple[int, Future, Speculation | None] | None) -> None:
        """Speech resumed or a newer pause came: the last pause's transcript is useless
        (cancelled if it has not started, so the one that counts does not queue behind
        it), and its reply is dropped."""
        old, self._speculative = self._speculative, new
        if old is not None:
            old[1].cancel()
            if old[2] is not None:
                old[2].drop()

    def _commit(self, speculation: Speculation, utterance: Utterance) -> bool:
        """The wait ended with no more speech: the speculative reply becomes the turn's."""
        record = speculation.record
        with self._lock:  # the records' order is the order turns were heard
            if not speculation.commit(self.clock(), self._show_in(record)):
                return False
            self._time_utterance(record, utterance)
            self._keep(record)
        return True

    def _keep(self, record: TurnRecord) -> None:
        # Live voice reads no records: kept, they would grow with every turn of a session.
        if self.keep_records:
            self.records.append(record)

    def _held_by(self, record: TurnRecord) -> Speculation | None:
        """The speculation answering `record`'s turn ahead, if it is one: its events and
        timings go through it (held back until it is committed)."""
        speculation = self._speculating
        return speculation if speculation is not None and speculation.record is record else None

    def _emit(self, record: TurnRecord, event: Event) -> None:
        speculation = self._held_by(record)
        if speculation is not None:
            speculation.emit(self.clock(), event, self._show_in(record))
        else:
            self._show_in(record)(self.clock(), event)

    def _show_in(self, record: TurnRecord) -> Callable[[float, Event], None]:
        def show(at: float, event: Event) -> None:
            # Held events appear when the speculation is committed: at 0 ms, not before.
            record.events.append(event_json(event, max(0.0, at - record.started) * 1000))
            self.render(event)

        return show

    def _answer_speculation(self, speculation: Speculation) -> None:
        """Answer a pause's transcript on a scratch copy of the conversation, held back
        until the end-of-speech wait decides; adopted if committed, forgotten if dropped."""
        record = speculation.record
        if speculation.decided and not speculation.committed:
            return  # the user went on talking before it began
        try:
            transcript, heard_at = speculation.transcript.result()
        except (CancelledError, EngineError):
            transcript = heard_at = None
        if transcript is None or not transcript.text:
            # Nothing to answer ahead: if the turn ends here, it goes the ordinary way.
            if speculation.wait():
                self._turn(record, (speculation.transcript, False))
            return
        forked_from = self.conversation.history.messages
        scratch = self.conversation.fork(self.conversation.tools.guarded(speculation.guard))
        # Confirmed, it is the conversation's reply: what it says is kept from then on,
        # not only once it is done and adopted (a saved conversation writes it at once).
        speculation.when_committed(lambda: self.conversation.confirm_fork(scratch))
        self._speculating = speculation
        try:
            self._heard(record, transcript, heard_at, False)
            self._answer(record, transcript.text, scratch, speculation)
        finally:
            self._speculating = None
        if speculation.committed and not self.conversation.adopt(scratch, forked_from):
            log.debug("the conversation changed during a speculative reply; it was not kept")

    def _time(self, record: TurnRecord, key: str, at: float | None = None) -> None:
        """Set a timing (ms from the turn's start); a held reply's turn start moves when it
        is committed, so its timings are set under the speculation's lock."""
        speculation = self._held_by(record)
        with speculation.lock if speculation is not None else nullcontext():
            record.timings[key] = self._ms_since(record, at)

    def _transcribe(self, pcm: np.ndarray) -> tuple[Transcript, float]:
        transcript = self.stt.transcribe(pcm)
        if self.wake_word is not None:
            transcript = replace(transcript, text=self._without_wake_word(transcript.text))
        return transcript, self.clock()

    def _dispatch(self, utterance: Utterance) -> None:
        if self.settings.push_to_talk and not utterance.cut:
            self.listening = False  # the end-of-speech silence ends a push-to-talk turn
        speculative, self._speculative = self._speculative, None
        speculation = speculative[2] if speculative is not None else None
        if speculative is not None and speculative[0] == utterance.speech_end_sample:
            future = speculative[1]  # no speech since the pause: its transcript stands
            if speculation is not None and not utterance.cut:
                if self._commit(speculation, utterance):
                    return  # the reply under way is this turn's
                speculation = None
        else:
            future = self._stt.submit(self._transcribe, utterance.speech_pcm)
        if speculation is not None:
            speculation.drop()
        record = self._record("audio")
        self._time_utterance(record, utterance)
        self._turns.put((record, (future, utterance.cut)))
