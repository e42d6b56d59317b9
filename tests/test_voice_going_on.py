"""A user who goes on after their turn ended: in the reply's first moments that speech
continues the turn (the reply is taken back, both parts are one message); after them it is
a new turn. Stand-in engines on a clock that counts the microphone's samples, so how much
of the reply has played when the user goes on is exact."""

from __future__ import annotations

import time

import numpy as np

from assistant.conversation import Conversation, ReplySettings
from assistant.local.answers import LocalIntents
from assistant.timer_tool import timer_tool
from assistant.timers import Timers
from assistant.tools import builtin_tools
from assistant.voice.loop import VoiceLoop
from assistant.voice.turns import VoiceSettings
from audio.memory_out import MemorySpeaker
from audio.segmenter import Segmenter
from tests.support.clips import silence, speechlike
from tests.support.clocks import HUNG_S, MicrophoneClock, wait_until
from tests.support.fakes import ScriptedChatModel, ScriptedSpeechToText, ToneTextToSpeech

FIRST, WHOLE, OTHER, CANCEL = 4000, 8000, 12000, 16000
"""The clips' peaks: the stand-in recognizer hears the loudest part of what it is given,
so the first part alone is FIRST, and it joined with the rest is WHOLE."""
SCRIPT = {FIRST: "Tell me a story.", WHOLE: "Tell me a story about a dog.",
          OTHER: "Set a timer for ten minutes.", CANCEL: "Cancel the pizza timer."}


class LaggingSpeaker(MemorySpeaker):
    """Parley's audio still plays for a while after the reply was stopped (a sound card's
    buffer; a reply that became current only after it was taken back)."""

    BUFFERED_S = 1.0

    def stop(self) -> None:
        now = self.clock.monotonic()
        end = self._end
        super().stop()
        with self._lock:
            self._end = min(end, now + self.BUFFERED_S)


class Room:
    """Half duplex (the default) with a speaker that plays in real time on the clock."""

    def __init__(self, *replies: str, barge_in: bool = False,
                 speaker: type[MemorySpeaker] = MemorySpeaker) -> None:
        self.clock = MicrophoneClock()
        self.model = ScriptedChatModel()
        self.model.enqueue(*replies)
        self.timers = Timers()
        tools = builtin_tools()
        tools.register(timer_tool(self.timers))
        self.conversation = Conversation(self.model, tools, ReplySettings(),
                                         local=LocalIntents())
        self.speaker = speaker(realtime=True, clock=self.clock)
        self.loop = VoiceLoop(self.conversation, ScriptedSpeechToText(SCRIPT),
                              ToneTextToSpeech(ms_per_char=40.0), self.speaker, Segmenter(),
                              VoiceSettings(prefill=False, barge_in=barge_in),
                              clock=self.clock)

    def say(self, pcm: np.ndarray) -> None:
        self.clock.feed(self.loop.feed_audio, pcm)

    def until_playing(self, seconds: float) -> None:
        """Until the reply's first audio (the microphone hearing silence meanwhile), then
        let `seconds` of it play."""
        deadline = time.monotonic() + HUNG_S
        while not (self.loop.records and self.loop.records[-1].first_audio_seen()):
            assert time.monotonic() < deadline, "the reply never played"
            self.say(silence(0.03))
            time.sleep(0.002)
        # On a busy machine the reply's thread may note its first audio a few frames after
        # it began to play: count what has played already, so `seconds` is exact.
        record = self.loop.records[-1]
        began = record.started + record.timings["first_audio_ms"] / 1000
        self.say(silence(max(0.0, seconds - (self.clock.monotonic() - began))))

    def finish(self) -> list:
        """Let everything be answered and played, the microphone going on meanwhile; the
        timers that were running then."""
        deadline = time.monotonic() + HUNG_S
        try:
            while not self.loop.wait_idle(0.005):
                assert time.monotonic() < deadline, "the loop never went idle"
                self.say(silence(0.03))
            return self.timers.running()
        finally:
            self.loop.close()
            self.timers.close()

    def users(self) -> list[str]:
        return [m.content for m in self.conversation.history.messages if m.role == "user"]

    def kinds(self, record) -> list[str]:
        return [event["type"] for event in record.events]


def test_going_on_while_the_reply_plays_makes_one_message_answered_once():
    room = Room("Once upon a time, there was a cat.", "A dog named Rex found a bone.")
    room.say(np.concatenate([silence(0.3), speechlike(1.0, FIRST), silence(0.9)]))
    room.until_playing(0.6)  # the user goes on 0.6 s into the reply, half duplex
    room.say(np.concatenate([speechlike(1.0, WHOLE), silence(1.0)]))
    room.finish()
    first, whole = room.loop.records
    # The reply had begun, and was stopped and taken back at once.
    continued = [e for e in first.events if e["type"] == "turn-continued"]
    # (The voice detector needs 60-120 ms of speech to be sure it is speech.)
    assert len(continued) == 1 and 0.6 <= continued[0]["spoken_seconds"] < 0.8
    assert first.continued and "interrupted" not in room.kinds(first)
    # Both parts were heard together (the joined audio), as one message, answered once.
    assert whole.heard == SCRIPT[WHOLE]
    assert room.users() == [SCRIPT[WHOLE]]
    assert [m.content for m in room.conversation.history.messages] == [
        SCRIPT[WHOLE], "A dog named Rex found a bone."]
    # Parley's voice stopped when the user's began: it was not talking over them.
    assert room.speaker.played_seconds < 1.0 + whole.spoken_seconds
    # Before any reply had shown whether the microphone hears Parley, the first one waited
    # out the first moments (1.5 s from the end of the speech); once it had shown that it
    # does not, the next one did not wait.
    assert first.timings["first_audio_ms"] + first.timings["end_of_speech_ms"] >= 1500
    assert whole.timings["latency_ms"] < 1500


def test_what_the_user_goes_on_with_is_heard_while_parley_s_audio_still_plays():
    # Parley's audio goes on for a second after the stop: the microphone must hear the
    # user through it, or what they went on with would be flushed as too short (a
    # cough), the turn answered without it, and the rest of what they said lost.
    room = Room("Once upon a time, there was a cat.", "A dog named Rex found a bone.",
                speaker=LaggingSpeaker)
    room.say(np.concatenate([silence(0.3), speechlike(1.0, FIRST), silence(0.9)]))
    room.until_playing(0.6)
    room.say(np.concatenate([speechlike(1.0, WHOLE), silence(1.0)]))
    room.finish()
    assert room.users() == [SCRIPT[WHOLE]]
    assert [m.content for m in room.conversation.history.messages] == [
        SCRIPT[WHOLE], "A dog named Rex found a bone."]


def test_after_the_first_moments_speech_is_not_heard_while_parley_speaks():
    """Half duplex: once the first sentence and 1.5 s have played, the user's speech is a
    new turn; while Parley goes on speaking it is not listened to (it hears no echo here,
    but it cannot tell that from the user on speakers)."""
    long = ("Once upon a time there was a cat. It lived by the sea. Every day it watched "
            "the boats. One day a boat came in.")
    room = Room(long, "Unexpected.")
    room.say(np.concatenate([silence(0.3), speechlike(1.0, FIRST), silence(0.9)]))
    room.until_playing(2.5)
    room.say(np.concatenate([speechlike(1.0, OTHER), silence(1.0)]))
    room.finish()
    (first,) = room.loop.records
    assert not first.continued and "turn-continued" not in room.kinds(first)
    assert room.users() == [SCRIPT[FIRST]]


def test_a_cough_after_the_reply_was_taken_back_answers_the_turn_as_it_was():
    room = Room("Once upon a time, there was a cat.", "Once upon a time, a cat.")
    room.say(np.concatenate([silence(0.3), speechlike(1.0, FIRST), silence(0.9)]))
    room.until_playing(0.3)
    room.say(np.concatenate([speechlike(0.12, WHOLE), silence(1.5)]))  # too short
    room.finish()
    assert room.users() == [SCRIPT[FIRST]]
    first, again = room.loop.records
    assert first.continued and again.heard == SCRIPT[FIRST]
    assert again.reply == "Once upon a time, a cat."


def test_a_timer_is_set_at_once_and_a_turn_taken_back_leaves_none_of_its_timers():
    room = Room("Done.")
    room.say(np.concatenate([silence(0.3), speechlike(1.0, OTHER), silence(0.9)]))
    # Set at once (the answer need not wait out the first moments), though the turn may
    # yet go on.
    wait_until(lambda: room.timers.running(), "the timer set by the local answer")
    [first_timer] = room.timers.running()
    room.say(np.concatenate([speechlike(1.0, FIRST), silence(1.0)]))  # the user goes on
    running = room.finish()
    # Joined, the loudest part is the timer request again: it is the one message, and
    # its timer the only one; the first was cancelled when the turn was taken back.
    assert room.users() == [SCRIPT[OTHER]]
    assert [t.seconds for t in running] == [600]
    assert first_timer not in running


def test_a_tool_that_cannot_be_undone_waits_until_the_turn_cannot_go_on():
    room = Room("Done.")
    room.timers.start(300, "pizza")
    room.say(np.concatenate([silence(0.3), speechlike(1.0, CANCEL), silence(0.9)]))
    room.say(silence(0.5))  # within the first moments: not cancelled yet
    assert [t.name for t in room.timers.running()] == ["pizza"]
    room.say(np.concatenate([speechlike(1.0, FIRST), silence(1.0)]))  # the user goes on
    assert room.finish() == []  # cancelled once, by the whole turn
    assert room.users() == [SCRIPT[CANCEL]]


def test_with_barge_in_going_on_early_continues_the_turn_rather_than_interrupting():
    room = Room("Once upon a time, there was a cat.", "A dog named Rex.", barge_in=True)
    room.say(np.concatenate([silence(0.3), speechlike(1.0, FIRST), silence(0.9)]))
    room.until_playing(0.4)
    room.say(np.concatenate([speechlike(1.0, WHOLE), silence(1.0)]))
    room.finish()
    first, whole = room.loop.records
    assert "turn-continued" in room.kinds(first) and "interrupted" not in room.kinds(first)
    assert room.users() == [SCRIPT[WHOLE]]
