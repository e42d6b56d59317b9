"""`parley replay` hands-free with the real engines: the wake word, and a simulated room
that sends every reply back into the input (`--echo`), with and without cancellation."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from audio.files import write_wav
from tests.support import espeak
from tests.support.nodisk import changes_outside, run_parley

pytestmark = pytest.mark.real

RATE = 16000


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    """Requests in espeak-ng's voice (not Parley's), with and without the wake word."""
    if espeak.missing_reason():
        pytest.skip(espeak.missing_reason())
    folder = tmp_path_factory.mktemp("clips")
    pause = np.zeros(RATE // 2, dtype=np.int16)
    # Over Parley's voice people wait for the chime; without that pause, the canceller
    # turns down the first word said while the reply's last 0.2 s is still playing.
    write_wav(folder / "wake_then_time.wav", np.concatenate([
        pause, espeak.espeak("Okay Nabu."), pause, espeak.espeak("What time is it?"), pause]),
        RATE)
    for name, text in {
        "wake_time": "Okay Nabu, what time is it?",
        "wake_story": "Okay Nabu, tell me a long story about a dragon.",
        "wake": "Okay Nabu.",
        "math": "What is seven times six?",
        "day": "What day is it today?",
        "plus": "What is twelve plus thirty?",
        "story": "Tell me a story about a dog.",
    }.items():
        write_wav(folder / f"{name}.wav", np.concatenate([pause, espeak.espeak(text), pause]),
                  RATE)
    return folder


def replay(tmp_path, clips, turns: list[dict], *flags: str) -> dict:
    session = tmp_path / "session.json"
    session.write_text(json.dumps({"turns": [
        {**turn, "audio": str(clips / turn["audio"])} if "audio" in turn else turn
        for turn in turns]}))
    result = run_parley(tmp_path, b"", "replay", str(session), "--ctx", "2048",
                        "--answer-tokens", "48", *flags, trace=True)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    # Nothing of the conversation was written: only strace's own log.
    assert changes_outside(tmp_path / "trace", []) == []
    return json.loads(result.stdout)


def kinds(turn: dict) -> list[str]:
    return [event["type"] for event in turn["events"]]


def test_with_a_wake_word_only_what_follows_it_is_answered(tmp_path, clips):
    report = replay(tmp_path, clips, [
        {"audio": "wake_time.wav"},  # answered, without the wake word in what was heard
        {"audio": "math.wav"},  # a follow-up, straight after the reply: answered
        {"wait_s": 10},  # the follow-up window closes
        {"audio": "day.wav"},  # no wake word: not even transcribed
        {"audio": "wake.wav"},  # the wake word alone: listening…
        {"audio": "plus.wav"},  # …so this is answered
    ], "--fast", "--wake-word", "okay_nabu")
    first, follow_up, _, ignored, wake, answered = report["turns"]
    assert kinds(first)[0] == "wake"
    assert first["events"][0]["word"] == "okay_nabu" and first["events"][0]["at_s"] > 1.0
    assert "time" in first["heard"].lower() and "nabu" not in first["heard"].lower()
    assert re.search(r"\d:\d\d", first["reply"])
    assert "42" in follow_up["reply"] and "wake" not in kinds(follow_up)
    assert ignored["heard"] == "" and ignored["events"] == []
    assert kinds(wake) == ["wake"] and wake["heard"] == ""
    assert "42" in answered["reply"]
    assert [m["role"] for m in report["messages"]].count("user") == 3


ROOM = [{"audio": "math.wav"}, {"audio": "story.wav"}, {"audio": "day.wav"}]


def test_in_an_echoing_room_uncancelled_parley_stops_itself(tmp_path, clips):
    """The control for the next test: the simulated room's echo is real."""
    report = replay(tmp_path, clips, ROOM, "--echo", "-6", "--barge-in")
    assert any(turn["interrupted"] for turn in report["turns"]), report["turns"]


def test_with_echo_cancellation_parley_hears_none_of_its_own_voice(tmp_path, clips):
    report = replay(tmp_path, clips, ROOM, "--echo", "-6", "--echo-cancel")
    assert not any(turn["interrupted"] for turn in report["turns"])
    users = [m["content"] for m in report["messages"] if m["role"] == "user"]
    assert len(users) == 3, users
    assert all(turn["reply"] and turn["spoken_seconds"] > 0.5 for turn in report["turns"])


def test_the_wake_word_over_parleys_echo_stops_it_and_is_answered(tmp_path, clips):
    report = replay(tmp_path, clips, [
        {"audio": "wake_story.wav"},
        {"audio": "wake_then_time.wav", "during_reply_ms": 1500},
    ], "--echo", "-6", "--echo-cancel", "--wake-word", "okay_nabu")
    story, time_turn = report["turns"]
    assert story["interrupted"]
    assert "wake" in kinds(time_turn) and "time" in time_turn["heard"].lower()
    assert re.search(r"\d:\d\d", time_turn["reply"])
