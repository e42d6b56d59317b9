"""Finding a query's words in messages without indexing them first.

A search is usually the first look at its messages (the public API is handed messages
it has never seen, and a resumed conversation starts cold), so nothing is tokenized or
stemmed ahead of time. Instead each query word is looked for as a literal stretch of
the lowercased text (CPython's fast substring search runs at memory speed), and only
the words found there are cut out and stemmed to decide whether they match. A word
with a stem of its own is found by its stem's first letters, so "billing" finds "bills"
and "city" finds "cities".

Each message is seen through 700-character windows overlapping by half, so no place is
split between two windows; a hit at character p lies in windows p//350 - 1 and p//350.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import Stemmer

from memory.history import Message

WINDOW_CHARS = 700
WINDOW_STEP = WINDOW_CHARS // 2
STEM_PREFIX_SLACK = 3
"""Stemming rewrites at most a stem's last three letters ("relational" → "relat",
"cities" → "citi"), and fewer of a short one: words sharing a stem share the rest."""

_WORD = re.compile(r"[^\W_]+(?:[_.'-][^\W_]+)*")
_PART = re.compile(r"[^\W_]+")
_stemmer = Stemmer.Stemmer("english")
STOPWORDS = frozenset(
    "a an and are as at be by did do does for from had has have he her his how i if in is "
    "it its me my of on or our she so that the their them then there they this to was we "
    "were what when where which who why will with you your said say tell about earlier "
    "again please".split()
)


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    return _stemmer.stemWord(word)


def words(text: str) -> list[str]:
    """Lowercase words in text order; identifiers such as billing_api or v2.1 count whole
    and by their parts."""
    lowered = text.lower()
    parts = [(m.start(), m.group()) for m in _PART.finditer(lowered)]
    compounds = [(m.start(), m.group()) for m in _WORD.finditer(lowered)
                 if not m.group().isalnum()]
    return [word for _, word in sorted(parts + compounds)]


def lowered(text: str) -> str:
    """`text` in lowercase, character for character, so positions stay the same."""
    low = text.lower()
    if len(low) == len(text):
        return low
    # A few characters lowercase to two ("İ"): those stay as they are.
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in text)


def window_count(length: int) -> int:
    return len(range(0, max(length - WINDOW_STEP, 1), WINDOW_STEP))


def window_bounds(length: int, number: int) -> tuple[int, int]:
    start = number * WINDOW_STEP
    return start, min(start + WINDOW_CHARS, length)


@dataclass(frozen=True)
class Term:
    """One word of a query, how it is looked for and how much it weighs."""

    word: str
    stem: str
    weight: float = 0.0
    """Inverse document frequency over all windows: rarer words weigh more."""

    @property
    def compound(self) -> bool:
        return not self.word.isalnum()

    @property
    def prefix(self) -> str:
        """The literal every word with this stem starts with."""
        if self.compound:
            return self.word
        shared = 0
        for a, b in zip(self.word, self.stem, strict=False):
            if a != b:
                break
            shared += 1
        slack = min(STEM_PREFIX_SLACK, max(len(self.stem) - 3, 0))
        return self.stem[:max(min(shared, len(self.stem) - slack), 2)] or self.word


_CONTRACTION = re.compile(r"'(?:s|t|d|ll|re|ve|m)$")


def query_terms(query: str) -> list[Term]:
    """The query's words that say something, each once, in order ("what's" is "what")."""
    unique = dict.fromkeys(_CONTRACTION.sub("", w) for w in words(query))
    return [Term(word, stem(word)) for word in unique
            if word not in STOPWORDS and word not in _CONTRACTION_PARTS]


_CONTRACTION_PARTS = frozenset("s t d ll re ve m".split())

STEM_MATCH_WEIGHT = 0.6
"""A word that only shares the query word's stem counts for this much of an exact one…"""
RELATED_MATCH_WEIGHT = 0.4
"""…and one whose stem begins with the other's ("supervisor", "supervises") this much."""
RELATED_STEM_CHARS = 5
"""The shorter stem must be this long for that: "bill" must not find "billion"."""


def match_weight(token: str, term: Term) -> float:
    """How much `token` counts as an occurrence of `term` (0: not at all)."""
    if token == term.word:
        return 1.0
    if term.compound:
        return 0.0
    other = stem(token)
    if other == term.stem:
        return STEM_MATCH_WEIGHT
    shorter, longer = sorted((other, term.stem), key=len)
    if len(shorter) >= RELATED_STEM_CHARS and longer.startswith(shorter):
        return RELATED_MATCH_WEIGHT
    return 0.0


Hits = dict[int, dict[int, float]]
"""Message position → window number → the term's occurrences there, each by its weight."""


class Corpus:
    """The lowercased text of some messages, one string, and where each message starts."""

    def __init__(self, messages: Sequence[Message],
                 lower: Callable[[Message], str] = lambda m: lowered(m.content)) -> None:
        self.messages = list(messages)
        texts = [lower(m) for m in self.messages]
        self.starts: list[int] = []
        offset = 0
        for text in texts:
            self.starts.append(offset)
            offset += len(text) + 1
        self.text = "\n".join(texts)
        self.lengths = [len(m.content) for m in self.messages]
        self.window_counts = [window_count(n) for n in self.lengths]
        self.windows = sum(self.window_counts)
        # All windows but a message's last are full; the last runs to the message's end.
        self.average_window = sum(
            (count - 1) * WINDOW_CHARS + length - (count - 1) * WINDOW_STEP
            for length, count in zip(self.lengths, self.window_counts, strict=True)
        ) / max(self.windows, 1) or 1.0
        # A tool result is also found by what it was asked, as if said in its first window.
        asked = [(i, lowered(f"{m.tool or ''} {m.query}")) for i, m in enumerate(self.messages)
                 if m.query]
        self.asked_owner = [i for i, _ in asked]
        self.asked_starts: list[int] = []
        offset = 0
        for _, text in asked:
            self.asked_starts.append(offset)
            offset += len(text) + 1
        self.asked_text = "\n".join(text for _, text in asked)

    def hits(self, term: Term) -> Hits:
        found: Hits = {}
        text, starts, counts = self.text, self.starts, self.window_counts
        step, size = WINDOW_STEP, WINDOW_CHARS
        owner, next_start, windows = -1, 0, {}
        weights: dict[str, float] = {}
        # One loop over the matches, the hottest in a search: `_occurrences` inlined.
        for match in _literal(term.prefix, term.compound).finditer(text):
            position = match.start()
            if position and text[position - 1].isalnum():
                continue  # inside another word
            token = match.group()
            weight = weights.get(token)
            if weight is None:
                weight = weights[token] = match_weight(token, term)
            if not weight:
                continue
            # Matches come in text order, so the message they are in only moves forward.
            if position >= next_start:
                owner = bisect_right(starts, position) - 1
                next_start = starts[owner + 1] if owner + 1 < len(starts) else len(text)
                windows = found.setdefault(owner, {})
            relative = position - starts[owner]
            high = relative // step
            last = counts[owner] - 1
            if high > last:
                high = last
            if high and (high - 1) * step + size > relative:
                windows[high - 1] = windows.get(high - 1, 0.0) + weight
            windows[high] = windows.get(high, 0.0) + weight
        for position, weight in _occurrences(self.asked_text, term):
            owner = self.asked_owner[bisect_right(self.asked_starts, position) - 1]
            windows = found.setdefault(owner, {})
            windows[0] = windows.get(0, 0.0) + weight
        return found


def _occurrences(text: str, term: Term) -> list[tuple[int, float]]:
    """(position, weight) of every word in `text` matching `term` (`match_weight`)."""
    if not text:
        return []
    weights: dict[str, float] = {}
    found = []
    pattern = _literal(term.prefix, term.compound)
    for match in pattern.finditer(text):
        position = match.start()
        if position and text[position - 1].isalnum():
            continue  # inside another word
        token = match.group()
        weight = weights.get(token)
        if weight is None:
            weight = weights[token] = match_weight(token, term)
        if weight:
            found.append((position, weight))
    return found


@lru_cache(maxsize=1024)
def _literal(prefix: str, compound: bool) -> re.Pattern[str]:
    # Starting with a literal lets the regex engine skip ahead at memory speed; the rest
    # takes the word to its end. A compound must not run on into a longer identifier.
    if compound:
        return re.compile(re.escape(prefix) + r"(?![^\W_]|[_.'-][^\W_])")
    return re.compile(re.escape(prefix) + r"[^\W_]*")
