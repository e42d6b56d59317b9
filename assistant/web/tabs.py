"""The tabs watching `parley web`'s one conversation, whichever drives its replies.

Every tab that connects is a subscriber: it is sent the conversation so far (with the
events of the turn in progress, if one runs, and the question waiting for an answer), then
every live event, in order. The room that drives the replies (typed chat, or the voice
loop) tells `Tabs` its events and its state; `Tabs` announces the messages that joined the
conversation before each event, so a tab always sees the user's message before the reply.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from assistant.conversation import Conversation
from assistant.events import ConfirmationAnswered, ConfirmationAsked, Event
from assistant.timers import Timers
from assistant.web.wire import conversation_dict, message_dict, timer_dict

Send = Callable[[dict | bytes], None]
"""Sends one message to one tab: a JSON-ready dict as text, bytes as a binary frame (the
reply's audio). Called on any thread, never blocks."""

IDLE, LISTENING, THINKING, SPEAKING = "idle", "listening", "thinking", "speaking"
RECENT = 4
"""The last messages whose text may still change (a reply noted as cut short)."""
QUIET = (IDLE, LISTENING)
"""No turn is being answered."""


@dataclass(eq=False)
class Tab:
    """One connected tab, and what its microphone is doing."""

    send: Send
    hands_free: bool = False
    """Its Hands-free switch is on: its audio is listened to."""
    talking: bool = False
    """Its Push to talk button (or the space bar) is held."""

    @property
    def microphone_on(self) -> bool:
        return self.hands_free or self.talking


class Tabs:
    """The connected tabs, what was sent to them, and the state they show."""

    def __init__(self, conversation: Conversation, timers: Timers,
                 voice: str | None = None) -> None:
        """`voice`: why the page cannot talk (the speech engines did not load), or None
        when it can."""
        self.conversation = conversation
        self.timers = timers
        self.voice_off = voice
        self.lock = threading.RLock()
        self._tabs: list[Tab] = []
        self._state = IDLE
        self._live: list[dict] = []
        """The events of the turn in progress: a tab that joins mid-turn sees them."""
        self._announced = conversation.history.next_seq - 1
        """The last message number the tabs were sent."""
        self._texts: dict[int, str] = {
            m.seq: m.content for m in conversation.history.messages[-RECENT:]}
        """The texts of the last messages as the tabs were sent them."""
        self.question: ConfirmationAsked | None = None
        """The question a tool asked that waits for its answer."""

    @property
    def state(self) -> str:
        return self._state

    def connected(self) -> list[Tab]:
        with self.lock:
            return list(self._tabs)

    def join(self, tab: Tab) -> Callable[[], None]:
        """A tab connects: it is sent the conversation so far, then every live event.
        Returns what to call when it leaves."""
        with self.lock:
            tab.send(self.snapshot())
            self._tabs.append(tab)

        def leave() -> None:
            with self.lock:
                if tab in self._tabs:
                    self._tabs.remove(tab)

        return leave

    def snapshot(self) -> dict:
        """The `conversation` message: what a tab shows when it connects."""
        with self.lock:
            question = None if self.question is None else self.question.to_dict()
            return {"type": "conversation", **conversation_dict(self.conversation),
                    "state": self._state, "timers": self.timer_list(),
                    "live": list(self._live), "confirm": question,
                    "voice": self.voice_off is None, "voice_off": self.voice_off}

    def timer_list(self) -> list[dict]:
        now = self.timers.clock()
        return [timer_dict(t, now) for t in self.timers.running()]

    def broadcast(self, data: dict) -> None:
        with self.lock:
            if data["type"] == "conversation":
                self._live.clear()  # the whole conversation again: what came before is in it
            elif self._state not in QUIET and data["type"] != "state":
                self._live.append(data)
            for tab in list(self._tabs):
                tab.send(data)

    def broadcast_audio(self, data: dict | bytes) -> None:
        """The reply's audio (bytes) or its end (`audio-stop`): live only, never kept for
        a tab that joins later."""
        with self.lock:
            for tab in list(self._tabs):
                tab.send(data)

    def emit(self, event: Event) -> None:
        """An event of a reply or of the work between turns, to every tab (after the
        messages that joined the conversation before it)."""
        with self.lock:
            if isinstance(event, ConfirmationAsked):
                self.question = event
            elif isinstance(event, ConfirmationAnswered):
                self.question = None
            self.announce()
            self.broadcast(event.to_dict())

    def announce(self) -> None:
        """Send the tabs the messages that joined the conversation since the last time, and
        again a recent one whose text changed (a spoken reply the user cut short is noted
        so); if some were taken back (a reply that failed or was stopped before any text),
        the whole conversation again."""
        with self.lock:
            messages = self.conversation.history.messages
            last = messages[-1].seq if messages else 0
            if last < self._announced:
                self._announced = last
                self._texts = {m.seq: m.content for m in messages[-RECENT:]}
                self.broadcast(self.snapshot())
                return
            for message in messages:
                if message.seq > self._announced \
                        or self._texts.get(message.seq, message.content) != message.content:
                    self.broadcast({"type": "message",
                                    **message_dict(message, self.conversation)})
            self._announced = last
            self._texts = {m.seq: m.content for m in messages[-RECENT:]}

    def set_state(self, state: str) -> None:
        """Parley's state, when it changed. A turn's live events are kept from when Parley
        starts on it (thinking) until it is done (idle, or listening again): a tab that joins
        meanwhile is sent them; when it is done, the tabs are sent the timers as they are."""
        with self.lock:
            if state == self._state:
                return
            was, self._state = self._state, state
            if was in QUIET and state not in QUIET:
                self._live.clear()
            if state in QUIET and was not in QUIET:
                self.announce()
                self.broadcast({"type": "timers", "timers": self.timer_list()})
            self.broadcast({"type": "state", "state": state})
            if state in QUIET:
                self._live.clear()
