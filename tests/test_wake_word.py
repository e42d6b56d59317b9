"""The wake word: the real microWakeWord detector on spoken audio, and the voice loop's
gate around it (stand-in speech-to-text and voice, the real segmenter)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from assistant.cli.main import main
from assistant.conversation import Conversation, ReplySettings
from assistant.events import Interrupted, Wake
from assistant.timers import Timer
from assistant.tools import builtin_tools
from assistant.voice.loop import VoiceLoop
from assistant.voice.turns import TurnSource, VoiceSettings
from audio.memory_out import MemorySpeaker
from audio.segmenter import Segmenter
from audio.wakeword import (
    OVER_OWN_VOICE_CUTOFF,
    WakeWordDetector,
    WakeWordError,
    find_wake_word,
    wake_words,
)
from tests.support import espeak
from tests.support import speech_samples as samples
from tests.support.clips import silence, speechlike
from tests.support.fakes import ScriptedChatModel, ScriptedSpeechToText, ToneTextToSpeech

RATE = 16000
REQUEST, FOLLOW_UP = 8000, 12000
SCRIPT = {REQUEST: "What is six times seven?", FOLLOW_UP: "And seven times eight?"}


@pytest.fixture(scope="module")
def okay_nabu() -> np.ndarray:
    """"Okay Nabu" in espeak-ng's voice, quiet enough that the scripted speech-to-text
    tells the request after it by its louder peak."""
    reason = espeak.missing_reason()
    if reason:
        pytest.skip(reason)
    pcm = espeak.espeak("Okay Nabu").astype(np.float64)
    return (pcm * (2000 / np.abs(pcm).max())).astype(np.int16)


def detections(detector: WakeWordDetector, pcm: np.ndarray,
               speaking: bool = False) -> list[float]:
    """Where (seconds) the detector heard its word, fed 30 ms at a time as live audio is."""
    found = []
    for start in range(0, len(pcm), 480):
        heard = detector.feed(pcm[start:start + 480], speaking)
        if heard is not None:
            found.append((start + heard) / RATE)
    return found


# -- the detector ------------------------------------------------------------------------


def test_the_models_in_the_wheel_are_listed_with_what_to_say():
    words = wake_words()
    assert {"okay_nabu", "hey_jarvis", "hey_mycroft", "alexa"} <= set(words)
    assert words["okay_nabu"].phrase == "Okay Nabu"
    assert find_wake_word("Okay-Nabu").name == "okay_nabu"


def test_an_unknown_wake_word_names_the_ones_there_are():
    with pytest.raises(WakeWordError, match="alexa, hey_jarvis, hey_mycroft, okay_nabu"):
        find_wake_word("computer")


@pytest.mark.parametrize("voice", ["en-us", "en-gb-x-rp", "en+m3"])
def test_the_wake_word_is_heard_once_where_it_ends(voice):
    if espeak.missing_reason():
        pytest.skip(espeak.missing_reason())
    said = espeak.espeak("Okay Nabu, what time is it?", voice)
    found = detections(WakeWordDetector("okay_nabu"), np.concatenate([silence(1), said]))
    assert len(found) == 1, found
    # After "okay nabu" (about 1 s of speech), well before the end of the question.
    assert 1.5 < found[0] < 1 + len(said) / RATE - 0.5, found


def test_while_parley_speaks_the_detector_uses_its_speaking_cutoff(okay_nabu):
    clip = np.concatenate([silence(0.5), okay_nabu, silence(0.5)])
    assert len(detections(WakeWordDetector("okay_nabu"), clip, speaking=True)) == 1
    # No score passes 1.0: with it, nothing is heard while speaking, and all is otherwise.
    strict = WakeWordDetector("okay_nabu", speaking_cutoff=1.0)
    assert detections(strict, clip, speaking=True) == []
    assert len(detections(strict, clip)) == 1
    assert OVER_OWN_VOICE_CUTOFF < find_wake_word("okay_nabu").cutoff


def test_speech_without_the_wake_word_never_wakes_it():
    if not samples.available():
        pytest.skip(samples.missing_reason())
    detector = WakeWordDetector("okay_nabu")
    everything = np.concatenate([sample.pcm for sample in samples.all_samples()])
    assert detections(detector, everything) == []


# -- the voice loop with a wake word ------------------------------------------------------


def make_loop(model, clock=None, follow_up_s=6.0, realtime=False, ms_per_char=50.0):
    conversation = Conversation(model, builtin_tools(), ReplySettings())
    stt = ScriptedSpeechToText(SCRIPT)
    timing = {} if clock is None else {"clock": clock}
    loop = VoiceLoop(conversation, stt, ToneTextToSpeech(ms_per_char),
                     MemorySpeaker(realtime=realtime), Segmenter(),
                     VoiceSettings(echo_tail_ms=100, follow_up_s=follow_up_s),
                     wake_word=WakeWordDetector("okay_nabu"), **timing)
    return loop, stt


def feed(loop: VoiceLoop, pcm: np.ndarray) -> None:
    for start in range(0, len(pcm), 480):
        loop.feed_audio(pcm[start:start + 480])


def events_of(loop: VoiceLoop, kind: type) -> list:
    return [timed.event for record in loop.records for timed in record.events
            if isinstance(timed.event, kind)]


def test_nothing_is_transcribed_until_the_wake_word_then_the_request_is_one_turn(okay_nabu):
    model = ScriptedChatModel()
    model.enqueue("Forty-two.")
    loop, stt = make_loop(model)
    try:
        feed(loop, np.concatenate([silence(0.5), speechlike(1.5, REQUEST), silence(1.5)]))
        loop.wait_idle(10)
        assert stt.heard == [] and loop.conversation.history.messages == ()
        feed(loop, np.concatenate([silence(0.5), okay_nabu, silence(0.1),
                                   speechlike(1.5, REQUEST), silence(1.5)]))
        loop.wait_idle(10)
    finally:
        loop.close()
    [wake] = events_of(loop, Wake)
    assert wake.word == "okay_nabu" and wake.at_s > 4.0
    users = [m.content for m in loop.conversation.history.messages if m.role == "user"]
    assert users == [SCRIPT[REQUEST]]
    # What was transcribed began after the wake word: about the request and its silence.
    assert len(stt.heard) >= 1 and max(stt.heard) < int(3.4 * RATE)


def test_a_follow_up_needs_no_wake_word_until_the_window_closes(okay_nabu):
    model = ScriptedChatModel()
    model.enqueue("Forty-two.", "Fifty-six.")
    now = [0.0]
    loop, stt = make_loop(model, clock=lambda: now[0], follow_up_s=6.0)
    try:
        feed(loop, np.concatenate([okay_nabu, silence(0.1), speechlike(1.5, REQUEST),
                                   silence(1.5)]))
        loop.wait_idle(10)
        now[0] += 30.0  # the window is counted in audio heard, not on the clock
        feed(loop, np.concatenate([silence(2.0), speechlike(1.5, FOLLOW_UP), silence(1.5)]))
        loop.wait_idle(10)
        feed(loop, silence(6.5))  # the window has closed
        feed(loop, np.concatenate([speechlike(1.5, REQUEST), silence(1.5)]))
        loop.wait_idle(10)
    finally:
        loop.close()
    users = [m.content for m in loop.conversation.history.messages if m.role == "user"]
    assert users == [SCRIPT[REQUEST], SCRIPT[FOLLOW_UP]]


def test_the_wake_word_stops_parley_mid_reply_and_other_speech_does_not(okay_nabu):
    model = ScriptedChatModel()
    model.enqueue("This is a very long answer that goes on and on about many things. "
                  "It tells of ships and of sails, of the sea and its tides and harbours. "
                  "Then it turns to the birds, the trees, the wind and the long winters. ")
    loop, stt = make_loop(model, realtime=True)
    try:
        loop.submit_text("Tell me everything.")
        deadline = time.monotonic() + 10
        while not loop.output.speaking and time.monotonic() < deadline:
            time.sleep(0.01)
        # Someone else talking over the reply: not the wake word, not listened to.
        feed(loop, np.concatenate([speechlike(1.0, REQUEST), silence(0.3)]))
        assert loop.output.speaking and not events_of(loop, Interrupted)
        # As loud as that speech (the detector's gain control had just adapted to it).
        loud = (okay_nabu.astype(np.float64) * REQUEST / np.abs(okay_nabu).max())
        feed(loop, np.concatenate([loud.astype(np.int16), silence(0.5)]))
        loop.wait_idle(10)
    finally:
        loop.close()
    assert events_of(loop, Interrupted) and events_of(loop, Wake)


class ListeningDetector(WakeWordDetector):
    """The real detector, noting for each block whether Parley was speaking over it, and
    the block where it heard its word."""

    def __init__(self) -> None:
        super().__init__("okay_nabu", speaking_cutoff=OVER_OWN_VOICE_CUTOFF)
        self.speaking: list[bool] = []
        self.heard_in: int | None = None

    def feed(self, pcm: np.ndarray, speaking: bool = False) -> int | None:
        self.speaking.append(speaking)
        heard = super().feed(pcm, speaking)
        if heard is not None and self.heard_in is None:
            self.heard_in = len(self.speaking) - 1
        return heard


def test_the_loop_tells_the_detector_when_parley_speaks(okay_nabu):
    model = ScriptedChatModel()
    model.enqueue("This is a long answer that goes on about many things. "
                  "It tells of ships and sails, the sea and its harbours. ")
    loop, _ = make_loop(model, realtime=True)
    loop.wake_word = detector = ListeningDetector()
    try:
        feed(loop, silence(0.3))
        before = len(detector.speaking)
        loop.submit_text("Tell me everything.")
        deadline = time.monotonic() + 10
        while not loop.output.speaking and time.monotonic() < deadline:
            time.sleep(0.01)
        speaking_from = len(detector.speaking)
        # The wake word stops the reply; the chime that follows is not Parley speaking.
        feed(loop, np.concatenate([silence(0.3), okay_nabu, silence(0.5)]))
        loop.wait_idle(10)
    finally:
        loop.close()
    assert detector.heard_in is not None and events_of(loop, Interrupted)
    assert not any(detector.speaking[:before])
    assert all(detector.speaking[speaking_from:detector.heard_in + 1])
    assert not any(detector.speaking[detector.heard_in + 1:])


def test_the_wake_word_stops_a_ringing_timer(okay_nabu):
    loop, _ = make_loop(ScriptedChatModel(), realtime=True, ms_per_char=100.0)
    try:
        loop.ring(Timer(1, 60, "tea", ends_at=60.0, finished=True))
        deadline = time.monotonic() + 10
        while not loop.output.speaking and time.monotonic() < deadline:
            time.sleep(0.01)
        feed(loop, np.concatenate([okay_nabu, silence(0.5)]))
        assert loop.wait_idle(10)
    finally:
        loop.close()
    [ring] = [record for record in loop.records if record.source is TurnSource.TIMER]
    assert ring.interrupted


@pytest.mark.parametrize(("heard", "kept"), [
    ("Nabu, what time is it?", "What time is it?"),
    ("okay nabu set a timer", "Set a timer"),
    ("Okay Nabu.", ""),
    ("Okay, what time is it?", "Okay, what time is it?"),
    ("What is a nabu?", "What is a nabu?"),
])
def test_the_wake_word_never_stays_in_the_transcript(heard, kept):
    loop, _ = make_loop(ScriptedChatModel())
    try:
        assert loop.listener.without_wake_word(heard) == kept
    finally:
        loop.close()


# -- the command line ---------------------------------------------------------------------


def test_parley_wake_words_lists_them(capsys):
    assert main(["wake-words"]) == 0
    out = capsys.readouterr().out
    assert 'okay_nabu' in out and 'say "Okay Nabu"' in out


@pytest.mark.parametrize("command", ["voice", "replay"])
def test_an_unknown_wake_word_is_one_line_with_the_list_and_exit_2(command, capsys, tmp_path):
    args = [command, "--wake-word", "computer"]
    if command == "replay":
        args.insert(1, str(tmp_path / "session.json"))
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "okay_nabu" in err and "computer" in err


def test_a_wake_word_with_push_to_talk_is_refused(capsys):
    assert main(["voice", "--wake-word", "okay_nabu", "--push-to-talk"]) == 2
    assert "--push-to-talk" in capsys.readouterr().err
