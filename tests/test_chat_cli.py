"""Text chat end to end with a scripted model: piped stdin, exact transcript."""

import io
import os
import time
from datetime import datetime

import pytest
from rich.console import Console

from assistant.cli.chat import ChatSession
from assistant.conversation import Conversation
from assistant.local.answers import LocalIntents
from assistant.tools import Tool, ToolOutput, builtin_tools
from models.base import ToolSpec
from tests.support.command_line import chat_through_main
from tests.support.fakes import ScriptedChatModel

SAID_AT = datetime.fromisoformat("2026-12-05T14:03:00+01:00")


def run_chat(lines: str, *replies: str) -> tuple[str, Conversation]:
    model = ScriptedChatModel()
    model.enqueue(*replies)
    conversation = Conversation(model, builtin_tools())
    conversation.history.now = lambda: SAID_AT
    out = io.StringIO()
    session = ChatSession(conversation, interactive=False,
                          console=Console(file=out, highlight=False, markup=False, width=200))
    assert session.run(io.StringIO(lines)) == 0
    return out.getvalue(), conversation


def test_piped_chat_exact_transcript():
    transcript, _ = run_chat(
        "hello\n\nwhat is 6*7\n/history\n",
        "Hi, I am Parley.",
        '<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}</tool_call>',
        "6*7 is 42.")
    assert transcript == (
        "Hi, I am Parley.\n"
        "· Calculating 6*7…\n"
        "6*7 is 42.\n"
        "#1 user, Sat 5 Dec 14:03: hello\n"
        "#2 assistant, Sat 5 Dec 14:03: Hi, I am Parley.\n"
        "#3 user, Sat 5 Dec 14:03: what is 6*7\n"
        "#4 tool (calculator), Sat 5 Dec 14:03: 6*7 = 42\n"
        "#5 assistant, Sat 5 Dec 14:03: 6*7 is 42.\n")


def test_quit_clear_and_unknown_commands():
    transcript, conversation = run_chat("hi\n/clear\n/bogus\n/quit\nnever sent\n", "Hello.")
    assert "· Conversation cleared." in transcript
    assert "Unknown command /bogus" in transcript
    assert len(conversation.history) == 0


# -- the clock tool: what the model reads, and what the user hears, on a fixed clock -------

FRIDAY = 1796408707.0
"""2026-12-04 18:25:07 UTC."""
MIDSUMMER = 1782907200.0
"""2026-07-01 12:00:00 UTC."""
NEW_YORK = "EST+5EDT,M3.2.0,M11.1.0"
"""POSIX zone rules, so the test needs no tz database."""


@pytest.fixture
def clock_at(monkeypatch):
    """Stops the clock tool's clock at an instant, in a time zone the test names."""
    zone_before = os.environ.get("TZ")

    def stop_at(instant: float, zone: str) -> None:
        class Stopped(datetime):
            @classmethod
            def now(cls, tz=None):
                return datetime.fromtimestamp(instant, tz)

        os.environ["TZ"] = zone
        time.tzset()
        monkeypatch.setattr("assistant.tools.datetime", Stopped)
        monkeypatch.setattr("memory.history.datetime", Stopped)  # when messages are said

    yield stop_at
    if zone_before is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = zone_before
    time.tzset()


@pytest.mark.parametrize("instant, zone, reading", [
    (FRIDAY, NEW_YORK, "Friday, 04 December 2026, 13:25:07, time zone EST (UTC-0500)"),
    (MIDSUMMER, NEW_YORK, "Wednesday, 01 July 2026, 08:00:00, time zone EDT (UTC-0400)"),
    (FRIDAY, "UTC0", "Friday, 04 December 2026, 18:25:07, time zone UTC (UTC+0000)"),
    (FRIDAY, "JST-9", "Saturday, 05 December 2026, 03:25:07, time zone JST (UTC+0900)"),
])
def test_the_clock_tool_gives_the_model_weekday_date_time_and_zone(monkeypatch, capsys, clock_at,
                                                                   instant, zone, reading):
    clock_at(instant, zone)
    model = ScriptedChatModel()
    model.enqueue('<tool_call>{"name": "clock", "arguments": {}}</tool_call>', "Noted.")
    out = chat_through_main(monkeypatch, capsys, model, "what day is it\n/history\n",
                            "--no-local-intents")
    # The model reads the result beside the call, in the machine's zone, summer time included.
    assert [m.content for m in model.prompts[1] if m.role == "tool"] == [reading]
    # /history says when each message was said, by the same clock, in the same zone.
    said = datetime.fromtimestamp(instant).astimezone()
    when = f"{said:%a} {said.day} {said:%b} {said:%H:%M}"
    assert out == ("· Checking the clock…\n"
                   "Noted.\n"
                   f"#1 user, {when}: what day is it\n"
                   f"#2 tool (clock), {when}: {reading}\n"
                   f"#3 assistant, {when}: Noted.\n")


def test_the_time_and_date_are_said_from_the_clock_without_the_model(monkeypatch, capsys,
                                                                     clock_at):
    clock_at(FRIDAY, NEW_YORK)
    model = ScriptedChatModel()
    out = chat_through_main(monkeypatch, capsys, model,
                            "what time is it\nwhat is the date today\n")
    assert out.splitlines() == ["· Checking the clock…", "It's 1:25 PM.",
                                "· Checking the clock…", "Today is Friday, December 4, 2026."]
    assert model.prompts == []


# -- the time in a place: the clock's reading, said in the place's zone -------------------

@pytest.mark.parametrize("instant, said", [
    (FRIDAY, ["It's 1:25 PM in New York.", "It's 3:25 AM on Saturday in Tokyo.",
              "It's 6:25 PM in London.", "It's 10:25 AM in Los Angeles."]),
    # Summer time in New York, London and Los Angeles; none in Tokyo.
    (MIDSUMMER, ["It's 8:00 AM in New York.", "It's 9:00 PM in Tokyo.",
                 "It's 1:00 PM in London.", "It's 5:00 AM in Los Angeles."]),
])
def test_the_time_in_a_place_is_said_in_its_zone_without_the_model(monkeypatch, capsys,
                                                                   clock_at, instant, said):
    clock_at(instant, NEW_YORK)
    model = ScriptedChatModel()
    out = chat_through_main(monkeypatch, capsys, model,
                            "What time is it in New York?\nwhat's the time in tokyo right now\n"
                            "time in London, England\nwhat time is it in los angeles\n")
    assert out.splitlines() == [line for answer in said
                                for line in ("· Checking the clock…", answer)]
    assert model.prompts == []


def test_a_place_without_a_known_time_zone_is_said_plainly(monkeypatch, capsys, clock_at):
    clock_at(FRIDAY, NEW_YORK)
    model = ScriptedChatModel()
    model.enqueue("The model answered.")
    out = chat_through_main(monkeypatch, capsys, model,
                            "What time is it in Atlantis?\nwhat time is it in 5 minutes\n")
    # A time later is no place: the model answers it, as before.
    assert out.splitlines() == ["I don't know the time zone of Atlantis.", "The model answered."]
    assert len(model.prompts) == 1


def test_with_a_time_server_the_model_answers_for_a_place_as_before():
    tools = builtin_tools()
    tools.register(Tool(ToolSpec("time__get_current_time", "The time in a zone.",
                                 {"type": "object"}),
                        lambda args: ToolOutput("03:25"), lambda _: "Asking time"))
    model = ScriptedChatModel()
    model.enqueue("In Tokyo it is 03:25.")
    conversation = Conversation(model, tools, local=LocalIntents())
    done = conversation.reply("What time is it in Tokyo?", lambda event: None)
    assert done is not None and done.text == "In Tokyo it is 03:25."
    assert len(model.prompts) == 1
