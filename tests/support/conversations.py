"""Conversations on a stand-in model, and turns long enough to need a summary."""

from __future__ import annotations

from assistant.conversation import Conversation, ReplySettings
from assistant.tools import builtin_tools
from tests.support.fakes import HeldSummaries, ScriptedChatModel, SummarizingModel


def summarizing_conversation(context_size: int = 2048,
                             **settings) -> tuple[Conversation, SummarizingModel]:
    """A conversation on a small context (answers of 256 tokens unless `settings` say
    otherwise) whose stand-in model also writes the summaries."""
    model = SummarizingModel(context_size)
    settings.setdefault("answer_tokens", 256)
    return Conversation(model, builtin_tools(), ReplySettings(**settings)), model


def chat(conversation: Conversation, model: ScriptedChatModel, *turns: tuple[str, str]) -> list:
    """Each (question, answer) turn: the answer queued on `model`, the question asked; the
    events of all the replies."""
    events: list = []
    for question, answer in turns:
        model.enqueue(answer)
        conversation.reply(question, events.append)
    return events


def distinct_sentences(count: int) -> list[str]:
    """Up to 12 sentences of 22 characters, as long to speak as "This is a long answer."
    (the first), none said twice: a long answer that is not a loop, which Parley cuts."""
    return [f"This is a {letter}ong answer." for letter in "lsgbdhkmptwz"[:count]]


def long_answer(sentences: int) -> str:
    return " ".join(distinct_sentences(sentences))


def varied_words(count: int) -> str:
    """`count` words of 6 letters, none twice: an answer that never repeats itself (a
    reply saying one word over and over is cut short as a loop)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    return "".join(f"deta{letters[i // 26 % 26]}{letters[i % 26]} " for i in range(count))


def filler(n: int) -> tuple[str, str]:
    """Turn `n` of a long talk: about 200 words asked, 170 answered."""
    return (f"Question {n}: tell me about topic {n} in some detail " + "words " * 190,
            f"Answer {n}: here is what I know about topic {n}. " + varied_words(165))


def idle_conversation(hold: int = 0) -> tuple[Conversation, HeldSummaries]:
    """A conversation that writes its summary between turns, on a model whose first `hold`
    summaries go on until they are cancelled."""
    model = HeldSummaries(hold)
    settings = ReplySettings(answer_tokens=256, idle_summaries=True)
    return Conversation(model, builtin_tools(), settings), model
