"""The running summary and the look-back with the real embedded model (small context)."""

import re

import pytest

from assistant.bench.memory import build_conversation
from assistant.events import RecallHint, ReplyDone, Summarized, SummaryStarted

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def model():
    from models.embedded import default_llm
    from models.llama import LlamaChatModel

    return LlamaChatModel(default_llm(), context_size=1536)


def test_a_long_chat_is_summarized_and_a_covered_fact_is_recalled(model):
    conversation = build_conversation(model, hints=True)
    key = "sk-proj-" + "Zq8" * 12
    conversation.history.add("user", f"For the record, the staging key is {key}.")
    conversation.history.add("assistant", "I will keep that in mind.")
    events: list = []
    done = conversation.reply("Which port does the billing service use in the compose file?",
                              events.append)
    assert isinstance(events[0], SummaryStarted)
    summary = next(e for e in events if isinstance(e, Summarized))
    assert summary.covered_through == conversation.summary.covered_through > 2
    numbers = [int(n) for n in re.findall(r"^- \(#(\d+)", summary.text, re.MULTILINE)]
    assert numbers == sorted(numbers) and numbers[0] == 1  # one bullet per exchange, in order
    assert len(summary.text) <= 2000 and key not in summary.text
    # The paste is out of the prompt; its billing block comes back as a recall hint.
    assert RecallHint(1) in events
    assert isinstance(done, ReplyDone) and done.text
    assert done.prompt_tokens <= 1536 - 160
