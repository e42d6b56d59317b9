"""Real recordings of human speech with their transcripts, from Debian's pocketsphinx-testdata.

`apt-get install pocketsphinx-testdata` (BSD-2, CMU Sphinx) puts them under
/usr/share/pocketsphinx/test/data: five LibriVox readings of *Sense and Sensibility* (one
reader, 3–7 s each), five short spoken card names and "go forward ten meters", all 16 kHz
mono 16-bit, with the transcripts the pocketsphinx tests use. Nothing is copied into the repo.
"""

from __future__ import annotations

import os
import re
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SAMPLES_PACKAGE = "pocketsphinx-testdata"
DATA_DIR = Path(os.environ.get("PARLEY_SPEECH_SAMPLES", "/usr/share/pocketsphinx/test/data"))
SAMPLE_RATE = 16000

# Known from pocketsphinx's own decoder tests; the raw file has no transcript beside it.
_GOFORWARD = ("goforward.raw", "go forward ten meters")
# "<s> ten of clubs </s> (001)": Sphinx transcription lines.
_LINE = re.compile(r"^<s>\s*(?P<text>.*?)\s*</s>\s*\((?P<id>[^)]+)\)\s*$")


@dataclass(frozen=True)
class SpeechSample:
    """One recorded utterance and what was said in it."""

    name: str
    pcm: np.ndarray
    """16 kHz mono int16."""
    transcript: str
    """Lower case, no punctuation, as the Sphinx transcription files have it."""

    @property
    def seconds(self) -> float:
        return len(self.pcm) / SAMPLE_RATE


def available() -> bool:
    return (DATA_DIR / "librivox" / "transcription").is_file()


def missing_reason() -> str:
    return f"human speech samples not found in {DATA_DIR}: apt-get install {SAMPLES_PACKAGE}"


def _read_wav(path: Path) -> np.ndarray:
    with wave.open(str(path), "rb") as wav:
        # The package's files are all 16 kHz mono 16-bit; refuse anything else loudly.
        if (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) != (SAMPLE_RATE, 1, 2):
            raise ValueError(f"{path}: expected 16 kHz mono 16-bit")
        return np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2").astype(np.int16)


def _transcribed(folder: str, transcription: str) -> list[SpeechSample]:
    samples = []
    for line in (DATA_DIR / folder / transcription).read_text().splitlines():
        match = _LINE.match(line.strip())
        if match:
            name = match["id"]
            text = " ".join(match["text"].split())
            samples.append(SpeechSample(name, _read_wav(DATA_DIR / folder / f"{name}.wav"), text))
    return samples


def librivox() -> list[SpeechSample]:
    """Five sentences read from a book: the longer, natural-speech set (3–7 s each)."""
    return _transcribed("librivox", "transcription")


def commands() -> list[SpeechSample]:
    """Short command-like utterances (1–3.5 s): card names and "go forward ten meters"."""
    raw_name, text = _GOFORWARD
    raw = np.fromfile(DATA_DIR / raw_name, dtype="<i2").astype(np.int16)
    return [*_transcribed("cards", "cards.transcription"), SpeechSample("goforward", raw, text)]


def all_samples() -> list[SpeechSample]:
    return librivox() + commands()


_NUMBERS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
).split()
_SPELLED = {
    "mr": "mister",
    "mrs": "missus",
    "dr": "doctor",
    **{str(i): w for i, w in enumerate(_NUMBERS)},
}


def words(text: str) -> str:
    """Text as the transcripts write it, for word error rates: lower case, no punctuation,
    hyphens split, small numbers and titles spelled out ("Mr." -> "mister", "10" -> "ten")."""
    text = re.sub(r"[^a-z0-9' ]+", " ", text.lower())
    return " ".join(_SPELLED.get(word, word) for word in text.split())


def joined(samples: list[SpeechSample], gap_seconds: float = 0.3) -> SpeechSample:
    """Several samples as one longer utterance, with short pauses between them."""
    gap = np.zeros(int(gap_seconds * SAMPLE_RATE), dtype=np.int16)
    parts: list[np.ndarray] = []
    for sample in samples:
        parts += [sample.pcm, gap]
    return SpeechSample(
        "+".join(s.name for s in samples),
        np.concatenate(parts[:-1]),
        " ".join(s.transcript for s in samples),
    )
