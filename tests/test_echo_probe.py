"""The echo probe: whether the microphone hears Parley, judged from the level at the start
of each reply, so half duplex may listen through a reply's first moments."""

from __future__ import annotations

import numpy as np

from audio.echo_probe import EchoProbe, Verdict

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
