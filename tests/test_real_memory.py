"""The running summary and the look-back with the real embedded model (small context)."""

import io
import re

import pytest
from rich.console import Console

from assistant.cli.render import ChatRenderer
from assistant.events import RecallHint, ReplyDone, Summarized, SummaryStarted, TextDelta
from tests.support.planted_facts import build_conversation

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def model():
    from models.embedded import default_llm
    from models.llama import LlamaChatModel

    return LlamaChatModel(default_llm(), context_size=1536)


def test_a_long_chat_is_summarized_and_a_covered_fact_goes_back_beside_the_question(
        model, monkeypatch):
    prompts: list = []
    stream = model.stream

    def recorded(messages, *args, **kwargs):
        prompts.append(list(messages))
        return stream(messages, *args, **kwargs)

    monkeypatch.setattr(model, "stream", recorded)
    conversation = build_conversation(model, hints=True)
    key = "sk-proj-" + "Zq8" * 12
    conversation.history.add("user", f"For the record, the staging key is {key}.")
    conversation.history.add("assistant", "I will keep that in mind.")
    screen = io.StringIO()
    render = ChatRenderer(Console(file=screen, width=200, highlight=False, markup=False)).render
    events: list = []

    def emit(event) -> None:
        events.append(event)
        render(event)

    question = "Which port does the billing service use?"
    done = conversation.reply(question, emit)
    assert isinstance(events[0], SummaryStarted)
    summary = next(e for e in events if isinstance(e, Summarized))
    assert summary.covered_through == conversation.summary.covered_through > 2
    numbers = [int(n) for n in re.findall(r"^- \(#(\d+)", summary.text, re.MULTILINE)]
    assert numbers == sorted(numbers) and numbers[0] == 1  # one bullet per exchange, in order
    assert len(summary.text) <= 2000 and key not in summary.text
    # The paste is out of the prompt; its billing block went to the model beside the
    # question, as a recall hint.
    asked = prompts[-1][-1].content
    assert asked.startswith(question) and "message #1" in asked
    assert "billing:\n    image: billing:2.1\n    ports:\n      - '8101:8101'" in asked
    assert all("8101" not in m.content for m in prompts[-1][:-1])
    # What the user sees: the summary step, then the recall step, then the answer. The
    # embedded 135M model does not read the port out of the hint (it answers in prose
    # about billing), so its words are not checked; a bigger model's would be.
    kinds = [type(e) for e in events]
    assert kinds.index(Summarized) < kinds.index(RecallHint) < kinds.index(TextDelta)
    assert RecallHint(1) in events
    shown = screen.getvalue()
    assert shown.index("· Summarizing the earlier conversation…") \
        < shown.index("· Summarized the earlier conversation up to #") \
        < shown.index("· Recalling message #1 from earlier in this conversation…") \
        < shown.index(done.text[:40])
    assert isinstance(done, ReplyDone) and done.text.strip()
    assert done.prompt_tokens <= 1536 - 160


def test_a_summary_written_between_turns_stops_for_the_user_then_spares_the_reply(
        model, monkeypatch):
    from dataclasses import replace

    from assistant.events import SummaryCancelled
    from memory.summary import RunningSummary
    from models.base import CancelToken

    conversation = build_conversation(model, hints=True)
    conversation.settings = replace(conversation.settings, idle_summaries=True)
    assert conversation.prepare_next() > 0  # the next prompt's beginning, read ahead
    cancel = CancelToken()
    batches: list[int] = []
    evaluate = model._llm.eval

    def read_then_the_user_speaks(tokens) -> None:
        batches.append(len(tokens))
        evaluate(tokens)
        cancel.cancel()  # the user speaks while the model reads the summary's request

    monkeypatch.setattr(model._llm, "eval", read_then_the_user_speaks)
    events: list = []
    assert conversation.summarize_ahead(events.append, cancel) is False
    monkeypatch.setattr(model._llm, "eval", evaluate)
    assert [type(e) for e in events] == [SummaryStarted, SummaryCancelled]
    assert batches == [64]  # stopped between two batches of the request, not at its end
    assert conversation.summary == RunningSummary()  # nothing half-written
    assert conversation.prepare_next() == 0  # what was read ahead is still there
    # The next silence writes it; the reply after it does not summarize, and reads it.
    events = []
    assert conversation.summarize_ahead(events.append, CancelToken())
    assert [type(e) for e in events] == [SummaryStarted, Summarized]
    assert events[-1].covered_through == conversation.summary.covered_through > 2
    events = []
    done = conversation.reply("Which port does the billing service use?", events.append)
    assert not [e for e in events if isinstance(e, (SummaryStarted, Summarized))]
    assert isinstance(done, ReplyDone) and done.text.strip()
    assert RecallHint(1) in events  # the paste is covered: its passage goes beside the question


def test_todays_date_in_the_prompt_keeps_its_beginning_reused_from_turn_to_turn(model):
    from assistant.conversation import Conversation, ReplySettings
    from assistant.tools import builtin_tools

    conversation = Conversation(model, builtin_tools(), ReplySettings(answer_tokens=48))
    conversation.reply("Name a colour.", lambda event: None)
    conversation.prepare_next()  # as chat and voice do while the user types or talks
    done = conversation.reply("Name another one.", lambda event: None)
    assert "Today is " in conversation.prompts.system_message([], conversation.summary,
                                                              conversation.history.messages).content
    # Only the new message is processed: the system prompt, date included, is reused.
    assert done is not None and done.processed_tokens < 40 < done.prompt_tokens
