"""Whether the words heard so far can end a request: the turn model's second opinion.

Smart Turn hears the voice, and a speaker who stops on a level note sounds finished to it
even when the sentence is not: "Set a timer for…" scored 0.83–0.98. The words say what the
voice cannot: a sentence does not end on "for", "of", "and", "the" or "my", nor on an
arithmetic word ("seventeen times…"), and Whisper's own punctuation says when it heard a
trailing clause ("…," or "…"). Such words keep the turn open however final the voice
sounded; the turn then ends only after the longest silence.

Plain word lists, no model: a false "unfinished" costs a longer wait (1.5 s), never a
lost word, and a missed one is what the turn model alone would have done. The other way
round, a whole sentence ("Tell me something about cats.") ends a turn the voice sounded
unfinished in sooner than the longest silence.
"""

from __future__ import annotations

import re

ARTICLES = {"a", "an", "the", "every", "each"}
POSSESSIVES = {"my", "your", "his", "her", "our", "their"}
PREPOSITIONS = {
    "about", "across", "after", "against", "along", "among", "around", "as", "at", "before",
    "behind", "below", "beside", "between", "by", "during", "for", "from", "into", "near",
    "of", "onto", "per", "than", "through", "to", "toward", "towards", "under", "until",
    "upon", "via", "with", "within", "without"}
"""Not "in", "on", "up", "off", "over": they end requests as particles ("turn it off")."""
CONJUNCTIONS = {"and", "or", "but", "nor", "because", "if", "unless", "whether", "while",
                "although", "though", "whose"}
ARITHMETIC = {"plus", "minus", "times", "divided", "multiplied", "point"}
CONTRACTIONS = {"i'm", "you're", "we're", "they're", "it's", "what's", "let's", "i'd",
                "i'll", "there's", "that's", "he's", "she's"}
FILLERS = {"um", "uh", "er", "erm", "hmm"}
MODALS = {"can", "could", "will", "would", "shall", "should", "may", "might", "must"}
"""Open ends after a few words ("I was thinking that maybe we could…"), but not in a short
answer ("yes I can")."""
SHORT_ANSWER_WORDS = 3
OPEN_ENDS = ARTICLES | POSSESSIVES | PREPOSITIONS | CONJUNCTIONS | ARITHMETIC | CONTRACTIONS \
    | FILLERS
"""Words a spoken request does not end on. Left out on purpose: auxiliaries ("where it
is"), "so", "then", "that", "this", "some", "like" and "please", which end finished
sentences often ("what is this", "I think so")."""

_WORD = re.compile(r"[a-z0-9']+")


def unfinished_because(text: str) -> str | None:
    """Why the words `text` cannot end a request ("ends on “for”", "trails off"), or None
    if they can (or say nothing either way)."""
    stripped = text.strip()
    if not stripped:
        return None
    if stripped.endswith(("...", "…", ",", ";", ":", "-", "—")):
        return "trails off"
    words = _WORD.findall(stripped.lower().replace("’", "'"))
    if not words:
        return None
    last = words[-1]
    if last in OPEN_ENDS or (last in MODALS and len(words) > SHORT_ANSWER_WORDS):
        return f"ends on “{last}”"
    return None


def whole_sentence(text: str) -> bool:
    """Whether `text` ends as a finished sentence does: at a full stop, question or
    exclamation mark, on a word a request can end on, after two words or more."""
    stripped = text.strip()
    return (stripped.endswith((".", "?", "!")) and not stripped.endswith("...")
            and unfinished_because(stripped) is None and len(_WORD.findall(stripped)) >= 2)
