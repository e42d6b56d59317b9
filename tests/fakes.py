"""Stand-in engines for unit tests of the logic around them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from models.base import (
    CancelToken,
    ChatModel,
    Chunk,
    ModelCapabilities,
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
    capabilities = ModelCapabilities(prefill=True)
    """It records what it is given to prepare (`prefills`); a test gives it more."""

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


class HearsWordsInAnything(SpeechToText):
    """Turns any audio it is given into words: only Parley's own gate can keep noise out."""

    name = "eager-stt"

    def __init__(self) -> None:
        self.heard: list[int] = []
        """Length in samples of every utterance it was given."""

    def transcribe(self, pcm: np.ndarray) -> Transcript:
        self.heard.append(len(pcm))
        return Transcript("Words from nowhere.", 0.9)


# -- clocks ----------------------------------------------------------------------------

import threading  # noqa: E402
from collections.abc import Callable  # noqa: E402

HUNG_S = 30.0
"""Only a hung test waits this long: no assertion depends on how fast the machine is."""


class FakeClock:
    """Time that moves only when told (`now += s`, or `sleep(s)`)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class SteppedClock(FakeClock):
    """A fake clock whose `sleep()` moves it on, then waits for the test's go-ahead: the test
    decides exactly where another thread's wait is when it acts."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = threading.Condition()
        self.sleeps = 0
        """Sleeps begun."""
        self.allowed = 0
        """Sleeps allowed to end."""

    def sleep(self, seconds: float) -> None:
        with self.changed:
            self.now += seconds
            self.sleeps += 1
            self.changed.notify_all()
            if not self.changed.wait_for(lambda: self.allowed >= self.sleeps, HUNG_S):
                raise AssertionError("the test never let the sleeper go on")

    def until(self, condition: Callable[[], object]) -> None:
        with self.changed:
            assert self.changed.wait_for(condition, HUNG_S)

    def allow(self, sleeps: int) -> None:
        with self.changed:
            self.allowed = sleeps
            self.changed.notify_all()


class MicrophoneClock:
    """Time as a 16 kHz microphone's samples count it, for a voice loop and its speaker.

    It moves only as the test feeds audio, so how much of a reply plays while the user
    talks is a count of samples, whatever the machine's speed. A speaker's `sleep()` waits
    until that much audio has been fed.
    """

    rate = 16000

    def __init__(self) -> None:
        self.samples = 0
        self.fed = threading.Condition()

    def __call__(self) -> float:
        return self.monotonic()

    def monotonic(self) -> float:
        with self.fed:
            return self.samples / self.rate

    def sleep(self, seconds: float) -> None:
        with self.fed:
            until = self.samples + seconds * self.rate
            if not self.fed.wait_for(lambda: self.samples >= until, HUNG_S):
                raise AssertionError("the test stopped feeding audio")

    def feed(self, sink: Callable[[np.ndarray], None], pcm: np.ndarray,
             before_frame: Callable[[int], None] | None = None) -> None:
        """Feed `pcm` to `sink` in 30 ms frames, as a microphone delivers them;
        `before_frame(offset)` runs before each, with the frame's first sample in `pcm`."""
        step = self.rate * 30 // 1000
        for offset in range(0, len(pcm), step):
            if before_frame is not None:
                before_frame(offset)
            frame = pcm[offset:offset + step]
            with self.fed:  # the frame has been captured: its time has passed
                self.samples += len(frame)
                self.fed.notify_all()
            sink(frame)


HISTORY_TIME = r", \w{3} \d{1,2} \w{3}(?: \d{4})? \d\d:\d\d"
"""When a message was said, as `/history` shows it after the role: a pattern for pexpect."""


def untimed(text: str) -> str:
    """`/history` lines without when each message was said, for tests about what was kept."""
    import re

    return re.sub(HISTORY_TIME + ":", ":", text)
