"""Voice activity detection: the only module that imports `webrtcvad`."""

from __future__ import annotations

import numpy as np

VAD_SAMPLE_RATES = (8000, 16000, 32000, 48000)
"""Sample rates webrtcvad accepts."""

VAD_FRAME_MS = (10, 20, 30)
"""Frame lengths webrtcvad accepts."""

SILENCE_RMS = 10.0
"""A frame quieter than this (about -70 dBFS: zeros, or dither) is digital silence."""


class WebRtcVad:
    """Speech / non-speech decision per 10, 20 or 30 ms frame of int16 mono PCM."""

    def __init__(self, aggressiveness: int = 2, sample_rate: int = 16000) -> None:
        if isinstance(aggressiveness, bool) or aggressiveness not in (0, 1, 2, 3):
            raise ValueError(
                f"VAD aggressiveness must be 0, 1, 2 or 3 (3 filters out the most non-speech), "
                f"got {aggressiveness!r}"
            )
        if sample_rate not in VAD_SAMPLE_RATES:
            raise ValueError(
                f"webrtcvad works at 8000, 16000, 32000 or 48000 Hz, got {sample_rate}; "
                "resample the audio first"
            )
        import webrtcvad  # lazy: only live audio and replay need it

        self.aggressiveness = aggressiveness
        self.sample_rate = sample_rate
        self._vad = webrtcvad.Vad(aggressiveness)
        # Byte lengths of valid frames; webrtcvad's own error for others is unhelpful.
        self._frame_bytes = {2 * sample_rate * ms // 1000 for ms in VAD_FRAME_MS}

    def is_speech(self, frame: bytes) -> bool:
        if len(frame) not in self._frame_bytes:
            raise ValueError(
                f"a VAD frame must be 10, 20 or 30 ms of int16 audio at {self.sample_rate} Hz "
                f"({sorted(self._frame_bytes)} bytes), got {len(frame)} bytes"
            )
        # Digital silence is never speech, and webrtcvad must not see it: its noise estimate
        # sinks towards nothing, and for seconds afterwards ordinary room noise counts as
        # speech (measured: 1.5 s of zeros, then every frame of 2 s of -55 dBFS noise). A
        # muted source, a WAV's silent lead-in or replay's trailing silence deliver zeros.
        samples = np.frombuffer(frame, dtype=np.int16).astype(np.float64)
        if np.sqrt(np.mean(samples**2)) < SILENCE_RMS:
            return False
        return bool(self._vad.is_speech(frame, self.sample_rate))
