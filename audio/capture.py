"""The microphone: 16 kHz mono int16 blocks from a sounddevice input stream.

PortAudio calls `_callback` on its own real-time thread; it only copies the bytes into a
bounded queue and returns (as Pipecat's local transport does), so nothing there can block
or fail. Conversion (channel pick, resampling with soxr) happens in `read()`, on the
caller's thread.
"""

from __future__ import annotations

import queue
import time
from types import TracebackType
from typing import Any

import numpy as np
import soxr

from audio.devices import AudioDeviceError, close_stream, load_sounddevice


class DeviceLost(AudioDeviceError):
    """The microphone stopped delivering audio (unplugged, sound server gone).

    Keep the conversation and call `Microphone.reopen()` every second or so.
    """


class Microphone:
    """Capture from one input device; `read()` returns blocks of `block_ms` at `sample_rate`.

    One thread reads (and reopens); PortAudio's thread only fills the queue.
    """

    def __init__(
        self,
        device: int | None = None,
        sample_rate: int = 16000,
        block_ms: int = 30,
        *,
        device_rate: int | None = None,
        queue_ms: int = 3000,
        stall_timeout: float = 1.5,
    ) -> None:
        self.device = device
        """PortAudio index (see `audio.devices.find_device`), None for the system default."""
        self.sample_rate = sample_rate
        self.block = sample_rate * block_ms // 1000
        """Samples per block returned by `read()`."""
        self.block_ms = block_ms
        self.device_rate = device_rate
        """Rate to open the device at; None: `sample_rate` if supported, else its default."""
        self.stall_timeout = stall_timeout
        """Seconds without any audio after which a running stream counts as lost: a hung
        device, or a sound-server client that deadlocked, leaves it "active" but silent."""
        self.overflows = 0
        """Blocks dropped because the reader fell behind (the oldest go first)."""
        self._queue: queue.Queue[tuple[bytes, float]] = queue.Queue(
            maxsize=max(2, queue_ms // block_ms))
        self._stream: Any = None
        self._channels = 1
        self._resampler: soxr.ResampleStream | None = None
        self._pending = np.zeros(0, dtype=np.int16)
        self._pending_end = 0.0
        """When the last sample of `_pending` was captured (monotonic)."""
        self.last_block_end = 0.0
        """When the last sample of the block `read()` last returned was captured."""
        self._last_audio = 0.0

    def start(self) -> None:
        """Open and start the stream; AudioDeviceError saying why it cannot."""
        if self._stream is not None:
            return
        sd = load_sounddevice()
        rate, self._channels = self._settings(sd)
        stream = None
        try:
            stream = sd.RawInputStream(
                device=self.device, samplerate=rate, channels=self._channels, dtype="int16",
                blocksize=rate * self.block_ms // 1000, callback=self._callback,
            )
            stream.start()
        except sd.PortAudioError as exc:
            if stream is not None:  # opened but would not start: do not leak it
                close_stream(stream)
            raise AudioDeviceError(
                f"Cannot open the microphone ({exc}). Pick another with --input-device "
                "(`parley devices` lists them) or check the sound server."
            ) from exc
        self._resampler = (
            None if rate == self.sample_rate
            else soxr.ResampleStream(rate, self.sample_rate, 1, dtype="int16")
        )
        self._pending = np.zeros(0, dtype=np.int16)
        self._last_audio = time.monotonic()
        self._stream = stream

    def _settings(self, sd: Any) -> tuple[int, int]:
        """A (rate, channels) the device accepts: ours if it can, else its own rate/stereo."""
        try:
            info = sd.query_devices(self.device, "input")
        except (sd.PortAudioError, ValueError) as exc:  # no default input, or a bad index
            raise AudioDeviceError(
                f"No usable microphone ({exc}). Connect one, or pick one with --input-device "
                "(`parley devices` lists them)."
            ) from exc
        rates = [self.device_rate] if self.device_rate else [
            self.sample_rate, int(info["default_samplerate"])]
        error: Exception | None = None
        for channels in (1, 2):
            for rate in rates:
                try:
                    sd.check_input_settings(self.device, channels=channels, dtype="int16",
                                            samplerate=rate)
                    return rate, channels
                except (sd.PortAudioError, ValueError) as exc:
                    error = exc
        raise AudioDeviceError(
            f"Cannot open the microphone {info['name']!r} in 16-bit mono or stereo at "
            f"{' or '.join(map(str, rates))} Hz ({error}). Check that it is plugged in and the "
            "sound server runs, or pick another with --input-device (`parley devices`)."
        )

    def _callback(self, indata: Any, frames: int, time_info: Any, status: Any) -> None:
        # PortAudio's real-time thread: copy, keep the newest audio if the reader lags, return.
        if self._queue.full():
            self._drop_oldest()
        self._queue.put_nowait((bytes(indata), time.monotonic()))

    def _drop_oldest(self) -> None:
        try:
            self._queue.get_nowait()
            self.overflows += 1
        except queue.Empty:  # the reader just caught up
            pass

    def read(self, timeout: float) -> np.ndarray | None:
        """The next block (int16 mono, `self.block` samples), None if none came in `timeout`
        seconds; DeviceLost when the stream died."""
        deadline = time.monotonic() + timeout
        while len(self._pending) < self.block:
            if self._stream is None:
                raise DeviceLost("The microphone is not open; call reopen() to try again.")
            try:
                data, captured = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self._check_alive()
                return None
            self._last_audio = time.monotonic()
            self._pending = np.concatenate([self._pending, self._convert(data)])
            self._pending_end = captured
        later = len(self._pending) - self.block  # captured after this block's end
        self.last_block_end = self._pending_end - later / self.sample_rate
        block, self._pending = self._pending[: self.block], self._pending[self.block :]
        return block

    def _convert(self, data: bytes) -> np.ndarray:
        pcm = np.frombuffer(data, dtype=np.int16)[:: self._channels]  # first channel
        return pcm if self._resampler is None else self._resampler.resample_chunk(pcm)

    def _check_alive(self) -> None:
        sd = load_sounddevice()
        try:
            active = self._stream.active
        except sd.PortAudioError:
            active = False
        if not active:
            raise DeviceLost("The microphone stopped (unplugged, or the sound server went "
                             "away). Listening resumes when it is back.")
        if time.monotonic() - self._last_audio > self.stall_timeout:
            raise DeviceLost(f"The microphone sent no audio for {self.stall_timeout:g} s "
                             "(unplugged?). Listening resumes when it is back.")

    def reopen(self) -> None:
        """Close the dead stream and open the device again; DeviceLost while it is still gone."""
        self.stop()
        try:
            self.start()
        except AudioDeviceError as exc:
            raise DeviceLost(str(exc)) from exc

    def stop(self) -> None:
        """Stop capturing and close the stream (errors from a dead stream are ignored)."""
        stream, self._stream = self._stream, None
        if stream is not None:
            close_stream(stream)
        # The stream is closed (or its hung close abandoned): drop its stale audio.
        self._queue = queue.Queue(maxsize=self._queue.maxsize)

    close = stop

    def __enter__(self) -> Microphone:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
