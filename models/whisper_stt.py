"""faster-whisper speech-to-text that never turns silence, breathing or noise into words.

Whisper was trained on subtitles, so on non-speech it readily "hears" "Thank you.", "you" or
"[Music]". Three gates keep that out of the conversation: the audio's level (too quiet: the
model is not even run), Whisper's own no-speech probability and log-probability per segment,
and a list of the phrases and sound tags it invents on non-speech.
"""

from __future__ import annotations

import logging
import math
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from models.embedded import EmbeddedModelMissing, default_stt
from models.speech import STT_SAMPLE_RATE, SpeechEngineError, SpeechToText, Transcript

log = logging.getLogger(__name__)

MIN_LEVEL_DBFS = -50.0
"""Loudest 30 ms of the utterance below this: nobody spoke close to the microphone."""
NO_SPEECH_SURE = 0.8
"""A segment whose no-speech probability is above this is dropped whatever its words."""
NO_SPEECH_DOUBT, LOGPROB_DOUBT = 0.5, -0.8
"""Both at once (likely no speech, and unsure of the words): dropped."""
MIN_AVG_LOGPROB = -1.0
"""Below this average token log-probability the words are guesswork (Whisper's own limit)."""
MAX_COMPRESSION_RATIO = 2.4
"""Above this the text repeats itself: a decoding loop, not speech (Whisper's own limit)."""
PHRASE_LOGPROB, PHRASE_NO_SPEECH = -0.5, 0.35
"""A lone "Thank you." or "you" is kept only when decoded surer and with less doubt than this
(spoken clearly they measured -0.05 to -0.36 and no-speech 0.06 to 0.23)."""

# What Whisper says over silence, breath and noise; dropped when it is the whole utterance
# unless decoded confidently (people do say "thank you" to an assistant).
_HALLUCINATED_PHRASES = frozenset(
    {
        "you", "thank you", "thank you very much", "thanks", "thanks for watching",
        "thank you for watching", "thank you so much for watching", "bye", "so", "ah",
        "oh", "uh", "um", "hmm", "mm", "huh", "okay", "blank audio", "silence",
        "subtitles by the amaraorg community",
    }
)  # fmt: skip
# Sound tags and music symbols are never words the user said: "[BLANK_AUDIO]", "(sighs)".
_SOUND_TAGS = re.compile(r"\[[^\]]*\]|\([^)]*\)|\*[^*]*\*|[♪♫♬🎵🎶]")
_NOT_WORD = re.compile(r"[^a-z0-9' ]+")

_FRAME = STT_SAMPLE_RATE * 30 // 1000

ENCODER_SECONDS = 15
"""Whisper's encoder hears this many seconds (or the utterance plus 1 s, if longer), not
its full 30 s window, most of which is padding for a spoken request. On 11 recordings of
human speech it transcribed 3.1x faster with a word error rate of 7.3% against 8.3%, and
it still rejects noise and breathing (tests/test_speech_engines.py). With a turn model
that ends turns 210 ms into a pause, the transcript is what the user waits for. 8 s was
worse: 11.5%, and it looped on one recording."""


@contextmanager
def _hub_offline() -> Iterator[None]:
    # Nothing may be fetched from a model hub at run time, even if a folder is incomplete.
    before = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = before


def _stt_error(path: Path, problem: str) -> SpeechEngineError:
    return SpeechEngineError(
        f"speech-to-text model {path}: {problem}; pass --stt-model with a CTranslate2 "
        "Whisper folder (model.bin, config.json, tokenizer.json)"
    )


def peak_level_dbfs(pcm: np.ndarray) -> float:
    """Level of the loudest 30 ms frame, in dB relative to int16 full scale."""
    usable = len(pcm) // _FRAME * _FRAME or len(pcm)
    frames = pcm[:usable].astype(np.float64).reshape(-1, min(_FRAME, usable))
    rms = float(np.sqrt((frames**2).mean(axis=1)).max())
    return 20 * math.log10(max(rms, 1e-3) / 32768)


def chunk_length_for(seconds: float) -> int:
    """Whisper window for an utterance: whole seconds with a margin, at most 30.

    A window shorter than the utterance splits it: each piece gets a full encoder pass and a
    word at the cut is lost (measured with 5 s windows on human speech: WER 7.0% -> 11.3% on
    3–7 s clips, a 10 s clip 2.1x slower). A longer one changes nothing: faster-whisper 1.2
    pads the features to 30 s whatever the window, so 5 s saved no time on a 3 s clip.
    """
    return max(1, min(30, math.ceil(seconds + 1.0)))


def _windowed_model_class() -> type:
    from faster_whisper import WhisperModel  # heavy: imported only when a model is loaded
    from tqdm import tqdm

    # faster-whisper makes a (disabled) tqdm bar per utterance, and tqdm's first bar creates
    # a multiprocessing lock: a POSIX semaphore file in /dev/shm. A thread lock is all a
    # single process needs, and it touches no file system.
    tqdm.set_lock(threading.RLock())

    class WindowedWhisperModel(WhisperModel):
        """Optionally encodes only the first `window_frames` of Whisper's 30 s window.

        CTranslate2 pads every input to 3000 mel frames, and the encoder over them is most of
        the time of a short utterance; the rest is padding (whisper.cpp's `audio_ctx`).
        """

        window_frames: int | None = None

        def encode(self, features: Any) -> Any:
            if self.window_frames:
                features = features[..., : self.window_frames]
            return super().encode(features)

    return WindowedWhisperModel


def _clean(text: str) -> str:
    return " ".join(_SOUND_TAGS.sub(" ", text).split())


def _words(text: str) -> str:
    """Lower-case words only: "Thank you." -> "thank you", "Amara.org" -> "amaraorg"."""
    return " ".join(_NOT_WORD.sub(" ", text.lower().replace(".", "")).split())


def _segment_rejection(segment: Any) -> str:
    """Why a faster-whisper segment is not speech, or "" when it is."""
    if segment.no_speech_prob > NO_SPEECH_SURE:
        return "no speech"
    if segment.no_speech_prob > NO_SPEECH_DOUBT and segment.avg_logprob < LOGPROB_DOUBT:
        return "no speech"
    if segment.avg_logprob < MIN_AVG_LOGPROB:
        return "unclear"
    if segment.compression_ratio > MAX_COMPRESSION_RATIO:
        return "repetitive"
    return ""


class WhisperSpeechToText(SpeechToText):
    """Whisper through faster-whisper (CTranslate2), one utterance at a time."""

    name = "whisper"

    def __init__(
        self,
        path: Path | None = None,
        threads: int = 2,
        compute_type: str = "int8",
        beam_size: int = 1,
        language: str | None = "en",
        chunk_length: int | None = None,
        encoder_seconds: int | None = ENCODER_SECONDS,
    ) -> None:
        """`chunk_length`: Whisper's window in seconds; None fits it to each utterance.

        `encoder_seconds`: encode only this many seconds (at least the utterance plus 1 s);
        None: Whisper's full 30 s, as it was trained. Shorter windows make it loop on
        noise more often (still rejected, as repetitive).
        """
        for name, value in (("chunk_length", chunk_length), ("encoder_seconds", encoder_seconds)):
            if value is not None and not 1 <= value <= 30:
                raise ValueError(f"{name} must be 1–30 seconds, or None")
        if path is None:
            try:
                path = default_stt()
            except EmbeddedModelMissing as error:
                raise SpeechEngineError(f"{error}, or pass --stt-model") from error
        path = Path(path)
        if not path.is_dir():
            raise _stt_error(path, "not a folder" if path.exists() else "no such folder")
        # tokenizer.json too: without it faster-whisper would fetch one from the hub.
        needed = ("model.bin", "config.json", "tokenizer.json")
        missing = [name for name in needed if not (path / name).exists()]
        if missing:
            raise _stt_error(path, f"missing {', '.join(missing)}")
        self.path, self.beam_size, self.language = path, beam_size, language
        self.chunk_length, self.encoder_seconds = chunk_length, encoder_seconds
        with _hub_offline():
            try:
                self._model = _windowed_model_class()(
                    str(path), device="cpu", compute_type=compute_type, cpu_threads=threads
                )
            except Exception as error:
                # Broad on purpose: CTranslate2 raises RuntimeError/ValueError variants, but
                # the Hugging Face `tokenizers` library raises bare Exception on a bad
                # tokenizer.json.
                log.debug("loading the speech-to-text model %s failed", path, exc_info=True)
                raise _stt_error(path, f"cannot be loaded ({error})") from error

    def transcribe(self, pcm: np.ndarray) -> Transcript:
        pcm = np.asarray(pcm)
        if pcm.ndim != 1 or pcm.dtype != np.int16:
            raise SpeechEngineError("speech-to-text takes 16 kHz mono int16 PCM (a 1-D array)")
        if pcm.size == 0:
            return Transcript("", 0.0, "no audio")
        if peak_level_dbfs(pcm) < MIN_LEVEL_DBFS:
            return Transcript("", 0.0, "too quiet")
        seconds = pcm.size / STT_SAMPLE_RATE
        chunk_length = self.chunk_length or chunk_length_for(seconds)
        window = self.encoder_seconds and max(self.encoder_seconds, chunk_length_for(seconds))
        self._model.window_frames = window * 100 if window else None  # 10 ms mel frames
        try:
            segments, _info = self._model.transcribe(
                pcm.astype(np.float32) / 32768.0,
                language=self.language,
                beam_size=self.beam_size,
                # One greedy pass: a temperature fallback re-decodes noise until it finds
                # words, and makes replays differ.
                temperature=0.0,
                vad_filter=False,  # Parley's segmenter already cut the utterance
                condition_on_previous_text=False,
                without_timestamps=True,
                # Always explicit: faster-whisper keeps the last chunk_length it was given.
                chunk_length=chunk_length,
                # Judge every segment here (below) rather than have some skipped silently.
                no_speech_threshold=None,
            )
            segments = list(segments)  # the generator does the work: drain it here
        except Exception as error:
            # Broad on purpose: CTranslate2 raises RuntimeError/ValueError variants, and the
            # `tokenizers` library that decodes the words raises bare Exception.
            log.debug("speech-to-text failed", exc_info=True)
            raise SpeechEngineError(f"speech-to-text failed: {error}") from error
        return transcript_from_segments(segments)


def transcript_from_segments(segments: list[Any]) -> Transcript:
    """Judge faster-whisper segments (text, no_speech_prob, avg_logprob, compression_ratio,
    tokens) and join the ones that are speech."""
    kept: list[tuple[str, Any]] = []
    reasons: list[str] = []
    for segment in segments:
        text = _clean(segment.text)
        reason = _segment_rejection(segment) or ("" if _words(text) else "no words")
        if reason:
            reasons.append(reason)
        else:
            kept.append((text, segment))
    text = " ".join(t for t, _ in kept)
    if not text:
        return Transcript("", 0.0, reasons[0] if reasons else "no speech")
    if _words(text) in _HALLUCINATED_PHRASES and any(
        s.avg_logprob < PHRASE_LOGPROB or s.no_speech_prob > PHRASE_NO_SPEECH for _, s in kept
    ):
        return Transcript("", 0.0, "hallucination")
    # Weighted by tokens so a long, sure segment outweighs a short, unsure one.
    weights = [max(1, len(s.tokens)) for _, s in kept]
    sure = sum(w * math.exp(s.avg_logprob) for w, (_, s) in zip(weights, kept, strict=True))
    return Transcript(text, round(sure / sum(weights), 3))
