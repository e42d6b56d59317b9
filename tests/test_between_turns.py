"""The one worker for the time between turns (chat, voice and serve use it): the summary
ahead if the conversation was built for it, then the next prompt; a request stops it."""

from __future__ import annotations

from assistant.between_turns import PREPARE_WAIT, SUMMARY_WAIT, BetweenTurns
from assistant.conversation import Conversation, ReplySettings
from assistant.events import Summarized, SummaryCancelled, SummaryStarted
from assistant.tools import builtin_tools
from tests.support.clocks import HUNG_S, ManualClock, wait_until
from tests.support.conversations import chat, filler, idle_conversation
from tests.support.fakes import HeldSummaries


def test_the_summary_is_written_then_the_next_prompt_prepared():
    conversation, model = idle_conversation()
    chat(conversation, model, filler(0), filler(1), filler(2))
    work = BetweenTurns(conversation)
    events: list = []
    work.run(events.append)
    assert [type(e) for e in events] == [SummaryStarted, Summarized]
    assert conversation.summary.covered_through >= 2
    assert len(model.prefills) == 1 and work.prepared_tokens > 0
    assert "Earlier in this conversation" in model.prefills[0][0].content  # after the summary
    assert work.waited() is None and work.idle.is_set()


def test_a_conversation_built_to_summarize_in_its_replies_only_gets_its_prompt_prepared():
    model = HeldSummaries()
    conversation = Conversation(model, builtin_tools(), ReplySettings(answer_tokens=256))
    chat(conversation, model, filler(0), filler(1), filler(2))
    events: list = []
    BetweenTurns(conversation).run(events.append)
    assert events == [] and len(model.prefills) == 1
    BetweenTurns(conversation, prepare=False).run(events.append)  # as serve's
    assert events == [] and len(model.prefills) == 1


def test_a_request_stops_the_summary_and_knows_how_long_it_waited():
    conversation, model = idle_conversation(hold=1)
    chat(conversation, model, filler(0), filler(1), filler(2))
    clock = ManualClock()
    work = BetweenTurns(conversation, clock=clock.monotonic)
    events: list = []
    work.start(events.append)
    wait_until(model.held.is_set, "the summary began")
    work.stop()  # the user typed: the reply goes first
    clock.sleep(0.25)
    assert work.wait(HUNG_S)
    assert [type(e) for e in events] == [SummaryStarted, SummaryCancelled]
    assert model.prefills == []  # stopped: no prompt prepared either
    waited = work.waited()
    assert waited is not None and (waited.timing, waited.ms) == (SUMMARY_WAIT, 250.0)
    assert work.waited() is None  # told once


def test_stopped_before_it_begins_nothing_is_done_and_no_wait_is_timed_for_an_interrupt():
    conversation, model = idle_conversation()
    chat(conversation, model, filler(0), filler(1), filler(2))
    work = BetweenTurns(conversation)
    work.begin()  # queued on the model's thread (serve)
    work.stop()
    events: list = []
    work.run(events.append)
    assert events == [] and model.prefills == []
    assert work.waited().timing == PREPARE_WAIT  # nothing was being summarized
    work.begin()
    work.stop(timed=False)  # the user only stopped Parley
    work.run(events.append)
    assert events == [] and work.waited() is None


def test_closing_stops_the_prompt_being_read_ahead_between_two_steps():
    """A reply waits for the prompt read ahead (it reads it anyway); Parley closing does
    not: /quit or SIGTERM came 62 s after a reply on two busy cores, waiting for it."""
    import threading

    class SteppedPrefill(HeldSummaries):
        def __init__(self):
            super().__init__()
            self.reading, self.steps = threading.Event(), 0

        def prefill(self, messages, tools, stop=None):
            self.reading.set()
            while not (stop is not None and stop.cancelled):
                self.steps += 1  # one of llama.cpp's batches
                threading.Event().wait(0.01)
            return self.steps

    model = SteppedPrefill()
    conversation = Conversation(model, builtin_tools(), ReplySettings(answer_tokens=256))
    work = BetweenTurns(conversation)
    work.start(lambda event: None)
    assert model.reading.wait(HUNG_S)
    work.close()
    assert work.wait(HUNG_S) and work.idle.is_set()
    read = model.steps
    work.run(lambda event: None)  # nothing more is read once closing
    assert model.steps == read
