"""The limits of one reply, chosen by whoever builds the conversation."""

from __future__ import annotations

from dataclasses import dataclass

from assistant.prompt import SYSTEM_PROMPT
from memory.summary import SUMMARY_SECONDS


@dataclass(frozen=True)
class ReplySettings:
    """Limits of one reply."""

    answer_tokens: int = 1024
    """Tokens kept free for the answer: the history that fits is what is left after it."""
    max_tool_calls: int = 4
    """Research budget: tool calls per reply before a final answer without tools."""
    system_prompt: str = SYSTEM_PROMPT
    summary_seconds: float = SUMMARY_SECONDS
    """Limit for writing the running summary, including the wait for the model."""
    idle_summaries: bool = False
    """The summary is written between turns (`summarize_ahead`), never inside a reply, which
    goes on with the last one written and drops what does not fit (`BetweenTurns`). Chosen
    by whoever builds the conversation: chat at a terminal, voice and serve have idle time;
    piped chat has none and summarizes in the reply."""
    tell_date: bool = True
    """Say today's date in the system prompt (the embedded 135M model answers worse for it:
    "The CAPT." instead of "Paris"; it gets False)."""
    recall_hints: bool = True
    """Show the best matching passage of a covered message beside the user's message."""
    max_messages: int | None = None
    """Keep at most this many messages (voice keeps 400, so a long session stays bounded)."""
    recent_exchanges: int | None = None
    """Earlier exchanges shown to the model verbatim (None: all that fit). The embedded
    135M model repeats an earlier answer it sees; it gets 0."""
    guard_replies: bool = True
    """Cut a reply where the model repeats itself or writes its prompt, a template token or
    a tool call's JSON (`assistant/reply_guard.py`). Off only to measure what it saves."""

    def __post_init__(self) -> None:
        if self.answer_tokens < 16:
            raise ValueError("answer_tokens must be at least 16")
        if self.max_tool_calls < 0:
            raise ValueError("max_tool_calls cannot be negative")
        if self.summary_seconds <= 0:
            raise ValueError("summary_seconds must be positive")
        if self.max_messages is not None and self.max_messages < 4:
            raise ValueError("max_messages must be at least 4")
        if self.recent_exchanges is not None and self.recent_exchanges < 0:
            raise ValueError("recent_exchanges cannot be negative")
