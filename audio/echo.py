"""Echo cancellation: what Parley plays is subtracted from what the microphone hears.

WebRTC's AEC3 (pywebrtc-audio) takes two signals in 10 ms frames: the near end (the
microphone: the user, plus Parley's voice coming back from the speakers) and the far end
(exactly what was played). It learns the echo path (delay, loudness, the room) from the
two and returns the near end without the echo, so the user can talk over Parley.

The far end: the speaker pushes every block into a `FarEnd` as it writes it to the
device, and the microphone's reader pulls as many samples as each block it reads. Both
run at the sound card's pace, so the far end stays a fixed time ahead of its echo (the
output and input buffers); AEC3 finds that delay itself.
"""

from __future__ import annotations

import threading

import numpy as np
import soxr

from audio.errors import AudioError
from audio.pcm import require_mono_int16

SAMPLE_RATE = 16000
MAX_AHEAD_S = 2.0
"""The far end holds at most this much not yet heard; older audio goes first (a reader
that stalled must not leave the two signals apart for ever)."""


class EchoCancelUnavailable(AudioError):
    """Echo cancellation cannot start; the message says why."""


class FarEnd:
    """What Parley plays, at 16 kHz mono, waiting to be matched with the microphone."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._blocks: list[np.ndarray] = []
        self._size = 0
        self._resamplers: dict[int, soxr.ResampleStream] = {}
        self.pushed = 0
        """Samples pushed in all (at 16 kHz)."""

    def push(self, pcm: np.ndarray, sample_rate: int) -> None:
        """Audio just written to the speaker (int16 mono at `sample_rate`)."""
        pcm = require_mono_int16(pcm, "the far end")
        if sample_rate != SAMPLE_RATE:
            stream = self._resamplers.get(sample_rate)
            if stream is None:
                stream = soxr.ResampleStream(sample_rate, SAMPLE_RATE, 1, dtype="int16")
                self._resamplers[sample_rate] = stream
            pcm = stream.resample_chunk(pcm)
        if not len(pcm):
            return
        with self._lock:
            self._blocks.append(pcm)
            self._size += len(pcm)
            self.pushed += len(pcm)
            excess = self._size - int(MAX_AHEAD_S * SAMPLE_RATE)
            while excess > 0 and self._blocks:
                head = self._blocks[0]
                drop = min(excess, len(head))
                self._blocks[0] = head[drop:]
                if not len(self._blocks[0]):
                    self._blocks.pop(0)
                self._size -= drop
                excess -= drop

    def pull(self, count: int) -> np.ndarray:
        """The next `count` samples played (silence where nothing was)."""
        out = np.zeros(count, dtype=np.int16)
        filled = 0
        with self._lock:
            while filled < count and self._blocks:
                head = self._blocks[0]
                take = min(count - filled, len(head))
                out[filled:filled + take] = head[:take]
                filled += take
                if take == len(head):
                    self._blocks.pop(0)
                else:
                    self._blocks[0] = head[take:]
            self._size -= filled
        return out

    def clear(self) -> None:
        """Playback stopped: what was queued will never be heard."""
        with self._lock:
            self._blocks.clear()
            self._size = 0


class EchoCanceller:
    """AEC3 over 16 kHz mono int16; not thread-safe (one reader of the microphone)."""

    def __init__(self, delay_hint_ms: int = 0) -> None:
        try:
            from pywebrtc_audio import AudioProcessor
        except ImportError as exc:  # not installed, or its native library would not load
            raise EchoCancelUnavailable(f"the pywebrtc-audio package cannot load ({exc})") \
                from exc
        try:
            self._processor = AudioProcessor(SAMPLE_RATE, echo_cancellation=True,
                                             stream_delay_ms=delay_hint_ms)
        except (RuntimeError, ValueError) as exc:
            raise EchoCancelUnavailable(f"WebRTC's echo canceller would not start ({exc})") \
                from exc

    def process(self, near: np.ndarray, far: np.ndarray) -> np.ndarray:
        """`near` without the echo of `far` (the same length, played over the same time)."""
        near = require_mono_int16(near, "the echo canceller")
        far = require_mono_int16(far, "the echo canceller")
        if len(near) != len(far):
            raise ValueError(f"near and far must be as long: {len(near)} != {len(far)}")
        return self._processor.process(near, far)


class RoomEcho:
    """A simulated room for headless replay: the far end comes back into the microphone
    `delay_ms` later at `gain_db` (0 dB: as loud as it was played)."""

    def __init__(self, gain_db: float, delay_ms: int = 60) -> None:
        self.gain = 10 ** (gain_db / 20)
        self._line = np.zeros(delay_ms * SAMPLE_RATE // 1000, dtype=np.float64)

    def add(self, near: np.ndarray, far: np.ndarray) -> np.ndarray:
        """`near` with the echo of `far` (just played) mixed in."""
        line = np.concatenate([self._line, far.astype(np.float64) * self.gain])
        echo, self._line = line[:len(far)], line[len(far):]
        mixed = near.astype(np.float64) + echo
        return np.clip(np.rint(mixed), -32768, 32767).astype(np.int16)


class MicrophoneInput:
    """The microphone's audio as Parley should hear it: with a simulated room's echo
    added (replay's `--echo`), then the echo cancelled (`--echo-cancel`)."""

    def __init__(self, far_end: FarEnd, canceller: EchoCanceller | None = None,
                 room: RoomEcho | None = None) -> None:
        self.far_end = far_end
        self.canceller = canceller
        self.room = room

    def process(self, pcm: np.ndarray) -> np.ndarray:
        far = self.far_end.pull(len(pcm))
        if self.room is not None:
            pcm = self.room.add(pcm, far)
        return self.canceller.process(pcm, far) if self.canceller is not None else pcm
