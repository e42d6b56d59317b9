"""A conversation kept in its file as it goes: replies, forks (speculative replies),
/clear and the summary reach the file when they happen in the conversation."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import numpy as np
from rich.console import Console

from assistant import saved
from assistant.cli.saved import announce
from assistant.conversation import Conversation, ReplySettings
from assistant.saved import store_of
from assistant.tools import builtin_tools
from assistant.voice.loop import VoiceLoop
from assistant.voice.turns import VoiceSettings
from audio.memory_out import MemorySpeaker
from audio.segmenter import Segmenter
from memory.store import ConversationStore
from memory.summary import RunningSummary
from models.base import CancelToken
from tests.support.clips import silence, speechlike
from tests.support.clocks import MicrophoneClock, wait_until
from tests.support.conversations import chat, filler
from tests.support.fakes import (
    HeldSummaries,
    ScriptedChatModel,
    ScriptedSpeechToText,
    ToneTextToSpeech,
)
from tests.support.saved_files import rows

FIRST, WHOLE = 4000, 8000
SCRIPT = {FIRST: "Tell me about", WHOLE: "Tell me about the sea."}


def saved_conversation(path: Path, model: ScriptedChatModel,
                       settings: ReplySettings | None = None) -> Conversation:
    store = ConversationStore.resume(path) if path.exists() else ConversationStore.create(path)
    return saved.saved_conversation(store, model, builtin_tools(), settings)


def test_the_users_message_is_in_the_file_before_the_model_answers(tmp_path):
    path = tmp_path / "talk.parley"
    seen_while_answering: list = []

    class Watching(ScriptedChatModel):
        def stream(self, messages, tools, max_tokens, cancel=None):
            seen_while_answering.append(rows(path))
            yield from super().stream(messages, tools, max_tokens, cancel)

    model = Watching()
    model.enqueue("Hello.", '<tool_call>{"name": "calculator", "arguments": '
                  '{"expression": "6*7"}}</tool_call>', "It is 42.")
    conversation = saved_conversation(path, model)
    conversation.reply("hi", lambda event: None)
    conversation.reply("what is 6*7", lambda event: None)
    assert seen_while_answering[0] == [(1, "user", "hi")]
    assert seen_while_answering[1][-1] == (3, "user", "what is 6*7")
    assert seen_while_answering[2][-1] == (4, "tool", "6*7 = 42")  # a tool result too
    assert rows(path) == [(1, "user", "hi"), (2, "assistant", "Hello."),
                          (3, "user", "what is 6*7"), (4, "tool", "6*7 = 42"),
                          (5, "assistant", "It is 42.")]
    store_of(conversation).close()


def test_a_fork_writes_only_once_confirmed_or_adopted(tmp_path):
    path = tmp_path / "talk.parley"
    model = ScriptedChatModel()
    conversation = saved_conversation(path, model)
    conversation.reply("one", lambda event: None)
    # Forked and never confirmed (the user went on talking): nothing reaches the file.
    conversation.fork().reply("dropped", lambda event: None)
    assert [row[2] for row in rows(path)] == ["one", "OK."]
    # Adopted when done: its messages are written then, and later ones as they come.
    forked_from = conversation.history.messages
    twin = conversation.fork()
    twin.reply("two", lambda event: None)
    assert conversation.adopt(twin, forked_from)
    conversation.reply("three", lambda event: None)
    assert [row[2] for row in rows(path)] == ["one", "OK.", "two", "OK.", "three", "OK."]
    store_of(conversation).close()


def test_a_confirmed_fork_cleared_away_leaves_the_file_empty(tmp_path):
    path = tmp_path / "talk.parley"
    conversation = saved_conversation(path, ScriptedChatModel())
    conversation.reply("one", lambda event: None)
    forked_from = conversation.history.messages
    twin = conversation.fork()
    conversation.confirm_fork(twin)
    twin.reply("two", lambda event: None)
    assert [row[0] for row in rows(path)] == [1, 2, 3, 4]  # saved as it went
    conversation.clear()
    assert not conversation.adopt(twin, forked_from)
    assert rows(path) == []
    conversation.reply("a new start", lambda event: None)
    assert rows(path) == [(1, "user", "a new start"), (2, "assistant", "OK.")]
    store_of(conversation).close()


def test_resuming_brings_back_the_history_summary_and_numbering(tmp_path):
    path = tmp_path / "talk.parley"
    conversation = saved_conversation(path, ScriptedChatModel())
    for text in ("one", "two", "three"):
        conversation.reply(text, lambda event: None)
    conversation.state.set_summary(RunningSummary(("- (#1–#2) The user said one.",), 2))
    store_of(conversation).close()

    # Voice keeps the newest messages in memory; the file keeps all of them.
    voice = saved_conversation(path, ScriptedChatModel(), ReplySettings(max_messages=4))
    assert [m.seq for m in voice.history.messages] == [3, 4, 5, 6]
    assert voice.summary == RunningSummary(("- (#1–#2) The user said one.",), 2)
    out = io.StringIO()
    announce(voice, Console(file=out, width=200))
    assert out.getvalue().startswith(
        f"· Resumed {path}: 6 messages (the newest 4 in memory), the last ")
    voice.reply("four", lambda event: None)
    assert [row[0] for row in rows(path)] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert [m.seq for m in voice.history.messages] == [5, 6, 7, 8]
    voice.clear()  # /clear: the file's conversation goes too, summary included
    assert rows(path) == [] and store_of(voice).summary() == RunningSummary()
    store_of(voice).close()


# -- voice: a reply answered ahead of the end of speech ----------------------------------


class HeldModel(ScriptedChatModel):
    """Holds its first answer until released, so a test can look at the file meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.streaming = threading.Event()
        self.release = threading.Event()

    def stream(self, messages, tools, max_tokens, cancel=None):
        self.streaming.set()
        assert self.release.wait(30)
        yield from super().stream(messages, tools, max_tokens, cancel)


def voice_room(conversation: Conversation):
    clock = MicrophoneClock()
    loop = VoiceLoop(conversation, ScriptedSpeechToText(SCRIPT), ToneTextToSpeech(10.0),
                     MemorySpeaker(realtime=False), Segmenter(),
                     VoiceSettings(speculative_reply=True, prefill=False), clock=clock)
    return loop, lambda pcm: clock.feed(loop.feed_audio, pcm)


def test_a_reply_answered_ahead_saves_the_users_words_when_the_turn_is_confirmed(tmp_path):
    path = tmp_path / "talk.parley"
    model = HeldModel()
    model.enqueue("The sea is wide.")
    conversation = saved_conversation(path, model)
    loop, say = voice_room(conversation)
    try:
        say(np.concatenate([silence(0.3), speechlike(1.0, WHOLE), silence(0.3)]))
        wait_until(model.streaming.is_set, "the reply answered ahead of the end of speech")
        assert rows(path) == []  # the user may yet go on: nothing is the conversation's
        # The end-of-speech wait is over: the turn is confirmed (and its first moments,
        # which its reply waits out, pass).
        say(silence(2.0))
        # Its reply is still being written, and the user's words are in the file already.
        assert rows(path) == [(1, "user", SCRIPT[WHOLE])]
        model.release.set()
        assert loop.wait_idle(30)
    finally:
        model.release.set()
        loop.close()
    assert rows(path) == [(1, "user", SCRIPT[WHOLE]), (2, "assistant", "The sea is wide.")]
    store = store_of(conversation)
    assert store is not None and conversation.history.listener is store
    store.close()


def test_a_reply_answered_ahead_and_talked_over_never_reaches_the_file(tmp_path):
    path = tmp_path / "talk.parley"
    model = HeldModel()
    model.enqueue("About what?", "The sea is wide.")
    conversation = saved_conversation(path, model)
    written: list[str] = []  # every message text ever inserted, however it was
    write = store_of(conversation)._write

    def spy(statements, last_seq):
        written.extend(p[2] for sql, p in statements if sql.startswith("INSERT INTO messages")
                       or sql.startswith("INSERT OR REPLACE INTO messages"))
        write(statements, last_seq)

    store_of(conversation)._write = spy
    loop, say = voice_room(conversation)
    try:
        say(np.concatenate([silence(0.3), speechlike(1.0, FIRST), silence(0.4)]))
        wait_until(model.streaming.is_set, "the reply answered ahead of the end of speech")
        say(np.concatenate([speechlike(1.0, WHOLE), silence(2.0)]))  # the user goes on
        model.release.set()
        assert loop.wait_idle(30)
    finally:
        model.release.set()
        loop.close()
    assert written == [SCRIPT[WHOLE], "The sea is wide."]
    assert rows(path) == [(1, "user", SCRIPT[WHOLE]), (2, "assistant", "The sea is wide.")]
    store_of(conversation).close()


def test_a_summary_reaches_the_file_when_written_and_a_forks_only_once_adopted(tmp_path):
    path = tmp_path / "talk.parley"
    store = ConversationStore.create(path)
    model = HeldSummaries(0)
    conversation = saved.saved_conversation(
        store, model, builtin_tools(), ReplySettings(answer_tokens=256, idle_summaries=True))
    chat(conversation, model, filler(0), filler(1), filler(2))
    assert conversation.summarize_ahead(lambda event: None, CancelToken())
    written = conversation.summary
    assert written.covered_through >= 2 and store.summary() == written  # between turns
    # A fork writes its own summary: the file keeps the conversation's until it is adopted.
    forked_from = conversation.history.messages
    twin = conversation.fork()
    chat(twin, model, filler(3), filler(4))
    assert twin.summarize_ahead(lambda event: None, CancelToken())
    assert twin.summary.covered_through > written.covered_through
    assert store.summary() == written and len(rows(path)) == len(forked_from)
    assert conversation.adopt(twin, forked_from)
    assert store.summary() == twin.summary and len(rows(path)) == len(forked_from) + 4
    store.close()
