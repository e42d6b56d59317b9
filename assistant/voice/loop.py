"""The voice loop: heard utterances and typed lines in, spoken replies out.

Live voice and headless replay both drive a `VoiceLoop`: they differ only in where the
audio comes from (a microphone, or a file fed at real-time pace) and where it goes (a
speaker, or memory). Threads stay at the edges: the caller's thread feeds audio through
the segmenter; speech-to-text has one worker; replies run one at a time on another, so
listening goes on while Parley thinks and speaks.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace

import numpy as np

from assistant.conversation import Conversation
from assistant.events import (
    Error,
    Event,
    Heard,
    Interrupted,
    ReplyDone,
    Sentence,
    Spoken,
    Stage,
    Status,
    TextDelta,
)
from assistant.voice.ahead import AnswersAhead
from assistant.voice.alarm import RingsTimers
from assistant.voice.idle import IdlesBetweenTurns, TurnQueue
from assistant.voice.listening import Listens
from assistant.voice.speculation import Speculation
from assistant.voice.speech_out import SpeakerStalled, SpokenReply
from assistant.voice.turns import (
    FIRST_AUDIO_WAIT_S,
    TurnRecord,
    VoiceSettings,
    first_samples,
    heard_events,
)
from assistant.workers import Worker
from audio.segmenter import Segmenter, SpeechPaused, SpeechResumed, SpeechStarted, Utterance
from audio.wakeword import WakeWordDetector
from models.base import CancelToken
from models.errors import EngineError
from models.speech import SpeechToText, TextToSpeech, Transcript

log = logging.getLogger(__name__)


class VoiceLoop(RingsTimers, AnswersAhead, Listens, IdlesBetweenTurns):
    def __init__(
        self,
        conversation: Conversation,
        stt: SpeechToText,
        tts: TextToSpeech,
        output,
        segmenter: Segmenter,
        settings: VoiceSettings | None = None,
        render: Callable[[Event], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        keep_audio: bool = False,
        keep_records: bool = True,  # replay reports them; live voice lets them go
        wake_word: WakeWordDetector | None = None,
    ) -> None:
        self.wake_word = wake_word
        self.conversation = conversation
        self.stt = stt
        self.tts = tts
        self.output = output
        self.segmenter = segmenter
        self.settings = settings or VoiceSettings()
        # The loop has the time between turns: the summary is written in it, not in replies.
        conversation.settings = replace(conversation.settings,
                                        idle_summaries=self.settings.idle_summaries)
        self.render = render or (lambda event: None)
        self.clock = clock
        self.keep_audio = keep_audio
        self.keep_records = keep_records
        self.records: list[TurnRecord] = []
        self.prefilled_tokens = 0
        """Prompt tokens processed between turns, ahead of the replies that use them."""
        self.listening = not self.settings.push_to_talk
        self._turns = TurnQueue(self._turn_queued)
        self._start_idle_state()
        self._stt = ThreadPoolExecutor(1, thread_name_prefix="stt")
        self._speculative: tuple[int, Future, Speculation | None] | None = None
        """The last pause: where speech stopped, its transcript, and the reply started on
        it (with `speculative_reply`)."""
        self._speech: SpokenReply | None = None
        self._cancel: CancelToken | None = None
        self._quiet_until = 0.0
        self._lock = threading.RLock()  # a commit registers the reply it makes current
        self._audio_lock = threading.Lock()
        """The segmenter is fed by the microphone's thread and flushed by Enter's."""
        self._current: TurnRecord | None = None
        self._interrupted_at = float("-inf")
        self._speech_started_at = float("-inf")
        self._closing = False
        self._input_ended = False
        self._speculating: Speculation | None = None
        """The speculation the reply worker is answering, if any."""
        self._worker = Worker(self._answer_turns, "reply")

    # -- audio in (the caller's thread) -----------------------------------------------

    def feed_audio(self, pcm: np.ndarray) -> None:
        """Microphone (or file) audio, 16 kHz mono int16, in chunks of any size."""
        if self.wake_word is not None and (pcm := self._through_wake_word(pcm)) is None:
            return  # asleep: only the wake word is listened for
        with self._audio_lock:
            if not self.listening or self._ignoring_microphone():
                # Speech the user began before Parley started talking is theirs: keep it.
                begun = self.segmenter.flush() if self.segmenter.in_speech else None
                self.segmenter.reset()
                if begun is not None and self.listening:
                    self._dispatch(begun)
                self._replace_speculative(None)
                return
            seen = self.segmenter.samples_seen
            events = self.segmenter.feed(pcm)
        for event in events:
            if isinstance(event, SpeechStarted):
                self._speech_started_at = self.clock()
                self._maybe_barge_in(event, seen + len(pcm))
            elif isinstance(event, SpeechPaused) and self.settings.speculative_stt:
                self._paused(event)
            elif isinstance(event, SpeechResumed):
                self._replace_speculative(None)
            elif isinstance(event, Utterance):
                self._dispatch(event)

    def start_listening(self) -> None:
        """Push-to-talk: Enter was pressed; listen from now."""
        with self._audio_lock:
            self.segmenter.reset()
            self._replace_speculative(None)
            self.listening = True
        self.render(Status("Listening… (Enter again to stop)"))

    def stop_listening(self) -> None:
        """Push-to-talk: the second Enter ends the utterance now; end of input in replay."""
        with self._audio_lock:  # Enter comes from another thread than the microphone
            utterance = self.segmenter.flush()
            if self.settings.push_to_talk:
                self.listening = False
        if utterance is not None:
            self._dispatch(utterance)

    def end_of_input(self) -> None:
        """Nothing more will be said (replay's last turn): no next prompt to prepare."""
        self._input_ended = True

    # -- text in ------------------------------------------------------------------------

    def submit_text(self, text: str) -> TurnRecord | None:
        text = text.strip()
        if not text:
            return None
        with self._audio_lock:  # typed instead: a reply started on a pause is not wanted
            self._replace_speculative(None)
        record = self._record("text")
        self._turns.put((record, text))
        return record

    # -- control ------------------------------------------------------------------------

    @property
    def replying(self) -> bool:
        """A turn is being transcribed, answered or spoken, or waits to be."""
        return self._cancel is not None or self._turns.unfinished_tasks > 0

    def interrupt(self) -> None:
        """Stop the current reply (cancel generation, silence its speech) and drop the turns
        heard or typed before now that are still waiting or being transcribed."""
        self._interrupted_at = self.clock()
        self._cancel_idle()
        with self._lock:
            if self._cancel is not None:
                self._cancel.cancel()
            if self._speech is not None:
                self._speech.stop()

    @property
    def quiet(self) -> bool:
        """The echo tail after Parley last spoke has passed."""
        return self.clock() >= self._quiet_until

    def wait_quiet(self) -> None:
        """Wait out the echo tail after Parley last spoke (replay's next clip starts then)."""
        time.sleep(max(0.0, self._quiet_until - self.clock()))

    def close(self, timeout: float | None = None) -> bool:
        """Stop the reply in progress and end the worker; False if after `timeout` it is
        still finishing a step (call again to keep waiting).

        llama.cpp, Whisper and Piper run native code on the worker threads, and none can be
        stopped mid-step: leaving while one runs crashes the interpreter at exit (a
        segfault on /quit, seen while a busy machine slowed a prompt evaluation). Each
        step is bounded, so this waits for it.
        """
        if not self._closing:
            self._closing = True
            with self._audio_lock:
                self._replace_speculative(None)
            self.interrupt()
            self._turns.put(None)
        if not self._worker.wait(timeout):
            return False
        self._stt.shutdown(wait=True, cancel_futures=True)
        return True

    # -- inside ---------------------------------------------------------------------------

    def _time_utterance(self, record: TurnRecord, utterance: Utterance) -> None:
        """The end-of-speech wait and the utterance's length, for the turn it makes."""
        record.timings["end_of_speech_ms"] = round(utterance.end_ms - utterance.speech_end_ms, 1)
        record.timings["speech_seconds"] = round(utterance.duration_s, 2)

    def _record(self, source: str) -> TurnRecord:
        record = TurnRecord(source, self.clock())
        self._keep(record)
        return record

    def _answer_turns(self) -> None:
        self._between_turns(None)
        while True:
            item = self._turns.get()
            if item is None:
                self._turns.task_done()
                return
            record, payload = item
            waited = self._idle_waited()
            try:
                self._turn(record, payload)
            except Exception as exc:  # a bug; one bad turn must not end the session
                log.exception("a voice turn failed")
                self._emit(record, Error(Stage.VOICE, f"That turn failed ({exc}); the "
                                                      "conversation is kept, try again."))
            finally:
                if waited is not None:  # set now: a held reply's commit shifts the others
                    record.timings[waited[0]] = waited[1]
                record.finished.set()
                self._idle_done.clear()  # the work between turns is due before it is idle
                self._turns.task_done()
                self._between_turns(record)

    def _ms_since(self, record: TurnRecord, at: float | None = None) -> float:
        return round(((self.clock() if at is None else at) - record.started) * 1000, 1)

    def _turn(self, record: TurnRecord, payload) -> None:
        if isinstance(payload, Speculation):
            self._answer_speculation(payload)
            return
        if record.source == "timer":
            self._ring(record, payload)
            return
        if record.started < self._interrupted_at:
            return  # the user stopped Parley after this was said
        if record.source == "audio":
            future, cut = payload
            try:
                transcript, heard_at = future.result()
            except EngineError as exc:
                self._emit(record, Error(Stage.STT, f"Speech-to-text failed ({exc}); say it "
                                                    "again or type it."))
                return
            self._heard(record, transcript, heard_at, cut)
            log.debug("heard %.1f s of speech: transcript %.0f ms after the end of speech "
                      "(%s)", record.timings.get("speech_seconds") or 0.0,
                      record.timings["stt_ms"], transcript.rejected or "words")
            if not transcript.text or record.started < self._interrupted_at:
                return
            text = transcript.text
        else:
            text = payload
        self._answer(record, text, self.conversation)

    def _heard(self, record: TurnRecord, transcript: Transcript, heard_at: float,
               cut: bool) -> None:
        """The transcript is ready: time it and show what was heard."""
        self._time(record, "stt_ms", heard_at)
        self._emit(record, Heard(transcript.text, round(transcript.confidence, 3),
                                 transcript.rejected, cut))

    def _answer(self, record: TurnRecord, text: str, conversation: Conversation,
                speculation: Speculation | None = None) -> None:
        """Reply to `text` in `conversation` (a scratch copy, for a speculation), aloud."""
        record.heard = text
        self._reply(record, lambda on_event, cancel: conversation.reply(
            text, on_event, cancel, self.settings.first_clause_words), speculation=speculation,
                    conversation=conversation)

    def _reply(self, record: TurnRecord,
               answer: Callable[[Callable[[Event], None], CancelToken], ReplyDone | None],
               sound: np.ndarray | None = None,
               speculation: Speculation | None = None,
               conversation: Conversation | None = None) -> None:
        """Speak what `answer` produces, sentence by sentence (after `sound`, if any); with
        `speculation`, held back until it is committed. A cut-off reply is noted in
        `conversation`, the one it was made in (a speculation's scratch copy)."""
        cancel = speculation.cancel if speculation is not None else CancelToken()
        speech = SpokenReply(
            self.tts, speculation.output if speculation is not None else self.output, cancel,
            on_sentence=lambda sentence: self._spoken(record, sentence, speech),
            on_error=lambda message: self._emit(record, Error(Stage.TTS, message)),
            on_audio=record.audio.append if self.keep_audio else None,
            clock=self.clock)
        def make_current() -> None:
            with self._lock:
                self._cancel, self._speech, self._current = cancel, speech, record

        if speculation is None:
            make_current()
        else:
            speculation.when_committed(make_current)
        if sound is not None:
            speech.play_sound(sound)

        def on_event(event: Event) -> None:
            if isinstance(event, TextDelta) and "first_token_ms" not in record.timings:
                self._time(record, "first_token_ms")
            if not isinstance(event, ReplyDone):  # shown once the reply's outcome is known
                self._emit(record, event)
            if isinstance(event, Sentence) and not cancel.cancelled:
                first = "first_sentence_ms" not in record.timings
                if first:
                    self._time(record, "first_sentence_ms")
                speech.say(event.text)
                if first and self.settings.first_audio_first:
                    speech.first_audio.wait(FIRST_AUDIO_WAIT_S)

        try:
            done = answer(on_event, cancel)
            if speculation is not None and not speculation.wait():
                speech.stop()  # dropped: what it made was never shown or played
                return
            speech.close()
            try:
                speech.join()
            except SpeakerStalled as exc:  # the speaker failed: the reply stands as text
                self._emit(record, Error(Stage.TTS, f"{exc} The reply is shown as text."))
        except BaseException:
            speech.stop()  # an unexpected failure: say nothing more of this reply
            raise
        finally:
            speech.close()  # the speaking worker must never wait for sentences forever
            with self._lock:
                self._cancel, self._speech, self._current = None, None, None
            self._reply_ended(record, speech, speculation)
        record.reply = done.text if done is not None else ""
        record.spoken_seconds = round(speech.spoken_seconds, 2)
        record.interrupted = speech.stopped
        if speech.stopped:  # sentences synthesized ahead but never heard were not spoken
            record.events = heard_events(record.events, speech.spoken_seconds)
        if speech.stopped and record.audio:  # keep only the audio that was actually heard
            record.audio = first_samples(record.audio,
                                          round(speech.spoken_seconds * self.tts.sample_rate))
        if speech.stopped and done is not None and done.text and record.source != "timer":
            heard = speech.heard_text()
            (conversation or self.conversation).note_heard(heard)
            self._emit(record, Interrupted(record.spoken_seconds, heard))
        if done is not None:
            self._emit(record, done)
        first = record.timings.get("first_audio_ms")
        if first is not None:
            record.timings["latency_ms"] = round(
                first + (record.timings.get("end_of_speech_ms") or 0.0), 1)

    def _spoken(self, record: TurnRecord, sentence, speech: SpokenReply) -> None:
        if "first_audio_ms" not in record.timings:
            # Set as it happens, so replay can time a barge-in into this reply.
            self._time(record, "first_audio_ms", speech.first_audio_at)
        self._emit(record, Spoken(sentence.text, round(sentence.seconds, 2)))
