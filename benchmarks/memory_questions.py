"""`python -m benchmarks.memory_questions`: questions about what the user said.

    python -m benchmarks.memory_questions [--limit N] [--typed] [--llm-model PATH.gguf]
                                          [--llm-url URL] [--ctx N] [--answer-tokens N]

Each pair is a conversation: the user states a fact ("I parked the car on level 3, spot
42."), then another fact of theirs (a distractor sharing some words, in some pairs before
it), an everyday request answered locally and an open question for the model; then the
memory question ("Where did I park the car?"), typed, and spoken (said by the embedded
Piper voice, heard by the embedded Whisper). Everything but the question is answered by
the embedded model (or `--llm-model`, `--llm-url`) in a session built as `parley chat`
builds one, so the conversation is the one a user would have.

Printed: right of total, typed and spoken; false answers (something presented as what the
user said that is not: an earlier message other than the statement, or the model's own
words without the fact), counted apart; "nothing found" answers; the world and how-to
questions that were taken for memory questions; the same with memory questions switched
off (the model answering, as before); and, over the same conversations, how the share of
the question's words a statement must cover changes right and false answers.
Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from assistant.conversation import Conversation
from assistant.events import ReplyDone
from assistant.history_tool import NAME as HISTORY
from assistant.history_tool import history_tool
from assistant.local.answers import MEMORY_INTENT, LocalIntents
from assistant.local.matcher import IntentMatcher
from assistant.local.memory_answers import recalled, search_arguments
from assistant.local.memory_questions import memory_question
from assistant.session.settings import ModelSettings, Settings, default_of
from benchmarks.voice import warn
from memory.search import HistorySearch


@dataclass(frozen=True)
class Pair:
    statement: str
    question: str
    key: str
    """A word of the statement that answers the question."""
    distractor: str = ""
    """Another fact of the user's that shares words with the question (default: the
    statement of the pair seven on)."""


PAIRS = [
    Pair("My name is Sam.", "What is my name?", "Sam"),
    Pair("I parked the car on level 3, spot 42.", "Where did I park the car?", "42",
         "I parked my bike outside the library."),
    Pair("My locker code is 4512.", "What did I say my locker code was?", "4512"),
    Pair("The wifi password here is tulip77.", "What was the wifi password I gave you?",
         "tulip77"),
    Pair("My sister's birthday is on May 3rd.", "When is my sister's birthday?", "May",
         "My birthday is on the 9th of June."),
    Pair("My dog is called Biscuit.", "What's my dog called?", "Biscuit"),
    Pair("We're staying at the Harbour View Hotel this week.", "Which hotel am I staying at?",
         "Harbour"),
    Pair("My favourite colour is teal.", "Did I tell you my favourite colour?", "teal"),
    Pair("The team meeting moved to Thursday at 10.", "What did I tell you about the meeting?",
         "Thursday"),
    Pair("My flight number is BA 117.", "Remind me what my flight number is.", "117"),
    Pair("My son is seven years old.", "How old is my son?", "seven",
         "My daughter is twelve years old."),
    Pair("My dentist appointment is at 4:30 on Friday.", "What time is my dentist appointment?",
         "4:30", "My hairdresser appointment is at 11 on Monday."),
    Pair("My wife's name is Priya.", "Do you know my wife's name?", "Priya", "My name is Sam."),
    Pair("I work as a nurse at St Mary's hospital.", "Where do I work?", "Mary"),
    Pair("I drive a blue Toyota Corolla.", "What kind of car do I drive?", "Corolla"),
    Pair("I paid 340 euros for the new bike.", "How much did I pay for the bike?", "340"),
    Pair("My doctor is Dr. Okafor.", "Who is my doctor?", "Okafor"),
    Pair("My gym locker is number 118.", "What's my gym locker number?", "118",
         "My locker code is 4512."),
    Pair("I'm allergic to peanuts.", "What am I allergic to?", "peanut"),
    Pair("My daughter's teacher is Mrs. Lindqvist.", "Who is my daughter's teacher?",
         "Lindqvist"),
    Pair("Our anniversary is on the 14th of June.", "When is our anniversary?", "June"),
    Pair("My phone number is 555 0199.", "Do you remember my phone number?", "0199",
         "My passport number is X4471902."),
    Pair("My brother Tom lives in Glasgow.", "Where does my brother live?", "Glasgow",
         "My sister lives in Leeds."),
    Pair("I ordered the mushroom risotto.", "What did I order?", "risotto"),
    Pair("My passport number is X4471902.", "I told you my passport number, what was it?",
         "X4471902"),
    Pair("I'm meeting Jonas at the station at six.", "Who am I meeting at the station?",
         "Jonas"),
    Pair("My cat Miso is four.", "How old is my cat?", "four"),
    Pair("The restaurant I booked for Saturday is called Lupa.",
         "What was the name of the restaurant I mentioned?", "Lupa"),
    Pair("My license plate is KD55 ZRT.", "What's my license plate?", "ZRT"),
    Pair("My mum's flight lands at 7:15 pm.", "When does my mum's flight land?", "7:15"),
    Pair("The spare key is under the blue flower pot.", "Where did I say the spare key is?",
         "flower"),
    Pair("My blood type is O negative.", "What's my blood type?", "negative"),
    Pair("My boss is called Renata.", "What is my boss's name?", "Renata",
         "My dog is called Biscuit."),
    Pair("I was born in Porto.", "Where was I born?", "Porto"),
    Pair("My bank appointment is on Tuesday at 2.", "Do I have a bank appointment?", "Tuesday"),
    Pair("My favorite band is Radiohead.", "What's my favourite band?", "Radiohead"),
    Pair("The plumber is coming on Wednesday morning.",
         "When did I say the plumber is coming?", "Wednesday"),
    Pair("I left my umbrella at Maria's house.", "Where did I leave my umbrella?", "Maria"),
    Pair("My kids are called Ella and Noah.", "What are my kids called?", "Noah"),
    Pair("I'm flying to Lisbon on the 22nd.", "Where am I flying to?", "Lisbon"),
    Pair("The router's admin password is hunter2.", "Do you recall the router password?",
         "hunter2", "The wifi password here is tulip77."),
    Pair("I keep my spare glasses in the top drawer of my desk.",
         "Where do I keep my spare glasses?", "drawer"),
    Pair("My husband is allergic to shellfish.", "What is my husband allergic to?",
         "shellfish", "I'm allergic to peanuts."),
    Pair("My bike lock combination is 0481.", "Remind me of my bike lock combination.", "0481"),
    Pair("The yoga class I go to starts at 6:30.", "When does my yoga class start?", "6:30"),
    Pair("I put the passports in the hotel safe.", "Where did I put the passports?", "safe"),
]

WORLD = [
    "What is the capital of Japan?", "How do I check the logs of a docker container?",
    "What should I cook tonight?", "Where can I buy a bike?", "Tell me a joke.",
    "What is the tallest mountain in the world?", "How can I improve my sleep?",
    "What should I name my new puppy?", "Why is my code so slow?", "Who wrote Pride and Prejudice?",
    "When did the Second World War end?", "How many legs does a spider have?",
    "Remind me to call my mother.", "Do you know where I can buy a bike?",
    "How do I reset my password?", "What's the best way to learn Spanish?",
    "Where do penguins live?", "What is a good name for a cat?",
    "How far is the moon from the earth?", "What does my horoscope mean?",
]
"""World, how-to and advice questions and requests: none is a memory question."""

MODEL_FILLERS = ["Tell me a fun fact about owls.", "Give me a tip for staying focused.",
                 "Why do leaves change colour in autumn?", "What is a good breakfast before a run?"]
LOCAL_FILLERS = ["What is 17 times 23?", "What time is it?", "What's 15 percent of 80?"]
COVERAGES = (0.5, 0.67, 1.0)
_UNKNOWN = re.compile(r"can't find anything|don't know|do not know|not sure|no information|"
                      r"don't have|do not have|cannot|can't|unable", re.IGNORECASE)


def reply_text(talk: Conversation, text: str) -> str:
    done = talk.reply(text, lambda event: None)
    return done.text if isinstance(done, ReplyDone) else ""


def _plain(text: str) -> str:
    return re.sub(r"[^a-z0-9:]", "", text.lower())


def verdict(reply: str, key: str, statement_seq: int) -> str:
    """"right", "false" or "nothing" for one answer."""
    # "You told me in message 3: …", "In message 3, you said: …", "You mentioned it
    # today at 09:12, in message 3: …"
    quoted = re.search(r"\bin message (\d+)", reply, re.IGNORECASE)
    if quoted:  # presented as what the user said: right only if it is the statement
        return "right" if int(quoted[1]) == statement_seq else "false"
    if _plain(key) in _plain(reply):
        return "right"
    return "nothing" if not reply or _UNKNOWN.search(reply) else "false"


def converse(talk: Conversation, pair: Pair, index: int) -> int:
    """The conversation up to the question; the statement's message number."""
    distractor = pair.distractor or PAIRS[(index + 7) % len(PAIRS)].statement
    turns = [pair.statement, MODEL_FILLERS[index % len(MODEL_FILLERS)], distractor,
             LOCAL_FILLERS[index % len(LOCAL_FILLERS)]]
    if index % 2:  # half the conversations name the distractor first
        turns = [distractor, MODEL_FILLERS[index % len(MODEL_FILLERS)], pair.statement,
                 LOCAL_FILLERS[index % len(LOCAL_FILLERS)]]
    seq = 0
    for turn in turns:
        reply_text(talk, turn)
        if turn == pair.statement:
            seq = next(m.seq for m in talk.history.messages if m.content == pair.statement)
    return seq


def ask(talk: Conversation, question: str, memory: bool, matcher) -> str:
    twin = talk.fork()
    twin.local = LocalIntents(matcher, memory_questions=memory)
    return reply_text(twin, question)


def coverage_sweep(talk: Conversation, question: str) -> dict[float, int | None]:
    """The message each coverage threshold would quote (None: nothing found)."""
    asked = memory_question(question)
    if asked is None:
        return dict.fromkeys(COVERAGES)
    said = [m for m in talk.history.messages if m.tool != HISTORY]
    output = history_tool(HistorySearch(said)).run(search_arguments(asked))
    found = {}
    for needed in COVERAGES:
        hit = recalled(asked, output.value, needed)
        found[needed] = hit.message.seq if hit else None
    return found


def hear(questions: list[str], stt, tts) -> list[str]:
    """Each question said by Piper and written down by Whisper."""
    from tests.support.spoken import spoken_clip

    return [stt.transcribe(spoken_clip(tts, text)).text.strip() for text in questions]


def show(label: str, marks: list[str]) -> str:
    counts = Counter(marks)
    return (f"{label}: {counts['right']}/{len(marks)} right, {counts['false']} false, "
            f"{counts['nothing']} nothing found")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory_questions",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=len(PAIRS), help="pairs to run")
    parser.add_argument("--typed", action="store_true", help="typed questions only")
    parser.add_argument("--llm-model", type=Path, help="a GGUF file instead of the embedded "
                                                       "model")
    parser.add_argument("--llm-url", help="an OpenAI-compatible server instead")
    parser.add_argument("--ctx", type=int, default=default_of("ctx"), help="context size")
    parser.add_argument("--answer-tokens", type=int, default=default_of("answer_tokens"))
    args = parser.parse_args(argv)

    from assistant.session.builder import chat_session
    from assistant.session.engines import Loaded, load_model, load_stt, load_tts

    settings = Settings(model=ModelSettings(llm_model=args.llm_model, llm_url=args.llm_url,
                                            ctx=args.ctx, answer_tokens=args.answer_tokens))
    started = time.monotonic()
    model = load_model(settings.model)
    matcher = IntentMatcher()
    pairs = PAIRS[:args.limit]
    spoken = [] if args.typed else hear([p.question for p in pairs] + WORLD,
                                        load_stt(settings.speech), load_tts(settings.speech))
    heard, world_heard = spoken[:len(pairs)], spoken[len(pairs):]
    print(f"Engines loaded, questions spoken and heard in {time.monotonic() - started:.0f} s "
          f"({model.name}, {len(pairs)} pairs)")

    marks: dict[tuple[str, bool], list[str]] = {}
    sweep: dict[float, list[str]] = {needed: [] for needed in COVERAGES}
    wrong: list[str] = []
    baseline: list[str] = []
    for index, pair in enumerate(pairs):
        # Each pair its own session, as `parley chat` builds one, on the model loaded once.
        with chat_session(settings, warn, loaded=Loaded(model)) as session:
            talk = session.conversation
            seq = converse(talk, pair, index)
            asked = [("typed", pair.question)] + ([("spoken", heard[index])] if heard else [])
            for how, question in asked:
                for memory in (True, False):
                    reply = ask(talk, question, memory, matcher)
                    mark = verdict(reply, pair.key, seq)
                    marks.setdefault((how, memory), []).append(mark)
                    if memory and mark != "right":
                        wrong.append(f"{how} {question!r} (statement #{seq}): {mark}: "
                                     f"{reply[:110]!r}")
                    if not memory and how == "typed" and len(baseline) < 6:
                        baseline.append(f"{question!r} → {mark}: "
                                        f"{' '.join(reply.split())[:90]!r}")
            found_by_coverage = coverage_sweep(talk, pair.question)
        print(f"\r  {index + 1}/{len(pairs)} conversations", end="", file=sys.stderr, flush=True)
        for needed, found in found_by_coverage.items():
            sweep[needed].append("nothing" if found is None else
                                 "right" if found == seq else "false")

    print("\nMemory questions (Parley: memory questions answered from the conversation | "
          "switched off: the model answers)")
    for how in ("typed", "spoken"):
        if (how, True) in marks:
            print(f"  {show(how + ', memory questions on', marks[(how, True)])}")
            print(f"  {show(how + ', switched off     ', marks[(how, False)])}")
    for line in wrong:
        print(f"    not right: {line}")
    for line in baseline:
        print(f"    switched off, for example: {line}")
    print("\nShare of the question's concepts a statement must cover (typed, same conversations)")
    for needed in COVERAGES:
        print(f"  {needed:4.2f}: {show('', sweep[needed])[2:]}")

    print(f"\nWorld and how-to questions taken for memory questions ({len(WORLD)} questions)")
    local = LocalIntents(matcher)
    for how, texts in (("typed", WORLD), ("spoken", world_heard)):
        if not texts:
            continue
        taken = [t for t in texts if (a := local.answer(t)) and a.intent == MEMORY_INTENT]
        print(f"  {how}: {len(taken)} of {len(texts)}" + (f": {taken}" if taken else ""))
    if heard:
        misheard = [(p.question, h) for p, h in zip(pairs, heard, strict=True)
                    if _plain(p.question) != _plain(h)]
        print(f"\nSpoken questions Whisper wrote differently: {len(misheard)} of {len(pairs)}")
        for said, written in misheard:
            print(f"  {said!r} → {written!r}")


if __name__ == "__main__":
    main()
