"""Spoken requests made with a text-to-speech voice, as a microphone would hear them.

Tests and benchmarks speak their requests with the embedded Piper voice instead of
shipping recordings: any `TextToSpeech` will do.
"""

from __future__ import annotations

import numpy as np

from audio.pcm import to_int16
from models.speech import SpokenAudio, TextToSpeech

LEAD_S = 0.3
TAIL_S = 1.2
"""Silence after the words: longer than the end-of-speech wait, so the turn ends."""


def speech_at(tts: TextToSpeech, text: str, sample_rate: int) -> np.ndarray:
    """`text` said by `tts`, resampled to `sample_rate` from the rate its audio came at."""
    import soxr

    said = SpokenAudio.joined(tts.synthesize(text))
    return soxr.resample(said.pcm, said.sample_rate, sample_rate)


def spoken_clip(tts: TextToSpeech, text: str, sample_rate: int = 16000) -> np.ndarray:
    """`text` said by `tts`, as 16-bit mono at `sample_rate`, with silence around it."""
    import soxr

    chunks = list(tts.synthesize(text))
    if not chunks:
        raise ValueError(f"the voice said nothing for {text!r}")
    said = SpokenAudio.joined(chunks)
    voice = said.pcm / 32768.0
    if said.sample_rate != sample_rate:
        voice = soxr.resample(voice, said.sample_rate, sample_rate, quality="HQ")
    lead = np.zeros(int(LEAD_S * sample_rate), dtype=np.float32)
    tail = np.zeros(int(TAIL_S * sample_rate), dtype=np.float32)
    return to_int16(np.concatenate([lead, voice, tail]))
