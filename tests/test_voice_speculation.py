"""The reply started at the first pause: played at once when the user has finished, and
without a trace (history, screen, speaker, replay, timers) when they go on talking."""

import numpy as np
import pytest

from assistant.conversation import Conversation, ReplySettings
from assistant.events import Heard, HeardPartial, TextDelta, ToolCall
from assistant.local.answers import LocalIntents
from assistant.timer_tool import timer_tool
from assistant.timers import Timers
from assistant.tools import builtin_tools
from assistant.voice.loop import VoiceLoop
from assistant.voice.speculation import Speculation
from assistant.voice.turns import VoiceSettings
from audio.memory_out import MemorySpeaker
from audio.segmenter import Segmenter
from tests.support.clips import RATE, clip, silence, speechlike
from tests.support.clocks import MicrophoneClock, wait_until
from tests.support.fakes import ScriptedChatModel, ScriptedSpeechToText, ToneTextToSpeech
from tests.support.voice_harness import run_turns
from tests.support.voice_sessions import HELLO, TIME, run_session

FIRST, WHOLE = 4000, 8000
"""The clip's peak says what it says: the words before the pause, and all of them."""
SCRIPT = {FIRST: "Set a timer for ten minutes.", WHOLE: "Tell me about the sea."}


class Room:
    """A voice loop on stand-in engines, its clock counting the microphone's samples."""

    def __init__(self, model: ScriptedChatModel, speculative_reply: bool = True) -> None:
        self.clock = MicrophoneClock()
        self.timers = Timers()
        tools = builtin_tools()
        tools.register(timer_tool(self.timers))
        self.conversation = Conversation(model, tools, ReplySettings(), local=LocalIntents())
        self.tts = ToneTextToSpeech(ms_per_char=10.0)
        self.speaker = MemorySpeaker(realtime=False)
        self.shown: list = []
        self.loop = VoiceLoop(
            self.conversation, ScriptedSpeechToText(SCRIPT), self.tts, self.speaker,
            Segmenter(), VoiceSettings(speculative_reply=speculative_reply, prefill=False),
            render=self.shown.append, clock=self.clock)

    def say(self, pcm: np.ndarray) -> None:
        self.clock.feed(self.loop.feed_audio, pcm)

    def finish(self) -> list:
        """Wait for the replies; the timers that were running then."""
        try:
            assert self.loop.wait_idle(30)
            return self.timers.running()
        finally:
            self.loop.close()
            self.timers.close()


def wait_for_a_held_tool_call(room: Room, what: str) -> None:
    """Until the reply answered ahead has called a tool (and is held there, unconfirmed)."""
    wait_until(lambda: (speculation := room.loop.log.speculating) is not None
               and any(isinstance(event, ToolCall) for event in speculation.held_events),
               what)


def test_a_speculation_the_user_talks_over_leaves_no_trace():
    model = ScriptedChatModel()
    model.enqueue("The sea is wide.")
    room = Room(model)
    room.say(np.concatenate([silence(0.3), speechlike(1.0, FIRST)]))
    room.say(silence(0.4))  # a pause, shorter than the end-of-speech wait
    # The pause's words are a timer request, answered ahead up to the timer, which waits
    # for the turn to be confirmed.
    wait_for_a_held_tool_call(room, "a speculative reply calling the timer tool")
    # The user goes on, then is silent (the reply waits out their first moments).
    room.say(np.concatenate([speechlike(1.0, WHOLE), silence(2.0)]))
    # No timer was set, nothing of it was said, shown, kept or recorded.
    assert room.finish() == []
    assert [m.content for m in room.conversation.history.messages] == [
        SCRIPT[WHOLE], "The sea is wide."]
    heard = [e.text for e in room.shown if isinstance(e, Heard)]
    assert heard == [SCRIPT[WHOLE]]
    assert "".join(e.text for e in room.shown if isinstance(e, TextDelta)) == (
        "The sea is wide.")
    assert room.tts.spoken == ["The sea is wide."]
    played = sum(len(pcm) for pcm, _ in room.speaker.chunks) / RATE
    assert played == pytest.approx(len("The sea is wide.") * 0.010, abs=0.01)
    [record] = room.loop.records
    assert record.heard == SCRIPT[WHOLE] and record.reply == "The sea is wide."
    # (The words shown while the user spoke are theirs: the first part was a timer.)
    answered = [e.as_json() for e in record.events if not isinstance(e.event, HeardPartial)]
    assert "timer" not in str(answered).lower()


def test_a_speculation_that_stands_is_played_when_the_wait_ends():
    model = ScriptedChatModel()
    model.enqueue("It is 42. Anything else?")
    room = Room(model)
    room.say(np.concatenate([silence(0.3), speechlike(1.0, WHOLE)]))
    room.say(silence(0.3))
    # Answered and synthesized during the wait, but not shown or played yet.
    wait_until(lambda: len(room.tts.spoken) == 2, "the reply synthesized ahead")
    # (Only the user's own words showed while they spoke.)
    assert [e for e in room.shown if not isinstance(e, HeardPartial)] == []
    assert room.speaker.chunks == []
    assert room.conversation.history.messages == ()
    room.say(silence(1.0))  # the wait ends: the user has finished
    room.finish()
    [record] = room.loop.records
    assert record.heard == SCRIPT[WHOLE] and record.reply == "It is 42. Anything else?"
    assert [m.content for m in room.conversation.history.messages] == [
        SCRIPT[WHOLE], "It is 42. Anything else?"]
    # Its first audio came with the end of the wait; the words were ready before it.
    timings = record.timings
    assert timings.first_audio_ms == 0
    assert timings.stt_ms < 0 and timings.first_token_ms < 0
    assert timings.latency_ms == pytest.approx(timings.end_of_speech_ms, abs=0.2)
    # Shown at the commit: nothing of the reply before the turn began. (The words shown
    # while the user spoke come first, timed before it.)
    answered = [e for e in record.events if not isinstance(e.event, HeardPartial)]
    assert all(timed.ms >= 0 for timed in answered)
    assert isinstance(answered[0].event, Heard)
    assert len(room.speaker.chunks) == 2


@pytest.mark.parametrize("speculative_reply", [True, False])
def test_a_pause_inside_a_turn_leaves_one_turn_whenever_the_reply_ahead_got_to(
        speculative_reply):
    """However far the reply to the pause's words got before the user went on (the
    harness feeds audio as fast as it can), only the whole turn is answered. (The model
    says "OK." to anything: a reply ahead that reached it takes nothing from a script.)"""
    run = run_turns(
        [np.concatenate([silence(0.3), speechlike(1.0, FIRST), silence(0.4),
                         speechlike(1.0, WHOLE)])],
        script=SCRIPT,
        settings=VoiceSettings(echo_tail_ms=0, speculative_reply=speculative_reply,
                               prefill=False))
    assert run.heard == [SCRIPT[WHOLE]] and run.replies == ["OK."]
    assert [m.content for m in run.conversation.history.messages] == [SCRIPT[WHOLE], "OK."]
    assert [e.text for e in run.shown if isinstance(e, Heard)] == [SCRIPT[WHOLE]]
    assert run.tts.spoken[-1:] == ["OK."]


def test_a_timer_asked_for_ahead_is_set_once_the_turn_is_confirmed():
    room = Room(ScriptedChatModel())
    room.say(np.concatenate([silence(0.3), speechlike(1.0, FIRST), silence(0.3)]))
    wait_for_a_held_tool_call(room, "the timer tool called ahead")
    assert room.timers.running() == []  # not until the user has finished
    # Nor while they may still go on with their turn: the reply's first moments.
    room.say(silence(2.0))
    [timer] = room.finish()
    assert timer.seconds == 600
    assert room.loop.records[0].reply == "Your 10 minute timer is set."


def replay_results(tmp_path, monkeypatch, speculative_reply: bool, fast: bool
                   ) -> tuple[dict, int]:
    """The replay's document without what differs from run to run (when things happened),
    and how many replies answered ahead became the turn's."""
    committed: list = []
    commit = Speculation.commit

    def counting_commit(self, *args, **kwargs):  # a reply answered ahead became the turn's
        done = commit(self, *args, **kwargs)
        if done:
            committed.append(self)
        return done

    monkeypatch.setattr(Speculation, "commit", counting_commit)
    model = ScriptedChatModel()
    model.enqueue("Hi! How can I help?",
                  '<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}'
                  '</tool_call>', "The sea is wide.")
    folder = tmp_path / f"{speculative_reply}-{fast}"
    folder.mkdir()
    report, loop, *_ = run_session(
        folder, model, [{"audio": "hello.wav"}, {"audio": "time.wav"}, {"text": "Thanks!"}],
        {"hello.wav": clip(1.2, HELLO), "time.wav": clip(1.5, TIME)}, fast=fast,
        speculative_reply=speculative_reply)
    assert loop.settings.speculative_reply is speculative_reply
    for message in report["messages"]:
        message.pop("at")  # when each was said differs from run to run
    for turn in report["turns"]:
        turn.pop("timings")
        turn["input"] = turn["input"].get("text") or "audio"
        # How many live passes ran while the user spoke depends on the machine's speed.
        turn["events"] = [e for e in turn["events"] if e["type"] != "heard-partial"]
        for event in turn["events"]:
            event.pop("ms")
    return report, len(committed)


@pytest.mark.parametrize("fast", [True, False])
def test_replay_gives_the_same_results_with_and_without_speculation(tmp_path, monkeypatch,
                                                                    fast):
    with_it, answered_ahead = replay_results(tmp_path, monkeypatch, True, fast)
    without, answered_after = replay_results(tmp_path, monkeypatch, False, fast)
    # Both spoken turns were answered ahead in one run, and neither in the other…
    assert (answered_ahead, answered_after) == (2, 0)
    # …and nobody could tell from the results.
    assert with_it == without
    assert [t["reply"] for t in with_it["turns"]] == [
        "Hi! How can I help?", "The sea is wide.", "OK."]
    spoken = [e["text"] for e in with_it["turns"][0]["events"] if e["type"] == "spoken"]
    assert spoken == ["Hi!", "How can I help?"]
