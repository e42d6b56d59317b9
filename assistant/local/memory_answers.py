"""Answering a memory question from what the user said, never from a guess.

The question's content words go to the `conversation_history` tool as a search of the
user's messages (the trace a model's call would leave). Of the messages it finds, the
answer is the first whose statements (not its questions: "What is my name?" holds no
name) cover every concept of the question, a concept being a word of the question or one
of its few listed synonyms ("old" ~ "age", "turned"), matched by stem as the search
matches ("parking" ~ "parked"). Parley then quotes the sentences that hold the match:
"You told me in message 3: “I parked the car on level 3, spot 42.”" If no statement
covers the question, it says so and guesses nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from assistant.local.memory_questions import MemoryQuestion, past
from assistant.sentences import split_sentences
from assistant.tools import ToolOutput
from memory.history import Message
from memory.ranking import is_question
from memory.scan import Term, match_weight, stem, words
from memory.search import Passage

SPELLINGS: tuple[frozenset[str], ...] = tuple(frozenset(group.split()) for group in (
    "favourite favorite", "colour color", "grey gray", "mum mom", "licence license",
    "centre center", "theatre theater", "neighbour neighbor", "wifi wi-fi", "email e-mail",
    "metre meter", "litre liter", "jewellery jewelry", "pyjamas pajamas", "programme program",
    "travelling traveling", "cheque check", "postcode zipcode", "ok okay",
))
"""One word spelt two ways: typed "favourite colour", Whisper writes "favorite color".
Each counts as the word itself, and the search looks for both."""

SYNONYMS: tuple[frozenset[str], ...] = tuple(frozenset(group.split()) for group in (
    "name called call named",
    "old age aged years turned turns born",
    "birthday born birth",
    "live lives address home moved",
    "work job works employer office",
    "favourite favorite",
    "colour color",
    "wifi wireless network",
    "password passcode passphrase",
    "code combination pin passcode",
    "phone mobile cell",
    "staying stay booked room",
    "hotel motel inn hostel airbnb",
    "flight fly flying plane airline",
    "car vehicle",
    "doctor dr gp physician",
    "kid kids child children",
    "wife spouse partner",
    "husband spouse partner",
    "mom mum mother",
    "dad father",
    "appointment booked booking scheduled",
    "allergic allergy allergies",
    "spot space bay level",
    "long hours hour minutes takes",
    "tall height cm feet metres meters",
    "far away km miles distance",
))
"""Words a statement may use for a word of the question; each line is one concept."""

WEAK_WORDS = frozenset(
    "number day date place tonight today tomorrow yesterday now currently week weekend "
    "exactly usually".split())
"""Words a question often adds that its answer rarely repeats ("what's my flight
number" → "my flight is BA 117"): a statement need not cover them, unless they are all
the question has."""

COVERAGE_NEEDED = 1.0
"""Share of the question's concepts a statement must cover to be quoted. Measured with
`benchmarks.memory_questions`: at 0.5 "What's my dog called?" took "My wife's name is
Priya."; 0.67 did as well as 1.0 there but lets three words pass with two ("where do I keep
my spare glasses" would take "I keep my spare key under the mat")."""

_NUMBER_WORDS = (r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
                 r"thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|"
                 r"thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|dozen|"
                 r"half|a couple)\b")
ANSWER_SHAPES = {
    "number": re.compile(_NUMBER_WORDS, re.IGNORECASE),
    # A clock time, a date, a day: "at 4:30", "7 pm", "the 14th", "on 3/5", "at six",
    # "Friday", "May", "tomorrow"; not any number ("flight BA 117").
    "time": re.compile(
        r"\d:\d\d|\d\s*(?:am|pm|a\.m|p\.m)\b|\d(?:st|nd|rd|th)\b|\d/\d|\b(?:at|by|from|until) "
        r"(?:\d|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|half|quarter)"
        r"|\bin (?:\d+|a|an|one|two|three|four|five|ten) (?:minutes?|hours?|days?|weeks?)\b"
        r"|\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
        r"january|february|march|april|may|june|july|august|september|october|november|"
        r"december|today|tonight|tomorrow|yesterday|morning|afternoon|evening|noon|midnight|"
        r"week|weekend|month|year|o'clock|am|pm|christmas|easter)\b", re.IGNORECASE),
}
"""What an answer to "when…" or "how many…" holds: a statement without it is not one."""

QUOTE_CHARS = 220
"""At most this much of a statement is quoted; a longer one is cut around the match."""

_REQUEST = re.compile(
    r"^(?:please |can you |could you |would you )?(?:tell|give|suggest|write|explain|describe|"
    r"list|show|recommend|help|find|translate|summarize|summarise|make|create|set|calculate|"
    r"say|read|play|stop|cancel|search|look|check|add|send|book|compare|define)\b",
    re.IGNORECASE)
"""A request ("Suggest a name for a goldfish.") states nothing about the user, though it
may share the question's words. "Remember that my code is 4512" and "Call me Sam" are not
one."""

_ASK_AFTER_COMMA = re.compile(
    r",\s+(?=(?:what|where|when|who|which|how|why|do|does|did|can|could|would|will|is|are)"
    r"\b[^.!?]*\?\s*$)", re.IGNORECASE)
"""A question at the end of a statement ("My name is Sam, what's yours?"); a relative
clause (", which was a relief.") ends as a statement does and stays."""


@dataclass(frozen=True)
class Recalled:
    """The statement that answers a memory question."""

    message: Message
    quote: str
    """The sentences of `message` that hold the match, cut if long."""


@dataclass(frozen=True)
class Concept:
    """A word of the question, as a statement may say it."""

    own: frozenset[str]
    """The word itself (and its past tense: "leave" → "left")."""
    forms: frozenset[str]
    """…and its listed synonyms."""


def concepts(question_words: Sequence[str]) -> list[Concept]:
    """Each word of the question with its synonyms; the weak words only if nothing else."""
    strong = [w for w in question_words if w not in WEAK_WORDS] or list(question_words)
    found = []
    for word in strong:
        # "where did I leave my umbrella" → "I left it at Maria's": the past tense too.
        own = {word, word.replace("-", ""), past(word)}
        own |= _spellings(word)
        forms = set(own)
        for group in SYNONYMS:
            if word in group:
                forms |= group
        found.append(Concept(frozenset(own), frozenset(forms)))
    return found


def _spellings(word: str) -> set[str]:
    return set().union(*(group for group in SPELLINGS if word in group))


def _tokens(sentence: str) -> set[str]:
    tokens = set(words(sentence))
    return tokens | {t.replace("-", "").replace("'s", "") for t in tokens}


def _covers(tokens: set[str], forms: frozenset[str]) -> bool:
    for form in forms:
        term = Term(form, stem(form))
        if any(match_weight(token, term) > 0 for token in tokens):
            return True
    return False


def statements(text: str) -> list[str]:
    """The sentences of a message that state something; its questions and requests are
    left out ("My name is Sam, what's yours?" → "My name is Sam")."""
    found = []
    for sentence in split_sentences(text):
        for part in _ASK_AFTER_COMMA.split(sentence):
            part = part.strip()
            if part and not is_question(part) and not _REQUEST.match(part):
                found.append(part)
    return found


def recalled(question: MemoryQuestion, passages: Sequence[Passage],
             needed: float = COVERAGE_NEEDED) -> Recalled | None:
    """The first message among `passages` (best first) whose statements cover at least
    `needed` of the question's concepts, with what to quote of it."""
    wanted = concepts(question.words)
    if not wanted:
        return None
    seen: set[int] = set()
    for passage in passages:
        message = passage.message
        if message.seq in seen or message.role != "user":
            continue
        seen.add(message.seq)
        said = statements(message.content)
        tokens = [_tokens(s) for s in said]
        covered_by = [{i for i, concept in enumerate(wanted) if _covers(t, concept.forms)}
                      for t in tokens]
        covered = set().union(*covered_by) if covered_by else set()
        # At least one word of the question itself, not only a synonym: "My dog is called
        # Biscuit" says no name of the user's.
        own = any(_covers(t, concept.own) for t in tokens for concept in wanted)
        if not own or len(covered) / len(wanted) < needed:
            continue
        quote = _quote(said, covered_by, wanted)
        shape = ANSWER_SHAPES.get(question.expects or "")
        if shape is None or shape.search(quote):
            return Recalled(message, quote)
    return None


def _quote(said: list[str], covered_by: list[set[int]], wanted: list[Concept]) -> str:
    """The sentences from the first to the last that hold a match, if they fit; else the
    one that holds the most, cut around its first match."""
    holding = [i for i, covered in enumerate(covered_by) if covered]
    last = holding[-1]
    # A fragment of three words or fewer after it is the sentence's end, cut off after an
    # abbreviation the splitter took for one ("My teacher is Mrs." + "Lindqvist.").
    if last + 1 < len(said) and len(said[last + 1].split()) <= 3:
        last += 1
    span = " ".join(said[holding[0]:last + 1])
    if len(span) <= QUOTE_CHARS:
        return span
    best = max(holding, key=lambda i: (len(covered_by[i]), -i))
    sentence = said[best]
    if len(sentence) <= QUOTE_CHARS:
        return sentence
    lowered = sentence.lower()
    anchor = min((lowered.find(form) for concept in wanted for form in concept.forms
                  if lowered.find(form) >= 0), default=0)
    start = max(0, min(anchor - QUOTE_CHARS // 3, len(sentence) - QUOTE_CHARS))
    if start:
        start = sentence.find(" ", start) + 1
    cut = sentence[start:start + QUOTE_CHARS]
    if start + QUOTE_CHARS < len(sentence):
        cut = cut.rsplit(" ", 1)[0] + "…"
    return ("…" if start else "") + cut


def search_arguments(question: MemoryQuestion) -> dict:
    """The `conversation_history` call: the question's words (each way it is spelt), in
    what the user said."""
    words = list(question.words)
    for word in question.words:
        words += sorted(_spellings(word) - set(words))
    return {"query": " ".join(words), "speaker": "user"}


def spoken_memory(question: MemoryQuestion,
                  needed: float = COVERAGE_NEEDED) -> Callable[[ToolOutput], str]:
    """What Parley says, from the search's output."""
    def speak(output: ToolOutput) -> str:
        passages = () if output.error is not None else output.value
        found = recalled(question, passages, needed)
        if found is None:
            return f"I can't find anything in this conversation about {question.topic}."
        return f"You told me in message {found.message.seq}: “{found.quote}”"
    return speak
