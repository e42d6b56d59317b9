"""Recordings of speech with pauses in them, between sentences and inside them, with where
each pause is: what an end-of-turn decision must get right (a pause inside a sentence is
no end of the turn) and the recordings to measure it on."""

from __future__ import annotations

import io
import re
import subprocess
from dataclasses import dataclass

import numpy as np

from tests.support.speech_samples import SpeechSample, words

SAMPLE_RATE = 16000
LEAD_S = 0.4
"""Silence before the first word, as a microphone hears before anyone speaks."""


@dataclass(frozen=True)
class Pause:
    """A stretch of silence in a recording, in samples."""

    start: int
    end: int
    inside: bool
    """Inside a sentence (the turn goes on) rather than between two."""

    @property
    def seconds(self) -> float:
        return (self.end - self.start) / SAMPLE_RATE


@dataclass(frozen=True)
class PausedRecording:
    name: str
    pcm: np.ndarray
    """16 kHz mono int16, with `LEAD_S` of silence before the first word."""
    transcript: str
    """Lower case, no punctuation (`speech_samples.words`)."""
    pauses: tuple[Pause, ...]
    """The pauses made on purpose (or known in a recording), in order."""

    @property
    def seconds(self) -> float:
        return len(self.pcm) / SAMPLE_RATE

    def pause_at(self, sample: int, slack_s: float = 0.35) -> Pause | None:
        """The pause that speech ending at `sample` ends at (the voice detector's idea of
        where speech stops may be a little before or after the silence begins)."""
        slack = int(slack_s * SAMPLE_RATE)
        return next((p for p in self.pauses if p.start - slack <= sample <= p.end), None)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(round(seconds * SAMPLE_RATE)), dtype=np.int16)


def with_pauses(name: str, parts: list[np.ndarray], gaps_s: list[float], inside: list[bool],
                transcript: str) -> PausedRecording:
    """`parts` said one after the other, `gaps_s[i]` of silence after part i."""
    if not len(gaps_s) == len(inside) == len(parts) - 1:
        raise ValueError("one gap, and whether it is inside a sentence, between each two parts")
    pcm, pauses = [silence(LEAD_S)], []
    at = len(pcm[0])
    for index, part in enumerate(parts):
        pcm.append(part)
        at += len(part)
        if index < len(gaps_s):
            gap = silence(gaps_s[index])
            pauses.append(Pause(at, at + len(gap), inside[index]))
            pcm.append(gap)
            at += len(gap)
    return PausedRecording(name, np.concatenate(pcm), words(transcript), tuple(pauses))


def readings_with_pauses(samples: list[SpeechSample], gaps_s: list[float]) -> PausedRecording:
    """Recorded readings one after the other with the pauses a reader makes between them."""
    return with_pauses("+".join(s.name.rsplit("-", 1)[-1] for s in samples),
                       [s.pcm for s in samples], gaps_s, [False] * len(gaps_s),
                       " ".join(s.transcript for s in samples))


def silent_runs(pcm: np.ndarray, min_s: float, level: int = 64,
                frame_ms: int = 10) -> list[tuple[int, int]]:
    """(start, end) of the stretches at least `min_s` long where no 10 ms frame's peak
    exceeds `level` (a synthetic voice's own pauses are digital silence)."""
    size = SAMPLE_RATE * frame_ms // 1000
    count = len(pcm) // size
    quiet = np.abs(pcm[: count * size].astype(np.int32)).reshape(count, size).max(axis=1) <= level
    runs, start = [], None
    for index, still in enumerate([*quiet, False]):
        if still and start is None:
            start = index
        elif not still and start is not None:
            if (index - start) * frame_ms >= min_s * 1000:
                runs.append((start * size, index * size))
            start = None
    return runs


BREAK = re.compile(r"\s*\|\s*(\d+(?:\.\d+)?)\s*s\s*\|\s*")
"""Where a pause goes in a sentence given to `espeak_with_breaks`: "… we could |0.9s| go …"."""


def espeak_with_breaks(marked: str, voice: str = "en-us",
                       words_per_minute: int = 160) -> PausedRecording:
    """A sentence said by espeak-ng with silences inside it, where `marked` has them
    ("Set a timer for |1.0s| ten minutes."), made with SSML breaks (`espeak-ng -m`)."""
    import soundfile
    import soxr

    texts, seconds = BREAK.split(marked)[::2], [float(s) for s in BREAK.split(marked)[1::2]]
    ssml = "<speak>" + "".join(
        text + (f' <break time="{round(seconds[i] * 1000)}ms"/> ' if i < len(seconds) else "")
        for i, text in enumerate(texts)) + "</speak>"
    result = subprocess.run(["espeak-ng", "-m", "-v", voice, "-s", str(words_per_minute),
                             "--stdout", ssml], capture_output=True, check=True, timeout=60)
    pcm, rate = soundfile.read(io.BytesIO(result.stdout), dtype="int16")
    if rate != SAMPLE_RATE:
        pcm = soxr.resample(pcm, rate, SAMPLE_RATE)
    pcm = np.concatenate([silence(LEAD_S), pcm.astype(np.int16)])
    # The breaks are the long silences; the last one found may be the voice's own ending.
    runs = [run for run in silent_runs(pcm, 0.3) if run[0] > len(silence(LEAD_S))]
    runs = [run for run in runs if run[1] < len(pcm)][: len(seconds)]
    if len(runs) != len(seconds):
        raise ValueError(f"espeak-ng made {len(runs)} pauses of {len(seconds)} in {marked!r}")
    return PausedRecording(f"espeak {voice}: {' … '.join(t.strip() for t in texts)}", pcm,
                           words(" ".join(texts)),
                           tuple(Pause(start, end, True) for start, end in runs))


def insert_silence(pcm: np.ndarray, at: int, seconds: float) -> np.ndarray:
    return np.concatenate([pcm[:at], silence(seconds), pcm[at:]])


def quietest_point(pcm: np.ndarray, start: int, end: int, frame_ms: int = 10) -> int:
    """The start of the quietest 10 ms frame between `start` and `end`: a word boundary
    found by a recognizer's timestamps, to within the gap between the words."""
    size = SAMPLE_RATE * frame_ms // 1000
    starts = list(range(max(0, start), max(start + 1, min(end, len(pcm) - size)), size))
    energy = [float(np.mean(pcm[s:s + size].astype(np.float64) ** 2)) for s in starts]
    return starts[int(np.argmin(energy))]
