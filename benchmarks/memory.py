"""Long-conversation benchmark: history search speed, summary cost, and a recall evaluation.

    python -m benchmarks.memory [--only search|summary|recall] [--llm-model PATH.gguf]

Figures are printed, never asserted: this machine is noisy. Each speed figure is shown
beside a straightforward implementation measured in the same run.
"""

from __future__ import annotations

import argparse
import math
import random
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import Stemmer

from memory.history import Message
from memory.search import (
    WINDOW_CHARS,
    WINDOW_STEP,
    HistorySearch,
    SearchIndexCache,
    search_history,
)
from tests.support.planted_facts import RECALL_QUESTIONS, build_conversation

# -- search speed ------------------------------------------------------------------------

_VOCABULARY = (
    "deploy service billing port config database cluster replica node backup schedule "
    "friday monday invoice customer ledger queue worker retry timeout token cache proxy "
    "gateway volume network bridge image registry build release tag branch merge review "
    "test coverage latency memory thread socket buffer stream parser schema migration "
    "index query report dashboard alert metric log trace span budget quota region zone"
).split()


def synthetic_conversation(count: int, total_chars: int, seed: int = 0) -> list[Message]:
    """Messages of varied length (a few long pastes), deterministic for a seed."""
    rng = random.Random(seed)
    weights = [rng.paretovariate(1.3) for _ in range(count)]
    scale = total_chars / sum(weights)
    messages = []
    for seq, weight in enumerate(weights, start=1):
        size = max(int(weight * scale), 40)
        words: list[str] = []
        length = 0
        while length < size:
            word = rng.choice(_VOCABULARY)
            if rng.random() < 0.2:  # identifiers, as in pasted code and logs
                word = f"{word}_{rng.randint(1, 9999)}"
            words.append(word)
            length += len(word) + 1
        role = "user" if seq % 2 else "assistant"
        messages.append(Message(seq, role, " ".join(words)[:size]))
    return messages


def naive_search(messages: Sequence[Message], query: str) -> list[tuple[float, int, int]]:
    """The straightforward version: tokenize, stem and score every window on every query."""
    stemmer = Stemmer.Stemmer("english")
    terms = [(w, stemmer.stemWord(w)) for w in re.findall(r"\w+", query.lower())]
    windows = []
    for m in messages:
        for start in range(0, max(len(m.content) - WINDOW_STEP, 1), WINDOW_STEP):
            found = re.findall(r"\w+", m.content[start:start + WINDOW_CHARS].lower())
            windows.append((m.seq, start, set(found), {stemmer.stemWord(w) for w in found}))
    scored = []
    for word, stem in terms:
        df = sum(1 for w in windows if stem in w[3]) or 1
        weight = math.log(1 + len(windows) / df)
        for seq, start, exact, stems in windows:
            if stem in stems:
                scored.append((weight * (1.0 if word in exact else 0.6), seq, start))
    return sorted(scored, reverse=True)[:6]


def _median_ms(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def bench_search() -> None:
    rng = random.Random(1)
    queries = [" ".join(rng.sample(_VOCABULARY, rng.randint(2, 4))) for _ in range(15)]
    print("History search (median per query, ms)")
    for name, count, chars in (("a shorter conversation", 31, 57_000),
                               ("a long conversation", 400, 921_000)):
        messages = synthetic_conversation(count, chars)
        total = sum(len(m.content) for m in messages)
        naive = statistics.median(_median_ms(lambda q=q, m=messages: naive_search(m, q), 3)
                                  for q in queries[:5])
        # The public API on messages it has never seen: nothing kept from an earlier call.
        cold = statistics.median(_median_ms(lambda q=q, m=messages: search_history(m, q), 3)
                                 for q in queries[:5])
        cache = SearchIndexCache()
        HistorySearch(messages[:-1], cache).search(queries[0])

        grown = iter(range(10**6))
        last = messages[-1]

        def per_reply(q: str, last: Message = last, grown=grown,
                      messages: list[Message] = messages, cache=cache) -> None:
            # One reply: the conversation grew by a message since the last search; the
            # others' lowercased text is kept from it.
            new = Message(last.seq, last.role, f"{last.content} {next(grown)}")
            HistorySearch([*messages[:-1], new], cache).search(q)

        warm = statistics.median(_median_ms(lambda q=q: per_reply(q), 5) for q in queries)
        print(f"  {name} ({count} messages, {total:,} characters):")
        print(f"    straightforward per-query implementation: {naive:8.1f}")
        print(f"    search_history, from cold:                 {cold:8.1f}  "
              f"({naive / cold:.1f}x as fast; target <= 20 ms and >= 5x)")
        print(f"    Parley, per reply (text kept, 1 new):      {warm:8.2f}  "
              f"({naive / warm:.0f}x faster; target < 10 ms)")


# -- summary cost and the recall evaluation ---------------------------------------------

@dataclass
class RecallResult:
    correct: int = 0
    asked: int = 0
    tool_calls: int = 0
    hints: int = 0


def bench_summary_and_recall(model_path: str | None, ctx: int, only: str | None) -> None:
    from assistant.events import RecallHint, Summarized, ToolCall
    from assistant.summarizer import write_summary
    from memory.history import group_exchanges
    from memory.summary import RunningSummary, SummaryPlan
    from models.base import CancelToken
    from models.embedded import default_llm
    from models.llama import LlamaChatModel

    path = model_path or str(default_llm())
    model = LlamaChatModel(path, context_size=ctx)
    print(f"\nModel: {path} (context {ctx:,} tokens)")
    if only in (None, "summary"):
        conversation = build_conversation(model, hints=False)
        exchanges = group_exchanges(conversation.history.messages)
        first = SummaryPlan(tuple(exchanges[:5]))
        second = SummaryPlan(tuple(exchanges[5:9]))
        print("Summary updates (the embedded model writes bullets; invalid ones are replaced)")
        summary = RunningSummary()
        for name, plan in (("first summary", first), ("incremental", second)):
            start = time.perf_counter()
            outcome = write_summary(model, plan, summary, CancelToken(), 120.0)
            seconds = time.perf_counter() - start
            if outcome.summary is None:
                print(f"  {name}: failed ({outcome.failure}) after {seconds:.1f} s")
                continue
            summary = outcome.summary
            print(f"  {name}: #{plan.first_seq}–#{plan.last_seq}, {len(plan.exchanges)} "
                  f"exchanges: {seconds:.1f} s, {outcome.output_tokens} output tokens, "
                  f"{outcome.replaced} of {len(plan.exchanges)} bullets replaced")
        print(f"  summary: {len(summary.text):,} characters, {len(summary.bullets)} bullets")
    if only in (None, "recall"):
        print(f"Recall: {len(RECALL_QUESTIONS)} planted facts asked after they left the prompt")
        for hints in (False, True):
            result = RecallResult()
            base = build_conversation(model, hints)
            events: list = []
            # The first question makes the summary; each later one starts from that state.
            for question, expected in RECALL_QUESTIONS:
                conversation = build_conversation(model, hints)
                conversation.state.set_summary(base.summary)
                events = []
                done = conversation.reply(question, events.append)
                if base.summary.covered_through == 0:
                    base.state.set_summary(conversation.summary)
                result.asked += 1
                answer = done.text if done else ""
                result.correct += bool(re.search(expected, answer, re.IGNORECASE))
                result.tool_calls += sum(isinstance(e, ToolCall) for e in events)
                result.hints += sum(isinstance(e, RecallHint) for e in events)
                covered = any(isinstance(e, Summarized) for e in events)
                print(f"    {'hints' if hints else 'no hints'}: {question!r} -> "
                      f"{answer[:90]!r}{' (summarized first)' if covered else ''}")
            print(f"  recall hints {'on' if hints else 'off'}: {result.correct}/{result.asked} "
                  f"correct, {result.tool_calls} tool calls, {result.hints} hints shown")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["search", "summary", "recall"])
    parser.add_argument("--llm-model", help="a GGUF to measure instead of the embedded model")
    parser.add_argument("--ctx", type=int, default=1536,
                        help="context size: small, so the planted facts leave the prompt")
    args = parser.parse_args(argv)
    if args.only in (None, "search"):
        bench_search()
    if args.only != "search":
        bench_summary_and_recall(args.llm_model, args.ctx, args.only)


if __name__ == "__main__":
    main()
