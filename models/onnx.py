"""onnxruntime, imported the one way Parley may use it: without its telemetry."""

from __future__ import annotations

import os
from types import ModuleType


def onnxruntime_quietly() -> ModuleType:
    """onnxruntime, with its telemetry off. onnxruntime 1.29+ keeps a telemetry database
    under ~/.cache/Microsoft unless told not to, and nothing of a Parley session may touch
    the disk; the variable is read when the library loads, so it is set first."""
    os.environ["ORT_DISABLE_TELEMETRY"] = "1"
    import onnxruntime

    return onnxruntime


def quiet_session_options(threads: int | None) -> object:
    """Session options for a model that shares two cores with Whisper and llama.cpp."""
    onnxruntime = onnxruntime_quietly()
    options = onnxruntime.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    # Idle worker threads spin by default, stealing the cores Whisper and llama.cpp need.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options
