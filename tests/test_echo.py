"""Echo cancellation: the far end's timeline, the simulated room, WebRTC's AEC3 for real,
and what happens when it cannot start."""

from __future__ import annotations

import builtins
import itertools
import time

import numpy as np
import pytest

from assistant.session.engines import microphone_input, voice_settings
from assistant.session.settings import ListeningSettings
from audio.echo import (
    FRAME,
    RING_SECONDS,
    EchoCanceller,
    EchoCancelUnavailable,
    FarEnd,
    MicrophoneInput,
    RoomEcho,
)
from audio.memory_out import MemorySpeaker
from audio.segmenter import ECHO_CANCELLED_FLOOR_DBFS
from tests.support import speech_samples as samples
from tests.support.spoken import speech_at

RATE = 16000


def level_db(pcm: np.ndarray) -> float:
    return 10 * np.log10(np.mean(pcm.astype(np.float64) ** 2) + 1e-9)


def test_the_far_end_gives_back_what_played_up_to_a_time_then_silence():
    now = [0.0]
    far = FarEnd(clock=lambda: now[0])
    far.push(np.arange(1, 101, dtype=np.int16), RATE, at=0.0)
    far.push(np.arange(101, 151, dtype=np.int16), RATE, at=0.0064)  # 2 samples off: follows
    assert far.pull(120, end=120).tolist() == list(range(1, 121))
    assert far.pull(60, end=180).tolist() == list(range(121, 151)) + [0] * 30
    assert far.pull(10, end=5).tolist() == [0] * 5 + list(range(1, 6))  # before it began


def test_a_block_that_starts_well_after_the_last_is_placed_by_its_time():
    far = FarEnd(clock=lambda: 0.0)
    far.push(np.full(100, 5, dtype=np.int16), RATE, at=0.0)
    far.push(np.full(100, 7, dtype=np.int16), RATE, at=0.5)  # the device ran dry meanwhile
    played = far.pull(8100, end=8100)
    assert played[:100].tolist() == [5] * 100 and not played[100:8000].any()
    assert played[8000:].tolist() == [7] * 100


def test_what_was_to_play_after_a_stop_is_forgotten():
    now = [0.0]
    far = FarEnd(clock=lambda: now[0])
    far.push(np.full(RATE, 9, dtype=np.int16), RATE, at=0.0)
    now[0] = 0.25
    far.clear()
    played = far.pull(RATE, end=RATE)
    assert played[:4000].all() and not played[4000:].any()


def test_the_far_end_resamples_to_16_khz_and_keeps_the_last_seconds():
    far = FarEnd(clock=lambda: 0.0)
    far.push(np.full(22050 * 3, 1000, dtype=np.int16), 22050, at=0.0)  # Piper's rate
    assert np.count_nonzero(far.pull(RATE * 4, end=RATE * 4)) == pytest.approx(
        3 * RATE, abs=RATE * 0.05)
    far.push(np.full(RATE * RING_SECONDS, 2, dtype=np.int16), RATE, at=3.0)
    assert not far.pull(RATE, end=RATE).any()  # too long ago: not kept


def test_a_block_longer_than_the_ring_keeps_its_last_seconds_where_they_play():
    far = FarEnd(clock=lambda: 0.0)
    block = (np.arange((RING_SECONDS + 1) * RATE) % 30000).astype(np.int16)
    far.push(block, RATE, at=0.0)
    assert far.pull(RATE, end=len(block)).tolist() == block[-RATE:].tolist()


def test_the_room_returns_the_far_end_later_and_quieter():
    room = RoomEcho(gain_db=-6.0, delay_ms=60)
    far = np.full(RATE, 10000, dtype=np.int16)
    near = room.add(np.zeros(RATE, dtype=np.int16), far)
    delay = 60 * RATE // 1000
    assert not near[:delay].any()
    assert near[delay:] == pytest.approx(10000 * 10 ** (-6 / 20), abs=1)


def parley_speaking() -> np.ndarray:
    """A reply in Parley's own voice (the real Piper voice), at 16 kHz."""
    from models.piper_tts import PiperTextToSpeech

    tts = PiperTextToSpeech(None)
    return speech_at(tts, "Sure. It is a quarter past three, and your tea timer has four "
                     "minutes left. Is there anything else I can do for you?", RATE)


@pytest.mark.real
def test_webrtc_removes_parleys_echo_and_keeps_the_users_voice():
    if not samples.available():
        pytest.skip(samples.missing_reason())
    reply = parley_speaking()
    user = samples.librivox()[1].pcm
    user = np.concatenate([np.zeros(len(reply) - len(user), np.int16), user])  # talks last
    far_end = FarEnd(clock=lambda: 0.0)
    microphone = MicrophoneInput(far_end, EchoCanceller(), RoomEcho(gain_db=0.0))
    cleaned, raw = [], []
    for start in range(0, len(reply), 480):
        far_end.push(reply[start:start + 480], RATE, at=start / RATE)
        block = user[start:start + 480]
        cleaned.append(microphone.process(block, captured_at=(start + len(block)) / RATE))
    cleaned_pcm = np.concatenate(cleaned)
    room = RoomEcho(gain_db=0.0)
    raw = room.add(user[:len(reply)], reply)
    echo_only = slice(RATE, len(reply) - len(samples.librivox()[1].pcm))
    reduction = level_db(raw[echo_only]) - level_db(cleaned_pcm[echo_only])
    assert reduction > 20, f"only {reduction:.1f} dB less echo"
    # Where the user talks over the reply, their voice stands far above what is left of
    # the echo (AEC3 turns it down while both talk, not off).
    talk = slice(len(reply) - len(samples.librivox()[1].pcm), len(reply))
    assert level_db(cleaned_pcm[talk]) > level_db(cleaned_pcm[echo_only]) + 20


@pytest.mark.real
def test_blocks_of_any_length_are_cancelled_as_in_whole_frames():
    """A microphone read, or a clip's end, is rarely a whole number of AEC3's 10 ms
    frames. Given such blocks as they came, AEC3 went wrong from there on (100 ms of
    Parley's voice came through at -42 dBFS and a reply stopped itself)."""
    reply = parley_speaking()
    near = RoomEcho(gain_db=-6.0).add(np.zeros(len(reply), np.int16), reply)
    in_frames = EchoCanceller()
    expected = np.concatenate([in_frames.process(near[i:i + 480], reply[i:i + 480])
                               for i in range(0, len(reply) - 479, 480)])
    uneven = EchoCanceller()
    cleaned, start = [], 0
    for size in itertools.cycle((254, 6, 441, 1000, 44, 480)):
        if start + size > len(expected):
            break
        block = uneven.process(near[start:start + size], reply[start:start + size])
        assert len(block) == size  # as much as it was given, a frame late
        cleaned.append(block)
        start += size
    cleaned_pcm = np.concatenate(cleaned)
    assert np.array_equal(cleaned_pcm, expected[:len(cleaned_pcm)])
    assert not cleaned_pcm[:FRAME].any()  # the frame it is late by
    # After its first second, no 30 ms of what is left of the echo could start speech
    # (given the blocks as they came, it rose to -26 dBFS).
    full_scale = level_db(np.array([32767], dtype=np.int16))
    loudest = max(level_db(cleaned_pcm[i:i + 480]) - full_scale
                  for i in range(RATE, len(cleaned_pcm) - 479, 480))
    assert loudest < ECHO_CANCELLED_FLOOR_DBFS, f"{loudest:.1f} dBFS"


def test_replay_speaker_puts_what_it_plays_on_the_timeline_and_forgets_it_when_stopped():
    far = FarEnd()
    speaker = MemorySpeaker(realtime=True, far_end=far)
    began = far.position_at(time.monotonic())
    speaker.play(np.full(RATE, 500, dtype=np.int16), RATE)
    speaker.play(np.full(RATE, 700, dtype=np.int16), RATE, cancel_echo=False)
    assert far.pull(RATE // 2, end=began + RATE * 3 // 4).all()
    speaker.stop()
    # The first second was still playing: what came after it never will.
    assert not far.pull(RATE, end=began + 3 * RATE).any()


def test_a_sound_kept_from_the_canceller_holds_its_place_as_silence():
    far = FarEnd(clock=lambda: 0.0)
    far.push(np.zeros(100, dtype=np.int16), RATE, at=0.0)
    far.push(np.full(100, 700, dtype=np.int16), RATE, at=100 / RATE)
    assert far.pull(200, end=200).tolist() == [0] * 100 + [700] * 100


def settings(**given) -> ListeningSettings:
    return ListeningSettings(**{"echo_cancel": True, **given})


def test_echo_cancellation_turns_barge_in_on_unless_told_not_to():
    assert voice_settings(settings(), echo_cancelled=True).barge_in is True
    assert voice_settings(settings(barge_in=False), echo_cancelled=True).barge_in is False
    assert voice_settings(settings(echo_cancel=False)).barge_in is False


def test_when_it_cannot_start_one_line_says_why_and_parley_stays_half_duplex(monkeypatch):
    real_import = builtins.__import__

    def no_webrtc(name, *args, **kwargs):
        if name == "pywebrtc_audio":
            raise ImportError("libwebrtc-audio.so: cannot open shared object file")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_webrtc)
    with pytest.raises(EchoCancelUnavailable, match="cannot open shared object"):
        EchoCanceller()
    said: list[str] = []
    cleaned = microphone_input(settings(), FarEnd(), said.append)
    assert cleaned is None
    assert len(said) == 1 and "half duplex" in said[0] and "shared object" in said[0]
    assert voice_settings(settings(), echo_cancelled=cleaned is not None).barge_in is False


def test_the_canceller_keeps_up_with_the_microphone():
    """One 30 ms block takes well under its own length (what the CPU share in the
    benchmark measures); a loose bound so a busy machine does not fail it."""
    canceller = EchoCanceller()
    block = (np.random.default_rng(1).normal(0, 3000, 480)).astype(np.int16)
    started = time.perf_counter()
    for _ in range(100):
        canceller.process(block, block)
    assert (time.perf_counter() - started) / 100 < 0.030
