"""Incremental sentence splitting, so speech can start before the reply is finished."""

from __future__ import annotations

import re

# A sentence ends at . ! ? (optionally closed by quotes or brackets) followed by
# whitespace, or at a line break. "e.g. " and decimals like 3.5 are not ends.
_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\bMr)(?<!\bDr)(?<!\bMs)[.!?…]+[\"')\]]*\s+|\n+")


class SentenceSplitter:
    """Feed text deltas; complete sentences come out as soon as they end."""

    def __init__(self) -> None:
        self._buffer = ""

    def feed(self, text: str) -> list[str]:
        self._buffer += text
        out: list[str] = []
        while match := _END.search(self._buffer):
            sentence = self._buffer[: match.end()].strip()
            self._buffer = self._buffer[match.end():]
            if sentence:
                out.append(sentence)
        return out

    def finish(self) -> list[str]:
        rest, self._buffer = self._buffer.strip(), ""
        return [rest] if rest else []
