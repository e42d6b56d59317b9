"""Sound devices through sounddevice/PortAudio: loading it, listing and choosing devices.

sounddevice is imported lazily, here only: it loads the PortAudio C library at import and
raises OSError when that is missing, which must break live audio alone, with a message
that says what to install, never `parley --help`, text chat or replay.
"""

from __future__ import annotations

import logging
import sys
import threading
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

from audio.errors import AudioError

log = logging.getLogger(__name__)

Kind = Literal["input", "output"]

_INSTALL_PORTAUDIO = "install it: sudo apt install libportaudio2 (macOS: brew install portaudio)"


class AudioDeviceError(AudioError):
    """A sound device (or PortAudio itself) cannot be used; the message says what to do."""

    stage = "audio"


@dataclass(frozen=True)
class DeviceInfo:
    """One device as PortAudio sees it."""

    index: int
    """What `--input-device`/`--output-device` and sounddevice take."""
    name: str
    input_channels: int
    output_channels: int
    default_rate: float
    """The rate the device prefers, Hz."""
    is_default_input: bool = False
    is_default_output: bool = False
    hostapi: str = ""
    """"ALSA", "JACK", "Core Audio", "WASAPI"…"""

    def channels(self, kind: Kind) -> int:
        return self.input_channels if kind == "input" else self.output_channels


def load_sounddevice() -> ModuleType:
    """The sounddevice module, or AudioDeviceError saying what to install."""
    try:
        import sounddevice
    except OSError as exc:  # sounddevice found no PortAudio library to load
        raise AudioDeviceError(f"The PortAudio library is missing ({exc}); "
                               f"{_INSTALL_PORTAUDIO}") from exc
    except ImportError as exc:
        raise AudioDeviceError(
            "The sounddevice package is missing: pip install sounddevice"
        ) from exc
    return sounddevice


def rescan_devices() -> None:
    """Re-initialise PortAudio so it sees devices plugged in (or a sound server started)
    since it was loaded; PortAudio only scans at initialisation.

    This closes every open stream in the process: call it only when no Microphone or
    Speaker stream is open.
    """
    if "sounddevice" not in sys.modules:
        load_sounddevice()  # a first import scans anyway
        return
    sd = load_sounddevice()
    # Private but stable (sounddevice 0.3–0.5); the documented way to refresh the list.
    sd._terminate()
    sd._initialize()


def close_stream(stream: Any, timeout: float = 1.0) -> bool:
    """Close a sounddevice stream without risking a hang; False if it did not finish in time.

    When the sound server dies mid-stream, libpulse can deadlock (seen with PulseAudio's
    shared memory: its mainloop waits in pa_memimport_free while PortAudio's thread waits
    for the mainloop lock), and Pa_CloseStream then waits for ever. So the close runs on a
    daemon thread that is abandoned after `timeout`: a leaked thread, not a frozen assistant.
    """

    def close() -> None:
        try:
            stream.close(ignore_errors=True)
        except Exception:
            # Broad on purpose: a vanished device may fail even to close, in PortAudio or
            # the sound server's library under it, and this abandoned thread has no caller
            # to tell; the device is gone anyway.
            log.debug("closing an audio stream failed", exc_info=True)

    closer = threading.Thread(target=close, name="close-audio-stream", daemon=True)
    closer.start()
    closer.join(timeout)
    return not closer.is_alive()


def list_devices() -> list[DeviceInfo]:
    """Every device PortAudio sees, in its order."""
    sd = load_sounddevice()
    try:
        raw = sd.query_devices()
        hostapis = sd.query_hostapis()
        default_in, default_out = sd.default.device
    except sd.PortAudioError as exc:
        raise AudioDeviceError(f"PortAudio cannot list the sound devices: {exc}") from exc
    return [
        DeviceInfo(
            index=dev["index"],
            name=dev["name"],
            input_channels=dev["max_input_channels"],
            output_channels=dev["max_output_channels"],
            default_rate=dev["default_samplerate"],
            is_default_input=dev["index"] == default_in,
            is_default_output=dev["index"] == default_out,
            hostapi=hostapis[dev["hostapi"]]["name"],
        )
        for dev in raw
    ]


def find_device(
    spec: str | int | None, kind: Kind, devices: list[DeviceInfo] | None = None
) -> int | None:
    """The index of the `kind` device `spec` names: an index, or a case-insensitive part of
    its name (an exact name wins, else the first match). None means the system default and
    returns None, but still raises when there is no `kind` device at all.

    `devices` defaults to `list_devices()`.
    """
    devices = list_devices() if devices is None else devices
    usable = [dev for dev in devices if dev.channels(kind) > 0]
    if not usable:
        what = "microphone (input device)" if kind == "input" else "speaker (output device)"
        raise AudioDeviceError(
            f"No {what} found. Connect one, or check that the sound server (PulseAudio, "
            f"PipeWire) is running and that this user may use it."
            + (f" Devices seen:\n{format_device_table(devices)}" if devices else "")
        )
    if spec is None:
        if any(dev.is_default_input if kind == "input" else dev.is_default_output
               for dev in usable):
            return None
        return usable[0].index  # no system default (rare): the first one that works
    if isinstance(spec, int) or spec.strip().isdigit():
        matches = [dev for dev in usable if dev.index == int(spec)]
    else:
        wanted = spec.strip().lower()
        exact = [dev for dev in usable if dev.name.lower() == wanted]
        matches = exact or [dev for dev in usable if wanted in dev.name.lower()]
    if not matches:
        raise AudioDeviceError(
            f"No {kind} device {spec!r}. Give an index or a part of a name from this list "
            f"(`parley devices`):\n{format_device_table(usable)}"
        )
    return matches[0].index


def format_device_table(devices: list[DeviceInfo]) -> str:
    """The table `parley devices` prints; `>` marks the default input, `<` the default output."""
    if not devices:
        return "No sound devices found."
    width = max(4, *(len(dev.name) for dev in devices))
    lines = [f"     #  {'name':<{width}}  {'in':>3}  {'out':>3}  {'rate':>6}  api"]
    for dev in devices:
        mark = (">" if dev.is_default_input else " ") + ("<" if dev.is_default_output else " ")
        lines.append(
            f"  {mark}{dev.index:>2}  {dev.name:<{width}}  {dev.input_channels:>3}  "
            f"{dev.output_channels:>3}  {dev.default_rate:>6.0f}  {dev.hostapi}"
        )
    lines.append("  > default input   < default output")
    return "\n".join(lines)
