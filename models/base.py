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


@dataclass(frozen=True)
class ModelCapabilities:
    """What a chat model can do besides streaming, and what it is known to do badly:
    declared by each engine, read by the code that uses it (as simonw/llm's
    `supports_tools`), never guessed from how it was chosen."""

    native_tools: bool = False
    """Tools reach the model its own way (a chat template that renders them, a server's
    `tools` field); otherwise they are described in the system prompt and its calls are
    read from its text."""
    prefill: bool = False
    """`prefill()` processes a prompt's beginning ahead of time."""
    keeps_prompt_aside: bool = False
    """`aside()` keeps the processed prompt across the work done inside it."""
    repeats_answers_it_sees: bool = False
    """It copies an earlier answer it sees into a new one (the embedded 135M model): it is
    shown no earlier exchange word for word unless asked."""
    confused_by_the_date: bool = False
    """It answers worse when the system prompt tells it today's date (the embedded 135M
    model: "The CAPT." instead of "Paris"): not told."""


class ChatModel(ABC):
    """A chat model that counts tokens with its own tokenizer and template, and streams."""

    name: str = "model"
    context_size: int = 8192
    capabilities: ModelCapabilities = ModelCapabilities()
    """Nothing but streaming, unless an engine says more."""

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

    def prefill(self, messages: Sequence[PromptMessage], tools: Sequence[ToolSpec],
                stop: CancelToken | None = None) -> int:
        """Process a prompt's beginning ahead of time, so the next reply that starts with it
        only pays for what is new; returns the tokens processed. `stop` cancelled (Parley is
        closing): it stops between two steps, what was read kept. Called only when
        `capabilities.prefill`; without it, nothing is done."""
        return 0

    @contextmanager
    def aside(self) -> Iterator[None]:
        """Work done inside (a summary written between turns) leaves the processed prompt
        as it found it: the next reply still reuses what was prepared for it, even when
        that work was cut short. Used only when `capabilities.keeps_prompt_aside`; without
        it, nothing is kept."""
        yield
