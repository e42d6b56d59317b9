"""The echo probe: whether the microphone hears Parley, judged from the level at the start
of each reply, so half duplex may listen through a reply's first moments."""

from __future__ import annotations

import numpy as np
import pytest

from audio.echo_probe import EchoProbe, Verdict
from tests.support import speech_samples as samples
from tests.support.clips import speechlike

RATE = 16000
BLOCK = RATE // 50  # 20 ms


def noise(dbfs: float, blocks: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    scale = 32768 * 10 ** (dbfs / 20)
    return [np.clip(rng.normal(0, scale, BLOCK), -32768, 32767).astype(np.int16)
            for _ in range(blocks)]


def probe_in_a_quiet_room() -> EchoProbe:
    probe = EchoProbe(RATE)
    for block in noise(-62, 50):
        probe.quiet(block)
    return probe


def play(probe: EchoProbe, blocks: list[np.ndarray]) -> tuple[list[Verdict], list]:
    verdicts, heard = [], []
    for block in blocks:
        verdict, out = probe.playing(block)
        verdicts.append(verdict)
        heard += out
    return verdicts, heard


def test_a_microphone_that_stays_quiet_while_parley_plays_is_heard_whole():
    probe = probe_in_a_quiet_room()
    blocks = noise(-61, 30, seed=1)
    verdicts, heard = play(probe, blocks)
    # Held back for the probe (400 ms), then everything, the held blocks first, in order.
    assert verdicts[:19] == [Verdict.WAIT] * 19 and set(verdicts[19:]) == {Verdict.CLEAR}
    assert len(heard) == len(blocks)
    assert all(np.array_equal(a, b) for a, b in zip(heard, blocks, strict=True))
    assert probe.echo_free is True


def test_parleys_voice_in_the_microphone_is_never_heard():
    probe = probe_in_a_quiet_room()
    # Silence for the output's latency, then the echo of Parley's voice.
    verdicts, heard = play(probe, noise(-62, 5) + noise(-30, 30, seed=2))
    assert heard == [] and Verdict.ECHO in verdicts and Verdict.CLEAR not in verdicts
    assert probe.echo_free is False
    assert probe.ended() == []  # nothing held back is given back after an echo


def test_a_user_who_begins_late_in_the_probe_is_not_taken_for_an_echo():
    probe = probe_in_a_quiet_room()
    verdicts, heard = play(probe, noise(-61, 13, seed=7) + noise(-25, 20, seed=8))
    assert Verdict.ECHO not in verdicts and len(heard) == 33
    assert probe.echo_free is True


def test_once_a_reply_showed_no_echo_a_loud_start_is_the_user_talking():
    probe = probe_in_a_quiet_room()
    play(probe, noise(-61, 20, seed=3))
    probe.ended()
    user = noise(-25, 20, seed=4)
    verdicts, heard = play(probe, user)
    assert Verdict.ECHO not in verdicts and len(heard) == len(user)


def test_each_reply_is_judged_afresh_and_a_short_one_gives_back_what_it_held():
    probe = probe_in_a_quiet_room()
    play(probe, noise(-30, 20, seed=5))
    assert probe.echo_free is False
    probe.ended()
    short = noise(-61, 5, seed=6)  # the reply ended before the probe was over
    verdicts, heard = play(probe, short)
    assert verdicts == [Verdict.WAIT] * 5 and heard == []
    assert len(probe.ended()) == 5


# -- the reply's own audio, looked for in the microphone -----------------------------------

def speech(index: int) -> np.ndarray:
    """A person reading (LibriVox), for Parley's reply or for the user."""
    if not samples.available():
        pytest.skip(samples.missing_reason())
    return samples.librivox()[index].pcm


def room(far: np.ndarray, gain_db: float, delay_ms: int, seed: int) -> np.ndarray:
    """What a microphone `gain_db` below the speaker hears of `far`, `delay_ms` after it
    was handed over (the output's buffer and the room), in the room's -62 dBFS quiet."""
    delay = RATE * delay_ms // 1000
    echo = np.concatenate([np.zeros(delay), far.astype(np.float64)])[:len(far)]
    quiet = np.concatenate(noise(-62, len(far) // BLOCK + 1, seed))[:len(far)]
    return np.clip(echo * 10 ** (gain_db / 20) + quiet, -32768, 32767).astype(np.int16)


def blocks_of(pcm: np.ndarray) -> list[np.ndarray]:
    return [pcm[at:at + BLOCK] for at in range(0, len(pcm) - BLOCK + 1, BLOCK)]


@pytest.mark.parametrize("delay_ms", [60, 160])
def test_parleys_voice_too_quiet_for_the_level_is_found_by_its_own_audio(delay_ms):
    reply = speech(0)[RATE // 2:2 * RATE]
    mic = room(reply, -36.0, delay_ms, seed=11)  # a speaker turned down, or far away
    level_only = probe_in_a_quiet_room()
    verdicts, heard = play(level_only, blocks_of(mic))
    assert Verdict.ECHO not in verdicts and heard  # the level alone lets it be heard
    probe = probe_in_a_quiet_room()
    probe.far(reply)
    verdicts, heard = play(probe, blocks_of(mic))
    assert Verdict.ECHO in verdicts and heard == [], probe.echo_peak(mic[1600:6400])
    assert probe.echo_free is False


def test_a_person_on_a_headset_talking_as_the_reply_starts_is_heard_whole():
    reply = speech(0)[RATE // 2:2 * RATE]
    person = speech(3)[:RATE]
    mic = room(np.zeros(len(person)), 0.0, 0, seed=12) + person  # no echo, only them
    probe = probe_in_a_quiet_room()
    probe.echo_free = True  # an earlier reply showed the microphone does not hear Parley
    probe.far(reply)
    verdicts, heard = play(probe, blocks_of(mic))
    assert Verdict.ECHO not in verdicts and len(heard) == len(blocks_of(mic))
    assert probe.echo_free is True


def test_the_reply_heard_again_after_a_headset_was_taken_off_is_an_echo_however_loud():
    probe = probe_in_a_quiet_room()
    play(probe, noise(-61, 20, seed=13))  # on a headset: no echo
    probe.ended()
    assert probe.echo_free is True
    reply = speech(2)[:RATE]
    probe.far(reply)  # now on speakers: a loud echo is not the user talking
    verdicts, heard = play(probe, blocks_of(room(reply, -6.0, 60, seed=14)))
    assert Verdict.ECHO in verdicts and heard == []
    assert probe.echo_free is False


def test_a_voice_sharing_a_pure_tone_s_frequencies_is_not_its_echo():
    # A tone has nothing at most frequencies: their noise must not count as agreement.
    t = np.arange(RATE) / RATE
    tone = (np.sin(2 * np.pi * 330 * t) * 2000).astype(np.int16)
    probe = probe_in_a_quiet_room()
    probe.echo_free = True
    probe.far(tone)
    buzz = speechlike(1.0, 9000)  # harmonics of 140 Hz, sweeping past 330 Hz
    verdicts, heard = play(probe, blocks_of(buzz))
    assert Verdict.ECHO not in verdicts and len(heard) == len(blocks_of(buzz))
