"""The one int16 conversion: every sample that leaves or enters Parley as 16-bit PCM."""

from __future__ import annotations

import numpy as np

FULL_SCALE = 32768.0
"""Float 1.0 is int16 full scale; +1.0 itself clips to 32767."""


def to_int16(audio: np.ndarray) -> np.ndarray:
    """Int16 from int16 or float ([-1, 1]) samples; beyond full scale is clipped, not wrapped.

    A 2-D (frames, channels) array is mixed down to mono first: it keeps what every
    channel says.
    """
    audio = np.asarray(audio)
    # The scale is the input's: an int16 mixdown is float, but already in int16 units.
    scale = FULL_SCALE if audio.dtype.kind == "f" else 1.0
    if audio.ndim != 2 and audio.dtype == np.int16:
        return audio
    # Out-of-range samples overflow and opposite infinities mix down to NaN; both are
    # dealt with below, so numpy's warnings about them would only be noise.
    with np.errstate(invalid="ignore", over="ignore"):
        if audio.ndim == 2:
            audio = audio.mean(axis=1, dtype=np.float64)  # float32 sums overflow sooner
        # NaN (a broken file or filter) is silence: cast as it is, its int16 is undefined.
        scaled = np.rint(np.nan_to_num(audio.astype(np.float64) * scale, nan=0.0))
    return np.clip(scaled, -32768, 32767).astype(np.int16)


def require_mono_int16(pcm: np.ndarray, who: str) -> np.ndarray:
    """`pcm` as a 1-D int16 array, or an error saying what `who` takes: a float array here
    is a caller's bug (its scale is unknown), never silently converted."""
    pcm = np.asarray(pcm)
    if pcm.ndim == 2 and pcm.shape[1] == 1:  # sounddevice's (frames, channels) blocks
        pcm = pcm[:, 0]
    if pcm.ndim != 1:
        raise ValueError(f"{who} takes mono PCM, got an array of shape {pcm.shape}")
    if pcm.dtype != np.int16:
        raise TypeError(f"{who} takes int16 PCM, got {pcm.dtype}; see audio.pcm.to_int16")
    return pcm


def level_dbfs(pcm: np.ndarray) -> float:
    """The loudness of int16 `pcm` (RMS) in dB below full scale; -inf for silence."""
    if not len(pcm):
        return float("-inf")
    mean_square = float(np.mean(np.square(pcm, dtype=np.float64)))
    return 10 * np.log10(mean_square / FULL_SCALE ** 2) if mean_square else float("-inf")
