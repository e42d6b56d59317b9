"""Audio files in and out, and a file source that stands in for the microphone."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from os import PathLike
from pathlib import Path

import numpy as np

from audio.errors import AudioError
from audio.pcm import to_int16

_HOW_TO_FIX = "Use a WAV, FLAC or OGG file (any rate, any channels), e.g. `sox in.mp3 out.wav`."


class AudioFileError(AudioError):
    """An audio file is missing, unreadable, empty or corrupt; the message names it."""

    stage = "audio"


def read_audio(path: str | PathLike[str], sample_rate: int = 16000) -> np.ndarray:
    """Any file soundfile reads, at any rate and channel count, as int16 mono at `sample_rate`."""
    import soundfile
    import soxr

    name = str(path)
    file = Path(path)
    # libsndfile says "System error" for all of these; say which one it is.
    try:
        if not file.exists():
            raise AudioFileError(f"Audio file {name} does not exist; check the path.")
        if file.is_dir():
            raise AudioFileError(f"{name} is a folder, not an audio file. {_HOW_TO_FIX}")
        if file.stat().st_size == 0:
            raise AudioFileError(f"Audio file {name} is empty (0 bytes). {_HOW_TO_FIX}")
    except OSError as e:  # a name too long, a folder it may not look into, ...
        raise AudioFileError(f"Cannot open audio file {name}: {e.strerror}; check the path.") \
            from e
    try:
        audio, rate = soundfile.read(name, dtype="float32", always_2d=True)
    except (soundfile.SoundFileError, RuntimeError, OSError) as e:
        # libsndfile's reason ("Format not recognised", ...) tells corrupt from unsupported.
        reason = getattr(e, "error_string", None) or str(e)
        raise AudioFileError(
            f"Cannot read audio file {name}: {reason.rstrip('.')}. {_HOW_TO_FIX}"
        ) from e
    if audio.shape[0] == 0:
        raise AudioFileError(f"Audio file {name} contains no audio. {_HOW_TO_FIX}")
    mono = audio.mean(axis=1)  # mix down: keeps what every channel says
    if rate != sample_rate:
        mono = soxr.resample(mono, rate, sample_rate, quality="HQ")
    return to_int16(mono)


def write_wav(path: str | PathLike[str], pcm: np.ndarray, sample_rate: int) -> None:
    """Write mono audio (int16, or float in [-1, 1]) as a 16-bit PCM WAV file."""
    import soundfile

    pcm = to_int16(pcm).reshape(-1)
    try:
        soundfile.write(str(path), pcm, sample_rate, subtype="PCM_16", format="WAV")
    except (soundfile.SoundFileError, RuntimeError, OSError) as e:
        raise AudioFileError(
            f"Cannot write audio file {path} ({e}); check that its folder exists and is "
            "writable."
        ) from e


def frames_of(
    pcm: np.ndarray,
    sample_rate: int,
    chunk_ms: int = 30,
    realtime: bool = False,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[np.ndarray]:
    """Yield `pcm` in chunks, as the microphone would deliver it.

    With `realtime`, each chunk is yielded when a microphone would have finished recording
    it: `chunk_end / sample_rate` seconds after the start. Due times are absolute, so a
    slow consumer catches up instead of pushing every later chunk back (no drift).
    """
    if chunk_ms <= 0:
        raise ValueError(f"chunk_ms must be more than 0, got {chunk_ms}")
    size = max(1, sample_rate * chunk_ms // 1000)
    started = clock() if realtime else 0.0
    for begin in range(0, len(pcm), size):
        end = min(begin + size, len(pcm))
        if realtime:
            delay = started + end / sample_rate - clock()
            if delay > 0:
                sleep(delay)
        yield pcm[begin:end]
