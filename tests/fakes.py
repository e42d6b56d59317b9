"""Stand-in engines for unit tests of the logic around them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from models.base import (
    CancelToken,
    ChatModel,
    Chunk,
    PromptMessage,
    ToolSpec,
    UsageChunk,
)
from models.toolcalls import ToolCallScanner


class ScriptedChatModel(ChatModel):
    """Answers from a queue; records every prompt (and the tools offered) it is given.

    Replies are raw model output, so `<tool_call>` text goes through the same
    parser as a real model's output. Tokens are counted as one per 4 characters.
    """

    name = "scripted"

    def __init__(self, context_size: int = 8192, chunk_size: int = 5) -> None:
        self.context_size = context_size
        self.queue: list[str | Exception] = []
        self.prompts: list[list[PromptMessage]] = []
        self.offered: list[list[str]] = []
        self.chunk_size = chunk_size
        self.prefills: list[list[PromptMessage]] = []

    def enqueue(self, *replies: str | Exception) -> None:
        self.queue.extend(replies)

    def count_tokens(self, message: PromptMessage) -> int:
        return 4 + len(message.content) // 4

    def overhead_tokens(self, tools: Sequence[ToolSpec]) -> int:
        return 3 + sum(20 + len(t.description) // 4 for t in tools)

    def prefill(self, messages: Sequence[PromptMessage], tools: Sequence[ToolSpec]) -> int:
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
        scanner = ToolCallScanner()
        for start in range(0, len(reply), self.chunk_size):
            if cancel is not None and cancel.cancelled:
                break
            yield from scanner.feed(reply[start:start + self.chunk_size])
        yield from scanner.finish()
        total = sum(self.count_tokens(m) for m in messages)
        yield UsageChunk(total, total, len(reply) // 4)


def texts(events: list, kind: type) -> list[str]:
    return [getattr(e, "text", getattr(e, "content", "")) for e in events if isinstance(e, kind)]



# -- speech ----------------------------------------------------------------------------

import numpy as np  # noqa: E402

from models.speech import SpeechToText, TextToSpeech, Transcript  # noqa: E402


def speechlike(seconds: float, peak: int, rate: int = 16000, pitch: float = 140.0) -> np.ndarray:
    """A voiced, syllable-paced buzz that webrtcvad takes for speech; `peak` labels it.

    Stand-in STT below tells clips apart by their peak amplitude, so a test can script
    what each clip "says" while the real segmenter and VAD run on it.
    """
    t = np.arange(int(seconds * rate)) / rate
    phase = 2 * np.pi * np.cumsum(pitch * (1 + 0.05 * np.sin(2 * np.pi * 3 * t))) / rate
    voice = sum(np.sin(k * phase) / k for k in range(1, 12))
    syllables = 0.55 + 0.45 * np.abs(np.sin(2 * np.pi * 2.5 * t))
    wave = voice * syllables
    return (wave / np.max(np.abs(wave)) * peak).astype(np.int16)


class ScriptedSpeechToText(SpeechToText):
    """Hears what a test scripted for each clip, told apart by the clip's peak amplitude."""

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
        yield (np.sin(2 * np.pi * 330 * t) * 2000).astype(np.int16)
