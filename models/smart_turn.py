"""Pipecat's Smart Turn v3.2: has the speaker finished their turn, judged from the audio.

A Whisper-tiny encoder with a classifier (int8 ONNX, 8.7 MB, BSD-2-Clause), shipped in the
`pipecat-ai` wheel, which is installed as data (`--no-deps`) and never imported: its
package's `__init__` needs pipecat's own dependencies. It reads Whisper's 80-bin log-mel
features of the last 8 s of the turn, zero-padded in front, with the waveform normalized
first, and gives the probability that the turn is over: prosody and words both count, so
"I parked the car…" said with the voice held up scores low and a finished request high.

On one thread it costs 45–65 ms a call here; the model is deterministic on the CPU, so the
same audio gives the same score every time (replay's turns do not vary).
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

import numpy as np

from models.errors import EngineError
from models.onnx import onnxruntime_quietly, quiet_session_options

SAMPLE_RATE = 16000
WINDOW_SECONDS = 8
"""The model reads the last 8 s of the turn (Whisper features, 800 frames of 10 ms)."""
TURN_PACKAGE, TURN_DIST = "pipecat", "pipecat-ai"
TURN_FILE = "audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx"


class TurnModelMissing(EngineError):
    """The turn model is not installed or cannot be loaded; the message says what to do."""


def default_turn_model() -> Path:
    """The Smart Turn file inside the installed `pipecat-ai` wheel."""
    # find_spec on a top-level name locates the folder without running its __init__.
    spec = importlib.util.find_spec(TURN_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise TurnModelMissing(f"the turn model package {TURN_DIST!r} is not installed; run "
                               f"`make run` or `pip install --no-deps {TURN_DIST}`")
    path = Path(spec.submodule_search_locations[0]) / TURN_FILE
    if not path.is_file():
        raise TurnModelMissing(f"{path} is missing; reinstall it with "
                               f"`pip install --no-deps --force-reinstall {TURN_DIST}`")
    return path


def load_in_background(path: Path | None = None, threads: int = 1
                       ) -> Callable[[np.ndarray], float]:
    """`SmartTurn(...).score`, with the model loaded on a thread of its own meanwhile.

    The model is first asked at the first pause, seconds after start; loading it (about
    0.3 s of onnxruntime's graph optimization) while the rest starts lets a first typed
    turn be answered that much sooner. A missing model is said at once (`TurnModelMissing`);
    one that cannot be loaded fails its first `score`, as a model that breaks later does.
    """
    path = Path(path) if path is not None else default_turn_model()
    loaded: Future = Future()

    def load() -> None:
        try:
            loaded.set_result(SmartTurn(path, threads))
        except BaseException as error:  # handed to the first score, which reports it
            loaded.set_exception(error)

    threading.Thread(target=load, name="turn-model-load", daemon=True).start()
    return lambda pcm: loaded.result().score(pcm)


class SmartTurn:
    """`score(pcm)`: the probability that the turn in `pcm` (16 kHz mono int16, from its
    start to now, trailing silence included) is finished."""

    def __init__(self, path: Path | None = None, threads: int = 1) -> None:
        from faster_whisper.feature_extractor import FeatureExtractor

        onnxruntime = onnxruntime_quietly()
        self.path = Path(path) if path is not None else default_turn_model()
        # One thread: a call is short, and Whisper and the model run on the other core.
        options = quiet_session_options(threads)
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.enable_mem_pattern = False  # its plan's block stays resident: 0-10 MB more
        options.log_severity_level = 3  # its warnings about unused initializers are noise
        try:
            self._session = onnxruntime.InferenceSession(
                str(self.path), sess_options=options, providers=["CPUExecutionProvider"])
        except Exception as error:  # onnxruntime raises its own types, all from Exception
            raise TurnModelMissing(f"the turn model {self.path} could not be loaded: "
                                   f"{error}") from error
        inputs = {i.name: i.shape for i in self._session.get_inputs()}
        if list(inputs.get("input_features") or [])[1:] != [80, 800]:
            raise TurnModelMissing(f"{self.path} is not a Smart Turn v3 model (its inputs "
                                   f"are {inputs})")
        # faster-whisper's extractor gives the features transformers' Whisper extractor
        # gives (within 5e-6 on speech here), which is what the model was trained on.
        self._features = FeatureExtractor(feature_size=80, sampling_rate=SAMPLE_RATE,
                                          chunk_length=WINDOW_SECONDS)
        self._lock = threading.Lock()  # one call at a time: replay and live share nothing

    def score(self, pcm: np.ndarray) -> float:
        window = SAMPLE_RATE * WINDOW_SECONDS
        audio = pcm[-window:].astype(np.float32) / 32768.0
        audio = np.pad(audio, (window - len(audio), 0))
        audio = (audio - audio.mean()) / np.sqrt(audio.var() + 1e-7)
        features = self._features(audio, padding=0)[:, :800]
        with self._lock:
            (probability,), = self._session.run(
                None, {"input_features": features[np.newaxis].astype(np.float32)})[0]
        return float(probability)
