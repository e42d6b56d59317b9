"""`parley web`'s voice over the WebSocket, as the page (or a script) uses it: a real
uvicorn server on the voice loop, with stand-in engines (speech-to-text that hears what the
test scripted for each clip's loudness, a voice that speaks tones) and a scripted model.

What a user relies on: with Hands-free on, what they say is heard, shown as their message
and answered, and the reply's audio comes back as it is spoken; Stop, or speaking over the
reply, silences it; Push to talk hears what is said while it is held; with Hands-free off
and nothing held, the microphone is not listened to; typed chat works alongside, and a
message typed during a reply is answered after it; when the speech engines cannot load,
that is one line and the page is typed chat.
"""

from __future__ import annotations

import struct
import time

import numpy as np
import pytest

from assistant.errors import ModelError
from assistant.session import engines
from assistant.session.settings import ListeningSettings, ModelSettings, Settings
from tests.support import espeak
from tests.support.clips import RATE, clip, silence, speechlike
from tests.support.clocks import wait_until
from tests.support.fakes import ScriptedChatModel, ScriptedSpeechToText, ToneTextToSpeech
from tests.support.web import Tab, asking_tool, scripted_model, tool_call, web_server

QUESTION, OVER, FOLLOW_UP = 8000, 14000, 11000
"""The loudness of the clips the stand-in speech-to-text hears as these words."""
SCRIPT = {QUESTION: "What is the capital of France?", OVER: "Wait, stop."}
SETTINGS = Settings(model=ModelSettings(no_local_intents=True),
                    listening=ListeningSettings(end_of_turn="silence"))
LONG_ANSWER = ("Once upon a time a fox lived by the river. Every morning she walked to the "
               "old mill to watch the boats. One day a heron asked her where the water went. "
               "She did not know, so they followed it together all the way to the sea.")
"""Spoken at 50 ms a character, 10 s a sentence: a reply still being spoken when stopped."""
FRAME = 480
"""Samples a frame, 30 ms, as the page's worklet sends them."""


@pytest.fixture
def model(monkeypatch) -> ScriptedChatModel:
    return scripted_model(monkeypatch)


def speak(tab: Tab, pcm: np.ndarray) -> None:
    """Send `pcm` as a microphone does: 30 ms frames, in real time."""
    started = time.monotonic()
    for n, start in enumerate(range(0, len(pcm), FRAME)):
        tab.send(pcm[start:start + FRAME].astype("<i2").tobytes())
        time.sleep(max(0.0, started + (n + 1) * FRAME / RATE - time.monotonic()))


def states(tab: Tab) -> list[str]:
    return [m["state"] for m in tab.seen if m["type"] == "state"]


def until_state(tab: Tab, state: str, after: str | None = None) -> list[dict]:
    """The messages until the state is `state` (after it was `after`, if given)."""
    def done(message: dict) -> bool:
        return message == {"type": "state", "state": state} and (
            after is None or after in states(tab)[:-1])
    return tab.until(done)


def audio_seconds(tab: Tab) -> float:
    """Seconds of reply audio the tab was sent; every frame says its rate first."""
    total = 0.0
    for frame in tab.audio:
        (rate,) = struct.unpack("<I", frame[:4])
        assert rate == ToneTextToSpeech.sample_rate
        total += (len(frame) - 4) / 2 / rate
    return total


def test_speech_is_heard_shown_answered_and_its_audio_streamed_back(model):
    model.enqueue("Paris is the capital of France.")
    stt, tts = ScriptedSpeechToText(SCRIPT), ToneTextToSpeech(ms_per_char=20)
    # Voice's own settings (in a config file, say) are not the page's: it listens hands-free.
    for_voice = ListeningSettings(end_of_turn="silence", push_to_talk=True, echo_cancel=True)
    settings = Settings(model=ModelSettings(no_local_intents=True), listening=for_voice)
    with web_server(settings, (stt, tts)) as server:
        tab = server.tab()
        assert tab.next()["voice"] is True
        tab.send({"type": "hands-free", "on": True})
        speak(tab, np.concatenate([clip(1.2, QUESTION), silence(1.0)]))
        got = until_state(tab, "listening", after="speaking")
        heard = next(m for m in got if m["type"] == "heard")
        assert heard["text"] == "What is the capital of France?"
        user = next(m for m in got if m["type"] == "message")
        assert (user["seq"], user["role"], user["text"]) == (
            1, "user", "What is the capital of France?")
        done = next(m for m in got if m["type"] == "reply-done")
        assert done["text"] == "Paris is the capital of France." and not done["cancelled"]
        spoken = [m for m in got if m["type"] == "spoken"]
        assert [m["text"] for m in spoken] == ["Paris is the capital of France."]
        # The whole reply's audio, as long as the voice made it.
        assert audio_seconds(tab) == pytest.approx(spoken[0]["seconds"], abs=0.01)
        assert tts.spoken == ["Paris is the capital of France."]
        seen = states(tab)
        assert seen.index("listening") < seen.index("thinking") < seen.index("speaking")
        api = server.conversation()["messages"]
        assert [(m["role"], m["text"]) for m in api] == [
            ("user", "What is the capital of France?"),
            ("assistant", "Paris is the capital of France.")]
        assert server.tab().next()["live"] == []  # that turn is over: a new tab has it all


def test_stop_while_speaking_silences_the_reply_at_once(model):
    model.enqueue(LONG_ANSWER)
    tts = ToneTextToSpeech(ms_per_char=50)  # about 2 s a sentence
    with web_server(SETTINGS, (ScriptedSpeechToText(SCRIPT), tts)) as server:
        tab = server.tab()
        tab.next()
        tab.send({"type": "text", "text": "Tell me a long story."})
        until_state(tab, "speaking")
        # Stopped once some of it was heard: a stop that came within 5 ms of the first
        # audio was heard as 0.0 s (spoken_seconds is rounded to 10 ms).
        wait_until(lambda: server.room.speaker.played_seconds > 0.1,
                   "a tenth of a second of the reply played")
        tab.send({"type": "stop"})
        stopped = until_state(tab, "idle")
        assert {"type": "audio-stop"} in stopped
        interrupted = next(m for m in stopped if m["type"] == "interrupted")
        assert 0 < interrupted["spoken_seconds"] < 5
        assert LONG_ANSWER.startswith(interrupted["heard_text"])
        assert audio_seconds(tab) < len(LONG_ANSWER) * 0.05  # not all of it was sent
        # The reply is kept noting what was heard of it, and the tab shows it so.
        kept = server.conversation()["messages"][-1]["text"]
        assert "[Spoken aloud; the user interrupted" in kept
        shown = [m["text"] for m in tab.seen if m["type"] == "message" and m["seq"] == 2]
        assert shown[-1] == kept


def test_text_typed_while_parley_speaks_is_answered_after_the_reply(model):
    """As a line typed in `parley voice`: it waits its turn, with no error; it joins the
    conversation (and the tabs see it) once the reply before it is done."""
    model.enqueue("Paris is the capital of France.", "Lyon is the second city.")
    tts = ToneTextToSpeech(ms_per_char=60)  # about 2 s of reply to type over
    with web_server(SETTINGS, (ScriptedSpeechToText({}), tts)) as server:
        tab = server.tab()
        tab.next()
        tab.send({"type": "text", "text": "What is the capital of France?"})
        until_state(tab, "speaking")
        tab.send({"type": "text", "text": "And the second city?"})
        got = until_state(tab, "idle", after="speaking")
        assert [m for m in tab.seen if m["type"] == "error"] == []
        assert [m["text"] for m in tab.seen if m["type"] == "reply-done"] == [
            "Paris is the capital of France.", "Lyon is the second city."]
        seen = states(tab)
        assert seen[-1] == "idle" and "idle" not in seen[:-1]  # one answer after the other
        first_done = next(n for n, m in enumerate(tab.seen) if m["type"] == "reply-done")
        typed = next(n for n, m in enumerate(tab.seen)
                     if m["type"] == "message" and m["text"] == "And the second city?")
        assert first_done < typed and tab.seen[typed]["seq"] == 3
        assert tts.spoken == ["Paris is the capital of France.", "Lyon is the second city."]
        assert got[-1] == {"type": "state", "state": "idle"}
        api = server.conversation()["messages"]
        assert [(m["role"], m["text"]) for m in api] == [
            ("user", "What is the capital of France?"),
            ("assistant", "Paris is the capital of France."),
            ("user", "And the second city?"), ("assistant", "Lyon is the second city.")]


def test_speaking_over_the_reply_stops_it_and_is_heard(model):
    model.enqueue(LONG_ANSWER, "All right, stopping.")
    tts = ToneTextToSpeech(ms_per_char=50)
    with web_server(SETTINGS, (ScriptedSpeechToText(SCRIPT), tts)) as server:
        tab = server.tab()
        tab.next()
        tab.send({"type": "hands-free", "on": True})
        tab.send({"type": "text", "text": "Tell me a long story."})
        until_state(tab, "speaking")
        speak(tab, np.concatenate([speechlike(1.2, OVER), silence(1.0)]))
        got = tab.until(lambda m: m["type"] == "heard" and m["text"] == "Wait, stop.")
        assert {"type": "audio-stop"} in got, [m["type"] for m in got]
        interrupted = next(m for m in got if m["type"] == "interrupted")
        assert 0 < interrupted["spoken_seconds"] < 10
        until_state(tab, "listening", after="speaking")
        users = [m["text"] for m in server.conversation()["messages"] if m["role"] == "user"]
        assert users == ["Tell me a long story.", "Wait, stop."]


def test_push_to_talk_hears_what_is_said_while_it_is_held(model):
    model.enqueue("Paris.")
    stt = ScriptedSpeechToText(SCRIPT)
    with web_server(SETTINGS, (stt, ToneTextToSpeech(ms_per_char=5))) as server:
        tab = server.tab()
        tab.next()
        tab.send({"type": "talk", "pressed": True})
        # Released while the words still come: the turn ends there, without the silence.
        speak(tab, np.concatenate([silence(0.3), speechlike(1.2, QUESTION)]))
        tab.send({"type": "talk", "pressed": False})
        got = until_state(tab, "idle", after="speaking")
        assert "listening" in states(tab)
        assert next(m for m in got if m["type"] == "heard")["text"] == SCRIPT[QUESTION]
        assert next(m for m in got if m["type"] == "reply-done")["text"] == "Paris."



def test_a_tools_question_is_answered_by_a_spoken_yes(model):
    """Asked aloud before a tool changes something, the user's spoken yes runs it (as in
    `parley voice`); the page shows the question and the answer as their events."""
    yes = 12000
    model.enqueue(tool_call("notes__delete_note", {"name": "a.txt"}), "Deleted it.")
    ran: list[dict] = []
    stt = ScriptedSpeechToText({QUESTION: "Delete a.txt.", yes: "Yes."})
    with web_server(SETTINGS, (stt, ToneTextToSpeech(ms_per_char=5))) as server:
        server.room.conversation.tools.register(asking_tool(ran))
        tab = server.tab()
        tab.next()
        tab.send({"type": "hands-free", "on": True})
        speak(tab, np.concatenate([clip(1.0, QUESTION), silence(1.0)]))
        asked = tab.until_type("confirm-asked")[-1]
        assert asked["question"] == "Shall I run delete note on notes, with name a.txt?"
        speak(tab, np.concatenate([silence(1.0), clip(0.6, yes), silence(1.0)]))
        answered = tab.until_type("confirm-answered")[-1]
        assert (answered["allowed"], answered["outcome"], answered["answer"]) == (
            True, "yes", "Yes.")
        done = tab.until_type("reply-done")[-1]
        assert done["text"] == "Deleted it."
    assert ran == [{"name": "a.txt"}]



def test_a_ringing_timer_is_heard_in_the_page(model):
    """A timer that goes off rings in the page's speaker (the chime and the announcement),
    not only on screen."""
    settings = Settings(listening=ListeningSettings(end_of_turn="silence"))
    with web_server(settings, (ScriptedSpeechToText({}), ToneTextToSpeech(ms_per_char=5))) \
            as server:
        tab = server.tab()
        tab.next()
        tab.send({"type": "text", "text": "Set a timer for 1 second."})
        assert "timer" in tab.until_type("reply-done")[-1]["text"]
        finished = tab.until_type("timer-finished")[-1]
        assert finished["seconds"] == 1
        before = len(tab.audio)
        got = until_state(tab, "idle", after="speaking")
        assert [m["text"] for m in got if m["type"] == "spoken"][-1] == finished["text"]
        assert len(tab.audio) > before  # its sound came to the page


def test_with_hands_free_off_and_nothing_held_the_microphone_is_not_heard(model):
    model.enqueue("Typed and answered.")
    stt = ScriptedSpeechToText(SCRIPT)
    with web_server(SETTINGS, (stt, ToneTextToSpeech(ms_per_char=5))) as server:
        tab = server.tab()
        tab.next()
        tab.send({"type": "hands-free", "on": True})
        tab.send({"type": "hands-free", "on": False})
        speak(tab, np.concatenate([clip(1.2, QUESTION), silence(1.0)]))
        tab.send({"type": "text", "text": "Are you there?"})
        got = until_state(tab, "idle", after="thinking")
        assert next(m for m in got if m["type"] == "reply-done")["text"] == \
            "Typed and answered."
        assert [m for m in tab.seen if m["type"] in ("heard", "heard-partial")] == []
        assert stt.heard == []
        assert "listening" not in states(tab)


def test_the_wake_word_and_the_follow_up_window_work_as_in_voice(model):
    if espeak.missing_reason():
        pytest.skip(espeak.missing_reason())
    said = espeak.espeak("Okay Nabu").astype(np.float64)
    okay_nabu = (said * (2000 / np.abs(said).max())).astype(np.int16)  # quieter than the rest
    model.enqueue("Paris.", "Lyon.")
    stt = ScriptedSpeechToText(SCRIPT | {FOLLOW_UP: "And the second city?"})
    listening = ListeningSettings(end_of_turn="silence", wake_word="okay_nabu", follow_up_s=4)
    settings = Settings(model=ModelSettings(no_local_intents=True), listening=listening)
    with web_server(settings, (stt, ToneTextToSpeech(ms_per_char=5))) as server:
        tab = server.tab()
        tab.next()
        tab.send({"type": "hands-free", "on": True})
        speak(tab, np.concatenate([speechlike(1.2, QUESTION), silence(1.0)]))
        assert stt.heard == []  # no wake word: nothing was listened to
        speak(tab, np.concatenate([okay_nabu, silence(0.1), speechlike(1.2, QUESTION),
                                   silence(1.0)]))
        got = until_state(tab, "listening", after="speaking")
        assert [m["word"] for m in got if m["type"] == "wake"] == ["okay_nabu"]
        assert tab.audio  # the chime, then the reply
        speak(tab, np.concatenate([silence(0.5), speechlike(1.2, FOLLOW_UP), silence(1.0)]))
        tab.until(lambda m: m["type"] == "reply-done" and m["text"] == "Lyon.")
    users = [m.content for m in server.room.conversation.history.messages if m.role == "user"]
    assert users == [SCRIPT[QUESTION], "And the second city?"]


def test_a_bad_voice_message_gets_a_clear_error(model):
    with web_server(SETTINGS) as server:
        tab = server.tab()
        tab.next()
        for bad, said in (({"type": "hands-free"}, '"on": true or false'),
                          ({"type": "talk", "pressed": "yes"}, '"pressed": true or false'),
                          (b"\x01\x02\x03", "odd number of bytes")):
            tab.send(bad)
            error = tab.until_type("error")[-1]
            assert error["stage"] == "request" and said in error["message"]


def test_without_speech_engines_it_says_so_once_and_is_typed_chat(model, monkeypatch):
    def cannot_load(chosen):
        raise ModelError("the Whisper model is missing: pass --stt-model")

    monkeypatch.setattr(engines, "load_stt", cannot_load)
    model.enqueue("Typed and answered.")
    warned: list[str] = []
    with web_server(SETTINGS, None, warned.append) as server:
        tab = server.tab()
        joined = tab.next()
        assert joined["voice"] is False
        assert "the Whisper model is missing" in joined["voice_off"]
        tab.send({"type": "hands-free", "on": True})
        error = tab.until_type("error")[-1]
        assert error["message"].startswith("Voice is off: the speech engines could not load")
        tab.send(silence(0.1).tobytes())
        assert tab.until_type("error")[-1]["message"] == error["message"]
        tab.send({"type": "text", "text": "Are you there?"})
        got = tab.until(lambda m: m == {"type": "state", "state": "idle"})
        assert next(m for m in got if m["type"] == "reply-done")["text"] == \
            "Typed and answered."
    assert warned == ["Voice is off: the speech engines could not load (the Whisper model "
                      "is missing: pass --stt-model). The page works as typed chat."]
