"""The work between turns, one way for chat, voice and serve.

After a reply, while nobody waits for the model, Parley uses the silence: it writes the
summary the coming turns will need (`Conversation.summarize_ahead`), so that no reply
waits for one, and then processes the next prompt's beginning (`Conversation.prepare_next`),
which a new summary changes, so the next reply only reads the new message. A request that
comes meanwhile stops it (`stop()`): the summary stops between two batches of the model's
work and is dropped, the reply goes first with the last summary written, and the next
silence tries again. How long that request waited for the stop is kept (`waited()`).

Whether summaries are written here at all is the conversation's own policy, chosen by
whoever builds it (`ReplySettings.idle_summaries`): chat at a terminal, voice and serve
have idle time; piped chat has none and summarizes inside the reply.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from assistant.conversation import Conversation
from assistant.events import Event, SummaryStarted
from assistant.workers import Worker
from models.base import CancelToken

log = logging.getLogger(__name__)

SUMMARY_WAIT = "summary_wait_ms"
"""The timing of a reply that waited for a summary being written to stop."""
PREPARE_WAIT = "prepare_wait_ms"
"""The timing of a reply that waited for the next prompt's preparation to stop."""


@dataclass(frozen=True)
class Waited:
    """How long a request waited for the work between turns to stop."""

    timing: str
    """`SUMMARY_WAIT` or `PREPARE_WAIT`: what was being done when it came."""
    ms: float


class BetweenTurns:
    """The work between one conversation's turns: the summary ahead, then the next prompt.

    `run()` does it on the caller's thread (voice's reply worker, serve's model thread);
    `start()` on a thread of its own (chat, while the user types).
    """

    def __init__(self, conversation: Conversation, prepare: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.conversation = conversation
        self.prepare = prepare
        """Process the next prompt's beginning after the summary (serve, whose model
        answers many conversations, does not)."""
        self.clock = clock
        self.prepared_tokens = 0
        """Prompt tokens processed ahead of the replies that use them."""
        self.idle = threading.Event()
        """Set while no work between turns runs or is due."""
        self.idle.set()
        self._lock = threading.Lock()
        self._cancel: CancelToken | None = None
        self._closing = CancelToken()
        """Parley is closing: even the prompt read ahead (which a reply waits for, since
        it reads it anyway) stops."""
        self._summarizing = False
        """A summary is being written (else the prompt is being prepared)."""
        self._stopped: tuple[float, str] | None = None
        """When a request stopped the work, and the timing its wait goes under."""

    def expect(self) -> None:
        """Work is due: `wait()` waits for the `run()` that will do it."""
        self.idle.clear()

    def begin(self) -> None:
        """The work may be stopped from now, before `run()` starts it (it is queued)."""
        with self._lock:
            self._cancel = CancelToken()

    def run(self, emit: Callable[[Event], None], wanted: Callable[[], bool] = lambda: True,
            summarize: Callable[[], bool] = lambda: True) -> None:
        """Do the work on this thread. `wanted()` is asked once it can be stopped (a
        request coming after that stops it): False skips it all. `summarize()` False skips
        the summary (someone is talking: it would only be stopped)."""
        with self._lock:
            if self._cancel is None:
                self._cancel = CancelToken()
            cancel = self._cancel
        try:
            if cancel.cancelled or not wanted():
                return
            if self.conversation.settings.idle_summaries and summarize():
                self.conversation.summarize_ahead(self._tracked(emit), cancel)
            if self.prepare and not cancel.cancelled:
                self.prepared_tokens += self.conversation.prepare_next(self._closing)
        except Exception:  # a bug; only an optimisation failed, the conversation goes on
            log.exception("the work between turns failed")
        finally:
            with self._lock:
                self._cancel = None
                self._summarizing = False
            self.idle.set()

    def start(self, emit: Callable[[Event], None]) -> None:
        """Do the work on a thread of its own; `finish()` before the next reply."""
        self.expect()
        self.begin()
        Worker(lambda: self.run(emit), "idle")

    def stop(self, timed: bool = True) -> None:
        """A request came: stop the work, so it goes first. `timed`: its wait is kept for
        `waited()` (not when the user only stopped Parley)."""
        with self._lock:
            cancel = self._cancel
            if cancel is None or cancel.cancelled:
                return
            if timed:
                self._stopped = (self.clock(),
                                 SUMMARY_WAIT if self._summarizing else PREPARE_WAIT)
            cancel.cancel()

    def close(self) -> None:
        """Parley is closing: stop the work, the prompt being read ahead too (between two
        of the model's steps), and do no more; `wait()` for the step in progress."""
        self._closing.cancel()
        self.stop(timed=False)

    def finish(self, stop: bool = True) -> None:
        """Before a reply: stop the work (unless `stop` is False: then the reply waits for
        it) and wait for the model's step in progress, which the reply would wait for anyway."""
        if stop:
            self.stop()
        self.wait()

    def wait(self, timeout: float | None = None) -> bool:
        """Until no work between turns runs or is due; False after `timeout`."""
        return self.idle.wait(timeout)

    def waited(self) -> Waited | None:
        """How long the request that stopped the work has waited for it so far (once)."""
        with self._lock:
            stopped, self._stopped = self._stopped, None
        if stopped is None:
            return None
        return Waited(stopped[1], round((self.clock() - stopped[0]) * 1000, 1))

    def _tracked(self, emit: Callable[[Event], None]) -> Callable[[Event], None]:
        def tracked(event: Event) -> None:
            with self._lock:
                self._summarizing = isinstance(event, SummaryStarted)
            emit(event)

        return tracked
