"""Speech engine protocols: 16 kHz mono PCM in, text out; text in, audio per sentence out.

Small and synchronous, like Wyoming's `Transcriber`: the voice loop and replay only see
these, so stand-in engines cover the logic around them and the real ones plug in here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass

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


class SpeechToText(ABC):
    """Turns one utterance of 16 kHz mono int16 PCM into text."""

    name: str = "stt"

    @abstractmethod
    def transcribe(self, pcm: np.ndarray) -> Transcript:
        """Transcribe a whole utterance; returns an empty text for non-speech."""


class TextToSpeech(ABC):
    """Speaks text; `synthesize` yields int16 mono chunks at `sample_rate`, one per sentence."""

    name: str = "tts"
    sample_rate: int = 22050

    @abstractmethod
    def synthesize(self, text: str) -> Iterator[np.ndarray]:
        """Audio for `text`, a chunk per sentence (the natural point to stop)."""
