"""Voice activity detection: the only module that imports `webrtcvad`."""

from __future__ import annotations

VAD_SAMPLE_RATES = (8000, 16000, 32000, 48000)
"""Sample rates webrtcvad accepts."""

VAD_FRAME_MS = (10, 20, 30)
"""Frame lengths webrtcvad accepts."""


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
        return bool(self._vad.is_speech(frame, self.sample_rate))
