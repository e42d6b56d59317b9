"""The user's words while they speak: the utterance transcribed as it grows.

Whisper hears a sentence cut at "now" as a guess at its end ("And so am I fellow
American"): the last words of one pass change in the next. So, as whisper_streaming's
LocalAgreement-2 does, a word is kept only once two passes in a row agree on it and on
everything before it; kept words never change. What the latest pass adds beyond them is
shown as still tentative.

These passes are only for showing the words as they come (`heard-partial`): the message
is always what the transcript of the whole utterance at its pause says, as without them.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np

from assistant.events import HeardPartial
from models.speech import STT_SAMPLE_RATE

_NOT_WORD = re.compile(r"[^\w']+")


def same_word(a: str, b: str) -> bool:
    """Two passes' spellings of a word agree: punctuation and case do not matter
    ("Americans," and "Americans" are one word)."""
    return _NOT_WORD.sub("", a.lower()) == _NOT_WORD.sub("", b.lower())


@dataclass(frozen=True)
class LiveWords:
    """What is known of the words so far."""

    kept: str
    """Words two passes agreed on: they stay."""
    tentative: str
    """What the latest pass heard after them, which the next may change."""

    @property
    def text(self) -> str:
        return " ".join(part for part in (self.kept, self.tentative) if part)


class LocalAgreement:
    """Keeps the words two consecutive passes over a growing utterance agree on."""

    def __init__(self) -> None:
        self._kept: list[str] = []
        self._last: list[str] = []

    def add(self, text: str) -> LiveWords:
        """A new pass over the utterance so far heard `text`."""
        words = text.split()
        agreed = 0
        for before, now in zip(self._last, words, strict=False):
            if not same_word(before, now):
                break
            agreed += 1
        # Kept words stay as they were, even if this pass heard them otherwise: the screen
        # never takes a word back. (Kept words are a prefix of the last pass, so a longer
        # agreement with it extends them.)
        if agreed > len(self._kept):
            self._kept += words[len(self._kept):agreed]
        self._last = words
        tentative = words[len(self._kept):] if self._agrees_with_kept(words) else []
        return LiveWords(" ".join(self._kept), " ".join(tentative))

    def _agrees_with_kept(self, words: list[str]) -> bool:
        return len(words) >= len(self._kept) and all(
            same_word(a, b) for a, b in zip(self._kept, words, strict=False))


class LiveTranscript:
    """Transcribes the utterance as it grows, one pass at a time on the STT worker.

    A pass starts once the utterance has grown by `every_s` of audio since the last one,
    and only while the user is speaking and no pass is under way, so at most one pass is
    ahead of the pause's transcript on the worker (and one not yet started is dropped at
    the pause: `pausing`)."""

    def __init__(self, submit: Callable[..., Future], transcribe: Callable[[np.ndarray], str],
                 show: Callable[[HeardPartial], None], clock: Callable[[], float],
                 every_s: float) -> None:
        self._submit = submit
        self._transcribe = transcribe
        self._show = show
        self._clock = clock
        self._every = round(every_s * STT_SAMPLE_RATE)
        self._lock = threading.Lock()
        self._agreement = LocalAgreement()
        self._pass: Future | None = None
        self._covered = 0
        """Samples of the utterance the last pass was given."""
        self._utterance = 0
        """Which utterance passes belong to: one that ended drops what its passes say."""
        self._last: LiveWords | None = None
        self._shown: list[tuple[float, HeardPartial]] = []

    def grew(self, samples: int, speech: Callable[[], np.ndarray | None]) -> None:
        """The utterance in progress reaches `samples`; `speech()` gives its audio (None
        once the user stopped speaking)."""
        if self._every <= 0 or samples - self._covered < self._every:
            return
        if self.passing:
            return
        pcm = speech()
        if pcm is None:
            return
        self._covered = samples
        self._pass = self._submit(self._run, pcm, self._utterance)

    @property
    def passing(self) -> bool:
        """A pass is waiting for the worker or running."""
        return self._pass is not None and not self._pass.done()

    def pausing(self) -> None:
        """The user paused: the pause's transcript comes first, a pass not yet started
        is dropped."""
        if self._pass is not None:
            self._pass.cancel()

    def ended(self) -> list[tuple[float, HeardPartial]]:
        """The utterance ended (or was dropped): what was shown of it, with the clock time
        of each, for its turn's record. The next utterance starts afresh."""
        self.pausing()
        with self._lock:
            shown, self._shown = self._shown, []
            self._utterance += 1
            self._agreement = LocalAgreement()
            self._covered, self._last = 0, None
        return shown

    def _run(self, pcm: np.ndarray, utterance: int) -> None:
        text = self._transcribe(pcm)
        with self._lock:
            if utterance != self._utterance:
                return  # its utterance ended while it ran: the pause's words stand
            words = self._agreement.add(text)
            if not words.text or words == self._last:
                return
            self._last = words
            event = HeardPartial(words.kept, words.tentative)
            self._shown.append((self._clock(), event))
            # Shown under the lock: an utterance that ends now cannot show its heard first.
            self._show(event)
