"""A reply's answer as the user gets it: the model's text through `ReplyGuard`, as events.

What the guard lets through is emitted as `TextDelta`s (chat prints them) and `Sentence`s
(voice speaks them), and is the answer the history keeps: all three are the same text.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import cache

from assistant import history_tool
from assistant.events import Event, ReplyCut, Sentence, TextDelta
from assistant.prompt import HINT_OPENING, TOOL_STRATEGY
from assistant.reply_guard import FALLBACK, PromptText, ReplyGuard
from assistant.sentences import SentenceSplitter
from memory.history import History
from memory.summary import RunningSummary, summary_block
from models.base import CancelToken, ToolSpec
from models.toolcalls import describe_tools

log = logging.getLogger(__name__)

MADE_UP_PROMPT_PHRASES = ("The user's next message",)
"""Words about its prompt that the embedded model writes though no prompt holds them."""


@cache
def summary_framing() -> tuple[str, ...]:
    """The lines the summary block puts around the summary's own bullets and entries (its
    content is the conversation's, which the model may well repeat)."""
    history = History()
    history.add("user", "x " * 400)
    history.add("tool", "y", tool="calculator", query="z")
    lines = []
    for with_lookup in (True, False):
        block = summary_block(RunningSummary(("- x",), 2), history.messages, with_lookup)
        lines += [line for line in block.splitlines() if not line.startswith("- ")]
    return tuple(lines)


def identity_dropped(system_prompt: str) -> str:
    """The system prompt without its first sentence when that one says who the assistant
    is ("You are Parley, a helpful assistant…"): asked who it is, the model may say so."""
    first, _, rest = system_prompt.partition(". ")
    return rest if first.startswith("You are ") else system_prompt


def prompt_text(system_prompt: str, tools: Sequence[ToolSpec]) -> PromptText:
    """The fixed text of a reply's prompt: its instructions, the tools' descriptions and
    the framing of the summary and of a recall hint; never what was said."""
    texts = [identity_dropped(system_prompt), TOOL_STRATEGY, history_tool.STRATEGY,
             history_tool.SPEC.description, describe_tools(tools), *summary_framing(),
             f"{HINT_OPENING}1, user: “"]
    return PromptText(texts, MADE_UP_PROMPT_PHRASES)


class _UserOrGuard(CancelToken):
    """Stops the model when the user stops the reply, or when the guard cut it."""

    def __init__(self, user: CancelToken) -> None:
        super().__init__()
        self.user = user

    @property
    def cancelled(self) -> bool:
        return self.user.cancelled or super().cancelled


class GuardedAnswer:
    """One reply's answer: feed the model's text with `add`, then `finish`."""

    def __init__(self, emit: Callable[[Event], None], prompt: PromptText,
                 cancel: CancelToken, first_clause_words: int = 0, guarded: bool = True
                 ) -> None:
        self.emit = emit
        self.model_cancel: CancelToken = _UserOrGuard(cancel)
        """The model's generation stops when this is cancelled: it then still reports
        what it used (a model checks it between tokens)."""
        self.guard = ReplyGuard(prompt) if guarded else None
        """None: the model's text is shown as it comes."""
        self.splitter = SentenceSplitter(first_clause_words)
        self.text = ""
        self._model_done = False

    def add(self, text: str) -> None:
        """Show what is safe of `text`; at a loop or a leak, stop the model."""
        if self.guard is None:
            self._show(text)
            return
        self._show(self.guard.feed(text))
        if self.guard.cut is not None:
            self.model_cancel.cancel()

    def say(self, text: str) -> None:
        """Parley's own words after the model's (a set timer's sentence): the model is done,
        and they are shown as they are."""
        self._model_finished()
        self._show(text)

    def _model_finished(self) -> None:
        if self.guard is not None and not self._model_done:
            self._show(self.guard.finish())
        self._model_done = True

    def finish(self, cancelled: bool = False) -> str:
        """The rest that is safe, the last sentence, why it was cut; the answer to keep. A
        reply cut to nothing says so in one sentence rather than nothing."""
        self._model_finished()
        for sentence in self.splitter.finish():
            self.emit(Sentence(sentence))
        answer = self.text.strip()
        cut = self.guard.cut if self.guard is not None else None
        if cut is None:
            return answer
        # Where and why, not the words: a log shows no conversation.
        log.debug("reply cut at character %d of %d of the model's text (%s)", cut.at,
                  len(self.guard.text), cut.reason)
        if not answer and not cancelled:
            answer = FALLBACK
            self.emit(TextDelta(answer))
            self.emit(Sentence(answer))
        self.emit(ReplyCut(str(cut.reason)))
        return answer

    def _show(self, piece: str) -> None:
        if not piece:
            return
        self.text += piece
        self.emit(TextDelta(piece))
        for sentence in self.splitter.feed(piece):
            self.emit(Sentence(sentence))
