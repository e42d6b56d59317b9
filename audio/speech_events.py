"""What the segmenter says about the user's speech: it started, paused, resumed, was judged
finished or not by the turn model, and ended as an utterance. Positions are in samples of
the audio fed, never clock times, so the same audio gives the same events."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def in_ms(samples: int, sample_rate: int) -> float:
    """A count of samples as milliseconds."""
    return samples * 1000 / sample_rate


@dataclass(frozen=True, eq=False)
class SpeechStarted:
    sample: int
    """Where the first speech frame of the detection began (pre-roll not included)."""

    sample_rate: int = 16000


@dataclass(frozen=True, eq=False)
class SpeechPaused:
    """The user stopped talking, for now: transcribe `pcm` speculatively.

    If no speech follows, the `Utterance` comes with `speech_end_sample == sample` and its
    `speech_pcm` equals `pcm`, so a transcript of `pcm` can be reused as is.
    """

    pcm: np.ndarray
    """Utterance so far (int16, read-only), from its start to where speech stopped."""

    sample: int
    """Where the last speech frame ended."""

    sample_rate: int = 16000


@dataclass(frozen=True, eq=False)
class SpeechResumed:
    """Speech came back after a `SpeechPaused`: what was made of that pause is void."""

    sample: int
    """Where the speech frame that resumed it began."""

    sample_rate: int = 16000


@dataclass(frozen=True, eq=False)
class Utterance:
    pcm: np.ndarray
    """int16 mono, read-only: pre-roll, speech, and the end silence up to `end_sample`."""

    start_sample: int
    """Where `pcm` begins (pre-roll included)."""

    end_sample: int
    """Where `pcm` ends: when the segmenter decided (speech end + end silence, or a cut)."""

    speech_end_sample: int
    """Where the last speech frame ended: when the user stopped talking."""

    cut: bool
    """Cut at `max_utterance_s`; what followed continues as the next utterance."""

    turn_score: float | None = None
    """The turn model's last score at the pause that ended it (None: no model was asked)."""

    sample_rate: int = 16000

    @property
    def duration_s(self) -> float:
        return len(self.pcm) / self.sample_rate

    @property
    def start_ms(self) -> float:
        return in_ms(self.start_sample, self.sample_rate)

    @property
    def speech_end_ms(self) -> float:
        return in_ms(self.speech_end_sample, self.sample_rate)

    @property
    def end_ms(self) -> float:
        return in_ms(self.end_sample, self.sample_rate)

    @property
    def speech_pcm(self) -> np.ndarray:
        """`pcm` without the end silence: what to transcribe (equal to SpeechPaused.pcm)."""
        return self.pcm[: max(0, self.speech_end_sample - self.start_sample)]


@dataclass(frozen=True, eq=False)
class TurnChecked:
    """The turn model was asked, at a pause, whether the user has finished."""

    sample: int
    """Where the pause had reached when it was asked."""

    speech_end_sample: int
    """Where the speech before the pause ended."""

    score: float
    """The model's probability that the turn is over."""

    finished: bool
    """At or above the threshold, and the words could end a request: the turn ends here."""

    sample_rate: int = 16000

    words: str | None = None
    """What the words said so far decided: why they cannot end the turn ("ends on “for”"),
    or "a whole sentence"; None when they decided nothing, or were not asked."""

    ends_after_ms: int | None = None
    """Not finished, but the turn ends at this much silence rather than the longest (its
    words make a whole sentence)."""

    @property
    def silence_ms(self) -> float:
        return in_ms(self.sample - self.speech_end_sample, self.sample_rate)


SegmenterEvent = SpeechStarted | SpeechPaused | SpeechResumed | TurnChecked | Utterance
