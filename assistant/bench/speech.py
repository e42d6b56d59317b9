"""Speech engine benchmark: what Whisper's and Piper's settings cost, on human speech.

    python -m assistant.bench.speech [--repeat 3] [--busy]

Whisper transcribes a short (3.0 s) and a longer (10.4 s) LibriVox utterance with Parley's
default settings and with each alternative (a fixed 5 s window, one thread, a 15 s encoder
window); Piper speaks a three-sentence reply on one thread (the default) and on two. Each
figure is the median of `--repeat` runs and is shown beside the default measured in the
same run, as a ratio of its time. Figures are printed, never asserted: this machine is
noisy, and the ratios are what carry from one run to the next.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext

import jiwer
import numpy as np

from assistant.bench.busy import one_busy_core
from audio import samples

REPLY = "Sure, I can help with that. The meeting is at three. Shall I remind you?"
"""A short spoken reply: the first sentence's audio is what the user waits for."""

WHISPER_SETTINGS: list[tuple[str, dict]] = [
    ("default: 2 threads, window fitted", {}),
    ("fixed 5 s window (chunk_length=5)", {"chunk_length": 5}),
    ("1 thread", {"threads": 1}),
    ("15 s encoder window", {"encoder_seconds": 15}),
]
PIPER_THREADS = [(1, "default: 1 thread"), (2, "2 threads")]


def median_seconds(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def utterances() -> list[samples.SpeechSample]:
    by_id = {s.name.rsplit("-", 1)[-1]: s for s in samples.librivox()}
    return [by_id["0880"], samples.joined([by_id["0870"], by_id["0880"]])]


def bench_whisper(repeat: int) -> None:
    from models.whisper_stt import WhisperSpeechToText

    clips = utterances()
    print(f"Whisper tiny.en: seconds per utterance (real-time factor), median of {repeat}; "
          "words wrong over both")
    header = "".join(f"{f'{c.seconds:.1f} s utterance':>23s}" for c in clips)
    print(f"  {'setting':36s}{header}   WER")
    base: list[float] | None = None
    for label, options in WHISPER_SETTINGS:
        stt = WhisperSpeechToText(**options)
        stt.transcribe(clips[0].pcm)  # the first call pays one-time set-up
        spent = [median_seconds(lambda c=c, stt=stt: stt.transcribe(c.pcm), repeat)
                 for c in clips]
        heard = [samples.words(stt.transcribe(c.pcm).text) for c in clips]
        wer = jiwer.wer([samples.words(c.transcript) for c in clips], heard)
        base = base or spent
        cells = "".join(f"{s:9.2f} ({s / c.seconds:.3f}) {s / b:4.2f}x"
                        for s, c, b in zip(spent, clips, base, strict=True))
        print(f"  {label:36s}{cells}   {wer:5.1%}")
    print("  the ratio is the setting's time over the default's on the same utterance")


def bench_piper(repeat: int) -> None:
    from models.piper_tts import PiperTextToSpeech

    print(f"\nPiper joe-medium, a three-sentence reply, median of {repeat}")
    base: tuple[float, float] | None = None
    for threads, label in PIPER_THREADS:
        tts = PiperTextToSpeech(threads=threads)
        list(tts.synthesize("Warming up."))
        firsts, factors = [], []
        for _ in range(repeat):
            start = time.perf_counter()
            first, audio = 0.0, 0
            for chunk in tts.synthesize(REPLY):
                first = first or time.perf_counter() - start
                audio += chunk.size
            firsts.append(first)
            factors.append((time.perf_counter() - start) / (audio / tts.sample_rate))
        first, factor = statistics.median(firsts), statistics.median(factors)
        base = base or (first, factor)
        print(f"  {label:18s} first audio {first * 1000:5.0f} ms ({first / base[0]:.2f}x), "
              f"real-time factor {factor:.3f} ({factor / base[1]:.2f}x)")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m assistant.bench.speech",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (median)")
    parser.add_argument("--busy", action="store_true",
                        help="measure beside one busy process, as on a desktop at work")
    args = parser.parse_args(argv)
    if not samples.available():
        raise SystemExit(samples.missing_reason())
    np.seterr(all="ignore")
    with one_busy_core() if args.busy else nullcontext():
        if args.busy:
            print("Beside one busy process\n")
        bench_whisper(max(1, args.repeat))
        bench_piper(max(1, args.repeat))


if __name__ == "__main__":
    main()
