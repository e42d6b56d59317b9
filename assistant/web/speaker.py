"""Parley's voice in the browser: `WebSpeaker`, the voice loop's audio output for
`parley web`.

Each chunk the reply synthesizes (a sentence, or the first clause) goes to every tab at
once, as one binary WebSocket frame: the sample rate as a little-endian uint32, then the
samples, int16 little-endian mono. The page plays the chunks back to back. Here the audio is
paced as a device plays it (`MemorySpeaker` in real time), so the loop knows what has been
heard: when the reply is over, what a barge-in cut off, its `spoken` seconds. `stop()`
sends `{"type": "audio-stop"}`: the page silences what it plays and drops what is queued.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np

from audio.memory_out import MemorySpeaker
from audio.pcm import to_int16
from audio.playback import AudioOutput

AUDIO_STOP = {"type": "audio-stop"}
FRAME_S = 0.5
"""The longest frame: a long sentence goes as several (a WebSocket client may refuse a
message over 1 MB, 24 s of audio at 22 kHz)."""


def audio_frame(pcm: np.ndarray, sample_rate: int) -> bytes:
    """One chunk of the reply as the page is sent it."""
    return struct.pack("<I", sample_rate) + to_int16(pcm).astype("<i2").tobytes()


class WebSpeaker(AudioOutput):
    """Plays to the tabs, paced like a device."""

    def __init__(self, to_tabs: Callable[[dict | bytes], None] | None = None) -> None:
        self.to_tabs = to_tabs
        """Where the frames go; set by the room once it is built (before any reply)."""
        self._paced = MemorySpeaker(realtime=True, keep_chunks=False)

    def play(self, pcm: np.ndarray, sample_rate: int, cancel_echo: bool = True) -> None:
        # Told first, so the page starts playing while the loop counts it as playing.
        if self.to_tabs is not None:
            step = max(1, round(FRAME_S * sample_rate))
            for start in range(0, len(pcm), step):
                self.to_tabs(audio_frame(pcm[start:start + step], sample_rate))
        self._paced.play(pcm, sample_rate, cancel_echo)

    def stop(self) -> None:
        was_speaking = self._paced.speaking
        self._paced.stop()
        if was_speaking and self.to_tabs is not None:
            self.to_tabs(AUDIO_STOP)

    def wait(self, timeout: float | None = None) -> bool:
        return self._paced.wait(timeout)

    @property
    def speaking(self) -> bool:
        return self._paced.speaking

    @property
    def played_seconds(self) -> float:
        return self._paced.played_seconds

    def reset_counter(self) -> None:
        self._paced.reset_counter()
