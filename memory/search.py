"""Looking back through one conversation: lexical search and exact reading by number.

Search is lexical because people refer back with the words a message used, often
identifiers and numbers in pasted text. Each message is cut into 700-character
windows (overlapping by half, so no place is split between two windows); a window
scores the query's words it holds, rarer words weighted more, an exact word counting
more than one that only shares its stem. The best two messages show up to three
places each, so a long paste shows both the place that names it and the one asked
about.

Nothing is indexed ahead: a search finds its words by scanning the messages' text
(`memory.scan`), fast enough from cold for the public API and a resumed conversation.
A search sees only the messages handed to it. Every result says when its message was
said.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from memory.history import Message, local_now, said_at
from memory.ranking import rerank
from memory.scan import (
    STOPWORDS,
    WINDOW_CHARS,
    WINDOW_STEP,
    Corpus,
    Hits,
    Term,
    lowered,
    query_terms,
    stem,
    window_bounds,
)

__all__ = ["STOPWORDS", "WINDOW_CHARS", "WINDOW_STEP", "Found", "HistorySearch", "Passage",
           "SearchIndexCache", "read_message", "search_history"]

OUTPUT_CHARS = 4000
PAGE_CHARS = 4000
"""Characters of a message read by number, at most: fewer when its header and footer
need the room, since the whole answer stays within OUTPUT_CHARS."""
QUOTED_QUERY_CHARS = 200
BEST_MESSAGES = 2
PLACES_PER_MESSAGE = 3
SECOND_PLACE_SHARE = 0.34
"""Further places of a message are shown only when they score this share of its best."""
SATURATION = 0.8
"""BM25's k1: a word said again in a place adds less each time."""
LENGTH_NORMALISATION = 0.5
"""BM25's b: a word in a short message says more than the same word in a long stretch."""

_WORD = re.compile(r"[^\W_]+(?:[_.'-][^\W_]+)*")


class SearchIndexCache:
    """The lowercased text of one conversation's messages, kept from reply to reply
    (messages never change once said)."""

    def __init__(self) -> None:
        self._lowered: dict[tuple[int, str], str] = {}

    def get(self, message: Message) -> str:
        key = (message.seq, message.content)
        text = self._lowered.get(key)
        if text is None:
            text = self._lowered[key] = lowered(message.content)
        return text

    def forget_missing(self, messages: Sequence[Message]) -> None:
        """Drop what belongs to messages no longer in the conversation (after /clear)."""
        alive = {(m.seq, m.content) for m in messages}
        for key in [k for k in self._lowered if k not in alive]:
            del self._lowered[key]


@dataclass(frozen=True)
class Place:
    seq: int
    start: int
    end: int
    score: float


@dataclass(frozen=True)
class Passage:
    """A part of an earlier message, as a search or a read shows it."""

    message: Message
    start: int
    end: int
    text: str
    """What is shown of `message` from `start` to `end` (a search's snippet, trimmed)."""


@dataclass(frozen=True)
class Found:
    """A search's or a read's answer: the text the model reads and the passages it shows,
    in order (none when nothing matches or there is no such message)."""

    text: str
    passages: tuple[Passage, ...] = ()


class HistorySearch:
    """Search over exactly the messages handed in; build one per reply."""

    def __init__(self, messages: Sequence[Message], cache: SearchIndexCache | None = None,
                 now: datetime | None = None) -> None:
        self.messages = {m.seq: m for m in messages}
        self.now = now or local_now()
        """What "yesterday" and "last week" in a query count from."""
        self.cache = cache or SearchIndexCache()
        self._corpus: Corpus | None = None
        self._hits: dict[Term, Hits] = {}
        self._terms: dict[str, list[Term]] = {}

    @property
    def corpus(self) -> Corpus:
        """Built on the first search, so reading a message by number costs nothing."""
        if self._corpus is None:
            self._corpus = Corpus(list(self.messages.values()), self.cache.get)
        return self._corpus

    def _hits_of(self, term: Term) -> Hits:
        key = replace(term, weight=0.0)
        hits = self._hits.get(key)
        if hits is None:
            hits = self._hits[key] = self.corpus.hits(key)
        return hits

    def terms(self, query: str) -> list[Term]:
        cached = self._terms.get(query)
        if cached is not None:
            return cached
        terms = []
        windows = self.corpus.windows
        for term in query_terms(query):
            df = sum(len(found) for found in self._hits_of(term).values())
            if df:
                weight = math.log(1 + (windows - df + 0.5) / (df + 0.5))
                terms.append(replace(term, weight=weight))
        self._terms[query] = terms
        return terms

    def places(self, query: str) -> list[list[Place]]:
        """The best messages' best places, best first."""
        terms = self.terms(query)
        corpus = self.corpus
        k1, b, average = SATURATION, LENGTH_NORMALISATION, corpus.average_window
        by_message: dict[int, dict[int, float]] = {}
        for term in terms:
            for owner, windows in self._hits_of(term).items():
                scores = by_message.setdefault(owner, {})
                length = corpus.lengths[owner]
                for number, count in windows.items():
                    size = min(WINDOW_CHARS, length - number * WINDOW_STEP)
                    gain = term.weight * count * (k1 + 1) / (
                        count + k1 * (1 - b + b * size / average))
                    scores[number] = scores.get(number, 0.0) + gain
        # A message's words score it by its best place; who said it, when, and the other
        # half of its exchange adjust that (memory.ranking).
        ranked = rerank({owner: max(scores.values()) for owner, scores in by_message.items()},
                        corpus.messages, query, self.now)
        candidates = sorted(ranked, key=lambda o: (-ranked[o], -corpus.messages[o].seq))
        found = []
        for owner in candidates[:BEST_MESSAGES * 3]:
            seq, length = corpus.messages[owner].seq, corpus.lengths[owner]
            scores = by_message.get(owner)
            if scores is None:  # found by its day or its exchange: shown from its start
                places = [Place(seq, *window_bounds(length, 0), 0.0)]
            else:
                places = self._choose_places(seq, length, scores)
            # Among the best, a message with more than one good place goes a little higher.
            more = 0.1 * sum(p.score for p in places[1:])
            found.append((ranked[owner] + more, seq, sorted(places, key=lambda p: p.start)))
        found.sort(key=lambda item: (-item[0], -item[1]))
        return [places for _, _, places in found[:BEST_MESSAGES]]

    @staticmethod
    def _choose_places(seq: int, length: int, window_scores: dict[int, float]) -> list[Place]:
        ordered = sorted(window_scores.items(), key=lambda item: (-item[1], item[0]))
        chosen: list[Place] = []
        for number, score in ordered:
            if chosen and score < SECOND_PLACE_SHARE * chosen[0].score:
                break
            start, end = window_bounds(length, number)
            if any(start < p.end and p.start < end for p in chosen):
                continue  # overlapping windows show the same place twice
            chosen.append(Place(seq, start, end, score))
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
        return self.find(query).text

    def find(self, query: str) -> Found:
        """The search for `query`: at most OUTPUT_CHARS, places labelled #N."""
        found = self.places(query)
        # A pasted query is quoted shortened: the answer keeps within OUTPUT_CHARS.
        quoted = query if len(query) <= QUOTED_QUERY_CHARS else \
            query[:QUOTED_QUERY_CHARS].rstrip() + "…"
        if not found:
            return Found(f"Nothing earlier in this conversation matches “{quoted}”. "
                         "Try other words, or read a message by its number.")
        header = f"Earlier in this conversation, for “{quoted}”:"
        footer = 'Read a whole message with {"message": N}.'
        count = sum(len(places) for places in found)
        room = OUTPUT_CHARS - len(header) - len(footer) - 2
        per_place = max(room // count - 60, 80)
        terms = self.terms(query)
        parts, passages = [header], []
        for places in found:
            message = self.messages[places[0].seq]
            for place in places:
                start, end = focus(message.content, place, terms, per_place)
                snippet = message.content[start:end].strip()
                where = "" if len(message.content) <= WINDOW_CHARS else (
                    f", characters {start:,}–{end:,} of {len(message.content):,}")
                parts.append(f"#{message.seq} ({describe(message)}{where}): {snippet}")
                passages.append(Passage(message, start, end, snippet))
        parts.append(footer)
        return Found("\n".join(parts)[:OUTPUT_CHARS], tuple(passages))

    def read(self, seq: int, offset: int = 0) -> str:
        return self.page(seq, offset).text

    def page(self, seq: int, offset: int = 0) -> Found:
        """Message `seq` from `offset`, as much as fits in OUTPUT_CHARS with where it is."""
        message = self.messages.get(seq)
        if message is None:
            known = sorted(self.messages)
            have = f"#{known[0]}–#{known[-1]}" if known else "none"
            return Found(f"There is no earlier message #{seq}. Earlier messages: {have}.")
        total = len(message.content)
        if offset < 0 or (offset >= total and total):
            return Found(f"Message #{seq} has {total:,} characters; "
                         f"offset {offset:,} is outside it. Start at 0.")
        # The page gives up the room of its header and footer: the whole answer keeps
        # within OUTPUT_CHARS, so a tool result is never cut before the next offset.
        size = PAGE_CHARS
        while True:
            text = _page(message, offset, size)
            if len(text) <= OUTPUT_CHARS or size == 1:
                end = min(total, offset + size)
                return Found(text, (Passage(message, offset, end, message.content[offset:end]),))
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


def focus(text: str, place: Place, terms: list[Term], limit: int) -> tuple[int, int]:
    """The part of a place to show when all of it does not fit: around its rarest match."""
    if place.end - place.start <= limit:
        return place.start, place.end
    best: tuple[float, int] | None = None
    for match in _WORD.finditer(text, place.start, place.end):
        token = match.group().lower()
        for term in terms:
            if token == term.word or stem(token) == term.stem:
                if best is None or term.weight > best[0]:
                    best = (term.weight, match.start())
    anchor = best[1] if best else place.start
    start = max(place.start, min(anchor - limit // 3, place.end - limit))
    return start, start + limit


def describe(message: Message) -> str:
    """Who said a message (or which tool gave it), and when, if known."""
    if message.role == "tool":
        who = f"{message.tool} result for “{message.query}”" if message.query else \
            f"{message.tool} result"
    else:
        who = message.role
    when = said_at(message)
    return f"{who}, {when}" if when else who


def search_history(messages: Sequence[Message], query: str) -> str:
    """Search `messages` for `query`; at most 4,000 characters, places labelled #N."""
    return HistorySearch(messages).search(query)


def read_message(messages: Sequence[Message], seq: int, offset: int = 0) -> str:
    """Message `seq` exactly, 4,000 characters from `offset`, saying where the next page starts."""
    return HistorySearch(messages).read(seq, offset)
