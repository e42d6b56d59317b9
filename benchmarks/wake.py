"""Wake word benchmark: how often the word is heard when said, and how often it is not.

    python -m benchmarks.wake [--hours 1] [--words okay_nabu,hey_jarvis,…]

Positives: each wake word said, then a request ("…, what time is it?"), by six espeak-ng
voices at three speeds and by Parley's own Piper voice, clean and with noise mixed in at
10 dB SNR (white, pink, and other people talking: the LibriVox recordings). A clip counts
as detected when the word is heard once, after it was said and before the clip ends.

False wakes: every recording there is that does not say the word (the pocketsphinx
speech, ordinary sentences in espeak-ng's and Piper's voices, white and pink noise),
looped with varied gain to `--hours` of audio, fed 30 ms at a time as live audio is.

Needs espeak-ng and pocketsphinx-testdata (the Makefile installs both). Figures are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator

import numpy as np

from audio.wakeword import OVER_OWN_VOICE_CUTOFF, WakeWordDetector, wake_words
from tests.support import espeak
from tests.support import speech_samples as samples
from tests.support.spoken import speech_at

RATE = 16000
SPEEDS = (130, 160, 190)
"""espeak-ng's words per minute: slow, its default-ish, brisk."""
REQUESTS = ("what time is it?", "set a timer for five minutes.")
OTHER_SENTENCES = (
    "It is a quarter past three in the afternoon.", "Your tea timer has four minutes left.",
    "Seven times six is forty two.", "I found three messages about the billing port.",
    "Okay, I will remind you tomorrow morning.", "Sure, what would you like to know?",
    "Hey there, how are you doing today?", "Alex said the meeting moved to Friday.",
    "Nobody knew about the new budget.", "My car is in the garage.")
"""Speech without a wake word, some of it close to one ("okay", "hey", "Alex")."""
SNR_DB = 10.0


def noise(kind: str, count: int, rng: np.random.Generator) -> np.ndarray:
    """Unit-RMS noise: white, pink (1/f power), or babble (recorded speech)."""
    if kind == "babble":
        talk = np.concatenate([s.pcm for s in samples.all_samples()]).astype(np.float64)
        start = int(rng.integers(0, max(1, len(talk) - count)))
        out = np.resize(talk[start:], count)
    else:
        white = rng.normal(0, 1, count)
        if kind == "white":
            out = white
        else:
            spectrum = np.fft.rfft(white)
            spectrum /= np.sqrt(np.maximum(np.arange(len(spectrum)), 1))
            out = np.fft.irfft(spectrum, count)
    return out / (np.sqrt(np.mean(out ** 2)) + 1e-9)


def mix(clean: np.ndarray, kind: str | None, rng: np.random.Generator) -> np.ndarray:
    if kind is None:
        return clean
    speech = clean.astype(np.float64)
    level = np.sqrt(np.mean(speech[np.abs(speech) > 100] ** 2))
    mixed = speech + noise(kind, len(speech), rng) * level / 10 ** (SNR_DB / 20)
    return np.clip(mixed, -32768, 32767).astype(np.int16)


def piper_clips(texts: list[str]) -> list[np.ndarray]:
    from models.piper_tts import PiperTextToSpeech

    tts = PiperTextToSpeech(None)
    return [speech_at(tts, text, RATE).astype(np.int16) for text in texts]


def positives(phrase: str) -> Iterator[tuple[str, np.ndarray]]:
    """(voice, clip) with half a second of quiet before and after."""
    pad = np.zeros(RATE // 2, dtype=np.int16)
    for voice in espeak.VOICES:
        for speed in SPEEDS:
            for request in REQUESTS:
                said = espeak.espeak(f"{phrase}, {request}", voice, speed)
                yield f"espeak {voice}", np.concatenate([pad, said, pad])
    for clip in piper_clips([f"{phrase}, {request}" for request in REQUESTS]
                            + [f"{phrase}."]):
        yield "piper", np.concatenate([pad, clip, pad])


def heard_at(detector: WakeWordDetector, pcm: np.ndarray, speaking: bool = False) -> list[int]:
    found = []
    for start in range(0, len(pcm), 480):
        where = detector.feed(pcm[start:start + 480], speaking)
        if where is not None:
            found.append(start + where)
    return found


def detection(name: str, rng: np.random.Generator) -> None:
    phrase = wake_words()[name].phrase
    results: dict[tuple[str, str], list[bool]] = {}
    for voice, clip in positives(phrase):
        for kind in (None, "white", "pink", "babble"):
            found = heard_at(WakeWordDetector(name), mix(clip, kind, rng))
            ok = len(found) == 1 and found[0] > RATE // 2
            results.setdefault((voice, kind or "clean"), []).append(ok)
    every = [ok for oks in results.values() for ok in oks]
    print(f"\n{name} (\"{phrase}\"): detected {sum(every)}/{len(every)} "
          f"({100 * sum(every) / len(every):.1f}%)")
    voices = sorted({voice for voice, _ in results})
    kinds = ["clean", "white", "pink", "babble"]
    print(f"  {'voice':<22}" + "".join(f"{kind:>9}" for kind in kinds))
    for voice in voices:
        cells = []
        for kind in kinds:
            oks = results[(voice, kind)]
            cells.append(f"{sum(oks)}/{len(oks)}")
        print(f"  {voice:<22}" + "".join(f"{cell:>9}" for cell in cells))


def negatives() -> list[np.ndarray]:
    clips = [s.pcm for s in samples.all_samples()]
    for voice in espeak.VOICES[:3]:
        clips += [espeak.espeak(text, voice) for text in OTHER_SENTENCES]
    clips += piper_clips(list(OTHER_SENTENCES))
    rng = np.random.default_rng(7)
    for kind in ("white", "pink"):
        clips.append((noise(kind, RATE * 30, rng) * 300).astype(np.int16))
    return clips


def false_wakes(names: list[str], hours: float) -> None:
    clips = negatives()
    total = sum(map(len, clips)) / RATE
    print(f"\nFalse wakes: {len(clips)} recordings without a wake word ({total / 60:.1f} "
          f"min), looped with gains from -12 to +6 dB to {hours:g} h")
    for name in names:
        detector = WakeWordDetector(name)
        # The same audio heard while Parley speaks with its voice cancelled.
        speaking = WakeWordDetector(name, OVER_OWN_VOICE_CUTOFF)
        rng = np.random.default_rng(11)
        fed = wakes = speaking_wakes = 0
        gap = np.zeros(RATE // 4, dtype=np.int16)
        cpu = 0.0
        while fed < hours * 3600 * RATE:
            clip = clips[int(rng.integers(len(clips)))]
            gain = 10 ** (rng.uniform(-12, 6) / 20)
            pcm = np.concatenate([np.clip(clip * gain, -32768, 32767).astype(np.int16), gap])
            started = time.process_time()
            wakes += len(heard_at(detector, pcm))
            cpu += time.process_time() - started
            speaking_wakes += len(heard_at(speaking, pcm, speaking=True))
            fed += len(pcm)
        hours_fed = fed / RATE / 3600
        print(f"  {name:<12} {wakes} false wake(s) in {hours_fed:.2f} h "
              f"({wakes / hours_fed:.2f}/h); CPU {100 * cpu / (fed / RATE):.2f}% of a core; "
              f"at the cutoff while Parley speaks ({OVER_OWN_VOICE_CUTOFF:g}): "
              f"{speaking_wakes / hours_fed:.1f}/h")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.wake",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=1.0,
                        help="audio without the wake word to listen to (default 1)")
    parser.add_argument("--words", default=",".join(wake_words()),
                        help="wake words to measure, comma-separated (default: all)")
    args = parser.parse_args(argv)
    missing = espeak.missing_reason() or (None if samples.available()
                                          else samples.missing_reason())
    if missing:
        raise SystemExit(f"bench: {missing}")
    names = [name.strip() for name in args.words.split(",") if name.strip()]
    rng = np.random.default_rng(3)
    for name in names:
        detection(name, rng)
    false_wakes(names, args.hours)


if __name__ == "__main__":
    main()
