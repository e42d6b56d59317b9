"""What a benchmark needs to know of a voice loop's listening, beyond its turn records: where
in the recording, and when by the clock, each utterance's speech ended, what the turn
model said at each pause, and how much of the recording Parley did not listen to."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from audio.memory_out import MemorySpeaker
from audio.segmenter import TurnChecked, Utterance

SAMPLE_RATE = 16000


@dataclass
class Chunk:
    segmenter_sample: int
    """The segmenter's sample clock where this chunk begins."""
    recording_sample: int
    """Where in the audio replayed into the loop it begins."""
    length: int
    fed_at: float
    """Clock time it was fed: a microphone delivers a chunk when its last sample is heard."""


@dataclass
class SpeechEnd:
    recording_sample: int
    """Where the utterance's speech ended, in the audio replayed."""
    spoken_at: float
    """Clock time the user stopped talking (as the audio was fed in real time)."""
    decided_at: float
    """Clock time the segmenter ended the utterance."""


@dataclass
class Check:
    recording_sample: int
    """Where the speech before the pause ended."""
    pause_ms: float
    score: float
    finished: bool


@dataclass
class LoopTrace:
    """Put on a `VoiceLoop` before audio is fed: follows its segmenter."""

    fed: int = 0
    chunks: list[Chunk] = field(default_factory=list)
    ends: list[SpeechEnd] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    _position: int = 0

    def attach(self, loop) -> LoopTrace:
        feed_audio, segmenter = loop.feed_audio, loop.segmenter
        feed, flush = segmenter.feed, segmenter.flush

        def traced_feed_audio(pcm: np.ndarray) -> None:
            self._position = self.fed
            self.fed += len(pcm)
            feed_audio(pcm)

        def traced_feed(pcm: np.ndarray, words=None):
            self.chunks.append(Chunk(segmenter.samples_seen, self._position, len(pcm),
                                     time.monotonic()))
            events = feed(pcm, words)
            # A turn starts when its last audio came (the turn model's time is part of
            # the user's wait), so its end is dated from the feed, not after it.
            self._note(events, self.chunks[-1].fed_at)
            return events

        def traced_flush():
            utterance = flush()
            self._note([utterance] if utterance is not None else [], time.monotonic())
            return utterance

        loop.feed_audio, segmenter.feed, segmenter.flush = (traced_feed_audio, traced_feed,
                                                            traced_flush)
        return self

    def _note(self, events: list, decided_at: float) -> None:
        for event in events:
            if isinstance(event, Utterance) and not event.cut:
                where, when = self.locate(event.speech_end_sample)
                self.ends.append(SpeechEnd(where, when, decided_at))
            elif isinstance(event, TurnChecked):
                where, _ = self.locate(event.speech_end_sample)
                self.checks.append(Check(where, event.silence_ms, event.score, event.finished))

    def locate(self, segmenter_sample: int) -> tuple[int, float]:
        """Where in the recording, and at what clock time, a segmenter sample was heard."""
        for chunk in reversed(self.chunks):
            if chunk.segmenter_sample <= segmenter_sample:
                end = chunk.segmenter_sample + chunk.length
                offset = segmenter_sample - chunk.segmenter_sample
                return (chunk.recording_sample + offset,
                        chunk.fed_at - (end - segmenter_sample) / SAMPLE_RATE)
        return 0, float("nan")

    def end_before(self, clock_time: float) -> SpeechEnd | None:
        """The last utterance decided at or before `clock_time` (a turn record's start)."""
        earlier = [end for end in self.ends if end.decided_at <= clock_time + 0.05]
        return earlier[-1] if earlier else None

    def not_listened_s(self, until_sample: int) -> float:
        """Seconds of the recording up to `until_sample` the segmenter never heard (Parley
        was talking, half duplex, or its echo tail)."""
        heard = sum(max(0, min(c.recording_sample + c.length, until_sample) - c.recording_sample)
                    for c in self.chunks)
        return max(0, until_sample - heard) / SAMPLE_RATE


class FastForwardSpeaker(MemorySpeaker):
    """Plays in real time while the user's recording is fed (so half duplex deafens Parley
    as a loudspeaker would), then, at `finish()`, everything queued counts as played and
    later audio plays at once: after the recording nothing more can be lost."""

    def finish(self) -> None:
        now = self.clock.monotonic()
        with self._lock:
            for item in self._items:
                item.start = min(item.start, now - item.seconds)
            self._end = min(self._end, now)
        self.realtime = False
