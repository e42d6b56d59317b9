"""Everyday requests answered before the model, with the real `hassil` matcher and the real
home-assistant-intents sentences; the model is a scripted stand-in that records every call."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

import pytest

from assistant.cli.main import main
from assistant.conversation import Conversation
from assistant.events import ReplyDone, Sentence, ToolCall
from assistant.local.answers import LocalIntents
from assistant.local.matcher import IntentMatcher, normalized
from assistant.local.places import place_said, zone_of
from assistant.timer_tool import timer_tool
from assistant.timers import Timers
from assistant.tools import builtin_tools
from tests.support.clocks import ManualClock
from tests.support.command_line import piped, without_user_settings
from tests.support.fakes import ScriptedChatModel


@pytest.fixture(scope="module")
def matcher() -> IntentMatcher:
    return IntentMatcher()


@pytest.fixture
def talk(matcher):
    """A conversation with local intents, the timer tool over timers on a clock the test
    moves, and a model that must not be asked unless a test expects it."""
    model = ScriptedChatModel()
    clock = ManualClock()
    timers = Timers(clock, background=False)
    tools = builtin_tools()
    tools.register(timer_tool(timers))
    conversation = Conversation(model, tools, local=LocalIntents(matcher))

    def say(text: str) -> tuple[str, list]:
        events: list = []
        done = conversation.reply(text, events.append)
        assert isinstance(done, ReplyDone), events
        return done.text, events

    yield say, conversation, model, timers, clock
    timers.close()


def test_the_time_is_said_from_the_clock_tool_with_no_model_call(talk):
    say, conversation, model, _, _ = talk
    before = datetime.now()
    reply, events = say("What time is it?")
    after = datetime.now()
    shown = {f"It's {t.hour % 12 or 12}:{t.minute:02d} {'AM' if t.hour < 12 else 'PM'}."
             for t in (before, after)}
    assert reply in shown
    assert model.prompts == []
    # The same trace a model's tool call leaves: message, tool call and result, answer.
    messages = conversation.history.messages
    assert [(m.role, m.tool) for m in messages] == [
        ("user", None), ("tool", "clock"), ("assistant", None)]
    assert messages[2].content == reply
    assert [e.name for e in events if isinstance(e, ToolCall)] == ["clock"]
    assert [e.text for e in events if isinstance(e, Sentence)] == [reply]


@pytest.mark.parametrize("request_text", ["What is the date today?", "what day is it",
                                          "What's today's date?"])
def test_the_date_is_said_naturally(talk, request_text):
    say, _, model, _, _ = talk
    today = datetime.now()
    reply, _ = say(request_text)
    assert reply in {f"Today is {d:%A}, {d:%B} {d.day}, {d.year}."
                     for d in (today, today + timedelta(minutes=1))}
    assert model.prompts == []


@pytest.mark.parametrize(("request_text", "answer"), [
    ("What is 17 times 23?", "17 times 23 is 391."),
    ("what is seventeen times twenty three", "17 times 23 is 391."),
    ("What's 15 percent of 80?", "15 percent of 80 is 12."),
    ("What is the square root of 144?", "The square root of 144 is 12."),
    ("seven divided by eight", "7 divided by 8 is 0.875."),
    ("How much is 1,000 plus 250?", "1000 plus 250 is 1,250."),
    ("calculate 2 to the power of 10", "2 to the power of 10 is 1,024."),
])
def test_arithmetic_is_worked_out_by_the_calculator(talk, request_text, answer):
    say, conversation, model, _, _ = talk
    reply, _ = say(request_text)
    assert reply == answer
    assert model.prompts == []
    assert conversation.history.messages[1].tool == "calculator"


def test_division_by_zero_is_a_sentence_and_the_conversation_goes_on(talk):
    say, conversation, model, _, _ = talk
    reply, _ = say("What is 5 divided by 0?")
    assert reply == "5 divided by 0 has no answer: nothing can be divided by zero."
    reply, _ = say("what is 6 times 7")
    assert reply == "6 times 7 is 42."
    assert len(conversation.history) == 6


@pytest.mark.parametrize("request_text", [
    "What is the capital of France?", "Tell me a joke.", "What is love?",
    "in 5 minutes turn off the oven", "What did the fox say?",
])
def test_anything_else_goes_to_the_model(talk, request_text):
    say, conversation, model, _, _ = talk
    model.enqueue("The model's answer.")
    reply, _ = say(request_text)
    assert reply == "The model's answer."
    assert len(model.prompts) == 1
    assert model.prompts[0][-1].content == request_text


def test_say_that_again_repeats_the_last_answer(talk):
    say, conversation, model, _, _ = talk
    model.enqueue("Paris is the capital of France.")
    say("What is the capital of France?")
    reply, _ = say("Could you say that again?")
    assert reply == "Paris is the capital of France."
    assert len(model.prompts) == 1


def test_never_mind_says_nothing_keeps_nothing_and_drops_a_pending_question(talk):
    say, conversation, model, timers, _ = talk
    reply, _ = say("Set a timer")
    assert reply == "For how long? Say, for example, ten minutes."
    kept = len(conversation.history)
    reply, events = say("never mind")
    assert reply == "" and len(conversation.history) == kept
    model.enqueue("Ten minutes is a short time.")
    reply, _ = say("ten minutes")  # no longer the answer to "for how long?"
    assert reply == "Ten minutes is a short time." and timers.running() == []


def test_what_did_i_say_about_reads_the_message_number(talk):
    say, conversation, model, _, _ = talk
    model.enqueue("Noted.", "Nice.")
    say("The billing service listens on port 8101.")
    say("I had pasta for lunch today.")
    reply, events = say("What did I say about the billing service?")
    assert reply.startswith("In message 1, you said: “The billing service listens on port 8101.")
    assert [e.name for e in events if isinstance(e, ToolCall)] == ["conversation_history"]
    assert len(model.prompts) == 2


def test_timers_start_report_change_and_cancel(talk):
    say, conversation, model, timers, clock = talk
    assert say("Set a timer for 5 minutes.")[0] == "Your 5 minute timer is set."
    assert say("set a 10 minute pizza timer")[0] == "Your 10 minute pizza timer is set."
    assert sorted((t.seconds, t.name) for t in timers.running()) == [(300, ""), (600, "pizza")]
    clock.now += 60
    assert say("How much time is left?")[0] == (
        "You have 2 timers: the 5 minute timer has 4 minutes left; "
        "the 10 minute pizza timer has 9 minutes left.")
    assert say("pause the pizza timer")[0] == \
        "Paused your 10 minute pizza timer with 9 minutes left."
    clock.now += 600
    timers.run_due()  # as the timers' thread does: the 5 minute timer goes off
    assert say("how much time is left on the pizza timer")[0] == \
        "Your 10 minute pizza timer has 9 minutes left, paused."
    assert say("resume the pizza timer")[0] == \
        "Resumed your 10 minute pizza timer: 9 minutes left."
    assert say("add 2 minutes to the pizza timer")[0] == \
        "Added 2 minutes to your 10 minute pizza timer: 11 minutes left."
    assert say("cancel the pizza timer")[0] == "Cancelled your 10 minute pizza timer."
    assert say("cancel all timers")[0] == "There is no timer running."
    assert model.prompts == []
    calls = [m for m in conversation.history.messages if m.tool == "timer"]
    assert calls[0].arguments == {"action": "start", "seconds": 300}
    assert calls[1].arguments == {"action": "start", "seconds": 600, "name": "pizza"}


def test_removing_at_least_the_time_left_says_the_timer_is_done_and_it_does_not_ring(talk):
    say, _, model, timers, clock = talk
    rang: list = []
    timers.on_finished = rang.append
    say("set a 5 minute timer")
    say("set a 10 minute pasta timer")
    assert say("remove 1 hour from the 5 minute timer")[0] == (
        "That's more than the 5 minutes left: your 5 minute timer is done.")
    clock.now += 60
    assert say("take 9 minutes off the pasta timer")[0] == (
        "That's all the time it had left: your 10 minute pasta timer is done.")
    clock.now += 1
    assert timers.run_due() == [] and rang == [] and timers.running() == []
    assert model.prompts == []


def test_a_timer_without_a_length_asks_for_one(talk):
    say, _, _, timers, _ = talk
    assert say("set a tea timer")[0] == "For how long? Say, for example, ten minutes."
    assert say("three minutes")[0] == "Your 3 minute tea timer is set."
    assert [(t.seconds, t.name) for t in timers.running()] == [(180, "tea")]


@pytest.mark.parametrize(("request_text", "answer"), [
    ("set a timer for 25 hours", "Timers can be at most 24 hours long."),
    ("cancel the timer", "There is no timer running."),
    ("pause the timer", "There is no timer running."),
])
def test_impossible_timer_requests_get_a_clear_sentence(talk, request_text, answer):
    say, conversation, _, timers, _ = talk
    reply, _ = say(request_text)
    assert reply == answer and timers.running() == []
    assert conversation.history.messages[-1].content == answer


def test_which_timer_is_asked_when_several_match(talk):
    say, _, _, timers, _ = talk
    say("set a timer for 5 minutes")
    say("set a timer for 10 minutes")
    assert say("cancel the timer")[0] == (
        "You have 2 timers: the 5 minute timer and the 10 minute timer. "
        "Say which one, by its name or its length.")
    assert say("cancel the 10 minute timer")[0] == "Cancelled your 10 minute timer."
    assert [t.seconds for t in timers.running()] == [300]


def test_a_model_can_set_a_timer_through_the_same_tool(matcher):
    model = ScriptedChatModel()
    model.enqueue('<tool_call>{"name": "timer", "arguments": {"action": "start", '
                  '"seconds": 90, "name": "eggs"}}</tool_call>', "Done.")
    timers = Timers(ManualClock(), background=False)
    tools = builtin_tools()
    tools.register(timer_tool(timers))
    conversation = Conversation(model, tools)  # no local intents: the model decides
    conversation.reply("set a timer for 90 seconds for the eggs", lambda e: None)
    assert [(t.seconds, t.name) for t in timers.running()] == [(90, "eggs")]
    assert conversation.history.messages[1].content == "Your 1 minute 30 second eggs timer is set."


def test_a_malformed_timer_call_is_an_error_result_not_a_crash(matcher):
    model = ScriptedChatModel()
    model.enqueue('<tool_call>{"name": "timer", "arguments": {"action": "explode"}}</tool_call>',
                  "Sorry.")
    timers = Timers(ManualClock(), background=False)
    tools = builtin_tools()
    tools.register(timer_tool(timers))
    conversation = Conversation(model, tools)
    done = conversation.reply("do something", lambda e: None)
    assert done is not None and done.text == "Sorry."
    result = conversation.history.messages[1]
    assert result.tool == "timer" and result.content.startswith("Error:")


@pytest.mark.parametrize(("said", "zone", "name"), [
    ("Tokyo", "Asia/Tokyo", "Tokyo"), ("new york city", "America/New_York", "New York"),
    ("São Paulo", "America/Sao_Paulo", "Sao Paulo"), ("Paris France", "Europe/Paris", "Paris"),
    ("the Netherlands", "Europe/Amsterdam", "the Netherlands"),
    ("Buenos Aires", "America/Argentina/Buenos_Aires", "Buenos Aires"),
])
def test_a_place_is_a_zones_city_or_a_country_with_one_zone(said, zone, name):
    assert zone_of(said) == (zone, name)


@pytest.mark.parametrize("said", ["Atlantis", "the kitchen", "Eastern", "GMT+5", "US"])
def test_anything_else_has_no_zone(said):
    assert zone_of(said) is None


def test_the_words_around_a_place_are_not_part_of_it():
    assert place_said(" New York right now, please? ") == "New York"


def test_number_words_become_digits_for_the_templates():
    assert normalized("set a timer for an hour and a half") == \
        "set a timer for 1 hours and 30 minutes"
    assert normalized("what is twenty one plus four") == "what is 21 plus 4"


@pytest.mark.parametrize("text", ["What is the capital of France?", "turn on the lights",
                                  "x" * 5000, "\udcff\udcfe garbage", ""])
def test_matching_never_fails_on_odd_input(matcher, text):
    found = matcher.match(text)
    assert all(m.intent != "HassGetCurrentTime" for m in found)


# -- through `parley chat` ------------------------------------------------------------

@pytest.fixture(autouse=True)
def plain_environment(monkeypatch):
    without_user_settings(monkeypatch)


def chat(monkeypatch, capsys, stdin: bytes, *argv: str) -> tuple[str, ScriptedChatModel]:
    model = ScriptedChatModel()
    model.enqueue("The model answered.")
    monkeypatch.setattr("assistant.session.engines.load_model", lambda args: model)
    piped(monkeypatch, stdin)
    assert main(["chat", *argv]) == 0
    return " ".join(capsys.readouterr().out.split()), model  # the terminal may wrap lines


def test_chat_answers_locally_and_no_local_intents_sends_it_to_the_model(monkeypatch, capsys):
    out, model = chat(monkeypatch, capsys, b"what is 17 times 23\n")
    assert "17 times 23 is 391." in out and model.prompts == []
    out, model = chat(monkeypatch, capsys, b"what is 17 times 23\n", "--no-local-intents")
    assert "The model answered." in out and len(model.prompts) == 1
    monkeypatch.setenv("PARLEY_NO_LOCAL_INTENTS", "1")
    assert "The model answered." in chat(monkeypatch, capsys, b"what is 17 times 23\n")[0]


def test_ending_chat_says_which_timers_are_cancelled(monkeypatch, capsys):
    out, _ = chat(monkeypatch, capsys, b"set a 10 minute pizza timer\nset a timer for 1 hour\n")
    assert "Your 10 minute pizza timer is set." in out
    assert "Setting a 10 minute pizza timer…" in out
    assert re.search(r"Cancelled the running timers: the 10 minute pizza timer \((10 minutes|"
                     r"9 minutes and \d+ seconds) left\) and the 1 hour timer", out), out


def test_when_did_i_mention_says_the_day_and_time_it_was_said(talk):
    say, conversation, model, _, _ = talk
    model.enqueue("Noted.", "Nice.")
    yesterday = datetime.now().astimezone() - timedelta(days=1)
    conversation.history.now = lambda: yesterday.replace(hour=14, minute=3)
    say("The billing service listens on port 8101.")
    conversation.history.now = lambda: datetime.now().astimezone()
    say("I had pasta for lunch today.")
    reply, events = say("When did I mention the billing port?")
    assert reply == ("You mentioned it yesterday at 14:03, in message 1: “The billing service "
                     "listens on port 8101.”")
    assert [e.name for e in events if isinstance(e, ToolCall)] == ["conversation_history"]
    assert len(model.prompts) == 2  # the model was asked only the first two


def test_days_are_said_as_people_say_them():
    from assistant.local.answers import spoken_day

    today = datetime(2026, 12, 5).date()
    assert spoken_day(date(2026, 12, 5), today) == "today"
    assert spoken_day(date(2026, 12, 4), today) == "yesterday"
    assert spoken_day(date(2026, 12, 1), today) == "on Tuesday, December 1"
    assert spoken_day(date(2025, 3, 2), today) == "on Sunday, March 2, 2025"


def test_reply_locally_answers_a_local_request_and_leaves_any_other_for_the_model(matcher):
    # The server tries the local intents on their own thread, then the model on its own.
    model = ScriptedChatModel()
    model.enqueue("Paris.")
    conversation = Conversation(model, builtin_tools(), local=LocalIntents(matcher))
    events: list = []
    assert conversation.reply_locally("What is the capital of France?", events.append) == (
        False, None)
    assert events == [] and conversation.history.messages == ()
    done = conversation.reply("What is the capital of France?", events.append,
                              local_first=False)
    assert done is not None and done.text == "Paris."
    matched, done = conversation.reply_locally("What is 17 times 23?", events.append)
    assert matched and done is not None and "391" in done.text
    assert len(model.prompts) == 1  # the model was asked the first question only
