"""Audio clips for tests, 16 kHz mono int16 as a microphone gives them unless a rate is
given: silence, tones, speech-like buzzes the stand-in speech-to-text tells apart by their
peak, and a real recording."""

from __future__ import annotations

import numpy as np

from tests.support import speech_samples as samples

RATE = 16000
"""Samples a second of every clip here."""


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), dtype=np.int16)


def sine(seconds: float, rate: int = RATE, hz: float = 440.0, level: float = 0.5) -> np.ndarray:
    """A pure tone as floats between -`level` and `level`, as sound files and converters
    take them."""
    return level * np.sin(2 * np.pi * hz * np.arange(int(seconds * rate)) / rate)


def tone(seconds: float, rate: int = RATE, hz: float = 440.0, peak: int = 10000) -> np.ndarray:
    """A pure tone as int16 samples up to `peak`, loud enough to hear through a sound server."""
    return sine(seconds, rate, hz, peak).astype(np.int16)


def offset_in(heard: np.ndarray, recording: np.ndarray) -> int:
    """Where `recording` starts in `heard` (negative: it began before `heard` did), by
    cross-correlation: a path that delays, resamples or filters the audio keeps its shape."""
    heard, recording = heard.astype(float), recording.astype(float)
    size = 1 << int(np.ceil(np.log2(len(heard) + len(recording))))
    correlation = np.fft.irfft(np.fft.rfft(heard, size) * np.conj(np.fft.rfft(recording, size)),
                               size)
    lag = int(np.argmax(correlation))
    return lag if lag < size // 2 else lag - size


def speechlike(seconds: float, peak: int, rate: int = RATE, pitch: float = 140.0) -> np.ndarray:
    """A voiced, syllable-paced buzz that webrtcvad takes for speech; `peak` labels it.

    `tests.support.fakes.ScriptedSpeechToText` tells clips apart by their peak amplitude, so
    a test can script what each clip "says" while the real segmenter and VAD run on it.
    """
    t = np.arange(int(seconds * rate)) / rate
    phase = 2 * np.pi * np.cumsum(pitch * (1 + 0.05 * np.sin(2 * np.pi * 3 * t))) / rate
    voice = sum(np.sin(k * phase) / k for k in range(1, 12))
    syllables = 0.55 + 0.45 * np.abs(np.sin(2 * np.pi * 2.5 * t))
    wave = voice * syllables
    return (wave / np.max(np.abs(wave)) * peak).astype(np.int16)


def clip(seconds: float, peak: int) -> np.ndarray:
    """An utterance: `speechlike(seconds, peak)` with 0.4 s of silence before and after."""
    return np.concatenate([silence(0.4), speechlike(seconds, peak), silence(0.4)])


def recorded_speech() -> tuple[np.ndarray, str]:
    """A person reading "he was not an ill disposed young man" (a second of silence before,
    two after) and its transcript; the caller skips when the recordings are missing."""
    sample = samples.librivox()[1]
    return np.concatenate([silence(1.0), sample.pcm, silence(2.0)]), sample.transcript
