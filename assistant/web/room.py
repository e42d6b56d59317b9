"""`parley web` without voice (the speech engines did not load): typed replies, one at a
time, on a worker thread.

Text sent while a reply runs is refused with an `error` event (the user sees Parley
answering and can press Stop), never queued behind it. A tool that asks first asks every
tab, and the first answer wins. Between replies the summary the coming turns need is
written (as interactive chat does), and stopped when the next message comes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from assistant.between_turns import BetweenTurns
from assistant.confirmation import Answer, Confirmation, answer_for, outcome_of
from assistant.conversation import Conversation
from assistant.events import ConfirmationAnswered, ConfirmationAsked, Error, Stage
from assistant.timers import Timer, Timers, finished_event
from assistant.web.tabs import IDLE, THINKING, Tab, Tabs
from assistant.workers import Worker
from models.base import CancelToken

log = logging.getLogger(__name__)


class ChatRoom:
    """The conversation's typed replies, shown to every tab."""

    voice = None
    """Nothing is listened to."""

    def __init__(self, conversation: Conversation, timers: Timers,
                 voice_off: str = "the speech engines did not load") -> None:
        self.conversation = conversation
        self.tabs = Tabs(conversation, timers, voice_off)
        self._lock = self.tabs.lock
        self._cancel: CancelToken | None = None
        self._asked: tuple[Confirmation, threading.Event, list[Answer]] | None = None
        self._worker: Worker | None = None
        self._between_turns = BetweenTurns(conversation)
        timers.when_finished(self._timer_finished)

    def join(self, tab: Tab) -> Callable[[], None]:
        return self.tabs.join(tab)

    def ask(self, text: str) -> bool:
        """Start the reply to `text`; False if one is still running."""
        with self._lock:
            if self.tabs.state == THINKING:
                return False
            self._cancel = cancel = CancelToken()
            self.tabs.set_state(THINKING)
            self._worker = Worker(lambda: self._reply(text.strip(), cancel), "web reply")
        return True

    def stop(self) -> None:
        """Stop the reply in progress (as Ctrl-C does in chat); a question waiting for its
        answer is answered `stopped`."""
        with self._lock:
            if self._cancel is not None:
                self._cancel.cancel()
        self._settle("", "stopped")

    def answer(self, text: str) -> bool:
        """A tab's answer to the question asked; False if none is waiting (the first answer
        already won)."""
        with self._lock:
            asked = self._asked
        if asked is None:
            return False
        return self._settle(text, outcome_of(text, asked[0].question))

    def _settle(self, text: str, outcome: str) -> bool:
        with self._lock:
            asked, self._asked = self._asked, None
            if asked is None:
                return False
            confirmation, answered, result = asked
            result.append(answer_for(outcome, text))
            self.tabs.emit(ConfirmationAnswered(confirmation.tool, outcome == "yes", text,
                                                outcome))
        answered.set()
        return True

    def _reply(self, text: str, cancel: CancelToken) -> None:
        # One model: the summary being written between turns stops, and the reply goes on
        # with the last one written.
        self._between_turns.finish(stop=True)
        done = threading.Event()
        # The user's message is shown as it joins the conversation, while the model still
        # reads the prompt (no event comes until it writes).
        Worker(lambda: self._watch_messages(done), "web messages")
        try:
            self.conversation.reply(text, self.tabs.emit, cancel, approve=self._confirm)
        except Exception as exc:  # a bug: the tabs hear of it, the conversation is kept
            log.exception("the web reply failed")
            self.tabs.emit(Error(Stage.INTERNAL, f"Parley failed to answer ({exc}); run "
                                                 "with --debug for details. The "
                                                 "conversation is kept."))
        finally:
            done.set()
            # Due before the tabs hear Parley is idle: whoever waits for the work between
            # turns from then waits for this one.
            self._between_turns.expect()
            with self._lock:
                self._cancel = None
                self.tabs.set_state(IDLE)
        self._between_turns.start(self.tabs.emit)

    def _watch_messages(self, done: threading.Event) -> None:
        while not done.wait(0.05):
            self.tabs.announce()

    def _confirm(self, confirmation: Confirmation) -> Answer:
        """On the reply's thread: ask every tab, and wait for the first answer (or Stop)."""
        answered = threading.Event()
        result: list[Answer] = []
        with self._lock:
            cancel = self._cancel
            if cancel is not None and cancel.cancelled:
                return answer_for("stopped")
            self._asked = (confirmation, answered, result)
            self.tabs.emit(ConfirmationAsked(confirmation.tool,
                                             confirmation.question_in_full))
        answered.wait()
        return result[0]

    def _timer_finished(self, timer: Timer) -> None:
        self.tabs.emit(finished_event(timer))
        self.tabs.broadcast({"type": "timers", "timers": self.tabs.timer_list()})

    def wait_between_turns(self, timeout: float | None = None) -> bool:
        """Until the work between turns (the summary ahead) has ended; False after
        `timeout`."""
        return self._between_turns.wait(timeout)

    def close(self) -> None:
        """Parley is closing: stop the reply and the work between turns, and wait for them
        (leaving while llama.cpp still runs on a thread can crash the interpreter)."""
        self._between_turns.close()
        self.stop()
        worker = self._worker
        if worker is not None:
            worker.wait(30)
        self._between_turns.wait()
