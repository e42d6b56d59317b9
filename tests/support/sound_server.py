"""A real PulseAudio daemon with virtual devices, so tests exercise PortAudio without a card.

The daemon runs in a private temporary directory (runtime dir, home, config and state), so
nothing is written to the real home. It has a null sink `spk` (what is played there can be
recorded from `spk.monitor`) and a pipe source `mic` that reads 16 kHz s16le mono PCM from a
FIFO. `feed()` writes into that FIFO at real-time pace from a background thread, and writes
silence when there is nothing to feed, so the source sees a steady microphone.

A client (pactl, parec, or a process using PortAudio's ALSA `pulse`/`default` devices) finds
the daemon through `SoundServer.env`. PortAudio lists devices when it initialises, so a
test process sets that environment and then calls `audio.devices.rescan_devices()`.
`kill()`/`restart()` crash and bring back the daemon on the same socket.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.support import speech_samples as samples

MIC_RATE = 16000
"""Sample rate of the pipe source `mic` (s16le mono)."""

_BLOCK = MIC_RATE // 50
"""The FIFO writer's block: 20 ms of samples."""


def _terminate(proc: subprocess.Popen) -> None:
    """Stop a helper process politely, then for sure."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class SoundServerError(RuntimeError):
    """The sound server could not be started or driven."""


def pulseaudio_missing() -> str | None:
    """Why a sound server cannot run here (to skip on), or None when the tools are present."""
    missing = [tool for tool in ("pulseaudio", "pactl", "parec") if shutil.which(tool) is None]
    if missing:
        return (
            f"{', '.join(missing)} not installed "
            "(apt install pulseaudio libportaudio2 libasound2-plugins)"
        )
    return None


class FifoFeeder:
    """Writes queued PCM into the pipe source's FIFO at real-time pace, silence when idle.

    Keeping the writer open matters: a pipe source that sees EOF stops producing audio.
    The FIFO disappears while the `mic` module is unloaded; the writer then waits and
    reopens it when the module is loaded again.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._pending: deque[np.ndarray] = deque()
        self._unwritten = 0
        """Samples fed but not yet written into the FIFO."""
        self._lock = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fifo-feeder", daemon=True)
        self._thread.start()

    def suspend_mic(self, suspended: bool = True) -> None:
        """Suspend (or resume) `mic`: its streams stay connected but get no audio."""
        self.pactl("suspend-source", "mic", "1" if suspended else "0")

    def feed(self, samples: np.ndarray) -> None:
        """Queue int16 mono samples at 16 kHz to be "spoken" into the microphone."""
        samples = np.asarray(samples)
        if samples.dtype != np.int16 or samples.ndim != 1:
            raise ValueError("feed() takes a one-dimensional int16 array")
        with self._lock:
            self._pending.append(samples)
            self._unwritten += len(samples)

    def wait(self, timeout: float = 30.0) -> None:
        """Block until everything fed so far has been written into the FIFO."""
        with self._lock:
            if not self._lock.wait_for(lambda: self._unwritten == 0, timeout):
                raise SoundServerError("the FIFO writer did not drain in time")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _next_block(self) -> tuple[np.ndarray, int]:
        """The next 20 ms to write (fed audio, padded with silence) and how much was fed."""
        block = np.zeros(_BLOCK, dtype=np.int16)
        filled = 0
        with self._lock:
            while filled < _BLOCK and self._pending:
                head = self._pending[0]
                take = min(_BLOCK - filled, len(head))
                block[filled : filled + take] = head[:take]
                filled += take
                if take == len(head):
                    self._pending.popleft()
                else:
                    self._pending[0] = head[take:]
        return block, filled

    def _written(self, count: int) -> None:
        with self._lock:
            self._unwritten -= count
            self._lock.notify_all()

    def _open(self) -> int | None:
        # O_NONBLOCK so opening fails (ENXIO/ENOENT) instead of hanging when no source reads.
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            return None
        os.set_blocking(fd, True)
        return fd

    def _run(self) -> None:
        fd: int | None = None
        start = time.monotonic()
        written = 0
        while not self._stop.is_set():
            if fd is None:
                fd = self._open()
                if fd is None:
                    time.sleep(0.05)
                    continue
                start, written = time.monotonic(), 0
            # Pace by samples written, not by sleeps, so the stream keeps the real rate.
            delay = start + written / MIC_RATE - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            block, fed = self._next_block()
            try:
                os.write(fd, block.tobytes())
            except OSError:  # the source went away (module unloaded): reopen later
                os.close(fd)
                fd = None
                # What was in this block is lost, as speech into an unplugged microphone is.
            self._written(fed)
            written += len(block)
        if fd is not None:
            os.close(fd)


class MonitorTap:
    """A `parec` subprocess recording `spk.monitor` (int16 mono) until closed.

    One tap serves every recording: while nobody listens the null sink renders 2 s blocks,
    so a new recorder waited 2 s for its first bytes (measured); starting once pays it once.
    """

    def __init__(self, env: dict[str, str], rate: int = MIC_RATE) -> None:
        self.rate = rate
        self._data = bytearray()
        self._lock = threading.Lock()
        self._proc = subprocess.Popen(
            ["parec", "--device=spk.monitor", "--format=s16le", f"--rate={rate}",
             "--channels=1", "--raw", "--latency-msec=20"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self._reader = threading.Thread(target=self._read, name="monitor-tap", daemon=True)
        self._reader.start()
        # The monitor is connected once audio (silence included) flows.
        deadline = time.monotonic() + 5
        while self.position == 0:
            if time.monotonic() > deadline or self._proc.poll() is not None:
                self.close()
                raise SoundServerError("parec did not start recording spk.monitor")
            time.sleep(0.01)

    def _read(self) -> None:
        assert self._proc.stdout is not None
        while chunk := self._proc.stdout.read1(4096):
            with self._lock:
                self._data += chunk

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    @property
    def position(self) -> int:
        """Samples recorded so far."""
        with self._lock:
            return len(self._data) // 2

    def samples(self, start: int, end: int | None = None) -> np.ndarray:
        with self._lock:
            data = bytes(self._data[2 * start : None if end is None else 2 * end])
        return np.frombuffer(data[: len(data) // 2 * 2], dtype=np.int16)

    def close(self) -> None:
        _terminate(self._proc)
        self._reader.join(timeout=5)


class MonitorRecording:
    """What was played on `spk` from this recording's start until `stop()`."""

    def __init__(self, tap: MonitorTap) -> None:
        self.rate = tap.rate
        self._tap = tap
        self._start = tap.position
        self._end: int | None = None

    def stop(self) -> np.ndarray:
        """Stop recording; the int16 mono samples recorded."""
        if self._end is None:
            self._end = self._tap.position
        return self.samples

    @property
    def samples(self) -> np.ndarray:
        """The samples recorded so far (until `stop()`)."""
        return self._tap.samples(self._start, self._end)


class SoundServer:
    """A private PulseAudio daemon: null sink `spk`, FIFO-fed pipe source `mic`."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="parley-pulse-"))
        self.runtime_dir = self.root / "runtime"
        self.fifo = self.root / "mic.fifo"
        self.log = self.root / "pulseaudio.log"
        self.socket = self.runtime_dir / "pulse" / "native"
        self.mic_module: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._feeder: FifoFeeder | None = None
        self._tap: MonitorTap | None = None
        self.env = self._environment()

    def _environment(self) -> dict[str, str]:
        """Variables that point libpulse (the daemon, pactl, ALSA's pulse plugin) here.

        They are what a client process needs; HOME is left alone for clients.
        """
        for sub in ("home", "runtime", "config", "state"):
            (self.root / sub).mkdir(mode=0o700)
        client_conf = self.root / "client.conf"
        # No autospawn: a client that cannot reach this daemon must fail, not start another.
        # No shared memory: with it, a client whose daemon was killed mid-stream deadlocked
        # in libpulse (its mainloop in pa_memimport_free, PortAudio's thread waiting for the
        # mainloop lock), and closing the PortAudio stream then hung for ever (seen here).
        client_conf.write_text("autospawn = no\nenable-shm = no\n")
        return {
            "XDG_RUNTIME_DIR": str(self.runtime_dir),
            "PULSE_RUNTIME_PATH": str(self.runtime_dir / "pulse"),
            "PULSE_SERVER": f"unix:{self.socket}",
            "PULSE_CONFIG_PATH": str(self.root / "config"),
            "PULSE_STATE_PATH": str(self.root / "state"),
            "PULSE_COOKIE": str(self.root / "cookie"),
            "PULSE_CLIENTCONFIG": str(client_conf),
        }

    def start(self) -> None:
        """Start the daemon with `spk` and `mic`, and the FIFO writer."""
        self._start_daemon()
        self._feeder = FifoFeeder(self.fifo)

    def _start_daemon(self) -> None:
        # HOME too, for the daemon only: it writes its cookie and config under HOME.
        env = {**os.environ, **self.env, "HOME": str(self.root / "home")}
        # As root PulseAudio only warns ("not intended to be run as root") and carries on.
        # -n: no default script, so only these modules load (no ALSA card). A stream whose
        # source goes away still moves to the fallback source: PulseAudio 16 does that itself.
        args = [
            "pulseaudio", "-n", "--daemonize=no", "--exit-idle-time=-1",
            "--use-pid-file=no", "--disallow-exit", "--log-target=stderr",
            "--load=module-native-protocol-unix auth-anonymous=1",
            "--load=module-null-sink sink_name=spk",
        ]
        with open(self.log, "ab") as log:
            self._proc = subprocess.Popen(args, env=env, stdout=log, stderr=log)
        deadline = time.monotonic() + 10
        while not self._ready():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                log_text = self.log.read_text(errors="replace")
                self.stop()
                raise SoundServerError(f"pulseaudio did not start; its log:\n{log_text}")
            time.sleep(0.05)
        self.load_mic()
        self.pactl("set-default-sink", "spk")

    def kill(self) -> None:
        """Kill the daemon (SIGKILL, as in a crash), keeping its directory for `restart()`."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None
        self.mic_module = None

    def restart(self) -> None:
        """Start the daemon again after `kill()`, on the same socket, with `spk` and `mic`."""
        self._start_daemon()

    def _ready(self) -> bool:
        if not self.socket.exists():
            return False
        result = subprocess.run(
            ["pactl", "info"], env=self._pactl_env(), capture_output=True, timeout=5
        )
        return result.returncode == 0

    def _pactl_env(self) -> dict[str, str]:
        return {**os.environ, **self.env}

    def pactl(self, *args: str) -> str:
        """Run `pactl` against this server; its output."""
        result = subprocess.run(
            ["pactl", *args], env=self._pactl_env(), capture_output=True, text=True, timeout=10
        )
        if result.returncode != 0:
            raise SoundServerError(f"pactl {' '.join(args)} failed: {result.stderr.strip()}")
        return result.stdout

    def load_mic(self) -> None:
        """Load (again) the pipe source `mic` and make it the default source."""
        # A killed daemon leaves its FIFO behind; the pipe source wants to create its own.
        self.fifo.unlink(missing_ok=True)
        out = self.pactl(
            "load-module", "module-pipe-source", "source_name=mic", f"file={self.fifo}",
            "format=s16le", f"rate={MIC_RATE}", "channels=1",
        )
        self.mic_module = int(out.strip())
        self.pactl("set-default-source", "mic")
        # Streams without a chosen device follow the new default, and PulseAudio moved the
        # monitor tap too (seen): record the monitor afresh from the next record_monitor().
        if self._tap is not None:
            self._tap.close()
            self._tap = None

    def unload_mic(self) -> None:
        """Remove the pipe source, as if the microphone were unplugged."""
        if self.mic_module is not None:
            self.pactl("unload-module", str(self.mic_module))
            self.mic_module = None

    def suspend_mic(self, suspended: bool = True) -> None:
        """Suspend (or resume) `mic`: its streams stay connected but get no audio."""
        self.pactl("suspend-source", "mic", "1" if suspended else "0")

    def route_speaker_into_mic(self, gain_db: float, delay_ms: int) -> None:
        """A room: what is played on `spk` comes back into the microphone `delay_ms` later
        at `gain_db`, mixed with what is fed. The default source becomes `room_mic`: the
        null sink `room` (fed by `mic` and by `spk.monitor`) seen as a microphone."""
        self.pactl("load-module", "module-null-sink", "sink_name=room",
                   f"rate={MIC_RATE}", "channels=1")
        self.pactl("load-module", "module-loopback", "source=mic", "sink=room",
                   "latency_msec=20", "source_dont_move=true", "sink_dont_move=true")
        echo = self.pactl("load-module", "module-loopback", "source=spk.monitor", "sink=room",
                          f"latency_msec={delay_ms}", "source_dont_move=true",
                          "sink_dont_move=true").strip()
        self.pactl("set-sink-input-volume", self._sink_input_of(echo), f"{gain_db:+g}dB")
        self.pactl("load-module", "module-remap-source", "source_name=room_mic",
                   "master=room.monitor", f"rate={MIC_RATE}", "channels=1")
        self.pactl("set-default-source", "room_mic")

    def _sink_input_of(self, module: str) -> str:
        for block in self.pactl("list", "sink-inputs").split("\n\n"):
            lines = [line.strip() for line in block.splitlines()]
            if f"Owner Module: {module}" in lines:
                return lines[0].split("#")[1]
        raise SoundServerError(f"no sink input of module {module}")

    def feed(self, samples: np.ndarray) -> None:
        """Queue int16 mono 16 kHz samples into the microphone at real-time pace."""
        assert self._feeder is not None, "start() the server first"
        self._feeder.feed(samples)

    def wait_fed(self, timeout: float = 30.0) -> None:
        """Block until everything fed has been written into the FIFO."""
        assert self._feeder is not None, "start() the server first"
        self._feeder.wait(timeout)

    def record_monitor(self) -> MonitorRecording:
        """Start recording what is played on `spk` (16 kHz mono); `.stop()` for the samples."""
        if self._tap is None or not self._tap.alive:  # first use, or the daemon was killed
            if self._tap is not None:
                self._tap.close()
            self._tap = MonitorTap(self._pactl_env())
        return MonitorRecording(self._tap)

    @contextlib.contextmanager
    def recording(self) -> Iterator[MonitorRecording]:
        rec = self.record_monitor()
        try:
            yield rec
        finally:
            rec.stop()

    def stop(self) -> None:
        if self._tap is not None:
            self._tap.close()
            self._tap = None
        # The daemon first: while no stream records the microphone PulseAudio stops reading
        # the FIFO, and the feeder waits in a write until the daemon's end breaks the pipe
        # (stopped the other way round, each server took 5 s, the feeder's join timeout).
        if self._proc is not None:
            _terminate(self._proc)
        self._proc = None
        if self._feeder is not None:
            self._feeder.close()
            self._feeder = None
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def running_sound_server(*, needs_speech_samples: bool = False) -> Iterator[SoundServer]:
    """A started SoundServer, stopped at the end of the block; the test skips (a failure
    under CI) when PulseAudio, or the speech recordings it asks for, are missing."""
    reason = pulseaudio_missing()
    if reason is None and needs_speech_samples and not samples.available():
        reason = samples.missing_reason()
    if reason:
        pytest.skip(reason)
    server = SoundServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
