"""A voice turn's record: its timings and events, and how replay's JSON lists them."""

from dataclasses import fields
from types import SimpleNamespace

import numpy as np

from assistant.conversation import Conversation
from assistant.events import Heard, Interrupted, Spoken, SummaryStarted
from assistant.tools import builtin_tools
from assistant.voice.replay import ReplayTurn, session_json
from assistant.voice.turns import (
    TimedEvent,
    Timing,
    TurnRecord,
    TurnSource,
    TurnTimings,
    first_seconds,
    heard_events,
)
from models.speech import SpokenAudio
from tests.support.fakes import ScriptedChatModel


def test_every_timing_has_a_field_of_its_name():
    names = [f.name for f in fields(TurnTimings) if not f.name.startswith("_")]
    assert [timing.value for timing in Timing] == names


def test_json_lists_the_timings_reached_in_the_order_they_were():
    timings = TurnTimings()
    assert timings.as_json() == {}
    timings.stt_ms = -40.0  # a reply answered ahead: its words came before the turn began
    timings.set(Timing.FIRST_TOKEN, -12.5)
    timings.end_of_speech_ms = 720.0
    timings.stt_ms = -41.0  # set again: it keeps its place
    assert list(timings.as_json().items()) == [
        ("stt_ms", -41.0), ("first_token_ms", -12.5), ("end_of_speech_ms", 720.0)]
    assert timings.get(Timing.FIRST_TOKEN) == -12.5 and timings.first_audio_ms is None


def test_a_moved_start_shifts_only_the_timings_reached():
    timings = TurnTimings(stt_ms=100.0)
    timings.first_token_ms = 250.0
    timings.shift(300.0)
    assert timings.as_json() == {"stt_ms": -200.0, "first_token_ms": -50.0}
    assert timings.first_audio_ms is None


def test_an_event_s_json_is_its_time_then_its_fields():
    timed = TimedEvent(-12.34, Heard("set a timer", 0.9))
    assert timed.as_json() == {"ms": -12.3, "type": "heard", "text": "set a timer",
                               "confidence": 0.9, "rejected": "", "cut": False}
    assert list(timed.as_json())[:2] == ["ms", "type"]


def test_a_stopped_reply_keeps_the_sentences_that_had_begun_to_play():
    events = [TimedEvent(0.0, Heard("hi")), TimedEvent(5.0, Spoken("One.", 1.0)),
              TimedEvent(6.0, Spoken("Two.", 1.0)), TimedEvent(7.0, Spoken("Three.", 1.0)),
              TimedEvent(9.0, Interrupted(1.5, "One. Two."))]
    kept = heard_events(events, spoken_seconds=1.5)
    assert [timed.event for timed in kept] == [
        Heard("hi"), Spoken("One.", 1.0), Spoken("Two.", 1.0), Interrupted(1.5, "One. Two.")]


def test_the_audio_kept_of_a_stopped_reply_is_what_played_at_each_chunk_s_rate():
    """--audio-out writes what was heard: 1.5 s of a second at 16 kHz then one at 8 kHz."""
    chunks = [SpokenAudio(np.ones(16000, np.int16), 16000, "One."),
              SpokenAudio(np.ones(8000, np.int16), 8000, "Two."),
              SpokenAudio(np.ones(8000, np.int16), 8000, "Three.")]
    kept = first_seconds(chunks, 1.5)
    assert [(len(c.pcm), c.sample_rate, c.text) for c in kept] == [(16000, 16000, "One."),
                                                                   (4000, 8000, "Two.")]
    assert first_seconds(chunks, 0.0) == []


def test_replay_json_numbers_the_parts_of_a_turn_heard_in_parts():
    loop = SimpleNamespace(conversation=Conversation(ScriptedChatModel(), builtin_tools()))
    cut, rest = (TurnRecord(TurnSource.AUDIO, 10.0, heard=words) for words in ("Tell", "me"))
    cut.events.append(TimedEvent(0.0, Spoken("Tell", 0.5)))
    cut.timings.end_of_speech_ms = 700.0
    rest.events.append(TimedEvent(1.26, Spoken("me", 0.25)))
    rest.idle.append(TimedEvent(900.0, SummaryStarted()))
    [turn] = session_json(loop, [ReplayTurn(1, text="Tell me")], [[cut, rest]])["turns"]
    assert turn["heard"] == "Tell me" and turn["timings"] == {"end_of_speech_ms": 700.0}
    assert turn["events"] == [
        {"ms": 0.0, "type": "spoken", "text": "Tell", "seconds": 0.5, "part": 0},
        {"ms": 1.3, "type": "spoken", "text": "me", "seconds": 0.25, "part": 1}]
    assert turn["idle"] == [{"ms": 900.0, "type": "summary-start", "part": 1}]
    [alone] = session_json(loop, [ReplayTurn(1, text="Tell")], [[cut]])["turns"]
    assert alone["events"] == [{"ms": 0.0, "type": "spoken", "text": "Tell", "seconds": 0.5}]


def test_latency_counts_from_the_end_of_speech_once_there_was_audio():
    timings = TurnTimings(end_of_speech_ms=720.0)
    timings.time_latency()
    assert timings.latency_ms is None  # nothing played: no latency to report
    timings.first_audio_ms = 180.5
    timings.time_latency()
    assert timings.latency_ms == 900.5
    typed = TurnTimings(first_audio_ms=95.0)
    typed.time_latency()
    assert typed.latency_ms == 95.0
