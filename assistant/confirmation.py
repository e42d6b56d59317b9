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

YES_WORDS = frozenset({"yes", "y", "yeah", "yep", "yup", "sure", "ok", "okay", "please",
                       "go", "ahead", "do", "confirm", "confirmed", "correct", "right",
                       "absolutely", "certainly", "affirmative"})
NO_WORDS = frozenset({"no", "n", "nope", "nah", "don't", "dont", "do not", "stop", "cancel",
                      "never", "not", "negative", "wait", "hold"})


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
        """The question as said or shown: "Shall I run delete note on notes, with name
        notes.txt?"."""
        what = self.server_tool.replace("_", " ").replace("-", " ").strip()
        given = ", ".join(f"{key.replace('_', ' ')} {_shown(value)}"
                          for key, value in self.arguments.items())
        return f"Shall I run {what} on {self.server}{', with ' + given if given else ''}?"


@dataclass(frozen=True)
class Answer:
    allowed: bool
    why: str = ""
    """Why it was not allowed, for the model: "the user said no"."""


YES = Answer(True)
SAID_NO = Answer(False, "the user said no")

Confirm = Callable[[Confirmation], Answer]
"""Asks the user (or answers for them where no one can be asked)."""


def no_one_to_ask(where: str) -> Confirm:
    """For a mode with no one to ask (`parley serve`): every such call is refused."""
    def refuse(_: Confirmation) -> Answer:
        return Answer(False, f"it needs the user's yes, and {where}")

    return refuse


def heard_answer(text: str) -> bool | None:
    """Whether a reply to the question is a yes (True), a no (False) or neither (None).
    A no word wins ("no, don't"; "yes… no, wait"): a change is made on a clear yes only."""
    words = [w.strip(".,!?;:\"'“”") for w in text.lower().replace("’", "'").split()]
    words = [w for w in words if w]
    if not words:
        return None
    if any(w in NO_WORDS for w in words) or "do not" in " ".join(words):
        return False
    if any(w in YES_WORDS for w in words):
        return True
    return None


def _shown(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:80] + "…"
