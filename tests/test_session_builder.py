"""One session builder from typed settings: a front end is one module that calls it.

The tests build sessions from `Settings` alone (no command line), on stand-in engines, and
check what a front end relies on: the conversation answers, a timer that goes off is
announced by the voice loop built with it, a tool that asks first is asked through the
reply's own approval, the loop's settings follow the listening settings, and a
benchmark's engines loaded once and its own segmenter serve session after session.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from assistant.confirmation import YES, Confirmation
from assistant.events import ReplyDone, TimerFinished
from assistant.session import engines
from assistant.session.builder import chat_session, voice_session
from assistant.session.engines import Loaded
from assistant.session.settings import ListeningSettings, ModelSettings, Settings
from assistant.tools import Tool
from audio.memory_out import MemorySpeaker
from audio.segmenter import Segmenter, SegmenterSettings
from models.base import ToolSpec
from tests.support.clips import clip, silence
from tests.support.clocks import ManualClock
from tests.support.fakes import ScriptedChatModel, ScriptedSpeechToText, ToneTextToSpeech

SETTINGS = Settings(model=ModelSettings(no_local_intents=True),
                    listening=ListeningSettings(end_of_turn="silence", echo_tail_ms=0,
                                                live_transcript_s=0))


@pytest.fixture
def model(monkeypatch) -> ScriptedChatModel:
    """The language model every session built here gets, and stand-in speech engines."""
    scripted = ScriptedChatModel()
    monkeypatch.setattr(engines, "load_model", lambda chosen: scripted)
    monkeypatch.setattr(engines, "load_stt", lambda chosen: ScriptedSpeechToText({}))
    monkeypatch.setattr(engines, "load_tts", lambda chosen: ToneTextToSpeech(ms_per_char=1))
    return scripted


def tool_call(name: str, arguments: dict) -> str:
    """A reply that is a call of `name`, as the embedded model writes one."""
    return f'<tool_call>{json.dumps({"name": name, "arguments": arguments})}</tool_call>'


def no_warnings(line: str) -> None:
    raise AssertionError(f"warned: {line}")


def test_a_chat_session_from_settings_answers_and_keeps_the_conversation(model):
    model.enqueue("Hello, Sam.")
    with chat_session(SETTINGS, no_warnings) as session:
        done = session.conversation.reply("Hi, I am Sam.", lambda event: None)
        assert session.mcp is None  # no MCP servers configured
    assert isinstance(done, ReplyDone) and done.text == "Hello, Sam."
    assert [m.role for m in session.conversation.history.messages] == ["user", "assistant"]


def test_a_voice_session_answers_typed_text_aloud(model):
    model.enqueue("Hello there.")
    shown: list = []
    output = MemorySpeaker(realtime=False)
    with voice_session(SETTINGS, lambda far_end: output, no_warnings,
                       render=shown.append) as session:
        session.loop.submit_text("Hi.")
        assert session.loop.wait_idle(20)
        assert session.output is output
    assert [r.reply for r in session.loop.records] == ["Hello there."]
    assert output.chunks  # the reply was played


def test_a_timer_that_goes_off_is_announced_by_the_voice_loop_built_with_it(model):
    clock = ManualClock()
    shown: list = []
    with voice_session(SETTINGS, lambda far_end: MemorySpeaker(realtime=False),
                       no_warnings, clock=clock, render=shown.append,
                       adjust=lambda voice, _: replace(voice, ring_times=1)) as session:
        session.timers.start(60, "tea")
        clock.now += 61
        assert [t.name for t in session.timers.run_due()] == ["tea"]
        assert session.loop.wait_idle(20)
    finished = [e for e in shown if isinstance(e, TimerFinished)]
    assert [e.text for e in finished] == ["Your 1 minute tea timer is done."]


def test_the_loop_listens_as_the_listening_settings_say(model):
    listening = replace(SETTINGS.listening, barge_in=True, follow_up_s=2.5)
    with voice_session(replace(SETTINGS, listening=listening),
                       lambda far_end: MemorySpeaker(realtime=False), no_warnings) as session:
        voice = session.loop.settings
    assert (voice.barge_in, voice.follow_up_s) == (True, 2.5)


def test_a_tool_that_asks_first_is_asked_through_the_answer_the_session_gives(model):
    """Replay's way: the answers come from elsewhere, given to the builder; the question is
    still said aloud, in the reply, and the tool runs only after the yes."""
    deleted: list[str] = []
    asked: list[Confirmation] = []

    def question(arguments: dict) -> Confirmation:
        asked.append(Confirmation("notes__delete_note", "notes", "delete_note", arguments))
        return asked[-1]

    model.enqueue(tool_call("notes__delete_note", {"name": "a.txt"}), "Deleted it.")
    with voice_session(SETTINGS, lambda far_end: MemorySpeaker(realtime=False), no_warnings,
                       answered_by=lambda confirmation, asking: "yes") as session:
        session.tools.register(Tool(
            ToolSpec("notes__delete_note", "Delete a note.",
                     {"type": "object", "properties": {"name": {"type": "string"}}}),
            lambda arguments: deleted.append(arguments["name"]) or "Deleted a.txt.",
            lambda _: "Asking notes: delete_note", approval=question, source="notes"))
        session.loop.submit_text("Delete a.txt.")
        assert session.loop.wait_idle(20)
    assert deleted == ["a.txt"]
    assert [c.question for c in asked] == ["Shall I run delete note on notes, with name a.txt?"]
    assert session.loop.records[-1].reply == "Deleted it."


def test_without_anyone_to_answer_a_tool_that_asks_first_does_not_run(model):
    """A conversation replied to with no `approve` (nothing that can ask) refuses it."""
    ran: list[dict] = []
    model.enqueue(tool_call("notes__delete_note", {"name": "a.txt"}), "I could not.")
    with chat_session(SETTINGS, no_warnings) as session:
        session.tools.register(Tool(
            ToolSpec("notes__delete_note", "Delete a note.", {"type": "object"}),
            lambda arguments: ran.append(arguments) or "done",
            lambda _: "Asking notes: delete_note",
            approval=lambda arguments: Confirmation("notes__delete_note", "notes",
                                                    "delete_note", arguments)))
        session.conversation.reply("Delete a.txt.", lambda event: None)
        allowed = session.tools.call("notes__delete_note", {"name": "b.txt"},
                                     approve=lambda confirmation: YES)
    assert ran == [{"name": "b.txt"}]  # only the call given a yes
    assert not allowed.is_error
    tool_message = next(m for m in session.conversation.history.messages if m.role == "tool")
    assert tool_message.content.startswith("Error: no one can be asked here")


def test_engines_loaded_once_and_a_given_segmenter_serve_session_after_session(monkeypatch):
    """A benchmark's way: the engines are loaded once and each run is a fresh session on
    them; its segmenter (here one that ends a turn after 300 ms of silence, where the
    settings would wait 3 s) is the one that hears the user."""
    def loaded_again(chosen):
        raise AssertionError("an engine was loaded although one was given")

    for loader in ("load_model", "load_stt", "load_tts"):
        monkeypatch.setattr(engines, loader, loaded_again)
    model = ScriptedChatModel()
    stt = ScriptedSpeechToText({3000: "Hello there."})
    tts = ToneTextToSpeech(ms_per_char=1)
    patient = replace(SETTINGS, listening=replace(SETTINGS.listening, end_silence_ms=3000))
    for answer in ("Hello, first.", "Hello, second."):
        model.enqueue(answer)
        quick = Segmenter(SegmenterSettings(end_silence_ms=300))
        with voice_session(patient, lambda far_end: MemorySpeaker(realtime=False),
                           no_warnings, loaded=Loaded(model, stt, tts),
                           segmenter=quick) as session:
            # 0.4 s of silence ends the clip, 0.2 s more: 0.6 s in all, short of 3 s.
            session.loop.feed_audio(np.concatenate([clip(1.0, 3000), silence(0.2)]))
            assert session.loop.wait_idle(20)
        assert session.conversation.model is model and session.stt is stt
        assert [r.heard for r in session.loop.records] == ["Hello there."]
        assert [r.reply for r in session.loop.records] == [answer]
        assert tts.spoken[-1] == answer
    assert len(stt.heard) >= 2 and len(model.prompts) == 2


def test_a_chat_session_answers_with_the_model_it_is_given(monkeypatch):
    monkeypatch.setattr(engines, "load_model", lambda chosen: pytest.fail("loaded a model"))
    model = ScriptedChatModel()
    model.enqueue("Hi, Sam.")
    with chat_session(SETTINGS, no_warnings, loaded=Loaded(model)) as session:
        done = session.conversation.reply("Hi, I am Sam.", lambda event: None)
    assert isinstance(done, ReplyDone) and done.text == "Hi, Sam."
