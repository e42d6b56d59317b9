"""A timer going off in voice: the chime and the announcement, repeated until answered."""

import time

import numpy as np

from assistant.conversation import Conversation
from assistant.events import TimerFinished
from assistant.timers import Timer
from assistant.tools import builtin_tools
from assistant.voice.loop import VoiceLoop
from assistant.voice.turns import TurnSource, VoiceSettings
from audio.chime import chime
from audio.memory_out import MemorySpeaker
from audio.segmenter import Segmenter
from tests.support.fakes import ScriptedChatModel, ScriptedSpeechToText, ToneTextToSpeech


def make_loop(ring_times: int = 3, ring_gap_s: float = 0.3, realtime: bool = False):
    model = ScriptedChatModel()
    model.enqueue("Okay.")
    events: list = []
    tts = ToneTextToSpeech(ms_per_char=5)
    speaker = MemorySpeaker(realtime=realtime)
    loop = VoiceLoop(Conversation(model, builtin_tools()), ScriptedSpeechToText({}), tts,
                     speaker, Segmenter(),
                     VoiceSettings(echo_tail_ms=0, ring_times=ring_times, ring_gap_s=ring_gap_s),
                     events.append)
    return loop, speaker, tts, events


def chimes_played(speaker: MemorySpeaker, rate: int) -> int:
    sound = chime(rate)
    return sum(1 for pcm, _ in speaker.chunks if pcm.size == sound.size and
               np.array_equal(pcm, sound))


def test_an_unanswered_timer_chimes_and_is_announced_the_set_number_of_times():
    loop, speaker, tts, events = make_loop(ring_times=3, ring_gap_s=0.05)
    try:
        loop.ring(Timer(1, 300, "pizza"))
        assert loop.wait_idle(20)
    finally:
        loop.close()
    assert chimes_played(speaker, tts.sample_rate) == 3
    finished = [e for e in events if isinstance(e, TimerFinished)]
    assert [e.text for e in finished] == ["Your 5 minute pizza timer is done."]
    assert loop.records[-1].source is TurnSource.TIMER
    # The announcement is spoken, not kept as a message of the conversation.
    assert len(loop.conversation.history.messages) == 0


def test_a_typed_answer_stops_the_ringing_and_is_answered():
    loop, speaker, tts, _ = make_loop(ring_times=5, ring_gap_s=2.0)
    try:
        loop.ring(Timer(1, 60))
        deadline = time.monotonic() + 10
        while not chimes_played(speaker, tts.sample_rate) and time.monotonic() < deadline:
            time.sleep(0.01)
        loop.submit_text("thanks")
        assert loop.wait_idle(20)
    finally:
        loop.close()
    assert chimes_played(speaker, tts.sample_rate) == 1
    assert [m.content for m in loop.conversation.history.messages] == ["thanks", "Okay."]
