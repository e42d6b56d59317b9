"""`python -m benchmarks.summaries`: does a reply still wait for the summary?

    python -m benchmarks.summaries [--turns 60] [--ctx 2048] [--typed]
                                   [--only inline|idle]

A long voice conversation through the real voice loop and the embedded engines: each user
turn said by the Piper voice (made in memory, never written to disk) and heard by
Whisper, fed at real-time pace after a silence of 3–5 s following Parley's reply, in a
small context so that several summaries are due. The same session runs twice in one run:
with the summary written inside the reply that needs it (Parley before), and with it
written in the silence between turns (Parley's default). Prints, for each: the summary
time seen inside replies (total, count, longest), end of speech to first audio (median,
90th percentile, longest), and the summaries written, cut short by the user and failed.
`--typed` types the turns into the loop instead (less idle time: the silence only).
Figures are printed, never asserted: this machine is noisy.
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time
from dataclasses import dataclass, field

from benchmarks.voice import p90

ANSWER_TOKENS = 64
GAP_S = (3.0, 5.0)
"""Silence between a reply and the next turn, drawn per turn."""
SUMMARY_ENDS = ("summary", "summary-failed", "summary-cancelled")

_ASKS = ("Tell me one thing about {}.", "What is {} good for?", "How do I start with {}?")
_TOPICS = (
    "gardening", "sourdough bread", "chess", "the violin", "rock climbing", "bird watching",
    "knitting", "astronomy", "sailing", "pottery", "jazz", "running", "photography",
    "beekeeping", "watercolor painting", "camping", "origami", "cycling", "yoga", "woodworking",
)


def user_turns(count: int) -> list[str]:
    """`count` short requests, each about something new, so the conversation only grows."""
    return [_ASKS[n // len(_TOPICS) % len(_ASKS)].format(_TOPICS[n % len(_TOPICS)])
            for n in range(count)]


@dataclass
class Run:
    label: str
    inside_ms: list[float] = field(default_factory=list)
    """Summary time inside each reply that had some (inline, or waiting for one to stop)."""
    latencies: list[float] = field(default_factory=list)
    written: int = 0
    cancelled: int = 0
    failed: int = 0
    idle_summary_s: float = 0.0
    """Time spent writing summaries between turns (nobody waited for it)."""
    prepare_waits_ms: list[float] = field(default_factory=list)
    seconds: float = 0.0
    heard: int = 0
    slowest: list[tuple[float, str]] = field(default_factory=list)
    """The slowest replies' latency, and what happened in them."""
    written_at: list[str] = field(default_factory=list)
    """Where each summary was written: in reply N, or after it."""


def durations(events: list[dict]) -> list[tuple[float, str]]:
    """(ms, how it ended) of each summary in `events`, from its start to its end."""
    found, started = [], None
    for event in events:
        if event["type"] == "summary-start":
            started = event["ms"]
        elif event["type"] in SUMMARY_ENDS and started is not None:
            found.append((event["ms"] - started, event["type"]))
            started = None
    return found


def measure(label: str, turns: list[dict]) -> Run:
    run = Run(label)
    before: list[dict] = []
    """The work after the last reply (a `wait_s` turn between them has none)."""
    for number, turn in enumerate(turns, start=1):
        notes = []
        user_turn = (number + 1) // 2  # the session alternates turns and silences
        for ms, end in durations(turn["events"]):
            run.inside_ms.append(ms)
            run.written += end == "summary"
            run.failed += end == "summary-failed"
            notes.append(f"a summary inside it, {ms / 1000:.1f} s")
            run.written_at.append(f"in {user_turn}")
        waited = turn["timings"].get("summary_wait_ms")
        if waited is not None:  # the reply waited for a summary between turns to stop
            run.inside_ms.append(waited)
            notes.append(f"waited {waited:.0f} ms for a summary to stop")
        waited = turn["timings"].get("prepare_wait_ms")
        if waited is not None:
            run.prepare_waits_ms.append(waited)
            notes.append(f"waited {waited:.0f} ms for the prompt's preparation")
        if before and before[-1]["type"] == "summary-cancelled":
            notes.append("the summary before it was cut short")
        for ms, end in durations(turn["idle"]):
            run.idle_summary_s += ms / 1000
            run.written += end == "summary"
            run.failed += end == "summary-failed"
            run.cancelled += end == "summary-cancelled"
            run.written_at.append(f"after {user_turn}" + ("" if end == "summary" else
                                                          f" ({end.split('-')[-1]})"))
        latency = turn["timings"].get("latency_ms")
        if latency is not None:
            run.latencies.append(latency)
            processed = [e["processed_tokens"] for e in turn["events"]
                         if e["type"] == "reply-done"]
            notes.append(f"{sum(processed)} prompt tokens read")
            run.slowest.append((latency, f"turn {user_turn}: " + "; ".join(notes)))
        run.heard += bool(turn["heard"])
        if turn["events"]:
            before = turn["idle"]
    run.slowest = sorted(run.slowest, reverse=True)[:3]
    return run


def run_session(label: str, engines, texts: list[str], idle: bool, typed: bool,
                ctx: int) -> Run:
    from assistant.voice.replay import ReplayTurn, replay, session_json
    from benchmarks.voice import replay_session, replay_settings
    from tests.support.spoken import TAIL_S, spoken_clip

    tts = engines[2]
    gaps = random.Random(7)
    session: list[ReplayTurn] = []
    for number, text in enumerate(texts):
        if number:
            session.append(ReplayTurn(len(session) + 1,
                                      wait_s=round(gaps.uniform(*GAP_S), 1)))
        if typed:
            session.append(ReplayTurn(len(session) + 1, text=text))
        else:  # replay adds the silence that ends the turn
            clip = spoken_clip(tts, text)[:-int(TAIL_S * 16000)]
            session.append(ReplayTurn(len(session) + 1, pcm=clip))
    done = threading.Event()

    def progress(loop) -> None:
        started, shown = time.monotonic(), 0
        while not done.wait(2.0):
            heard = sum(1 for r in loop.records if r.heard)
            if heard >= shown + 10:
                shown = heard - heard % 10
                print(f"    {label}: turn {shown} of {len(texts)} "
                      f"({time.monotonic() - started:.0f} s)", flush=True)

    # Parley's voice session (on the embedded model it sees no earlier exchange word for
    # word, and keeps 400 messages), the summary written between turns or, for the
    # "before" row, inside the reply. The speaker plays at once: what is measured is the
    # silence after the reply.
    with replay_session(engines, replay_settings(ANSWER_TOKENS, ctx=ctx),
                        idle_summaries=idle) as built:
        threading.Thread(target=progress, args=(built.loop,), daemon=True).start()
        started = time.monotonic()
        try:
            produced = replay(built.loop, session, fast=False, timeout_s=600)
        finally:
            done.set()
    run = measure(label, session_json(built.loop, session, produced)["turns"])
    run.seconds = time.monotonic() - started
    return run


def show(runs: list[Run], texts: list[str], ctx: int, typed: bool) -> None:
    how = "typed" if typed else "spoken (Piper voice, heard by Whisper)"
    print(f"\n{len(texts)} {how} turns, {GAP_S[0]:.0f}–{GAP_S[1]:.0f} s of silence after each "
          f"reply, context {ctx:,} tokens, answers up to {ANSWER_TOKENS} tokens")
    print(f"  {'summary written':34s} {'inside replies: total':>22s} {'count':>6s} "
          f"{'max':>7s}   {'latency p50':>11s} {'p90':>7s} {'max':>7s}   "
          f"written / cut short / failed   run")
    base = None
    for run in runs:
        inside = sum(run.inside_ms)
        p50 = statistics.median(run.latencies) if run.latencies else 0.0
        base = base or p50
        ratio = f" ({p50 / base:.2f}x)" if base and run is not runs[0] else ""
        print(f"  {run.label:34s} {inside / 1000:20.1f} s {len(run.inside_ms):6d} "
              f"{max(run.inside_ms, default=0) / 1000:6.1f}s   {p50:9.0f}ms "
              f"{p90(run.latencies) if run.latencies else 0:5.0f}ms "
              f"{max(run.latencies, default=0):5.0f}ms   {run.written:7d} / {run.cancelled:9d} "
              f"/ {run.failed:6d}   {run.seconds / 60:.1f} min{ratio}")
    for run in runs:
        extra = ""
        if run.prepare_waits_ms:
            extra = (f"; {len(run.prepare_waits_ms)} replies waited for the next prompt's "
                     f"preparation, {sum(run.prepare_waits_ms) / 1000:.1f} s in all")
        print(f"  {run.label}: {run.heard} of {len(texts)} turns heard; "
              f"{run.idle_summary_s:.1f} s summarizing between turns{extra}")
        print(f"    summaries: {', '.join(run.written_at) or 'none'}")
        for latency, what in run.slowest:
            print(f"    {latency:6.0f} ms  {what}")
    print("  latency: end of speech to the reply's first audio. Inside replies: the time a "
          "reply spent writing a summary, or waiting for one being written between turns "
          "to stop.")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.summaries",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--ctx", type=int, default=2048,
                        help="context size: small, so that several summaries are due")
    parser.add_argument("--typed", action="store_true",
                        help="type the turns into the voice loop instead of saying them")
    parser.add_argument("--only", choices=["inline", "idle"])
    args = parser.parse_args(argv)

    from models.embedded import default_llm
    from models.llama import LlamaChatModel
    from models.piper_tts import PiperTextToSpeech
    from models.whisper_stt import WhisperSpeechToText

    print("Loading the embedded models…", flush=True)
    engines = (LlamaChatModel(default_llm(), context_size=args.ctx), WhisperSpeechToText(),
               PiperTextToSpeech())
    texts = user_turns(args.turns)
    modes = [("inline", "inside the reply (before)", False),
             ("idle", "between turns (default)", True)]
    runs = []
    for name, label, idle in modes:
        if args.only in (None, name):
            print(f"  running: summaries {label}", flush=True)
            runs.append(run_session(label, engines, texts, idle, args.typed, args.ctx))
    show(runs, texts, args.ctx, args.typed)


if __name__ == "__main__":
    main()
