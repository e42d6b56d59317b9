"""A short two-note chime, synthesized (no sound file to ship or to find)."""

from __future__ import annotations

import numpy as np

NOTES_HZ = (880.0, 1318.5)
"""A5 then E6: a rising fifth, heard as "done" rather than as an alarm."""
NOTE_SECONDS = 0.18
LEVEL = 0.35
"""Peak level, below Piper's speech so the chime never startles."""


def chime(sample_rate: int) -> np.ndarray:
    """The chime as int16 mono at `sample_rate`, with soft edges (no clicks)."""
    count = int(NOTE_SECONDS * sample_rate)
    t = np.arange(count) / sample_rate
    # Fast attack, exponential decay: a struck bell rather than a beep.
    envelope = np.minimum(1.0, t / 0.005) * np.exp(-t * 9.0)
    notes = [np.sin(2 * np.pi * hz * t) * envelope for hz in NOTES_HZ]
    tail = np.zeros(int(0.12 * sample_rate))
    sound = np.concatenate([notes[0], notes[1], tail]) * LEVEL
    return (sound * 32767).astype(np.int16)


WAKE_NOTE_HZ = 1318.5
WAKE_SECONDS = 0.09


def wake_chime(sample_rate: int) -> np.ndarray:
    """A short soft blip for "I'm listening": one E6, 90 ms, quieter than the timer chime,
    so it does not cover the first words of a request said straight after the wake word."""
    count = int(WAKE_SECONDS * sample_rate)
    t = np.arange(count) / sample_rate
    envelope = np.minimum(1.0, t / 0.005) * np.exp(-t * 30.0)
    sound = np.sin(2 * np.pi * WAKE_NOTE_HZ * t) * envelope * LEVEL * 0.6
    return (sound * 32767).astype(np.int16)
