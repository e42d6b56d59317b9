"""The one conversation `parley web` serves, shared by every tab, without a web framework.

Every tab that connects is a subscriber: it is sent the conversation so far (with the
events of the reply in progress, if one runs), then every live event. Messages from the
page (text, stop, a confirmation's answer) come in as JSON. Replies run one at a time on
a worker thread; text sent while one runs is refused with an `error` event (the user sees
Parley answering and can press Stop), never queued behind it. A tool that asks first asks
every tab, and the first answer wins. Between replies the summary the coming turns need is
written (as interactive chat does), and stopped when the next message comes.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable

from assistant.between_turns import BetweenTurns
from assistant.confirmation import Answer, Confirmation, answer_for, outcome_of
from assistant.conversation import Conversation
from assistant.events import (
    ConfirmationAnswered,
    ConfirmationAsked,
    Error,
    Event,
    Stage,
)
from assistant.timers import Timer, Timers, finished_event
from assistant.web.wire import conversation_dict, message_dict, timer_dict
from assistant.workers import Worker
from models.base import CancelToken

log = logging.getLogger(__name__)

Send = Callable[[dict], None]
"""Sends one JSON-ready message to one tab; called on any thread, never blocks."""

IDLE, THINKING = "idle", "thinking"

BUSY = ("Parley is still answering the last message. Wait for it to finish, or press Stop, "
        "then send this again.")


class WebRoom:
    """The conversation, its replies and the tabs watching them."""

    def __init__(self, conversation: Conversation, timers: Timers) -> None:
        self.conversation = conversation
        self.timers = timers
        self._lock = threading.RLock()
        self._tabs: list[Send] = []
        self._state = IDLE
        self._live: list[dict] = []
        """The events of the reply in progress: a tab that joins mid-reply sees them."""
        self._announced = conversation.history.next_seq - 1
        """The last message number the tabs were sent."""
        self._cancel: CancelToken | None = None
        self._asked: tuple[Confirmation, threading.Event, list[Answer]] | None = None
        self._worker: Worker | None = None
        self._between_turns = BetweenTurns(conversation)
        timers.when_finished(self._timer_finished)

    # -- tabs -------------------------------------------------------------------------

    def join(self, send: Send) -> Callable[[], None]:
        """A tab connects: it is sent the conversation so far, then every live event.
        Returns what to call when it leaves."""
        with self._lock:
            send(self.snapshot())
            self._tabs.append(send)

        def leave() -> None:
            with self._lock:
                if send in self._tabs:
                    self._tabs.remove(send)

        return leave

    def snapshot(self) -> dict:
        """The `conversation` message: what a tab shows when it connects."""
        with self._lock:
            asked = self._asked
            question = None if asked is None else ConfirmationAsked(
                asked[0].tool, asked[0].question_in_full).to_dict()
            return {"type": "conversation", **conversation_dict(self.conversation),
                    "state": self._state, "timers": self.timer_list(),
                    "live": list(self._live), "confirm": question}

    def timer_list(self) -> list[dict]:
        now = self.timers.clock()
        return [timer_dict(t, now) for t in self.timers.running()]

    def _broadcast(self, data: dict) -> None:
        with self._lock:
            if data["type"] == "conversation":
                self._live.clear()  # the whole conversation again: what came before is in it
            elif self._state == THINKING:
                self._live.append(data)
            for send in list(self._tabs):
                send(data)

    def _emit(self, event: Event) -> None:
        """An event of a reply or of the work between turns, to every tab (after the
        messages that joined the conversation before it)."""
        with self._lock:
            self._announce()
            self._broadcast(event.to_dict())

    def _announce(self) -> None:
        """Send the tabs the messages that joined the conversation since the last time; if
        some were taken back (a reply that failed or was stopped before any text), the whole
        conversation again."""
        with self._lock:
            messages = self.conversation.history.messages
            last = messages[-1].seq if messages else 0
            if last < self._announced:
                self._announced = last
                self._broadcast(self.snapshot())
                return
            for message in messages:
                if message.seq > self._announced:
                    self._broadcast({"type": "message",
                                     **message_dict(message, self.conversation)})
            self._announced = last

    def _set_state(self, state: str) -> None:
        with self._lock:
            self._state = state
            if state == THINKING:
                self._live.clear()
            self._broadcast({"type": "state", "state": state})

    # -- messages from the page -------------------------------------------------------

    def receive(self, raw: str, reply_to: Send) -> None:
        """One message from a tab: `{"type": "text", "text": …}`, `{"type": "stop"}` or
        `{"type": "confirm", "answer": "yes"|"no"|words}`. What cannot be taken is an
        `error` event to that tab alone; the conversation is kept."""
        try:
            message = json.loads(raw)
        except ValueError:
            message = None
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            reply_to(_refused("That message is not a JSON object with a \"type\" (text, stop "
                              "or confirm); see docs/web.md."))
            return
        kind = message["type"]
        if kind == "text":
            text = message.get("text")
            if not isinstance(text, str) or not text.strip():
                reply_to(_refused("A text message needs a non-empty \"text\"."))
            elif not self.ask(text):
                reply_to(_refused(BUSY))
        elif kind == "stop":
            self.stop()
        elif kind == "confirm":
            answer = message.get("answer")
            if not isinstance(answer, str):
                reply_to(_refused("A confirm message needs an \"answer\": yes or no."))
            elif not self.answer(answer):
                reply_to(_refused("No question is waiting for an answer (it was answered "
                                  "already, or the reply stopped)."))
        else:
            reply_to(_refused(f"Unknown message type {kind!r}: use text, stop or confirm."))

    def ask(self, text: str) -> bool:
        """Start the reply to `text`; False if one is still running."""
        with self._lock:
            if self._state == THINKING:
                return False
            self._cancel = cancel = CancelToken()
            self._set_state(THINKING)
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
            self._emit(ConfirmationAnswered(confirmation.tool, outcome == "yes", text,
                                            outcome))
        answered.set()
        return True

    # -- the reply ----------------------------------------------------------------------

    def _reply(self, text: str, cancel: CancelToken) -> None:
        # One model: the summary being written between turns stops, and the reply goes on
        # with the last one written.
        self._between_turns.finish(stop=True)
        done = threading.Event()
        # The user's message is shown as it joins the conversation, while the model still
        # reads the prompt (no event comes until it writes).
        Worker(lambda: self._watch_messages(done), "web messages")
        try:
            self.conversation.reply(text, self._emit, cancel, approve=self._confirm)
        except Exception as exc:  # a bug: the tabs hear of it, the conversation is kept
            log.exception("the web reply failed")
            self._emit(Error(Stage.INTERNAL, f"Parley failed to answer ({exc}); run with "
                                             "--debug for details. The conversation is kept."))
        finally:
            done.set()
            # Due before the tabs hear Parley is idle: whoever waits for the work between
            # turns from then waits for this one.
            self._between_turns.expect()
            with self._lock:
                self._announce()
                self._cancel = None
                self._broadcast({"type": "timers", "timers": self.timer_list()})
                self._set_state(IDLE)
                self._live.clear()
        self._between_turns.start(self._emit)

    def _watch_messages(self, done: threading.Event) -> None:
        while not done.wait(0.05):
            self._announce()

    def _confirm(self, confirmation: Confirmation) -> Answer:
        """On the reply's thread: ask every tab, and wait for the first answer (or Stop)."""
        answered = threading.Event()
        result: list[Answer] = []
        with self._lock:
            cancel = self._cancel
            if cancel is not None and cancel.cancelled:
                return answer_for("stopped")
            self._asked = (confirmation, answered, result)
            self._emit(ConfirmationAsked(confirmation.tool, confirmation.question_in_full))
        answered.wait()
        return result[0]

    def _timer_finished(self, timer: Timer) -> None:
        self._emit(finished_event(timer))
        self._broadcast({"type": "timers", "timers": self.timer_list()})

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


def _refused(message: str) -> dict:
    return Error(Stage.REQUEST, message).to_dict()

