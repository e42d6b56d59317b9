"""`python -m benchmarks.answers`: right answers to everyday requests.

    python -m benchmarks.answers [--only requests|latency|matching|parrot]

Prints, with the embedded engines:
- everyday requests (time, date, arithmetic, timers) typed and spoken (said by the Piper
  voice, heard by Whisper), correct of total, with local intents (Parley's default) and
  with `--no-local-intents` (the model alone) measured in the same run;
- end of speech to first audio of local answers against model answers (voice replay of
  spoken requests at real-time pace);
- the cost of matching one message against the compiled templates;
- the model path over 32 varied open and factual questions in one conversation: the
  worst similarity of a reply to an earlier one (difflib ratio), replies over 0.8, and
  factual answers right, with the model seeing every earlier exchange (before) against
  none (`--model-exchanges 0`, the embedded model's default).
Figures are printed, never asserted: this machine is noisy.
"""

from __future__ import annotations

import argparse
import difflib
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from assistant.conversation import Conversation
from assistant.events import ReplyDone
from assistant.session.builder import chat_session
from assistant.session.engines import Loaded
from assistant.session.settings import Settings
from assistant.timers import Timers
from benchmarks.voice import p90, replay_session, replay_settings, warn
from tests.support.parrot_questions import FACTS, OPEN, PARROT_QUESTIONS

ANSWER_TOKENS = 64


@dataclass(frozen=True)
class Request:
    kind: str
    text: str
    right: Callable[[str, Timers], bool]
    """Whether the reply (and the timers after it) are right."""


def _digits(reply: str) -> str:
    return reply.replace(",", "")


def _says_time(reply: str, timers: Timers) -> bool:
    now = datetime.now()
    shown = {f"{t.hour % 12 or 12}:{t.minute:02d}" for t in (now, now - timedelta(minutes=1))}
    shown |= {f"{t:%H:%M}" for t in (now, now - timedelta(minutes=1))}
    return any(s in reply for s in shown)


def _says_date(reply: str, timers: Timers) -> bool:
    today = datetime.now()
    return f"{today:%B} {today.day}" in reply or f"{today.day} {today:%B}" in reply


def _says_number(value: str) -> Callable[[str, Timers], bool]:
    return lambda reply, timers: re.search(rf"(?<![\d.]){re.escape(value)}(?![\d])",
                                           _digits(reply)) is not None


def _timer_running(seconds: int, name: str = "") -> Callable[[str, Timers], bool]:
    return lambda reply, timers: any(t.seconds == seconds and t.name == name
                                     for t in timers.running())


def _timer_reported(reply: str, timers: Timers) -> bool:
    return bool(timers.running()) and ("minute" in reply or "second" in reply)


def _timer_gone(name: str) -> Callable[[str, Timers], bool]:
    return lambda reply, timers: not any(t.name == name for t in timers.running()) \
        and "ancel" in reply


REQUESTS = [
    Request("time", "What time is it?", _says_time),
    Request("time", "Can you tell me the time?", _says_time),
    Request("date", "What is the date today?", _says_date),
    Request("date", "What day is it today?", _says_date),
    Request("arithmetic", "What is 17 times 23?", _says_number("391")),
    Request("arithmetic", "What's 15 percent of 80?", _says_number("12")),
    Request("arithmetic", "What is the square root of 144?", _says_number("12")),
    Request("arithmetic", "What is seven divided by eight?", _says_number("0.875")),
    Request("arithmetic", "What is 250 plus 175?", _says_number("425")),
    Request("timers", "Set a timer for 5 minutes.", _timer_running(300)),
    Request("timers", "Set a 10 minute pizza timer.", _timer_running(600, "pizza")),
    Request("timers", "How much time is left?", _timer_reported),
    Request("timers", "Cancel the pizza timer.", _timer_gone("pizza")),
]
KINDS = ("time", "date", "arithmetic", "timers")

OPEN_QUESTIONS = ["Tell me something about the moon.", "What is a good name for a dog?",
                  "Give me a tip for sleeping better.", "Why is the sea salty?"]


def settings(local: bool, **model) -> Settings:
    """Parley's settings with short answers, with local intents or the model alone
    (`--no-local-intents`); `model`: other ModelSettings."""
    return replay_settings(ANSWER_TOKENS, local_intents=local, **model)


def reply_text(talk: Conversation, text: str) -> str:
    done = talk.reply(text, lambda event: None)
    return done.text if isinstance(done, ReplyDone) else ""


# -- requests: typed and spoken, right of total ---------------------------------------------

def spoken_requests(engines, local: bool) -> list:
    """Each request said by Piper and replayed through the voice loop at real-time pace."""
    from assistant.voice.replay import ReplayTurn, replay
    from tests.support.spoken import spoken_clip

    tts = engines[2]
    session = [ReplayTurn(n, pcm=spoken_clip(tts, r.text)) for n, r in enumerate(REQUESTS, 1)]
    verdicts = []
    with replay_session(engines, settings(local)) as built:
        # One turn at a time, so each is judged against the timers right after it.
        for turn, request in zip(session, REQUESTS, strict=True):
            records = [r for group in replay(built.loop, [turn], fast=False) for r in group]
            reply = " ".join(r.reply for r in records)
            verdicts.append((request, request.right(reply, built.timers), records))
    return verdicts


def bench_requests(engines) -> dict[str, list[float]]:
    llm = engines[0]
    table: dict[tuple[str, str, bool], list[bool]] = {}
    latencies: dict[str, list[float]] = {"local": [], "model": []}
    misses: list[str] = []
    for local in (False, True):
        with chat_session(settings(local), warn, loaded=Loaded(llm)) as typed:
            for request in REQUESTS:
                right = request.right(reply_text(typed.conversation, request.text),
                                      typed.timers)
                table.setdefault((request.kind, "typed", local), []).append(right)
        verdicts = spoken_requests(engines, local)
        for request, right, records in verdicts:
            table.setdefault((request.kind, "spoken", local), []).append(right)
            if local and not right:
                misses.append(f"{request.text!r}: heard "
                              f"{' / '.join(r.heard for r in records)!r}, replied "
                              f"{' '.join(r.reply for r in records)[:80]!r}")
            for record in records:
                if record.timings.latency_ms is not None:
                    latencies["local" if local else "model"].append(record.timings.latency_ms)
    print("\nEveryday requests, right of total (the model alone | with local intents)")
    print(f"  {'kind':12s} {'typed':>15s} {'spoken':>15s}")
    totals = {(how, local): [0, 0] for how in ("typed", "spoken") for local in (False, True)}
    for kind in KINDS:
        cells = []
        for how in ("typed", "spoken"):
            parts = []
            for local in (False, True):
                marks = table[(kind, how, local)]
                totals[(how, local)][0] += sum(marks)
                totals[(how, local)][1] += len(marks)
                parts.append(f"{sum(marks)}/{len(marks)}")
            cells.append(" | ".join(parts))
        print(f"  {kind:12s} {cells[0]:>15s} {cells[1]:>15s}")
    cells = [" | ".join(f"{totals[(how, loc)][0]}/{totals[(how, loc)][1]}"
                        for loc in (False, True)) for how in ("typed", "spoken")]
    print(f"  {'all':12s} {cells[0]:>15s} {cells[1]:>15s}")
    for miss in misses:
        print(f"  spoken, missed with local intents: {miss}")
    return latencies


def bench_latency(engines, latencies: dict[str, list[float]]) -> None:
    """Local answers (from the spoken requests) against model answers to open questions."""
    from assistant.voice.replay import ReplayTurn, replay
    from tests.support.spoken import spoken_clip

    tts = engines[2]
    session = [ReplayTurn(n, pcm=spoken_clip(tts, q)) for n, q in enumerate(OPEN_QUESTIONS, 1)]
    with replay_session(engines, settings(local=True)) as built:
        produced = replay(built.loop, session, fast=False)
    answered = [r.timings.latency_ms for g in produced for r in g
                if r.timings.latency_ms is not None]
    print("\nEnd of speech to first audio (ms; includes the fixed end-of-speech wait)")
    rows = [("local answers (spoken requests above)", latencies.get("local", [])),
            ("model answers (open questions)", answered),
            ("the model alone, on the requests above", latencies.get("model", []))]
    base = statistics.median(answered) if answered else None
    for label, values in rows:
        if not values:
            print(f"  {label:40s} none")
            continue
        median = statistics.median(values)
        ratio = f"{median / base:5.2f}" if base else "  -  "
        print(f"  {label:40s} median {median:6.0f}  p90 {p90(values):6.0f}  "
              f"ratio to model answers {ratio}  ({len(values)} turns)")


# -- matching cost ---------------------------------------------------------------------

MATCHED = [r.text for r in REQUESTS] + [
    "set a 10 minute pizza timer", "pause the timer", "add 2 minutes to the timer",
    "what did I say about the billing port", "say that again", "never mind",
    "seventeen times twenty three", "cancel all timers",
]
UNMATCHED = [
    "What is the capital of France?", "Tell me a joke about computers.",
    "How do I make a good cup of coffee in the morning before work?",
    "Summarize what we discussed about the migration plan and the database schema.",
]


def bench_matching() -> None:
    from assistant.local.matcher import IntentMatcher

    started = time.perf_counter()
    matcher = IntentMatcher()
    loaded = (time.perf_counter() - started) * 1000
    print("\nMatching one message against the compiled templates")
    print(f"  load and compile: {loaded:.0f} ms (once, at start, beside the model's load)")
    paste = " ".join(["The billing service listens on port 8101."] * 50)
    for label, texts in (("matched", MATCHED), ("not matched", UNMATCHED),
                         ("a 2,150-character paste", [paste])):
        costs = []
        for _ in range(5):
            for text in texts:
                step = time.perf_counter()
                matcher.match(text)
                costs.append((time.perf_counter() - step) * 1000)
        print(f"  {label:24s} median {statistics.median(costs):6.2f} ms  p90 "
              f"{p90(costs):6.2f} ms  max {max(costs):6.2f} ms  ({len(texts)} messages × 5)")


# -- the model path: parroting and facts ---------------------------------------------------



def parrot_run(model, exchanges: int | None) -> tuple[float, int, int, int]:
    """(worst similarity to an earlier reply, replies over 0.8, facts right, replies)."""
    replies: list[str] = []
    worst, over, facts = 0.0, 0, 0
    seen = settings(local=True, model_exchanges="all" if exchanges is None else exchanges)
    with chat_session(seen, warn, loaded=Loaded(model)) as session:
        for question in PARROT_QUESTIONS:
            text = question if isinstance(question, str) else question[0]
            reply = reply_text(session.conversation, text).strip().lower()
            if not isinstance(question, str):
                facts += any(word in reply for word in question[1])
            similar = max((difflib.SequenceMatcher(None, reply, earlier).ratio()
                           for earlier in replies), default=0.0)
            worst = max(worst, similar)
            over += similar > 0.8
            replies.append(reply)
    return worst, over, facts, len(replies)


def bench_parrot(model) -> None:
    print(f"\nThe model path: {len(OPEN) + len(FACTS)} questions in one conversation "
          f"({len(FACTS)} factual), answers up to {ANSWER_TOKENS} tokens")
    print(f"  {'the model sees':34s} {'worst':>6s} {'> 0.8':>6s} {'facts right':>12s}")
    for label, exchanges in (("every earlier exchange (before)", None),
                             ("the last exchange", 1),
                             ("none: only this message (default)", 0)):
        worst, over, facts, total = parrot_run(model, exchanges)
        print(f"  {label:34s} {worst:6.2f} {over:3d}/{total:<2d} {facts:6d}/{len(FACTS)}")
    print("  worst: the highest difflib ratio of a reply to any earlier reply; > 0.8: "
          "replies that are more than 80% an earlier one.")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.answers",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["requests", "latency", "matching", "parrot"])
    args = parser.parse_args(argv)
    from benchmarks.voice import load_engines

    if args.only in (None, "matching"):
        bench_matching()
    if args.only == "matching":
        return
    engines = load_engines()
    latencies: dict[str, list[float]] = {}
    if args.only in (None, "requests", "latency"):
        latencies = bench_requests(engines)
    if args.only in (None, "latency"):
        bench_latency(engines, latencies)
    if args.only in (None, "parrot"):
        bench_parrot(engines[0])


if __name__ == "__main__":
    main()
