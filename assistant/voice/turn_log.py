"""The voice loop's log of turns: every part records events and timings through it.

A turn's events go to the screen (`render`) and into its `TurnRecord`, each with its time
in ms from the turn's start (`TimedEvent`; replay turns them into its JSON); its timings
are milliseconds from the turn's start too. A reply answered ahead of the end of the
user's turn (`Speculation`) is the exception the log hides from the other parts: its
events are held back until it is committed, and its timings are set under its lock,
because the commit moves the turn's start.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext

from assistant.events import Event, Summarized, SummaryFailed
from assistant.voice.speculation import Speculation
from assistant.voice.turns import TimedEvent, Timing, TurnRecord, TurnSource
from audio.segmenter import Utterance


class TurnLog:
    """The records of a voice session, and the one way to add events and timings to them."""

    def __init__(self, clock: Callable[[], float], render: Callable[[Event], None],
                 keep_records: bool = True, show_all_between_turns: bool = False) -> None:
        self.clock = clock
        self.render = render
        self.keep_records = keep_records
        """Replay reports the records; live voice lets them go (they would grow with
        every turn of a session)."""
        self.show_all_between_turns = show_all_between_turns
        """Render every event of the work between turns, the summary's start too (the web
        page shows it being written), not only its outcome."""
        self.records: list[TurnRecord] = []
        self.speculating: Speculation | None = None
        """The speculation the reply worker is answering now, if any: its turn's events
        and timings are held by it."""

    def new(self, source: TurnSource, started: float | None = None) -> TurnRecord:
        """A turn that starts now (or at `started`), kept in `records`."""
        record = TurnRecord(source, self.clock() if started is None else started)
        self.keep(record)
        return record

    def keep(self, record: TurnRecord) -> None:
        if self.keep_records:
            self.records.append(record)

    def emit(self, record: TurnRecord, event: Event) -> None:
        """Show `event` and record it in `record` (held back, for a reply answered ahead)."""
        speculation = self.held_by(record)
        if speculation is not None:
            speculation.emit(self.clock(), event, self.show_in(record))
        else:
            self.show_in(record)(self.clock(), event)

    def show_in(self, record: TurnRecord) -> Callable[[float, Event], None]:
        """What shows an event that happened at a clock time, in `record` and on screen."""
        def show(at: float, event: Event) -> None:
            # Held events appear when the speculation is committed: at 0 ms, not before.
            record.events.append(TimedEvent(max(0.0, at - record.started) * 1000, event))
            self.render(event)

        return show

    def held_by(self, record: TurnRecord) -> Speculation | None:
        """The speculation answering `record`'s turn ahead, if it is one."""
        speculation = self.speculating
        return speculation if speculation is not None and speculation.record is record else None

    def time(self, record: TurnRecord, timing: Timing, at: float | None = None) -> None:
        """Set a timing (ms from the turn's start to `at`, or now); a held reply's turn
        start moves when it is committed, so its timings are set under the speculation's
        lock."""
        speculation = self.held_by(record)
        with speculation.lock if speculation is not None else nullcontext():
            record.timings.set(timing, self.ms_since(record, at))

    def ms_since(self, record: TurnRecord, at: float | None = None) -> float:
        return round(((self.clock() if at is None else at) - record.started) * 1000, 1)

    def time_utterance(self, record: TurnRecord, utterance: Utterance) -> None:
        """The end-of-speech wait and the utterance's length, for the turn it makes."""
        record.timings.end_of_speech_ms = round(utterance.end_ms - utterance.speech_end_ms, 1)
        record.timings.speech_seconds = round(utterance.duration_s, 2)

    def between_turns(self, record: TurnRecord | None, event: Event) -> None:
        """An event of the work after `record`'s reply: kept with that turn (replay's
        `idle`); on screen only the outcome: a "summarizing" line between turns would be
        noise, and one cut short, misleading."""
        if record is not None:
            record.idle.append(TimedEvent((self.clock() - record.started) * 1000, event))
        if self.show_all_between_turns or isinstance(event, (Summarized, SummaryFailed)):
            self.render(event)
