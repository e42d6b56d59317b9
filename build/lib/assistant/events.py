"""Typed events of a reply; text chat, voice and replay differ only in how they render them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Status:
    """A step in progress, shown on its own dim line."""

    text: str


@dataclass(frozen=True)
class Summarized:
    """The running summary was updated; it now covers messages #1 to `covered_through`."""

    text: str
    """The whole summary, bullet per line."""
    covered_through: int
    new_bullets: tuple[str, ...]
    fallback_bullets: int = 0
    """How many of the new bullets were written without the model (its own failed)."""


@dataclass(frozen=True)
class ToolCall:
    """The model called a tool."""

    name: str
    arguments: dict
    label: str
    """What the user sees, e.g. "Calculating 2 + 2"."""


@dataclass(frozen=True)
class ToolResult:
    name: str
    content: str
    is_error: bool = False


@dataclass(frozen=True)
class TextDelta:
    """A piece of the answer as it is generated."""

    text: str


@dataclass(frozen=True)
class Sentence:
    """A complete sentence of the answer, ready for speech."""

    text: str


@dataclass(frozen=True)
class ReplyDone:
    """The reply ended; `text` is the whole answer."""

    text: str
    cancelled: bool = False
    prompt_tokens: int = 0
    processed_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class Error:
    """Something went wrong; `message` says what to do. The conversation is kept."""

    stage: str
    message: str


@dataclass(frozen=True)
class Heard:
    """Voice: what speech-to-text heard in one utterance ("" when it held no words)."""

    text: str
    confidence: float = 1.0
    rejected: str = ""
    """Why no words were taken from it ("no speech", "too quiet"…)."""
    cut: bool = False
    """The utterance reached the maximum length and was cut there; the rest follows."""


@dataclass(frozen=True)
class Spoken:
    """Voice: a sentence of the reply started playing."""

    text: str
    seconds: float
    """Its length as audio."""


@dataclass(frozen=True)
class Interrupted:
    """Voice: the user spoke over the reply; playback stopped and the rest was dropped."""

    spoken_seconds: float
    heard_text: str
    """What the user heard of the reply before it stopped."""


Event = (Status | Summarized | ToolCall | ToolResult | TextDelta | Sentence | ReplyDone | Error
         | Heard | Spoken | Interrupted)
