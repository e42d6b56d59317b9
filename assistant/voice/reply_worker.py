"""The reply worker: takes turns off the queue one at a time and answers them aloud.

One turn's path reads top to bottom here: `answer(HeardTurn)` waits for the transcript,
shows what was heard, and `speak`s the reply sentence by sentence; a typed line skips the
transcript; a reply answered ahead (`SpeculativeTurn`) does the same on a scratch copy of
the conversation, held back until the user's turn proves finished.
After each turn, while nothing waits, the worker does the work between turns
(`BetweenTurns`: the summary ahead, the next prompt's beginning).
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import CancelledError

from assistant.between_turns import BetweenTurns
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
    TextDelta,
    TurnContinued,
)
from assistant.tools import Tool, ToolRun
from assistant.voice.alarm import Answer, Ringer
from assistant.voice.approval import AnsweredBy, SpokenApproval
from assistant.voice.going_on import going_on, in_first_moments, once_settled, unheard
from assistant.voice.listening import Listener
from assistant.voice.speculation import Speculation
from assistant.voice.speech_out import NowSpeaking, SpeakerStalled, SpokenReply, SpokenSentence
from assistant.voice.turn_log import TurnLog
from assistant.voice.turn_queue import (
    HeardTurn,
    QueuedTurn,
    SpeculativeTurn,
    Stop,
    TimerRang,
    TurnQueue,
    TypedTurn,
)
from assistant.voice.turns import (
    FIRST_AUDIO_WAIT_S,
    Timing,
    TurnRecord,
    TurnSource,
    VoiceSettings,
    first_seconds,
    heard_events,
)
from audio.playback import AudioOutput
from audio.segmenter import Segmenter
from models.base import CancelToken
from models.errors import EngineError
from models.speech import SpokenAudio, TextToSpeech, Transcript

log = logging.getLogger(__name__)


class ReplyWorker:
    """Answers queued turns one at a time, aloud, on the loop's one reply thread."""

    def __init__(self, conversation: Conversation, tts: TextToSpeech, output: AudioOutput,
                 settings: VoiceSettings, turn_log: TurnLog, turns: TurnQueue,
                 between_turns: BetweenTurns, listener: Listener, segmenter: Segmenter,
                 keep_audio: bool = False, answered_by: AnsweredBy | None = None) -> None:
        self.conversation = conversation
        self.tts = tts
        self.output = output
        self.settings = settings
        self.log = turn_log
        self.turns = turns
        self.between_turns = between_turns
        self.listener = listener
        self.segmenter = segmenter
        self.keep_audio = keep_audio
        """Keep each reply's audio in its record (replay's `--audio-out`)."""
        self.ringer = Ringer(settings, turn_log, tts.sample_rate, self.speak,
                             self._answered_since)
        self.now: NowSpeaking | None = None
        self.lock = threading.RLock()
        """Held while a reply becomes or stops being `now` (a commit makes it current)."""
        self.interrupted_at = float("-inf")
        """Turns that began before this are not answered (the user stopped Parley since)."""
        self.closing = False
        self.approval = SpokenApproval(lambda: self.now, turns, turn_log, listener, segmenter,
                                       self.show_heard, lambda: self.closing, answered_by)
        """What a tool that asks first asks through: aloud, the answer heard."""
        self.input_ended = False
        """Nothing more will be said (replay's last turn): no next prompt to prepare."""

    # -- the worker's loop -----------------------------------------------------------------

    def run(self) -> None:
        """Answer queued turns until `Stop`; the work between turns after each."""
        self._between_turns(None)
        while True:
            item = self.turns.get()
            if isinstance(item, Stop):
                self.turns.task_done()
                return
            waited = self.between_turns.waited()
            try:
                self.answer(item)
            except Exception as exc:  # a bug; one bad turn must not end the session
                log.exception("a voice turn failed")
                self.log.emit(item.record, Error(Stage.VOICE, f"That turn failed ({exc}); "
                                                 "the conversation is kept, try again."))
            finally:
                if waited is not None:  # set now: a held reply's commit shifts the others
                    item.record.timings.set(Timing(waited.timing), waited.ms)
                item.record.finished.set()
                self.between_turns.expect()  # due before it is idle
                self.turns.task_done()
                self._between_turns(item.record)

    def answer(self, item: QueuedTurn) -> None:
        match item:
            case HeardTurn():
                self.answer_heard(item)
            case TypedTurn():
                self.answer_typed(item)
            case SpeculativeTurn():
                self.answer_ahead(item.speculation)
            case TimerRang():
                self.ringer.ring(item.record, item.timer)

    def interrupt(self) -> None:
        """Stop the reply being answered and spoken, drop the turns said before now, and
        stop the work between turns."""
        self.interrupted_at = self.log.clock()
        self.between_turns.stop(timed=False)
        with self.lock:
            if self.now is not None:
                self.now.cancel.cancel()
                self.now.speech.stop()

    # -- a turn the user goes on with --------------------------------------------------------

    def can_continue(self, record: TurnRecord) -> bool:
        """Whether speech that starts now continues `record`'s turn (`going_on`)."""
        with self.lock:
            now = self.now
            speech = now.speech if now is not None and now.record is record else None
            return not self.approval.waiting and in_first_moments(record, speech,
                                                                 self.log.clock())

    def continue_turn(self, record: TurnRecord) -> bool:
        """The user went on talking: stop `record`'s reply and take it back, so their whole
        turn is answered as one message. False if it is too late (the reply was heard)."""
        with self.lock:
            if not self.can_continue(record):
                return False
            going_on(record)
            if self.now is not None and self.now.record is record:
                self.now.cancel.cancel()
                self.now.speech.stop()
        log.debug("the user went on: the turn heard as %r continues", record.heard)
        return True

    def _unheard_moments(self, record: TurnRecord) -> bool:  # `going_on.unheard`
        return (self.settings.turns_go_on and self.output.realtime
                and not self.listener.hears_over_parley and unheard(record, self.log.clock()))

    def until_settled(self, record: TurnRecord, tool: Tool, run: ToolRun) -> ToolRun:
        """`tool`'s `run`, once `record`'s turn can no longer be continued (`going_on`)."""
        if not self.settings.turns_go_on:
            return run
        return once_settled(record, tool, run, self.lock, self.log.clock,
                            lambda: self.closing)

    # -- one turn ----------------------------------------------------------------------------

    def answer_heard(self, turn: HeardTurn) -> None:
        """An utterance: its transcript, what was heard, then the reply."""
        record = turn.record
        if record.started < self.interrupted_at:
            return  # the user stopped Parley after this was said
        if record.continued:
            self._taken_back(record)
            return
        try:
            transcript, heard_at = turn.transcript.result()
        except EngineError as exc:
            self.log.emit(record, Error(Stage.STT, f"Speech-to-text failed ({exc}); say it "
                                                   "again or type it."))
            return
        self.show_heard(record, transcript, heard_at, turn.cut)
        log.debug("heard %.1f s of speech: transcript %.0f ms after the end of speech (%s)",
                  record.timings.speech_seconds or 0.0, record.timings.stt_ms,
                  transcript.rejected or "words")
        if not transcript.text or record.started < self.interrupted_at:
            return
        if record.continued:
            self._taken_back(record)
            return
        conversation = self.conversation
        forked_from = conversation.history.messages
        # Its tools that change something wait until the turn cannot be continued.
        scratch = conversation.fork(conversation.tools.guarded(
            lambda tool, run: self.until_settled(record, tool, run)))
        conversation.confirm_fork(scratch)
        self._answer(record, transcript.text, scratch)
        if not conversation.adopt(scratch, forked_from):
            log.debug("the conversation changed during a reply; it was not kept")

    def answer_typed(self, turn: TypedTurn) -> None:
        if turn.record.started < self.interrupted_at:
            return  # the user stopped Parley after this was typed
        self._answer(turn.record, turn.text, self.conversation)

    def answer_ahead(self, speculation: Speculation) -> None:
        """Answer a pause's transcript on a scratch copy of the conversation, held back
        until the end-of-speech wait decides; adopted if committed, forgotten if dropped."""
        record = speculation.record
        if speculation.decided and not speculation.committed:
            return  # the user went on talking before it began
        if record.continued:
            self._taken_back(record)
            return
        try:
            transcript, heard_at = speculation.transcript.result()
        except (CancelledError, EngineError):
            transcript = heard_at = None
        if transcript is None or not transcript.text:
            # Nothing to answer ahead: if the turn ends here, it goes the ordinary way.
            if speculation.wait():
                self.answer_heard(HeardTurn(record, speculation.transcript, False))
            return
        conversation = self.conversation
        forked_from = conversation.history.messages
        scratch = conversation.fork(conversation.tools.guarded(
            lambda tool, run: speculation.guard(self.until_settled(record, tool, run))))
        # Confirmed, it is the conversation's reply: what it says is kept from then on,
        # not only once it is done and adopted (a saved conversation writes it at once).
        speculation.when_committed(lambda: conversation.confirm_fork(scratch))
        self.log.speculating = speculation
        try:
            self.show_heard(record, transcript, heard_at, False)
            self._answer(record, transcript.text, scratch, speculation)
        finally:
            self.log.speculating = None
        if speculation.committed and not conversation.adopt(scratch, forked_from):
            log.debug("the conversation changed during a speculative reply; it was not kept")

    def _taken_back(self, record: TurnRecord) -> None:
        """The user went on before this turn's reply began: nothing of it was said."""
        with self.lock:
            record.spoken = True
        self.log.emit(record, TurnContinued(0.0))

    def show_heard(self, record: TurnRecord, transcript: Transcript, heard_at: float,
                   cut: bool) -> None:
        """The transcript is ready: time it and show what was heard."""
        self.log.time(record, Timing.STT, heard_at)
        self.log.emit(record, Heard(transcript.text, round(transcript.confidence, 3),
                                    transcript.rejected, cut))

    def _answer(self, record: TurnRecord, text: str, conversation: Conversation,
                speculation: Speculation | None = None) -> None:
        """Reply to `text` in `conversation` (a scratch copy, for a speculation), aloud."""
        record.heard = text
        first_seq = conversation.history.next_seq
        self.speak(record, lambda on_event, cancel: conversation.reply(
            text, on_event, cancel, self.settings.first_clause_words,
            approve=self.approval.ask),
                   speculation=speculation, conversation=conversation)
        if record.continued:  # taken back: the whole turn is answered in the next one
            conversation.history.remove_from(first_seq)

    # -- speaking ----------------------------------------------------------------------------

    def speak(self, record: TurnRecord, answer: Answer, sound: SpokenAudio | None = None,
              speculation: Speculation | None = None,
              conversation: Conversation | None = None) -> None:
        """Speak what `answer` produces, sentence by sentence (after `sound`, if any); with
        `speculation`, held back until it is committed. A cut-off reply is noted in
        `conversation`, the one it was made in (a speculation's scratch copy)."""
        cancel = speculation.cancel if speculation is not None else CancelToken()
        speech = SpokenReply(
            self.tts, speculation.output if speculation is not None else self.output, cancel,
            on_sentence=lambda sentence: self._spoken(record, sentence, speech),
            on_error=lambda message: self.log.emit(record, Error(Stage.TTS, message)),
            on_audio=record.audio.append if self.keep_audio else None,
            clock=self.log.clock,
            # A reply answered ahead is held until the turn ends anyway; after that, and
            # for any other reply, the user's speech keeps its first audio waiting, and
            # so do its first moments where Parley could not hear the user go on.
            user_speaking=lambda: ((speculation is None or speculation.committed) and (
                (self.segmenter.voice_heard and self.listener.listening)
                or self._unheard_moments(record))))

        def make_current() -> None:
            with self.lock:
                self.now = NowSpeaking(record, cancel, speech)
                if record.continued:  # taken back before it was current: none of it plays
                    cancel.cancel()
                    speech.stop()

        if speculation is None:
            make_current()
        else:
            speculation.when_committed(make_current)
        if sound is not None:
            speech.play_sound(sound)

        def on_event(event: Event) -> None:
            if isinstance(event, TextDelta) and record.timings.first_token_ms is None:
                self.log.time(record, Timing.FIRST_TOKEN)
            if not isinstance(event, ReplyDone):  # shown once the reply's outcome is known
                self.log.emit(record, event)
            if isinstance(event, Sentence) and not cancel.cancelled:
                first = record.timings.first_sentence_ms is None
                if first:
                    self.log.time(record, Timing.FIRST_SENTENCE)
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
                self.log.emit(record, Error(Stage.TTS, f"{exc} The reply is shown as text."))
        except BaseException:
            speech.stop()  # an unexpected failure: say nothing more of this reply
            raise
        finally:
            speech.close()  # the speaking worker must never wait for sentences forever
            with self.lock:
                self.now = None
                record.spoken = True
            self.listener.reply_ended(record, speech,
                                      played=speculation is None or speculation.committed)
        self._finish(record, done, speech, conversation or self.conversation)

    def _finish(self, record: TurnRecord, done: ReplyDone | None, speech: SpokenReply,
                conversation: Conversation) -> None:
        """What the reply was, what of it was heard, and its latency."""
        record.reply = done.text if done is not None else ""
        record.spoken_seconds = round(speech.spoken_seconds, 2)
        record.interrupted = speech.stopped
        if speech.stopped:  # sentences synthesized ahead but never heard were not spoken
            record.events = heard_events(record.events, speech.spoken_seconds)
        if speech.stopped and record.audio:  # keep only the audio that was actually heard
            record.audio = first_seconds(record.audio, speech.spoken_seconds)
        if record.continued:
            self.log.emit(record, TurnContinued(record.spoken_seconds))
            return
        if (speech.stopped and done is not None and done.text
                and record.source is not TurnSource.TIMER):
            heard = speech.heard_text()
            conversation.note_heard(heard)
            self.log.emit(record, Interrupted(record.spoken_seconds, heard))
        if done is not None:
            self.log.emit(record, done)
        record.timings.time_latency()

    def _spoken(self, record: TurnRecord, sentence: SpokenSentence,
                speech: SpokenReply) -> None:
        if record.timings.first_audio_ms is None:
            # Set as it happens, so replay can time a barge-in into this reply.
            self.log.time(record, Timing.FIRST_AUDIO, speech.first_audio_at)
        self.log.emit(record, Spoken(sentence.text, round(sentence.seconds, 2)))

    # -- between turns -----------------------------------------------------------------------

    def _between_turns(self, record: TurnRecord | None) -> None:
        """After `record`'s reply, while nothing waits (and more may come): the summary
        ahead (not while someone talks: they want an answer soon), the next prompt."""
        self.between_turns.run(
            lambda event: self.log.between_turns(record, event),
            wanted=lambda: self.turns.empty() and not self.input_ended and not self.closing,
            summarize=lambda: not self.segmenter.in_speech)

    def _answered_since(self, since: float) -> bool:
        """The user spoke, typed or stopped Parley after `since` (or Parley is closing)."""
        return (self.listener.speech_started_at > since or self.interrupted_at > since
                or not self.turns.empty() or self.closing)
