"""The user's words while they speak: passes over the growing utterance, the words two
agree on kept (LocalAgreement-2), shown as `heard-partial` before the pause's `heard`,
which they never change."""

from __future__ import annotations

import io
import itertools
import threading
from concurrent.futures import Future

import numpy as np
from rich.console import Console

from assistant.cli.render import VoiceScreen
from assistant.conversation import Conversation, ReplySettings
from assistant.events import Heard, HeardPartial, TextDelta
from assistant.tools import builtin_tools
from assistant.voice.live_words import LiveTranscript, LiveWords, LocalAgreement
from assistant.voice.loop import VoiceLoop
from assistant.voice.turns import VoiceSettings
from audio.memory_out import MemorySpeaker
from audio.segmenter import Segmenter
from tests.support.clips import silence, speechlike
from tests.support.clocks import MicrophoneClock, wait_until
from tests.support.fakes import ScriptedChatModel, ScriptedSpeechToText, ToneTextToSpeech

RATE = 16000


def test_a_word_is_kept_once_two_passes_in_a_row_agree_on_it_and_all_before_it():
    agreement = LocalAgreement()
    assert agreement.add("And so am I") == LiveWords("", "And so am I")
    # The second pass agrees on "And so", not on what followed: only those are kept.
    assert agreement.add("And so my fellow American") == LiveWords("And so",
                                                                   "my fellow American")
    assert agreement.add("And so my fellow Americans, ask") == LiveWords(
        "And so my fellow", "Americans, ask")
    # Punctuation and case do not make words differ (kept words are the newer pass's).
    assert agreement.add("and so my fellow americans ask not") == LiveWords(
        "And so my fellow americans ask", "not")


def test_kept_words_are_never_taken_back():
    agreement = LocalAgreement()
    agreement.add("Set a timer")
    assert agreement.add("Set a timer for").kept == "Set a timer"
    # A pass that hears the start otherwise changes nothing kept, and shows nothing
    # tentative that would contradict it.
    assert agreement.add("Set the timer for ten") == LiveWords("Set a timer", "")
    assert agreement.add("Set a timer for ten minutes").kept == "Set a timer"
    assert agreement.add("Set a timer for ten minutes").kept == "Set a timer for ten minutes"


class Worker:
    """Runs a submitted pass only when the test says so."""

    def __init__(self) -> None:
        self.waiting: list[tuple[Future, tuple]] = []

    def submit(self, run, *args) -> Future:
        future: Future = Future()
        self.waiting.append((future, (run, *args)))
        return future

    def run_next(self) -> None:
        future, (run, *args) = self.waiting.pop(0)
        if future.set_running_or_notify_cancel():
            future.set_result(run(*args))


def test_a_pass_starts_per_second_of_new_speech_one_at_a_time_and_not_after_the_pause():
    worker, shown = Worker(), []
    heard_texts = iter(["Tell me", "Tell me a story", "Tell me a story about"])
    live = LiveTranscript(worker.submit, lambda pcm: next(heard_texts), shown.append,
                          lambda: 0.0, every_s=1.0)
    speech = np.ones(3 * RATE, dtype=np.int16)
    live.grew(RATE - 1, lambda: speech[: RATE - 1])
    assert worker.waiting == []  # less than a second of speech
    live.grew(RATE, lambda: speech[:RATE])
    live.grew(2 * RATE, lambda: speech[: 2 * RATE])  # the first pass has not run yet
    assert len(worker.waiting) == 1
    worker.run_next()
    live.grew(2 * RATE, lambda: speech[: 2 * RATE])
    worker.run_next()
    live.grew(3 * RATE, lambda: None)  # the user stopped speaking: no pass
    assert worker.waiting == []
    live.grew(3 * RATE, lambda: speech)
    live.pausing()  # the pause's transcript goes first: the pass not started is dropped
    worker.run_next()
    assert shown == [HeardPartial("", "Tell me"), HeardPartial("Tell me", "a story")]
    assert live.ended() == [(0.0, shown[0]), (0.0, shown[1])]
    assert live.ended() == []


def test_a_pass_still_running_when_its_utterance_ends_shows_nothing():
    worker, shown = Worker(), []
    live = LiveTranscript(worker.submit, lambda pcm: "Tell me", shown.append, lambda: 0.0,
                          every_s=1.0)
    live.grew(RATE, lambda: np.ones(RATE, dtype=np.int16))
    future, (run, *args) = worker.waiting.pop()
    future.set_running_or_notify_cancel()  # running: too late to drop
    live.ended()
    run(*args)
    assert shown == []


FIRST, WHOLE = 4000, 8000
SCRIPT = {FIRST: "Tell me a story.", WHOLE: "Tell me a story about a dog."}


def talk(settings: VoiceSettings) -> tuple[VoiceLoop, list, ScriptedSpeechToText]:
    """A user says one sentence, its second half louder (the stand-in recognizer hears the
    loudest part), with no pause, then is silent."""
    clock, shown = MicrophoneClock(), []
    model = ScriptedChatModel()
    model.enqueue("Once there was a dog.")
    stt = ScriptedSpeechToText(SCRIPT)
    loop = VoiceLoop(Conversation(model, builtin_tools(), ReplySettings()), stt,
                     ToneTextToSpeech(), MemorySpeaker(), Segmenter(), settings,
                     render=shown.append, clock=clock)
    try:
        speech = np.concatenate([silence(0.3), speechlike(1.6, FIRST), speechlike(1.6, WHOLE),
                                 silence(2.0)])
        # Each pass ends before the next audio comes (the stand-in engine is instant; a
        # thread's scheduling must not decide which passes run).
        clock.feed(loop.feed_audio, speech, before_frame=lambda _: wait_until(
            lambda: not loop.end_of_turn.live.passing, "a live pass"))
        assert loop.wait_idle(30)
    finally:
        loop.close()
    return loop, shown, stt


def test_the_words_show_as_they_are_spoken_and_the_message_is_the_pause_s_transcript():
    loop, shown, _ = talk(VoiceSettings(prefill=False))
    partials = [e for e in shown if isinstance(e, HeardPartial)]
    heard = [e for e in shown if isinstance(e, Heard)]
    # Passes at 1, 2 and 3 s of speech: the first part, then the whole, then agreed.
    assert partials[0] == HeardPartial("", SCRIPT[FIRST]), partials
    assert partials[-1].text.startswith("Tell me a story"), partials
    kept = [p.text for p in partials]
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(kept)), kept
    assert shown.index(partials[-1]) < shown.index(heard[0])
    assert [h.text for h in heard] == [SCRIPT[WHOLE]]
    [record] = loop.records
    kinds = [timed.event.event_type for timed in record.events]
    assert kinds[:len(partials)] == ["heard-partial"] * len(partials)
    assert all(e.ms < 0 for e in record.events[:len(partials)])  # before the turn ended
    assert [m.content for m in loop.conversation.history.messages] == [
        SCRIPT[WHOLE], "Once there was a dog."]


def test_without_live_transcripts_the_same_speech_is_heard_the_same_with_one_pass():
    loop, shown, stt = talk(VoiceSettings(prefill=False, live_transcript_s=0))
    assert not [e for e in shown if isinstance(e, HeardPartial)]
    assert [e.text for e in shown if isinstance(e, Heard)] == [SCRIPT[WHOLE]]
    assert len(stt.heard) == 1
    with_live = talk(VoiceSettings(prefill=False))[2]
    assert len(with_live.heard) > 1


def test_the_terminal_rewrites_one_line_as_the_words_come_and_a_pipe_gets_only_the_final():
    screen_file = io.StringIO()
    screen = VoiceScreen(Console(file=screen_file, force_terminal=True, width=60))
    piped_file = io.StringIO()
    piped = VoiceScreen(Console(file=piped_file, width=60))
    for renderer in (screen, piped):
        renderer.render(HeardPartial("", "Tell me"))
        renderer.render(HeardPartial("Tell me", "a story"))
        renderer.render(Heard("Tell me a story about a dog."))
    assert piped_file.getvalue() == "you: Tell me a story about a dog.\n"
    dumb_file = io.StringIO()
    dumb = VoiceScreen(Console(file=dumb_file, force_terminal=True, width=60,
                               _environ={"TERM": "dumb"}))
    dumb.render(HeardPartial("", "Tell me"))
    dumb.render(Heard("Tell me a story about a dog."))
    assert dumb_file.getvalue() == "you: Tell me a story about a dog.\n"
    lines = screen_file.getvalue().split("\r\x1b[2K")
    assert [line for line in lines if line] == [
        "\x1b[2myou: Tell me…\x1b[0m", "\x1b[2myou: Tell me a story…\x1b[0m",
        "\x1b[1myou: Tell me a story about a dog.\x1b[0m\n"]


def test_words_spoken_over_a_reply_being_written_start_their_own_line():
    out = io.StringIO()
    screen = VoiceScreen(Console(file=out, force_terminal=True, width=60))
    screen.render(TextDelta("Once there was"))
    screen.render(HeardPartial("", "Stop"))
    assert out.getvalue().startswith("Once there was\n")


def test_a_long_utterance_shows_its_last_words_on_one_row():
    out = io.StringIO()
    screen = VoiceScreen(Console(file=out, force_terminal=True, width=40))
    screen.render(HeardPartial("word " * 30, "last"))
    line = out.getvalue().split("\r\x1b[2K")[-1]
    assert "last…" in line and len(line.replace("\x1b[2m", "").replace("\x1b[0m", "")) <= 40


def test_live_passes_run_on_the_one_speech_to_text_worker():
    names: set[str] = set()

    class Recording(ScriptedSpeechToText):
        def transcribe(self, pcm):
            names.add(threading.current_thread().name)
            return super().transcribe(pcm)

    clock = MicrophoneClock()
    loop = VoiceLoop(Conversation(ScriptedChatModel(), builtin_tools(), ReplySettings()),
                     Recording(SCRIPT), ToneTextToSpeech(), MemorySpeaker(), Segmenter(),
                     VoiceSettings(prefill=False, speculative_reply=False), clock=clock)
    try:
        clock.feed(loop.feed_audio, np.concatenate([silence(0.3), speechlike(2.5, FIRST)]))
        loop.wait_idle(5)
    finally:
        loop.close()
    assert len(names) == 1 and next(iter(names)).startswith("stt"), names
