"""The segmenter's sample arithmetic, with a scripted VAD: nonzero frames are speech."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audio.segmenter import (
    Segmenter,
    SegmenterSettings,
    SpeechPaused,
    SpeechResumed,
    SpeechStarted,
    Utterance,
)
from audio.vad import WebRtcVad

F = 480  # samples in a 30 ms frame at 16 kHz
# Defaults in frames: pre-roll 10, end silence 24 (700 ms rounded up to 720), minimum
# speech 9 (250 -> 270 ms), start: 2 speech frames within the last 4.


def nonzero_is_speech(frame: bytes) -> bool:
    return any(frame)


def make_segmenter(**overrides) -> Segmenter:
    return Segmenter(SegmenterSettings(**overrides), is_speech=nonzero_is_speech)


def audio_of(*runs: tuple[bool, int], frame: int = F, seed: int = 0) -> np.ndarray:
    """Runs of (speech?, frames); speech is random nonzero samples, so slices are checkable."""
    rng = np.random.default_rng(seed)
    parts = []
    for speech, frames in runs:
        if speech:
            values = rng.integers(1, 2000, frames * frame) * rng.choice([-1, 1], frames * frame)
            parts.append(values.astype(np.int16))
        else:
            parts.append(np.zeros(frames * frame, dtype=np.int16))
    return np.concatenate(parts)


def key(event) -> tuple:
    """Comparable form of an event (events hold arrays, so they do not define ==)."""
    if isinstance(event, SpeechStarted):
        return ("started", event.sample)
    if isinstance(event, SpeechPaused):
        return ("paused", event.sample, event.pcm.tobytes())
    if isinstance(event, SpeechResumed):
        return ("resumed", event.sample)
    return ("utterance", event.start_sample, event.end_sample, event.speech_end_sample,
            event.cut, event.pcm.tobytes())


def utterances(events) -> list[Utterance]:
    return [e for e in events if isinstance(e, Utterance)]


def test_utterance_boundaries_include_pre_roll_and_end_silence():
    audio = audio_of((False, 40), (True, 30), (False, 40))
    seg = make_segmenter()
    events = seg.feed(audio)

    assert [type(e) for e in events] == [SpeechStarted, SpeechPaused, Utterance]
    started, paused, utt = events
    assert started.sample == 40 * F
    assert paused.sample == 70 * F
    assert np.array_equal(paused.pcm, audio[30 * F : 70 * F])
    assert (utt.start_sample, utt.speech_end_sample, utt.end_sample) == (30 * F, 70 * F, 94 * F)
    assert np.array_equal(utt.pcm, audio[30 * F : 94 * F])
    assert np.array_equal(utt.speech_pcm, paused.pcm)
    assert not utt.cut
    assert utt.duration_s == pytest.approx(64 * 0.03)
    assert (utt.start_ms, utt.speech_end_ms, utt.end_ms) == (900, 2100, 2820)
    assert not seg.in_speech
    assert seg.samples_seen == len(audio)


def test_pre_roll_is_clamped_to_the_start_of_the_stream():
    audio = audio_of((False, 3), (True, 20), (False, 30))
    (utt,) = utterances(make_segmenter().feed(audio))
    assert utt.start_sample == 0
    assert np.array_equal(utt.pcm, audio[: 47 * F])


def test_one_noisy_frame_does_not_start_speech():
    # Lone speech frames more than a start window apart: never 2 within 4 frames.
    audio = audio_of((False, 10), (True, 1), (False, 3), (True, 1), (False, 10), (True, 1))
    seg = make_segmenter()
    assert seg.feed(audio) == []
    assert not seg.in_speech


def test_bursts_shorter_than_min_speech_are_dropped():
    seg = make_segmenter()
    short = seg.feed(audio_of((False, 20), (True, 8), (False, 30)))  # 240 ms < 270 ms
    assert [type(e) for e in short] == [SpeechStarted]  # no SpeechPaused, no Utterance
    assert not seg.in_speech
    enough = seg.feed(audio_of((True, 9), (False, 30)))  # 270 ms
    assert [type(e) for e in enough] == [SpeechStarted, SpeechPaused, Utterance]


def test_a_dropped_burst_still_leaves_a_full_pre_roll():
    audio = audio_of((False, 20), (True, 3), (False, 30), (True, 20), (False, 30))
    events = make_segmenter().feed(audio)
    assert [key(e)[:2] for e in events] == [
        ("started", 20 * F), ("started", 53 * F), ("paused", 73 * F), ("utterance", 43 * F),
    ]
    assert np.array_equal(events[-1].pcm, audio[43 * F : 97 * F])


def test_speech_resuming_during_the_end_silence_continues_the_utterance():
    audio = audio_of((False, 20), (True, 10), (False, 20), (True, 10), (False, 30))
    events = make_segmenter().feed(audio)
    assert [key(e)[:2] for e in events] == [
        ("started", 20 * F), ("paused", 30 * F), ("resumed", 50 * F), ("paused", 60 * F),
        ("utterance", 10 * F),
    ]
    assert events[-1].speech_end_sample == 60 * F


def test_max_length_cut_keeps_all_audio():
    # 3 s maximum = 100 frames; 250 frames (7.5 s) of speech.
    audio = audio_of((False, 20), (True, 250), (False, 40))
    seg = make_segmenter(max_utterance_s=3.0)
    events = seg.feed(audio)

    assert [key(e)[:2] for e in events] == [
        ("started", 20 * F),
        ("utterance", 10 * F), ("started", 110 * F),
        ("utterance", 110 * F), ("started", 210 * F),
        ("paused", 270 * F), ("utterance", 210 * F),
    ]
    parts = utterances(events)
    assert [u.cut for u in parts] == [True, True, False]
    assert [u.end_sample for u in parts] == [110 * F, 210 * F, 294 * F]
    assert all(len(u.pcm) <= 100 * F for u in parts)
    assert np.array_equal(np.concatenate([u.pcm for u in parts]), audio[10 * F : 294 * F])


def test_a_last_word_after_a_cut_is_kept_even_if_short():
    audio = audio_of((False, 20), (True, 93), (False, 40))  # 3 speech frames after the cut
    parts = utterances(make_segmenter(max_utterance_s=3.0).feed(audio))
    assert [(u.start_sample, u.speech_end_sample, u.cut) for u in parts] == [
        (10 * F, 110 * F, True), (110 * F, 113 * F, False),
    ]


def test_silence_after_a_cut_ends_without_an_utterance():
    audio = audio_of((False, 20), (True, 85), (False, 40))  # the cut falls in the silence
    seg = make_segmenter(max_utterance_s=3.0)
    events = seg.feed(audio)
    assert [key(e)[:2] for e in events] == [
        ("started", 20 * F), ("paused", 105 * F), ("utterance", 10 * F), ("started", 110 * F),
    ]
    assert events[2].speech_end_sample == 105 * F
    assert not seg.in_speech


def test_reset_drops_a_half_utterance():
    seg = make_segmenter()
    seg.feed(audio_of((False, 20), (True, 15))[: -F // 2])  # mid-speech, with a partial frame
    assert seg.in_speech
    seg.reset()
    assert not seg.in_speech
    assert seg.flush() is None
    seen = seg.samples_seen
    assert seen == 35 * F - F // 2  # the clock keeps running across a reset

    audio = audio_of((True, 15), (False, 30), seed=1)
    (utt,) = utterances(seg.feed(audio))
    assert utt.start_sample == seen  # no pre-roll from before the reset
    assert np.array_equal(utt.pcm, audio[: 39 * F])


def test_flush_ends_the_utterance_now_including_the_unfinished_frame():
    audio = audio_of((False, 20), (True, 15))
    audio = np.concatenate([audio, audio[-100:]])  # 100 samples of speech past the last frame
    seg = make_segmenter()
    assert [type(e) for e in seg.feed(audio)] == [SpeechStarted]
    utt = seg.flush()
    assert utt is not None and not utt.cut
    assert (utt.start_sample, utt.speech_end_sample, utt.end_sample) == (
        10 * F, 35 * F, 35 * F + 100
    )
    assert np.array_equal(utt.pcm, audio[10 * F :])
    assert not seg.in_speech
    assert seg.flush() is None


def test_flush_drops_too_little_speech():
    seg = make_segmenter()
    seg.feed(audio_of((False, 5), (True, 5)))
    assert seg.in_speech
    assert seg.flush() is None
    assert not seg.in_speech


def test_feed_accepts_sounddevice_blocks_and_rejects_other_audio():
    seg = make_segmenter()
    assert seg.feed(np.zeros((F, 1), dtype=np.int16)) == []
    with pytest.raises(TypeError, match="int16"):
        seg.feed(np.zeros(F, dtype=np.float32))
    with pytest.raises(ValueError, match="mono"):
        seg.feed(np.zeros((F, 2), dtype=np.int16))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"frame_ms": 25}, "frame_ms"),
        ({"sample_rate": 44100}, "sample_rate"),
        ({"aggressiveness": 4}, "aggressiveness"),
        ({"end_silence_ms": 0}, "end_silence_ms"),
        ({"pre_roll_ms": -1}, "pre_roll_ms"),
        ({"start_speech_ms": 200}, "start_speech_ms"),
        ({"max_utterance_s": 1.0}, "max_utterance_s"),
    ],
)
def test_settings_are_validated(overrides, message):
    with pytest.raises(ValueError, match=message):
        SegmenterSettings(**overrides)


# Small frames and a short maximum, so generated audio reaches every state quickly.
SMALL = SegmenterSettings(
    sample_rate=8000, frame_ms=10, pre_roll_ms=30, end_silence_ms=100, min_speech_ms=50,
    start_speech_ms=20, start_window_ms=40, max_utterance_s=0.3,
)


@settings(max_examples=60, deadline=None, database=None)  # nothing written to the repo
@given(
    runs=st.lists(st.tuples(st.booleans(), st.integers(1, 40)), min_size=1, max_size=12),
    chunks=st.lists(st.integers(1, 300), min_size=1, max_size=8),
    seed=st.integers(0, 1000),
)
def test_chunking_does_not_change_the_events(runs, chunks, seed):
    audio = audio_of(*runs, frame=80, seed=seed)
    whole = Segmenter(SMALL, nonzero_is_speech)
    expected = whole.feed(audio) + [whole.flush()]

    chunked = Segmenter(SMALL, nonzero_is_speech)
    got, i, n = [], 0, 0
    while i < len(audio):
        size = chunks[n % len(chunks)]
        got += chunked.feed(audio[i : i + size])
        i, n = i + size, n + 1
    got.append(chunked.flush())

    assert [key(e) if e else None for e in got] == [key(e) if e else None for e in expected]
    # Every utterance is exactly the input between its boundaries, within the maximum,
    # and none overlaps the one before (no audio is heard twice).
    previous_end = 0
    for utt in utterances(got):
        assert np.array_equal(utt.pcm, audio[utt.start_sample : utt.end_sample])
        assert len(utt.pcm) <= 30 * 80
        assert previous_end <= utt.start_sample < utt.speech_end_sample <= utt.end_sample
        previous_end = utt.end_sample


def vowel_like(seconds: float, sample_rate: int = 16000) -> np.ndarray:
    """A 150 Hz sawtooth buzz (harmonic-rich, like a voiced vowel) with intonation and
    a rise-and-fall envelope."""
    t = np.arange(int(seconds * sample_rate)) / sample_rate
    f0 = 150.0 * (1 + 0.05 * np.sin(2 * np.pi * 3 * t))
    phase = np.cumsum(f0) / sample_rate
    return (2 * (phase % 1.0) - 1) * np.sin(np.pi * t / seconds) ** 0.5


def test_real_vad_finds_one_utterance_around_a_voiced_sound():
    sr = 16000
    rng = np.random.default_rng(0)
    audio = np.concatenate([np.zeros(sr), 0.3 * vowel_like(1.5), np.zeros(sr)])
    audio += rng.normal(0, 0.0005, len(audio))  # a quiet room, not digital zero
    pcm = np.round(audio * 32767).astype(np.int16)

    seg = Segmenter()  # the real WebRtcVad
    events = seg.feed(pcm)
    assert seg.flush() is None
    (utt,) = utterances(events)
    # The buzz spans 1.0-2.5 s; its faint first and last few ms may fall either way.
    # Full pre-roll, though a warm-up burst of the fresh VAD (below) came and went first.
    assert 0.6 * sr <= utt.start_sample <= 0.75 * sr
    assert 2.4 * sr <= utt.speech_end_sample <= 2.8 * sr
    assert utt.end_sample == utt.speech_end_sample + 24 * F

    # A fresh webrtcvad calls the first ~3 frames of room noise speech while its noise
    # model adapts: that may start speech, but min_speech_ms drops it.
    noise = np.round(rng.normal(0, 0.002, 3 * sr) * 32767).astype(np.int16)
    quiet = Segmenter()
    assert utterances(quiet.feed(noise)) == [] and quiet.flush() is None
    assert not quiet.in_speech
    assert Segmenter().feed(np.zeros(3 * sr, dtype=np.int16)) == []


def test_webrtcvad_wrapper_validates():
    with pytest.raises(ValueError, match="aggressiveness"):
        WebRtcVad(aggressiveness=5)
    with pytest.raises(ValueError, match="Hz"):
        WebRtcVad(sample_rate=44100)
    vad = WebRtcVad()
    assert vad.is_speech(bytes(2 * 320)) is False  # 20 ms of silence
    with pytest.raises(ValueError, match="10, 20 or 30 ms"):
        vad.is_speech(bytes(100))
