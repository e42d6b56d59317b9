"""One client's connection: its events in order, answered as the Wyoming protocol says.

Home Assistant opens a connection per request: `describe`; `transcribe` and the audio;
`synthesize` (or its streaming form); a `transcript` for the conversation to handle.
What a client gets wrong is answered with an `error` event and the connection goes on,
unless its framing is lost; a client that leaves mid-request only ends its own request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

import numpy as np
from wyoming.asr import Transcribe
from wyoming.asr import Transcript as WyomingTranscript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event as WyomingEvent
from wyoming.handle import Handled, NotHandled
from wyoming.info import Describe
from wyoming.ping import Ping, Pong
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
)

from assistant.sentences import SentenceSplitter
from assistant.serve.conversations import ConversationsBusy, conversation_id
from assistant.serve.live import WordsSoFar
from assistant.serve.service import Service
from assistant.serve.wire import ClientError, read_event, write_event
from audio.convert import AudioFormatError, PcmConverter, PcmFormat
from models.base import CancelToken
from models.errors import EngineError

log = logging.getLogger(__name__)

MAX_AUDIO_SECONDS = 120
"""One transcription's audio at most (Home Assistant stops listening long before)."""
MAX_TEXT_CHARS = 20_000
"""Text to speak or to handle, at most (a long paste is refused, not half read)."""
SAMPLES_PER_CHUNK = 1024
"""Audio goes out in chunks of this many samples, as wyoming-piper sends it."""
CLIENT_WATCH_SECONDS = 0.2
"""How often a reply in progress looks whether its client is still there."""


def bad_request(text: str) -> ClientError:
    return ClientError("bad-request", text)


def text_field(data: dict, name: str, event: str) -> str:
    value = data.get(name)
    if not isinstance(value, str):
        raise bad_request(f"A {event} event needs \"{name}\", a text.")
    if len(value) > MAX_TEXT_CHARS:
        raise ClientError("text-too-long", f"The {event} text is {len(value):,} characters; "
                                           f"Parley takes at most {MAX_TEXT_CHARS:,}.")
    return value


def audio_format(data: dict) -> PcmFormat:
    try:
        return PcmFormat(data.get("rate"), data.get("width"), data.get("channels"))
    except AudioFormatError as exc:
        raise ClientError("bad-audio-format", f"{str(exc).capitalize()}.") from None


@dataclass
class Recording:
    """Audio coming in for one transcription, converted as it comes."""

    converter: PcmConverter
    words: WordsSoFar
    """Its words while it comes (transcript-chunk), when the server streams them."""
    pieces: list[np.ndarray]
    samples: int = 0

    def add(self, converted: np.ndarray) -> None:
        self.pieces.append(converted)
        self.samples += len(converted)
        if self.samples > MAX_AUDIO_SECONDS * self.converter.rate:
            raise ClientError("audio-too-long", f"More than {MAX_AUDIO_SECONDS} s of audio "
                                                "came for one transcription; it was dropped.")
        self.words.grew(self.samples, self.pcm)

    def pcm(self) -> np.ndarray:
        return np.concatenate(self.pieces) if self.pieces else np.zeros(0, np.int16)


class Connection:
    def __init__(self, service: Service, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.service, self.reader, self.writer = service, reader, writer
        self.recording: Recording | None = None
        self.dropped = False
        """The audio coming in was refused (told once): its other chunks are ignored."""
        self.streaming: SentenceSplitter | None = None
        """Text arriving with synthesize-chunk, split into sentences as it comes."""
        self.audio_started = False
        """audio-start was sent for the speech being sent now."""

    async def send(self, event: WyomingEvent) -> None:
        await write_event(self.writer, event)

    async def run(self) -> None:
        try:
            while True:
                try:
                    event = await read_event(self.reader)
                    if event is None:
                        return
                    await self.handle(event)
                except ClientError as exc:
                    log.debug("client error: %s (%s)", exc.text, exc.code)
                    await self.send(exc.event())
                    if exc.fatal:
                        return
                except EngineError as exc:  # that request failed; the next may not
                    log.debug("an engine failed", exc_info=True)
                    self.drop_recording()
                    self.streaming = None
                    await self.send(ClientError("engine-failed", f"{exc}. Try again.").event())
        except (ConnectionError, asyncio.IncompleteReadError):
            log.debug("a client left mid-request")
        finally:
            self.drop_recording()
            self.writer.close()

    async def handle(self, event: WyomingEvent) -> None:
        kind, data = event.type, event.data
        if Describe.is_type(kind):
            await self.send(self.service.info)
        elif Ping.is_type(kind):
            await self.send(Pong(text=Ping.from_event(event).text).event())
        elif kind == "select-program":
            if data.get("name") != "parley":
                raise bad_request(f"There is no program {data.get('name')!r}; Parley's "
                                  "programs are all named \"parley\".")
        elif Transcribe.is_type(kind):
            language = data.get("language")
            if isinstance(language, str) and language and not language.startswith("en"):
                raise ClientError("unsupported-language", f"Parley's speech-to-text hears "
                                                          f"English, not {language!r}.")
        elif AudioStart.is_type(kind):
            self.drop_recording()
            self.dropped = True  # until its format is known good
            converter = PcmConverter(audio_format(data))
            words = WordsSoFar(self.service.engines, self.service.live_transcript_s,
                               converter.rate, self.send)
            self.recording, self.dropped = Recording(converter, words, []), False
        elif AudioChunk.is_type(kind):
            self.add_audio(event)
        elif AudioStop.is_type(kind):
            await self.transcribe()
        elif Synthesize.is_type(kind):
            if self.streaming is None:  # during a stream it is the same text, sent again
                await self.synthesize(text_field(data, "text", "synthesize"), data)
        elif SynthesizeStart.is_type(kind):
            self.check_voice(data)
            self.streaming, self.audio_started = SentenceSplitter(), False
        elif SynthesizeChunk.is_type(kind):
            await self.stream_chunk(text_field(data, "text", "synthesize-chunk"))
        elif SynthesizeStop.is_type(kind):
            await self.stream_stop()
        elif WyomingTranscript.is_type(kind):
            await self.handle_transcript(data)
        else:
            raise ClientError("unknown-event", f"Parley does not serve {kind!r} events: it "
                                               "serves speech-to-text (transcribe), "
                                               "text-to-speech (synthesize) and conversation "
                                               "(a transcript to handle).")

    # -- speech-to-text -----------------------------------------------------------------

    def add_audio(self, event: WyomingEvent) -> None:
        recording = self.recording
        if recording is None and self.dropped:
            return
        if recording is None:
            raise ClientError("no-audio-start", "Audio came without audio-start; send "
                                                "audio-start with its rate, width and "
                                                "channels first.")
        chunk_format = audio_format(event.data)
        try:
            if chunk_format != recording.converter.source:  # allowed: each chunk says its own
                recording.add(recording.converter.finish())
                recording.converter = PcmConverter(chunk_format)
            recording.add(recording.converter.feed(event.payload or b""))
        except ClientError:
            self.drop_recording()
            self.dropped = True
            raise

    def drop_recording(self) -> None:
        if self.recording is not None:
            self.recording.words.cancel()
        self.recording = None

    async def transcribe(self) -> None:
        recording, self.recording = self.recording, None
        if recording is None and self.dropped:
            self.dropped = False  # its error was sent: nothing to transcribe
            return
        if recording is None:
            raise ClientError("no-audio-start", "audio-stop came without audio-start.")
        recording.add(recording.converter.finish())
        pcm = recording.pcm()
        started = time.monotonic()
        await recording.words.settled()
        heard = await self.service.engines.transcribe(pcm)
        log.debug("speech-to-text: %.1f s of audio in %.0f ms", len(pcm) / recording.converter.rate,
                  (time.monotonic() - started) * 1000)
        # Streaming: transcript-start, the chunks, the transcript, transcript-stop.
        await recording.words.before_transcript(heard.text)
        await self.send(WyomingTranscript(text=heard.text, language="en").event())
        await recording.words.after_transcript()

    # -- text-to-speech -----------------------------------------------------------------

    def check_voice(self, data: dict) -> None:
        voice = data.get("voice")
        if voice is None:
            return
        if not isinstance(voice, dict):
            raise bad_request("\"voice\" must be an object with the voice's \"name\".")
        name = voice.get("name")
        if name is not None and name != self.service.voice_name:
            raise ClientError("unknown-voice", f"There is no voice {name!r}; Parley speaks "
                                               f"with {self.service.voice_name!r}.")

    async def synthesize(self, text: str, data: dict) -> None:
        self.check_voice(data)
        started, self.audio_started = time.monotonic(), False
        await self.speak(text)
        await self.stop_audio()
        log.debug("text-to-speech: %d characters in %.0f ms", len(text),
                  (time.monotonic() - started) * 1000)

    async def start_audio(self, rate: int) -> None:
        """audio-start, once per reply, in the format of its first audio."""
        if not self.audio_started:
            self.audio_started = True
            await self.send(AudioStart(rate=rate, width=2, channels=1).event())

    async def stop_audio(self) -> None:
        # Text with nothing to say still gets its (empty) audio, at the voice's rate.
        await self.start_audio(self.service.engines.tts.sample_rate)
        self.audio_started = False
        await self.send(AudioStop().event())

    async def speak(self, text: str) -> None:
        async for audio in self.service.engines.synthesize(text):
            await self.start_audio(audio.sample_rate)
            for start in range(0, len(audio.pcm), SAMPLES_PER_CHUNK):
                piece = audio.pcm[start:start + SAMPLES_PER_CHUNK].astype("<i2").tobytes()
                await self.send(AudioChunk(rate=audio.sample_rate, width=2, channels=1,
                                           audio=piece).event())

    async def stream_chunk(self, text: str) -> None:
        if self.streaming is None:
            raise bad_request("synthesize-chunk came without synthesize-start.")
        for sentence in self.streaming.feed(text):
            await self.speak(sentence)

    async def stream_stop(self) -> None:
        splitter, self.streaming = self.streaming, None
        if splitter is None:
            raise bad_request("synthesize-stop came without synthesize-start.")
        for sentence in splitter.finish():
            await self.speak(sentence)
        await self.stop_audio()
        await self.send(SynthesizeStopped().event())

    # -- conversation -------------------------------------------------------------------

    async def handle_transcript(self, data: dict) -> None:
        text = text_field(data, "text", "transcript").strip()
        key = conversation_id(data.get("context"))
        context = {"conversation_id": key} if key is not None else None
        if not text:
            await self.send(NotHandled(text="Nothing was said.", context=context).event())
            return
        try:
            kept = self.service.conversations.get(key)
        except ConversationsBusy as exc:
            await self.send(NotHandled(text=f"Parley is busy: {exc}.", context=context).event())
            return
        cancel, started = CancelToken(), time.monotonic()
        self.service.engines.stop_summaries()  # one may hold this conversation
        async with kept.lock:
            reply = asyncio.ensure_future(
                self.service.engines.reply(kept.conversation, text, cancel))
            try:
                while not reply.done():
                    await asyncio.wait({reply}, timeout=CLIENT_WATCH_SECONDS)
                    if self.reader.at_eof() or self.writer.is_closing():
                        cancel.cancel()  # nobody to answer: free the model for the others
            finally:  # the server stopping, too: the model stops at its next token
                if not reply.done():
                    cancel.cancel()
            answer = reply.result()
            kept.last_used = self.service.conversations.clock()
        log.debug("conversation %s: answered in %.0f ms%s", key or "(one request)",
                  (time.monotonic() - started) * 1000,
                  " (the client left)" if cancel.cancelled else "")
        if cancel.cancelled:
            return
        made = NotHandled if answer.failed else Handled
        await self.send(made(text=answer.text, context=context).event())
        if key is not None and not answer.failed:
            self.service.summarize_later(kept)  # so that no reply of it waits for one
