"""Talking over Parley on open speakers: `parley voice --echo-cancel` in a simulated room.

The private PulseAudio server routes what is played on the virtual speaker back into the
virtual microphone (`route_speaker_into_mic`: 6 dB quieter, 80 ms later), mixed with what
a test feeds as the user. The real engines, PortAudio and WebRTC's echo canceller run as a
user would run them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import numpy as np
import pexpect
import pytest

from tests.support import espeak
from tests.support.clips import silence
from tests.support.live_voice import (
    full_history,
    quit_cleanly,
    spawn_voice,
    wait_until_quiet,
    wait_until_speaking,
)
from tests.support.sound_server import MIC_RATE, SoundServer, running_sound_server

pytestmark = pytest.mark.real

ECHO_GAIN_DB = -6.0
ECHO_DELAY_MS = 80
SILENCE = silence(0.5)


@pytest.fixture(scope="module")
def room() -> Iterator[SoundServer]:
    reason = espeak.missing_reason()
    if reason:
        pytest.skip(reason)
    with running_sound_server() as server:
        server.route_speaker_into_mic(ECHO_GAIN_DB, ECHO_DELAY_MS)
        yield server


def said(text: str, level: float | None = None) -> np.ndarray:
    """`text` in espeak-ng's voice (not Parley's), scaled to RMS `level` if given."""
    pcm = espeak.espeak(text)
    if level is not None:
        rms = np.sqrt(np.mean(pcm.astype(np.float64) ** 2))
        pcm = np.clip(pcm * (level / rms), -32768, 32767).astype(np.int16)
    return np.concatenate([SILENCE, pcm, SILENCE])


def rms(pcm: np.ndarray) -> float:
    return float(np.sqrt(np.mean(pcm.astype(np.float64) ** 2))) if pcm.size else 0.0


def speech_rms(pcm: np.ndarray) -> float:
    """The loudness of the speech in `pcm`: the RMS of its louder half of 30 ms blocks."""
    blocks = pcm[: len(pcm) // 480 * 480].reshape(-1, 480).astype(np.float64)
    levels = np.sort(np.sqrt(np.mean(blocks ** 2, axis=1)))
    return float(np.sqrt(np.mean(levels[len(levels) // 2:] ** 2)))


def user_lines(history: dict[int, str]) -> list[str]:
    return [text.removeprefix("user: ") for _, text in sorted(history.items())
            if text.startswith("user: ")]


QUESTIONS = ["What time is it?", "What is seven times six?", "Tell me about the sea.",
             "What day is it today?", "Tell me a story about a dog.",
             "What is twelve plus thirty?", "Tell me about the moon.",
             "What is the date today?", "Tell me about trees.", "What is nine times eight?"]


def replies_in(child: pexpect.spawn) -> int:
    return sum(text.startswith("assistant: ") for text in full_history(child).values())


def ask_until_heard(room: SoundServer, child: pexpect.spawn, question: str) -> None:
    """Say `question`; said again (once) if Parley heard no words in it, as a user would.

    Once in a full-suite run one of the ten was heard as no words ("unclear"); the cause
    was not found (not seen again in 11 runs of the first turn and 3 of this test, with two
    busy processes beside them). It is not what is proved here: that Parley never hears
    its own voice as the user's words."""
    while child.expect([r"(?s).+", pexpect.TIMEOUT], timeout=0.2) == 0:
        pass  # what was shown before: a line there is not about this question
    for _ in range(2):
        room.feed(said(question))
        if child.expect([r"you: ([^\r\n]+)", r"heard no words: (\w+)"], timeout=60) == 0:
            return
    raise AssertionError(f"{question!r} said twice was not heard: {child.match.group(1)}")


def test_over_ten_turns_parley_never_hears_its_own_voice(room):
    child = spawn_voice(room, "--echo-cancel")
    try:
        for number, question in enumerate(QUESTIONS, start=1):
            recording = room.record_monitor()
            ask_until_heard(room, child, question)
            wait_until_speaking(recording)
            # The whole reply written (however slowly), then spoken to its end.
            deadline = time.monotonic() + 120
            while replies_in(child) < number:
                assert time.monotonic() < deadline, f"no reply to {question!r}"
                time.sleep(0.5)
            wait_until_quiet(recording, quiet_s=1.5)
        time.sleep(1.0)  # the last echo has died away
        heard = user_lines(full_history(child))
        quit_cleanly(child)
    finally:
        child.close(force=True)
    # Exactly the ten questions, each heard once: none of Parley's own words.
    assert len(heard) == len(QUESTIONS), heard
    for question, line in zip(QUESTIONS, heard, strict=True):
        assert set(re.findall(r"[a-z]+", question.lower())) & set(
            re.findall(r"[a-z]+", line.lower())), (question, line)


def test_without_cancellation_the_same_room_makes_parley_hear_itself(room):
    """The control: the room's echo is real; listening over it uncancelled goes wrong."""
    child = spawn_voice(room, "--barge-in")
    try:
        recording = room.record_monitor()
        room.feed(said("Tell me a story about a dog."))
        child.expect(r"you: ([^\r\n]+)", timeout=60)
        wait_until_speaking(recording)
        # Parley's own voice comes back: it stops itself, or hears its own words (or the
        # test times out and fails).
        child.expect([r"Stopped after", r"you: ([^\r\n]+)"], timeout=60)
        quit_cleanly(child)
    finally:
        child.close(force=True)


def speaking_at_length(room: SoundServer, child: pexpect.spawn, request: str) -> float:
    """Ask for a long reply and wait until it has played a second; the level of its echo
    in the microphone (what talking over it at about 0 dB takes)."""
    recording = room.record_monitor()
    room.feed(said(request))
    child.expect(r"you: ([^\r\n]+)", timeout=60)
    assert "nabu" not in child.match.group(1).lower()
    wait_until_speaking(recording)
    time.sleep(1.0)
    return speech_rms(recording.samples[-MIC_RATE:]) * 10 ** (ECHO_GAIN_DB / 20)


def test_the_user_talking_over_parley_stops_it_and_is_answered(room):
    child = spawn_voice(room, "--echo-cancel")
    try:
        echo_level = speaking_at_length(room, child, "Tell me a long story about a dragon.")
        room.feed(said("What is seven times six?", level=echo_level))
        child.expect(r"Stopped after", timeout=30)
        child.expect(r"you: ([^\r\n]+)", timeout=30)
        # Its first word may be lost: AEC3 turns down the start of speech over an echo.
        assert re.search(r"seven|7|six|6", child.match.group(1), re.IGNORECASE), \
            child.match.group(1)
        deadline = time.monotonic() + 120
        while replies_in(child) < 2:  # the story (cut short), then the answer
            assert time.monotonic() < deadline, "the question was never answered"
            time.sleep(0.5)
        quit_cleanly(child)
    finally:
        child.close(force=True)


def test_the_wake_word_is_heard_over_parleys_voice(room):
    child = spawn_voice(room, "--echo-cancel", "--wake-word", "okay_nabu")
    try:
        room.feed(said("Tell me a story about a cat."))  # no wake word: not listened to
        room.feed(np.zeros(MIC_RATE * 2, dtype=np.int16))
        room.wait_fed()
        assert child.expect([r"you: ", pexpect.TIMEOUT], timeout=3) == 1
        echo_level = speaking_at_length(room, child,
                                        "Okay Nabu, tell me a long story about a dragon.")
        # Said as loud as the echo it is missed now and then (the canceller turns down
        # what is said over Parley's voice: `benchmarks.echo --only wake-word`), and
        # the user says it again, as the README says to.
        for _ in range(3):
            room.feed(said("Okay Nabu.", level=echo_level))
            room.wait_fed()
            if child.expect([r"Stopped after", pexpect.TIMEOUT], timeout=2) == 0:
                break
        else:
            raise AssertionError("the wake word said three times over Parley was never heard")
        # With the pause people make for the chime: the last 0.2 s of the reply is still
        # leaving the speaker when the word is heard.
        room.feed(said("What time is it?", level=echo_level))
        child.expect(r"you: ([^\r\n]+)", timeout=30)
        assert "time" in child.match.group(1).lower(), child.match.group(1)
        quit_cleanly(child)
    finally:
        child.close(force=True)
