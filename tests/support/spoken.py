"""Spoken requests made with a text-to-speech voice, as a microphone would hear them.

Tests and benchmarks speak their requests with the embedded Piper voice instead of
shipping recordings: any engine with `synthesize(text)` and `sample_rate` will do.
"""

from __future__ import annotations

import numpy as np

from audio.pcm import to_int16

LEAD_S = 0.3
TAIL_S = 1.2
"""Silence after the words: longer than the end-of-speech wait, so the turn ends."""


def spoken_clip(tts, text: str, sample_rate: int = 16000) -> np.ndarray:
    """`text` said by `tts`, as 16-bit mono at `sample_rate`, with silence around it."""
    import soxr

    chunks = [np.asarray(c).reshape(-1) for c in tts.synthesize(text)]
    if not chunks:
        raise ValueError(f"the voice said nothing for {text!r}")
    voice = np.concatenate(chunks)
    voice = voice / 32768.0 if voice.dtype == np.int16 else voice.astype(np.float32)
    if tts.sample_rate != sample_rate:
        voice = soxr.resample(voice, tts.sample_rate, sample_rate, quality="HQ")
    lead = np.zeros(int(LEAD_S * sample_rate), dtype=np.float32)
    tail = np.zeros(int(TAIL_S * sample_rate), dtype=np.float32)
    return to_int16(np.concatenate([lead, voice, tail]))
