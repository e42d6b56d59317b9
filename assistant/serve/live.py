"""A transcription's words while its audio still comes, as Wyoming transcript chunks.

Home Assistant streams a satellite's audio as the user speaks. Each time
`live_transcript_s` more of it has come, the audio so far is transcribed again (when
Whisper is free), and the words two passes in a row agree on are sent as a
`transcript-chunk`: the words kept since the last chunk, never taken back
(`assistant.voice.live_words.LocalAgreement`, as in `parley voice`). At the end the
`transcript` of the whole audio is what counts; the chunks are what could be shown before.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import numpy as np
from wyoming.asr import TranscriptChunk, TranscriptStart, TranscriptStop
from wyoming.event import Event as WyomingEvent

from assistant.serve.engines import Engines
from assistant.voice.live_words import LocalAgreement, same_word
from models.errors import EngineError

log = logging.getLogger(__name__)

PACE = 0.5
"""Audio coming more than twice as fast as it is spoken is a recording sent at once, not a
voice: it gets one transcript, and no passes that would only delay it."""


class TranscriptChunks:
    """The texts of a transcription's `transcript-chunk` events."""

    def __init__(self) -> None:
        self._agreement = LocalAgreement()
        self._sent: list[str] = []

    @property
    def sent(self) -> str:
        return " ".join(self._sent)

    def heard(self, text: str) -> str | None:
        """A pass over the audio so far heard `text`: the next chunk, if it kept words."""
        kept = self._agreement.add(text).kept.split()
        return self._send(kept[len(self._sent):])

    def rest(self, final: str) -> str | None:
        """The whole audio's transcript is `final`: the chunk that completes the chunks
        sent to it, if they are its beginning (if not, the transcript alone says it)."""
        words = final.split()
        if len(words) < len(self._sent) or not all(
                same_word(a, b) for a, b in zip(self._sent, words, strict=False)):
            return None
        return self._send(words[len(self._sent):])

    def _send(self, words: list[str]) -> str | None:
        if not words:
            return None
        # Chunks are parts of one text: each after the first begins with its space.
        chunk = (" " if self._sent else "") + " ".join(words)
        self._sent += words
        return chunk


class WordsSoFar:
    """One transcription's passes while its audio comes, and its chunks, sent with `send`.

    With `every_s` 0 nothing is streamed: the client gets the `transcript` alone, as a
    server without `supports_transcript_streaming` sends it."""

    def __init__(self, engines: Engines, every_s: float, rate: int,
                 send: Callable[[WyomingEvent], Awaitable[None]],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.engines, self.send, self.rate, self.clock = engines, send, rate, clock
        self.every = round(every_s * rate)
        self.chunks = TranscriptChunks()
        self.started = clock()
        self.covered = 0
        """Samples the last pass was given."""
        self.passing: asyncio.Task | None = None
        self.opened = False

    @property
    def streaming(self) -> bool:
        return self.every > 0

    def grew(self, samples: int, audio: Callable[[], np.ndarray]) -> None:
        """The audio reached `samples`; `audio()` gives it all. A pass starts if enough
        came since the last, none is under way, Whisper is free (another client's
        transcript comes first) and the audio comes at about the pace of speech."""
        if not self.streaming or samples - self.covered < self.every:
            return
        if self.passing is not None and not self.passing.done():
            return
        if self.engines.waiting["stt"] or self.clock() - self.started < (
                PACE * samples / self.rate):
            return
        self.covered = samples
        self.passing = asyncio.create_task(self._pass(audio()))

    async def _pass(self, pcm: np.ndarray) -> None:
        try:
            heard = await self.engines.transcribe(pcm)
        except EngineError:  # the whole audio's transcript reports it, if it fails too
            log.debug("a pass over the audio so far failed", exc_info=True)
            return
        if chunk := self.chunks.heard(heard.text):
            try:
                await self._chunk(chunk)
            except ConnectionError:  # the client left: its connection ends on its own
                log.debug("a client left while its words were sent")

    async def _open(self) -> None:
        if not self.opened:
            self.opened = True
            await self.send(TranscriptStart(language="en").event())

    async def _chunk(self, text: str) -> None:
        await self._open()
        await self.send(TranscriptChunk(text=text).event())

    async def settled(self) -> None:
        """The audio ended: the pass under way finishes (its words come before the
        transcript; the transcript would wait for Whisper anyway)."""
        if self.passing is not None:
            await asyncio.gather(self.passing, return_exceptions=True)

    async def before_transcript(self, final: str) -> None:
        """Streaming: the stream is opened if no chunk did, and the words not yet sent."""
        if not self.streaming:
            return
        rest = self.chunks.rest(final)
        if rest:
            await self._chunk(rest)
        else:
            await self._open()

    async def after_transcript(self) -> None:
        if self.streaming:
            await self.send(TranscriptStop().event())

    def cancel(self) -> None:
        """The recording was dropped: a pass under way sends nothing."""
        if self.passing is not None:
            self.passing.cancel()
