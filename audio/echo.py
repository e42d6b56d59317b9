"""Echo cancellation: what Parley plays is subtracted from what the microphone hears.

WebRTC's AEC3 (pywebrtc-audio) takes two signals in 10 ms frames: the near end (the
microphone: the user, plus Parley's voice coming back from the speakers) and the far end
(exactly what was played). It learns the echo path (delay, loudness, the room) from the
two and returns the near end without the echo, so the user can talk over Parley.

The far end: the speaker puts every block it writes on a `FarEnd` timeline at the time it
will play, and the microphone's reader takes, for each block, what played while it was
captured. The echo then comes a fixed time after its far end (the sound server's buffers
and the room); AEC3 finds that delay itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
import soxr

from audio.errors import AudioError
from audio.pcm import require_mono_int16

SAMPLE_RATE = 16000
RING_SECONDS = 8
"""The far end keeps this much of what was played (a reader can be this late)."""
RESYNC_S = 0.05
"""A block further than this from where the last one ended is placed by its time."""
READER_RESYNC_S = 0.2
"""The same for the microphone's blocks, whose times come in bunches on a busy machine."""
FRAME = SAMPLE_RATE // 100
"""AEC3's frame: 10 ms."""


class EchoCancelUnavailable(AudioError):
    """Echo cancellation cannot start; the message says why."""


class FarEnd:
    """What Parley plays, at 16 kHz mono, on a timeline shared with the microphone.

    Position p is the sample playing `p / 16000` s after `epoch` on the monotonic clock.
    The speaker writes each block where it will play; the microphone's reader asks for the
    samples that were playing while each block it reads was captured. Matching by time,
    not by count, keeps the two together when a busy machine makes either thread late: a
    late reader asks for the right past, and a speaker that came so late that the device
    ran dry leaves silence where the device played silence.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.epoch = clock()
        self._lock = threading.Lock()
        self._ring = np.zeros(RING_SECONDS * SAMPLE_RATE, dtype=np.int16)
        self._end = 0
        """Position just after the last sample written."""
        self._resamplers: dict[int, soxr.ResampleStream] = {}
        self.pushed = 0
        """Samples pushed in all (at 16 kHz)."""

    def position_at(self, when: float) -> int:
        return round((when - self.epoch) * SAMPLE_RATE)

    def push(self, pcm: np.ndarray, sample_rate: int, at: float | None = None) -> None:
        """A block written to the speaker that starts playing `at` (monotonic; None: now).

        Blocks follow each other sample for sample at the device's pace; only when one
        starts more than `RESYNC_S` away from where the last ended (the device ran dry, or
        the stream started) is it placed by its time."""
        pcm = require_mono_int16(pcm, "the far end")
        if sample_rate != SAMPLE_RATE:
            stream = self._resamplers.get(sample_rate)
            if stream is None:
                stream = soxr.ResampleStream(sample_rate, SAMPLE_RATE, 1, dtype="int16")
                self._resamplers[sample_rate] = stream
            pcm = stream.resample_chunk(pcm)
        start = self.position_at(self.clock() if at is None else at)
        with self._lock:
            if abs(start - self._end) <= RESYNC_S * SAMPLE_RATE:
                start = self._end
            elif start > self._end:
                self._zero(self._end, start)  # nothing played meanwhile
            self._write(start, pcm)
            self._end = start + len(pcm)
            self.pushed += len(pcm)

    def pull(self, count: int, end: int) -> np.ndarray:
        """The `count` samples that played up to position `end` (silence where nothing did,
        and where it is not known yet)."""
        out = np.zeros(count, dtype=np.int16)
        start = end - count
        with self._lock:
            first = max(start, self._end - len(self._ring))
            last = min(end, self._end)
            if first < last:
                out[first - start:last - start] = self._read(first, last)
        return out

    def clear(self) -> None:
        """Playback stopped now: what was written to play later never will."""
        with self._lock:
            now = self.position_at(self.clock())
            if now < self._end:
                self._zero(max(now, self._end - len(self._ring)), self._end)
                self._end = max(now, self._end - len(self._ring))

    def _indices(self, start: int, stop: int) -> np.ndarray:
        return np.arange(start, stop) % len(self._ring)

    def _write(self, start: int, pcm: np.ndarray) -> None:
        skip = max(0, len(pcm) - len(self._ring))  # only the ring's length is kept
        self._ring[self._indices(start + skip, start + len(pcm))] = pcm[skip:]

    def _read(self, start: int, stop: int) -> np.ndarray:
        return self._ring[self._indices(start, stop)]

    def _zero(self, start: int, stop: int) -> None:
        start = max(start, stop - len(self._ring))
        self._ring[self._indices(start, stop)] = 0


class EchoCanceller:
    """AEC3 over 16 kHz mono int16; not thread-safe (one reader of the microphone)."""

    def __init__(self) -> None:
        try:
            from pywebrtc_audio import AudioProcessor
        except ImportError as exc:  # not installed, or its native library would not load
            raise EchoCancelUnavailable(f"the pywebrtc-audio package cannot load ({exc})") \
                from exc
        try:
            # No delay hint: AEC3 finds the echo's delay itself (84-101 ms measured here).
            self._processor = AudioProcessor(SAMPLE_RATE, echo_cancellation=True)
        except (RuntimeError, ValueError) as exc:
            raise EchoCancelUnavailable(f"WebRTC's echo canceller would not start ({exc})") \
                from exc
        empty = np.zeros(0, dtype=np.int16)
        self._near, self._far = empty, empty
        """What came after the last whole frame, waiting for the next block."""
        self._out = np.zeros(FRAME, dtype=np.int16)
        """Cleaned audio not yet returned: a frame of silence ahead of it, so each block
        returns as many samples as it brought, a fixed frame late."""

    def process(self, near: np.ndarray, far: np.ndarray) -> np.ndarray:
        """`near` without the echo of `far` (the same length, played over the same time),
        `FRAME` samples late."""
        near = require_mono_int16(near, "the echo canceller")
        far = require_mono_int16(far, "the echo canceller")
        if len(near) != len(far):
            raise ValueError(f"near and far must be as long: {len(near)} != {len(far)}")
        # AEC3 works in 10 ms frames; given a block that is not a whole number of them
        # (a microphone read, the end of a clip), it went wrong from there on: 100 ms of
        # Parley's voice came through at -42 dBFS and a reply stopped itself (in about 1
        # replay in 7). So whole frames only; the rest waits for the next block.
        self._near = np.concatenate([self._near, near])
        self._far = np.concatenate([self._far, far])
        whole = len(self._near) - len(self._near) % FRAME
        if whole:
            self._out = np.concatenate([self._out, self._processor.process(
                self._near[:whole], self._far[:whole])])
            self._near, self._far = self._near[whole:], self._far[whole:]
        cleaned, self._out = self._out[:len(near)], self._out[len(near):]
        return cleaned


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
        self._end: int | None = None
        """Timeline position of the end of the last block: blocks follow each other."""

    def process(self, pcm: np.ndarray, captured_at: float | None = None) -> np.ndarray:
        """`pcm`, the microphone block whose last sample was captured `captured_at`
        (monotonic; None: now), as Parley should hear it."""
        when = self.far_end.clock() if captured_at is None else captured_at
        end = self.far_end.position_at(when)
        if self._end is None or abs(end - (self._end + len(pcm))) > \
                READER_RESYNC_S * SAMPLE_RATE:
            self._end = end  # the first block, or the reader's clock jumped: place it anew
        else:
            self._end += len(pcm)
        far = self.far_end.pull(len(pcm), self._end)
        if self.room is not None:
            pcm = self.room.add(pcm, far)
        return self.canceller.process(pcm, far) if self.canceller is not None else pcm
