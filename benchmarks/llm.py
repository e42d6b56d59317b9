"""`python -m benchmarks.llm`: figures for the embedded model on this machine.

    python -m benchmarks.llm [--only speed|prompt|turns]

Prints load time, time to first token, generation and prompt tokens/s for 1 and 2
threads, on a quiet machine and beside one busy process, then their ratios (2 threads
against 1, busy against quiet); the cost of building one reply's prompt from a 400-message
history with cached token counts against uncached counts; and prompt tokens processed per
turn over a 20-turn chat beside each prompt's size.
"""

from __future__ import annotations

import argparse
import statistics
import time

from assistant.conversation import Conversation, ReplySettings
from assistant.tools import builtin_tools
from benchmarks.busy import one_busy_core
from models.base import PromptMessage, TextChunk, UsageChunk
from models.embedded import default_llm
from models.llama import LlamaChatModel

PROSE = ("The billing service listens on port 8101 and the search service on 8102; "
         "both read their settings from the shared configuration file. ")


def speed(threads: int, beside: str = "quiet") -> tuple[float, float]:
    """Prints one row of figures; returns (prompt tok/s, generation tok/s)."""
    start = time.perf_counter()
    model = LlamaChatModel(default_llm(), context_size=4096, threads=threads,
                           batch_threads=threads)
    label = f"threads={threads}, {beside}"
    load = time.perf_counter() - start
    long_prompt = [PromptMessage("system", "You are Parley."),
                   PromptMessage("user", PROSE * 40 + "\nSummarize in one sentence.")]
    start = time.perf_counter()
    first = None
    usage = None
    for chunk in model.stream(long_prompt, [], 64):
        if isinstance(chunk, TextChunk) and first is None:
            first = time.perf_counter() - start
        if isinstance(chunk, UsageChunk):
            usage = chunk
    total = time.perf_counter() - start
    assert usage is not None and first is not None
    short = [PromptMessage("system", "You are Parley."), PromptMessage("user", "Say hello.")]
    start = time.perf_counter()
    short_first = None
    for chunk in model.stream(short, [], 8):
        if isinstance(chunk, TextChunk) and short_first is None:
            short_first = time.perf_counter() - start
    print(f"{label}: first token {short_first or 0:.3f} s for a short "
          f"{len(model.prompt_tokens(short, []))}-token prompt")
    prompt_rate = usage.processed_tokens / first
    gen_rate = max(usage.completion_tokens - 1, 1) / max(total - first, 1e-6)
    print(f"{label}: load {load:.2f} s, first token {first:.2f} s for a "
          f"{usage.prompt_tokens}-token prompt, prompt {prompt_rate:.0f} tok/s, "
          f"generation {gen_rate:.1f} tok/s ({usage.completion_tokens} tokens)")
    return prompt_rate, gen_rate


def speed_ratios(rates: dict[tuple[int, bool], tuple[float, float]]) -> None:
    """2 threads against 1, and beside a busy process against quiet, for both rates."""
    for index, what in ((0, "prompt processing"), (1, "generation")):
        quiet = rates[(2, False)][index] / rates[(1, False)][index]
        busy = rates[(2, True)][index] / rates[(1, True)][index]
        one = rates[(1, True)][index] / rates[(1, False)][index]
        two = rates[(2, True)][index] / rates[(2, False)][index]
        print(f"{what}: 2 threads against 1: {quiet:.2f}x quiet, {busy:.2f}x busy; "
              f"busy against quiet: {one:.2f}x with 1 thread, {two:.2f}x with 2")


def prompt_building(model: LlamaChatModel) -> None:
    conversation = Conversation(model, builtin_tools(), ReplySettings())
    for i in range(200):
        conversation.history.add("user", f"Question {i}: " + PROSE * (1 + i % 3))
        conversation.history.add("assistant", f"Answer {i}: " + PROSE)
    current = conversation.history.add("user", "What port does billing use?")
    tools = conversation.tools.specs()

    def build() -> float:
        start = time.perf_counter()
        conversation.prompts.build(conversation.history.messages, conversation.summary,
                                   current.seq, tools)
        return (time.perf_counter() - start) * 1000

    model._counts.clear()
    uncached = build()
    cached = statistics.median(build() for _ in range(20))
    print(f"prompt from 400 messages: uncached {uncached:.1f} ms, cached {cached:.2f} ms "
          f"median ({uncached / cached:.0f}x faster; target under 5 ms)")


def twenty_turns(model: LlamaChatModel, prepare: bool) -> None:
    conversation = Conversation(model, builtin_tools(), ReplySettings(answer_tokens=48))
    processed, sizes = [], []
    for turn in range(20):
        if prepare:  # what chat and voice do while the user types or talks
            conversation.prepare_next()
        done = conversation.reply(f"Tell me one short fact about the number {turn + 1}.",
                                  lambda e: None)
        if done:
            processed.append(done.processed_tokens)
            sizes.append(done.prompt_tokens)
    how = "with the prefix prepared between turns" if prepare else "without preparation"
    print(f"20-turn chat {how}, prompt tokens processed during the reply / prompt size:")
    print("  " + ", ".join(f"{p}/{s}" for p, s in zip(processed, sizes, strict=True)))
    print(f"  total processed {sum(processed)} of {sum(sizes)} "
          f"({sum(processed) / max(sum(sizes), 1):.0%}); prefix reuse saved the rest")
    if len(processed) > 2:
        print(f"  turns 3 to {len(processed)}: median {statistics.median(processed[2:]):.0f} "
              "processed a turn")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["speed", "prompt", "turns"],
                        help="speed: load, first token and tok/s quiet and busy; prompt: "
                             "building a prompt from 400 messages; turns: the 20-turn chat")
    args = parser.parse_args()
    if args.only in (None, "speed"):
        rates = {(threads, False): speed(threads) for threads in (1, 2)}
        with one_busy_core():
            for threads in (1, 2):
                rates[(threads, True)] = speed(threads, "beside a busy process")
        speed_ratios(rates)
    if args.only in (None, "prompt"):
        prompt_building(LlamaChatModel(default_llm(), context_size=8192, threads=2))
    for prepare in (False, True) if args.only in (None, "turns") else ():
        model = LlamaChatModel(default_llm(), context_size=8192, threads=2)
        twenty_turns(model, prepare)


if __name__ == "__main__":
    main()
