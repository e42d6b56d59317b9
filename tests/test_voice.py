"""The voice loop and headless replay with stand-in engines around the real segmenter and VAD."""

import json
import time

import numpy as np
import pytest

from assistant.conversation import Conversation, ReplySettings
from assistant.events import Interrupted, Spoken
from assistant.tools import builtin_tools
from assistant.voice.loop import VoiceLoop
from assistant.voice.replay import SessionError, load_session, replay, session_json
from assistant.voice.turns import TurnSource, VoiceSettings
from audio.memory_out import MemorySpeaker
from audio.segmenter import Segmenter
from tests.support.clips import clip
from tests.support.clocks import HUNG_S, MicrophoneClock, wait_until
from tests.support.conversations import filler, long_answer, summarizing_conversation
from tests.support.fakes import (
    HearsWordsInAnything,
    ScriptedChatModel,
    ScriptedSpeechToText,
    ToneTextToSpeech,
)
from tests.support.voice_harness import run_turns
from tests.support.voice_sessions import (
    HELLO,
    SCRIPT,
    STOP,
    TIME,
    make_loop,
    run_session,
    write_session,
)

RATE = 16000


def test_a_spoken_session_is_heard_answered_with_tools_and_spoken(tmp_path):
    model = ScriptedChatModel()
    model.enqueue(
        "Hi! How can I help?",
        '<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}</tool_call>',
        "Six times seven is 42. Anything else?",
        "You asked me what six times seven is.")
    report, loop, stt, tts = run_session(
        tmp_path, model,
        [{"audio": "hello.wav"}, {"audio": "time.wav"}, {"text": "What did I ask?"}],
        {"hello.wav": clip(1.2, HELLO), "time.wav": clip(1.5, TIME)})
    turns = report["turns"]
    assert [t["heard"] for t in turns] == [SCRIPT[HELLO], SCRIPT[TIME], "What did I ask?"]
    assert turns[1]["reply"] == "Six times seven is 42. Anything else?"
    assert turns[0]["input"] == {"audio": str((tmp_path / "hello.wav").resolve())}
    # The sentences were spoken one by one, the first before the reply was complete.
    assert tts.spoken[:2] == ["Hi!", "How can I help?"]
    spoken = [e for e in turns[1]["events"] if e["type"] == "spoken"]
    assert [e["text"] for e in spoken] == ["Six times seven is 42.", "Anything else?"]
    calls = [e for e in turns[1]["events"] if e["type"] == "tool-call"]
    assert calls and calls[0]["label"] == "Calculating 6*7"
    timings = turns[0]["timings"]
    assert timings["end_of_speech_ms"] == pytest.approx(700, abs=40)
    assert timings["latency_ms"] == pytest.approx(
        timings["end_of_speech_ms"] + timings["first_audio_ms"], abs=0.2)
    assert timings["stt_ms"] <= timings["first_token_ms"] <= timings["first_audio_ms"]
    assert turns[1]["spoken_seconds"] == pytest.approx(
        len("Six times seven is 42.Anything else?") * 0.05, abs=0.05)
    # Every heard message, numbered, with the tool result, passed to the next turn.
    assert [(m["seq"], m["role"]) for m in report["messages"]] == [
        (1, "user"), (2, "assistant"), (3, "user"), (4, "tool"), (5, "assistant"),
        (6, "user"), (7, "assistant")]
    assert report["messages"][3]["tool"] == "calculator"
    last_prompt = [m.content for m in model.prompts[-1]]
    assert SCRIPT[HELLO] in last_prompt and "6*7 = 42" in last_prompt
    assert report["summary"] == {"text": "", "covered_through": 0}


def test_replay_gives_the_same_results_every_time(tmp_path):
    def once(folder):
        model = ScriptedChatModel()
        model.enqueue("First answer.", "Second answer.")
        report, *_ = run_session(folder, model, [{"audio": "a.wav"}, {"audio": "b.wav"}],
                                 {"a.wav": clip(1.0, HELLO), "b.wav": clip(2.0, TIME)})
        return ([(t["heard"], t["reply"], t["timings"]["end_of_speech_ms"],
                  t["timings"]["speech_seconds"]) for t in report["turns"]],
                # when each message was said is the only thing that differs between runs
                [{k: v for k, v in m.items() if k != "at"} for m in report["messages"]])

    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    assert once(tmp_path / "one") == once(tmp_path / "two")


def test_noise_and_silence_are_not_turned_into_messages(tmp_path):
    model = ScriptedChatModel()
    model.enqueue("I heard you.")
    rng = np.random.default_rng(1)
    silence = np.zeros(RATE * 2, dtype=np.int16)
    clips = {
        "silence.wav": silence,
        "room.wav": rng.normal(0, 60, RATE * 2).astype(np.int16),  # a quiet room
        # Louder than the scripted stand-in's own level rule (peak about 660), and after
        # digital silence, which once made webrtcvad take any noise for speech.
        "fan.wav": rng.normal(0, 150, RATE * 2).astype(np.int16),
        "speech.wav": clip(1.0, HELLO),
    }
    turns = ["silence.wav", "room.wav", "silence.wav", "fan.wav", "room.wav", "speech.wav"]
    path = write_session(tmp_path, [{"audio": name} for name in turns], clips)
    stt = HearsWordsInAnything()
    loop, *_ = make_loop(model, stt=stt)
    session = load_session(path)
    try:
        produced = replay(loop, session, fast=True, timeout_s=60)
    finally:
        loop.close()
    report = session_json(loop, session, produced)
    # The segmenter never handed noise or silence on, not even for a speculative transcript…
    assert [t["heard"] for t in report["turns"]] == [""] * 5 + ["Words from nowhere."]
    assert len(stt.heard) == 1
    # …while the same stand-in turned the one real utterance into a message.
    assert [m["content"] for m in report["messages"]] == ["Words from nowhere.", "I heard you."]
    assert len(model.prompts) == 1


def test_an_utterance_longer_than_the_maximum_is_cut_not_lost(tmp_path):
    model = ScriptedChatModel()
    model.enqueue("Part one noted.", "Part two noted.")
    report, loop, stt, _ = run_session(
        tmp_path, model, [{"audio": "long.wav"}], {"long.wav": clip(2.6, TIME)},
        max_utterance_s=2.0)
    turn = report["turns"][0]
    heard = [e for e in turn["events"] if e["type"] == "heard"]
    assert len(heard) == 2 and heard[0]["cut"] is True and heard[1]["cut"] is False
    # Both parts together hold the whole clip's speech.
    assert sum(stt.heard[-2:]) >= 2.6 * RATE
    assert [m["role"] for m in report["messages"]] == ["user", "assistant"] * 2


def test_barge_in_stops_the_reply_and_keeps_what_was_heard():
    model = ScriptedChatModel()
    model.enqueue(long_answer(6), "All right, I stopped.")
    clock = MicrophoneClock()
    loop, *_ = make_loop(model, barge_in=True, realtime=True, keep_audio=True, clock=clock)
    stop = clip(1.0, STOP)
    onset = int(0.4 * RATE)  # where the user's voice begins in the clip
    playhead: list[float] = []
    try:
        loop.submit_text("Tell me something long.")
        # The whole reply is queued on the speaker before any time passes: 6 × 1.1 s.
        wait_until(lambda: loop.records and sum(
            isinstance(e.event, Spoken) for e in loop.records[0].events) == 6, "six sentences")
        feed = loop.feed_audio
        clock.feed(feed, np.zeros(int(1.2 * RATE), dtype=np.int16))  # 1.2 s into the reply
        clock.feed(feed, np.concatenate([stop, np.zeros(int(1.5 * RATE), dtype=np.int16)]),
                   lambda at: playhead.append(loop.output.played_seconds + (onset - at) / RATE)
                   if at <= onset < at + 480 else None)
        deadline = time.monotonic() + HUNG_S
        while not loop.wait_idle(0.005):  # the microphone goes on while the answer is spoken
            assert time.monotonic() < deadline, "the loop never went idle"
            clock.feed(feed, np.zeros(480, dtype=np.int16))
    finally:
        loop.close()
    first, second = loop.records
    assert first.interrupted is True
    assert playhead == [pytest.approx(1.6)]  # the voice began 1.6 s into the reply
    # From the start of the user's voice to silence, counted in samples of the reply that
    # played meanwhile: detecting the voice, then stopping the output in the same frame.
    heard_over_the_user = first.spoken_seconds - playhead[0]
    assert 0 < heard_over_the_user < 0.2
    assert first.timings.barge_in_stop_ms == 0
    assert heard_over_the_user * 1000 == pytest.approx(first.timings.barge_in_detect_ms,
                                                       abs=30 + 10)  # a frame, and rounding
    # What --audio-out would write is what was heard, not all that was synthesized.
    kept = sum(chunk.seconds for chunk in first.audio)
    assert kept == pytest.approx(first.spoken_seconds, abs=0.02)
    assert second.heard == SCRIPT[STOP]
    # The completed reply is kept, saying what the user heard of it.
    assistant = loop.conversation.history.messages[1]
    assert assistant.role == "assistant" and "the user interrupted" in assistant.content
    assert "This is a long answer." in assistant.content.split("[")[1]
    assert [type(e.event) for e in first.events].count(Interrupted) == 1
    # Only sentences that had started playing are reported as spoken.
    spoken = [e.event.seconds for e in first.events if isinstance(e.event, Spoken)]
    assert len(spoken) == 2 and sum(spoken[:-1]) < first.spoken_seconds <= sum(spoken)


def test_without_barge_in_parley_does_not_hear_itself(tmp_path):
    model = ScriptedChatModel()
    model.enqueue(long_answer(6), "Unexpected.")
    report, *_ = run_session(
        tmp_path, model,
        [{"audio": "hello.wav"}, {"audio": "stop.wav", "during_reply_ms": 500}],
        {"hello.wav": clip(1.0, HELLO), "stop.wav": clip(0.8, STOP)},
        fast=False, realtime=True)
    first, second = report["turns"]
    assert first["interrupted"] is False
    assert second["heard"] == "" and len(report["messages"]) == 2


def test_voice_history_is_capped_at_its_limit():
    run = run_turns([f"message {number}" for number in range(5)],
                    reply_settings=ReplySettings(max_messages=6))
    seqs = [m.seq for m in run.conversation.history.messages]
    assert seqs == [5, 6, 7, 8, 9, 10]


def test_a_spoken_turn_and_a_typed_one_are_heard_answered_and_spoken_in_order():
    run = run_turns([clip(1.0, HELLO), "What did I say?"], script=SCRIPT,
                    replies=["Hi! How can I help?", "You said hello."])
    spoken, typed = run.records
    assert (spoken.source, typed.source) == (TurnSource.AUDIO, TurnSource.TEXT)
    assert run.heard == [SCRIPT[HELLO], "What did I say?"]
    assert run.replies == ["Hi! How can I help?", "You said hello."]

    def said(record) -> list[str]:  # text deltas come as the model streams: any number
        return [kind for kind in run.event_types(record) if kind != "text-delta"]

    assert said(spoken) == ["heard", "sentence", "spoken", "sentence", "spoken", "reply-done"]
    assert said(typed) == ["sentence", "spoken", "reply-done"]
    assert run.tts.spoken == ["Hi!", "How can I help?", "You said hello."]
    # The end of speech is counted in the microphone's samples: the same on any machine.
    assert spoken.timings.end_of_speech_ms == pytest.approx(720, abs=30)
    assert [m.content for m in run.conversation.history.messages] == [
        SCRIPT[HELLO], "Hi! How can I help?", "What did I say?", "You said hello."]


def test_the_lookup_step_is_labelled_in_voice(tmp_path):
    model = ScriptedChatModel()
    model.enqueue("Noted.", '<tool_call>{"name": "conversation_history", '
                  '"arguments": {"query": "billing port"}}</tool_call>', "It was 8101.")
    report, *_ = run_session(
        tmp_path, model,
        [{"text": "The billing port is 8101."}, {"audio": "hello.wav"}],
        {"hello.wav": clip(1.0, HELLO)})
    labels = [e["label"] for e in report["turns"][1]["events"] if e["type"] == "tool-call"]
    assert labels == ["Searching earlier in this conversation for “billing port”"]
    assert model.offered[1].count("conversation_history") == 1
    assert "conversation_history" not in model.offered[0]  # nothing earlier to look back on


def test_session_errors_name_the_file_and_the_turn(tmp_path):
    (tmp_path / "broken.wav").write_bytes(b"RIFF" + bytes(range(200)))
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"turns": [{"text": "hi"}, {"audio": "broken.wav"}]}))
    with pytest.raises(SessionError) as error:
        load_session(path)
    assert "turn 2" in str(error.value) and "broken.wav" in str(error.value)
    path.write_text(json.dumps({"turns": [{"audio": "missing.wav"}]}))
    with pytest.raises(SessionError, match="turn 1.*missing.wav"):
        load_session(path)
    path.write_text("{not json")
    with pytest.raises(SessionError, match="not valid JSON"):
        load_session(path)
    path.write_text(json.dumps({"turns": [{"text": "a", "audio": "b.wav"}]}))
    with pytest.raises(SessionError, match="turn 1"):
        load_session(path)


def test_between_turns_the_next_prompt_beginning_is_prepared():
    # Words that need no tool: a request that could need one is offered it, which changes
    # the prompt's beginning (the tools are part of it).
    run = run_turns(["hello", "go on", "thanks"], replies=["First.", "Second.", "Third."])
    model = run.model
    # Each reply's prompt begins exactly with what was prepared before it came.
    for prepared, prompt in zip(model.prefills, model.prompts, strict=False):
        assert prompt[:len(prepared)] == prepared
    assert len(model.prefills) >= 3 and run.loop.prefilled_tokens > 0
    assert [m.content for m in model.prefills[2][1:]] == ["hello", "First.", "go on", "Second."]


def test_voice_summarizes_what_no_longer_fits_and_passes_the_summary_on(tmp_path):
    conversation, model = summarizing_conversation(idle_summaries=True)  # as voice builds it
    stt, tts = ScriptedSpeechToText(SCRIPT), ToneTextToSpeech(5)
    loop = VoiceLoop(conversation, stt, tts, MemorySpeaker(realtime=False), Segmenter(),
                     VoiceSettings(echo_tail_ms=0))
    path = write_session(tmp_path, [{"text": filler(n)[0]} for n in range(4)]
                         + [{"audio": "hello.wav"}], {"hello.wav": clip(1.0, HELLO)})
    model.enqueue(*(filler(n)[1] for n in range(4)), "Hello again.")
    session = load_session(path)
    try:
        produced = replay(loop, session, fast=True, timeout_s=60)
    finally:
        loop.close()
    report = session_json(loop, session, produced)
    # Written between turns, after a reply was spoken: never inside a reply.
    events = [e["type"] for turn in report["turns"] for e in turn["events"]]
    assert not [kind for kind in events if kind.startswith("summary")]
    idle = [e["type"] for turn in report["turns"] for e in turn["idle"]]
    assert idle[:2] == ["summary-start", "summary"]
    assert report["summary"]["covered_through"] >= 2
    # The spoken turn's prompt holds the summary instead of what it covers.
    spoken_prompt = model.prompts[-1]
    assert "Earlier in this conversation" in spoken_prompt[0].content
    assert spoken_prompt[-1].content == SCRIPT[HELLO]
    assert all(filler(0)[0] != m.content for m in spoken_prompt)
    assert report["turns"][-1]["reply"] == "Hello again."


def test_push_to_talk_hears_only_between_enter_and_the_end_of_speech():
    model = ScriptedChatModel()
    model.enqueue("Hi.", "Noted.")
    conversation = Conversation(model, builtin_tools())
    loop = VoiceLoop(conversation, ScriptedSpeechToText(SCRIPT), ToneTextToSpeech(),
                     MemorySpeaker(), Segmenter(),
                     VoiceSettings(push_to_talk=True, echo_tail_ms=0))
    trailing = np.zeros(RATE, dtype=np.int16)
    try:
        loop.feed_audio(np.concatenate([clip(1.0, HELLO), trailing]))  # before Enter
        loop.wait_idle(10)
        loop.start_listening()
        loop.feed_audio(np.concatenate([clip(1.0, HELLO), trailing]))  # ends by silence
        loop.wait_idle(10)
        loop.feed_audio(np.concatenate([clip(1.0, TIME), trailing]))  # no longer listening
        loop.wait_idle(10)
        loop.start_listening()
        loop.feed_audio(clip(1.0, TIME)[: RATE])  # still talking when Enter ends it
        loop.stop_listening()
        loop.wait_idle(10)
    finally:
        loop.close()
    heard = [m.content for m in conversation.history.messages if m.role == "user"]
    assert heard == [SCRIPT[HELLO], SCRIPT[TIME]]
    assert not loop.listening


def test_the_model_waits_for_the_first_sentence_to_be_heard():
    import time as clock

    class SlowFirstAudio(ToneTextToSpeech):
        def __init__(self):
            super().__init__()
            self.first_yield = None

        def synthesize(self, text):
            for chunk in super().synthesize(text):
                if self.first_yield is None:
                    clock.sleep(0.3)  # synthesizing the first sentence takes a while
                    self.first_yield = clock.monotonic()
                yield chunk

    model = ScriptedChatModel()
    model.enqueue("Here it is. And here is the rest of the answer, with more words.")
    tts = SlowFirstAudio()
    deltas: list[tuple[float, str]] = []

    def render(event):
        if type(event).__name__ == "TextDelta":
            deltas.append((clock.monotonic(), event.text))

    loop = VoiceLoop(Conversation(model, builtin_tools()), ScriptedSpeechToText(SCRIPT), tts,
                     MemorySpeaker(), Segmenter(), VoiceSettings(echo_tail_ms=0), render)
    try:
        loop.submit_text("hello")
        loop.wait_idle(10)
    finally:
        loop.close()
    text = ""
    for at, piece in deltas:
        if "Here it is. " in text:  # after the first sentence, nothing until its audio
            assert at >= tts.first_yield
        text += piece
    assert tts.spoken[0] == "Here it is."


def test_speech_begun_before_parley_talks_is_kept_not_dropped():
    model = ScriptedChatModel()
    model.enqueue("Sure.")
    loop, *_ = make_loop(model, realtime=True)
    speech = clip(1.5, TIME)
    try:
        loop.feed_audio(speech[: int(1.2 * RATE)])  # the user is mid-sentence…
        loop.output.play(np.zeros(RATE * 2, dtype=np.int16), RATE)  # …when Parley speaks
        loop.feed_audio(speech[int(1.2 * RATE):])
        loop.output.stop()
        loop.wait_idle(10)
    finally:
        loop.close()
    assert [m.content for m in loop.conversation.history.messages][:1] == [SCRIPT[TIME]]


def test_interrupting_drops_the_turns_still_waiting():
    model = ScriptedChatModel()
    model.enqueue(long_answer(10), "Should not come.", "After.")
    loop, *_ = make_loop(model, realtime=True)
    try:
        loop.submit_text("first")
        loop.submit_text("second")  # queued behind the first
        deadline = time.monotonic() + 10
        while not loop.records[0].timings.first_audio_ms and time.monotonic() < deadline:
            time.sleep(0.01)
        loop.interrupt()  # Ctrl-C
        loop.wait_idle(10)
        loop.submit_text("third")
        loop.wait_idle(10)
    finally:
        loop.close()
    users = [m.content for m in loop.conversation.history.messages if m.role == "user"]
    assert users == ["first", "third"]
    assert loop.records[0].interrupted


def test_a_speaker_that_hangs_is_reported_and_parley_listens_again(monkeypatch):
    import assistant.voice.speech_out as speech_out

    class HungSpeaker(MemorySpeaker):
        def wait(self, timeout=None):
            return False  # the device never finishes

    monkeypatch.setattr(speech_out, "STALL_MARGIN_S", 0.1)
    model = ScriptedChatModel()
    model.enqueue("Hello there.", "Second answer.")
    conversation = Conversation(model, builtin_tools())
    events: list = []
    loop = VoiceLoop(conversation, ScriptedSpeechToText(SCRIPT), ToneTextToSpeech(),
                     HungSpeaker(), Segmenter(), VoiceSettings(echo_tail_ms=0), events.append)
    try:
        loop.submit_text("hi")
        assert loop.wait_idle(10)
        loop.submit_text("again")
        assert loop.wait_idle(10)
    finally:
        loop.close()
    errors = [e.message for e in events if type(e).__name__ == "Error"]
    assert errors and "speaker stopped playing" in errors[0]
    assert [m.content for m in conversation.history.messages] == [
        "hi", "Hello there.", "again", "Second answer."]


def test_closing_waits_for_the_model_step_in_progress():
    """Leaving while the model is mid-step on the worker crashed the interpreter at exit:
    close() waits for the step, and says when it is still waiting."""
    import threading

    class SlowPrefill(ScriptedChatModel):
        def __init__(self):
            super().__init__()
            self.started, self.release = threading.Event(), threading.Event()
            self.finished = False

        def prefill(self, messages, tools, stop=None):
            self.started.set()
            self.release.wait(10)  # a prompt evaluation that cannot be interrupted
            self.finished = True
            return 0

    model = SlowPrefill()
    loop, *_ = make_loop(model)
    assert model.started.wait(5)
    assert loop.close(timeout=0.2) is False  # still in the model's step
    assert not model.finished
    threading.Timer(0.3, model.release.set).start()
    assert loop.close() is True
    assert model.finished


def test_a_spoken_question_whose_reply_is_cut_short_stays_in_the_conversation(tmp_path):
    """A spoken turn is answered ahead, on a copy of the conversation; stopping its reply
    must note what was heard in that copy, which then becomes the conversation (noting it
    in the conversation itself changed it, and the whole exchange was thrown away)."""
    model = ScriptedChatModel()
    model.enqueue(long_answer(6), "All right, I stopped.")
    report, loop, *_ = run_session(
        tmp_path, model,
        [{"audio": "hello.wav"}, {"audio": "stop.wav", "during_reply_ms": 1500}],
        {"hello.wav": clip(1.0, HELLO), "stop.wav": clip(0.8, STOP)},
        fast=False, realtime=True, barge_in=True)
    first, second = report["turns"]
    assert first["interrupted"] and second["heard"] == SCRIPT[STOP]
    messages = [(m["role"], m["content"]) for m in report["messages"]]
    assert [role for role, _ in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[0][1] == SCRIPT[HELLO] and "the user interrupted" in messages[1][1]
