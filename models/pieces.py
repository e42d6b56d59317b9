"""Long sentences cut into pieces for synthesis, at clause marks where there are any.

Piper (VITS) synthesizes a piece in one pass, and its memory and its time to the first
audio grow with the piece's length: a 10-word piece took 131 MB of onnxruntime's arena, a
20-word one 210 MB, and the first audio of a long sentence waited for all of it.
"""

from __future__ import annotations

import re

MAX_PIECE_WORDS = 12
"""Words per synthesized piece (at most): about 3 seconds of speech."""

MAX_PIECE_PHONEMES = 100
"""Phonemes per synthesis pass (at most). Twelve ordinary words are 40-80 phonemes, but a
word can be spoken as many: a web address read out letter by letter, "3,141,592" as seven
words. A 7-word piece holding an address was 409 phonemes, 20 s of speech, and took
onnxruntime to 550 MB; this bound keeps one pass near an ordinary piece's size."""

_CLAUSE_END = re.compile(r"(?<=[,;:—–.!?])\s+")


def speech_pieces(text: str, max_words: int = MAX_PIECE_WORDS) -> list[str]:
    """`text` in pieces of at most `max_words` words, in order, no word lost or changed.

    Clauses (ending at a comma, semicolon, colon, dash or a sentence end) are joined while
    they fit; a clause longer than that is cut into near-equal runs of words, so no piece
    is a lone word trailing a long one.
    """
    if max_words < 1:
        raise ValueError("max_words must be at least 1")
    pieces: list[list[str]] = []
    for clause in _CLAUSE_END.split(text.strip()):
        words = clause.split()
        if not words:
            continue
        if pieces and len(pieces[-1]) + len(words) <= max_words:
            pieces[-1].extend(words)
            continue
        runs = -(-len(words) // max_words)  # as few runs as fit, of near-equal length
        size = -(-len(words) // runs)
        pieces.extend(words[i:i + size] for i in range(0, len(words), size))
    return [" ".join(words) for words in pieces]


def phoneme_runs(phonemes: list[str], max_phonemes: int = MAX_PIECE_PHONEMES) -> list[list[str]]:
    """A sentence's phonemes in runs of at most `max_phonemes`, in order, cut after a word
    (the " " phoneme, which is dropped at a cut) where one fits, else inside the word."""
    if max_phonemes < 1:
        raise ValueError("max_phonemes must be at least 1")
    runs: list[list[str]] = []
    rest = phonemes
    while len(rest) > max_phonemes:
        window = rest[:max_phonemes + 1]
        space = max((i for i, p in enumerate(window) if p == " " and i > 0), default=-1)
        if space > 0:
            runs.append(rest[:space])
            rest = rest[space + 1:]
        else:  # one word longer than a run: cut inside it
            runs.append(rest[:max_phonemes])
            rest = rest[max_phonemes:]
    if rest:
        runs.append(rest)
    return runs
