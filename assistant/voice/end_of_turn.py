"""From pauses and utterances to turns: transcripts started early, replies answered ahead.

At each pause in the user's speech the loop transcribes what was said so far and, with
`speculative_reply`, queues a `Speculation`: the reply worker answers it on a scratch copy
of the conversation, held back until the end-of-speech wait decides
(`assistant.voice.speculation`). The utterance that ends the wait at that pause commits it;
speech that resumes drops it, and the utterance is then transcribed and answered the
ordinary way.

A turn can also go on after it ended: speech that starts in its reply's first moments
(`ReplyWorker.can_continue`) stops that reply and takes it back, and the new utterance is
heard together with the turn's earlier speech, as one message (`started`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, replace

import numpy as np

from assistant.events import HeardPartial, TurnJudged
from assistant.voice.live_words import LiveTranscript
from assistant.voice.speculation import Speculation
from assistant.voice.turn_log import TurnLog
from assistant.voice.turn_queue import HeardTurn, SpeculativeTurn, TurnQueue
from assistant.voice.turn_words import unfinished_because, whole_sentence
from assistant.voice.turns import TimedEvent, TurnRecord, TurnSource, VoiceSettings
from audio.playback import AudioOutput
from audio.segmenter import SpeechPaused, TurnChecked, Utterance
from audio.turn_policy import Words
from models.errors import EngineError
from models.speech import STT_SAMPLE_RATE, SpeechToText, Transcript

log = logging.getLogger(__name__)

JOIN_GAP_S = 0.3
"""Silence put between a turn's speech and what the user went on to say, when the two are
transcribed as one (Whisper hears a fragment cut from its sentence worse)."""
NO_WORDS = "no words made out"
"""Why a pause whose speech gave no words does not end the turn (`turn-judged`)."""
WORDS_WAIT_S = 5.0
"""The longest the turn's end waits for the words of a pause (a machine so busy that the
transcript takes longer: the turn model alone decides)."""


@dataclass(frozen=True)
class PendingPause:
    """The last pause in the user's speech, while the end-of-speech wait goes on."""

    sample: int
    """Where the speech stopped: the utterance that ends there is this pause's."""
    transcript: Future
    """What was said up to the pause: `(Transcript, clock time it was ready)`."""
    speculation: Speculation | None
    """The reply started on it (with `speculative_reply`)."""


class EndOfTurn:
    """Turns the segmenter's pauses and utterances into queued turns, on one STT worker."""

    def __init__(self, settings: VoiceSettings, stt: SpeechToText, log: TurnLog,
                 turns: TurnQueue, output: AudioOutput, lock: threading.RLock,
                 clean: Callable[[str], str],
                 can_continue: Callable[[TurnRecord], bool] = lambda record: False,
                 continue_turn: Callable[[TurnRecord], bool] = lambda record: False) -> None:
        self.settings = settings
        self.stt = stt
        self.log = log
        self.turns = turns
        self.output = output
        self.lock = lock
        """The reply worker's lock: a commit makes its reply the current one, and keeps the
        records in the order turns were heard."""
        self.clean = clean
        """The transcript without the wake word, if it slipped in."""
        self.closing = False
        self._pending: PendingPause | None = None
        self._judged: list[TurnChecked] = []
        """What the turn model said at this utterance's pauses, for its turn's record."""
        self._stt = ThreadPoolExecutor(1, thread_name_prefix="stt")
        self.can_continue = can_continue
        """Whether speech starting now would continue this turn (its reply is young)."""
        self.continue_turn = continue_turn
        """Stops and takes back this turn's reply; False if it is too late."""
        self._open: tuple[TurnRecord, np.ndarray] | None = None
        """The last heard turn and its speech, while the user may still go on with it."""
        self._earlier: np.ndarray | None = None
        """The speech of the turn the user is going on with: heard before what they say
        now, as one message."""
        self._at_pause: tuple[int, Future] | None = None
        """The transcript of the speech up to the last pause (where it ended): asked for
        by the words check or the pause, whichever came first, made once."""
        self.live = LiveTranscript(self._stt.submit, self._words_so_far, log.render,
                                   log.clock, settings.live_transcript_s)
        """The words shown while the user speaks (`heard-partial`)."""

    def grew(self, samples: int, speech: Callable[[], np.ndarray | None]) -> None:
        """The utterance in progress reaches `samples`; `speech()` gives it (None once the
        user stopped speaking): its words so far are shown, now and then."""
        if self.closing:
            return

        def joined() -> np.ndarray | None:
            pcm = speech()
            return None if pcm is None else self._joined(pcm)

        self.live.grew(samples, joined)

    def words_heard(self, speech_pcm: np.ndarray, speech_end_sample: int) -> Words:
        """What the words said up to this pause say about the turn
        (`audio.turn_policy.WordsCheck`). Waits for the pause's transcript, which the reply
        needs anyway."""
        future = self._transcript_at(speech_end_sample, speech_pcm)
        try:
            transcript, _ = future.result(timeout=WORDS_WAIT_S)
        except (FutureTimeout, CancelledError, EngineError):
            return Words()
        if not transcript.text:
            # Speech, but no words Whisper could make out ("Please add eggs, butter and"
            # alone was "unclear"): ended here, the turn would be answered with nothing,
            # and what the user says next would be a turn without this speech.
            return Words(NO_WORDS)
        return Words(unfinished_because(transcript.text), whole_sentence(transcript.text))

    def _transcript_at(self, sample: int, pcm: np.ndarray) -> Future:
        if self._at_pause is not None and self._at_pause[0] == sample:
            return self._at_pause[1]
        self.live.pausing()  # the pause's words before any more of the live ones
        future = self._stt.submit(self._transcribe, self._joined(pcm))
        self._at_pause = (sample, future)
        return future

    def paused(self, event: SpeechPaused) -> None:
        """Transcribe what was said up to this pause, and start answering it, while the
        end-of-speech wait decides whether the user has finished."""
        future = self._transcript_at(event.sample, event.pcm)
        speculation = None
        if self.settings.speculative_reply and not self.closing:
            speculation = Speculation(event.sample, future,
                                      TurnRecord(TurnSource.AUDIO, self.log.clock()), self.output)
        self._replace_pending(PendingPause(event.sample, future, speculation))
        if speculation is not None:
            self.turns.put(SpeculativeTurn(speculation))

    def started(self) -> bool:
        """A new utterance began: what the turn model said belonged to the last one. True
        if it continues the last turn, whose reply was in its first moments: that reply
        stops and is taken back, and this speech is heard after the turn's own."""
        self._judged = []
        self.live.ended()  # what was shown of speech too short to be a turn is gone
        open_turn, self._open = self._open, None
        if open_turn is None or self.closing or not self.continue_turn(open_turn[0]):
            return False
        self._earlier = open_turn[1]
        return True

    @property
    def may_continue(self) -> bool:
        """Speech starting now would continue the last turn (the microphone must hear
        it, even while Parley speaks)."""
        open_turn = self._open
        return open_turn is not None and self.can_continue(open_turn[0])

    def speech_dropped(self) -> None:
        """What began after a turn's reply was taken back proved too short to be speech (a
        cough): the turn is heard as it was, and answered anew."""
        earlier, self._earlier = self._earlier, None
        if earlier is None or self.closing:
            return
        record = self.log.new(TurnSource.AUDIO)
        self.turns.put(HeardTurn(record, self._stt.submit(self._transcribe, earlier), False))
        self._opened(record, earlier, False)

    @property
    def continuing(self) -> bool:
        """A turn whose reply was taken back waits for the rest of what the user says."""
        return self._earlier is not None

    def judged(self, checked: TurnChecked) -> None:
        """The turn model was asked at a pause; its word goes into the turn's record."""
        log.debug("turn model at a %.0f ms pause: %.3f (%s)", checked.silence_ms,
                  checked.score, "finished" if checked.finished else "not finished, waiting")
        self._judged.append(checked)

    def forget_pause(self) -> None:
        """Speech resumed, or what follows is not the user's turn: the last pause's
        transcript is useless and its reply is dropped."""
        self._replace_pending(None)

    def utterance(self, utterance: Utterance, heard_at: float | None = None) -> None:
        """The end-of-speech wait ended: the turn is the pause's reply, if the utterance
        ends where that pause began, or a new transcript and reply. The turn starts at
        `heard_at`, the clock time its last audio came (now if None), so the time the
        turn model took to decide counts as the user's wait."""
        started = self.log.clock() if heard_at is None else heard_at
        pending, self._pending = self._pending, None
        judged, self._judged = self._judged, []
        partials = self.live.ended()
        speech = self._joined(utterance.speech_pcm)
        self._earlier = None
        speculation = pending.speculation if pending is not None else None
        if pending is not None and pending.sample == utterance.speech_end_sample:
            future = pending.transcript  # no speech since the pause: its transcript stands
            if speculation is not None and not utterance.cut:
                if self._commit(speculation, utterance, judged, started):
                    self._record_partials(speculation.record, partials)
                    self._opened(speculation.record, speech, utterance.cut)
                    return  # the reply under way is this turn's
                speculation = None
        else:
            future = self._stt.submit(self._transcribe, speech)
        if speculation is not None:
            speculation.drop()
        record = self.log.new(TurnSource.AUDIO, started)
        self.log.time_utterance(record, utterance)
        self._show_judged(record, judged)
        self._record_partials(record, partials)
        self.turns.put(HeardTurn(record, future, utterance.cut))
        self._opened(record, speech, utterance.cut)

    def _opened(self, record: TurnRecord, speech: np.ndarray, cut: bool) -> None:
        """`record`'s turn ended with `speech`; the user may yet go on with it."""
        self._open = (record, speech) if self.settings.turns_go_on and not cut else None

    def _joined(self, pcm: np.ndarray) -> np.ndarray:
        """`pcm` after the speech of the turn it continues, if any."""
        if self._earlier is None:
            return pcm
        gap = np.zeros(round(JOIN_GAP_S * STT_SAMPLE_RATE), dtype=np.int16)
        return np.concatenate([self._earlier, gap, pcm])

    @staticmethod
    def _record_partials(record: TurnRecord,
                         partials: list[tuple[float, HeardPartial]]) -> None:
        """The words shown while the turn was spoken (on screen already), first in its
        record, timed before its start."""
        record.events[0:0] = [TimedEvent((at - record.started) * 1000, event)
                              for at, event in partials]

    def _show_judged(self, record: TurnRecord, judged: list[TurnChecked]) -> None:
        show = self.log.show_in(record)
        for event in self._judged_events(judged):
            show(record.started, event)

    @staticmethod
    def _judged_events(judged: list[TurnChecked]) -> list[TurnJudged]:
        return [TurnJudged(round(checked.silence_ms), checked.score, checked.finished,
                           checked.words) for checked in judged]

    def close(self) -> None:
        """No more turns: a reply answered ahead is dropped, none starts."""
        self.closing = True
        self._open = None
        self.forget_pause()

    def shutdown(self) -> None:
        self._stt.shutdown(wait=True, cancel_futures=True)

    def _replace_pending(self, new: PendingPause | None) -> None:
        """The last pause's transcript is cancelled if it has not started (so the one that
        counts does not queue behind it), and its reply is dropped."""
        old, self._pending = self._pending, new
        if old is not None:
            old.transcript.cancel()
            if old.speculation is not None:
                old.speculation.drop()

    def _commit(self, speculation: Speculation, utterance: Utterance,
                judged: list[TurnChecked], started: float) -> bool:
        """The wait ended with no more speech: the speculative reply becomes the turn's."""
        record = speculation.record
        with self.lock:  # the records' order is the order turns were heard
            if not speculation.commit(started, self.log.show_in(record),
                                      first=self._judged_events(judged),
                                      now=self.log.clock()):
                return False
            self.log.time_utterance(record, utterance)
            self.log.keep(record)
        return True

    def _words_so_far(self, pcm: np.ndarray) -> str:
        """A live pass's words; one that fails shows nothing (the pause's transcript
        reports the error, if it fails too)."""
        try:
            return self.clean(self.stt.transcribe(pcm).text)
        except EngineError:
            log.debug("a live transcript pass failed", exc_info=True)
            return ""

    def _transcribe(self, pcm: np.ndarray) -> tuple[Transcript, float]:
        transcript = self.stt.transcribe(pcm)
        transcript = replace(transcript, text=self.clean(transcript.text))
        return transcript, self.log.clock()
