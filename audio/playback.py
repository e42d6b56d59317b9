"""Audio out: a sounddevice speaker with one worker thread (`audio.memory_out` has the
in-memory one).

Both take one chunk (a sentence) at a time and return at once, can be stopped mid-sentence
(barge-in), and count how many seconds were actually played, so a reply that was cut off
can be recorded as only partly heard.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from types import TracebackType
from typing import Any

import numpy as np
import soxr

from audio.devices import AudioDeviceError, close_stream, load_sounddevice
from audio.echo import FarEnd
from audio.pcm import to_int16

log = logging.getLogger(__name__)


class AudioOutput(ABC):
    """Where spoken replies go: queue chunks, stop mid-sentence, know what was played."""

    realtime: bool = True
    """Plays at the pace of time (False: replay's `--fast`, where a chunk counts as played
    the moment it is queued, and nobody can talk while it plays)."""

    @abstractmethod
    def play(self, pcm: np.ndarray, sample_rate: int, cancel_echo: bool = True) -> None:
        """Queue one chunk (int16 mono) and return at once. `cancel_echo=False`: the echo
        canceller is not told of it (the wake chime: see `assistant.voice.listening`)."""

    @abstractmethod
    def stop(self) -> None:
        """Drop what is queued and silence what is playing; `played_seconds` is then final."""

    @abstractmethod
    def wait(self, timeout: float | None = None) -> bool:
        """Block until everything queued was played; False if `timeout` passed first."""

    @property
    @abstractmethod
    def speaking(self) -> bool:
        """True while audio is queued or playing."""

    @property
    @abstractmethod
    def played_seconds(self) -> float:
        """Seconds of audio actually played since the last `reset_counter()`."""

    @abstractmethod
    def reset_counter(self) -> None:
        """Start counting `played_seconds` from zero (at the start of a reply)."""

    def close(self) -> None:
        self.stop()

    def __enter__(self) -> AudioOutput:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Speaker(AudioOutput):
    """Plays through a sounddevice output stream, written by one worker in small blocks, so
    `stop()` takes effect within a block (`block_ms`) plus the device buffer (`latency`).

    Errors on the worker (device gone) drop the queued audio and are raised, once, by the
    next `play()` or `wait()`; the play after that opens the device again.
    """

    def __init__(
        self,
        device: int | None = None,
        *,
        block_ms: int = 30,
        latency: float = 0.1,
        device_rate: int | None = None,
        far_end: FarEnd | None = None,
    ) -> None:
        self.device = device
        self.far_end = far_end
        """Gets every block with the time it will play, for the echo canceller."""
        self.block_ms = block_ms
        self.latency = latency
        """Device buffer in seconds: more survives CPU contention, less stops sooner."""
        self.device_rate = device_rate
        """Open the device at this rate; None: each reply's rate if it can, else its own."""
        self._chunks: deque[tuple[np.ndarray, int]] = deque()
        self._cond = threading.Condition()
        self._busy = False
        """The worker holds a chunk: writing it, or draining the device after it."""
        self._generation = 0
        """Bumped by stop(): the worker abandons audio of an older generation."""
        self._played = 0.0
        self._error: AudioDeviceError | None = None
        self._closing = False
        self._stream: Any = None
        self._stream_rate = 0
        self._channels = 1
        self._buffer_frames = 0
        self._worker = threading.Thread(target=self._run, name="speaker", daemon=True)
        self._worker.start()

    def play(self, pcm: np.ndarray, sample_rate: int, cancel_echo: bool = True) -> None:
        self._raise_error()
        pcm = to_int16(pcm)
        with self._cond:
            if self._closing:
                raise AudioDeviceError("The speaker was closed.")
            self._chunks.append((pcm, sample_rate, cancel_echo))
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._chunks.clear()
            self._generation += 1
            # The worker aborts at its next block; waiting for it makes played_seconds final.
            self._cond.wait_for(lambda: not self._busy, timeout=1.0)

    def wait(self, timeout: float | None = None) -> bool:
        with self._cond:
            done = self._cond.wait_for(lambda: not self._busy and not self._chunks, timeout)
        self._raise_error()
        return done

    @property
    def speaking(self) -> bool:
        with self._cond:
            return self._busy or bool(self._chunks)

    @property
    def played_seconds(self) -> float:
        with self._cond:
            return self._played

    def reset_counter(self) -> None:
        with self._cond:
            self._played = 0.0

    def close(self) -> None:
        self.stop()
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._worker.join(timeout=2)

    def _raise_error(self) -> None:
        with self._cond:
            error, self._error = self._error, None
        if error is not None:
            raise error

    @property
    def _keeps_running(self) -> bool:
        """With an echo canceller the stream never stops: silence flows between replies.
        Each start fills the device buffer anew and moves the echo by tens of ms (measured:
        137, 118, then 63 ms in three replies), which AEC3 took seconds to follow."""
        return self.far_end is not None

    def _run(self) -> None:
        while True:
            with self._cond:
                flowing = self._keeps_running and self._stream is not None
                self._cond.wait_for(lambda: self._chunks or self._closing,
                                    0 if flowing else None)
                if not self._chunks and self._closing:
                    break
                if not self._chunks:
                    self._idle_block()
                    continue
                pcm, rate, cancel_echo = self._chunks.popleft()
                self._busy, generation = True, self._generation
            try:
                self._play_chunk(pcm, rate, generation, cancel_echo)
            except Exception as exc:
                # Broad on purpose: PortAudio, soxr and the sound server's library fail in
                # their own ways, and an exception escaping here would end the worker, so
                # every later play() would queue audio nobody plays. The next play() or
                # wait() raises it as AudioDeviceError; the play after that retries.
                log.debug("playback failed", exc_info=True)
                self._fail(exc)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
        self._close_stream()

    def _idle_block(self) -> None:
        """One block of silence between replies (called holding the lock, which the write
        releases: it waits for room in the device buffer, about a block's time)."""
        stream = self._stream
        self._cond.release()
        try:
            self._write(stream, np.zeros(self._stream_rate * self.block_ms // 1000,
                                         dtype=np.int16))
        except Exception:  # broad as in _run; the next play() opens the device again
            log.debug("playback failed between replies", exc_info=True)
            self._close_stream()
        finally:
            self._cond.acquire()

    def _write(self, stream: Any, block: np.ndarray, cancel_echo: bool = True) -> None:
        stream.write(np.repeat(block, self._channels) if self._channels > 1 else block)
        if self.far_end is None:
            return
        # It plays once what the device holds before it has played: the buffer's fill now
        # (late or not, this thread finds it drained by as much as it was late).
        held = max(0, self._buffer_frames - stream.write_available) - len(block)
        starts = time.monotonic() + max(0, held) / self._stream_rate
        # Silence in place of a sound the canceller must not learn keeps it in time too.
        self.far_end.push(block if cancel_echo else np.zeros_like(block), self._stream_rate,
                          at=starts)

    def _play_chunk(self, pcm: np.ndarray, rate: int, generation: int,
                    cancel_echo: bool = True) -> None:
        stream = self._open(rate)
        if rate != self._stream_rate:
            pcm = soxr.resample(pcm, rate, self._stream_rate)
        if not stream.active:  # stopped after the previous reply drained, or aborted
            stream.start()
            # Empty now: the device buffer holds this much (latency plus a period, measured).
            self._buffer_frames = stream.write_available
        step = self._stream_rate * self.block_ms // 1000
        for start in range(0, len(pcm), step):
            if self._generation != generation:
                break
            block = pcm[start : start + step]
            self._write(stream, block, cancel_echo)
            with self._cond:
                self._played += len(block) / self._stream_rate
        with self._cond:
            stopped, more = self._generation != generation, bool(self._chunks)
        if stopped and not self._keeps_running:
            unheard = max(0, self._buffer_frames - stream.write_available)
            stream.abort()  # drops what the device still buffers: it was never heard
            with self._cond:
                self._played = max(0.0, self._played - unheard / self._stream_rate)
        elif not more and not stopped:
            # Stopping drops what the device still buffers (PortAudio's ALSA/PulseAudio path
            # does not drain), so push the end out with a buffer of silence first: wait()
            # then returns once the last real block was heard.
            self._write(stream, np.zeros(self._buffer_frames, dtype=np.int16))
            if not self._keeps_running:
                stream.stop()

    def _open(self, rate: int) -> Any:
        """The output stream, opened on first use (and again after an error)."""
        if self._stream is not None:
            return self._stream
        sd = load_sounddevice()
        error: Exception | None = None
        try:
            info = sd.query_devices(self.device, "output")
        except (sd.PortAudioError, ValueError) as exc:  # no default output, or a bad index
            raise AudioDeviceError(f"No usable speaker ({exc}). Pick one with --output-device "
                                   "(`parley devices` lists them).") from exc
        rates = [self.device_rate] if self.device_rate else [
            rate, int(info["default_samplerate"])]
        for channels in (1, 2):
            for candidate in rates:
                try:
                    sd.check_output_settings(self.device, channels=channels, dtype="int16",
                                             samplerate=candidate)
                    self._stream = sd.RawOutputStream(
                        device=self.device, samplerate=candidate, channels=channels,
                        dtype="int16", latency=self.latency,
                    )
                except (sd.PortAudioError, ValueError) as exc:
                    error = exc
                    continue
                self._stream_rate, self._channels = candidate, channels
                return self._stream
        raise AudioDeviceError(
            f"Cannot open the speaker {info['name']!r} in 16-bit mono or stereo at "
            f"{' or '.join(map(str, rates))} Hz ({error}). Check that it is plugged in and the "
            "sound server runs, or pick another with --output-device (`parley devices`)."
        )

    def _fail(self, exc: Exception) -> None:
        self._close_stream()
        error = exc if isinstance(exc, AudioDeviceError) else AudioDeviceError(
            f"Playback failed ({exc}); the reply is still shown as text. Check the output "
            "device (`parley devices`)."
        )
        with self._cond:
            self._chunks.clear()
            self._error = error

    def _close_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            close_stream(stream)
