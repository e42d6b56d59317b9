"""`parley web` with voice: the voice loop of `parley voice` drives the replies, fed by the
tabs' microphones instead of the sound card, and speaking through `WebSpeaker` to them.

Typed text goes to the loop as a typed line, so text and speech share one conversation and
one turn queue: as in `parley voice`, text typed while Parley answers waits its turn and is
answered after the reply (it joins the conversation, and the tabs see it, when its turn
comes; Stop drops it with the reply). The first text typed while a tool's question waits
is the answer to it. A tab's audio is
listened to while its Hands-free switch is on or its Push to talk is held; one tab's
microphone at a time, the last one switched on (two would mix into one utterance). What
the tabs send for the loop goes through one thread, in order: the segmenter's work (the turn
model at a pause) never holds up the web server, and a release of Push to talk comes after
the audio before it.

Parley's state (idle, listening, thinking, speaking) is read from the loop and the speaker
every `POLL_S`, and sent to the tabs when it changes, with the messages that joined the
conversation meanwhile.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

import numpy as np

from assistant.events import ConfirmationAsked, Event, Heard, Spoken
from assistant.session.builder import VoiceSession
from assistant.timers import Timer
from assistant.web.speaker import WebSpeaker
from assistant.web.tabs import IDLE, LISTENING, SPEAKING, THINKING, Tab, Tabs
from assistant.workers import Worker

log = logging.getLogger(__name__)

POLL_S = 0.05
"""How often the state is read; a change reaches the tabs within this."""
HOW = "release to stop"
"""Push to talk's status line: how the turn ends."""


class VoiceRoom:
    """The conversation, answered aloud to every tab and heard from their microphones."""

    def __init__(self, session: VoiceSession, speaker: WebSpeaker,
                 events: EventRelay) -> None:
        self.conversation = session.conversation
        self.loop = session.loop
        self.speaker = speaker
        self.tabs = Tabs(session.conversation, session.timers)
        self.voice = self  # it listens: the inbox hands it the tabs' microphones
        events.target = self._show
        speaker.to_tabs = self.tabs.broadcast_audio
        self._owner: Tab | None = None
        """The tab whose microphone is listened to."""
        self._answered = False
        """The question waiting was answered (the first answer wins)."""
        self._inbox: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._closed = threading.Event()
        session.timers.when_finished(self._timer_finished)
        self._listening = Worker(self._listen, "web listening")
        self._watching = Worker(self._watch, "web state")

    def join(self, tab: Tab) -> Callable[[], None]:
        leave = self.tabs.join(tab)

        def left() -> None:
            leave()
            self._inbox.put(lambda: self._microphone_off(tab))

        return left

    # -- typed -------------------------------------------------------------------------

    def ask(self, text: str) -> bool:
        """A typed message: the answer to the question waiting, or a turn queued behind
        the reply (if any); always taken."""
        if self.tabs.question is not None and self.answer(text):
            return True
        waiting = not self.loop.replying
        self.loop.submit_text(text)
        if waiting:  # Parley is on it now; a reply under way keeps showing its own state
            self.tabs.set_state(THINKING)
        return True

    def stop(self) -> None:
        """Stop the reply and its voice (a question waiting is answered `stopped`)."""
        self.loop.interrupt()

    def answer(self, text: str) -> bool:
        """A tab's answer to the question asked, given to the loop as a typed line; False
        if none is waiting (the first answer already won)."""
        with self.tabs.lock:
            if self.tabs.question is None or self._answered:
                return False
            self._answered = True
        self.loop.submit_text(text)
        return True

    # -- heard -------------------------------------------------------------------------

    def talk(self, tab: Tab, pressed: bool) -> None:
        self._inbox.put(lambda: self._talk(tab, pressed))

    def hands_free(self, tab: Tab, on: bool) -> None:
        self._inbox.put(lambda: self._hands_free(tab, on))

    def hear(self, tab: Tab, pcm: np.ndarray) -> None:
        self._inbox.put(lambda: self._hear(tab, pcm))

    def _talk(self, tab: Tab, pressed: bool) -> None:
        if pressed and not tab.talking:
            tab.talking = True
            self._take_microphone(tab)
            self.loop.start_listening(HOW)
        elif not pressed and tab.talking:
            tab.talking = False
            if tab is self._owner:
                self.loop.stop_listening()  # what was said until now is the turn

    def _hands_free(self, tab: Tab, on: bool) -> None:
        tab.hands_free = on
        if on:
            self._take_microphone(tab)
        elif tab is self._owner and not tab.talking:
            self.loop.forget_speech()  # half an utterance is not a request

    def _hear(self, tab: Tab, pcm: np.ndarray) -> None:
        if tab is self._owner and tab.microphone_on:
            self.loop.feed_audio(pcm)

    def _take_microphone(self, tab: Tab) -> None:
        if self._owner is not tab:
            self.loop.forget_speech()  # another tab's half utterance ends here
            self._owner = tab

    def _microphone_off(self, tab: Tab) -> None:
        """The tab left: what it was saying is dropped."""
        tab.hands_free = tab.talking = False
        if tab is self._owner:
            self._owner = None
            self.loop.forget_speech()

    def _listen(self) -> None:
        while (step := self._inbox.get()) is not None:
            try:
                step()
            except Exception:  # a bug: log it, and go on listening
                log.exception("web listening failed")

    # -- state -------------------------------------------------------------------------

    def _state(self) -> str:
        if self.speaker.speaking:
            return SPEAKING
        if self.loop.replying:
            return THINKING
        owner = self._owner
        return LISTENING if owner is not None and owner.microphone_on else IDLE

    def _watch(self) -> None:
        while not self._closed.wait(POLL_S):
            with self.tabs.lock:
                self.tabs.announce()
                self.tabs.set_state(self._state())

    def _show(self, event: Event) -> None:
        with self.tabs.lock:
            if isinstance(event, ConfirmationAsked):
                self._answered = False
            elif isinstance(event, Heard) and event.text:  # Parley is on it from now
                self.tabs.set_state(THINKING)
            self.tabs.emit(event)
            if isinstance(event, Spoken):  # however short it is, the tabs see it spoken
                self.tabs.set_state(SPEAKING)

    def _timer_finished(self, timer: Timer) -> None:
        self.tabs.broadcast({"type": "timers", "timers": self.tabs.timer_list()})

    def wait_between_turns(self, timeout: float | None = None) -> bool:
        """Until the work between turns (the summary ahead) has ended; False after
        `timeout`."""
        return self.loop.between_turns.wait(timeout)

    def close(self) -> None:
        """Stop listening to the tabs, then the loop (its reply and work between turns)."""
        self._closed.set()
        self._inbox.put(None)
        self._listening.wait(5)
        self._watching.wait(5)
        if not self.loop.close(timeout=30):
            log.warning("the reply was still finishing a step after 30 s")


class EventRelay:
    """The loop's `render`, made before the room that shows its events: they go to
    `target` once it is set."""

    def __init__(self) -> None:
        self.target: Callable | None = None

    def __call__(self, event) -> None:
        if self.target is not None:
            self.target(event)
