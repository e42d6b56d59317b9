"""Transcribing while the user speaks (`--live-transcript-s`): what it costs, what it shows,
and how much it holds up the pause's own transcript.

    python -m benchmarks.live_transcript [--every 0.5,1,2]

On recordings of human speech (the eleven of `benchmarks.voice`: LibriVox readings and
short commands, and the JFK clip of `benchmarks.turn_taking` when it is cached), with the
real Whisper, each recording is played as one utterance on a timeline of its audio:
`LiveTranscript`'s schedule starts a pass once the utterance has grown by `--every`
seconds since the last one and the worker is free; each pass is run for real and timed
(wall clock and the process's CPU time, Whisper's threads included). At the pause (30 ms
after the last word) the pause's transcript starts once the pass under way, if any, has
finished: that wait is printed, with the passes' CPU per minute of speech, the words shown
before the pause, and whether any word kept while speaking differs from the pause's
transcript. One process, nothing else running; figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import numpy as np

from assistant.voice.live_words import LocalAgreement
from benchmarks.turn_taking import last_voiced_sample
from tests.support import speech_samples as samples

RATE = 16000
PAUSE_SEEN_S = 0.03
"""The segmenter hears the pause at the first silent 30 ms frame."""


def recordings() -> list[tuple[str, np.ndarray]]:
    clips = [(clip.name, clip.pcm) for clip in samples.all_samples()]
    try:
        from benchmarks.qwen_model import cache_dir

        jfk = cache_dir() / "jfk.wav"
        if jfk.is_file():
            import soundfile

            pcm, _ = soundfile.read(str(jfk), dtype="int16")
            clips.append(("jfk", pcm))
    except ImportError:
        pass
    return clips


def timed(stt, pcm: np.ndarray) -> tuple[str, float, float]:
    """The words, wall seconds and CPU seconds of one pass."""
    wall, cpu = time.perf_counter(), time.process_time()
    text = stt.transcribe(pcm).text
    return text, time.perf_counter() - wall, time.process_time() - cpu


def words(text: str) -> list[str]:
    return samples.words(text).split()


def play(stt, pcm: np.ndarray, every_s: float) -> dict:
    """One recording as one utterance, on the timeline of its audio."""
    speech_end = last_voiced_sample(pcm) / RATE
    agreement, shown = LocalAgreement(), None
    free_at, covered, cpu, passes = 0.0, 0.0, 0.0, 0
    while every_s > 0:
        # A pass starts at the first 30 ms frame with `every_s` more speech and a free
        # worker, while the user is still speaking.
        start = max(covered + every_s, free_at)
        start = np.ceil(start / 0.03) * 0.03
        if start >= speech_end:
            break
        text, wall, spent = timed(stt, pcm[: round(start * RATE)])
        shown = agreement.add(text)
        passes, cpu = passes + 1, cpu + spent
        free_at, covered = start + wall, start
    pause = speech_end + PAUSE_SEEN_S
    final, final_s, _ = timed(stt, pcm[: round(speech_end * RATE)])
    kept = words(shown.kept) if shown else []
    return {"seconds": speech_end, "passes": passes, "cpu_s": cpu,
            "held_s": max(0.0, free_at - pause), "final_s": final_s,
            "shown_words": len(words(shown.text)) if shown else 0,
            "final_words": len(words(final)), "kept_differs": kept != words(final)[:len(kept)]}


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", default="0,0.5,1,2",
                        help="seconds of new speech between passes, comma-separated (0: off)")
    args = parser.parse_args(argv)
    from models.whisper_stt import WhisperSpeechToText

    clips = recordings()
    stt = WhisperSpeechToText()
    stt.transcribe(clips[0][1])  # the first call pays one-time set-up
    before_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    minutes = sum(last_voiced_sample(pcm) for _, pcm in clips) / RATE / 60
    print(f"Live transcripts on {len(clips)} recordings ({minutes * 60:.0f} s of speech), "
          f"Whisper tiny.en, {stt.encoder_seconds} s encoder window, 2 threads")
    print(f"{'every':>6s} {'passes/min':>10s} {'CPU s/min':>9s} {'% core':>6s} "
          f"{'pause held med/p90/max ms':>26s} {'final ms med':>12s} {'words shown':>11s} "
          f"{'kept≠final':>10s}")
    for every in (float(value) for value in args.every.split(",")):
        runs = [play(stt, pcm, every) for _, pcm in clips]
        cpu_min = sum(r["cpu_s"] for r in runs) / minutes
        held = [r["held_s"] * 1000 for r in runs]
        shown = sum(r["shown_words"] for r in runs) / max(1, sum(r["final_words"] for r in runs))
        print(f"{every:6.1f} {sum(r['passes'] for r in runs) / minutes:10.1f} {cpu_min:9.1f} "
              f"{cpu_min / 60:6.1%} {statistics.median(held):8.0f} /{p90(held):6.0f} /"
              f"{max(held):6.0f}    {statistics.median(r['final_s'] for r in runs) * 1000:12.0f} "
              f"{shown:11.0%} {sum(r['kept_differs'] for r in runs):10d}")
    after_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory: {before_mb:.0f} MB after Whisper's first call, "
          f"{after_mb:.0f} MB after all passes (+{after_mb - before_mb:.0f} MB)")


if __name__ == "__main__":
    main()
