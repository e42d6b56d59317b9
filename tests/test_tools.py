"""Tools return data and text: the model reads the text, code uses the value and the error."""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime, time, timedelta

import pytest

from assistant import history_tool
from assistant.local.answers import LocalIntents
from assistant.local.matcher import IntentMatcher
from assistant.timer_tool import timer_tool
from assistant.timers import Timers
from assistant.tools import (
    MAX_RESULT_CHARS,
    RESULT_CUT_NOTE,
    Failure,
    Tool,
    ToolOutput,
    ToolRefused,
    ToolRegistry,
    builtin_tools,
    failed,
)
from memory.history import Message
from memory.search import HistorySearch, Passage
from models.base import ToolSpec

ANY = {"type": "object", "properties": {}}


def a_tool(run, name: str = "probe") -> Tool:
    return Tool(ToolSpec(name, "A tool for the test.", ANY), run, lambda _: name)


def test_the_clock_value_is_the_datetime_its_text_shows():
    output = builtin_tools().call("clock", {})
    now = output.value
    assert isinstance(now, datetime) and now.tzinfo is not None and not output.is_error
    assert output.text == (f"{now:%A, %d %B %Y}, {now:%H:%M:%S}, time zone {now.tzname()} "
                           f"(UTC{now:%z})")


@pytest.mark.parametrize(("expression", "text", "value"), [
    ("17 * 23", "17 * 23 = 391", 391), ("(17*3)/4", "(17*3)/4 = 12.75", 12.75),
    ("sqrt(16)", "sqrt(16) = 4", 4)])
def test_the_calculator_value_is_the_number(expression, text, value):
    output = builtin_tools().call("calculator", {"expression": expression})
    assert (output.text, output.value, output.error) == (text, value, None)
    assert type(output.value) is type(value)


def test_division_by_zero_is_an_error_of_its_own_type():
    output = builtin_tools().call("calculator", {"expression": "1 / 0"})
    assert output.is_error and output.value is None
    assert output.error.kind is Failure.RAISED
    assert isinstance(output.error.cause, ZeroDivisionError)
    assert output.text == "Error: calculator failed: division by zero"  # as the model read it
    assert output.error.message == "calculator failed: division by zero"


def test_an_unknown_tool_and_bad_arguments_are_error_results():
    tools = builtin_tools()
    unknown = tools.call("weather", {})
    assert unknown.error.kind is Failure.UNKNOWN_TOOL
    assert unknown.text == "Error: there is no tool named 'weather'. Tools: clock, calculator."
    bad = tools.call("calculator", {"expression": 5})
    assert bad.error.kind is Failure.BAD_ARGUMENTS
    assert bad.text == "Error: argument 'expression' must be of type string"
    missing = tools.call("calculator", {})
    assert missing.error.kind is Failure.BAD_ARGUMENTS


def test_a_raising_or_refusing_tool_gives_an_error_result():
    def boom(_: dict) -> ToolOutput:
        raise RuntimeError("boom")

    def no(_: dict) -> ToolOutput:
        raise ToolRefused("There is no timer running.")

    tools = ToolRegistry([a_tool(boom, "boom"), a_tool(no, "no")])
    raised = tools.call("boom", {})
    assert raised.error.kind is Failure.RAISED and isinstance(raised.error.cause, RuntimeError)
    assert raised.text == "Error: boom failed: boom"
    refused = tools.call("no", {})
    assert refused.error.kind is Failure.REFUSED
    assert refused.error.message == "There is no timer running."
    assert refused.text == "Error: There is no timer running."


def test_the_cap_applies_to_the_text_and_the_value_is_kept():
    tools = ToolRegistry([a_tool(lambda _: ToolOutput("x" * 5000, 42)),
                          a_tool(lambda _: "y" * 5000, "plain")])
    output = tools.call("probe", {})
    assert len(output.text) == MAX_RESULT_CHARS and output.text.endswith(RESULT_CUT_NOTE)
    assert output.value == 42 and not output.is_error
    plain = tools.call("plain", {})  # a tool may return its text alone
    assert len(plain.text) == MAX_RESULT_CHARS and plain.value == "y" * 5000


def test_errors_are_capped_too_and_a_checker_that_raises_is_an_error():
    def loud(_: dict) -> ToolOutput:
        raise RuntimeError("z" * 9000)

    def broken_check(_: dict) -> str | None:
        raise KeyError("definitions")

    tools = ToolRegistry([a_tool(loud, "loud"),
                          dataclasses.replace(a_tool(lambda _: "ran", "checked"),
                                              check=broken_check)])
    raised = tools.call("loud", {})
    assert len(raised.text) == MAX_RESULT_CHARS and raised.text.endswith(RESULT_CUT_NOTE)
    unknown = tools.call("x" * 9000, {})  # a name the model made up, quoted back
    assert len(unknown.text) == MAX_RESULT_CHARS and unknown.error.kind is Failure.UNKNOWN_TOOL
    unchecked = tools.call("checked", {})
    assert unchecked.error.kind is Failure.BAD_ARGUMENTS
    assert unchecked.text == ("Error: its arguments could not be checked ('definitions'); "
                              "nothing was run")


def test_a_failed_output_reads_error_for_the_model():
    output = failed(Failure.UNREADABLE_CALL, "the call was not JSON. Try again.")
    assert output.text == "Error: the call was not JSON. Try again." and output.is_error


def test_the_timer_values_are_the_timers_an_action_concerned():
    now = [0.0]
    timers = Timers(lambda: now[0], background=False)
    tools = ToolRegistry([timer_tool(timers)])
    started = tools.call("timer", {"action": "start", "seconds": 600, "name": "pizza"})
    assert started.text == "Your 10 minute pizza timer is set."
    (pizza,) = started.value
    assert (pizza.seconds, pizza.name) == (600, "pizza")
    tools.call("timer", {"action": "start", "seconds": 60})
    status = tools.call("timer", {"action": "status"})
    assert sorted(t.seconds for t in status.value) == [60, 600]
    assert tools.call("timer", {"action": "cancel", "name": "pizza"}).value == (pizza,)
    tools.call("timer", {"action": "cancel_all"})
    assert tools.call("timer", {"action": "status"}).value == ()
    refused = tools.call("timer", {"action": "cancel"})
    assert refused.error.kind is Failure.REFUSED
    assert refused.error.message == "There is no timer running."


def said(seq: int, role: str, content: str, at: datetime | None = None) -> Message:
    return Message(seq, role, content, at=at)


def test_the_history_values_are_the_passages_shown():
    messages = [said(1, "user", "The billing service listens on port 8101."),
                said(2, "assistant", "Noted: port 8101."),
                said(3, "user", "We deploy on Fridays.")]
    tools = ToolRegistry([history_tool.history_tool(HistorySearch(messages))])
    found = tools.call(history_tool.NAME, {"query": "billing port", "speaker": "user"})
    assert [p.message.seq for p in found.value] == [1]
    assert found.value[0].text == messages[0].content
    assert f"#1 (user): {messages[0].content}" in found.text
    read = tools.call(history_tool.NAME, {"message": 3})
    assert [(p.message.seq, p.start, p.end) for p in read.value] == [(3, 0, 21)]
    nothing = tools.call(history_tool.NAME, {"query": "zebra"})
    assert nothing.value == () and not nothing.is_error
    empty = tools.call(history_tool.NAME, {})
    assert empty.error.kind is Failure.REFUSED
    assert empty.text == 'Error: give {"query": "words to look for"} or {"message": N}.'


# -- local answers are made from values, never from the text --------------------------------

@pytest.fixture(scope="module")
def local() -> LocalIntents:
    return LocalIntents(IntentMatcher())


NOT_READ = "text no code may read"


def test_the_time_and_date_are_said_from_the_clock_value(local):
    reading = ToolOutput(NOT_READ, datetime(2026, 12, 5, 15, 4, 59, tzinfo=UTC))
    assert local.answer("What time is it?").speak(reading) == "It's 3:04 PM."
    assert local.answer("What is the date today?").speak(reading) == \
        "Today is Saturday, December 5, 2026."


def test_a_calculation_is_said_from_the_number(local):
    answer = local.answer("What is 17 times 23?")
    assert answer.arguments == {"expression": "17 * 23"}
    assert answer.speak(ToolOutput(NOT_READ, 391)) == "17 times 23 is 391."
    assert answer.speak(ToolOutput(NOT_READ, 0.1 + 0.2)) == "17 times 23 is about 0.3."
    assert answer.speak(ToolOutput(NOT_READ, 10 ** 400)) == "17 times 23 is inf."


def test_a_division_by_zero_is_told_by_its_type(local):
    answer = local.answer("what is 5 divided by 0")
    by_zero = failed(Failure.RAISED, NOT_READ, ZeroDivisionError("float modulo"))
    assert answer.speak(by_zero) == "5 divided by 0 has no answer: nothing can be divided by zero."
    other = failed(Failure.RAISED, "calculator failed: division by zero", ValueError("x"))
    assert answer.speak(other) == "I couldn't work out 5 divided by 0."


def test_a_timer_answer_says_the_text_or_the_error_message(local):
    answer = local.answer("cancel my timer")
    assert answer.speak(ToolOutput("Cancelled your 1 minute timer.", ())) == \
        "Cancelled your 1 minute timer."
    assert answer.speak(failed(Failure.REFUSED, "There is no timer running.")) == \
        "There is no timer running."


def test_recall_is_said_from_the_passages(local):
    at = datetime.combine(date.today() - timedelta(days=1), time(9, 30)).astimezone()
    message = said(3, "user", "My locker code is 4711.\nDon't tell anyone.", at)
    passage = Passage(message, 0, len(message.content), message.content)
    found = ToolOutput(NOT_READ, (passage,))
    recall = local.answer("What did I say about my locker code?")
    assert recall.speak(found) == "In message 3, you said: “My locker code is 4711.”"
    when = local.answer("When did I mention my locker code?")
    assert when.arguments == {"query": "my locker code", "speaker": "user"}
    assert when.speak(found) == \
        "You mentioned it yesterday at 09:30, in message 3: “My locker code is 4711.”"
    nothing = "I can't find anything earlier in this conversation about my locker code."
    assert recall.speak(ToolOutput(NOT_READ, ())) == nothing
    assert when.speak(failed(Failure.REFUSED, NOT_READ)) == nothing
