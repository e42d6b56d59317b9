"""`parley devices`, and whether live voice can start."""

from __future__ import annotations

from assistant.session.settings import ListeningSettings
from audio.errors import AudioError


def device(spec: str | None) -> str | int | None:
    """A device setting: an index, or a part of a name."""
    return int(spec) if spec is not None and spec.isdigit() else spec


def run_devices() -> int:
    from audio.devices import format_device_table, list_devices

    print(format_device_table(list_devices()))  # an AudioError is shown by main()
    return 0


def input_device_problem(settings: ListeningSettings) -> str | None:
    """Why live voice cannot start (no PortAudio, no microphone), or None if it can."""
    from audio.devices import find_device

    try:
        find_device(device(settings.input_device), "input")
    except AudioError as exc:
        return str(exc)
    return None
