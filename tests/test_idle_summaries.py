"""The summary written between turns: no reply waits for it, and the next turn stops it."""

from __future__ import annotations

import io
import json
from collections.abc import Callable

import numpy as np
from rich.console import Console

from assistant.cli.chat import ChatSession
from assistant.conversation import Conversation, ReplySettings
from assistant.events import (
    ReplyDone,
    Summarized,
    SummaryCancelled,
    SummaryFailed,
    SummaryStarted,
)
from assistant.tools import builtin_tools
from assistant.voice.loop import VoiceLoop
from assistant.voice.replay import load_session, replay, session_json
from assistant.voice.turns import VoiceSettings
from assistant.workers import Worker
from audio.files import write_wav
from audio.memory_out import MemorySpeaker
from audio.segmenter import Segmenter
from memory.summary import RunningSummary
from models.base import CancelToken, PromptMessage
from tests.support.clips import speechlike
from tests.support.clocks import HUNG_S, wait_until
from tests.support.conversations import chat, filler, idle_conversation
from tests.support.fakes import (
    HeldSummaries,
    ScriptedSpeechToText,
    SummarizingModel,
    ToneTextToSpeech,
)

RATE = 16000
HELLO = 4000
SUMMARY_EVENTS = (SummaryStarted, Summarized, SummaryFailed, SummaryCancelled)


def kinds(events: list) -> list[type]:
    return [type(e) for e in events if isinstance(e, SUMMARY_EVENTS)]


def prompt_for(model: HeldSummaries, question: str) -> list[PromptMessage]:
    return next(p for p in model.prompts if p[-1].content.startswith(question.strip()))


# -- the conversation ----------------------------------------------------------------------

def test_the_summary_is_written_between_turns_before_a_reply_would_need_it():
    inline_model = SummarizingModel(2048)
    inline = Conversation(inline_model, builtin_tools(), ReplySettings(answer_tokens=256))
    ahead, model = idle_conversation()
    written_at = needed_at = None
    for n in range(4):
        if kinds(chat(inline, inline_model, filler(n))) and needed_at is None:
            needed_at = n  # the reply to message n would summarize inside itself
        replied = chat(ahead, model, filler(n))
        assert kinds(replied) == []  # never inside a reply
        between: list = []
        assert ahead.summarize_ahead(between.append, CancelToken())
        if kinds(between) and written_at is None:
            written_at = n
            assert kinds(between) == [SummaryStarted, Summarized]
            assert between[-1].covered_through == ahead.summary.covered_through >= 2
    # Written in the silence after reply `written_at`: before the reply that needs it.
    assert needed_at is not None and written_at is not None and written_at < needed_at
    assert "Earlier in this conversation" in model.prompts[-1][0].content


def test_a_reply_while_the_summary_is_written_stops_it_and_goes_first_with_the_old_one():
    conversation, model = idle_conversation(hold=1)
    chat(conversation, model, filler(0), filler(1), filler(2))  # no silence between them
    between: list = []
    cancel = CancelToken()
    worker = Worker(lambda: between.append(conversation.summarize_ahead(between.append,
                                                                        cancel)), "idle")
    wait_until(model.held.is_set, "the summary began")
    cancel.cancel()  # the user spoke or typed
    assert worker.wait(HUNG_S)
    assert between == [SummaryStarted(), SummaryCancelled(), False]
    assert conversation.summary == RunningSummary()  # nothing half-written
    assert model.asides == [True]  # the prompt prepared for the reply was kept aside
    # The reply goes on with the old summary (none) and the core's dropping.
    replied = chat(conversation, model, filler(3))
    assert kinds(replied) == [] and isinstance(replied[-1], ReplyDone)
    prompt = prompt_for(model, filler(3)[0])
    assert "Earlier in this conversation" not in prompt[0].content
    assert all(m.content != filler(0)[0].strip() for m in prompt)  # dropped, as before
    # The next silence tries again, and the reply after it reads the summary.
    between = []
    assert conversation.summarize_ahead(between.append, CancelToken())
    assert kinds(between) == [SummaryStarted, Summarized]
    assert between[-1].covered_through >= 6  # from message #1: nothing was skipped
    chat(conversation, model, filler(4))
    prompt = prompt_for(model, filler(4)[0])
    assert "Earlier in this conversation (messages #1–" in prompt[0].content


# -- text chat -----------------------------------------------------------------------------

class TypedConsole(Console):
    """A terminal on which the user types `lines`, each once `before(number)` returns."""

    def __init__(self, lines: list[str], before: Callable[[int], None]) -> None:
        super().__init__(file=io.StringIO(), highlight=False, markup=False, width=200)
        self.lines = lines
        self.before = before
        self.typed = 0

    def input(self, prompt="", **kwargs) -> str:
        if self.typed == len(self.lines):
            raise EOFError
        self.before(self.typed)
        self.typed += 1
        return self.lines[self.typed - 1]


def test_chat_at_a_terminal_writes_the_summary_while_the_user_types():
    conversation, model = idle_conversation(hold=1)
    model.enqueue(*(filler(n)[1] for n in range(4)))

    def before(number: int) -> None:
        if number == 2:  # typed while the summary after reply 1 is being written
            wait_until(model.held.is_set, "the summary after reply 1 began")
        elif number == 3:  # typed once the silence after reply 2 was used
            wait_until(lambda: len(model.prefills) >= 2, "the work after reply 2 ended")
        elif number:
            wait_until(lambda: len(model.prefills) >= number, "the next prompt was prepared")

    console = TypedConsole([filler(n)[0] for n in range(4)], before)
    assert ChatSession(conversation, interactive=True, console=console).run(io.StringIO()) == 0
    shown = console.file.getvalue()
    assert conversation.settings.idle_summaries
    assert "Summarizing the earlier conversation" not in shown  # no reply waited for one
    assert model.cancelled == 1
    assert "Earlier in this conversation" not in prompt_for(model, filler(2)[0])[0].content
    assert "Earlier in this conversation" in prompt_for(model, filler(3)[0])[0].content
    # Written while the user typed, said with the next reply: never over the typed line.
    notice = shown.index("· Summarized the earlier conversation up to #")
    assert shown.index(filler(2)[1][:30]) < notice < shown.index(filler(3)[1][:30])


def test_piped_chat_has_no_idle_time_and_still_summarizes_inside_the_reply():
    model = SummarizingModel(2048)
    conversation = Conversation(model, builtin_tools(), ReplySettings(answer_tokens=256))
    model.enqueue(*(filler(n)[1] for n in range(4)))
    out = io.StringIO()
    session = ChatSession(conversation, interactive=False,
                          console=Console(file=out, highlight=False, markup=False, width=200))
    assert session.run(io.StringIO("".join(filler(n)[0] + "\n" for n in range(4)))) == 0
    shown = out.getvalue()
    assert not conversation.settings.idle_summaries
    assert shown.index("· Summarizing the earlier conversation…") > shown.index(filler(2)[1][:30])
    assert shown.index("· Summarized the earlier conversation up to #") < shown.index(
        filler(3)[1][:30])


# -- voice and replay ----------------------------------------------------------------------

def voice_loop(conversation: Conversation, shown: list) -> VoiceLoop:
    return VoiceLoop(conversation, ScriptedSpeechToText({HELLO: "Hello there, Parley."}),
                     ToneTextToSpeech(5), MemorySpeaker(realtime=False), Segmenter(),
                     VoiceSettings(echo_tail_ms=0), render=shown.append)


def test_voice_writes_the_summary_after_a_reply_is_spoken_and_the_next_turn_stops_it():
    conversation, model = idle_conversation(hold=1)
    model.enqueue(*(filler(n)[1] for n in range(4)))
    shown: list = []
    loop = voice_loop(conversation, shown)
    try:
        for n in range(2):
            loop.submit_text(filler(n)[0])
            assert loop.wait_replied(HUNG_S)
        # Reply 1 has been spoken and nothing waits: the summary is being written.
        wait_until(model.held.is_set, "the summary after reply 1 began")
        loop.submit_text(filler(2)[0])  # the user comes first
        assert loop.wait_idle(HUNG_S)
        loop.submit_text(filler(3)[0])
        assert loop.wait_idle(HUNG_S)
    finally:
        loop.close()
    records = loop.records
    assert conversation.settings.idle_summaries
    assert [type(e.event) for e in records[1].idle] == [SummaryStarted, SummaryCancelled]
    assert records[2].timings.summary_wait_ms >= 0  # its reply waited for the stop
    assert [type(e.event) for e in records[2].idle] == [SummaryStarted, Summarized]
    assert records[2].idle[0].ms >= records[2].events[-1].ms  # after the reply
    for record in records:  # no reply summarized
        assert not [e for e in record.events if e.event.event_type.startswith("summary")]
    assert "Earlier in this conversation" not in prompt_for(model, filler(2)[0])[0].content
    assert "Earlier in this conversation" in prompt_for(model, filler(3)[0])[0].content
    # The screen shows the summary written, not the one cut short, nor "summarizing".
    on_screen = [type(e) for e in shown if isinstance(e, SUMMARY_EVENTS)]
    assert on_screen and set(on_screen) == {Summarized}


def test_replay_in_real_time_shows_a_summary_the_users_speech_stopped(tmp_path):
    conversation, model = idle_conversation(hold=1)
    model.enqueue(*(filler(n)[1] for n in range(2)), "Hello again.")
    silence = np.zeros(int(0.4 * RATE), dtype=np.int16)
    write_wav(tmp_path / "hello.wav", np.concatenate([silence, speechlike(1.0, HELLO),
                                                      silence]), RATE)
    (tmp_path / "session.json").write_text(json.dumps({"turns": [
        {"text": filler(0)[0]}, {"text": filler(1)[0]}, {"wait_s": 0.5},
        {"audio": "hello.wav"}]}))
    session = load_session(tmp_path / "session.json")
    loop = voice_loop(conversation, [])
    try:
        produced = replay(loop, session, fast=False, timeout_s=HUNG_S)
    finally:
        loop.close()
    report = session_json(loop, session, produced)
    turns = report["turns"]
    # The summary began after reply 1 was spoken; the user's speech stopped it.
    assert [e["type"] for e in turns[1]["idle"]] == ["summary-start", "summary-cancelled"]
    spoken = turns[3]
    assert spoken["heard"] == "Hello there, Parley." and spoken["reply"] == "Hello again."
    assert spoken["timings"]["summary_wait_ms"] >= 0
    for turn in turns:
        assert not [e for e in turn["events"] if e["type"].startswith("summary")]
    # Its reply went on without a summary (there was none yet).
    assert "Earlier in this conversation" not in prompt_for(model, "Hello there")[0].content


def test_replay_as_fast_as_possible_lets_the_summary_finish_between_turns(tmp_path):
    (tmp_path / "session.json").write_text(json.dumps({"turns": [
        {"text": filler(n)[0]} for n in range(4)]}))
    session = load_session(tmp_path / "session.json")
    reports = []
    for _ in range(2):
        conversation, model = idle_conversation()
        model.enqueue(*(filler(n)[1] for n in range(4)))
        loop = voice_loop(conversation, [])
        try:
            produced = replay(loop, session, fast=True, timeout_s=HUNG_S)
        finally:
            loop.close()
        reports.append(session_json(loop, session, produced))
    turns = reports[0]["turns"]
    assert [[e["type"] for e in turn["idle"]] for turn in turns] == [
        [], ["summary-start", "summary"], [], []]  # nothing after the last turn
    assert all(not {"summary_wait_ms", "prepare_wait_ms"} & set(turn["timings"])
               for turn in turns)
    # No turn came early, so every replay writes the same summary at the same place.
    first, second = ([(t["reply"], [e["type"] for e in t["idle"]]) for t in r["turns"]]
                     for r in reports)
    assert first == second and reports[0]["summary"] == reports[1]["summary"]

