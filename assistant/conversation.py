"""The one core: a turn as straight-line code over stages, events through a callback."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from assistant.events import (
    Error,
    Event,
    ReplyDone,
    Sentence,
    Status,
    TextDelta,
    ToolCall,
    ToolResult,
)
from assistant.sentences import SentenceSplitter
from assistant.tools import ToolRegistry
from memory.fitting import PromptTooLarge, fit_history
from memory.history import History, Message
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

    def __post_init__(self) -> None:
        if self.answer_tokens < 16:
            raise ValueError("answer_tokens must be at least 16")
        if self.max_tool_calls < 0:
            raise ValueError("max_tool_calls cannot be negative")


def to_prompt(message: Message) -> PromptMessage:
    if message.role == "tool":
        return PromptMessage("tool", message.content, message.tool, message.arguments)
    return PromptMessage(message.role, message.content)


class Conversation:
    """One conversation with one model; `reply()` is shared by chat, voice and replay."""

    def __init__(
        self,
        model: ChatModel,
        tools: ToolRegistry | None = None,
        settings: ReplySettings | None = None,
    ) -> None:
        self.model = model
        self.tools = tools or ToolRegistry()
        self.settings = settings or ReplySettings()
        self.history = History()

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
        answer = ""
        usage = UsageChunk(0, 0, 0)
        splitter = SentenceSplitter()
        calls = 0
        try:
            while True:
                tools = self.tools.specs() if calls < self.settings.max_tool_calls else []
                if calls and not tools:
                    emit(Status("Research budget reached; answering with what was found."))
                prompt = self._prompt(user.seq, tools)
                call: ToolCallChunk | None = None
                for chunk in self.model.stream(prompt, tools, self.settings.answer_tokens, cancel):
                    if isinstance(chunk, TextChunk):
                        answer += chunk.text
                        emit(TextDelta(chunk.text))
                        for sentence in splitter.feed(chunk.text):
                            emit(Sentence(sentence))
                    elif isinstance(chunk, ToolCallChunk) and tools and call is None:
                        call = chunk
                    elif isinstance(chunk, UsageChunk):
                        usage = UsageChunk(usage.prompt_tokens + chunk.prompt_tokens,
                                           usage.processed_tokens + chunk.processed_tokens,
                                           usage.completion_tokens + chunk.completion_tokens)
                if cancel.cancelled or call is None:
                    break
                calls += 1
                self._run_tool(call, emit)
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
        done = ReplyDone(answer, cancel.cancelled, usage.prompt_tokens,
                         usage.processed_tokens, usage.completion_tokens)
        emit(done)
        return done

    def _run_tool(self, call: ToolCallChunk, emit: Callable[[Event], None]) -> None:
        if call.error:
            content, is_error, name = f"Error: {call.error}. Try again.", True, call.name
        else:
            name = call.name
            emit(ToolCall(name, call.arguments, self.tools.label(name, call.arguments)))
            content, is_error = self.tools.call(name, call.arguments)
        emit(ToolResult(name or "tool", content, is_error))
        query = " ".join(str(v) for v in call.arguments.values())[:200]
        self.history.add("tool", content, tool=name or "tool", query=query,
                         arguments=call.arguments)

    def system_message(self, tools: list) -> PromptMessage:
        text = self.settings.system_prompt
        if tools:
            text += "\n" + TOOL_STRATEGY
        return PromptMessage("system", text)

    def _prompt(self, current_seq: int, tools: list) -> list[PromptMessage]:
        system = self.system_message(tools)
        room = (self.model.context_size - self.settings.answer_tokens
                - self.model.overhead_tokens(tools) - self.model.count_tokens(system))
        fit = fit_history(self.history.messages, current_seq,
                          lambda m: self.model.count_tokens(to_prompt(m)), room)
        return [system, *(to_prompt(m) for m in fit.kept)]
