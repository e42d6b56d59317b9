"""The engines every client shares, each on its own thread, never on the event loop.

One thread per engine: the model, Whisper, Piper and the local intents (Home Assistant's
sentence matcher) each do one thing at a time, and the requests for each wait their turn,
first come, first served. The event loop only reads and writes events, so a long reply
for one client never delays another client's `describe`.
Speech is synthesized a sentence per turn: two clients' long texts take turns, and neither
waits for the other's whole text.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from assistant.between_turns import BetweenTurns
from assistant.confirmation import Approve
from assistant.conversation import Conversation
from assistant.events import Error, Event, ReplyDone, Summarized, SummaryFailed
from assistant.sentences import split_sentences
from models.base import CancelToken
from models.speech import SpeechToText, SpokenAudio, TextToSpeech, Transcript

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Answer:
    """A conversation's reply: its text, or why there is none."""

    text: str
    failed: bool = False
    """`text` says why no reply came (the model failed, the message was too long…)."""


def _log_summary(event: Event) -> None:
    if isinstance(event, Summarized):
        log.debug("summary ahead: it covers #1 to #%d", event.covered_through)
    elif isinstance(event, SummaryFailed):
        log.debug("summary ahead: %s", event.text)


class Engines:
    """Speech-to-text, text-to-speech, the local intents and the conversations' model, a
    thread each."""

    def __init__(self, stt: SpeechToText, tts: TextToSpeech,
                 approve: Approve | None = None) -> None:
        self.stt, self.tts = stt, tts
        self.approve = approve
        """Answers for a tool that asks first: no one can be asked here, so it says why."""
        self._threads = {name: ThreadPoolExecutor(1, thread_name_prefix=f"serve-{name}")
                         for name in ("stt", "tts", "local", "model")}
        self.closing = False
        self.waiting = dict.fromkeys(self._threads, 0)
        """Requests each engine is doing or has queued."""
        self._between_turns: set[BetweenTurns] = set()
        """The summaries written or waiting to be written ahead: a request stops them."""

    async def _run(self, engine: str, work: Callable[[], T]) -> T:
        self.waiting[engine] += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._threads[engine], work)
        finally:
            self.waiting[engine] -= 1

    async def transcribe(self, pcm: np.ndarray) -> Transcript:
        return await self._run("stt", lambda: self.stt.transcribe(pcm))

    async def synthesize(self, text: str) -> AsyncIterator[SpokenAudio]:
        """The voice's audio for `text`, a sentence at a time."""
        for sentence in split_sentences(text):
            if self.closing:
                return
            for chunk in await self._run("tts", lambda s=sentence: list(self.tts.synthesize(s))):
                yield chunk

    async def reply(self, conversation: Conversation, text: str, cancel: CancelToken) -> Answer:
        """`conversation`'s answer to `text`: local intents first, on a thread of their own
        (a few milliseconds: "what time is it" never waits behind others' model replies),
        then the model."""
        errors: list[str] = []

        def collect(event: Event) -> None:
            if isinstance(event, Error):
                errors.append(event.message)

        def answer(done: ReplyDone | None) -> Answer:
            if isinstance(done, ReplyDone) and done.text:
                return Answer(done.text)
            return Answer(" ".join(errors) or "Parley has no answer to that.", failed=True)

        def by_model() -> Answer:
            if cancel.cancelled:  # the client left while this waited its turn
                return Answer("", failed=True)
            return answer(conversation.reply(text, collect, cancel, local_first=False,
                                             approve=self.approve))

        matched, done = await self._run("local", lambda: conversation.reply_locally(text,
                                                                                  collect))
        if matched:  # "never mind" is answered with nothing to say
            nothing = isinstance(done, ReplyDone) and not done.text and not errors
            return Answer("") if nothing else answer(done)
        self.stop_summaries()  # the model is wanted: a summary ahead must not hold it
        return await self._run("model", by_model)

    async def between_turns(self, work: BetweenTurns) -> None:
        """Write the summary a conversation's coming turns will need, on the model's
        thread, so that no reply waits for it (`BetweenTurns`); the caller holds the
        conversation. A model request coming meanwhile, even before it starts, stops it
        between two batches of the model's work; the next time the model is free tries again."""
        work.begin()
        self._between_turns.add(work)
        try:
            await self._run("model", lambda: work.run(_log_summary,
                                                      wanted=lambda: not self.closing))
        finally:
            self._between_turns.discard(work)

    def stop_summaries(self) -> None:
        for work in list(self._between_turns):
            work.stop()

    def close(self) -> None:
        """Stop taking work; what runs now finishes its step (native code cannot be left
        mid-step: the interpreter would crash at exit)."""
        self.closing = True
        self.stop_summaries()
        for thread in self._threads.values():
            thread.shutdown(wait=True, cancel_futures=True)
