"""Synthetic speech from espeak-ng (`apt install espeak-ng`), for tests and benchmarks that
need a phrase no recording holds ("okay nabu, …") in several voices and speeds."""

from __future__ import annotations

import io
import shutil
import subprocess

import numpy as np
import soundfile
import soxr

SAMPLE_RATE = 16000
VOICES = ("en-us", "en", "en-gb-x-rp", "en-029", "en+m3", "en-us+f3")
"""American, British, Received Pronunciation, Caribbean, a third male and a female voice."""


def missing_reason() -> str | None:
    """Why espeak-ng cannot speak here, or None."""
    return None if shutil.which("espeak-ng") else "espeak-ng is not installed " \
        "(apt install espeak-ng)"


def espeak(text: str, voice: str = "en-us", words_per_minute: int = 160) -> np.ndarray:
    """`text` said by espeak-ng, as 16 kHz mono int16."""
    result = subprocess.run(
        ["espeak-ng", "-v", voice, "-s", str(words_per_minute), "--stdout", text],
        capture_output=True, check=True, timeout=60)
    pcm, rate = soundfile.read(io.BytesIO(result.stdout), dtype="int16")
    return soxr.resample(pcm, rate, SAMPLE_RATE) if rate != SAMPLE_RATE else pcm
