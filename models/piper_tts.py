"""Piper text-to-speech: audio one sentence at a time, so speaking starts after the first."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from models.embedded import EmbeddedModelMissing, default_voice
from models.onnx import onnxruntime_quietly, quiet_session_options
from models.pieces import MAX_PIECE_PHONEMES, MAX_PIECE_WORDS, phoneme_runs, speech_pieces
from models.speech import SpeechEngineError, SpokenAudio, TextToSpeech

log = logging.getLogger(__name__)

SYNTHESIS_SEED = 1


def _voice_error(path: Path, problem: str) -> SpeechEngineError:
    return SpeechEngineError(
        f"voice {path}: {problem}; pass --voice with a Piper .onnx file "
        "(its .onnx.json config beside it)"
    )


def _bounded_voice_class(piper_voice: type, max_phonemes: int) -> type:
    """Piper's voice, synthesizing at most `max_phonemes` phonemes a pass: Piper runs the
    model once per sentence its phonemizer returns, so the sentences are handed on in runs.
    Everything else (ids, the model, volume, alignments) stays Piper's own."""

    class BoundedPiperVoice(piper_voice):
        def phonemize(self, text: str) -> list[list[str]]:
            return [run for sentence in super().phonemize(text)
                    for run in phoneme_runs(sentence, max_phonemes)]

    return BoundedPiperVoice


class PiperTextToSpeech(TextToSpeech):
    """A Piper (VITS, ONNX) voice; `synthesize` yields its audio a sentence at a time."""

    name = "piper"

    def __init__(
        self,
        path: Path | None = None,
        speaker: int | None = None,
        length_scale: float | None = None,
        threads: int | None = 1,
        max_piece_words: int = MAX_PIECE_WORDS,
        max_piece_phonemes: int = MAX_PIECE_PHONEMES,
    ) -> None:
        """`threads`: onnxruntime threads (None: one per core). Whisper and the language
        model run at the same time in voice mode, so Piper takes one by default.
        `max_piece_words`, `max_piece_phonemes`: longer sentences are synthesized in pieces
        (`models.pieces`)."""
        self.max_piece_words = max_piece_words
        if path is None:
            try:
                path = default_voice()
            except EmbeddedModelMissing as error:
                raise SpeechEngineError(f"{error}, or pass --voice") from error
        path = Path(path)
        config_path = Path(f"{path}.json")
        if not path.is_file():
            raise _voice_error(path, "no such file")
        if not config_path.is_file():
            raise _voice_error(path, f"its config {config_path.name} is missing")
        try:
            config: dict[str, Any] = json.loads(config_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise _voice_error(path, f"its config cannot be read ({error})") from error
        self.path = path
        language = config.get("language")
        self.language = str(language.get("code") if isinstance(language, dict) else "") or "en"
        """The voice's language, e.g. en_US."""
        self._voice = self._load(path, config, threads, max_piece_phonemes)
        self.sample_rate = self._voice.config.sample_rate
        speakers = self._voice.config.num_speakers
        if speaker is not None and not 0 <= speaker < speakers:
            raise _voice_error(path, f"speaker {speaker} does not exist (it has {speakers})")
        from piper import SynthesisConfig

        self._syn_config = SynthesisConfig(speaker_id=speaker, length_scale=length_scale)

    @staticmethod
    def _load(path: Path, config: dict[str, Any], threads: int | None,
              max_phonemes: int) -> Any:
        # PiperVoice.load() builds its own SessionOptions, which cannot limit threads; the
        # PiperVoice dataclass takes any session, so build the same one with our options.
        onnxruntime = onnxruntime_quietly()
        from piper import PiperVoice
        from piper.config import PiperConfig

        options = quiet_session_options(threads)
        # onnxruntime plans memory for the shapes of the last run and keeps the plan's
        # block: with every sentence a different length, that held 50 MB more at the peak
        # (238 against 188 MB for nine sentences) for no speed measured.
        options.enable_mem_pattern = False
        # VITS draws random noise for every sentence, so no two syntheses were the same. Its
        # generator is seeded when the session is made: with a fixed seed a session's audio
        # is the same each time it is replayed (the same sentences in the same order).
        onnxruntime.set_seed(SYNTHESIS_SEED)
        try:
            piper_config = PiperConfig.from_dict(config)
            session = onnxruntime.InferenceSession(
                str(path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as error:
            # Broad on purpose: onnxruntime's errors (Fail, InvalidProtobuf, NoSuchFile…)
            # derive from Exception alone, and PiperConfig raises KeyError/TypeError/ValueError
            # on a config missing fields.
            log.debug("loading the voice %s failed", path, exc_info=True)
            raise _voice_error(path, f"cannot be loaded ({error})") from error
        return _bounded_voice_class(PiperVoice, max_phonemes)(session=session,
                                                              config=piper_config)

    def synthesize(self, text: str) -> Iterator[SpokenAudio]:
        if not text.strip():
            return
        # Piper reads "[[ ... ]]" as raw phonemes; a reply quoting a nested list is text.
        said = text.replace("[[", "[ [").replace("]]", "] ]")
        try:
            for piece in speech_pieces(said, self.max_piece_words):
                for chunk in self._voice.synthesize(piece, syn_config=self._syn_config):
                    audio = chunk.audio_int16_array
                    if audio.size:
                        yield SpokenAudio(audio, chunk.sample_rate, text)
        except Exception as error:
            # Broad on purpose: onnxruntime's errors derive from Exception alone (besides,
            # Piper's espeak-ng bridge raises RuntimeError and Piper itself ValueError).
            log.debug("text-to-speech failed", exc_info=True)
            raise SpeechEngineError(f"text-to-speech failed: {error}") from error
