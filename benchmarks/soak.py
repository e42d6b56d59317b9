"""Start-up and a long voice session: does Parley start fast, and stay flat over 200 turns?

    python -m benchmarks.soak [--only start|soak] [--turns 200] [--runs 5]

`start`: from launching `parley replay` on one typed turn (`--fast`) to its exit, against
loading the three engines alone in a fresh process, one after the other and side by side,
in the same run. `soak`: a voice conversation of recorded speech (the LibriVox and command
recordings, round and round) fed as fast as Parley takes it, with Parley's voice settings;
it prints resident memory at turn 20 and at the end, the peak, and the time from the end of
each turn's speech to its first audio for the first and the last 50 turns; along the way,
every 20 turns, every turn that grew more than 8 MB and every turn that wrote a summary,
with glibc's heap (in use, and free but kept). Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.voice import CONTEXT, load_engines, p90, peak_mb
from tests.support import speech_samples as samples

LOAD_ONLY = """
import sys, time
from concurrent.futures import ThreadPoolExecutor
from models.embedded import default_llm
from models.llama import LlamaChatModel
from models.piper_tts import PiperTextToSpeech
from models.whisper_stt import WhisperSpeechToText
loads = [lambda: LlamaChatModel(default_llm()), lambda: WhisperSpeechToText(threads=2),
         lambda: PiperTextToSpeech(threads=2)]
if sys.argv[1] == "turn":
    engines = [load() for load in loads]
else:
    with ThreadPoolExecutor(3) as pool:
        engines = [f.result() for f in [pool.submit(load) for load in loads]]
"""


def _wall(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - started


def bench_start(runs: int) -> None:
    parley = str(Path(sys.executable).with_name("parley"))
    with tempfile.TemporaryDirectory() as folder:
        session = Path(folder) / "session.json"
        session.write_text(json.dumps({"turns": [{"text": "What is the capital of France?"}]}))
        measures = [
            ("load the engines, one after the other", [sys.executable, "-c", LOAD_ONLY, "turn"]),
            ("load the engines side by side (3 threads)",
             [sys.executable, "-c", LOAD_ONLY, "side"]),
            ("parley replay, one typed turn, --fast", [parley, "replay", str(session), "--fast",
                                                       "--out", str(Path(folder) / "out.json")]),
        ]
        times: dict[str, list[float]] = {label: [] for label, _ in measures}
        for _ in range(runs):  # interleaved, so a slow moment hits every measure alike
            for label, command in measures:
                times[label].append(_wall(command))
    print(f"\nFrom launch to exit, median of {runs} runs in fresh processes")
    base = statistics.median(times[measures[0][0]])
    for label, values in times.items():
        median = statistics.median(values)
        print(f"  {label:44s} {median:5.2f} s (max {max(values):.2f})  {median / base:5.2f}x")
    print("  (the replay includes loading, the next prompt's beginning, the answer and "
          "its speech)")


def _resident_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _libc():
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _Mallinfo2
        return libc
    except (OSError, AttributeError):
        return None  # not glibc: the heap's figures are not shown


def _heap_mb(libc) -> tuple[float, float]:
    """glibc's heap: (in use, free but kept by the allocator), in MB, over all arenas."""
    info = libc.mallinfo2()
    return (info.uordblks + info.hblkhd) / 2**20, info.fordblks / 2**20


def bench_soak(turns: int) -> None:
    from assistant.session.engines import VOICE_HISTORY_MESSAGES
    from assistant.voice.replay import ReplayTurn, replay
    from benchmarks.voice import ANSWER_TOKENS, replay_session, replay_settings

    clips = samples.all_samples()
    memory: dict[int, float] = {}
    latencies: list[float] = []
    libc = _libc()
    # Parley's voice conversation: local intents, at most 400 messages, the summary
    # written between turns.
    with replay_session(load_engines(), replay_settings()) as session:
        conversation, loop = session.conversation, session.loop
        started = time.perf_counter()
        for number in range(1, turns + 1):
            clip = clips[(number - 1) % len(clips)]
            covered = conversation.summary.covered_through
            [records] = replay(loop, [ReplayTurn(number, audio_path=None, pcm=clip.pcm)],
                               fast=True)
            latencies += [r.timings.first_audio_ms for r in records
                          if r.timings.first_audio_ms is not None]
            memory[number] = _resident_mb()
            grew = memory[number] - memory.get(number - 1, memory[number])
            summarized = conversation.summary.covered_through != covered
            if number % 20 == 0 or grew > 8 or summarized:
                heap = (" (heap: {:.0f} MB in use, {:.0f} MB free)".format(*_heap_mb(libc))
                        if libc is not None else "")
                print(f"  turn {number}: {memory[number]:.0f} MB resident ({grew:+.0f}){heap}"
                      f"{'; summary written' if summarized else ''}; "
                      f"{time.perf_counter() - started:.0f} s so far", flush=True)
    first, last = latencies[:50], latencies[-50:]
    print(f"\nA {turns}-turn voice session ({len(clips)} recordings, round and round; "
          f"context {CONTEXT}, answers up to {ANSWER_TOKENS} tokens), fed as fast as taken")
    at = min(20, turns)
    print(f"  resident memory: {memory[at]:.0f} MB at turn {at}, {memory[turns]:.0f} MB at "
          f"turn {turns} (growth {memory[turns] - memory[at]:+.0f} MB); peak {peak_mb():.0f} MB")
    print(f"  end of the wait to first audio, first 50 turns: median {statistics.median(first):.0f}"
          f" ms, p90 {p90(first):.0f}; last 50: median {statistics.median(last):.0f} ms, p90 "
          f"{p90(last):.0f} ({p90(last) / p90(first):.2f}x)")
    print(f"  messages kept: {len(conversation.history)} (the voice limit is "
          f"{VOICE_HISTORY_MESSAGES}); the summary covers up to "
          f"#{conversation.summary.covered_through}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["start", "soak"])
    parser.add_argument("--turns", type=int, default=200, help="spoken turns in the soak")
    parser.add_argument("--runs", type=int, default=5, help="launches per start measure")
    args = parser.parse_args(argv)
    if args.only in (None, "start"):
        bench_start(args.runs)
    if args.only in (None, "soak"):
        if not samples.available():
            raise SystemExit(samples.missing_reason())
        bench_soak(args.turns)


if __name__ == "__main__":
    main()
