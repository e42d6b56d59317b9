"""`parley serve`: a real server driven over Wyoming the way Home Assistant drives it.

One connection per request, as Home Assistant opens them: describe, speech-to-text, text-to-
speech (whole and streamed), conversations kept apart by their conversation_id, two clients
at once, every kind of bad input (each followed by proof that the server still serves), no
file written, and the warning for an address other machines can reach. Only 127.0.0.1 is
ever connected to. Every read has a deadline, so a broken server fails a test, never hangs it.
"""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest
import soxr
from wyoming.asr import Transcribe, Transcript, TranscriptChunk
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event, async_read_event, async_write_event
from wyoming.handle import Handled
from wyoming.info import Describe, Info
from wyoming.ping import Ping
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeVoice,
)

from tests.support import speech_samples as samples
from tests.support.clips import silence
from tests.support.nodisk import changes_outside, guarded_env, guarded_parley, traced
from tests.support.serving import LOOPBACK, Server, environment, parley, serving

pytestmark = pytest.mark.real

SMALL = ("--ctx", "2048", "--answer-tokens", "160")
"""A small prompt for the 135M model, and room for a reply long enough to be busy with."""

HOST = "127.0.0.1"

AT_ONCE_S = 10.0
"""For what is answered at once (describe, errors): the margin is for a busy machine."""

WORK_S = 180.0
"""For a transcription, a synthesis or a model reply, maybe queued behind another client's."""

DESCRIBE_S = 1.0
"""Home Assistant gives describe one second: a protocol limit, not a speed benchmark."""

RATE = samples.SAMPLE_RATE


# -- talking to the server -----------------------------------------------------------------

@dataclass(frozen=True)
class Pcm:
    """Audio as it travels in audio-chunk events: interleaved frames of `width`-byte samples."""

    audio: bytes
    rate: int
    width: int
    channels: int

    @property
    def seconds(self) -> float:
        return len(self.audio) / (self.rate * self.width * self.channels)


@dataclass(frozen=True)
class Reply:
    """What came back on a raw connection, and whether the server closed it."""

    events: list[Event]
    closed: bool


def connection(server: Server) -> AsyncTcpClient:
    return AsyncTcpClient(HOST, server.port, connect_timeout=AT_ONCE_S, read_timeout=WORK_S)


def shown(events: list[Event]) -> list[str]:
    """Events for a failure message: their types, and an error's text and code."""
    return [f"error {e.data}" if e.type == "error" else e.type for e in events]


async def read_until(client: AsyncTcpClient, *types: str, timeout: float = WORK_S
                     ) -> list[Event]:
    """The events up to and including the first of `types`."""
    client.read_timeout = timeout
    events: list[Event] = []
    while True:
        try:
            event = await client.read_event()
        except TimeoutError:
            raise AssertionError(f"no {'/'.join(types)} within {timeout:.0f} s; "
                                 f"came: {shown(events)}") from None
        if event is None:
            raise AssertionError(f"the server closed the connection before "
                                 f"{'/'.join(types)}; came: {shown(events)}")
        events.append(event)
        if event.type in types:
            return events


async def arriving_within(client: AsyncTcpClient, seconds: float) -> list[Event]:
    """Whatever the server sends in the next `seconds` (to prove it sends nothing more)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    events: list[Event] = []
    while (left := deadline - loop.time()) > 0:
        client.read_timeout = left
        try:
            event = await client.read_event()
        except TimeoutError:
            break
        if event is None:
            break
        events.append(event)
    return events


async def describe(server: Server) -> Info:
    async with connection(server) as client:
        await client.write_event(Describe().event())
        events = await read_until(client, "info", timeout=AT_ONCE_S)
    assert shown(events) == ["info"]
    return Info.from_event(events[-1])


async def transcribe(server: Server, pcm: Pcm, frames_per_chunk: int = 1024,
                     announce: bool = True) -> Transcript:
    """Home Assistant's speech-to-text: transcribe, audio-start, audio-chunk*, audio-stop."""
    step = frames_per_chunk * pcm.width * pcm.channels
    async with connection(server) as client:
        if announce:
            await client.write_event(Transcribe(language="en").event())
        await client.write_event(AudioStart(pcm.rate, pcm.width, pcm.channels).event())
        for at in range(0, len(pcm.audio), step):
            chunk = AudioChunk(pcm.rate, pcm.width, pcm.channels, pcm.audio[at:at + step])
            await client.write_event(chunk.event())
        await client.write_event(AudioStop().event())
        events = await read_until(client, "transcript-stop", "error")
    kinds = shown(events)
    # Streamed as Wyoming says (the transcript is also sent whole), and audio sent faster
    # than it is spoken gets no passes while it comes: its words are one chunk.
    assert kinds in (["transcript-start", "transcript", "transcript-stop"],
                     ["transcript-start", "transcript-chunk", "transcript", "transcript-stop"]
                     ), kinds
    transcript = Transcript.from_event(events[-2])
    assert chunked(events) == transcript.text
    return transcript


def chunked(events: list[Event]) -> str:
    """The transcript-chunk texts, joined."""
    return "".join(TranscriptChunk.from_event(e).text for e in events
                   if e.type == "transcript-chunk")


async def transcribe_as_spoken(server: Server, pcm16: np.ndarray) -> tuple[list[Event],
                                                                           list[Event]]:
    """Audio sent at the pace it is spoken, as a satellite streams it, 100 ms a chunk: the
    events that came while it was sent, and those after audio-stop."""
    loop = asyncio.get_running_loop()
    async with connection(server) as client:
        await client.write_event(Transcribe(language="en").event())
        await client.write_event(AudioStart(RATE, 2, 1).event())
        came: list[Event] = []

        async def read() -> None:
            while True:
                event = await client.read_event()
                assert event is not None, f"the connection closed; came: {shown(came)}"
                came.append(event)
                if event.type in ("transcript-stop", "error"):
                    return

        reader = asyncio.create_task(read())
        step, began = RATE // 10, loop.time()
        for n, at in enumerate(range(0, len(pcm16), step), start=1):
            piece = pcm16[at:at + step].astype("<i2").tobytes()
            await client.write_event(AudioChunk(RATE, 2, 1, piece).event())
            await asyncio.sleep(max(0.0, began + n * 0.1 - loop.time()))
        while_speaking = len(came)
        await client.write_event(AudioStop().event())
        client.read_timeout = WORK_S
        await asyncio.wait_for(reader, WORK_S)
    return came[:while_speaking], came[while_speaking:]


@dataclass(frozen=True)
class Speech:
    start: AudioStart
    pcm: Pcm
    events: list[Event]


def spoken(events: list[Event]) -> Speech:
    """The audio in a reply: its audio-start's format and the chunks' bytes joined."""
    start = AudioStart.from_event(next(e for e in events if e.type == "audio-start"))
    audio = b"".join(e.payload or b"" for e in events if e.type == "audio-chunk")
    return Speech(start, Pcm(audio, start.rate, start.width, start.channels), events)


async def synthesize(server: Server, text: str, voice: str | None = None) -> Speech:
    """Home Assistant's text-to-speech for a server it does not stream to: one synthesize."""
    async with connection(server) as client:
        chosen = SynthesizeVoice(name=voice) if voice else None
        await client.write_event(Synthesize(text=text, voice=chosen).event())
        events = await read_until(client, "audio-stop", "error")
    kinds = shown(events)
    assert kinds[0] == "audio-start" and kinds[-1] == "audio-stop", kinds
    assert set(kinds[1:-1]) == {"audio-chunk"}, kinds
    return spoken(events)


async def ask(server: Server, text: str, conversation_id: str | None = None) -> Event:
    """Home Assistant's conversation agent: a transcript with its conversation_id, on a
    connection of its own. The reply: handled, not-handled or error."""
    context = {"conversation_id": conversation_id} if conversation_id else None
    async with connection(server) as client:
        await client.write_event(Transcript(text=text, context=context, language="en").event())
        events = await read_until(client, "handled", "not-handled", "error")
    assert len(events) == 1, shown(events)
    return events[0]


async def answer(server: Server, text: str, conversation_id: str | None = None) -> Handled:
    reply = await ask(server, text, conversation_id)
    assert reply.type == "handled", shown([reply])
    handled = Handled.from_event(reply)
    assert handled.text, f"an empty answer to {text!r}"
    if conversation_id:
        assert (handled.context or {}).get("conversation_id") == conversation_id, handled
    return handled


async def raw(server: Server, data: bytes) -> Reply:
    """Sends `data` as it is, then reads until the server closes (or stays quiet for
    AT_ONCE_S). The bytes are read from the socket itself: a server that closes with input
    unread makes the kernel reset the connection, and asyncio's StreamReader then raises
    instead of handing over the error event already received."""
    loop = asyncio.get_running_loop()
    received, closed = bytearray(), False
    with socket.socket() as sock:
        sock.setblocking(False)
        await asyncio.wait_for(loop.sock_connect(sock, (HOST, server.port)), AT_ONCE_S)
        try:
            await asyncio.wait_for(loop.sock_sendall(sock, data), AT_ONCE_S)
        except (ConnectionError, TimeoutError):
            pass  # it stopped reading or closed early: what it said is still there to read
        while True:
            try:
                chunk = await asyncio.wait_for(loop.sock_recv(sock, 65536), AT_ONCE_S)
            except TimeoutError:
                break
            except ConnectionError:
                closed = True
                break
            if not chunk:
                closed = True
                break
            received += chunk
    reader = asyncio.StreamReader()
    reader.feed_data(bytes(received))
    reader.feed_eof()
    events = []
    while (event := await async_read_event(reader)) is not None:
        events.append(event)
    return Reply(events, closed)


def error_code(event: Event) -> str | None:
    assert event.type == "error", shown([event])
    return Error.from_event(event).code


def still_serves(server: Server) -> None:
    """Proof that the server still serves: a describe on a new connection gets its info."""
    info = asyncio.run(describe(server))
    assert info.asr and info.tts and info.handle


# -- audio ---------------------------------------------------------------------------------

def converted(pcm16: np.ndarray, rate: int, width: int, channels: int) -> Pcm:
    """16 kHz mono int16 in another format: resampled with soxr, the same sample in every
    channel; 8-bit unsigned (as in WAV files), 16/24/32-bit signed little-endian."""
    if (rate, width) == (RATE, 2):  # as recorded: the very samples
        whole = pcm16.astype("<i4")
    else:
        wave = pcm16.astype(np.float64) / 32768
        if rate != RATE:
            wave = soxr.resample(wave, RATE, rate)
        wave = np.clip(wave, -1.0, 1.0)
        if width == 1:
            whole = np.round(wave * 127 + 128).astype("<i4")
        else:
            whole = np.round(wave * (2 ** (8 * width - 1) - 1)).astype("<i4")
    # Each sample's low `width` bytes (little-endian), repeated for every channel of a frame.
    sample_bytes = whole.view(np.uint8).reshape(-1, 4)[:, :width]
    frames = np.repeat(sample_bytes[:, np.newaxis, :], channels, axis=1)
    return Pcm(frames.tobytes(), rate, width, channels)


def heard(transcript: Transcript) -> str:
    return transcript.text.lower()


# -- fixtures ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """One server for most tests: each start loads the models."""
    with serving(*SMALL) as running:
        yield running


@pytest.fixture(scope="module")
def recording() -> np.ndarray:
    """A person reading "he was not an ill disposed young man" (16 kHz mono int16)."""
    if not samples.available():
        pytest.skip(samples.missing_reason())
    sample = samples.librivox()[1]
    assert "young man" in sample.transcript
    return sample.pcm


# -- describe ------------------------------------------------------------------------------

def test_describe_tells_home_assistant_about_speech_to_text_text_to_speech_and_conversation(
        server):
    info = asyncio.run(describe(server))
    assert len(info.asr) == len(info.tts) == len(info.handle) == 1, info
    asr, tts, handle = info.asr[0], info.tts[0], info.handle[0]
    # Home Assistant offers only what is installed: programs, models and voices alike.
    assert asr.name == "parley" and asr.installed
    assert asr.models and all(m.installed for m in asr.models), asr
    assert asr.models[0].languages == ["en"]
    assert asr.supports_transcript_streaming is True
    assert tts.name == "parley" and tts.installed
    assert tts.voices and all(v.installed for v in tts.voices), tts
    assert re.fullmatch(r"en_US-[\w]+-\w+", tts.voices[0].name), tts.voices[0].name
    assert tts.voices[0].languages == ["en_US"]
    assert tts.supports_synthesize_streaming is True
    assert handle.name == "parley" and handle.installed
    assert handle.models and all(m.installed for m in handle.models), handle
    assert handle.models[0].languages == ["en"]
    assert handle.supports_handled_streaming is False


def test_ping_is_answered_with_pong(server):
    async def scenario() -> list[Event]:
        async with connection(server) as client:
            await client.write_event(Ping(text="hello").event())
            return await read_until(client, "pong", timeout=AT_ONCE_S)

    assert shown(asyncio.run(scenario())) == ["pong"]


def test_describe_is_answered_within_a_second_while_another_client_waits_for_a_long_reply(
        server):
    async def scenario() -> tuple[list[float], Event]:
        story = asyncio.create_task(
            ask(server, "Tell me a long story about a lighthouse keeper.", "story-1"))
        await asyncio.sleep(0.5)  # the request is in: the model is reading it or answering
        timings: list[float] = []
        while not story.done() and len(timings) < 20:
            started = time.monotonic()
            await describe(server)
            took = time.monotonic() - started
            if not story.done():  # only a describe answered while the model was busy counts
                timings.append(took)
            await asyncio.sleep(0.2)
        return timings, await story

    timings, story = asyncio.run(scenario())
    assert timings, "the story was done before a describe could be timed: nothing was proven"
    assert max(timings) < DESCRIBE_S, [f"{t:.2f} s" for t in timings]
    assert story.type == "handled", shown([story])


# -- speech-to-text ------------------------------------------------------------------------

FORMATS = {
    "16 kHz mono 16-bit, as recorded": (RATE, 2, 1),
    "44.1 kHz stereo 32-bit": (44100, 4, 2),
    "48 kHz mono 24-bit": (48000, 3, 1),
    "8 kHz mono 8-bit unsigned": (8000, 1, 1),
}


@pytest.mark.parametrize("rate, width, channels", FORMATS.values(), ids=FORMATS)
def test_a_recording_is_transcribed_in_whatever_format_it_is_sent(server, recording, rate,
                                                                  width, channels):
    pcm = converted(recording, rate, width, channels)
    transcript = asyncio.run(transcribe(server, pcm))
    assert "young man" in heard(transcript), transcript
    assert transcript.language == "en"


def test_words_come_as_transcript_chunks_while_the_speech_is_still_coming(server):
    if not samples.available():
        pytest.skip(samples.missing_reason())
    reading = samples.librivox()[0]  # 7 s: "and mister john dashwood had then leisure…"
    during, after = asyncio.run(transcribe_as_spoken(server, reading.pcm))
    kinds = shown(during)
    assert kinds[:2] == ["transcript-start", "transcript-chunk"], kinds
    assert set(kinds[1:]) == {"transcript-chunk"}, kinds
    assert "john" in chunked(during).lower(), chunked(during)
    assert shown(after)[-2:] == ["transcript", "transcript-stop"], shown(after)
    # What counts is the whole audio's transcript: the same as for the recording sent at
    # once, with no passes.
    transcript = Transcript.from_event(after[-2])
    at_once = asyncio.run(transcribe(server, converted(reading.pcm, RATE, 2, 1)))
    assert transcript.text == at_once.text
    assert "dashwood" in heard(transcript), transcript


def test_silence_is_transcribed_as_no_text(server):
    # Without the transcribe event, which is optional.
    assert asyncio.run(transcribe(server, converted(silence(2.0), RATE, 2, 1),
                                  announce=False)).text == ""


# -- text-to-speech ------------------------------------------------------------------------

BILLING = "The billing port is eight thousand and eighty."


def test_speech_parley_synthesizes_is_understood_by_its_own_speech_to_text(server):
    speech = asyncio.run(synthesize(server, BILLING))
    # 16-bit mono at the default voice's rate; the sentence takes a few seconds to say.
    assert (speech.start.rate, speech.start.width, speech.start.channels) == (22050, 2, 1)
    assert 1.5 < speech.pcm.seconds < 12, f"{speech.pcm.seconds:.1f} s"
    assert len(speech.pcm.audio) % 2 == 0  # whole 16-bit samples
    text = heard(asyncio.run(transcribe(server, speech.pcm)))
    assert "billing port" in text, text
    assert any(said in text for said in ("eighty", "8080", "80")), text


def test_the_voice_describe_names_can_be_asked_for(server):
    voice = asyncio.run(describe(server)).tts[0].voices[0].name
    speech = asyncio.run(synthesize(server, "Good morning.", voice=voice))
    assert speech.pcm.seconds > 0.3


def test_streamed_text_is_spoken_sentence_by_sentence_as_one_audio_stream(server):
    # Home Assistant's order for a streaming server: synthesize-start, the reply's text in
    # pieces as the model writes it, the whole text once more in a synthesize (for servers
    # that do not stream: Parley ignores it), synthesize-stop.
    async def scenario() -> tuple[list[Event], list[Event], list[Event]]:
        async with connection(server) as client:
            await client.write_event(SynthesizeStart().event())
            await client.write_event(SynthesizeChunk(text="The billing port is ").event())
            await client.write_event(
                SynthesizeChunk(text="eight thousand and eighty. Good").event())
            # The first sentence is complete: its audio comes before the text is over.
            early = await read_until(client, "audio-chunk", "error")
            await client.write_event(SynthesizeChunk(text="bye.").event())
            await client.write_event(Synthesize(text=f"{BILLING} Goodbye.").event())
            await client.write_event(SynthesizeStop().event())
            rest = await read_until(client, "synthesize-stopped")
            return early, rest, await arriving_within(client, 2.0)

    early, rest, after = asyncio.run(scenario())
    kinds = shown(early + rest)
    assert kinds[0] == "audio-start" and kinds.count("audio-start") == 1, kinds
    assert kinds[-2:] == ["audio-stop", "synthesize-stopped"], kinds
    assert set(kinds[1:-2]) == {"audio-chunk"}, kinds
    speech = spoken(early + rest)
    assert (speech.start.width, speech.start.channels) == (2, 1)
    assert speech.pcm.seconds > 2.0, f"{speech.pcm.seconds:.1f} s for two sentences"
    # The synthesize sent during the stream was ignored: no second reading of the text.
    assert shown(after) == []


# -- conversation --------------------------------------------------------------------------

RECALL = "When did I mention my locker code?"


def test_a_conversation_id_keeps_one_conversation_across_connections_and_apart_from_others(
        server):
    async def scenario() -> tuple[Handled, Handled, Handled]:
        await answer(server, "My locker code is 4812.", "kitchen-1")
        await answer(server, "What time is it?", "kitchen-1")  # answered locally
        kitchen = await answer(server, RECALL, "kitchen-1")
        garage = await answer(server, RECALL, "garage-2")
        kitchen_again = await answer(server, RECALL, "kitchen-1")
        return kitchen, garage, kitchen_again

    kitchen, garage, kitchen_again = asyncio.run(scenario())
    # Parley's local recall answers from the numbered history of that conversation alone:
    # "You mentioned it today at 23:04, in message 1: “My locker code is 4812.”"
    assert "4812" in kitchen.text and "message 1" in kitchen.text, kitchen.text
    assert "4812" not in garage.text, garage.text
    assert "4812" in kitchen_again.text, "asking elsewhere lost the kitchen's conversation"


def test_requests_without_a_conversation_id_do_not_share_a_conversation(server):
    async def scenario() -> Handled:
        await answer(server, "My bike lock code is 7305.")
        return await answer(server, "When did I mention my bike lock code?")

    assert "7305" not in asyncio.run(scenario()).text


def test_arithmetic_is_answered_locally(server):
    assert "391" in asyncio.run(answer(server, "What is 17 times 23?", "sums-1")).text


# -- several clients -----------------------------------------------------------------------

def test_two_clients_at_once_each_get_their_own_answer(server, recording):
    async def scenario() -> tuple[Transcript, Handled, Speech]:
        transcript, handled, speech = await asyncio.gather(
            transcribe(server, converted(recording, RATE, 2, 1)),
            answer(server, "What is 17 times 23?", "together-1"),
            synthesize(server, BILLING))
        return transcript, handled, speech

    transcript, handled, speech = asyncio.run(scenario())
    assert "young man" in heard(transcript), transcript
    assert "391" in handled.text, handled.text
    assert speech.pcm.seconds > 1.5


# -- bad input -----------------------------------------------------------------------------

LONG_LINE = b'{"type": "describe", "data": {"pad": "' + b"x" * 70_000 + b'"}}\n'

CLOSING = {
    "not json": (b"{not json\n", "malformed-event"),
    "json that is not an object": (b"[1, 2, 3]\n", "malformed-event"),
    "an object without a type": (b'{"data": {"text": "hi"}}\n', "malformed-event"),
    "a header line over 64 KiB": (LONG_LINE, "too-large"),
    "a header line over 64 KiB that never ends": (LONG_LINE[:-3], "too-large"),
    "a 50 MB payload": (b'{"type": "audio-chunk", "payload_length": 50000000}\n', "too-large"),
    "a 50 MB data part": (b'{"type": "synthesize", "data_length": 50000000}\n', "too-large"),
}


@pytest.mark.parametrize("sent, code", CLOSING.values(), ids=CLOSING)
def test_a_broken_event_gets_an_error_and_the_connection_closes_while_others_are_served(
        server, sent, code):
    reply = asyncio.run(raw(server, sent))
    assert [e.type for e in reply.events] == ["error"], \
        f"wanted one error event, came: {shown(reply.events)}"
    assert error_code(reply.events[0]) == code
    assert reply.closed, "the connection stayed open after a broken event"
    still_serves(server)


STAYING = {
    "an unknown event type": (Event("launch-rockets", {"target": "moon"}), "unknown-event"),
    "audio without audio-start": (AudioChunk(RATE, 2, 1, bytes(2048)).event(),
                                  "no-audio-start"),
    "audio-stop without audio-start": (AudioStop().event(), "no-audio-start"),
    "audio at 0 Hz": (AudioStart(0, 2, 1).event(), "bad-audio-format"),
    "7-byte samples": (AudioStart(RATE, 7, 1).event(), "bad-audio-format"),
    "no channels": (AudioStart(RATE, 2, 0).event(), "bad-audio-format"),
}


@pytest.mark.parametrize("sent, code", STAYING.values(), ids=STAYING)
def test_a_wrong_event_gets_an_error_and_the_same_connection_still_answers(server, sent, code):
    async def scenario() -> tuple[list[Event], list[Event]]:
        async with connection(server) as client:
            await client.write_event(sent)
            error = await read_until(client, "error", timeout=AT_ONCE_S)
            await client.write_event(Describe().event())
            return error, await read_until(client, "info", timeout=AT_ONCE_S)

    error, after = asyncio.run(scenario())
    assert len(error) == 1 and error_code(error[0]) == code, shown(error)
    assert shown(after) == ["info"]
    still_serves(server)


REFUSED = {
    "synthesize without text": (Event("synthesize", {}), "bad-request"),
    "synthesize with a number for text": (Event("synthesize", {"text": 42}), "bad-request"),
    "a voice Parley does not have": (
        Synthesize(text="Hello.", voice=SynthesizeVoice(name="no-such-voice")).event(),
        "unknown-voice"),
}


@pytest.mark.parametrize("sent, code", REFUSED.values(), ids=REFUSED)
def test_a_request_parley_cannot_do_gets_an_error_saying_why(server, sent, code):
    async def scenario() -> list[Event]:
        async with connection(server) as client:
            await client.write_event(sent)
            return await read_until(client, "error", "audio-start", timeout=AT_ONCE_S)

    events = asyncio.run(scenario())
    assert len(events) == 1 and error_code(events[0]) == code, shown(events)
    assert Error.from_event(events[0]).text
    still_serves(server)


def test_more_than_two_minutes_of_audio_is_refused(server):
    second = bytes(RATE * 2)

    async def scenario() -> list[Event]:
        async with connection(server) as client:
            await client.write_event(Transcribe(language="en").event())
            await client.write_event(AudioStart(RATE, 2, 1).event())
            reading = asyncio.create_task(read_until(client, "error", "transcript"))
            try:
                for _ in range(125):
                    if reading.done():  # refused already: no need to send the rest
                        break
                    await asyncio.wait_for(
                        client.write_event(AudioChunk(RATE, 2, 1, second).event()), AT_ONCE_S)
                else:
                    await client.write_event(AudioStop().event())
            except (ConnectionError, TimeoutError):
                pass  # it may stop reading or close once the limit is passed
            return await reading

    events = asyncio.run(scenario())
    assert error_code(events[-1]) == "audio-too-long", shown(events)
    still_serves(server)


def test_a_client_vanishing_mid_recording_leaves_speech_to_text_working(server, recording):
    pcm = converted(recording, RATE, 2, 1)

    async def scenario() -> Transcript:
        _, writer = await asyncio.open_connection(HOST, server.port)
        await async_write_event(Transcribe(language="en").event(), writer)
        await async_write_event(AudioStart(RATE, 2, 1).event(), writer)
        for at in range(0, 5 * 2048, 2048):
            await async_write_event(AudioChunk(RATE, 2, 1, pcm.audio[at:at + 2048]).event(),
                                    writer)
        writer.transport.abort()  # gone without audio-stop, as a crashed satellite goes
        return await transcribe(server, pcm)

    assert "young man" in heard(asyncio.run(scenario()))
    still_serves(server)


def test_a_client_leaving_before_its_answer_leaves_the_model_working(server):
    async def scenario() -> Handled:
        _, writer = await asyncio.open_connection(HOST, server.port)
        question = Transcript(text="Tell me about the history of lighthouses.",
                              context={"conversation_id": "leaver-1"})
        await async_write_event(question.event(), writer)
        await asyncio.sleep(0.5)  # the model has started on it
        writer.transport.abort()
        return await answer(server, "Say hello in one short sentence.", "stayer-1")

    asyncio.run(scenario())
    still_serves(server)


def test_a_client_leaving_while_its_speech_is_sent_leaves_text_to_speech_working(server):
    async def scenario() -> Speech:
        reader, writer = await asyncio.open_connection(HOST, server.port)
        await async_write_event(Synthesize(text=" ".join([BILLING] * 6)).event(), writer)
        first = await asyncio.wait_for(async_read_event(reader), WORK_S)
        assert first is not None and first.type == "audio-start", first
        writer.transport.abort()  # while the server is still sending
        return await synthesize(server, "Good evening.")

    assert asyncio.run(scenario()).pcm.seconds > 0.3
    still_serves(server)


# -- nothing on disk -----------------------------------------------------------------------

def test_serving_speech_and_conversation_writes_nothing_to_disk(tmp_path, recording):
    log = tmp_path / "trace"
    command = traced(guarded_parley(["serve", "--uri", LOOPBACK, *SMALL]), log)

    async def session(traced_server: Server) -> None:
        transcript = await transcribe(traced_server, converted(recording, RATE, 2, 1))
        assert "young man" in heard(transcript)
        assert (await synthesize(traced_server, BILLING)).pcm.seconds > 1.5
        await answer(traced_server, "My locker code is 4812.", "disk-1")  # the model
        assert "4812" in (await answer(traced_server, RECALL, "disk-1")).text  # the history

    with serving(command=command, env=guarded_env(tmp_path)) as traced_server:
        asyncio.run(session(traced_server))
    # Nowhere: not even the test's own folder, which holds only strace's log.
    assert [p.name for p in tmp_path.iterdir()] == ["trace"]
    assert changes_outside(log, []) == []


# -- where it listens ----------------------------------------------------------------------

def test_listening_beyond_this_machine_warns_that_wyoming_has_no_authentication():
    # Bound to every address, but only ever connected to on 127.0.0.1. SIGTERM stops it
    # as Ctrl-C does (how a service manager stops it).
    with serving(*SMALL, uri="tcp://0.0.0.0:0", stop_signal=signal.SIGTERM) as public:
        assert public.host == "0.0.0.0"
        still_serves(public)
    warnings = [line for line in public.stderr.text().splitlines()
                if line.startswith("parley: warning: ")]
    assert len(warnings) == 1, public.output()
    assert "authentication" in warnings[0].lower(), warnings[0]


@pytest.mark.parametrize("uri", ["udp://x", "tcp://127.0.0.1", "127.0.0.1:10700"])
def test_an_address_parley_cannot_serve_on_is_refused_in_one_line(uri):
    done = subprocess.run(parley("serve", "--uri", uri), capture_output=True, text=True,
                          env=environment(), timeout=120)
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("parley: "), done.stderr
    assert "Parley is serving" not in done.stdout


def test_help_says_it_serves_on_loopback_by_default():
    # Checked in the help, not by starting it: the default port 10700 may be taken here.
    done = subprocess.run(parley("serve", "--help"), capture_output=True, text=True,
                          env=environment(COLUMNS="200"), timeout=60)
    assert done.returncode == 0, done.stderr
    assert "127.0.0.1" in done.stdout and "10700" in done.stdout, done.stdout


def test_never_mind_is_handled_with_nothing_to_say(server):
    reply = asyncio.run(ask(server, "Never mind.", "quiet-1"))
    assert reply.type == "handled", shown([reply])
    assert not Handled.from_event(reply).text
