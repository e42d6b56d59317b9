"""Turn-taking: the turn model (`--end-of-turn smart`) against a fixed silence, in one run.

    python -m benchmarks.turn_taking [--only latency|paused|cost] [--no-busy]

- latency: end of the user's speech to the reply's first audio, on short spoken requests
  (people, Piper, espeak-ng), quiet and beside one busy process;
- paused: recordings with pauses between and inside sentences, replayed in half duplex with
  the reply playing in real time, quiet and beside one busy process: the turns Parley
  heard, where it cut them, the word error rate of it all;
- cost: the turn model's time per call and per minute of speech, and the memory it adds.

Each measure runs in a fresh process. Figures are printed, never asserted. """

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from assistant.events import TurnJudged
from assistant.voice.turns import TurnSource
from benchmarks.busy import one_busy_core
from benchmarks.turn_trace import FastForwardSpeaker, LoopTrace
from benchmarks.voice import (
    ANSWER_TOKENS,
    load_engines,
    p90,
    peak_mb,
    replay_session,
    replay_settings,
)
from tests.support import speech_samples as samples

ROOT = Path(__file__).resolve().parent.parent
MODES = {"smart": "smart (turn model + words, turns go on)",
         "smart-audio": "turn model alone (before)",
         "silence": "silence 720 ms",
         "silence-1500": "silence 1,500 ms"}
PARTS = ("end_of_speech_ms", "stt_ms", "first_token_ms", "first_sentence_ms", "first_audio_ms")


# -- the loop under test ------------------------------------------------------------------------

def make_segmenter(mode: str, call_times: list[float]):
    """`parley voice --end-of-turn MODE`'s segmenter (silence-1500: a 1,500 ms wait); the turn
    model's calls timed into `call_times`."""
    from audio.segmenter import Segmenter, SegmenterSettings
    from audio.turn_policy import TurnPolicy, TurnSettings

    if mode == "silence":
        return Segmenter(SegmenterSettings())
    if mode == "silence-1500":
        return Segmenter(SegmenterSettings(end_silence_ms=1500))
    from models.smart_turn import SmartTurn

    model = SmartTurn()

    def score(pcm: np.ndarray) -> float:
        started = time.perf_counter()
        value = model.score(pcm)
        call_times.append(time.perf_counter() - started)
        return value

    return Segmenter(SegmenterSettings(), turn=TurnPolicy(score, TurnSettings()))


def voice_changes(mode: str) -> dict:
    """`smart` is Parley's default; the others as before words counted and turns went on."""
    return {"turn_words": mode == "smart", "continue_turns": mode == "smart"}


def built_session(engines, mode: str, call_times: list[float], speaker):
    """Parley's voice session (local intents, timers) on the embedded engines, with short
    answers (latency is to the first audio anyway), listening with `mode`'s segmenter."""
    return replay_session(engines, replay_settings(), voice_changes(mode), speaker,
                          segmenter=make_segmenter(mode, call_times))


def ready(loop) -> None:
    """Wait for a fresh loop's first work (its system prompt read ahead), as Parley does."""
    if not loop.wait_idle(120):
        raise SystemExit("the voice loop was not ready after 120 s")


# -- latency ----------------------------------------------------------------------------------

def run_latency(mode: str) -> dict:
    from assistant.voice.replay import ReplayTurn, replay
    from audio.memory_out import MemorySpeaker
    from benchmarks.turn_recordings import short_requests

    engines = load_engines()
    requests = short_requests(engines[2])
    calls: list[float] = []
    # As benchmarks.voice: the speaker plays instantly (each request waits for the reply
    # before it anyway), which does not change the time to the first audio.
    session = [ReplayTurn(n, pcm=r.pcm) for n, r in enumerate(requests, 1)]
    with built_session(engines, mode, calls,
                       MemorySpeaker(realtime=False, keep_chunks=False)) as built:
        trace = LoopTrace().attach(built.loop)
        ready(built.loop)
        produced = replay(built.loop, session, fast=False)
    turns = []
    for request, records in zip(requests, produced, strict=True):
        heard = []
        for record in (r for r in records if r.source is TurnSource.AUDIO and not r.continued):
            end = trace.end_before(record.started)
            first = record.timings.first_audio_ms
            ear = (None if first is None or end is None else
                   round((record.started + first / 1000 - end.spoken_at) * 1000, 1))
            heard.append({"heard": record.heard, "timings": record.timings.as_json(),
                          "ear_ms": ear,
                          "scores": [e.event.score for e in record.events
                                     if isinstance(e.event, TurnJudged)]})
        turns.append({"name": request.name, "records": heard})
    return {"turns": turns, "peak_mb": peak_mb(), "calls": calls}


def print_latency(runs: dict[str, dict], beside: str) -> None:
    print(f"\nEnd of speech to first audio, {len(runs['smart']['turns'])} short spoken requests "
          f"fed at real-time pace (answers up to {ANSWER_TOKENS} tokens){beside}; each mode in "
          "a fresh process")
    print(f"  {'end of turn':38s} {'median':>7s} {'p90':>6s} {'ear med':>8s} {'ear p90':>8s} "
          f"{'turns':>6s}   eos / stt / first token / first sentence / first audio (median ms)"
          "; peak MB")
    for mode, run in runs.items():
        records = [r for turn in run["turns"] for r in turn["records"]
                   if r["timings"].get("latency_ms") is not None]
        if not records:
            print(f"  {MODES[mode]:38s} no replies were spoken")
            continue
        latency = [r["timings"]["latency_ms"] for r in records]
        ear = [r["ear_ms"] for r in records if r["ear_ms"] is not None]
        parts = " / ".join(f"{statistics.median(r['timings'].get(k) or 0.0 for r in records):.0f}"
                           for k in PARTS)
        heard = sum(len(turn["records"]) for turn in run["turns"])
        print(f"  {MODES[mode]:38s} {statistics.median(latency):7.0f} {p90(latency):6.0f} "
              f"{statistics.median(ear):8.0f} {p90(ear):8.0f} {heard:6d}   {parts}; "
              f"{run['peak_mb']:.0f}")
    base = [r["timings"]["latency_ms"] for turn in runs["silence"]["turns"]
            for r in turn["records"] if r["timings"].get("latency_ms") is not None]
    if base:
        for mode in (m for m in runs if m != "silence"):
            mine = [r["timings"]["latency_ms"] for turn in runs[mode]["turns"]
                    for r in turn["records"] if r["timings"].get("latency_ms") is not None]
            if mine:
                print(f"  {MODES[mode]} against the fixed 720 ms wait, same run: median "
                      f"{statistics.median(mine) / statistics.median(base):.2f}x, p90 "
                      f"{p90(mine) / p90(base):.2f}x (goal: 0.625x and 0.72x)")
    print("  latency = the end-of-speech wait (eos, counted in audio samples) + first audio "
          "(from the turn's start); 'ear' is the same by the clock, from the moment the last "
          "speech was fed to the first audio, so it includes the turn model's own time.")
    print("  Per request, smart: turn model scores at its pauses -> latency (ms); silence "
          "720 ms: latency")
    for smart, silence in zip(runs["smart"]["turns"], runs["silence"]["turns"], strict=True):
        def show(turn, scores: bool) -> str:
            return " + ".join(
                (f"[{', '.join(f'{s:.2f}' for s in r['scores'])}] " if scores else "")
                + f"{r['timings'].get('latency_ms') or float('nan'):.0f}"
                for r in turn["records"]) or "no turn"
        print(f"    {smart['name'][:58]:58s} {show(smart, True):>28s} | {show(silence, False)}")


# -- paused speech ----------------------------------------------------------------------------

def run_paused(mode: str) -> dict:
    import jiwer

    from assistant.voice.replay import ReplayTurn, replay
    from benchmarks.turn_recordings import paused_recordings

    engines = load_engines()
    recordings = paused_recordings(engines[2])
    calls: list[float] = []
    out = []
    for recording in recordings:
        speaker = FastForwardSpeaker(realtime=True, keep_chunks=False)
        before = len(calls)
        with built_session(engines, mode, calls, speaker) as built:
            loop = built.loop
            trace = LoopTrace().attach(loop)
            end_of_input = loop.end_of_input

            def finished(end_of_input=end_of_input, speaker=speaker) -> None:
                speaker.finish()  # the whole recording has been heard (or not) by now
                end_of_input()

            loop.end_of_input = finished
            ready(loop)
            (records,) = replay(loop, [ReplayTurn(1, pcm=recording.pcm)], fast=False)
        # A turn the user went on with is heard again, whole, in the next record.
        heard = [r.heard for r in records if r.source is TurnSource.AUDIO and r.heard
                 and not r.continued]
        last_voice = last_voiced_sample(recording.pcm)
        ends = []
        for end in trace.ends:
            pause = recording.pause_at(end.recording_sample)
            kind = ("inside" if pause.inside else "between") if pause is not None else (
                "end" if end.recording_sample >= last_voice - 8000 else "elsewhere")
            ends.append((round(end.recording_sample / 16000, 2), kind))
        out.append({
            "name": recording.name, "seconds": recording.seconds, "turns": len(heard),
            "pauses": [(p.start / 16000, p.seconds, p.inside) for p in recording.pauses],
            "heard": heard, "ends": ends,
            "wer": jiwer.wer(recording.transcript, samples.words(" ".join(heard)) or "-"),
            "words": len(recording.transcript.split()),
            "not_listened_s": trace.not_listened_s(last_voice),
            "checks": [(round(c.recording_sample / 16000, 2), c.score, c.finished)
                       for c in trace.checks],
            "calls": len(calls) - before})
    return {"recordings": out, "call_s": statistics.median(calls) if calls else None}


def last_voiced_sample(pcm: np.ndarray) -> int:
    """The end of the last 10 ms louder than 2% of the loudest (the recording's last word)."""
    frames = pcm[: len(pcm) // 160 * 160].astype(np.float64).reshape(-1, 160)
    rms = np.sqrt((frames ** 2).mean(axis=1))
    loud = np.flatnonzero(rms > 0.02 * rms.max())
    return int((loud[-1] + 1) * 160) if len(loud) else len(pcm)


def print_paused(runs: dict[str, dict], beside: str = "") -> None:
    first = runs[next(iter(runs))]["recordings"]
    seconds = sum(r["seconds"] for r in first)
    print(f"\nPaused speech{beside}: {len(first)} recordings ({seconds:.0f} s) replayed "
          "through the voice loop in half duplex, the replies playing in real time (words "
          "said while Parley talks are not heard); each mode in a fresh process")
    print(f"  {'end of turn':38s} {'turns':>6s} {'WER':>6s} {'cut inside':>11s} "
          f"{'cut between':>12s} {'not heard':>10s}")
    for mode, run in runs.items():
        recordings = run["recordings"]
        errors = sum(r["wer"] * r["words"] for r in recordings)
        words = sum(r["words"] for r in recordings)
        inside = sum(kind in ("inside", "elsewhere") for r in recordings for _, kind in r["ends"])
        between = sum(kind == "between" for r in recordings for _, kind in r["ends"])
        deaf = sum(r["not_listened_s"] for r in recordings)
        print(f"  {MODES[mode]:38s} {sum(r['turns'] for r in recordings):6d} "
              f"{errors / words:6.1%} {inside:11d} {between:12d} {deaf:9.1f}s")
    print(f"  (one turn per recording is right: {len(first)}. 'cut inside': utterances ended at "
          "a pause inside a sentence; 'not heard': seconds of the recordings' speech span "
          "Parley did not listen to, talking or in its echo tail.)")
    for index, recording in enumerate(first):
        pauses = ", ".join(f"{p[0]:.1f} s ({p[1]:.1f} s{', inside' if p[2] else ''})"
                           for p in recording["pauses"])
        print(f"  {recording['name'][:80]} ({recording['seconds']:.1f} s; pauses at {pauses})")
        for mode, run in runs.items():
            r = run["recordings"][index]
            cuts = ", ".join(f"{at:.1f} s {kind}" for at, kind in r["ends"])
            scores = ("; turn model at " + ", ".join(f"{at:.1f} s {score:.2f}"
                                                     for at, score, _ in r["checks"])
                      if r["checks"] else "")
            print(f"    {mode:13s} {r['turns']} turn(s), WER {r['wer']:5.1%}, "
                  f"{r['not_listened_s']:.1f} s not heard; ends at {cuts}{scores}")
            print(f"    {'':13s} heard: {' | '.join(r['heard'])[:160]}")


# -- cost ---------------------------------------------------------------------------------------

def memory_kb(field: str) -> int:
    """A line of /proc/self/status: VmRSS (resident now) or VmHWM (its peak)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def run_cost(calls: int = 50) -> dict:
    from models.smart_turn import WINDOW_SECONDS, SmartTurn

    # As in Parley: the three engines loaded and used once (Piper already brings
    # onnxruntime, Whisper the feature extractor), then the turn model.
    _, stt, tts = load_engines()
    speech = np.concatenate([s.pcm for s in samples.all_samples()])
    stt.transcribe(speech[: 16000 * 5])
    list(tts.synthesize("The engines are warm now."))
    before = memory_kb("VmRSS"), memory_kb("VmHWM")
    started = time.perf_counter()
    model = SmartTurn()
    load_s = time.perf_counter() - started
    window = 16000 * WINDOW_SECONDS
    first_s = timed_score(model, speech[:window])
    times = []
    for n in range(calls):  # 8 s windows ending all over the recordings
        end = window + n * (len(speech) - window) // calls
        times.append(timed_score(model, speech[end - window:end]))
    after = memory_kb("VmRSS"), memory_kb("VmHWM")
    return {"load_s": load_s, "first_s": first_s, "times": times,
            "rss_mb": [before[0] / 1024, after[0] / 1024],
            "peak_mb": [before[1] / 1024, after[1] / 1024]}


def timed_score(model, pcm: np.ndarray) -> float:
    started = time.perf_counter()
    model.score(pcm)
    return time.perf_counter() - started


def print_cost(cost: dict, paused: dict | None) -> None:
    times = [t * 1000 for t in cost["times"]]
    print(f"\nThe turn model's cost (Smart Turn v3.2, one thread; {len(times)} calls on 8 s "
          "windows of recorded speech, beside the three engines loaded as in Parley)")
    print(f"  per call: median {statistics.median(times):.1f} ms, p90 {p90(times):.1f} ms, "
          f"max {max(times):.1f} ms (first call {cost['first_s'] * 1000:.0f} ms; loading "
          f"{cost['load_s'] * 1000:.0f} ms)")
    rss, peak = cost["rss_mb"], cost["peak_mb"]
    print(f"  memory: resident {rss[0]:.0f} -> {rss[1]:.0f} MB (+{rss[1] - rss[0]:.0f}), "
          f"peak {peak[0]:.0f} -> {peak[1]:.0f} MB (+{peak[1] - peak[0]:.0f})")
    if paused is None:
        return
    recordings = paused["recordings"]
    minutes = sum(r["seconds"] for r in recordings) / 60
    made = sum(r["calls"] for r in recordings)
    per_minute = made / minutes
    ms = per_minute * statistics.median(times)
    print(f"  on the paused recordings: {made} calls in {minutes * 60:.0f} s of audio, "
          f"{per_minute:.1f} calls a minute; x {statistics.median(times):.1f} ms = "
          f"{ms:.0f} ms of one core per minute of speech ({ms / 600:.2f}% of a core); in the "
          f"voice loop a call took {paused['call_s'] * 1000:.1f} ms (median)")


# -- running it --------------------------------------------------------------------------------

def attempt(kind: str, mode: str = "", busy: bool = False) -> dict | None:
    """One measure in a fresh process (models' threads and memory do not carry over)."""
    with one_busy_core() if busy else nullcontext():
        done = subprocess.run([sys.executable, "-m", "benchmarks.turn_taking", "--attempt",
                               f"{kind}:{mode}"], capture_output=True, text=True,
                              check=False, cwd=ROOT)
    if done.returncode != 0:
        print(f"  {kind} {mode} failed: {done.stderr.strip()[-600:]}")
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.turn_taking",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["latency", "paused", "cost"])
    parser.add_argument("--no-busy", action="store_true",
                        help="skip the runs beside one busy process")
    parser.add_argument("--attempt", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    np.seterr(all="ignore")
    if args.attempt is not None:
        kind, _, mode = args.attempt.partition(":")
        run = {"latency": run_latency, "paused": run_paused}.get(kind)
        print(json.dumps(run(mode) if run is not None else run_cost()))
        return
    if not samples.available():
        raise SystemExit(samples.missing_reason())
    started = time.monotonic()
    if args.only in (None, "latency"):
        for busy in (False,) if args.no_busy else (False, True):
            runs = {mode: attempt("latency", mode, busy)
                    for mode in ("smart", "smart-audio", "silence")}
            if all(runs.values()):
                print_latency(runs, ", beside one busy process" if busy else "")
    paused = None
    if args.only in (None, "paused"):
        for busy in (False,) if args.no_busy else (False, True):
            runs = {mode: attempt("paused", mode, busy) for mode in MODES}
            if all(runs.values()):
                print_paused(runs, ", beside one busy process" if busy else "")
                paused = paused or runs["smart"]
    if args.only in (None, "cost"):
        cost = attempt("cost")
        if cost is not None:
            print_cost(cost, paused)
    print(f"\n({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
