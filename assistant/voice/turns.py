"""What the voice loop keeps of each turn: settings, records with timings, their events."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum

from assistant.events import Event, Spoken
from models.speech import SpokenAudio

FIRST_AUDIO_WAIT_S = 3.0
"""At most this long the model waits for the first sentence's audio."""
FIRST_MOMENTS_S = 1.5
"""A reply's first moments: speech from the user until its first sentence has played, and
for at least this long after its first audio, continues their turn."""


@dataclass(frozen=True)
class VoiceSettings:
    """How the loop listens and talks."""

    push_to_talk: bool = False
    """Listen only between Enter presses (or until the end-of-speech silence)."""
    barge_in: bool = False
    """Keep listening while speaking; the user's speech stops playback and the reply.
    Off by default: without a headset or echo canceller Parley would hear itself."""
    echo_tail_ms: int = 300
    """After playback ends the microphone is ignored this much longer (room echo)."""
    speculative_stt: bool = True
    """Start transcribing at the first pause, during the end-of-speech wait."""
    turn_words: bool = True
    """At a pause the turn model calls finished, the words heard so far may keep the turn
    open ("Set a timer for…"): the pause's transcript is waited for before the turn ends."""
    live_transcript_s: float = 1.0
    """While the user speaks, transcribe the utterance so far each time it has grown by
    this many seconds, and show the words as they come (`heard-partial`); 0: not. Passes
    run only while the STT worker is free, so the pause's own transcript waits for at
    most one."""
    speculative_reply: bool = True
    """Start the reply too as soon as that transcript is ready, held back until the wait
    ends with no more speech (then it plays at once) and dropped if the user goes on."""
    first_clause_words: int = 4
    """Speak the first clause (at a comma) once it has this many words; 0 waits for the
    whole first sentence."""
    prefill: bool = True
    """Between turns, process the next prompt's beginning so a reply starts sooner."""
    ring_times: int = 3
    """A finished timer is announced this many times, until the user speaks or types."""
    ring_gap_s: float = 2.0
    """Silence between announcements, listening for the user."""
    follow_up_s: float = 6.0
    """With a wake word: after a reply, the next request needs no wake word this long."""
    continue_turns: bool = True
    """Speech in a reply's first moments (`FIRST_MOMENTS_S`) continues the user's turn: the
    reply stops and is taken back, and what was said before and after the pause is one
    message, answered anew. Hands-free only (push-to-talk's Enter ends a turn for sure)."""
    first_audio_first: bool = True
    """Pause the model while the first sentence is synthesized: on a small machine the two
    compete for the same cores, and the user waits for that first audio."""

    @property
    def turns_go_on(self) -> bool:
        """A turn may go on in its reply's first moments: `continue_turns`, hands-free."""
        return self.continue_turns and not self.push_to_talk

    def __post_init__(self) -> None:
        if not 0 <= self.echo_tail_ms <= 5000:
            raise ValueError("echo_tail_ms must be between 0 and 5000")
        if not 0 <= self.follow_up_s <= 600:
            raise ValueError("follow_up_s must be between 0 and 600 seconds")
        if not 0 <= self.live_transcript_s <= 60:
            raise ValueError("live_transcript_s must be between 0 and 60 seconds")
        if self.ring_times < 1 or self.ring_gap_s < 0:
            raise ValueError("ring_times must be at least 1 and ring_gap_s not negative")


class TurnSource(StrEnum):
    """What began a turn (a `str`: it reads and prints as its value)."""

    AUDIO = "audio"
    """The user spoke."""
    TEXT = "text"
    """The user typed a line."""
    TIMER = "timer"
    """A timer went off: its announcement is the turn's reply."""
    WAKE = "wake"
    """The wake word was heard: the turn holds only that event."""


class Timing(StrEnum):
    """A `TurnTimings` field, for code that sets one it is handed (`TurnLog.time`)."""

    END_OF_SPEECH = "end_of_speech_ms"
    SPEECH_SECONDS = "speech_seconds"
    STT = "stt_ms"
    FIRST_TOKEN = "first_token_ms"
    FIRST_SENTENCE = "first_sentence_ms"
    FIRST_AUDIO = "first_audio_ms"
    LATENCY = "latency_ms"
    BARGE_IN_DETECT = "barge_in_detect_ms"
    BARGE_IN_STOP = "barge_in_stop_ms"
    SUMMARY_WAIT = "summary_wait_ms"
    PREPARE_WAIT = "prepare_wait_ms"


@dataclass
class TurnTimings:
    """When each step of a turn happened, in ms from the turn's start (docs/events.md);
    None: the turn did not reach it. Replay lists those reached, in the order they were."""

    _reached: list[str] = field(default_factory=list, init=False, repr=False, compare=False)
    """The names of the fields set, in the order they were first set (replay's order)."""
    end_of_speech_ms: float | None = None
    """The end-of-turn wait: from the end of the user's speech to the turn's start."""
    speech_seconds: float | None = None
    """How long the utterance was (seconds)."""
    stt_ms: float | None = None
    first_token_ms: float | None = None
    first_sentence_ms: float | None = None
    first_audio_ms: float | None = None
    latency_ms: float | None = None
    """From the end of the user's speech to the first audio."""
    barge_in_detect_ms: float | None = None
    barge_in_stop_ms: float | None = None
    summary_wait_ms: float | None = None
    """The reply waited this long for a summary being written to stop."""
    prepare_wait_ms: float | None = None
    """The reply waited this long for the next prompt's preparation to stop."""

    def __setattr__(self, name: str, value: object) -> None:
        """Set a field, noting when it is first reached: replay lists the timings in that
        order (a reply answered ahead has its words before the end of the user's turn)."""
        if value is not None and name != "_reached" and name not in self._reached:
            self._reached.append(name)
        super().__setattr__(name, value)

    def set(self, timing: Timing, ms: float) -> None:
        setattr(self, timing.value, ms)

    def get(self, timing: Timing) -> float | None:
        return getattr(self, timing.value)

    def shift(self, ms: float) -> None:
        """Count every timing reached from a start `ms` later (the turn's start moved)."""
        for name in self._reached:
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, round(value - ms, 1))

    def time_latency(self) -> None:
        """The latency, once the reply's first audio played: from the end of the user's
        speech (a typed turn's start) to that audio."""
        if self.first_audio_ms is not None:
            self.latency_ms = round(self.first_audio_ms + (self.end_of_speech_ms or 0.0), 1)

    def as_json(self) -> dict[str, float]:
        """The timings reached, as replay's JSON holds them."""
        return {name: getattr(self, name) for name in self._reached
                if getattr(self, name) is not None}


@dataclass(frozen=True)
class TimedEvent:
    """An event of a turn, and when it happened: ms from the turn's start."""

    ms: float
    event: Event

    def as_json(self) -> dict:
        """As replay's JSON holds it: when it happened in the turn, then its fields."""
        return {"ms": round(self.ms, 1), **self.event.to_dict()}


@dataclass
class TurnRecord:
    """One thing heard or typed, what was answered, and when each step happened."""

    source: TurnSource
    started: float
    """Clock time the turn began: the end of speech was detected, or the line was typed."""
    heard: str = ""
    reply: str = ""
    events: list[TimedEvent] = field(default_factory=list)
    """What happened in the turn, in order (replay's `events`)."""
    interrupted: bool = False
    spoken_seconds: float = 0.0
    timings: TurnTimings = field(default_factory=TurnTimings)
    continued: bool = False
    """The user went on in the reply's first moments: the reply was taken back, and the
    turn continues in the next record."""
    spoken: bool = False
    """Its reply was over (spoken, stopped or failed): the turn can no longer continue."""
    changed: bool = False
    """A tool that changes something ran in its reply: it can no longer be taken back."""
    undo: list[Callable[[], None]] = field(default_factory=list, repr=False)
    """What undoes the changes its reply made at once (a timer it started), should the
    turn be taken back."""
    finished: threading.Event = field(default_factory=threading.Event, repr=False)
    audio: list[SpokenAudio] = field(default_factory=list, repr=False)
    """The reply's audio, kept only for `parley replay --audio-out`."""
    idle: list[TimedEvent] = field(default_factory=list)
    """Events of the work after this turn's reply, before the next turn (the summary
    written ahead), timed like `events` from the turn's start."""

    def first_audio_seen(self) -> bool:
        return self.timings.first_audio_ms is not None


def first_seconds(chunks: list[SpokenAudio], seconds: float) -> list[SpokenAudio]:
    """The audio of the first `seconds` of `chunks` (what was heard of a stopped reply),
    each chunk cut at its own rate."""
    kept: list[SpokenAudio] = []
    for chunk in chunks:
        count = round(seconds * chunk.sample_rate)
        if count <= 0:
            break
        kept.append(replace(chunk, pcm=chunk.pcm[:count]))
        seconds -= chunk.seconds
    return kept


def heard_events(events: list[TimedEvent], spoken_seconds: float) -> list[TimedEvent]:
    """Drop the `Spoken` events of sentences that had not started playing at the stop."""
    kept, started = [], 0.0
    for timed in events:
        if isinstance(timed.event, Spoken):
            if started >= spoken_seconds:
                continue
            started += timed.event.seconds
        kept.append(timed)
    return kept
