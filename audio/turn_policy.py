"""When a pause ends the user's turn: asked of a turn model, never of the clock.

A fixed silence cannot be both quick and patient: 720 ms is slow after "what time is it"
and too quick for someone thinking in the middle of a sentence. So at a short pause the
turn model (Smart Turn, `models.smart_turn`) is asked whether the user has finished:

- at `check_ms` of silence it is asked, once a pause; a score at or above `threshold` ends
  the turn there;
- below it the user is given time: the turn ends at `max_silence_ms` of silence, unless
  they go on (then the next pause is judged afresh).

The words said so far have a say too: given a `WordsCheck`, the policy asks it about the
speech up to the pause. Words that cannot end a request ("ends on “for”") keep the turn
open until `max_silence_ms`, however finished the voice sounded; words that make a whole
sentence end a turn the voice sounded unfinished in after `whole_sentence_ms`. The voice
loop answers from the pause's transcript, which it needs for the reply anyway, so this
costs no extra transcription; the feed waits for it (a microphone's audio queues
meanwhile), so the decision stays a function of the audio: the same recording gives the
same turns however fast it is fed.

Asked again later in the same pause, the model was no help: on a speech with a one-second
pause after "ask not", 0.24 at 210 ms rose to 0.80 at 450 ms, and inside other sentences it
swung between 0.1 and 0.7, so the second opinion would split sentences it had held whole.

Everything is counted in frames of the audio fed, and the model is a function of the
audio, so the same recording gives the same turns however fast it is fed. If the model
fails mid-session, the policy says so once and the segmenter's fixed silence takes over.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from audio.speech_events import TurnChecked

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TurnSettings:
    check_ms: int = 210
    """Silence after speech at which the turn model is first asked (Smart Turn was trained
    on turns cut about 200 ms after the last word)."""

    threshold: float = 0.5
    """A score at or above this ends the turn (the model's own cut-off)."""

    max_silence_ms: int = 1500
    """Silence that ends the turn whatever the model says; 1,500 ms heard a speaker's
    one-second pause inside a sentence whole, where 720 ms split it."""

    whole_sentence_ms: int = 720
    """Silence that ends a turn the model heard as unfinished when its words make a whole
    sentence ("Tell me something about cats." scored 0.02–0.15 at every pause length)."""

    def __post_init__(self) -> None:
        for name in ("check_ms", "max_silence_ms", "whole_sentence_ms"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be more than 0, got {getattr(self, name)}")
        if not (math.isfinite(self.threshold) and 0.0 < self.threshold <= 1.0):
            raise ValueError(f"the turn threshold must be above 0 and at most 1, got "
                             f"{self.threshold}")
        if self.check_ms > self.max_silence_ms:
            raise ValueError(f"check_ms ({self.check_ms}) cannot exceed max_silence_ms "
                             f"({self.max_silence_ms})")
        if not self.check_ms <= self.whole_sentence_ms <= self.max_silence_ms:
            raise ValueError(f"whole_sentence_ms ({self.whole_sentence_ms}) must lie between "
                             f"check_ms ({self.check_ms}) and max_silence_ms "
                             f"({self.max_silence_ms})")


@dataclass(frozen=True)
class Words:
    """What the words said up to a pause say about the turn."""

    open: str | None = None
    """Why they cannot end a request ("ends on “for”"): the turn waits for the longest
    silence, however finished the voice sounded."""

    whole: bool = False
    """They end as a finished sentence does ("…about cats."): a turn the voice sounded
    unfinished in ends after `whole_sentence_ms`, not the longest silence."""


WordsCheck = Callable[[np.ndarray, int], Words]
"""Given the speech up to a pause and the sample it ended at: what its words say."""


class TurnPolicy:
    """Asks the model (and the words) and says what the answer means; the segmenter counts
    the pause in whole frames and asks at `check_ms`."""

    def __init__(self, score: Callable[[np.ndarray], float],
                 settings: TurnSettings = TurnSettings(), on_failure:
                 Callable[[str], None] | None = None) -> None:
        self.score = score
        """The probability that the turn in the audio given (its start to now) is over."""
        self.settings = settings
        self.on_failure = on_failure or (lambda message: log.warning("%s", message))
        self.failed = False
        """The model raised once: from then on the fixed silence decides."""

    def check(self, pcm: np.ndarray, sample: int, speech_end_sample: int,
              sample_rate: int, speech_pcm: np.ndarray | None = None,
              words: WordsCheck | None = None) -> TurnChecked | None:
        """Ask the model about the turn in `pcm`, and `words` about `speech_pcm` (the same
        turn without the pause); None if the model failed (then never again)."""
        try:
            score = float(self.score(pcm))
        except Exception as error:  # a broken model must not end the conversation
            self.failed = True
            self.on_failure(f"The turn model failed ({error}); turns now end after a fixed "
                            "silence.")
            return None
        if not math.isfinite(score):
            score = 0.0
        finished = score >= self.settings.threshold
        said = (Words() if words is None else
                words(pcm if speech_pcm is None else speech_pcm, speech_end_sample))
        ends_at = None
        if said.open is not None:
            finished = False
        elif not finished and said.whole:
            ends_at = self.settings.whole_sentence_ms
        note = said.open or ("a whole sentence" if said.whole and words is not None else None)
        return TurnChecked(sample, speech_end_sample, round(score, 4), finished, sample_rate,
                           note, ends_at)
