"""The wake word: microWakeWord models (pymicro-wakeword) over 16 kHz mono int16 audio.

The models ship in the `pymicro-wakeword` wheel, so nothing is downloaded. Each 10 ms of
audio becomes one feature frame; the model scores every third frame, and a word is heard
when the mean of its last few scores passes the cutoff its author chose. The score stays
high for a few frames after the word, so one utterance of it counts once (`COOLDOWN_MS`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources

import numpy as np

from audio.errors import AudioError
from audio.pcm import require_mono_int16

SAMPLE_RATE = 16000
COOLDOWN_MS = 1500
"""After a detection, further detections are ignored this long: the same word again."""
OVER_OWN_VOICE_CUTOFF = 0.7
"""The cutoff while Parley speaks and its voice is cancelled (`speaking_cutoff`). The
canceller turns down what is said over Parley's voice, the wake word too: at 0 dB over a
reply, okay_nabu's own 0.85 heard 11 of 19 clips, 0.5 heard 16 (benchmarks.echo).
What reaches the detector then is the canceller's output, where Parley's voice alone
scores at most 0.03; only other voices in the room could pass 0.5, and only while Parley
speaks (0.5 gives about 20 false wakes an hour of continuous speech: a reply stopped)."""


class WakeWordError(AudioError):
    """A wake word cannot be used (unknown name, models missing)."""


@dataclass(frozen=True)
class WakeWord:
    name: str
    """What `--wake-word` takes, e.g. okay_nabu."""
    phrase: str
    """What to say, e.g. "Okay Nabu"."""
    languages: tuple[str, ...]
    cutoff: float


@cache
def wake_words() -> dict[str, WakeWord]:
    """The wake words the installed models offer, by name."""
    try:
        models = resources.files("pymicro_wakeword") / "models"
    except ModuleNotFoundError as exc:
        raise WakeWordError("Wake words need the pymicro-wakeword package: "
                            "pip install pymicro-wakeword.") from exc
    found = {}
    for entry in sorted(models.iterdir(), key=lambda item: item.name):
        if not entry.name.endswith(".json"):
            continue
        config = json.loads(entry.read_text(encoding="utf-8"))
        name = entry.name.removesuffix(".json")
        found[name] = WakeWord(name, config["wake_word"],
                               tuple(config.get("trained_languages", [])),
                               float(config["micro"]["probability_cutoff"]))
    return found


def describe_wake_words() -> str:
    """One line per wake word: its name, what to say, its languages."""
    return "\n".join(f"{word.name:<12} say \"{word.phrase}\" ({', '.join(word.languages)})"
                     for word in wake_words().values())


def find_wake_word(name: str) -> WakeWord:
    """The wake word called `name` (case and dashes forgiven), or an error listing them."""
    words = wake_words()
    key = name.strip().lower().replace("-", "_").replace(" ", "_")
    if key not in words:
        raise WakeWordError(f"there is no wake word {name!r}; choose one of: "
                            f"{', '.join(words)} (`parley wake-words` lists them)")
    return words[key]


class WakeWordDetector:
    """Listens for one wake word in a stream of audio fed in chunks of any size."""

    def __init__(self, name: str, speaking_cutoff: float | None = None) -> None:
        self.word = find_wake_word(name)
        self.speaking_cutoff = self.word.cutoff if speaking_cutoff is None else speaking_cutoff
        """The cutoff while Parley speaks (`feed(..., speaking=True)`); the model's own
        unless its voice is cancelled (`OVER_OWN_VOICE_CUTOFF`)."""
        from pymicro_wakeword import MicroWakeWord, MicroWakeWordFeatures, Model

        self._model = MicroWakeWord.from_builtin(Model(self.word.name))
        self._features = MicroWakeWordFeatures()
        self.samples_seen = 0
        """Samples fed so far: the stream's clock, as in the segmenter."""
        self._featured = 0
        """Samples turned into features so far (whole 10 ms steps)."""
        self._quiet_until = 0

    @property
    def name(self) -> str:
        return self.word.name

    def feed(self, pcm: np.ndarray, speaking: bool = False) -> int | None:
        """Where in `pcm` the wake word was heard (the index just after it), or None;
        `speaking`: Parley's voice was playing while `pcm` was heard."""
        pcm = require_mono_int16(pcm, "the wake word detector")
        start = self.samples_seen
        self.samples_seen += len(pcm)
        heard: int | None = None
        cutoff = self.speaking_cutoff if speaking else self.word.cutoff
        for score in self._scores(pcm):
            if score is None or score <= cutoff or self._featured < self._quiet_until:
                continue
            self._quiet_until = self._featured + COOLDOWN_MS * SAMPLE_RATE // 1000
            if heard is None:
                heard = min(len(pcm), max(0, self._featured - start))
        return heard

    def scores(self, pcm: np.ndarray) -> list[float]:
        """The model's score for each 10 ms of `pcm`, what `feed` compares with the cutoff
        (0 until it has heard enough to score); for measuring, as it detects nothing."""
        pcm = require_mono_int16(pcm, "the wake word detector")
        self.samples_seen += len(pcm)
        return [score or 0.0 for score in self._scores(pcm)]

    def _scores(self, pcm: np.ndarray) -> Iterator[float | None]:
        for features in self._features.process_streaming(pcm.tobytes()):
            self._featured += SAMPLE_RATE // 100
            yield self._model.process_streaming_prob(features)
