"""Looking back through one conversation: lexical search and exact reading by number.

Search is lexical because people refer back with the words a message used, often
identifiers and numbers in pasted text. Each message is cut into 700-character
windows (overlapping by half, so no place is split between two windows); a window
scores the query's words it holds, rarer words weighted more, an exact word counting
more than one that only shares its stem. The best two messages show up to three
places each, so a long paste shows both the place that names it and the one asked
about.

Messages never change once said, so each message's index is kept (`SearchIndexCache`)
and a reply's search only indexes what was added since the last one. A search still
sees only the messages handed to it.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import Stemmer

from memory.history import Message

WINDOW_CHARS = 700
WINDOW_STEP = WINDOW_CHARS // 2
OUTPUT_CHARS = 4000
PAGE_CHARS = 4000
"""Characters of a message read by number, at most: fewer when its header and footer
need the room, since the whole answer stays within OUTPUT_CHARS."""
QUOTED_QUERY_CHARS = 200
BEST_MESSAGES = 2
PLACES_PER_MESSAGE = 3
SECOND_PLACE_SHARE = 0.34
"""Further places of a message are shown only when they score this share of its best."""
STEM_MATCH_WEIGHT = 0.6
"""A word that only shares the query word's stem counts for this much of an exact one."""

_WORD = re.compile(r"[^\W_]+(?:[_.'-][^\W_]+)*")
_STOPWORDS = frozenset(
    "a an and are as at be by did do does for from had has have he her his how i if in is "
    "it its me my of on or our she so that the their them then there they this to was we "
    "were what when where which who why will with you your said say tell about earlier "
    "again please".split()
)
_stemmer = Stemmer.Stemmer("english")


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _stemmer.stemWord(word)


_PART = re.compile(r"[^\W_]+")


def _tokens(text: str) -> list[tuple[int, str]]:
    """(position, lowercase word), in text order; identifiers such as billing_api or v2.1
    count whole and by their parts."""
    lowered = text.lower()
    parts = [(m.start(), m.group()) for m in _PART.finditer(lowered)]
    compounds = [(m.start(), m.group()) for m in _WORD.finditer(lowered)
                 if not m.group().isalnum()]
    if not compounds:
        return parts
    return sorted(parts + compounds)


def words(text: str) -> list[str]:
    return [word for _, word in _tokens(text)]


@dataclass
class MessageIndex:
    """One message's windows and, for each stem, the windows and exact words holding it."""

    seq: int
    windows: list[tuple[int, int]]
    by_stem: dict[str, dict[int, frozenset[str]]] = field(default_factory=dict)


def index_message(message: Message) -> MessageIndex:
    text = message.content
    starts = list(range(0, max(len(text) - WINDOW_STEP, 1), WINDOW_STEP)) or [0]
    windows = [(start, min(start + WINDOW_CHARS, len(text))) for start in starts]
    tokens = _tokens(text)
    positions = [position for position, _ in tokens]
    extra = words(f"{message.tool or ''} {message.query}") if message.query else []
    stems = dict(zip(*(lambda u: (u, _stemmer.stemWords(u)))(
        list({w for _, w in tokens} | set(extra))), strict=True))
    collected: dict[str, dict[int, set[str]]] = {}
    for number, (start, end) in enumerate(windows):
        # Tokens are in text order, so a window's are one slice of the list.
        first, last = bisect_left(positions, start), bisect_left(positions, end)
        present = {word for _, word in tokens[first:last]}
        if number == 0:
            present.update(extra)  # a tool result is found by what it was asked
        for word in present:
            collected.setdefault(stems[word], {}).setdefault(number, set()).add(word)
    index = MessageIndex(message.seq, windows)
    index.by_stem = {stem: {n: frozenset(ws) for n, ws in hits.items()}
                     for stem, hits in collected.items()}
    return index


class SearchIndexCache:
    """Per-message indexes of one conversation, reused from reply to reply."""

    def __init__(self) -> None:
        self._indexes: dict[tuple[int, str], MessageIndex] = {}

    def get(self, message: Message) -> MessageIndex:
        key = (message.seq, message.content)
        index = self._indexes.get(key)
        if index is None:
            index = self._indexes[key] = index_message(message)
        return index

    def forget_missing(self, messages: Sequence[Message]) -> None:
        """Drop indexes of messages no longer in the conversation (after /clear)."""
        alive = {(m.seq, m.content) for m in messages}
        for key in [k for k in self._indexes if k not in alive]:
            del self._indexes[key]


@dataclass(frozen=True)
class Place:
    seq: int
    start: int
    end: int
    score: float


@dataclass(frozen=True)
class QueryTerm:
    word: str
    stem: str
    weight: float
    """Inverse document frequency over all windows: rarer words weigh more."""


class HistorySearch:
    """Search over exactly the messages handed in; build one per reply."""

    def __init__(self, messages: Sequence[Message], cache: SearchIndexCache | None = None) -> None:
        self.messages = {m.seq: m for m in messages}
        self.cache = cache or SearchIndexCache()
        self._indexes: list[MessageIndex] | None = None
        self._window_count = 0
        self._terms: dict[str, list[QueryTerm]] = {}

    @property
    def indexes(self) -> list[MessageIndex]:
        """Built on the first search, so reading a message by number indexes nothing."""
        if self._indexes is None:
            self._indexes = [self.cache.get(m) for m in self.messages.values()]
            self._window_count = sum(len(i.windows) for i in self._indexes)
        return self._indexes

    def terms(self, query: str) -> list[QueryTerm]:
        cached = self._terms.get(query)
        if cached is not None:
            return cached
        unique = dict.fromkeys(w for w in words(query) if w not in _STOPWORDS)
        terms = []
        for word in unique:
            stem = _stem(word)
            df = sum(len(index.by_stem.get(stem, ())) for index in self.indexes)
            if df:
                weight = math.log(1 + self._window_count / df)
                terms.append(QueryTerm(word, stem, weight))
        self._terms[query] = terms
        return terms

    def places(self, query: str) -> list[list[Place]]:
        """The best messages' best places, best first."""
        terms = self.terms(query)
        scored: list[tuple[float, int, dict[int, float], MessageIndex]] = []
        for index in self.indexes:
            window_scores: dict[int, float] = {}
            for term in terms:
                hits = index.by_stem.get(term.stem)
                if hits:
                    for number, exact in hits.items():
                        gain = term.weight if term.word in exact else \
                            term.weight * STEM_MATCH_WEIGHT
                        window_scores[number] = window_scores.get(number, 0.0) + gain
            if window_scores:
                scored.append((max(window_scores.values()), index.seq, window_scores, index))
        # Messages rank by their best place; only the best few need their places chosen.
        scored.sort(key=lambda item: (-item[0], -item[1]))
        ranked = []
        for _, _, window_scores, index in scored[:BEST_MESSAGES * 3]:
            chosen = self._choose_places(index, window_scores)
            rank = chosen[0].score + 0.1 * sum(p.score for p in chosen[1:])
            ranked.append((rank, index.seq, sorted(chosen, key=lambda p: p.start)))
        ranked.sort(key=lambda item: (-item[0], -item[1]))
        return [places for _, _, places in ranked[:BEST_MESSAGES]]

    @staticmethod
    def _choose_places(index: MessageIndex, window_scores: dict[int, float]) -> list[Place]:
        ordered = sorted(window_scores.items(), key=lambda item: (-item[1], item[0]))
        chosen: list[Place] = []
        for number, score in ordered:
            if chosen and score < SECOND_PLACE_SHARE * chosen[0].score:
                break
            start, end = index.windows[number]
            if any(start < p.end and p.start < end for p in chosen):
                continue  # overlapping windows show the same place twice
            chosen.append(Place(index.seq, start, end, score))
            if len(chosen) == PLACES_PER_MESSAGE:
                break
        return chosen

    def best_passage(self, query: str, limit: int) -> tuple[Place, float] | None:
        """The single best place and the share of the query's weight it matched (0–1)."""
        terms = self.terms(query)
        total = sum(t.weight for t in terms)
        found = self.places(query)
        if not found or not total:
            return None
        place = max(found[0], key=lambda p: p.score)
        if place.end - place.start > limit:
            place = Place(place.seq, place.start, place.start + limit, place.score)
        return place, place.score / total

    def search(self, query: str) -> str:
        found = self.places(query)
        # A pasted query is quoted shortened: the answer keeps within OUTPUT_CHARS.
        quoted = query if len(query) <= QUOTED_QUERY_CHARS else \
            query[:QUOTED_QUERY_CHARS].rstrip() + "…"
        if not found:
            return (f"Nothing earlier in this conversation matches “{quoted}”. "
                    "Try other words, or read a message by its number.")
        header = f"Earlier in this conversation, for “{quoted}”:"
        footer = 'Read a whole message with {"message": N}.'
        count = sum(len(places) for places in found)
        room = OUTPUT_CHARS - len(header) - len(footer) - 2
        per_place = max(room // count - 60, 80)
        terms = self.terms(query)
        parts = [header]
        for places in found:
            message = self.messages[places[0].seq]
            for place in places:
                start, end = focus(message.content, place, terms, per_place)
                snippet = message.content[start:end].strip()
                where = "" if len(message.content) <= WINDOW_CHARS else (
                    f", characters {start:,}–{end:,} of {len(message.content):,}")
                parts.append(f"#{message.seq} ({describe(message)}{where}): {snippet}")
        parts.append(footer)
        return "\n".join(parts)[:OUTPUT_CHARS]

    def read(self, seq: int, offset: int = 0) -> str:
        message = self.messages.get(seq)
        if message is None:
            known = sorted(self.messages)
            have = f"#{known[0]}–#{known[-1]}" if known else "none"
            return f"There is no earlier message #{seq}. Earlier messages: {have}."
        total = len(message.content)
        if offset < 0 or (offset >= total and total):
            return (f"Message #{seq} has {total:,} characters; "
                    f"offset {offset:,} is outside it. Start at 0.")
        # The page gives up the room of its header and footer: the whole answer keeps
        # within OUTPUT_CHARS, so a tool result is never cut before the next offset.
        size = PAGE_CHARS
        while True:
            text = _page(message, offset, size)
            if len(text) <= OUTPUT_CHARS or size == 1:
                return text
            size = max(1, size - (len(text) - OUTPUT_CHARS))


def _page(message: Message, offset: int, size: int) -> str:
    """`size` characters of `message` from `offset`, with where they are and what follows."""
    seq, total = message.seq, len(message.content)
    page = message.content[offset:offset + size]
    end = offset + len(page)
    header = f"#{seq} ({describe(message)}), characters {offset:,}–{end:,} of {total:,}:"
    if end < total:
        footer = f'[continues: read {{"message": {seq}, "offset": {end}}}]'
    else:
        footer = "[end of message]"
    return f"{header}\n{page}\n{footer}"


def focus(text: str, place: Place, terms: list[QueryTerm], limit: int) -> tuple[int, int]:
    """The part of a place to show when all of it does not fit: around its rarest match."""
    if place.end - place.start <= limit:
        return place.start, place.end
    best: tuple[float, int] | None = None
    for match in _WORD.finditer(text, place.start, place.end):
        token = match.group().lower()
        for term in terms:
            if token == term.word or _stem(token) == term.stem:
                if best is None or term.weight > best[0]:
                    best = (term.weight, match.start())
    anchor = best[1] if best else place.start
    start = max(place.start, min(anchor - limit // 3, place.end - limit))
    return start, start + limit


def describe(message: Message) -> str:
    if message.role == "tool":
        return f"{message.tool} result for “{message.query}”" if message.query else \
            f"{message.tool} result"
    return message.role


def search_history(messages: Sequence[Message], query: str) -> str:
    """Search `messages` for `query`; at most 4,000 characters, places labelled #N."""
    return HistorySearch(messages).search(query)


def read_message(messages: Sequence[Message], seq: int, offset: int = 0) -> str:
    """Message `seq` exactly, 4,000 characters from `offset`, saying where the next page starts."""
    return HistorySearch(messages).read(seq, offset)
