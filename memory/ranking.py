"""Ranking messages beyond their words: who said them, when, and what they answer.

The words a message shares with a question score it first (`memory.search`). Three
things people ask with then adjust that score:

- **Who.** "What did you recommend…" is about Parley's replies, "What did I tell you…"
  about the user's own messages: the other side's messages count for less.
- **When.** "What did I say on 3 March…" prefers what was said on that day
  (`memory.when`); a day with no matching word still offers its messages.
- **Exchanges.** An answer rarely repeats the question's words ("Which paint did you
  suggest for the bathroom?" → "Go with an eggshell finish."), but the message it answers
  does: a reply takes a share of the score of the user's message it answers, and a
  user's message a share of its reply's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from memory.history import Message
from memory.when import days_asked

NEIGHBOUR_SHARE = 0.35
"""A message's score gains this share of the other half of its exchange's."""
OTHER_SIDE = 0.3
"""When a question asks what one side said, the other side's messages count this much."""
ON_THE_DAY = 1.6
"""A message said on a day the question names counts this much more…"""
DAY_ONLY = 0.5
"""…and one with no word of the question still scores this, to be offered at all."""

_ASKS_ASSISTANT = re.compile(
    r"\b(?:did|do|would|could|have|had|will|were) you\b"
    r"|\byou(?:'ve| have)? (?:said|told|suggested|recommended|mentioned|proposed|advised|"
    r"wrote|gave|calculated|thought|came up with|offered|answered|explained)\b"
    r"|\byour (?:advice|suggestion|recommendation|idea|answer|tip|estimate|opinion)s?\b")
_ASKS_USER = re.compile(
    r"\b(?:did|do|have|had|was|am) i\b"
    r"|\bi(?:'ve| have)? (?:said|told|mentioned|wrote|asked|shared|decided|planned|"
    r"described|complained|explained)\b")


_QUESTION_START = re.compile(
    r"^\W*(?:what|what's|who|who's|whom|whose|which|when|where|where's|why|how|how's|"
    r"is|are|was|were|do|does|did|can|could|would|will|should|shall|may|might|have|has|had|"
    r"am|isn't|aren't|don't|doesn't|didn't|can't|won't)\b", re.IGNORECASE)


def is_question(text: str) -> bool:
    """The message asks something ("What is the capital of France?", "do you know the
    way"): it holds no fact to recall, only the words of one."""
    stripped = text.strip()
    return stripped.endswith("?") or _QUESTION_START.match(stripped) is not None


def side_asked(question: str) -> str | None:
    """"assistant" or "user" when the question asks what that side said, else None."""
    text = question.lower()
    found = [(m.start(), "assistant") for m in _ASKS_ASSISTANT.finditer(text)]
    found += [(m.start(), "user") for m in _ASKS_USER.finditer(text)]
    return min(found)[1] if found else None


def rerank(scores: dict[int, float], messages: Sequence[Message], question: str,
           now: datetime) -> dict[int, float]:
    """Scores by position in `messages`, from the words' `scores`, adjusted as above."""
    adjusted = dict(scores)
    for position, score in scores.items():
        partner = _partner(messages, position)
        if partner is not None:
            adjusted[partner] = adjusted.get(partner, 0.0) + NEIGHBOUR_SHARE * score
    days = days_asked(question, now)
    if days:
        for position, message in enumerate(messages):
            if message.at is None:
                continue
            said = message.at.date()
            if any(first <= said <= last for first, last in days):
                alone = DAY_ONLY if message.role == "user" else DAY_ONLY * 0.8
                adjusted[position] = adjusted.get(position, alone) * ON_THE_DAY
    side = side_asked(question)
    if side is not None:
        for position in adjusted:
            if messages[position].role != side:
                adjusted[position] *= OTHER_SIDE
    return adjusted


def _partner(messages: Sequence[Message], position: int) -> int | None:
    """The other half of a message's exchange: the reply to a user's message, or the
    user's message a reply answers."""
    role = messages[position].role
    step = 1 if role == "user" else -1
    other = position + step
    while 0 <= other < len(messages) and messages[other].role == "tool":
        other += step  # a tool result sits between a question and its answer
    if 0 <= other < len(messages) and messages[other].role != role:
        return other
    return None
