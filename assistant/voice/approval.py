"""Asking aloud before a tool changes something, and listening for the yes: a step of the
reply worker's.

A reply whose tool asks first (`assistant.confirmation`) is given the worker's
`SpokenApproval.ask` as its `approve`, and calls it on the worker's thread, in the middle of
the reply being spoken. The question is said through that reply's speech and shown; once it
has played (and, half duplex, its echo tail has passed) the microphone is heard again while
the reply waits. The worker is the turn queue's one consumer: while its reply waits, the
next utterance (or a line typed) after the question is taken off the queue here, as the
answer; the turns that are not answers go back, in their order, for after the reply.

Only a clear yes (`heard_answer`) runs the tool. A no, words that are neither (they are
shown as heard and the model reads them in the refusal, so nothing said is lost), nothing
said within `CONFIRM_WAIT_S`, the user stopping the reply (Ctrl-C, /clear, speech
with barge-in) or Parley closing: the tool is not run, and the model is told why.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Callable
from concurrent.futures import CancelledError
from dataclasses import dataclass

from assistant.confirmation import Answer, Confirmation, answer_for, outcome_of
from assistant.events import ConfirmationAnswered, ConfirmationAsked, Error, Stage
from assistant.voice.listening import Listener
from assistant.voice.speculation import Speculation
from assistant.voice.speech_out import NowSpeaking
from assistant.voice.turn_log import TurnLog
from assistant.voice.turn_queue import (
    HeardTurn,
    QueuedTurn,
    SpeculativeTurn,
    Stop,
    TurnQueue,
    TypedTurn,
)
from assistant.voice.turns import TurnRecord
from audio.segmenter import Segmenter
from models.errors import EngineError
from models.speech import Transcript

log = logging.getLogger(__name__)

CONFIRM_WAIT_S = 12.0
"""How long the answer may take to begin, on the loop's clock: live, the wall clock; on a
test's microphone clock, seconds of audio heard. Speech begun by then is heard out."""
POLL_S = 0.05
"""How often a wait looks whether the reply was stopped."""


AnsweredBy = Callable[[Confirmation, TurnRecord], "str | None"]
"""Where the answer comes from instead of the microphone and the keyboard, once the question
has been said (a replay's session file), given the asking reply's record; None from it is
no answer."""
ShowHeard = Callable[[TurnRecord, Transcript, float, bool], None]


@dataclass(frozen=True)
class AnswerHeard:
    """What the user said or typed after the question (None: nothing, `outcome` says why)."""

    text: str | None
    outcome: str = ""


class SpokenApproval:
    """The reply worker's `approve`: the question said and shown, the answer listened for."""

    def __init__(self, current: Callable[[], NowSpeaking | None], turns: TurnQueue,
                 log: TurnLog, listener: Listener, segmenter: Segmenter,
                 show_heard: ShowHeard, closing: Callable[[], bool],
                 answered_by: AnsweredBy | None = None, wait_s: float = CONFIRM_WAIT_S) -> None:
        self.current = current
        """The reply being spoken, which asks."""
        self.turns = turns
        self.log = log
        self.listener = listener
        self.segmenter = segmenter
        self.show_heard = show_heard
        self.closing = closing
        self.answered_by = answered_by
        self.wait_s = wait_s
        self.waiting = False
        """The reply is paused on its question: it is not being spoken meanwhile, and the
        microphone hears the answer."""

    def ask(self, confirmation: Confirmation) -> Answer:
        now = self.current()
        if now is None:  # not inside a spoken reply: there is no one to hear the question
            log.warning("a confirmation was asked for outside a reply; %s was not run",
                        confirmation.tool)
            return Answer(False, "the user could not be asked")
        self.log.emit(now.record, ConfirmationAsked(confirmation.tool, confirmation.question))
        asked_at = self.log.clock()  # a line typed from now answers the question on screen
        now.speech.say(confirmation.question)
        now.speech.wait_played()
        if self.answered_by is not None and not self._stopped(now):
            text = self.answered_by(confirmation, now.record)
            heard = AnswerHeard(text, "" if text else "no-answer")
        else:
            heard = self._listen(now, asked_at)
        outcome = heard.outcome or outcome_of(heard.text or "", confirmation.question)
        answer = answer_for(outcome, heard.text or "")
        self.log.emit(now.record, ConfirmationAnswered(confirmation.tool, answer.allowed,
                                                   heard.text or "", outcome))
        return answer

    # -- listening ------------------------------------------------------------------------

    def _listen(self, now: NowSpeaking, asked_at: float) -> AnswerHeard:
        """The first answer after the question, with the microphone heard meanwhile. Turns
        that are not answers (a timer that rang, speech from before the question) wait in
        the queue for after the reply, in their order."""
        clock = self.log.clock
        if self._stopped(now):
            return AnswerHeard(None, "stopped")
        listening_from = clock()
        deadline = listening_from + self.wait_s
        self.listener.answer_expected(self.wait_s)
        self.waiting = True
        kept: list[QueuedTurn | Stop] = []
        try:
            while True:
                if self._stopped(now):
                    return AnswerHeard(None, "stopped")
                try:
                    item = self.turns.get(timeout=POLL_S)
                except queue.Empty:
                    if clock() < deadline or self.segmenter.in_speech:
                        continue
                    try:  # a turn that came as the wait ended still counts
                        item = self.turns.get_nowait()
                    except queue.Empty:
                        return AnswerHeard(None, "no-answer")
                if isinstance(item, Stop) or not self._answers(item, asked_at, listening_from):
                    kept.append(item)
                    continue
                text = self._text(item, now)
                if text:
                    return AnswerHeard(text)
        finally:
            self.waiting = False
            self.turns.put_back(kept)

    @staticmethod
    def _answers(item: QueuedTurn, asked_at: float, listening_from: float) -> bool:
        """A line typed once the question was shown, or speech heard once it had played."""
        if isinstance(item, TypedTurn):
            return item.record.started >= asked_at
        if isinstance(item, HeardTurn | SpeculativeTurn):
            return item.record.started >= listening_from
        return False  # a timer's announcement comes after the reply

    def _stopped(self, now: NowSpeaking) -> bool:
        return now.cancel.cancelled or now.speech.stopped or self.closing()

    def _text(self, item: QueuedTurn, now: NowSpeaking) -> str:
        """What the turn said ("" for none: noise, a dropped speculation); it is finished
        here, shown as heard, and never answered as a turn of its own."""
        try:
            if isinstance(item, TypedTurn):
                item.record.heard = item.text
                return item.text
            if isinstance(item, SpeculativeTurn):
                if not self._committed(item.speculation, now):
                    return ""  # the user went on: the utterance that ends it comes next
                item = HeardTurn(item.record, item.speculation.transcript, False)
            assert isinstance(item, HeardTurn)
            return self._transcript(item, now)
        finally:
            item.record.finished.set()
            self.turns.task_done()

    def _committed(self, speculation: Speculation, now: NowSpeaking) -> bool:
        """Wait while the user may go on talking (however long the wait for the answer)."""
        while not speculation.wait_decided(POLL_S):
            if self._stopped(now):
                speculation.drop()
                return False
        return speculation.committed

    def _transcript(self, turn: HeardTurn, now: NowSpeaking) -> str:
        record = turn.record
        while True:
            try:
                transcript, heard_at = turn.transcript.result(timeout=POLL_S)
                break
            except TimeoutError:
                if self._stopped(now):
                    return ""
            except (EngineError, CancelledError) as exc:
                self.log.emit(record, Error(Stage.STT, f"Speech-to-text failed ({exc}); "
                                                              "say it again or type it."))
                return ""
        self.show_heard(record, transcript, heard_at, turn.cut)
        record.heard = transcript.text
        return transcript.text

