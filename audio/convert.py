"""Raw PCM in any rate, sample width and channel count, as the 16 kHz mono int16 Whisper
takes: a stream converted chunk by chunk (a network client's audio), resampled by soxr."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import soxr

from audio.pcm import to_int16

MIN_RATE, MAX_RATE = 1000, 192_000
MAX_CHANNELS = 8
WIDTHS = (1, 2, 3, 4)
"""Bytes a sample: unsigned 8-bit, and signed 16-, 24- and 32-bit little-endian (WAV's)."""


class AudioFormatError(ValueError):
    """A format no audio can have (a rate of 0, 7-byte samples); the message says which."""


@dataclass(frozen=True)
class PcmFormat:
    rate: int
    width: int
    channels: int

    def __post_init__(self) -> None:
        problems = []
        if not isinstance(self.rate, int) or not MIN_RATE <= self.rate <= MAX_RATE:
            problems.append(f"rate {self.rate!r} (takes {MIN_RATE}–{MAX_RATE} Hz)")
        if self.width not in WIDTHS:
            problems.append(f"width {self.width!r} (takes 1, 2, 3 or 4 bytes)")
        if not isinstance(self.channels, int) or not 1 <= self.channels <= MAX_CHANNELS:
            problems.append(f"channels {self.channels!r} (takes 1–{MAX_CHANNELS})")
        if problems:
            raise AudioFormatError("unusable audio format: " + ", ".join(problems))

    @property
    def frame_bytes(self) -> int:
        return self.width * self.channels


def samples_as_float(data: bytes, width: int) -> np.ndarray:
    """Little-endian PCM samples as float32 in [-1, 1)."""
    if width == 1:  # WAV's 8-bit is unsigned, silence at 128
        return (np.frombuffer(data, np.uint8).astype(np.float32) - 128.0) / 128.0
    if width == 2:
        return np.frombuffer(data, "<i2").astype(np.float32) / 32768.0
    if width == 3:  # no numpy type: place the 3 bytes high in an int32
        raw = np.frombuffer(data, np.uint8).reshape(-1, 3)
        wide = np.zeros((len(raw), 4), np.uint8)
        wide[:, 1:] = raw
        return wide.view("<i4")[:, 0].astype(np.float32) / 2147483648.0
    return (np.frombuffer(data, "<i4").astype(np.float64) / 2147483648.0).astype(np.float32)


class PcmConverter:
    """One stream of `source` PCM as `rate` Hz mono int16, fed in chunks of any size.

    A chunk may end inside a frame (a client's chunks need not align): the bytes left over
    wait for the next one. The resampler keeps its state across chunks, so the joins are
    as clean as converting the whole recording at once.
    """

    def __init__(self, source: PcmFormat, rate: int = 16000) -> None:
        self.source = source
        self.rate = rate
        self._partial = b""
        self._resampler = (None if source.rate == rate else
                           soxr.ResampleStream(source.rate, rate, 1, dtype="float32"))

    def feed(self, data: bytes, last: bool = False) -> np.ndarray:
        """The converted samples `data` completes (all that is left, with `last`)."""
        data = self._partial + data
        whole = len(data) // self.source.frame_bytes * self.source.frame_bytes
        self._partial = data[whole:]
        samples = samples_as_float(data[:whole], self.source.width)
        if self.source.channels > 1:
            samples = samples.reshape(-1, self.source.channels).mean(axis=1, dtype=np.float32)
        if self._resampler is not None:
            samples = self._resampler.resample_chunk(samples, last=last)
        return to_int16(samples)

    def finish(self) -> np.ndarray:
        """What the resampler still holds; a trailing partial frame is dropped."""
        self._partial = b""
        return self.feed(b"", last=True)
