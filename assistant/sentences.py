"""Incremental sentence splitting, so speech can start before the reply is finished."""

from __future__ import annotations

import re

# A sentence ends at . ! ? (optionally closed by quotes or brackets) followed by
# whitespace, or at a line break. "e.g. " and decimals like 3.5 are not ends.
_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\bMr)(?<!\bDr)(?<!\bMs)[.!?…]+[\"')\]]*\s+|\n+")


_CLAUSE = re.compile(r"[,;:–—]\s+")


class SentenceSplitter:
    """Feed text deltas; complete sentences come out as soon as they end.

    With `first_clause_words`, the first piece may also end at a comma, semicolon, colon
    or dash once it has that many words: speech can start before a long first sentence is
    finished (a spoken reply's first audio comes sooner; the rest follows seamlessly).
    """

    def __init__(self, first_clause_words: int = 0) -> None:
        self._buffer = ""
        self._first_clause_words = first_clause_words
        self._emitted = False

    def feed(self, text: str) -> list[str]:
        self._buffer += text
        out: list[str] = []
        while match := _END.search(self._buffer):
            sentence = self._buffer[: match.end()].strip()
            self._buffer = self._buffer[match.end():]
            if sentence:
                out.append(sentence)
        if not out and not self._emitted and self._first_clause_words:
            for match in _CLAUSE.finditer(self._buffer):
                if len(self._buffer[: match.start()].split()) >= self._first_clause_words:
                    out.append(self._buffer[: match.end()].strip())
                    self._buffer = self._buffer[match.end():]
                    break
        self._emitted = self._emitted or bool(out)
        return out

    def finish(self) -> list[str]:
        rest, self._buffer = self._buffer.strip(), ""
        return [rest] if rest else []


def split_sentences(text: str, first_clause_words: int = 0) -> list[str]:
    """The sentences of a whole text, as `SentenceSplitter` would give them fed at once."""
    splitter = SentenceSplitter(first_clause_words)
    return [*splitter.feed(text), *splitter.finish()]
