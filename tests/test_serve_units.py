"""The server's parts around the engines: reading events with limits (assistant.serve.wire),
keeping conversations by id (assistant.serve.conversations), and the format of the speech
it sends (assistant.serve.connection)."""

import asyncio
import json
import time

import numpy as np
import pytest
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop

from assistant.serve.connection import Connection
from assistant.serve.conversations import Conversations, ConversationsBusy, conversation_id
from assistant.serve.engines import Engines
from assistant.serve.live import TranscriptChunks, WordsSoFar
from assistant.serve.service import Service
from assistant.serve.wire import MAX_DATA_BYTES, MAX_LINE_BYTES, ClientError, read_event
from models.speech import SpokenAudio, TextToSpeech, Transcript
from tests.support.clocks import ManualClock


def read(raw: bytes):
    async def go():
        reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
        reader.feed_data(raw)
        reader.feed_eof()
        return await read_event(reader)
    return asyncio.run(go())


def line(header: dict) -> bytes:
    return json.dumps(header).encode() + b"\n"


def test_an_event_with_data_and_payload_is_read_whole():
    data = json.dumps({"rate": 16000, "width": 2, "channels": 1}).encode()
    raw = line({"type": "audio-chunk", "data": {"timestamp": 5}, "data_length": len(data),
                "payload_length": 4}) + data + b"\x01\x00\x02\x00"
    event = read(raw)
    assert event.type == "audio-chunk"
    assert event.data == {"timestamp": 5, "rate": 16000, "width": 2, "channels": 1}
    assert event.payload == b"\x01\x00\x02\x00"


def test_the_end_of_the_connection_is_none_not_an_error():
    assert read(b"") is None


@pytest.mark.parametrize(("raw", "code"), [
    (b"{not json\n", "malformed-event"),
    (b"[1, 2]\n", "malformed-event"),
    (line({"data": {}}), "malformed-event"),
    (line({"type": "x", "data": [1]}), "malformed-event"),
    (line({"type": "x", "payload_length": -1}), "malformed-event"),
    (line({"type": "x", "data_length": 3}) + b"[1]", "malformed-event"),
    (b"\xff\xfe\n", "malformed-event"),
    (line({"type": "x", "payload_length": MAX_DATA_BYTES + 1}), "too-large"),
    (line({"type": "x", "data_length": 50_000_000}), "too-large"),
    (b"{" + b" " * (MAX_LINE_BYTES + 10) + b"}\n", "too-large"),
])
def test_what_is_not_an_event_or_too_large_is_a_fatal_client_error(raw, code):
    with pytest.raises(ClientError) as caught:
        read(raw)
    assert caught.value.code == code and caught.value.fatal
    assert caught.value.event().data["code"] == code


def pool(most: int = 3, idle: float = 60.0) -> tuple[Conversations, ManualClock]:
    clock = ManualClock(start=0.0)
    return Conversations(lambda: object(), most, idle, clock), clock  # type: ignore[arg-type]


def test_the_same_id_is_the_same_conversation_and_another_id_another():
    conversations, _ = pool()
    kitchen = conversations.get("kitchen").conversation
    assert conversations.get("kitchen").conversation is kitchen
    assert conversations.get("garage").conversation is not kitchen


def test_without_an_id_each_request_gets_its_own_conversation_not_kept():
    conversations, _ = pool()
    assert conversations.get(None).conversation is not conversations.get(None).conversation
    assert len(conversations) == 0


def test_an_idle_conversation_is_forgotten_after_the_idle_time():
    conversations, clock = pool(idle=60)
    first = conversations.get("kitchen").conversation
    clock.now = 59
    assert conversations.get("kitchen").conversation is first  # used again: kept longer
    clock.now = 59 + 60
    assert conversations.expire() == 1 and "kitchen" not in conversations
    assert conversations.get("kitchen").conversation is not first


def test_at_the_cap_the_conversation_unused_longest_makes_room():
    conversations, clock = pool(most=2)
    conversations.get("a")
    clock.now = 1
    conversations.get("b")
    clock.now = 2
    conversations.get("a")  # now b is the one unused longest
    clock.now = 3
    conversations.get("c")
    assert "a" in conversations and "c" in conversations and "b" not in conversations


def test_a_conversation_answering_now_is_never_dropped_to_make_room():
    async def go():
        conversations, _ = pool(most=1)
        busy = conversations.get("a")
        async with busy.lock:
            with pytest.raises(ConversationsBusy, match="--max-conversations"):
                conversations.get("b")
        conversations.get("b")  # free again: it makes room
        assert "a" not in conversations
    asyncio.run(go())


@pytest.mark.parametrize(("context", "expected"), [
    ({"conversation_id": "01HS6SP2XD1E5HEHVDZE8R2WMR"}, "01HS6SP2XD1E5HEHVDZE8R2WMR"),
    ({"conversation_id": 42}, "42"), ({"conversation_id": ""}, None),
    ({"conversation_id": "x" * 500}, None), ({"conversation_id": True}, None),
    (None, None), ("kitchen", None), ({}, None)])
def test_a_usable_conversation_id_is_taken_from_the_context(context, expected):
    assert conversation_id(context) == expected


class RecordingVoice(TextToSpeech):
    """A stand-in voice that notes each sentence it speaks and takes a moment for it."""

    sample_rate = 16000

    def __init__(self) -> None:
        self.spoken: list[str] = []

    def synthesize(self, text: str):
        time.sleep(0.02)
        self.spoken.append(text)
        yield SpokenAudio(np.zeros(160, np.int16), self.sample_rate, text)


def test_two_clients_long_texts_take_turns_a_sentence_at_a_time():
    voice = RecordingVoice()
    engines = Engines(stt=None, tts=voice)  # type: ignore[arg-type]

    async def speak(text: str) -> None:
        async for _ in engines.synthesize(text):
            pass

    async def go() -> None:
        long = " ".join(f"Long sentence {n}." for n in range(1, 6))
        first = asyncio.create_task(speak(long))
        await asyncio.sleep(0.01)  # the long text has begun
        await asyncio.gather(first, speak("Short one."))

    try:
        asyncio.run(go())
    finally:
        engines.close()
    # The short text waited for one sentence of the long one, not for all five.
    assert voice.spoken.index("Short one.") <= 2, voice.spoken
    assert len(voice.spoken) == 6


# -- words while the audio comes (transcript-chunk) ---------------------------------------

def test_a_chunk_is_the_words_two_passes_agree_on_each_sent_once():
    chunks = TranscriptChunks()
    assert chunks.heard("And so my") is None  # one pass: nothing is sure yet
    assert chunks.heard("And so my fellow") == "And so my"
    assert chunks.heard("And so my fellow Americans,") == " fellow"
    assert chunks.heard("And so my fellow Americans, ask not") == " Americans,"
    # The whole audio's transcript completes them: the chunks add up to it.
    final = "And so my fellow Americans, ask not what your country can do for you."
    rest = chunks.rest(final)
    assert rest == " ask not what your country can do for you."
    assert chunks.sent == final


def test_a_transcript_that_heard_the_sent_words_otherwise_gets_no_last_chunk():
    chunks = TranscriptChunks()
    chunks.heard("Set a timer for")
    assert chunks.heard("Set a timer for ten") == "Set a timer for"
    # The transcript, which the client takes as it is, heard them otherwise.
    assert chunks.rest("Set the timer for ten minutes.") is None
    assert chunks.sent == "Set a timer for"


def streamed(stt, every_s: float, seconds: list[int], final: str,
             each_s: float = 0.0) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """One transcription's `WordsSoFar` over audio that reaches each of `seconds` in turn,
    `each_s` of the clock apart, then the whole audio's transcript `final`: the events
    (type, text) sent while the audio came, and those after."""
    sent: list[tuple[str, str]] = []

    async def send(event) -> None:
        sent.append((event.type, (event.data or {}).get("text", "")))

    clock = ManualClock()

    async def go() -> int:
        engines = Engines(stt=stt, tts=None)  # type: ignore[arg-type]
        try:
            words = WordsSoFar(engines, every_s, 16000, send, clock=clock)
            for second in seconds:
                clock.sleep(each_s)
                words.grew(second * 16000, lambda s=second: np.zeros(s * 16000, np.int16))
                await words.settled()
            while_coming = len(sent)
            await words.before_transcript(final)
            await words.after_transcript()
            return while_coming
        finally:
            engines.close()

    while_coming = asyncio.run(go())
    return sent[:while_coming], sent[while_coming:]


def kinds(events: list[tuple[str, str]]) -> list[str]:
    return [kind for kind, _ in events]


def test_a_recording_sent_at_once_gets_no_passes_only_its_transcript():
    class Counting:
        calls = 0

        def transcribe(self, pcm):
            Counting.calls += 1
            return Transcript("words", -0.1)

    # Five seconds of audio in no time at all.
    during, after = streamed(Counting(), 1.0, [1, 2, 3, 4, 5], "words")
    assert Counting.calls == 0
    assert during == []
    assert kinds(after) == ["transcript-start", "transcript-chunk", "transcript-stop"]


def test_audio_coming_as_it_is_spoken_gets_its_words_before_its_transcript():
    said = "he was not an ill disposed young man".split()

    class Growing:
        """Hears a word more for each second of audio."""

        def transcribe(self, pcm):
            return Transcript(" ".join(said[: len(pcm) // 16000]), -0.1)

    during, after = streamed(Growing(), 1.0, [1, 2, 3, 4], " ".join(said), each_s=1.0)
    # A pass a second; each keeps the word the one before it heard too.
    assert kinds(during) == ["transcript-start", "transcript-chunk", "transcript-chunk",
                             "transcript-chunk"]
    chunks = [text for kind, text in during + after if kind == "transcript-chunk"]
    assert chunks == ["he", " was", " not", " an ill disposed young man"]
    assert kinds(after)[-1] == "transcript-stop"


def test_with_live_transcripts_off_a_transcription_is_its_transcript_alone():
    during, after = streamed(None, 0.0, [5], "he was not an ill disposed young man",
                             each_s=5.0)
    assert during == [] and after == []


# -- speech out -----------------------------------------------------------------------------

class QuarterSecondVoice(TextToSpeech):
    """A stand-in voice whose audio comes at 24 kHz, a quarter second per sentence; its
    `sample_rate` (the default 22050) is not what its audio says."""

    def synthesize(self, text: str):
        if text.strip():
            yield SpokenAudio(np.full(6000, 100, np.int16), 24000, text)


class SentEvents(Connection):
    """A connection that keeps what it would send, for a client that is not there."""

    def __init__(self, service: Service) -> None:
        super().__init__(service, None, None)  # type: ignore[arg-type]
        self.sent: list = []

    async def send(self, event) -> None:
        self.sent.append(event)


def spoken(*events) -> list:
    engines = Engines(stt=None, tts=QuarterSecondVoice())  # type: ignore[arg-type]
    service = Service(engines, None, "voice", None)  # type: ignore[arg-type]
    connection = SentEvents(service)

    async def go() -> None:
        for event in events:
            await connection.handle(event.event())

    try:
        asyncio.run(go())
    finally:
        engines.close()
    return connection.sent


def test_speech_is_sent_at_the_rate_its_audio_came_at():
    sent = spoken(Synthesize(text="One sentence. And another."))
    start = AudioStart.from_event(sent[0])
    chunks = [AudioChunk.from_event(e) for e in sent if AudioChunk.is_type(e.type)]
    assert (start.rate, start.width, start.channels) == (24000, 2, 1)
    assert {chunk.rate for chunk in chunks} == {24000}
    assert sum(len(chunk.audio) for chunk in chunks) == 2 * 6000 * 2  # two sentences
    assert AudioStop.is_type(sent[-1].type)


def test_streamed_text_gets_one_audio_start_before_its_first_audio():
    sent = spoken(SynthesizeStart(), SynthesizeChunk(text="The first sentence. The "),
                  SynthesizeChunk(text="second one."), SynthesizeStop())
    kinds = [event.type for event in sent]
    assert kinds[0] == "audio-start" and kinds.count("audio-start") == 1, kinds
    assert AudioStart.from_event(sent[0]).rate == 24000
    assert kinds[-2:] == ["audio-stop", "synthesize-stopped"], kinds


def test_text_with_nothing_to_say_gets_empty_audio_at_the_voice_s_rate():
    sent = spoken(Synthesize(text="   "))
    assert [event.type for event in sent] == ["audio-start", "audio-stop"]
    assert AudioStart.from_event(sent[0]).rate == QuarterSecondVoice.sample_rate
