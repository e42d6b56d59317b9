"""Asking the user before a tool changes something.

A tool that asks first (an MCP tool its server does not call read-only, or one the user
listed) runs only after a yes. Who can say it depends on where Parley runs: typed in chat,
spoken in voice, written in a replay's session file; `parley serve` has no one to ask, so
only the tools the config trusts run there.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

YES_WORDS = frozenset({"yes", "y", "yeah", "yep", "yup", "sure", "ok", "okay", "alright",
                       "please", "confirm", "confirmed", "correct", "absolutely", "certainly",
                       "affirmative", "fine"})
"""Words that say yes on their own."""
YES_PHRASES = ("go ahead", "do it", "of course", "that's right", "please do", "all right")
"""Phrases that say yes, though none of their words does."""
FILLERS = frozenset({"oh", "um", "uh", "er", "well", "so", "then"})
ALSO_IN_A_YES = FILLERS | {"go", "ahead", "do", "it", "that", "that's", "right", "of", "course",
                           "thanks", "thank", "you", "very", "much", "just", "all", "and",
                           "please", "now", "the", "a", "one", "is"}
"""Words that may come with a yes ("yes, go ahead then, thank you"); so may the words of
the question ("yes, delete it")."""
QUESTION_WORDS = frozenset({"what", "which", "why", "how", "when", "where", "who", "but", "if"})
"""A yes with one of these asks or adds something ("okay, but which one"): not a yes."""
NO_WORDS = frozenset({"no", "n", "nope", "nah", "don't", "dont", "stop", "cancel", "never",
                      "not", "negative", "wait", "hold"})


@dataclass(frozen=True)
class Confirmation:
    """A tool call waiting for the user's yes."""

    tool: str
    """The name the model called (`notes__delete_note`)."""
    server: str
    server_tool: str
    """The tool's own name on its server (`delete_note`)."""
    arguments: dict = field(default_factory=dict)

    @property
    def question(self) -> str:
        """The question as said: "Shall I run delete note on notes, with name notes.txt?"
        (each argument at most 80 characters: a long one is not read out whole)."""
        return self._asked(80)

    @property
    def question_in_full(self) -> str:
        """The question as typed chat shows it: every argument whole, so that what is
        said yes to is what is seen."""
        return self._asked(None)

    def _asked(self, limit: int | None) -> str:
        what = self.server_tool.replace("_", " ").replace("-", " ").strip()
        given = ", ".join(f"{key.replace('_', ' ')} {_shown(value, limit)}"
                          for key, value in self.arguments.items())
        return f"Shall I run {what} on {self.server}{', with ' + given if given else ''}?"


@dataclass(frozen=True)
class Answer:
    allowed: bool
    why: str = ""
    """Why it was not allowed, for the model: "the user said no"."""


YES = Answer(True)

Approve = Callable[[Confirmation], Answer]
"""Asks the user (or answers for them where no one can be asked): what each front end gives
the reply, which asks it before a tool that asks first runs (`ToolRegistry.call`)."""


def no_one_to_ask(where: str) -> Approve:
    """For a mode with no one to ask (`parley serve`): every such call is refused."""
    def refuse(_: Confirmation) -> Answer:
        return Answer(False, f"it needs the user's yes, and {where}")

    return refuse


def heard_answer(text: str, question: str = "") -> bool | None:
    """Whether a reply to the question is a yes (True), a no (False) or neither (None).

    A change is made on a clear yes only: an answer that begins with a yes and says nothing
    more than yes words and the question's own ("yes", "sure, go ahead", "yes, delete it").
    Anything else is not a yes, though it holds a word that can be one: "what do you
    mean?", "okay, which note?" and "is that the right one?" are questions, "right now,
    what time is it" and "okay, tell me a joke" new requests. A no word wins ("no, don't";
    "yes… no, wait")."""
    words = _words(text)
    if not words:
        return None
    if any(w in NO_WORDS for w in words) or "do not" in " ".join(words):
        return False
    if "?" in text or any(w in QUESTION_WORDS for w in words):
        return None
    while words and words[0] in FILLERS:
        words = words[1:]
    said = " ".join(words)
    begins_with_yes = bool(words) and (words[0] in YES_WORDS or said.startswith(YES_PHRASES))
    asked = set(_words(question.replace("_", " ")))
    nothing_else = all(w in YES_WORDS or w in ALSO_IN_A_YES or w in asked for w in words)
    return True if begins_with_yes and nothing_else else None


def _words(text: str) -> list[str]:
    words = (w.strip(".,!?;:\"'“”…-") for w in text.lower().replace("’", "'").split())
    return [w for w in words if w]


def outcome_of(text: str, question: str = "") -> str:
    """The answer to a question in the words of events and refusals: "yes", "no",
    "unclear" (words that are neither) or "no-answer" (nothing said)."""
    verdict = heard_answer(text, question)
    if verdict is None:
        return "unclear" if text.strip() else "no-answer"
    return "yes" if verdict else "no"


def answer_for(outcome: str, text: str = "") -> Answer:
    """The answer a tool gets: run it on a yes; otherwise the model is told why it was not,
    with the user's words (they may have asked for something else instead)."""
    if outcome == "yes":
        return YES
    said = f" (they said: “{text}”)" if text.strip() else ""
    return Answer(False, {
        "no": f"the user said no{said}",
        "unclear": f"the user did not say yes{said}",
        "no-answer": "the user did not answer",
        "stopped": "the user stopped the reply",
    }.get(outcome, f"the user did not say yes{said}"))


def _shown(value: object, limit: int | None) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if limit is None or len(text) <= limit else text[:limit] + "…"
