"""Pure logic: tool-call parsing, calculator, sentence splitting, fitting properties."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assistant.sentences import SentenceSplitter
from assistant.tools import builtin_tools, evaluate
from memory import CurrentMessageTooLong, History, fit_history
from models.base import TextChunk, ToolCallChunk
from models.toolcalls import ToolCallScanner


def scan(pieces: list[str]) -> list:
    scanner = ToolCallScanner()
    out = [c for p in pieces for c in scanner.feed(p)]
    return out + list(scanner.finish())


def test_tool_call_split_across_chunks_is_found_and_text_kept():
    raw = 'Let me check. <tool_call>{"name": "clock", "arguments": {}}</tool_call>'
    for size in (1, 3, 7, len(raw)):
        chunks = scan([raw[i:i + size] for i in range(0, len(raw), size)])
        text = "".join(c.text for c in chunks if isinstance(c, TextChunk))
        calls = [c for c in chunks if isinstance(c, ToolCallChunk)]
        assert text == "Let me check. " and calls == [ToolCallChunk("clock", {})]


def test_a_lone_angle_bracket_is_not_swallowed():
    chunks = scan(["1 <", " 2 and <tool"])
    assert "".join(c.text for c in chunks) == "1 < 2 and <tool"


def test_unclosed_call_with_complete_json_is_accepted():
    chunks = scan(['<tool_call>{"name": "calculator", "arguments": {"expression": "2+2"}}'])
    assert chunks == [ToolCallChunk("calculator", {"expression": "2+2"})]


@pytest.mark.parametrize("expression,value", [
    ("2+2", 4), ("(17*3)/4", 12.75), ("2^10", 1024), ("sqrt(16)", 4.0), ("-3 % 2", 1)])
def test_calculator(expression, value):
    assert evaluate(expression) == value


@pytest.mark.parametrize("expression", ["__import__('os')", "open('x')", "2**99999", "a+1"])
def test_calculator_refuses_anything_but_arithmetic(expression):
    output = builtin_tools().call("calculator", {"expression": expression})
    assert output.is_error and output.text.startswith("Error")


def test_tool_arguments_are_checked():
    output = builtin_tools().call("calculator", {"expression": 5})
    assert output.is_error and "must be of type string" in output.text


def test_sentences_come_out_as_soon_as_they_end():
    splitter = SentenceSplitter()
    assert splitter.feed("Pi is 3.14, e.g. roughly") == []
    assert splitter.feed(" three. Next") == ["Pi is 3.14, e.g. roughly three."]
    assert splitter.finish() == ["Next"]


@given(st.lists(st.tuples(st.sampled_from(["user", "assistant", "tool"]),
                          st.integers(1, 400)), min_size=1, max_size=40),
       st.integers(50, 3000))
def test_fitting_keeps_current_message_order_and_room(items, room):
    history = History()
    for role, size in items:
        history.add(role, "x" * size, **({"tool": "t", "query": "q"} if role == "tool" else {}))
    current = history.add("user", "now")
    sizes = {m.seq: len(m.content) for m in history.messages}
    try:
        fit = fit_history(history.messages, current.seq, lambda m: sizes[m.seq], room)
    except CurrentMessageTooLong:
        assert sizes[current.seq] > room
        return
    assert fit.kept[-1].seq == current.seq
    assert fit.tokens == sum(sizes[m.seq] for m in fit.kept) <= room
    assert [m.seq for m in fit.kept] == sorted(m.seq for m in fit.kept)
    # Nothing is dropped while everything fits.
    if sum(sizes.values()) <= room:
        assert fit.dropped == ()


def test_the_first_clause_can_be_spoken_before_the_sentence_ends():
    splitter = SentenceSplitter(first_clause_words=4)
    assert splitter.feed("Sure, ") == []  # too short to stand alone
    assert splitter.feed("the meeting is at three, ") == ["Sure, the meeting is at three,"]
    assert splitter.feed("in room four, as planned. Then") == ["in room four, as planned."]
    assert splitter.finish() == ["Then"]
