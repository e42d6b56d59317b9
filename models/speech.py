"""Speech engine protocols: 16 kHz mono PCM in, text out; text in, audio per sentence out.

Small and synchronous, like Wyoming's `Transcriber`: the voice loop and replay only see
these, so stand-in engines cover the logic around them and the real ones plug in here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import groupby

import numpy as np

from models.errors import EngineError

STT_SAMPLE_RATE = 16000
"""Speech-to-text always takes 16 kHz mono int16 PCM."""


class SpeechEngineError(EngineError):
    """A speech engine could not be loaded or failed; the message says what to do."""


@dataclass(frozen=True)
class Transcript:
    """What was heard in one utterance."""

    text: str
    """The words, or "" when the audio held no speech (silence, breathing, noise)."""
    confidence: float
    """0–1: how sure the engine is that `text` is what was said."""
    rejected: str = ""
    """Why the audio was not turned into words ("no speech", "too quiet"…), if it was not."""


@dataclass(frozen=True)
class SpokenAudio:
    """A chunk of speech with its format and its words: the rate travels with the audio,
    so whoever plays, sends or writes it never asks the engine."""

    pcm: np.ndarray
    """int16 mono samples."""
    sample_rate: int
    text: str = ""
    """The words this audio is (part of): the text given to `synthesize` (Parley gives it
    a sentence at a time), on each of its chunks; "" for a sound without words (a chime)."""

    @property
    def seconds(self) -> float:
        return len(self.pcm) / self.sample_rate

    @classmethod
    def joined(cls, chunks: Iterable[SpokenAudio]) -> SpokenAudio:
        """The chunks as one piece of audio (one voice's chunks share their rate)."""
        chunks = list(chunks)
        if not chunks:
            raise ValueError("no audio to join")
        rates = {chunk.sample_rate for chunk in chunks}
        if len(rates) > 1:
            raise ValueError(f"audio at different rates ({sorted(rates)} Hz) cannot be joined")
        # A sentence that came back in several chunks is said once.
        words = " ".join(text for text, _ in groupby(c.text for c in chunks if c.text))
        return cls(np.concatenate([chunk.pcm for chunk in chunks]), chunks[0].sample_rate, words)


class SpeechToText(ABC):
    """Turns one utterance of 16 kHz mono int16 PCM into text."""

    name: str = "stt"

    @abstractmethod
    def transcribe(self, pcm: np.ndarray) -> Transcript:
        """Transcribe a whole utterance; returns an empty text for non-speech."""


class TextToSpeech(ABC):
    """Speaks text; `synthesize` yields `SpokenAudio` chunks, one per sentence."""

    name: str = "tts"
    sample_rate: int = 22050
    """The voice's rate, for what is made before any speech exists (a chime, a server's
    description); speech itself carries its own rate."""

    @abstractmethod
    def synthesize(self, text: str) -> Iterator[SpokenAudio]:
        """Audio for `text`, a chunk per sentence (the natural point to stop)."""
