"""The one core: a turn as straight-line code over stages, events through a callback."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from assistant import history_tool
from assistant.events import (
    Error,
    Event,
    ReplyDone,
    Sentence,
    Status,
    Summarized,
    TextDelta,
    ToolCall,
    ToolResult,
)
from assistant.sentences import SentenceSplitter
from assistant.summarizer import write_summary
from assistant.tools import ToolRegistry
from memory.fitting import PromptTooLarge, fit_history
from memory.history import History, Message
from memory.search import HistorySearch, SearchIndexCache, describe
from memory.summary import (
    RETRY_AFTER_MESSAGES,
    SUMMARY_SECONDS,
    RunningSummary,
    plan_summary,
    summary_block,
)
from models.base import (
    CancelToken,
    ChatModel,
    PromptMessage,
    TextChunk,
    ToolCallChunk,
    UsageChunk,
)

SYSTEM_PROMPT = (
    "You are Parley, a helpful assistant running on the user's own computer. "
    "You may be heard rather than read: answer briefly, in plain sentences."
)
TOOL_STRATEGY = (
    "Use a tool only when it helps: clock for the date or time, calculator for arithmetic."
)


@dataclass(frozen=True)
class ReplySettings:
    """Limits of one reply."""

    answer_tokens: int = 1024
    """Tokens kept free for the answer (the seed's ADR 0140)."""
    max_tool_calls: int = 4
    """Research budget: tool calls per reply before a final answer without tools."""
    system_prompt: str = SYSTEM_PROMPT
    summary_seconds: float = SUMMARY_SECONDS
    """Limit for writing the running summary, including the wait for the model."""
    recall_hints: bool = True
    """Show the best matching passage of a covered message beside the user's message."""
    max_messages: int | None = None
    """Keep at most this many messages (voice keeps 400, the record's voice limit)."""

    def __post_init__(self) -> None:
        if self.answer_tokens < 16:
            raise ValueError("answer_tokens must be at least 16")
        if self.max_tool_calls < 0:
            raise ValueError("max_tool_calls cannot be negative")
        if self.summary_seconds <= 0:
            raise ValueError("summary_seconds must be positive")
        if self.max_messages is not None and self.max_messages < 4:
            raise ValueError("max_messages must be at least 4")


def to_prompt(message: Message) -> PromptMessage:
    if message.role == "tool":
        return PromptMessage("tool", message.content, message.tool, message.arguments)
    return PromptMessage(message.role, message.content)


HINT_CHARS = 600
HINT_MIN_SHARE = 0.45
"""A recall hint is shown when its passage holds at least this share of the query's weight…"""
HINT_MIN_SCORE = 2.0
"""…and matches rare words, not only common ones."""


class Conversation:
    """One conversation with one model; `reply()` is shared by chat, voice and replay."""

    def __init__(
        self,
        model: ChatModel,
        tools: ToolRegistry | None = None,
        settings: ReplySettings | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.model = model
        self.tools = tools or ToolRegistry()
        self.settings = settings or ReplySettings()
        self.history = History()
        self.summary = RunningSummary()
        self.clock = clock
        self._search_cache = SearchIndexCache()

    def clear(self) -> None:
        """Forget the whole conversation, its summary included."""
        self.history.clear()
        self.summary = RunningSummary()
        self._search_cache = SearchIndexCache()

    def reply(
        self,
        text: str,
        emit: Callable[[Event], None],
        cancel: CancelToken | None = None,
    ) -> ReplyDone | None:
        """Answer `text`, emitting events; returns the final event, or None for an error."""
        cancel = cancel or CancelToken()
        text = text.strip()
        if not text:
            return None
        user = self.history.add("user", text)
        tools = self._tools_over(self.history.messages[:-1])
        answer = ""
        usage = UsageChunk(0, 0, 0)
        splitter = SentenceSplitter()
        calls = 0
        try:
            if not self._summarize_if_needed(user.seq, tools, emit, cancel):
                self.history.remove_from(user.seq)
                done = ReplyDone("", cancelled=True)
                emit(done)
                return done
            while True:
                specs = tools.specs() if calls < self.settings.max_tool_calls else []
                if calls and not specs:
                    emit(Status("Research budget reached; answering with what was found."))
                prompt = self._prompt(user.seq, specs, emit if calls == 0 else None)
                call: ToolCallChunk | None = None
                for chunk in self.model.stream(prompt, specs, self.settings.answer_tokens, cancel):
                    if isinstance(chunk, TextChunk):
                        answer += chunk.text
                        emit(TextDelta(chunk.text))
                        for sentence in splitter.feed(chunk.text):
                            emit(Sentence(sentence))
                    elif isinstance(chunk, ToolCallChunk) and specs and call is None:
                        call = chunk
                    elif isinstance(chunk, UsageChunk):
                        usage = UsageChunk(usage.prompt_tokens + chunk.prompt_tokens,
                                           usage.processed_tokens + chunk.processed_tokens,
                                           usage.completion_tokens + chunk.completion_tokens)
                if cancel.cancelled or call is None:
                    break
                calls += 1
                self._run_tool(tools, call, emit)
                if cancel.cancelled:
                    break
        except PromptTooLarge as exc:
            self.history.remove_from(user.seq)
            emit(Error("prompt", (
                f"That message is too long for the model's context: it needs about "
                f"{exc.needed:,} tokens and {exc.room:,} are free. Shorten it or start "
                "Parley with a larger --ctx. It was not added to the conversation.")))
            return None
        except Exception as exc:  # the engine failed: keep everything said before
            self.history.remove_from(user.seq)
            emit(Error("model", f"The model failed to answer ({exc}). The conversation is "
                                "kept; try again."))
            return None
        for sentence in splitter.finish():
            emit(Sentence(sentence))
        answer = answer.strip()
        if answer:
            self.history.add("assistant", answer)
        elif cancel.cancelled:
            self.history.remove_from(user.seq)
        if self.settings.max_messages is not None:
            self.history.keep_last(self.settings.max_messages)
        done = ReplyDone(answer, cancel.cancelled, usage.prompt_tokens,
                         usage.processed_tokens, usage.completion_tokens)
        emit(done)
        return done

    def prepare_next(self) -> int:
        """Process the next reply's likely prompt beginning now, while the user is talking.

        The system prompt, tools and history stay in order from turn to turn, so llama.cpp
        reuses this and the next reply only processes the user's new message. Returns the
        tokens processed.
        """
        tools = self._tools_over(self.history.messages)
        specs = tools.specs() if self.settings.max_tool_calls else []
        system = self.system_message(specs)
        # Fit as if the next message were of a typical spoken length, as the reply will.
        upcoming = Message(self.history.next_seq, "user", "x" * 200)
        try:
            fit = fit_history([*self._uncovered(), upcoming], upcoming.seq, self._count,
                              self._room(system, specs))
        except PromptTooLarge:
            return 0
        kept = [m for m in fit.kept if m.seq != upcoming.seq]
        try:
            return self.model.prefill([system, *(to_prompt(m) for m in kept)], specs)
        except Exception:  # only an optimisation: the reply will process it anyway
            return 0

    def _tools_over(self, earlier: tuple[Message, ...]) -> ToolRegistry:
        """The tools of a reply that follows `earlier`: conversation_history joins them once
        there is something to look back on (its own results only repeat other messages)."""
        earlier_said = [m for m in earlier if m.tool != history_tool.NAME]
        if not earlier_said:
            return self.tools
        return self.tools.with_tool(history_tool.history_tool(
            HistorySearch(earlier_said, self._search_cache)))

    def _uncovered(self) -> list[Message]:
        """Messages after those the running summary stands in for."""
        return [m for m in self.history.messages if m.seq > self.summary.covered_through]

    def note_heard(self, heard: str) -> None:
        """The last reply was spoken and the user cut it short: keep it, saying what they heard.

        The model then knows which part of its answer the user actually got.
        """
        last = self.history.messages[-1] if len(self.history) else None
        if last is None or last.role != "assistant":
            return
        heard = heard.strip()
        note = (f"[Spoken aloud; the user interrupted after hearing: “{heard}”]" if heard
                else "[Spoken aloud; the user interrupted before hearing any of it]")
        self.history.replace_content(last.seq, f"{last.content}\n{note}")

    def _run_tool(self, tools: ToolRegistry, call: ToolCallChunk,
                  emit: Callable[[Event], None]) -> None:
        if call.error:
            content, is_error, name = f"Error: {call.error}. Try again.", True, call.name
        else:
            name = call.name
            emit(ToolCall(name, call.arguments, tools.label(name, call.arguments)))
            content, is_error = tools.call(name, call.arguments)
        emit(ToolResult(name or "tool", content, is_error))
        query = " ".join(str(v) for v in call.arguments.values())[:200]
        self.history.add("tool", content, tool=name or "tool", query=query,
                         arguments=call.arguments)

    # -- the prompt -------------------------------------------------------------------

    def system_message(self, tools: list, summary: RunningSummary | None = None) -> PromptMessage:
        """System prompt, tool strategy, and the running summary if there is one.

        The final answer after a research-budget stop has no tools: it keeps the
        summary but not the guidance to look things up.
        """
        summary = self.summary if summary is None else summary
        text = self.settings.system_prompt
        with_lookup = any(t.name == history_tool.NAME for t in tools)
        if tools:
            text += "\n" + TOOL_STRATEGY
        if with_lookup:
            text += "\n" + history_tool.STRATEGY
        block = summary_block(summary, self.history.messages, with_lookup)
        if block:
            text += "\n\n" + block
        return PromptMessage("system", text)

    def _room(self, system: PromptMessage, tools: list) -> int:
        return (self.model.context_size - self.settings.answer_tokens
                - self.model.overhead_tokens(tools) - self.model.count_tokens(system))

    def _count(self, message: Message) -> int:
        return self.model.count_tokens(to_prompt(message))

    def _prompt(self, current_seq: int, tools: list,
                emit: Callable[[Event], None] | None = None) -> list[PromptMessage]:
        """The summary, then what fits of the messages after it, then a recall hint."""
        system = self.system_message(tools)
        room = self._room(system, tools)
        uncovered = self._uncovered()
        fit = fit_history(uncovered, current_seq, self._count, room)
        hint = self._recall_hint(current_seq, set(fit.dropped)) if self.settings.recall_hints \
            else None
        if hint is not None:
            seq, passage = hint
            note = PromptMessage("user", passage)
            try:
                fit = fit_history(uncovered, current_seq, self._count,
                                  room - self.model.count_tokens(note))
            except PromptTooLarge:
                hint = None
            else:
                if emit is not None:
                    emit(Status(f"Recalling message #{seq} from earlier in this conversation"))
        prompt = [system, *(to_prompt(m) for m in fit.kept)]
        if hint is not None:
            index = next(i for i, m in enumerate(fit.kept) if m.seq == current_seq) + 1
            current = prompt[index]
            prompt[index] = replace(current, content=f"{current.content}\n\n{hint[1]}")
        return prompt

    def _recall_hint(self, current_seq: int, dropped: set[int]) -> tuple[int, str] | None:
        """The best passage of a message out of the prompt that the user's words match strongly."""
        out = [m for m in self.history.messages if m.seq < current_seq
               and (m.seq <= self.summary.covered_through or m.seq in dropped)
               and m.tool != history_tool.NAME]
        if not out:
            return None
        current = next(m for m in self.history.messages if m.seq == current_seq)
        search = HistorySearch(out, self._search_cache)
        found = search.best_passage(current.content, HINT_CHARS)
        if found is None:
            return None
        place, share = found
        if share < HINT_MIN_SHARE or place.score < HINT_MIN_SCORE:
            return None
        message = search.messages[place.seq]
        passage = message.content[place.start:place.end].strip()
        return place.seq, (f"(From earlier in this conversation, message #{place.seq}, "
                           f"{describe(message)}: “{passage}”)")

    # -- the running summary -----------------------------------------------------------

    def _summarize_if_needed(self, current_seq: int, tools: ToolRegistry,
                             emit: Callable[[Event], None], cancel: CancelToken) -> bool:
        """Cover the oldest exchanges when the text no longer fits; False if cancelled.

        At most once per reply, before any tool call, outside the research budget. A
        failure falls back to the core's dropping and waits six messages to try again.
        """
        if current_seq < self.summary.retry_at:
            return True
        specs = tools.specs() if self.settings.max_tool_calls else []
        bare = self.system_message(specs, RunningSummary())
        room = self._room(bare, specs)
        summary_tokens = (self.model.count_tokens(self.system_message(specs))
                          - self.model.count_tokens(bare))
        plan = plan_summary(self.history.messages, self.summary, current_seq, self._count,
                            room, summary_tokens)
        if plan is None:
            return True
        emit(Status("Summarizing the earlier conversation…"))
        outcome = write_summary(self.model, plan, self.summary, cancel,
                                self.settings.summary_seconds, self.clock)
        if outcome.cancelled:
            return False
        if outcome.summary is None:
            self.summary = replace(self.summary, retry_at=current_seq + RETRY_AFTER_MESSAGES)
            emit(Status(f"Could not summarize the earlier conversation: {outcome.failure}. "
                        "The oldest messages are left out of the prompt instead."))
            return True
        self.summary = outcome.summary
        emit(Summarized(self.summary.text, self.summary.covered_through,
                        outcome.new_bullets, outcome.replaced))
        return True
