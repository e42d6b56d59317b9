"""Stand-in engines for unit tests of the logic around them: chat models that answer
from a queue (and write summaries), speech-to-text that hears what a test scripted, and
text-to-speech that speaks tones. Each subclasses the real engine protocol."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from memory.summary import SUMMARIZER_SYSTEM
from models.base import (
    CancelToken,
    ChatModel,
    Chunk,
    ModelCapabilities,
    PromptMessage,
    TextChunk,
    ToolSpec,
    UsageChunk,
)
from models.speech import SpeechToText, SpokenAudio, TextToSpeech, Transcript
from models.toolcalls import ToolCallScanner
from tests.support.clocks import HUNG_S

# -- chat models -------------------------------------------------------------------------


class ScriptedChatModel(ChatModel):
    """Answers from a queue; records every prompt (and the tools offered) it is given.

    Replies are raw model output, so `<tool_call>` text goes through the same
    parser as a real model's output. Tokens are counted as one per 4 characters.
    """

    name = "scripted"
    capabilities = ModelCapabilities(prefill=True)
    """It records what it is given to prepare (`prefills`); a test gives it more."""

    def __init__(self, context_size: int = 8192, chunk_size: int = 5) -> None:
        self.context_size = context_size
        self.queue: list[str | Exception | Callable[[list[PromptMessage]], str]] = []
        self.prompts: list[list[PromptMessage]] = []
        self.offered: list[list[str]] = []
        self.chunk_size = chunk_size
        self.prefills: list[list[PromptMessage]] = []
        self.sent: list[int] = []
        """For each reply streamed, how many of its characters it sent before it stopped."""

    def enqueue(self, *replies: str | Exception | Callable[[list[PromptMessage]], str]
                ) -> None:
        self.queue.extend(replies)

    def count_tokens(self, message: PromptMessage) -> int:
        return 4 + len(message.content) // 4

    def overhead_tokens(self, tools: Sequence[ToolSpec]) -> int:
        return 3 + sum(20 + len(t.description) // 4 for t in tools)

    def prefill(self, messages: Sequence[PromptMessage], tools: Sequence[ToolSpec],
                stop: CancelToken | None = None) -> int:
        self.prefills.append(list(messages))
        return sum(self.count_tokens(m) for m in messages)

    def stream(
        self,
        messages: Sequence[PromptMessage],
        tools: Sequence[ToolSpec],
        max_tokens: int,
        cancel: CancelToken | None = None,
    ) -> Iterator[Chunk]:
        self.prompts.append(list(messages))
        self.offered.append([t.name for t in tools])
        reply = self.queue.pop(0) if self.queue else "OK."
        if isinstance(reply, Exception):
            raise reply
        if callable(reply):  # an answer made from what it was given (a tool's result)
            reply = reply(messages)
        scanner = ToolCallScanner(tools=tools)
        self.sent.append(0)
        for start in range(0, len(reply), self.chunk_size):
            if cancel is not None and cancel.cancelled:
                break
            self.sent[-1] = min(start + self.chunk_size, len(reply))
            yield from scanner.feed(reply[start:start + self.chunk_size])
        yield from scanner.finish()
        total = sum(self.count_tokens(m) for m in messages)
        yield UsageChunk(total, total, len(reply) // 4)


class SummarizingModel(ScriptedChatModel):
    """A scripted model that also answers summary requests, from its own queue.

    With no queued summary it writes a proper bullet for every exchange the request
    lists, so tests of the reply path need not predict when a summary happens.
    """

    def __init__(self, context_size: int = 8192) -> None:
        super().__init__(context_size)
        self.summaries: list[str | Exception] = []
        self.summary_requests: list[str] = []

    def stream(self, messages: Sequence[PromptMessage], tools: Sequence[ToolSpec],
               max_tokens: int, cancel: CancelToken | None = None) -> Iterator[Chunk]:
        if messages[0].content != SUMMARIZER_SYSTEM:
            yield from super().stream(messages, tools, max_tokens, cancel)
            return
        request = messages[1].content
        self.summary_requests.append(request)
        if self.summaries:
            reply = self.summaries.pop(0)
            if isinstance(reply, Exception):
                raise reply
        else:
            labels = re.findall(r"\(#\d+(?:–#\d+)?\)", request.rsplit("in order:", 1)[1])
            reply = "\n".join(f"- {lab} The user and the assistant talked about topic "
                              f"{n}." for n, lab in enumerate(labels))
        for start in range(0, len(reply), 7):
            yield TextChunk(reply[start:start + 7])


class HeldSummaries(SummarizingModel):
    """Its first `hold` summary requests go on until Parley cancels them (the user came
    first); later ones are written at once, a bullet per exchange."""

    capabilities = ModelCapabilities(prefill=True, keeps_prompt_aside=True)

    def __init__(self, hold: int = 0) -> None:
        super().__init__(2048)
        self.hold = hold
        self.held = threading.Event()
        """Set while a summary is being held."""
        self.cancelled = 0
        self.aside_now = False
        self.asides: list[bool] = []
        """For each summary: whether it was written aside (the prepared prompt kept)."""

    @contextmanager
    def aside(self) -> Iterator[None]:
        self.aside_now = True
        try:
            yield
        finally:
            self.aside_now = False

    def stream(self, messages: Sequence[PromptMessage], tools: Sequence[ToolSpec],
               max_tokens: int, cancel: CancelToken | None = None) -> Iterator[Chunk]:
        if messages[0].content == SUMMARIZER_SYSTEM:
            self.asides.append(self.aside_now)
        if messages[0].content != SUMMARIZER_SYSTEM or not self.hold:
            yield from super().stream(messages, tools, max_tokens, cancel)
            return
        self.hold -= 1
        self.summary_requests.append(messages[1].content)
        self.held.set()
        deadline = time.monotonic() + HUNG_S  # only a hung test waits this long
        while cancel is not None and not cancel.cancelled and time.monotonic() < deadline:
            time.sleep(0.002)
        self.held.clear()
        self.cancelled += 1


# -- speech ----------------------------------------------------------------------------


class ScriptedSpeechToText(SpeechToText):
    """Hears what a test scripted for each clip, told apart by the clip's peak amplitude
    (`tests.support.clips.speechlike` makes such clips)."""

    name = "scripted-stt"

    def __init__(self, script: dict[int, str]) -> None:
        self.script = script
        self.heard: list[int] = []
        """Length in samples of every utterance it was given."""

    def transcribe(self, pcm: np.ndarray) -> Transcript:
        self.heard.append(len(pcm))
        peak = int(np.max(np.abs(pcm.astype(np.int32)))) if len(pcm) else 0
        if peak < 500:
            return Transcript("", 0.0, "too quiet")
        nearest = min(self.script, key=lambda level: abs(level - peak))
        return Transcript(self.script[nearest], 0.9)


class ToneTextToSpeech(TextToSpeech):
    """Speaks every sentence as a quiet tone, 50 ms per character, at 16 kHz."""

    name = "tone-tts"
    sample_rate = 16000

    def __init__(self, ms_per_char: float = 50.0) -> None:
        self.ms_per_char = ms_per_char
        self.spoken: list[str] = []

    def synthesize(self, text: str):
        text = text.strip()
        if not text:
            return
        self.spoken.append(text)
        count = int(len(text) * self.ms_per_char * self.sample_rate / 1000)
        t = np.arange(count) / self.sample_rate
        yield SpokenAudio((np.sin(2 * np.pi * 330 * t) * 2000).astype(np.int16),
                          self.sample_rate, text)


class HearsWordsInAnything(SpeechToText):
    """Turns any audio it is given into words: only Parley's own gate can keep noise out."""

    name = "eager-stt"

    def __init__(self) -> None:
        self.heard: list[int] = []
        """Length in samples of every utterance it was given."""

    def transcribe(self, pcm: np.ndarray) -> Transcript:
        self.heard.append(len(pcm))
        return Transcript("Words from nowhere.", 0.9)
