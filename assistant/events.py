"""Typed events of a reply; text chat, voice and replay differ only in how they render them.

Every event has a stable wire name (`event_type`, short kebab-case as Home Assistant's
pipeline events and Wyoming's messages) and `to_dict()`, which replay's JSON uses: that
JSON is an interface people script against, so names and fields change only on purpose.
Code reacts to the event types, never to the prose a renderer shows.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar


class Stage(StrEnum):
    """Where a reply failed (`Error.stage`)."""

    CONFIG = "config"
    PROMPT = "prompt"
    """The message cannot fit in the model's context."""
    MODEL = "model"
    """The language model failed to answer."""
    STT = "stt"
    TTS = "tts"
    AUDIO = "audio"
    REPLAY = "replay"
    VOICE = "voice"
    """A voice turn failed outside any one engine."""
    REQUEST = "request"
    """A message from a client Parley cannot take (the web page's: not JSON, text sent
    while a reply runs); it went to that client alone."""
    INTERNAL = "internal"
    """A bug in Parley: its traceback is logged (`--debug` shows it)."""


class _Event:
    event_type: ClassVar[str]

    def to_dict(self) -> dict:
        """`{"type": <wire name>, <field>: <value>, …}`, JSON-ready."""
        data: dict = {"type": self.event_type}
        for item in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, item.name)
            data[item.name] = list(value) if isinstance(value, tuple) else (
                str(value) if isinstance(value, StrEnum) else value)
        return data


@dataclass(frozen=True)
class Status(_Event):
    """A step in progress, shown on its own dim line (prose for people only)."""

    event_type: ClassVar[str] = "status"
    text: str


@dataclass(frozen=True)
class SummaryStarted(_Event):
    """The oldest messages no longer fit: the running summary is being written."""

    event_type: ClassVar[str] = "summary-start"

    @property
    def text(self) -> str:
        return "Summarizing the earlier conversation…"


@dataclass(frozen=True)
class Summarized(_Event):
    """The running summary was updated; it now covers messages #1 to `covered_through`."""

    event_type: ClassVar[str] = "summary"
    text: str
    """The whole summary, bullet per line."""
    covered_through: int
    new_bullets: tuple[str, ...]
    fallback_bullets: int = 0
    """How many of the new bullets were written without the model (its own failed)."""


@dataclass(frozen=True)
class SummaryFailed(_Event):
    """The summary could not be written; the oldest messages leave the prompt instead."""

    event_type: ClassVar[str] = "summary-failed"
    reason: str
    retry_at: int
    """The message number from which a summary is tried again."""

    @property
    def text(self) -> str:
        return (f"Could not summarize the earlier conversation: {self.reason}. "
                "The oldest messages are left out of the prompt instead.")


@dataclass(frozen=True)
class SummaryCancelled(_Event):
    """The summary being written was dropped, nothing of it kept: the user spoke or typed
    first (written between turns), or stopped the reply. It is tried again later."""

    event_type: ClassVar[str] = "summary-cancelled"


@dataclass(frozen=True)
class RecallHint(_Event):
    """A passage of a message out of the prompt was put beside the user's message."""

    event_type: ClassVar[str] = "recall-hint"
    message: int
    """The number of the message it comes from."""

    @property
    def text(self) -> str:
        return f"Recalling message #{self.message} from earlier in this conversation"


@dataclass(frozen=True)
class ResearchBudgetReached(_Event):
    """The reply used its tool calls; the model answers with what was found."""

    event_type: ClassVar[str] = "research-budget-reached"
    tool_calls: int

    @property
    def text(self) -> str:
        return "Research budget reached; answering with what was found."


@dataclass(frozen=True)
class ToolCall(_Event):
    """A tool was called (by the model)."""

    event_type: ClassVar[str] = "tool-call"
    name: str
    arguments: dict
    label: str
    """What the user sees, e.g. "Calculating 2 + 2"."""


@dataclass(frozen=True)
class ToolResult(_Event):
    event_type: ClassVar[str] = "tool-result"
    name: str
    content: str
    is_error: bool = False


@dataclass(frozen=True)
class TextDelta(_Event):
    """A piece of the answer as it is generated."""

    event_type: ClassVar[str] = "text-delta"
    text: str


@dataclass(frozen=True)
class Sentence(_Event):
    """A piece of the answer ready for speech: a whole sentence, or the first clause when
    the reply was asked for one (voice starts speaking sooner)."""

    event_type: ClassVar[str] = "sentence"
    text: str


@dataclass(frozen=True)
class ReplyCut(_Event):
    """The model's text was cut short: it began to repeat itself, or to write its prompt,
    a chat-template token or a tool call's JSON as text. The reply keeps what came before;
    the rest was never shown nor spoken."""

    event_type: ClassVar[str] = "reply-cut"
    reason: str
    """`repetition`, `prompt-text`, `template-token` or `tool-call`."""


@dataclass(frozen=True)
class ReplyDone(_Event):
    """The reply ended; `text` is the whole answer."""

    event_type: ClassVar[str] = "reply-done"
    text: str
    cancelled: bool = False
    prompt_tokens: int = 0
    processed_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class Error(_Event):
    """Something went wrong; `message` says what to do. The conversation is kept."""

    event_type: ClassVar[str] = "error"
    stage: Stage
    message: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "stage", Stage(self.stage))  # an unknown stage is a bug


@dataclass(frozen=True)
class Heard(_Event):
    """Voice: what speech-to-text heard in one utterance ("" when it held no words)."""

    event_type: ClassVar[str] = "heard"
    text: str
    confidence: float = 1.0
    rejected: str = ""
    """Why no words were taken from it ("no speech", "too quiet"…)."""
    cut: bool = False
    """The utterance reached the maximum length and was cut there; the rest follows."""


@dataclass(frozen=True)
class HeardPartial(_Event):
    """Voice: the words of the utterance still being spoken, as heard so far. Each one
    replaces the last; `heard` follows with what the whole utterance said."""

    event_type: ClassVar[str] = "heard-partial"
    text: str
    """Words two transcription passes in a row agreed on: they do not change."""
    tentative: str = ""
    """What the latest pass heard after them, which the next may change."""


@dataclass(frozen=True)
class TurnJudged(_Event):
    """Voice: at a pause in the user's speech, the turn model judged whether they had
    finished (with `--end-of-turn smart`)."""

    event_type: ClassVar[str] = "turn-judged"
    pause_ms: float
    """How long the pause had lasted when the model was asked."""
    score: float
    """The model's probability that the turn was over."""
    finished: bool
    """The turn ended there; otherwise Parley waited for more."""
    words: str | None = None
    """What the words heard so far decided: why they could not end the turn ("ends on
    “for”", and Parley waited however finished the voice sounded), or "a whole sentence"
    (a turn the voice sounded unfinished in ended after a shorter silence). None when they
    decided nothing."""


@dataclass(frozen=True)
class Spoken(_Event):
    """Voice: a piece of the reply started playing."""

    event_type: ClassVar[str] = "spoken"
    text: str
    seconds: float
    """Its length as audio."""


@dataclass(frozen=True)
class Interrupted(_Event):
    """Voice: the user spoke over the reply; playback stopped and the rest was dropped."""

    event_type: ClassVar[str] = "interrupted"
    spoken_seconds: float
    heard_text: str
    """What the user heard of the reply before it stopped."""


@dataclass(frozen=True)
class TurnContinued(_Event):
    """Voice: the user went on talking in the first moments of the reply, so their turn
    had not ended: the reply stopped and was taken back, and what they said before and
    after the pause is heard and answered as one message (in the next turn's record)."""

    event_type: ClassVar[str] = "turn-continued"
    spoken_seconds: float
    """How much of the reply had played (0: none; the user heard nothing of it)."""


@dataclass(frozen=True)
class Wake(_Event):
    """Voice with a wake word: it was heard; what follows is listened to."""

    event_type: ClassVar[str] = "wake"
    word: str
    """The wake word's name, e.g. okay_nabu."""
    at_s: float
    """Where in the audio heard so far it ended, in seconds from the start of listening."""


@dataclass(frozen=True)
class TimerFinished(_Event):
    """A timer went off (between replies or during one)."""

    event_type: ClassVar[str] = "timer-finished"
    name: str
    """The timer's name ("" when it has none)."""
    seconds: int
    """The duration it was set for."""
    text: str
    """The announcement, e.g. “Your 10 minute pizza timer is done.”"""


@dataclass(frozen=True)
class ConfirmationAsked(_Event):
    """Voice: before a tool that changes something runs, the user was asked for a yes
    (said aloud and shown); the reply waits for the answer."""

    event_type: ClassVar[str] = "confirm-asked"
    tool: str
    """The name the model called (`notes__delete_note`)."""
    question: str
    """What was asked: "Shall I run delete note on notes, with name notes.txt?"."""


@dataclass(frozen=True)
class ConfirmationAnswered(_Event):
    """Voice: how the question was answered; the tool runs only on a clear yes."""

    event_type: ClassVar[str] = "confirm-answered"
    tool: str
    allowed: bool
    answer: str
    """What the user said or typed ("" when nothing was)."""
    outcome: str
    """`yes`, `no`, `unclear` (neither a yes nor a no), `no-answer` (nothing within the
    wait) or `stopped` (the user stopped the reply, or Parley is closing)."""


Event = (Status | SummaryStarted | Summarized | SummaryFailed | SummaryCancelled | RecallHint
         | ResearchBudgetReached | ToolCall | ToolResult | TextDelta | Sentence | ReplyCut
         | ReplyDone | Error | Heard | HeardPartial | TurnJudged | Spoken | Interrupted
         | TurnContinued | Wake | TimerFinished | ConfirmationAsked | ConfirmationAnswered)
EVENT_TYPES: tuple[type, ...] = (
    Status, SummaryStarted, Summarized, SummaryFailed, SummaryCancelled, RecallHint,
    ResearchBudgetReached, ToolCall, ToolResult, TextDelta, Sentence, ReplyCut, ReplyDone, Error,
    Heard, HeardPartial, TurnJudged, Spoken, Interrupted, TurnContinued, Wake, TimerFinished,
    ConfirmationAsked, ConfirmationAnswered)
"""Every event, in the order docs/events.md documents them."""
