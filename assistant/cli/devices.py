"""`parley devices`, and whether live voice can start."""

from __future__ import annotations

import argparse

from assistant.cli.engines import device
from audio.errors import AudioError


def run_devices() -> int:
    from audio.devices import format_device_table, list_devices

    print(format_device_table(list_devices()))  # an AudioError is shown by main()
    return 0


def input_device_problem(args: argparse.Namespace) -> str | None:
    """Why live voice cannot start (no PortAudio, no microphone), or None if it can."""
    from audio.devices import find_device

    try:
        find_device(device(args.input_device), "input")
    except AudioError as exc:
        return str(exc)
    return None
