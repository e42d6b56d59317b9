"""A voice turn's record: its timings as replay's JSON lists them."""

from dataclasses import fields

from assistant.voice.turns import Timing, TurnTimings


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
