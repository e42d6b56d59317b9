"""Asking aloud before a tool changes something: the question said and shown inside the
reply, the user's next turn (spoken or typed) the answer, the tool run on a clear yes only."""

from __future__ import annotations

import io
import json
import re
import sys
import time
from collections.abc import Callable

import numpy as np
import pexpect
import pytest

from assistant.cli.main import main
from assistant.confirmation import Confirmation, heard_answer
from assistant.conversation import Conversation, ReplySettings
from assistant.events import (
    ConfirmationAnswered,
    ConfirmationAsked,
    Heard,
    Interrupted,
    Spoken,
    TimerFinished,
    ToolCall,
)
from assistant.timers import Timer
from assistant.tools import Tool, builtin_tools
from assistant.voice.approval import CONFIRM_WAIT_S, AnsweredBy
from assistant.voice.loop import VoiceLoop
from assistant.voice.turns import TurnSource, VoiceSettings
from audio.memory_out import MemorySpeaker
from audio.segmenter import Segmenter
from audio.wakeword import WakeWordDetector
from models.base import ToolSpec
from tests.support.clips import RATE, clip, silence, speechlike
from tests.support.clocks import HUNG_S, MicrophoneClock, wait_until
from tests.support.fakes import ScriptedChatModel, ScriptedSpeechToText, ToneTextToSpeech
from tests.support.live_voice import (
    quit_cleanly,
    spawn_voice,
    wait_until_quiet,
    wait_until_speaking,
)
from tests.support.remote_model import USAGE, ScriptedServer, chunk, stream, text
from tests.support.sound_server import running_sound_server
from tests.support.spoken import spoken_clip
from tests.support.voice_command import stand_in_speech

YES, NO, UNSURE, ASK, MORE = 3000, 6000, 9000, 12000, 15000
"""The clips' peaks, which say what each says (`ScriptedSpeechToText`)."""
SCRIPT = {YES: "Yes, please.", NO: "No, leave it.", UNSURE: "What's the weather like?",
          ASK: "Delete my notes file.", MORE: "Actually, keep everything."}
QUESTION = "Shall I run delete note on notes, with name notes.txt?"
DELETE = ('<tool_call>{"name": "notes__delete_note", "arguments": {"name": "notes.txt"}}'
          '</tool_call>')


class NotesRoom:
    """A voice loop on stand-in engines with a notes tool that asks first, as an MCP
    server's tool does: the reply asks its question aloud before it runs."""

    def __init__(self, *replies: str, realtime: bool = False, echo_tail_ms: int = 0,
                 speculative_reply: bool = True, ms_per_char: float = 10.0,
                 barge_in: bool = False, wake_word: WakeWordDetector | None = None,
                 answered_by: AnsweredBy | None = None) -> None:
        self.clock = MicrophoneClock()
        self.model = ScriptedChatModel()
        self.model.enqueue(*replies)
        self.deleted: list[str] = []
        self.asked: list[Confirmation] = []
        tools = builtin_tools()
        tools.register(Tool(
            ToolSpec("notes__delete_note", "Delete a note.",
                     {"type": "object", "properties": {"name": {"type": "string"}},
                      "required": ["name"]}),
            self._delete, lambda _: "Asking notes: delete_note", approval=self._question,
            source="notes"))
        self.conversation = Conversation(self.model, tools, ReplySettings())
        self.stt = ScriptedSpeechToText(SCRIPT)
        self.tts = ToneTextToSpeech(ms_per_char)
        self.speaker = MemorySpeaker(realtime=realtime, clock=self.clock)
        self.shown: list = []
        self.loop = VoiceLoop(
            self.conversation, self.stt, self.tts, self.speaker, Segmenter(),
            VoiceSettings(echo_tail_ms=echo_tail_ms, speculative_reply=speculative_reply,
                          prefill=False, barge_in=barge_in),
            render=self.shown.append, clock=self.clock, wake_word=wake_word,
            answered_by=answered_by)

    def _question(self, arguments: dict) -> Confirmation:
        confirmation = Confirmation("notes__delete_note", "notes", "delete_note",
                                    dict(arguments))
        self.asked.append(confirmation)
        return confirmation

    def _delete(self, arguments: dict) -> str:
        self.deleted.append(arguments["name"])
        return f"Deleted {arguments['name']}."

    def say(self, pcm: np.ndarray) -> None:
        self.clock.feed(self.loop.feed_audio, pcm)

    def wait_for_the_question(self) -> None:
        wait_until(lambda: self.loop.replies.approval.waiting, "the question asked")

    def listen_until(self, condition: Callable[[], object], what: str) -> None:
        """Feed silence, a frame at a time, until `condition()` holds (a real-time speaker
        plays as the microphone's clock moves on)."""
        deadline = time.monotonic() + HUNG_S
        while not condition():
            assert time.monotonic() < deadline, f"never: {what}"
            self.say(silence(0.03))
            time.sleep(0.002)  # the reply's threads wait in real time too

    def finish(self) -> None:
        """Wait for every reply, then close the loop."""
        try:
            self.listen_until(lambda: self.loop.wait_idle(0.005), "the replies ended")
        finally:
            assert self.loop.close(HUNG_S)

    def of(self, kind: type) -> list:
        return [event for event in self.shown if isinstance(event, kind)]

    @property
    def answered(self) -> ConfirmationAnswered:
        [answered] = self.of(ConfirmationAnswered)
        return answered

    def tool_result(self) -> str:
        [message] = [m for m in self.conversation.history.messages if m.role == "tool"]
        return message.content


def answered_by_voice(pcm: np.ndarray, *replies: str, barge_in: bool = False) -> NotesRoom:
    """A typed request to delete the notes file, answered by `pcm` said after the question."""
    room = NotesRoom(DELETE, *replies, barge_in=barge_in)
    room.loop.submit_text("Delete my notes file.")
    room.wait_for_the_question()
    room.say(np.concatenate([pcm, silence(1.5)]))
    room.finish()
    return room


def test_a_spoken_yes_runs_the_tool_and_the_reply_says_its_result():
    room = answered_by_voice(clip(0.6, YES), "Done: notes.txt is deleted.")
    assert room.deleted == ["notes.txt"]
    assert room.tool_result() == "Deleted notes.txt."
    # The question was said aloud, inside the reply, before the rest of it.
    assert room.tts.spoken == [QUESTION, "Done: notes.txt is deleted."]
    assert [e.question for e in room.of(ConfirmationAsked)] == [QUESTION]
    assert (room.answered.allowed, room.answered.outcome, room.answered.answer) == (
        True, "yes", SCRIPT[YES])
    # The answer is shown as heard, and is not a turn answered on its own.
    assert [e.text for e in room.of(Heard)] == [SCRIPT[YES]]
    request, answer = room.loop.records
    assert request.reply == "Done: notes.txt is deleted."
    assert (answer.heard, answer.reply) == (SCRIPT[YES], "")
    assert [m.content for m in room.conversation.history.messages if m.role == "user"] == [
        "Delete my notes file."]
    spoken = [e.event.text for e in request.events if isinstance(e.event, Spoken)]
    assert spoken == [QUESTION, "Done: notes.txt is deleted."]
    kinds = [e.event.event_type for e in request.events]
    assert kinds.index("tool-call") < kinds.index("confirm-asked") < kinds.index(
        "confirm-answered") < kinds.index("tool-result")


def test_with_barge_in_the_answer_does_not_stop_the_reply_that_asked():
    room = answered_by_voice(clip(0.6, YES), "Deleted.", barge_in=True)
    assert room.deleted == ["notes.txt"]
    assert room.of(Interrupted) == []
    assert room.loop.records[0].reply == "Deleted."
    assert not room.loop.records[0].interrupted


def test_with_a_wake_word_the_answer_needs_none():
    room = NotesRoom(DELETE, "Deleted.", wake_word=WakeWordDetector("okay_nabu"))
    room.loop.submit_text("Delete my notes file.")  # typed: no wake word, no window open
    room.wait_for_the_question()
    room.say(np.concatenate([clip(0.6, YES), silence(1.5)]))
    room.finish()
    assert room.deleted == ["notes.txt"]
    assert room.answered.answer == SCRIPT[YES]


def test_a_spoken_no_leaves_the_tool_unrun_and_the_reply_goes_on():
    room = answered_by_voice(clip(0.6, NO), "Alright, I left it.")
    assert room.deleted == []
    assert (room.answered.allowed, room.answered.outcome) == (False, "no")
    assert room.tool_result().startswith(
        f"Error: the user said no (they said: “{SCRIPT[NO]}”): delete_note was not run")
    # The model read that, and its reply was spoken.
    assert "delete_note was not run" in room.model.prompts[-1][-1].content
    assert room.loop.records[0].reply == "Alright, I left it."
    assert room.tts.spoken[-1] == "Alright, I left it."


def test_an_answer_that_is_neither_yes_nor_no_is_not_a_yes_and_its_words_reach_the_model():
    room = answered_by_voice(clip(0.8, UNSURE), "I did not delete it. It is sunny.")
    assert room.deleted == []
    assert (room.answered.outcome, room.answered.answer) == ("unclear", SCRIPT[UNSURE])
    assert [e.text for e in room.of(Heard)] == [SCRIPT[UNSURE]]
    assert f"the user did not say yes (they said: “{SCRIPT[UNSURE]}”)" in room.tool_result()
    assert len(room.model.prompts) == 2  # not answered again as a turn of its own


def test_silence_until_the_wait_ends_is_a_no():
    room = NotesRoom(DELETE, "I did not hear a yes, so I left it.")
    room.loop.submit_text("Delete my notes file.")
    room.wait_for_the_question()
    room.say(silence(CONFIRM_WAIT_S - 1.0))
    assert room.loop.replies.approval.waiting  # the microphone's clock has not got there
    room.say(silence(1.5))
    room.finish()
    assert room.deleted == []
    assert (room.answered.outcome, room.answered.answer) == ("no-answer", "")
    assert room.tool_result().startswith("Error: the user did not answer:")
    assert room.loop.records[0].reply == "I did not hear a yes, so I left it."


def test_a_typed_yes_answers_the_question():
    room = NotesRoom(DELETE, "Deleted.")
    room.loop.submit_text("Delete my notes file.")
    room.wait_for_the_question()
    room.loop.submit_text("yes")
    room.finish()
    assert room.deleted == ["notes.txt"]
    assert (room.answered.outcome, room.answered.answer) == ("yes", "yes")
    assert [r.heard for r in room.loop.records] == ["Delete my notes file.", "yes"]


def test_stopping_the_reply_while_it_waits_is_a_no():
    room = NotesRoom(DELETE)
    room.loop.submit_text("Delete my notes file.")
    room.wait_for_the_question()
    room.loop.interrupt()  # Ctrl-C, /clear
    room.finish()
    assert room.deleted == []
    assert room.answered.outcome == "stopped"
    assert len(room.model.prompts) == 1  # the stopped reply went no further


def test_an_answer_from_elsewhere_follows_the_question_said_aloud():
    """Replay answers from its session file, not the microphone: the question is still
    said and shown, and the answer it gives decides."""
    room = NotesRoom(DELETE, "Deleted.", answered_by=lambda confirmation, asking: "Sure.")
    room.loop.submit_text("Delete my notes file.")
    room.finish()
    assert room.deleted == ["notes.txt"]
    assert room.tts.spoken == [QUESTION, "Deleted."]
    assert (room.answered.outcome, room.answered.answer) == ("yes", "Sure.")
    assert [r.heard for r in room.loop.records] == ["Delete my notes file."]


def test_a_timer_going_off_during_the_question_rings_after_the_reply():
    room = NotesRoom(DELETE, "Deleted.")
    room.loop.submit_text("Delete my notes file.")
    room.wait_for_the_question()
    room.loop.ring(Timer(1, 60, "tea"))
    room.loop.submit_text("yes")
    room.finish()
    assert room.deleted == ["notes.txt"]
    assert [r.source for r in room.loop.records] == [TurnSource.TEXT, TurnSource.TIMER,
                                                  TurnSource.TEXT]
    kinds = [type(e) for e in room.shown]
    assert kinds.index(ConfirmationAnswered) < kinds.index(TimerFinished)


def test_a_spoken_request_answered_ahead_asks_once_it_is_committed():
    room = NotesRoom(DELETE, "Deleted.")
    # The tool asks once the user can no longer go on with their turn (its first moments).
    room.say(np.concatenate([silence(0.3), speechlike(1.0, ASK), silence(2.5)]))
    room.wait_for_the_question()
    room.say(np.concatenate([clip(0.6, YES), silence(1.5)]))
    room.finish()
    assert room.deleted == ["notes.txt"]
    assert [r.heard for r in room.loop.records] == [SCRIPT[ASK], SCRIPT[YES]]
    assert room.loop.records[0].reply == "Deleted."


def test_a_reply_answered_ahead_and_dropped_never_asks_nor_runs_the_tool():
    room = NotesRoom(DELETE)
    room.say(np.concatenate([silence(0.3), speechlike(1.0, ASK), silence(0.4)]))
    # The pause's words were answered ahead up to the tool, which waits for the turn.
    wait_until(lambda: (speculation := room.loop.log.speculating) is not None
               and any(isinstance(e, ToolCall) for e in speculation.held_events),
               "the delete tool called ahead")
    room.say(np.concatenate([speechlike(1.0, MORE), silence(1.5)]))  # the user goes on
    room.finish()
    assert room.asked == [] and room.deleted == []
    assert room.of(ConfirmationAsked) == [] and QUESTION not in room.tts.spoken
    assert [r.heard for r in room.loop.records] == [SCRIPT[MORE]]


@pytest.mark.parametrize("echo_tail_ms", [0, 300])
def test_half_duplex_the_answer_is_heard_once_the_question_has_played(echo_tail_ms):
    """Speech over the question is not heard (Parley does not listen to itself); the
    answer after it, and its echo tail, is."""
    room = NotesRoom(DELETE, "Deleted.", realtime=True, echo_tail_ms=echo_tail_ms,
                     ms_per_char=50.0)
    room.loop.submit_text("Delete my notes file.")
    wait_until(lambda: room.speaker.speaking, "the question playing")
    question_s = len(QUESTION) * 0.05
    over = np.concatenate([silence(0.2), speechlike(1.0, NO), silence(0.8)])
    assert len(over) / RATE < question_s
    room.say(over)  # said over the question: never heard
    room.listen_until(lambda: room.loop.replies.approval.waiting, "listening for the answer")
    room.say(np.concatenate([clip(0.6, YES), silence(1.5)]))
    room.finish()
    assert room.deleted == ["notes.txt"]
    assert room.answered.answer == SCRIPT[YES]
    assert len(room.stt.heard) == 1  # the yes alone reached speech-to-text
    played = sum(len(pcm) for pcm, _ in room.speaker.chunks) / RATE
    assert played == pytest.approx(question_s + len("Deleted.") * 0.05, abs=0.01)


NOTES_SERVER = '''
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

folder = Path(sys.argv[1])
server = MCPServer("notes")


@server.tool()
def delete_note(name: str) -> str:
    """Delete a note."""
    (folder / name).unlink()
    return f"Deleted {name}."


server.run()
'''


class TypedAfter:
    """Lines typed into `parley voice`, each once its condition holds; then Ctrl-D."""

    def __init__(self, steps: list[tuple[Callable[[], object], str]]) -> None:
        self.steps = list(steps)

    def readline(self) -> str:
        if not self.steps:
            return ""
        ready, line = self.steps.pop(0)
        wait_until(ready, f"ready to type {line!r}")
        return line + "\n"

    def isatty(self) -> bool:
        return False


def test_parley_voice_asks_aloud_before_an_mcp_tool_changes_something(
        voice, monkeypatch, tmp_path, capsys):
    stand_in_speech(monkeypatch)
    (tmp_path / "notes.txt").write_text("milk")
    (tmp_path / "server.py").write_text(NOTES_SERVER)
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"notes": {
        "command": sys.executable, "args": [str(tmp_path / "server.py"), str(tmp_path)]}}}))
    voice.model.enqueue(DELETE, "Deleted.")

    def loop() -> VoiceLoop | None:
        return voice.loops[0] if voice.loops else None

    monkeypatch.setattr(sys, "stdin", TypedAfter([
        (lambda: loop() and "notes__delete_note" in loop().conversation.tools.names(),
         "Delete my notes file."),
        (lambda: loop().replies.approval.waiting, "yes"),
        (lambda: loop().wait_idle(0.01), "/tools"),
    ]))
    assert main(["voice", "--mcp", str(servers)]) == 0
    assert not (tmp_path / "notes.txt").exists()
    shown = capsys.readouterr().out
    assert f"? {QUESTION} (say or type yes or no)" in shown
    assert "· Yes: running it." in shown
    assert "notes__delete_note" in shown and "asks first" in shown  # /tools
    # The server's result reached the model, whose reply was spoken.
    assert "Deleted notes.txt." in [m.content for m in voice.model.prompts[-1]]
    assert voice.loop.tts.spoken[-1] == "Deleted."


class DeletesThenSays(ScriptedServer):
    """A language model on loopback that calls the notes tool, then, once it has read the
    tool's result, says so."""

    def answer_for(self, path, headers, body):
        if path != "/v1/chat/completions":
            return super().answer_for(path, headers, body)
        if body["messages"][-1]["role"] == "tool":
            return stream(text("Done, I deleted it."))
        return stream([
            chunk({"role": "assistant", "content": "", "tool_calls": [{
                "id": "call_1", "index": 0, "type": "function", "function": {
                    "name": "notes__delete_note", "arguments": '{"name": "notes.txt"}'}}]}),
            chunk({"role": "assistant", "content": ""}, finish="tool_calls"), USAGE])


@pytest.mark.real
def test_a_spoken_yes_through_a_real_sound_server_answers_the_question(tmp_path):
    """Parley asks through the speaker; a Piper-spoken "yes" into the microphone, heard by
    the real speech-to-text once the question has played, runs the MCP server's tool."""
    from models.piper_tts import PiperTextToSpeech

    notes = tmp_path / "notes.txt"
    notes.write_text("milk")
    (tmp_path / "server.py").write_text(NOTES_SERVER)
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"notes": {
        "command": sys.executable, "args": [str(tmp_path / "server.py"), str(tmp_path)]}}}))
    yes = spoken_clip(PiperTextToSpeech(), "Yes.")
    with running_sound_server() as server, DeletesThenSays() as model:
        child = spawn_voice(server, "--llm-url", model.url, "--no-local-intents",
                            "--mcp", str(servers))
        try:
            child.logfile_read = log = io.StringIO()
            for _ in range(30):  # the server's tools join once it has started
                child.sendline("/tools")
                if child.expect(["notes__delete_note", pexpect.TIMEOUT], timeout=2) == 0:
                    break
            recording = server.record_monitor()
            child.sendline("Delete my notes file.")
            child.expect(re.escape(f"? {QUESTION}"))
            wait_until_speaking(recording)  # the question, aloud
            wait_until_quiet(recording)  # …to its end: the microphone is heard from now
            assert notes.exists()
            server.feed(yes)
            child.expect(r"you: ([^\r\n]+)", timeout=60)
            assert heard_answer(child.match.group(1)), child.match.group(1)
            child.expect("Yes: running it")
            child.expect("Done, I deleted it")
            quit_cleanly(child)
        finally:
            child.close(force=True)
    assert not notes.exists(), log.getvalue()[-2000:]
