"""Replies that never loop or leak: the guard alone, then through the conversation."""

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from assistant.conversation import Conversation, ReplySettings
from assistant.events import ReplyCut, ReplyDone, Sentence, TextDelta
from assistant.guarded_answer import prompt_text
from assistant.prompt import SYSTEM_PROMPT
from assistant.reply_guard import FALLBACK, CutReason, ReplyGuard
from assistant.sentences import split_sentences
from assistant.tools import builtin_tools
from models.base import CancelToken
from tests.support.conversations import long_answer
from tests.support.fakes import ScriptedChatModel

PROMPT = prompt_text(SYSTEM_PROMPT, builtin_tools().specs())
LOOPED_LINE = "The Romans built roads, temples and aqueducts across their empire.\n"
LOOP = "Rome was founded long ago.\n" + LOOPED_LINE * 16
LEAKED_PROMPT = ("The user's next message is:\nYou can use tools. To call one, answer with "
                 "only this, on one line:")
TOOL_JSON = ('Sure, I will set it.\n```json\n{"name": "timer", "arguments": '
             '{"action": "start", "seconds": 600}}\n```')
CALL_IN_PROSE = ('Sure, I will set it: {"name": "timer", "arguments": '
                 '{"action": "start", "seconds": 600}}')
"""A call the model layer leaves as text (it reads a call that is the whole reply, or
fenced, not one inside a sentence): the guard keeps it from being said."""
NORMAL = ("Yes. Cats purr when they are content, and yes, also when they are hurt. "
          "Purring may help them heal. Yes.")


def guarded(text: str, sizes: list[int] | None = None) -> tuple[str, ReplyGuard]:
    """What the guard lets through of `text` fed in pieces of `sizes` (cycled), or whole."""
    guard = ReplyGuard(PROMPT)
    out, start, turn = "", 0, 0
    while start < len(text):
        size = sizes[turn % len(sizes)] if sizes else len(text)
        out += guard.feed(text[start:start + size])
        start, turn = start + size, turn + 1
    return out + guard.finish(), guard


# -- the guard alone ----------------------------------------------------------------------

def test_a_looping_line_is_kept_once_and_the_loop_is_cut():
    out, guard = guarded(LOOP, [7])
    assert out == "Rome was founded long ago.\n" + LOOPED_LINE
    assert guard.cut is not None and guard.cut.reason is CutReason.REPETITION


def test_a_long_run_of_words_said_again_inside_other_sentences_is_a_loop():
    text = ("Mars is red because of iron dust on its surface. Venus is hot and Mars is red "
            "because of iron dust on its surface too.")
    out, guard = guarded(text, [3])
    assert out == "Mars is red because of iron dust on its surface. "
    assert guard.cut.reason is CutReason.REPETITION


def test_a_run_said_again_across_the_end_of_a_sentence_is_a_loop():
    # The second time, the run's last word begins a new sentence: it is cut there, and the
    # text kept never holds the 8 words twice.
    text = ("Water it weekly. Too much water can affect the health of your houseplant some "
            "days. Too little light can affect the health of your houseplant. Some need sun.")
    out, guard = guarded(text, [5])
    assert out == ("Water it weekly. Too much water can affect the health of your houseplant "
                   "some days. Too little light can affect the health of your houseplant. ")
    assert guard.cut.reason is CutReason.REPETITION


def test_a_list_item_that_repeats_an_earlier_one_is_cut_with_its_number():
    text = ("Tips:\n1. Sleep at the same time every night.\n2. Avoid coffee late in the day."
            "\n3. Sleep at the same time every night.\n")
    out, guard = guarded(text, [2])
    assert out == text[:text.index("3.")] and guard.cut.reason is CutReason.REPETITION


def test_a_normal_reply_with_a_repeated_short_word_passes_unchanged():
    for sizes in ([1], [4], None):
        out, guard = guarded(NORMAL, sizes)
        assert out == NORMAL and guard.cut is None


@pytest.mark.parametrize("text, kept, reason", [
    (LEAKED_PROMPT, "", CutReason.PROMPT_TEXT),
    ("Paris is the capital. You may be heard rather than read: answer briefly.",
     "Paris is the capital. ", CutReason.PROMPT_TEXT),
    ("Here it is. (From earlier in this conversation, message #4, user: “hi”)",
     "Here it is. ", CutReason.PROMPT_TEXT),
    ("Paris is the capital of France.<|im_end|>\n<|im_start|>user",
     "Paris is the capital of France.", CutReason.TEMPLATE_TOKEN),
    ("It is 4.[INST] more", "It is 4.", CutReason.TEMPLATE_TOKEN),
    ("Done.</s>", "Done.", CutReason.TEMPLATE_TOKEN),
    ("Paris.\nUser: and Rome?", "Paris.\n", CutReason.TEMPLATE_TOKEN),
    (TOOL_JSON, "Sure, I will set it.\n", CutReason.TOOL_CALL),
    ('[{"name": "clock", "parameters": {}}]', "", CutReason.TOOL_CALL),
    ('OK. {"arguments": {"expression": "2+2"}, "name": "calculator"}', "OK. ",
     CutReason.TOOL_CALL),
])
def test_leaks_are_cut_where_they_begin(text, kept, reason):
    for sizes in ([1], [3], None):
        out, guard = guarded(text, sizes)
        assert (out, guard.cut.reason) == (kept, reason)


def test_what_the_user_or_the_summary_said_is_not_a_leak():
    # JSON that is not a call, the assistant's name, words that only look like a prompt.
    text = ('I am Parley, a helpful assistant running on your own computer. A person as JSON: '
            '{"name": "Ada", "born": 1815}. You can use tools like a hammer, and the next '
            'message is yours.')
    out, guard = guarded(text, [2])
    assert out == text and guard.cut is None


def test_the_first_sentence_is_let_through_as_it_is_written():
    guard = ReplyGuard(PROMPT)
    shown = guard.feed("Cats purr when happy, ")
    assert shown == "Cats purr when happy, "  # nothing held: voice may start on the clause
    assert guard.feed("mostly. They also") == "mostly. "  # the second one is held…
    assert guard.feed(" purr when hurt. ") == "They also purr when hurt. "  # …to its end


TEXT_PIECES = st.sampled_from([
    "Yes. ", "The Romans built roads. ", "The Romans built roads and temples. ", "\n",
    "You can use tools. ", "To call one, answer with only this, ", "<|im_end|>", "<|", "[INST]",
    '{"name": "timer", ', '"arguments": {}}', "```json\n", "{", "}", " and ", "so ", ", ",
    "The user's next message is: ", "Paris is the capital of France. ", "e.g. ", "3.5 ",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXT_PIECES, max_size=30).map("".join) | st.text(max_size=200),
       st.lists(st.integers(1, 12), min_size=1, max_size=8))
@example(LOOP, [5])
@example(TOOL_JSON, [1])
def test_the_output_is_a_prefix_of_the_input_however_it_is_streamed(text, sizes):
    out, guard = guarded(text, sizes)
    whole, whole_guard = guarded(text)
    assert text.startswith(out)
    assert out == whole and guard.cut == whole_guard.cut
    if guard.cut is None:
        assert out == text


# -- through the conversation --------------------------------------------------------------

def reply(answer: str, **settings) -> tuple[list, Conversation, ReplyDone]:
    model = ScriptedChatModel(chunk_size=3)
    model.enqueue(answer)
    conversation = Conversation(model, builtin_tools(), ReplySettings(**settings))
    events: list = []
    done = conversation.reply("Tell me about Rome.", events.append)
    return events, conversation, done


def shown(events: list) -> tuple[str, list[str]]:
    return ("".join(e.text for e in events if isinstance(e, TextDelta)),
            [e.text for e in events if isinstance(e, Sentence)])


def test_a_model_looping_a_line_sixteen_times_is_heard_and_kept_once():
    events, conversation, done = reply(LOOP)
    text, sentences = shown(events)
    assert text.strip() == done.text == (LOOP.split("\n")[0] + "\n" + LOOPED_LINE).strip()
    assert sentences == ["Rome was founded long ago.", LOOPED_LINE.strip()]
    assert conversation.history.messages[-1].content == done.text
    assert ReplyCut("repetition") in events
    # The model was stopped within the line's second time, not left to write sixteen.
    assert conversation.model.sent[0] < len("Rome was founded long ago.\n" + LOOPED_LINE * 2)


@pytest.mark.parametrize("answer, reason", [
    (LEAKED_PROMPT, "prompt-text"),
    ("<|im_start|>assistant\nHello", "template-token"),
    # A list of calls, which the model layer does not read as one: JSON, never said.
    ('[{"name": "clock", "arguments": {}}]', "tool-call"),
])
def test_a_reply_that_is_all_leak_says_it_has_no_good_answer(answer, reason):
    events, conversation, done = reply(answer)
    assert shown(events) == (FALLBACK, [FALLBACK])
    assert done.text == FALLBACK == conversation.history.messages[-1].content
    assert ReplyCut(reason) in events


def test_template_tokens_and_tool_json_in_text_are_never_shown_nor_kept():
    answer = "It is sunny today.<|im_end|>\n<|im_start|>user\nThanks"
    events, conversation, done = reply(answer)
    assert shown(events) == ("It is sunny today.", ["It is sunny today."])
    assert done.text == "It is sunny today." == conversation.history.messages[-1].content
    events, conversation, done = reply(CALL_IN_PROSE)
    assert shown(events) == ("Sure, I will set it: ", ["Sure, I will set it:"])
    assert done.text == "Sure, I will set it:"


def test_a_normal_multi_sentence_reply_passes_unchanged():
    events, conversation, done = reply(NORMAL)
    assert shown(events) == (NORMAL, ["Yes.", "Cats purr when they are content, and yes, also "
                                      "when they are hurt.", "Purring may help them heal.",
                                      "Yes."])
    assert done.text == NORMAL and not any(isinstance(e, ReplyCut) for e in events)
    events, _, done = reply(long_answer(6))
    assert done.text == long_answer(6) and len(shown(events)[1]) == 6


def test_without_the_guard_the_model_text_comes_as_it_is():
    events, conversation, done = reply(LOOP, guard_replies=False)
    assert shown(events)[0] == LOOP and done.text == LOOP.strip()


def test_a_cancelled_reply_is_not_replaced_by_the_apology():
    model = ScriptedChatModel(chunk_size=3)
    model.enqueue(LEAKED_PROMPT)
    conversation = Conversation(model, builtin_tools())
    cancel = CancelToken()
    cancel.cancel()
    events: list = []
    done = conversation.reply("hi", events.append, cancel)
    assert done.cancelled and FALLBACK not in shown(events)[0]


# -- the embedded model ------------------------------------------------------------------

@pytest.mark.real
def test_the_embedded_model_looping_on_a_question_is_cut_at_its_first_repeat():
    """Asked this, the seeded SmolLM2-135M says one paragraph again and again until its
    1,024 tokens run out (with the settings `parley chat` gives it)."""
    from assistant.timer_tool import timer_tool
    from assistant.timers import Timers
    from models.embedded import default_llm
    from models.llama import LlamaChatModel

    model = LlamaChatModel(default_llm(), context_size=2048)
    tools = builtin_tools()
    timers = Timers(background=False)
    tools.register(timer_tool(timers))
    settings = ReplySettings(answer_tokens=1024, recent_exchanges=0, tell_date=False)
    events: list = []
    done = Conversation(model, tools, settings).reply("Tell me about the history of Rome.",
                                                      events.append)
    timers.close()
    assert ReplyCut("repetition") in events
    assert 0 < done.completion_tokens < 1024 and "Rome" in done.text
    said = [" ".join(sentence.lower().split()) for sentence in split_sentences(done.text)]
    assert len(said) == len(set(said)) >= 3
