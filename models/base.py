"""Small synchronous engine protocols; the heavy engines live behind them."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field


class CancelToken:
    """Set once to stop a reply; checked between tokens, tool calls and sentences."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


@dataclass(frozen=True)
class ToolSpec:
    """A tool offered to the model: its name, what it does, its JSON-schema arguments."""

    name: str
    description: str
    parameters: dict


@dataclass(frozen=True)
class PromptMessage:
    """One message of a prompt, in the backend-neutral form."""

    role: str
    """"system", "user", "assistant" or "tool"."""
    content: str
    tool_name: str | None = None
    """For "tool": the tool that produced it; the call is replayed before it."""
    tool_arguments: dict | None = field(default=None, compare=False)


@dataclass(frozen=True)
class TextChunk:
    """A piece of the answer's text."""

    text: str


@dataclass(frozen=True)
class ToolCallChunk:
    """The model asked for a tool. `error` is set when the call could not be read."""

    name: str
    arguments: dict
    error: str | None = None


@dataclass(frozen=True)
class UsageChunk:
    """Token figures for one generation, sent last."""

    prompt_tokens: int
    processed_tokens: int
    """Prompt tokens actually evaluated (the rest reused from the cache)."""
    completion_tokens: int


Chunk = TextChunk | ToolCallChunk | UsageChunk


class ChatModel(ABC):
    """A chat model that counts tokens with its own tokenizer and template, and streams."""

    name: str = "model"
    context_size: int = 8192

    @abstractmethod
    def count_tokens(self, message: PromptMessage) -> int:
        """Tokens this message adds to a prompt."""

    @abstractmethod
    def overhead_tokens(self, tools: Sequence[ToolSpec]) -> int:
        """Tokens a prompt costs besides its messages (tool descriptions, generation prompt)."""

    @abstractmethod
    def stream(
        self,
        messages: Sequence[PromptMessage],
        tools: Sequence[ToolSpec],
        max_tokens: int,
        cancel: CancelToken | None = None,
    ) -> Iterator[Chunk]:
        """Generate an answer; stops early when `cancel` is set."""

    def prefill(self, messages: Sequence[PromptMessage], tools: Sequence[ToolSpec]) -> int:
        """Process a prompt's beginning ahead of time, so the next reply that starts with it
        only pays for what is new; returns the tokens processed (0 when not supported)."""
        return 0

    @contextmanager
    def aside(self) -> Iterator[None]:
        """Work done inside (a summary written between turns) leaves the processed prompt
        as it found it, where the engine can: the next reply still reuses what was
        prepared for it, even when that work was cut short."""
        yield
