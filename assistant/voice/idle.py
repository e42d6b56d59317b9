"""The voice loop's time between turns (a mixin of `VoiceLoop`).

Once a reply has been spoken and nothing waits, the reply worker uses the silence: it
writes the summary the coming turns will need (`Conversation.summarize_ahead`), then
processes the next prompt's beginning, which a new summary changes. A turn queued
meanwhile (an utterance, a pause the reply starts at, a typed line, a timer) cancels
it: the summary stops between two batches of the model's work and is dropped, the reply
goes first with the last summary written (and the prompt read for it, kept aside while
the summary was written), and the next silence tries again.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from assistant.events import Event, Summarized, SummaryFailed, SummaryStarted
from assistant.voice.turns import TurnRecord, event_json
from models.base import CancelToken

log = logging.getLogger(__name__)


class TurnQueue(queue.Queue):
    """The reply worker's queue; `on_put` runs after each item is queued."""

    def __init__(self, on_put: Callable[[], None]) -> None:
        super().__init__()
        self._on_put = on_put

    def put(self, item, block: bool = True, timeout: float | None = None) -> None:
        super().put(item, block, timeout)
        self._on_put()


class IdlesBetweenTurns:
    """Work between turns on the reply worker, cancelled by the next turn."""

    _idle_cancel: CancelToken | None = None
    _idle_summarizing = False
    """A summary is being written between turns (else the prompt is being prepared)."""
    _idle_stopped: tuple[float, str] | None = None
    """When a turn stopped the work between turns, and the timing its wait goes under."""

    def _start_idle_state(self) -> None:
        self._idle_done = threading.Event()
        """Set while no work between turns runs or is due."""

    def _turn_queued(self) -> None:
        """A turn came: stop the work between turns, so the reply goes first."""
        cancel = self._idle_cancel
        if cancel is not None and not cancel.cancelled:
            self._idle_stopped = (self.clock(), "summary_wait_ms" if self._idle_summarizing
                                  else "prepare_wait_ms")
            cancel.cancel()

    def _cancel_idle(self) -> None:
        cancel = self._idle_cancel
        if cancel is not None:
            cancel.cancel()

    def _between_turns(self, record: TurnRecord | None) -> None:
        """After `record`'s reply was spoken, while nothing waits: the summary ahead, then
        the next prompt's beginning. Skipped when a turn waits or nothing more will come."""
        cancel = CancelToken()
        self._idle_cancel = cancel
        try:
            # Set before this look at the queue: a turn queued after it cancels the work.
            if not self._turns.empty() or self._input_ended or self._closing:
                return
            conversation = self.conversation
            # Someone talking now will want an answer in a moment: no summary (it would
            # only be stopped); the prompt is prepared for that answer.
            if conversation.settings.idle_summaries and not self.segmenter.in_speech:
                conversation.summarize_ahead(lambda event: self._idle_event(record, event),
                                             cancel)
            if self.settings.prefill and not cancel.cancelled:
                self.prefilled_tokens += conversation.prepare_next()
        except Exception:  # a bug; only an optimisation failed, the session goes on
            log.exception("the work between turns failed")
        finally:
            self._idle_cancel = None
            self._idle_summarizing = False
            self._idle_done.set()

    def _idle_event(self, record: TurnRecord | None, event: Event) -> None:
        """Kept with the turn it followed (replay's `idle`); on screen only the outcome: a
        "summarizing" line between turns would be noise, and one cut short, misleading."""
        self._idle_summarizing = isinstance(event, SummaryStarted)
        if record is not None:
            record.idle.append(event_json(event, (self.clock() - record.started) * 1000))
        if isinstance(event, (Summarized, SummaryFailed)):
            self.render(event)

    def _idle_waited(self) -> tuple[str, float] | None:
        """The turn just taken from the queue came while Parley worked between turns: the
        timing for how long it waited for that work to stop (`summary_wait_ms`, a summary
        being written, or `prepare_wait_ms`, the next prompt being prepared), in ms."""
        stopped, self._idle_stopped = self._idle_stopped, None
        if stopped is None:
            return None
        return stopped[1], round((self.clock() - stopped[0]) * 1000, 1)

    def wait_replied(self, timeout: float | None = None) -> bool:
        """Wait until every queued turn was answered and spoken (the work between turns
        may still be going on: the next turn cancels it)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._turns.all_tasks_done:
                if not self._turns.unfinished_tasks:
                    return True
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._turns.all_tasks_done.wait(left if left is not None else 0.5)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every queued turn was answered and spoken, and the work between
        turns after them (the summary, the next prompt's beginning) is done."""
        deadline = None if timeout is None else time.monotonic() + timeout

        def left() -> float | None:
            return None if deadline is None else max(0.0, deadline - time.monotonic())

        while True:
            if not self.wait_replied(left()) or not self._idle_done.wait(left()):
                return False
            if not self._turns.unfinished_tasks and self._idle_done.is_set():
                return True
