"""The voice loop: heard utterances and typed lines in, spoken replies out.

Live voice and headless replay both drive a `VoiceLoop`: they differ only in where the
audio comes from (a microphone, or a file fed at real-time pace) and where it goes (a
speaker, or memory). Threads stay at the edges: the caller's thread feeds audio through
the segmenter; speech-to-text has one worker; replies run one at a time on another, so
listening goes on while Parley thinks and speaks.

`VoiceLoop` only wires its parts together and routes audio between them:

- `Listener` (listening.py): what is heard; half duplex, barge-in, echo tail, wake word;
- `EndOfTurn` (end_of_turn.py): pauses and utterances into queued turns, with the reply
  answered ahead at a pause (`Speculation`, speculation.py);
- `TurnQueue` (turn_queue.py): the typed turns waiting for the reply worker;
- `ReplyWorker` (reply_worker.py): answers them one at a time, aloud; timers ring
  through it (`Ringer`, alarm.py); the work between turns after each (`BetweenTurns`);
- `SpokenApproval` (approval.py): the worker's step in which a tool that asks first asks
  aloud, inside the reply, and the user's next turn is the answer;
- `TurnLog` (turn_log.py): every turn's events and timings, in `records`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np

from assistant.between_turns import BetweenTurns
from assistant.conversation import Conversation
from assistant.events import Event, Status, Wake
from assistant.timers import Timer, Timers
from assistant.voice.approval import AnsweredBy
from assistant.voice.end_of_turn import EndOfTurn
from assistant.voice.listening import Listener, TappedOutput
from assistant.voice.reply_worker import ReplyWorker
from assistant.voice.speech_out import SpokenReply
from assistant.voice.turn_log import TurnLog
from assistant.voice.turn_queue import Stop, TimerRang, TurnQueue, TypedTurn
from assistant.voice.turns import TurnRecord, TurnSource, VoiceSettings
from assistant.workers import Worker
from audio.segmenter import (
    Segmenter,
    SpeechPaused,
    SpeechResumed,
    SpeechStarted,
    TurnChecked,
    Utterance,
)
from audio.wakeword import WakeWordDetector
from models.speech import SpeechToText, TextToSpeech


class VoiceLoop:
    """A voice conversation: feed it audio and typed lines; it answers aloud."""

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
        timers: Timers | None = None,
        answered_by: AnsweredBy | None = None,
        show_all_between_turns: bool = False,
    ) -> None:
        """`timers`: the session's, whose timers going off this loop announces;
        `answered_by`: where the answers to its questions come from instead of the user
        (a replay's session file); `show_all_between_turns`: `render` is given every event
        of the work between turns (the summary's start too), not only its outcome."""
        self.conversation = conversation
        """Whether its summary is written between turns is its own setting
        (`ReplySettings.idle_summaries`), chosen where it was built."""
        self.stt = stt
        self.tts = tts
        self.output = output
        self.segmenter = segmenter
        self.settings = settings or VoiceSettings()
        self.render = render or (lambda event: None)
        self.clock = clock
        self.log = TurnLog(clock, self.render, keep_records, show_all_between_turns)
        self.listener = Listener(self.settings, clock, output, segmenter, wake_word,
                                 tts.sample_rate)
        # What replies play is shown to the echo probe, which looks for it in the microphone.
        played = TappedOutput(output, self.listener.played)
        self.between_turns = BetweenTurns(conversation, self.settings.prefill, clock)
        self.between_turns.expect()  # the worker's first run, before any turn
        self.turns = TurnQueue(self.between_turns.stop)  # a turn goes before that work
        self.replies = ReplyWorker(conversation, tts, played, self.settings, self.log,
                                   self.turns, self.between_turns, self.listener, segmenter,
                                   keep_audio, answered_by)
        self.end_of_turn = EndOfTurn(self.settings, stt, self.log, self.turns, played,
                                     self.replies.lock, self.listener.without_wake_word,
                                     self.replies.can_continue, self.replies.continue_turn)
        self._audio_lock = threading.Lock()
        """The segmenter is fed by the microphone's thread and flushed by Enter's."""
        self._worker = Worker(self.replies.run, "reply")
        if timers is not None:
            timers.when_finished(self.ring)

    @property
    def records(self) -> list[TurnRecord]:
        return self.log.records

    @property
    def prefilled_tokens(self) -> int:
        """Prompt tokens processed between turns, ahead of the replies that use them."""
        return self.between_turns.prepared_tokens

    @property
    def listening(self) -> bool:
        return self.listener.listening

    @property
    def wake_word(self) -> WakeWordDetector | None:
        """Listened for first, if any: asleep, nothing else is heard."""
        return self.listener.wake_word

    @wake_word.setter
    def wake_word(self, detector: WakeWordDetector | None) -> None:
        self.listener.wake_word = detector

    # -- audio in (the caller's thread) -----------------------------------------------

    def feed_audio(self, pcm: np.ndarray) -> None:
        """Microphone (or file) audio, 16 kHz mono int16, in chunks of any size."""
        if self.wake_word is not None:
            pcm, woke_at = self.listener.through_wake_word(pcm)
            if woke_at is not None:
                self._woke(woke_at)
            if pcm is None:
                return  # asleep: only the wake word is listened for
        with self._audio_lock:
            heard = self.listener.hear(pcm, self._speech, self._may_continue(),
                                       self.segmenter.in_speech)
            if heard is None:
                self._ignore()
                return
        for block in heard:
            self._hear(block)

    def _ignore(self) -> None:
        """The microphone is not listened to now (Parley speaks, half duplex)."""
        # Speech the user began before Parley started talking is theirs: keep it.
        begun = self.segmenter.flush() if self.segmenter.in_speech else None
        self.segmenter.reset()
        if begun is not None and self.listener.listening:
            self._utterance(begun)
        elif self.end_of_turn.continuing:
            self.end_of_turn.speech_dropped()
        self.end_of_turn.forget_pause()

    def _hear(self, pcm: np.ndarray) -> None:
        """Audio the segmenter hears, and what it makes of it."""
        with self._audio_lock:
            seen = self.segmenter.samples_seen
            # When this audio came: a turn it ends began its wait for the reply then, and
            # the turn model's time in feed() is the user's to wait too.
            fed_at = self.clock()
            words = self.end_of_turn.words_heard if self.settings.turn_words else None
            events = self.segmenter.feed(pcm, words)
        for event in events:
            if isinstance(event, SpeechStarted):
                continued = self.end_of_turn.started()
                self.listener.speech_started_at = self.clock()
                if not continued:
                    self._maybe_barge_in(event, seen + len(pcm))
            elif isinstance(event, SpeechPaused) and self.settings.speculative_stt:
                self.end_of_turn.paused(event)
            elif isinstance(event, TurnChecked):
                self.end_of_turn.judged(event)
            elif isinstance(event, SpeechResumed):
                self.end_of_turn.forget_pause()
            elif isinstance(event, Utterance):
                self._utterance(event, fed_at)
        with self._audio_lock:
            self.end_of_turn.grew(self.segmenter.speech_samples, self.segmenter.speech_so_far)
        if self.end_of_turn.continuing and not self.segmenter.in_speech:
            with self._audio_lock:  # what began after the reply was taken back was no speech
                self.end_of_turn.speech_dropped()

    def start_listening(self, how: str = "Enter again to stop") -> None:
        """Push-to-talk: Enter was pressed; listen from now. `how`: how the turn ends, said
        in the status line."""
        with self._audio_lock:
            self.segmenter.reset()
            self.end_of_turn.forget_pause()
            self.listener.listening = True
        self.render(Status(f"Listening… ({how})"))

    def forget_speech(self) -> None:
        """The speech begun is not a request (the web page's microphone was switched off
        mid-utterance): drop it."""
        with self._audio_lock:
            self.segmenter.reset()
            self.end_of_turn.forget_pause()

    def stop_listening(self) -> None:
        """Push-to-talk: the second Enter ends the utterance now; end of input in replay."""
        with self._audio_lock:  # Enter comes from another thread than the microphone
            utterance = self.segmenter.flush()
            if self.settings.push_to_talk:
                self.listener.listening = False
        if utterance is not None:
            self._utterance(utterance)

    def silence_passed(self, seconds: float) -> None:
        """Replay's `wait_s`: this long passed with nothing said and no audio fed."""
        self.listener.silence_passed(seconds)

    def end_of_input(self) -> None:
        """Nothing more will be said (replay's last turn): no next prompt to prepare."""
        self.replies.input_ended = True

    # -- text and timers in -------------------------------------------------------------

    def submit_text(self, text: str) -> TurnRecord | None:
        text = text.strip()
        if not text:
            return None
        with self._audio_lock:  # typed instead: a reply started on a pause is not wanted
            self.end_of_turn.forget_pause()
        record = self.log.new(TurnSource.TEXT)
        self.turns.put(TypedTurn(record, text))
        return record

    def ring(self, timer: Timer) -> None:
        """A timer went off (on the timers' thread): announce it once the speaker is free."""
        self.turns.put(TimerRang(self.log.new(TurnSource.TIMER), timer))

    # -- control ------------------------------------------------------------------------

    @property
    def replying(self) -> bool:
        """A turn is being transcribed, answered or spoken, or waits to be."""
        return self.replies.now is not None or self.turns.unfinished_tasks > 0

    def interrupt(self) -> None:
        """Stop the current reply (cancel generation, silence its speech) and drop the turns
        heard or typed before now that are still waiting or being transcribed."""
        self.replies.interrupt()

    @property
    def quiet(self) -> bool:
        """The echo tail after Parley last spoke has passed."""
        return self.clock() >= self.listener.quiet_until

    def wait_quiet(self) -> None:
        """Wait out the echo tail after Parley last spoke (replay's next clip starts then)."""
        time.sleep(max(0.0, self.listener.quiet_until - self.clock()))

    def wait_replied(self, timeout: float | None = None) -> bool:
        """Wait until every queued turn was answered and spoken (the work between turns
        may still be going on: the next turn cancels it)."""
        return self.turns.wait_done(timeout)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every queued turn was answered and spoken, and the work between
        turns after them (the summary, the next prompt's beginning) is done."""
        deadline = None if timeout is None else time.monotonic() + timeout

        def left() -> float | None:
            return None if deadline is None else max(0.0, deadline - time.monotonic())

        while True:
            if not self.wait_replied(left()) or not self.between_turns.wait(left()):
                return False
            if not self.turns.unfinished_tasks and self.between_turns.idle.is_set():
                return True

    def close(self, timeout: float | None = None) -> bool:
        """Stop the reply in progress and end the worker; False if after `timeout` it is
        still finishing a step (call again to keep waiting).

        llama.cpp, Whisper and Piper run native code on the worker threads, and none can be
        stopped mid-step: leaving while one runs crashes the interpreter at exit (a
        segfault on /quit, seen while a busy machine slowed a prompt evaluation). Each
        step is bounded, so this waits for it.
        """
        if not self.replies.closing:
            self.replies.closing = True
            self.between_turns.close()
            with self._audio_lock:
                self.end_of_turn.close()
            self.interrupt()
            self.turns.put(Stop())
        if not self._worker.wait(timeout):
            return False
        self.end_of_turn.shutdown()
        return True

    # -- inside ---------------------------------------------------------------------------

    @property
    def _speech(self) -> SpokenReply | None:
        """The reply being spoken, if any (what the microphone may be hearing); none while
        it waits for the answer to its question, which the microphone must hear."""
        now = self.replies.now
        return now.speech if now is not None and not self.replies.approval.waiting else None

    def _may_continue(self) -> bool:
        """The last turn's reply is in its first moments (the user may go on with their
        turn), or was taken back because they did: the microphone must hear them even
        while Parley speaks. (Ignored, the speech they went on with would be flushed as
        too short, and the turn answered without it.)"""
        end = self.end_of_turn
        return self.wake_word is None and (end.may_continue or end.continuing)

    def _utterance(self, utterance: Utterance, heard_at: float | None = None) -> None:
        if self.settings.push_to_talk and not utterance.cut:
            self.listener.listening = False  # the end-of-speech silence ends the turn
        self.end_of_turn.utterance(utterance, heard_at)

    def _maybe_barge_in(self, event: SpeechStarted, detected_at_sample: int) -> None:
        """The user's voice stops the reply being heard (with barge-in)."""
        now = self.replies.now
        # Not while the reply waits for the answer to its question: that is the answer.
        if not self.listener.barges_in(self._speech):
            return
        started = self.clock()
        self.interrupt()
        if now is not None:
            self.listener.time_barge_in(now.record, event, detected_at_sample, started,
                                        self.clock())

    def _woke(self, at_s: float) -> None:
        """The wake word was heard: stop what Parley is saying, chime, listen afresh."""
        assert self.wake_word is not None
        if self.replying and not self.replies.approval.waiting:
            self.interrupt()  # a reply being spoken, or a timer ringing (not a question)
        self.listener.woke()
        with self._audio_lock:
            self.segmenter.reset()  # what came before the word is not the request
            self.end_of_turn.forget_pause()
        record = self.log.new(TurnSource.WAKE)
        self.log.emit(record, Wake(self.wake_word.name, round(at_s, 2)))
        record.finished.set()
        self.listener.chime()
