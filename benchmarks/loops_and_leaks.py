"""`python -m benchmarks.loops_and_leaks`: replies that loop or leak, with the guard and without.

    python -m benchmarks.loops_and_leaks [--turns 100] [--answer-tokens 1024] [--minutes M]
                                         [--show]

A varied session of open questions (general knowledge, how-to, chit-chat, follow-ups; no
time, date, timer or arithmetic, which local intents answer) goes through the embedded
model in one conversation built as `parley chat` builds it, twice in the same run, turn by
turn: with the reply guard (Parley's default) and without it (`guard_replies=False`), each
on its own copy of the model. What the user would get is judged here, independently of the
guard's code:
- a loop: a sentence of 3 words or more said twice, a run of 8 words said twice, or an
  answer that ran to its token budget;
- a leak: 6 words in a row of the prompt's fixed text (system prompt, tool strategy and
  descriptions, the summary's and the recall hint's framing), "the user's next message",
  a chat-template token, or a tool call's JSON.
Prints the counts for both, the guard's cuts by reason, the replies it cut to nothing, the
turns it cut though the unguarded reply to the same question was clean (a cut that may
have been needless; the conversations differ once a summary is written), and seconds per
reply. `--show` prints those turns.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

from assistant import history_tool
from assistant.conversation import Conversation
from assistant.events import Event, ReplyCut, ReplyDone
from assistant.guarded_answer import (
    MADE_UP_PROMPT_PHRASES,
    identity_dropped,
    prompt_text,
    summary_framing,
)
from assistant.prompt import HINT_OPENING, TOOL_STRATEGY
from assistant.reply_guard import FALLBACK, CutReason, PromptText, ReplyGuard
from assistant.sentences import split_sentences
from assistant.timers import Timers
from models.base import (
    CancelToken,
    ChatModel,
    Chunk,
    PromptMessage,
    TextChunk,
    ToolSpec,
    UsageChunk,
)
from models.toolcalls import describe_tools

_KINDS = [
    # general knowledge
    "Tell me about the history of Rome.", "What is photosynthesis?", "Who wrote Hamlet?",
    "What are the planets in the solar system?", "Why is the sky blue?",
    "How do volcanoes form?", "What is the tallest mountain on Earth?",
    "Who was Marie Curie?", "What causes the seasons?", "How does the heart work?",
    "What is the difference between a virus and a bacterium?", "Why do cats purr?",
    "What is the largest ocean?", "How do bees make honey?", "What is gravity?",
    "Who painted the Mona Lisa?", "What is the Great Wall of China?",
    "How do airplanes stay in the air?", "What is a black hole?", "Why do we dream?",
    "What language is spoken in Brazil?", "How are rainbows made?",
    "What is the water cycle?", "Who invented the telephone?", "What is democracy?",
    "How does the internet work?", "What are dinosaurs?", "Why is the sea salty?",
    "What is the speed of light?", "What do pandas eat?", "How do magnets work?",
    "What is the capital of Australia?", "Why do leaves change colour in autumn?",
    "What is an atom?", "How long do elephants live?", "What is climate change?",
    "Who was Napoleon?", "What is a tsunami?", "How do vaccines work?",
    "What is the Amazon rainforest?",
    # how-to
    "How do I bake bread?", "How do I tie a tie?", "How can I learn to play guitar?",
    "How do I make a good cup of tea?", "How can I sleep better?",
    "How do I start running?", "How do I grow tomatoes?", "How can I save money?",
    "How do I write a good email?", "How do I clean a cast iron pan?",
    "How can I remember names better?", "How do I change a flat tyre?",
    "How do I learn a new language?", "How can I be more productive?",
    "How do I make pancakes?", "How do I care for a houseplant?",
    "How do I prepare for a job interview?", "How can I reduce stress?",
    "How do I keep my bike in good shape?", "How do I plan a trip?",
    "How do I make a paper airplane?", "How do I boil an egg?",
    "How can I drink more water during the day?", "How do I start meditating?",
    "How do I train a puppy?",
    # chit-chat
    "Hi, how are you today?", "Who are you?", "Tell me a joke.",
    "What is your favourite colour?", "What should I cook for dinner?",
    "I'm bored. Any ideas?", "What is a good book to read?", "Do you like music?",
    "What makes a good friend?", "Can you write a short poem about rain?",
    "What is the meaning of life?", "Tell me something interesting.",
    "What should I do this weekend?", "Good morning!", "I had a long day at work.",
    "What is your favourite animal?", "Can you recommend a film?",
    "Describe the ocean in one sentence.", "Thanks for your help!",
    "What do you think about cats?",
    # follow-ups
    "Can you tell me more about that?", "Why is that?", "Can you give me an example?",
    "What else should I know?", "Can you say that more simply?", "Are you sure?",
    "What happened next?", "And what about dogs?", "How long does that take?",
    "Is that true?", "Can you make it shorter?", "What do you mean?",
    "Tell me more.", "Which one is best?", "Why do you say that?",
]
_STARTS = (0, 40, 65, 85, 100)
"""Where each kind begins above: general knowledge, how-to, chit-chat, follow-ups."""
QUESTIONS = [kind[i] for i in range(40) for kind in
             (_KINDS[a:b] for a, b in zip(_STARTS, _STARTS[1:], strict=False)) if i < len(kind)]
"""The kinds in turn (a follow-up then follows some question), so that the first turns of
a run stopped early are as varied as the whole."""

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_TEMPLATE = re.compile(r"<\||\|>|\[/?INST\]|</s>|</?tool_call>|</?tool_response>|"
                       r"\[TOOL_CALLS\]|<start_of_turn>|<end_of_turn>")
_CALL = re.compile(r"""\{[^{}]*?["'](?:name|arguments|parameters)["']\s*:""")
_CALL_KEYS = re.compile(r"""["'](name|arguments|parameters)["']\s*:""")
LOOP_WORDS, LEAK_WORDS = 8, 6


def words(text: str) -> list[str]:
    return [re.sub(r"\d+", "0", w.lower().replace("’", "'")) for w in _WORD.findall(text)]


def grams(items: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(items[i:i + n]) for i in range(len(items) - n + 1)]


def loops(text: str, completion_tokens: int, budget: int) -> str:
    """Why `text` is a loop ("" if it is not)."""
    if completion_tokens >= budget:
        return "ran to the token budget"
    seen: set[tuple[str, ...]] = set()
    for sentence in split_sentences(text):
        said = tuple(w for w in words(sentence))
        while said and said[0] == "0":  # a list's numbers
            said = said[1:]
        if len(said) >= 3 and said in seen:
            return f"a sentence again: {sentence[:60]!r}"
        seen.add(said)
    runs = grams(words(text), LOOP_WORDS)
    for i, run in enumerate(runs):  # overlapping runs too: "so so so so so so so so so"
        if run in runs[:i]:
            return f"{LOOP_WORDS} words again: {' '.join(run)!r}"
    return ""


def prompt_runs(system_prompt: str, tool_text: str) -> set[tuple[str, ...]]:
    texts = [identity_dropped(system_prompt), TOOL_STRATEGY, history_tool.STRATEGY, tool_text,
             *summary_framing(),
             f"{HINT_OPENING}1, user: “"]
    runs = {run for text in texts for run in grams(words(text), LEAK_WORDS)}
    return runs | {tuple(words(p)) for p in MADE_UP_PROMPT_PHRASES}


def leaks(text: str, forbidden: set[tuple[str, ...]]) -> str:
    """Why `text` leaks ("" if it does not)."""
    if found := _TEMPLATE.search(text):
        return f"template token {found.group()!r}"
    for found in _CALL.finditer(text):
        if len(set(_CALL_KEYS.findall(text[found.start():found.start() + 400]))) >= 2:
            return "tool-call JSON"
    said = words(text)
    for n in sorted({len(run) for run in forbidden}):
        for run in grams(said, n):
            if run in forbidden:
                return f"prompt text {' '.join(run)!r}"
    return ""


@dataclass
class Mode:
    name: str
    talk: Conversation
    seconds: list[float] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    loops: list[tuple[int, str]] = field(default_factory=list)
    leaks: list[tuple[int, str]] = field(default_factory=list)
    cuts: dict[int, str] = field(default_factory=dict)


def ask(mode: Mode, number: int, question: str, forbidden: set[tuple[str, ...]]) -> None:
    events: list[Event] = []
    model = mode.talk.model
    if isinstance(model, Recorded):
        model.replayed_seconds = 0.0
    started = time.perf_counter()
    done = mode.talk.reply(question, events.append)
    replayed = model.replayed_seconds if isinstance(model, Recorded) else 0.0
    mode.seconds.append(time.perf_counter() - started + replayed)
    text = done.text if isinstance(done, ReplyDone) else ""
    mode.replies.append(text)
    tokens = done.completion_tokens if isinstance(done, ReplyDone) else 0
    mode.tokens.append(tokens)
    if why := loops(text, tokens, mode.talk.settings.answer_tokens):
        mode.loops.append((number, why))
    if why := leaks(text, forbidden):
        mode.leaks.append((number, why))
    cut = next((e.reason for e in events if isinstance(e, ReplyCut)), None)
    if cut is not None:
        mode.cuts[number] = cut


class Recorded(ChatModel):
    """The model, each generation kept by its prompt. With `replay`, a prompt generated
    before is answered from that record at the pace it was generated: the seeded model
    gives the same tokens for the same prompt, so the guarded run does not generate again
    what the unguarded run just did; its time is what that took, up to its cut."""

    def __init__(self, model: ChatModel, records: dict, replay: bool) -> None:
        self.model, self.records, self.replay = model, records, replay
        self.name, self.context_size = model.name, model.context_size
        self.capabilities = model.capabilities
        self.replayed = self.generated = 0
        self.replayed_seconds = 0.0
        """Of the generations replayed since it was last reset: the time they took."""

    def count_tokens(self, message: PromptMessage) -> int:
        return self.model.count_tokens(message)

    def overhead_tokens(self, tools: Sequence[ToolSpec]) -> int:
        return self.model.overhead_tokens(tools)

    def prefill(self, messages: Sequence[PromptMessage], tools: Sequence[ToolSpec]) -> int:
        return self.model.prefill(messages, tools)

    def aside(self):
        return self.model.aside()

    def stream(self, messages: Sequence[PromptMessage], tools: Sequence[ToolSpec],
               max_tokens: int, cancel: CancelToken | None = None) -> Iterator[Chunk]:
        key = repr((list(messages), list(tools), max_tokens))
        started = time.perf_counter()
        if self.replay and key in self.records:
            self.replayed += 1
            done = self.replayed_seconds
            texts = 0
            for at, chunk in self.records[key]:
                if cancel is not None and cancel.cancelled:  # as the model: stop, report
                    usage = self.records[key][-1][1]
                    yield UsageChunk(usage.prompt_tokens, usage.processed_tokens, texts)
                    return
                self.replayed_seconds = done + at  # what generating up to here took
                texts += isinstance(chunk, TextChunk)
                yield chunk
            return
        self.generated += 1
        record = []
        for chunk in self.model.stream(messages, tools, max_tokens, cancel):
            record.append((time.perf_counter() - started, chunk))
            yield chunk
        if cancel is None or not cancel.cancelled:
            self.records[key] = record


def conversations(answer_tokens: int, ctx: int, timers: Timers) -> tuple[Conversation, ...]:
    """The conversation `parley chat` builds for the embedded model (piped: the summary
    is written inside the reply that needs it), and its twin without the guard, on one
    model."""
    from assistant.session.engines import load_conversation
    from assistant.session.settings import ModelSettings, Settings

    guarded = load_conversation(Settings(model=ModelSettings(answer_tokens=answer_tokens,
                                                             ctx=ctx)), timers)
    bare = Conversation(guarded.model, guarded.tools,
                        replace(guarded.settings, guard_replies=False), local=guarded.local)
    records: dict = {}
    bare.model = Recorded(guarded.model, records, replay=False)
    guarded.model = Recorded(guarded.model, records, replay=True)
    return guarded, bare


def repeat_words_measure(bare: Mode, prompt: PromptText) -> None:
    """How long a run of words said again must be to count as a loop: at each length, the
    unguarded replies that ran to the budget the guard would cut (loops caught) and the
    others, with no sentence said twice, it would cut all the same (needless cuts)."""
    budget = bare.talk.settings.answer_tokens
    ran_out = [r for r, t in zip(bare.replies, bare.tokens, strict=True) if t >= budget]
    others = [r for r, t in zip(bare.replies, bare.tokens, strict=True)
              if t < budget and not loops(r, t, budget).startswith("a sentence")]
    print(f"  a run of N words said again: unguarded replies cut at each N, of "
          f"{len(ran_out)} that ran to the budget / {len(others)} others with no sentence "
          "said twice")
    for n in (6, 8, 10, 12):
        def cut(text: str, n: int = n) -> bool:
            guard = ReplyGuard(prompt, repeat_words=n)
            guard.feed(text)
            guard.finish()
            return guard.cut is not None and guard.cut.reason is CutReason.REPETITION
        print(f"    N = {n:2d}: {sum(map(cut, ran_out)):3d} / {sum(map(cut, others)):3d}")


def report(modes: list[Mode], questions: list[str], show: bool) -> None:
    print(f"\n{len(questions)} questions, answers up to "
          f"{modes[0].talk.settings.answer_tokens} tokens")
    print(f"  {'':22s} {'loops':>6s} {'leaks':>6s} {'s/reply mean':>13s} {'median':>7s}")
    for mode in modes:
        print(f"  {mode.name:22s} {len(mode.loops):6d} {len(mode.leaks):6d} "
              f"{statistics.mean(mode.seconds):13.2f} {statistics.median(mode.seconds):7.2f}")
    guarded, bare = modes
    reasons: dict[str, int] = {}
    for reason in guarded.cuts.values():
        reasons[reason] = reasons.get(reason, 0) + 1
    print(f"  cuts by the guard: {len(guarded.cuts)} "
          f"({', '.join(f'{r} {n}' for r, n in sorted(reasons.items())) or 'none'}); "
          f"cut to nothing (said {FALLBACK!r}): "
          f"{sum(r == FALLBACK for r in guarded.replies)}")
    bad = {n for n, _ in bare.loops} | {n for n, _ in bare.leaks}
    clean_cut = sorted(set(guarded.cuts) - bad)
    print(f"  cut though the unguarded reply was clean: {len(clean_cut)}"
          f"{' (turns ' + ', '.join(str(n) for n in clean_cut) + ')' if clean_cut else ''}")
    for mode in modes:
        for number, why in mode.loops + mode.leaks:
            print(f"  {mode.name}: turn {number} {questions[number - 1]!r}: {why}")
    if show:
        for number in sorted(set(guarded.cuts) | {n for n, _ in guarded.loops + guarded.leaks}):
            print(f"\n--- turn {number}: {questions[number - 1]!r} "
                  f"(cut: {guarded.cuts.get(number, '-')})")
            print(f"with the guard:\n{guarded.replies[number - 1]}")
            print(f"without:\n{bare.replies[number - 1]}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.loops_and_leaks",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=len(QUESTIONS))
    parser.add_argument("--answer-tokens", type=int, default=1024,
                        help="the answer budget (default 1024, as `parley chat`)")
    parser.add_argument("--ctx", type=int, default=8192)
    parser.add_argument("--minutes", type=float, default=None,
                        help="stop after the turn that ends past this many minutes")
    parser.add_argument("--show", action="store_true",
                        help="print the replies the guard cut, and their unguarded twins")
    args = parser.parse_args(argv)
    questions = QUESTIONS[:args.turns]
    timers = Timers(background=False)
    guarded_talk, bare_talk = conversations(args.answer_tokens, args.ctx, timers)
    guarded = Mode("with the guard", guarded_talk)
    bare = Mode("without (baseline)", bare_talk)
    # The tools of a reply: the conversation's, and conversation_history after the first.
    tools = describe_tools([*guarded.talk.tools.specs(), history_tool.SPEC])
    forbidden = prompt_runs(guarded.talk.settings.system_prompt, tools)
    started = time.perf_counter()
    try:
        for number, question in enumerate(questions, 1):
            for mode in (bare, guarded):  # turn by turn; the guarded one may replay the other
                ask(mode, number, question, forbidden)
            print(f"\r{number}/{len(questions)} turns, {time.perf_counter() - started:.0f} s",
                  end="", flush=True)
            if args.minutes is not None and time.perf_counter() - started > args.minutes * 60:
                raise KeyboardInterrupt
    except KeyboardInterrupt:  # Ctrl-C: the figures of the turns both modes finished
        done = len(guarded.replies)
        bare.replies, bare.tokens, bare.seconds = (
            bare.replies[:done], bare.tokens[:done], bare.seconds[:done])
        bare.loops = [(n, why) for n, why in bare.loops if n <= done]
        bare.leaks = [(n, why) for n, why in bare.leaks if n <= done]
        questions = questions[:done]
        print(f"\nstopped after {done} turns")
    timers.close()
    report([guarded, bare], questions, args.show)
    repeat_words_measure(bare, prompt_text(guarded_talk.settings.system_prompt,
                                           [*guarded_talk.tools.specs(), history_tool.SPEC]))
    model = guarded.talk.model
    if isinstance(model, Recorded):
        print(f"  the guarded run generated {model.generated} times and replayed "
              f"{model.replayed} generations of the unguarded run (same prompt)")


if __name__ == "__main__":
    main()
