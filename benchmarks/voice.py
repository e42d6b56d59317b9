"""Voice benchmark on recordings of human speech (Debian's pocketsphinx-testdata).

    python -m benchmarks.voice [--only load|segmenter|stt|tts|latency] [--turns 6]
                              [--busy] [--measures 4,9]

Prints word error rate and speech-to-text real-time factor, Piper's time to first audio
and real-time factor, peak memory with the three embedded models loaded, and the latency
from the end of the user's speech to the first audio of the reply (median, 90th
percentile, and where the time goes) for each latency measure tried, beside a baseline
measured in the same run. Figures are printed, never asserted: this machine is noisy.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from assistant.session.settings import Settings
from benchmarks.busy import one_busy_core
from tests.support import speech_samples as samples

if TYPE_CHECKING:
    from assistant.session.builder import VoiceSession

ROOT = Path(__file__).resolve().parent.parent
"""The checkout: each latency measure runs `python -m benchmarks.voice` from there."""
CONTEXT = 8192
"""Parley's default context: the key/value cache is sized for it, so memory is as in use."""
ANSWER_TOKENS = 48
"""Short answers keep the latency runs quick; latency is to the first audio anyway."""


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(run: Callable[[], object]) -> tuple[object, float]:
    start = time.perf_counter()
    value = run()
    return value, time.perf_counter() - start


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


# -- engines ---------------------------------------------------------------------------------

def load_engines(llm_threads: int | None = None, stt_threads: int = 2, tts_threads: int = 2,
                 encoder_seconds: int | None = 15, report: bool = False,
                 llm_batch_threads: int | None = None, as_before: bool = False):
    """The three embedded engines, with Parley's default threads unless told otherwise;
    `as_before`: with the memory settings Parley had before (f16 keys, the GGUF mapped,
    prompts read 512 tokens a pass, whole sentences to Piper), for a baseline."""
    from models.embedded import default_llm
    from models.llama import LlamaChatModel
    from models.piper_tts import PiperTextToSpeech
    from models.whisper_stt import WhisperSpeechToText

    before = peak_mb()
    before_options = ({"key_cache": "f16", "mmap": True, "batch_size": 512} if as_before
                      else {})
    llm, llm_s = timed(lambda: LlamaChatModel(default_llm(), context_size=CONTEXT,
                                              threads=llm_threads,
                                              batch_threads=llm_batch_threads,
                                              **before_options))
    stt, stt_s = timed(lambda: WhisperSpeechToText(threads=stt_threads,
                                                   encoder_seconds=encoder_seconds))
    tts, tts_s = timed(lambda: PiperTextToSpeech(
        threads=tts_threads,
        **({"max_piece_words": 10_000, "max_piece_phonemes": 100_000} if as_before else {})))
    if report:
        print("Loading the embedded models")
        print(f"  SmolLM2 {llm_s:.2f} s, Whisper tiny.en {stt_s:.2f} s, Piper joe {tts_s:.2f} s "
              f"(together {llm_s + stt_s + tts_s:.2f} s)")
        print(f"  peak resident memory: {before:.0f} MB before, {peak_mb():.0f} MB with all "
              "three loaded")
    return llm, stt, tts


# -- segmenter defaults ------------------------------------------------------------------------

def bench_segmenter() -> None:
    """How the segmenter's settings split real speech: each clip should be one utterance,
    noise none; a shorter end-of-speech wait answers sooner but cuts readers mid-sentence."""
    from audio.segmenter import Segmenter, SegmenterSettings

    rng = np.random.default_rng(0)
    rate = samples.SAMPLE_RATE
    book = samples.librivox()
    # A turn of two or three sentences with the pauses people make between them.
    turns = [samples.joined(book[i:i + 2], gap) for i in range(4) for gap in (0.35, 0.5)]
    turns += [samples.joined(samples.commands()[i:i + 3], 0.45) for i in range(3)]
    lead, tail = np.zeros(rate // 2, dtype=np.int16), np.zeros(rate * 2, dtype=np.int16)
    white = rng.normal(0, 600, rate * 3)
    breath = np.convolve(rng.normal(0, 1, rate * 3), np.ones(24) / 24, "same")
    breath *= 1500 * np.abs(np.sin(np.linspace(0, 3 * np.pi, rate * 3))) / breath.std()
    clicks = np.zeros(rate * 3)
    for start in range(0, rate * 3, rate * 3 // 10):
        clicks[start:start + 80] = rng.normal(0, 8000, 80)  # key presses: 5 ms bursts
    noises = [white.astype(np.int16), breath.astype(np.int16), clicks.astype(np.int16)]
    print(f"\nSegmenter on {len(turns)} spoken turns of 2–3 sentences with 0.35–0.5 s pauses "
          "(each should stay one utterance) and 3 noise clips: white noise, breathing, key "
          "clicks (none should become one)")
    print(f"  {'setting':34s} {'split':>6s} {'missed':>7s} {'noise':>6s}")
    base = SegmenterSettings()
    trials = [("defaults (700 ms end, aggr. 2)", base)]
    trials += [(f"end silence {ms} ms", replace(base, end_silence_ms=ms)) for ms in (300, 500, 900)]
    trials += [(f"aggressiveness {a}", replace(base, aggressiveness=a)) for a in (0, 1, 3)]
    trials += [("min speech 100 ms", replace(base, min_speech_ms=100))]
    for label, settings in trials:
        split = missed = noise = 0
        for turn in turns:
            count = sum(1 for e in Segmenter(settings).feed(np.concatenate([lead, turn.pcm, tail]))
                        if type(e).__name__ == "Utterance")
            split += count > 1
            missed += count == 0
        for pcm in noises:
            noise += sum(1 for e in Segmenter(settings).feed(pcm)
                         if type(e).__name__ == "Utterance")
        print(f"  {label:34s} {split:6d} {missed:7d} {noise:6d}")


# -- speech-to-text ----------------------------------------------------------------------------

def bench_stt() -> None:
    import jiwer

    from models.whisper_stt import WhisperSpeechToText

    clips = samples.all_samples()
    seconds = sum(c.seconds for c in clips)
    base = None
    print(f"\nSpeech-to-text on {len(clips)} recordings of human speech ({seconds:.1f} s; "
          "LibriVox readings and short commands)")
    full = {"encoder_seconds": None}
    for label, options in (("2 threads, full 30 s window", {"threads": 2, **full}),
                           ("1 thread, full window", {"threads": 1, **full}),
                           ("2 threads, fixed 5 s window", {"threads": 2, "chunk_length": 5,
                                                            **full}),
                           ("2 threads, 15 s encoder (default)", {"threads": 2,
                                                                  "encoder_seconds": 15}),
                           ("2 threads, 8 s encoder window", {"threads": 2,
                                                              "encoder_seconds": 8})):
        stt = WhisperSpeechToText(**options)
        stt.transcribe(clips[0].pcm)  # the first call pays one-time set-up
        heard, factors = [], []
        for clip in clips:
            transcript, spent = timed(lambda clip=clip, stt=stt: stt.transcribe(clip.pcm))
            heard.append(samples.words(transcript.text))
            factors.append(spent / clip.seconds)
        wer = jiwer.wer([samples.words(c.transcript) for c in clips], heard)
        factor = statistics.median(factors)
        base = base or factor
        print(f"  {label:32s} WER {wer:6.1%}   real-time factor median "
              f"{factor:.3f} (max {max(factors):.3f}; {base / factor:.1f}x the default's speed)")


# -- text-to-speech ----------------------------------------------------------------------------

SENTENCES = [
    "It is a quarter past three in the afternoon.",
    "The billing service listens on port eight one zero one.",
    "Sure, I can help with that.",
    "Your meeting with Oriane moved to Friday after the standup, in the small room.",
    "Six times seven is forty two.",
]


def bench_tts() -> None:
    from models.piper_tts import PiperTextToSpeech

    print("\nText-to-speech (Piper joe-medium), per sentence")
    for threads in (1, 2):
        tts = PiperTextToSpeech(threads=threads)
        list(tts.synthesize("Warming up."))
        firsts, factors = [], []
        for sentence in SENTENCES:
            start = time.perf_counter()
            audio = 0.0
            for chunk in tts.synthesize(sentence):
                if audio == 0:
                    firsts.append(time.perf_counter() - start)
                audio += chunk.seconds
            factors.append((time.perf_counter() - start) / audio)
        print(f"  {threads} thread{'s' if threads > 1 else ' '}: first audio median "
              f"{statistics.median(firsts) * 1000:.0f} ms, real-time factor median "
              f"{statistics.median(factors):.3f}")


# -- latency -----------------------------------------------------------------------------------

@dataclass
class LatencyRun:
    label: str
    latencies: list[float]
    parts: dict[str, float]
    processed_tokens: float


def replay_settings(answer_tokens: int = ANSWER_TOKENS, local_intents: bool = True,
                    **model) -> Settings:
    """Parley's voice settings for a benchmark's replay, with short answers (`model`: other
    ModelSettings). Turns end after the fixed silence: the turn model's own wait would move
    every latency here, and is measured on its own in `benchmarks.turn_taking`."""
    from assistant.session.settings import ListeningSettings, ModelSettings

    return Settings(model=ModelSettings(answer_tokens=answer_tokens,
                                        no_local_intents=not local_intents, **model),
                    listening=ListeningSettings(end_of_turn="silence"))


def warn(line: str) -> None:
    print(f"  warning: {line}", file=sys.stderr)


@contextmanager
def replay_session(engines, settings: Settings, changes: dict | None = None,
                   speaker=None, **building) -> Iterator[VoiceSession]:
    """A voice session built as Parley builds one, on `engines` loaded once, for a
    benchmark's replay; `changes`: to the loop's VoiceSettings; `building`: the builder's
    other keywords (`segmenter`, `idle_summaries`). Speech is fed at real-time pace, as a
    microphone delivers it; the speaker (unless given) plays instantly so a run takes
    minutes, which does not change the time to first audio."""
    from assistant.session.builder import voice_session
    from assistant.session.engines import Loaded
    from audio.memory_out import MemorySpeaker

    played = speaker or MemorySpeaker(realtime=False, keep_chunks=False)
    with voice_session(settings, lambda far_end: played, warn, loaded=Loaded(*engines),
                       adjust=lambda chosen, _: replace(chosen, **(changes or {})),
                       **building) as session:
        yield session


def run_latency(label: str, engines, changes: dict, turns: int) -> LatencyRun:
    from assistant.events import ReplyDone
    from assistant.voice.replay import ReplayTurn, replay
    from assistant.voice.turns import Timing

    clips = (samples.librivox() + samples.commands())[:turns]
    session = [ReplayTurn(n, audio_path=None, pcm=c.pcm) for n, c in enumerate(clips, 1)]
    # The measures are the model's: no request here is answered by a local intent.
    with replay_session(engines, replay_settings(local_intents=False), changes) as built:
        produced = replay(built.loop, session, fast=False)
    records = [r for group in produced for r in group if r.timings.latency_ms is not None]
    latencies = [r.timings.latency_ms or 0.0 for r in records]
    parts = {timing.value: statistics.median(r.timings.get(timing) or 0.0 for r in records)
             for timing in (Timing.END_OF_SPEECH, Timing.STT, Timing.FIRST_TOKEN,
                            Timing.FIRST_SENTENCE, Timing.FIRST_AUDIO)}
    processed = [e.event.processed_tokens for r in records for e in r.events
                 if isinstance(e.event, ReplyDone)]
    return LatencyRun(label, latencies, parts,
                      statistics.median(processed) if processed else 0.0)


ATTEMPTS: list[tuple[str, dict, dict]] = [
    # (label, VoiceSettings changes from the plain baseline or None for Parley's defaults,
    #  engine threads and options)
    ("baseline: none of the measures", {}, {}),
    ("+ transcribe during the end-of-speech wait", {"speculative_stt": True}, {}),
    ("+ prepare the prompt prefix between turns",
     {"speculative_stt": True, "prefill": True}, {}),
    ("+ speak the first clause", {"speculative_stt": True, "prefill": True,
                                  "first_clause_words": 4}, {}),
    ("+ pause the model for the first audio", {"speculative_stt": True, "prefill": True,
                                               "first_clause_words": 4,
                                               "first_audio_first": True}, {}),
    ("default, Whisper's full 30 s encoder window", None, {"encoder_seconds": None}),
    ("default, Piper 1 thread", None, {"tts_threads": 1}),
    ("default, Whisper 1 / Piper 1 thread", None, {"stt_threads": 1, "tts_threads": 1}),
    ("default, 1 thread for each engine", None,
     {"llm_threads": 1, "llm_batch_threads": 1, "stt_threads": 1, "tts_threads": 1}),
    ("default, llama.cpp generating on 2 threads", None, {"llm_threads": 2}),
    ("+ answer at the first pause, held (default)", None, {}),
    ("default, engines' memory settings as before", None, {"as_before": True}),
]


def run_attempt(number: int, turns: int) -> dict:
    label, changes, engine_options = ATTEMPTS[number]
    plain = {"speculative_stt": False, "prefill": False, "first_clause_words": 0,
             "first_audio_first": False, "speculative_reply": False}
    run = run_latency(label, load_engines(**engine_options),
                      {} if changes is None else {**plain, **changes}, turns)
    return {"label": label, "latencies": run.latencies, "parts": run.parts,
            "processed": run.processed_tokens, "peak_mb": peak_mb()}


DEFAULT_MEASURE = 10
BUSY_MEASURES = [DEFAULT_MEASURE, 6, 7, 8, 9]
"""Beside a busy process only the thread choices are compared (the rest is not affected)."""


def bench_latency(turns: int, busy: bool = False, measures: list[int] | None = None) -> None:
    import json
    import subprocess
    import sys
    from contextlib import nullcontext

    if measures is None:
        measures = BUSY_MEASURES if busy else list(range(len(ATTEMPTS)))
    beside = ", beside one busy process" if busy else ""
    print(f"\nEnd of speech to first audio, {turns} spoken turns fed at real-time pace "
          f"(answers up to {ANSWER_TOKENS} tokens){beside}; each measure in a fresh process")
    print(f"  {'measure':44s} {'median':>7s} {'p90':>6s} {'ratio':>6s}   eos / stt / first "
          "token / first sentence / first audio (median ms); prompt tokens processed; peak MB")
    base = None
    for number in measures:
        with one_busy_core() if busy else nullcontext():
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.voice", "--attempt", str(number),
                 "--turns", str(turns)], capture_output=True, text=True, check=False,
                cwd=ROOT)
        if done.returncode != 0:
            print(f"  {ATTEMPTS[number][0]:44s} failed: {done.stderr.strip()[-300:]}")
            continue
        run = json.loads(done.stdout.strip().splitlines()[-1])
        if not run["latencies"]:
            print(f"  {run['label']:44s} no replies were spoken")
            continue
        median = statistics.median(run["latencies"])
        base = base or median
        parts = " / ".join(f"{value:.0f}" for value in run["parts"].values())
        print(f"  {run['label']:44s} {median:7.0f} {p90(run['latencies']):6.0f} "
              f"{median / base:6.2f}   {parts}; {run['processed']:.0f}; {run['peak_mb']:.0f}")
    print("  latency = end-of-speech wait + first audio. stt, first token and first audio "
          "are counted from the end of the wait; a negative stt means the transcript was "
          "ready before the wait ended.")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.voice",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["load", "segmenter", "stt", "tts", "latency"])
    parser.add_argument("--turns", type=int, default=6, help="spoken turns per latency run")
    parser.add_argument("--busy", action="store_true",
                        help="measure latency beside one busy process (a desktop at work): "
                             "the default against the other thread choices")
    parser.add_argument("--measures", help="latency measures to run, by number from 0, "
                                           "comma-separated (default: all)")
    parser.add_argument("--attempt", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.attempt is not None:  # one latency measure, in its own process
        import json

        print(json.dumps(run_attempt(args.attempt, args.turns)))
        return
    if not samples.available():
        raise SystemExit(samples.missing_reason())
    np.seterr(all="ignore")
    if args.only in (None, "load"):
        load_engines(report=True)
    if args.only in (None, "segmenter"):
        bench_segmenter()
    if args.only in (None, "stt"):
        bench_stt()
    if args.only in (None, "tts"):
        bench_tts()
    if args.only in (None, "latency"):
        measures = [int(n) for n in args.measures.split(",")] if args.measures else None
        bench_latency(args.turns, args.busy, measures)


if __name__ == "__main__":
    main()
