"""One reply by the model, step by step: its prompt, the model's writing, its tool calls.

`Conversation.reply` begins it (the user's message is in the history), runs it
(`research`) and ends it; everything a step needs is declared here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from assistant.events import Event, RecallHint, ResearchBudgetReached
from assistant.guarded_answer import GuardedAnswer
from assistant.prompt import Prompt, PromptBuilder
from assistant.tool_offers import change_said
from assistant.tools import ToolOutput, ToolRegistry
from memory.conversation_state import ConversationState
from memory.history import Message
from models.base import CancelToken, ChatModel, TextChunk, ToolCallChunk, ToolSpec, UsageChunk

log = logging.getLogger(__name__)

RunTool = Callable[[ToolRegistry, ToolCallChunk, Callable[[Event], None]], ToolOutput]
"""Runs a tool call, its result joining the history (`Conversation._run_tool`)."""


@dataclass
class ModelReply:
    """A reply by the model in progress: what its steps read, and what they leave."""

    model: ChatModel
    prompts: PromptBuilder
    state: ConversationState
    """The conversation's history (the user's message in it already) and summary."""
    user: Message
    tools: ToolRegistry
    """The tools the reply is offered."""
    shown: GuardedAnswer
    """The answer as it is shown, cut where the model goes wrong."""
    emit: Callable[[Event], None]
    cancel: CancelToken
    run_tool: RunTool
    clock: Callable[[], float]
    max_tool_calls: int
    """The research budget: tool calls before a final answer without tools."""
    answer_tokens: int
    started: float
    calls: int = 0
    usage: UsageChunk = UsageChunk(0, 0, 0)

    def research(self) -> None:
        """The model answers, its tool calls run and their results go back to it, until
        it answers without one, the research budget is spent, the user stops it, or a
        tool's change is the answer."""
        while True:
            specs = self.tools.specs() if self.calls < self.max_tool_calls else []
            if self.calls and not specs:
                self.emit(ResearchBudgetReached(self.calls))
            call = self.write(self.prompt(specs), specs)
            if self.shown.model_cancel.cancelled or call is None:
                return
            if self.call_tool(call) or self.cancel.cancelled:
                return

    def prompt(self, specs: Sequence[ToolSpec]) -> Prompt:
        """What the model reads: the history that fits, the summary, the tools `specs`."""
        step = self.clock()
        prompt = self.prompts.build(self.state.history.messages, self.state.summary,
                                    self.user.seq, specs)
        log.debug("prompt of %d messages built in %.1f ms", len(prompt.messages),
                  (self.clock() - step) * 1000)
        if prompt.recalled is not None and self.calls == 0:
            self.emit(RecallHint(prompt.recalled))
        return prompt

    def write(self, prompt: Prompt, specs: Sequence[ToolSpec]) -> ToolCallChunk | None:
        """The model writes: its text is shown as it comes; returns its tool call, if any
        (the first, and none once the budget is spent: it was offered none, and told so)."""
        call: ToolCallChunk | None = None
        step, first_token = self.clock(), None
        # The model stops when the user does, or at a loop or a leak (`shown`).
        for chunk in self.model.stream(prompt.messages, specs, self.answer_tokens,
                                       self.shown.model_cancel):
            if isinstance(chunk, TextChunk):
                if first_token is None:
                    first_token = self.clock() - step
                self.shown.add(chunk.text)
            elif isinstance(chunk, ToolCallChunk) and call is None and (
                    self.calls < self.max_tool_calls):
                call = chunk
            elif isinstance(chunk, UsageChunk):
                log.debug("model: %d prompt tokens (%d processed), %d generated in %.0f ms, "
                          "first text after %s", chunk.prompt_tokens, chunk.processed_tokens,
                          chunk.completion_tokens, (self.clock() - step) * 1000,
                          "none" if first_token is None else f"{first_token * 1000:.0f} ms")
                self.usage = UsageChunk(self.usage.prompt_tokens + chunk.prompt_tokens,
                                        self.usage.processed_tokens + chunk.processed_tokens,
                                        self.usage.completion_tokens + chunk.completion_tokens)
        return call

    def call_tool(self, call: ToolCallChunk) -> bool:
        """Run the model's tool call; True when the reply is done: a change was made (a
        timer set), and its sentence is the answer."""
        self.calls += 1
        self.run_tool(self.tools, call, self.emit)
        said = change_said(self.tools, self.shown.text)
        if said:
            self.shown.say(said)
        return bool(said)
