"""Building a reply's prompt: system prompt and summary, what fits of the history, a recall hint.

One builder serves the reply and the preparation between turns, so the prefix processed
ahead of time is exactly the beginning the next reply's prompt will have.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from assistant import history_tool
from memory.fitting import CurrentMessageTooLong, fit_history
from memory.history import Message, local_now
from memory.ranking import is_question
from memory.search import HistorySearch, SearchIndexCache, describe
from memory.summary import RunningSummary, summary_block
from models.base import ChatModel, PromptMessage, ToolSpec

SYSTEM_PROMPT = (
    "You are Parley, a helpful assistant running on the user's own computer. "
    "You may be heard rather than read: answer briefly, in plain sentences."
)
TOOL_STRATEGY = (
    "Answer in plain words whenever you can. Call a tool only when the request needs what "
    "it gives; never show a tool call as an example."
)
"""The same whatever tools a reply is offered, so the prompt's beginning stays the same.
It names no tool: the earlier line named clock, calculator and timer, and a 0.5B model
offered none of them answered "using a calculator tool like the clock"."""
HINT_CHARS = 600
HINT_MIN_SHARE = 0.45
"""A recall hint is shown when its passage holds at least this share of the query's weight…"""
HINT_MIN_SCORE = 1.6
"""…and matches rare words, not only common ones."""
HINT_OPENING = "(From earlier in this conversation, message #"
"""How a recall hint begins; then its number, who said it and the passage."""
NEXT_MESSAGE_TOKENS = 64
"""Room kept for the user's next message when its prompt's beginning is prepared: about a
long spoken sentence. Only a nearly full context fits differently with the real message."""


def to_prompt(message: Message) -> PromptMessage:
    if message.role == "tool":
        return PromptMessage("tool", message.content, message.tool, message.arguments)
    return PromptMessage(message.role, message.content)


@dataclass(frozen=True)
class Prompt:
    messages: list[PromptMessage]
    recalled: int | None = None
    """The number of the message a recall hint was taken from, if one was added."""


class PromptBuilder:
    """The prompts of one conversation's replies, for one model and one set of limits."""

    def __init__(self, model: ChatModel, system_prompt: str, answer_tokens: int,
                 recall_hints: bool, cache: SearchIndexCache,
                 recent_exchanges: int | None = None,
                 now: Callable[[], datetime] = local_now, tell_date: bool = True) -> None:
        self.model = model
        self.now = now
        """The date told to the model comes from here…"""
        self.tell_date = tell_date
        """…if it is told (SmolLM2-135M answers worse for any line more: not told)."""
        self.system_prompt = system_prompt
        self.answer_tokens = answer_tokens
        self.recall_hints = recall_hints
        self.cache = cache
        self.recent_exchanges = recent_exchanges
        """Earlier exchanges the model sees verbatim (None: all that fit). A very small
        model copies its earlier answers when they are in the prompt; what is left out is
        still found by the recall hint and `conversation_history`."""

    def system_message(self, tools: Sequence[ToolSpec], summary: RunningSummary,
                       messages: Sequence[Message]) -> PromptMessage:
        """System prompt, tool strategy, and the running summary if there is one.

        The final answer after a research-budget stop has no tools: it keeps the
        summary but not the guidance to look things up.
        """
        # The date, not the time: the prompt's beginning then stays the same all day, and
        # llama.cpp reuses it from reply to reply. The clock tool gives the time.
        today = self.now()
        text = self.system_prompt
        with_lookup = any(t.name == history_tool.NAME for t in tools)
        if tools:
            text += "\n" + TOOL_STRATEGY
        if with_lookup:
            text += "\n" + history_tool.STRATEGY
        if self.tell_date:
            text += f"\nToday is {today:%A}, {today.day} {today:%B %Y}."
        block = summary_block(summary, messages, with_lookup)
        if block:
            text += "\n\n" + block
        return PromptMessage("system", text)

    def room(self, system: PromptMessage, tools: Sequence[ToolSpec]) -> int:
        """Tokens left for the history besides the answer, the tools and the system prompt."""
        return (self.model.context_size - self.answer_tokens
                - self.model.overhead_tokens(tools) - self.model.count_tokens(system))

    def count(self, message: Message) -> int:
        return self.model.count_tokens(to_prompt(message))

    def build(self, messages: Sequence[Message], summary: RunningSummary, current_seq: int,
              tools: Sequence[ToolSpec], reserve: int = 0, recall: bool = True) -> Prompt:
        """The prompt answering message `current_seq`: the summary, then what fits of the
        messages after it, then a recall hint beside the current message.

        With no message `current_seq` yet (the next one, not said), this is the beginning
        its prompt will have, with `reserve` tokens kept for it. CurrentMessageTooLong when the
        current message alone does not fit.
        """
        system = self.system_message(tools, summary, messages)
        room = self.room(system, tools) - reserve
        uncovered, outside = self._window(
            [m for m in messages if m.seq > summary.covered_through], current_seq)
        fit = fit_history(uncovered, current_seq, self.count, room)
        current = next((m for m in messages if m.seq == current_seq), None)
        hint = None
        if recall and self.recall_hints and current is not None:
            hint = self._recall_hint(messages, summary, current, set(fit.dropped) | outside)
        if hint is not None:
            try:
                fit = fit_history(uncovered, current_seq, self.count,
                                  room - self.model.count_tokens(PromptMessage("user", hint[1])))
            except CurrentMessageTooLong:
                hint = None
        prompt = [system, *(to_prompt(m) for m in fit.kept)]
        if hint is None:
            return Prompt(prompt)
        index = next(i for i, m in enumerate(fit.kept) if m.seq == current_seq) + 1
        prompt[index] = replace(prompt[index], content=f"{prompt[index].content}\n\n{hint[1]}")
        return Prompt(prompt, hint[0])

    def _window(self, uncovered: list[Message], current_seq: int
                ) -> tuple[list[Message], set[int]]:
        """The messages of the last `recent_exchanges` exchanges before `current_seq` and
        all from it on; and the numbers of those left out."""
        if self.recent_exchanges is None:
            return uncovered, set()
        starts = [m.seq for m in uncovered if m.role == "user" and m.seq < current_seq]
        kept = starts[len(starts) - self.recent_exchanges:] if self.recent_exchanges else []
        first = kept[0] if kept else current_seq
        return ([m for m in uncovered if m.seq >= first],
                {m.seq for m in uncovered if m.seq < first})

    def _recall_hint(self, messages: Sequence[Message], summary: RunningSummary,
                     current: Message, dropped: set[int]) -> tuple[int, str] | None:
        """The best passage of a message out of the prompt that the user's words match strongly."""
        # A model shown no earlier exchange copies a quoted earlier answer of its own
        # word for word into the new one; what the user said is what it must not lose.
        own_words_only = self.recent_exchanges == 0
        # An earlier question is not an answer to a new one: shown "What is the capital of
        # France?" beside "What is the capital of Japan?", the small model said "Paris".
        out = [m for m in messages if m.seq < current.seq
               and (m.seq <= summary.covered_through or m.seq in dropped)
               and m.tool != history_tool.NAME and (m.role == "user" or not own_words_only)
               and not (m.role == "user" and is_question(m.content))]
        if not out:
            return None
        search = HistorySearch(out, self.cache)
        found = search.best_passage(current.content, HINT_CHARS)
        if found is None:
            return None
        place, share = found
        if share < HINT_MIN_SHARE or place.score < HINT_MIN_SCORE:
            return None
        message = search.messages[place.seq]
        passage = message.content[place.start:place.end].strip()
        # Who said it, not when: a time in the hint would make the small model's answer
        # change with the minute it is asked in.
        who = describe(replace(message, at=None))
        return place.seq, f"{HINT_OPENING}{place.seq}, {who}: “{passage}”)"
