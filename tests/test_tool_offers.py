"""A reply is offered the built-in tools its request could need; everything else is offered
always, and a local answer may use any tool."""

import pytest

from assistant.conversation import Conversation
from assistant.events import ToolCall, ToolResult
from assistant.timer_tool import timer_tool
from assistant.timers import Timers
from assistant.tool_offers import offered_for
from assistant.tools import Tool, builtin_tools
from models.base import ToolSpec
from tests.fakes import ScriptedChatModel
from tests.support.clocks import ManualClock


def all_tools():
    tools = builtin_tools()
    tools.register(timer_tool(Timers(ManualClock())))
    return tools


@pytest.mark.parametrize("request_text,offered", [
    ("How do I check the logs of a docker container?", []),
    ("What is a good name for a cat?", []),
    ("Tell me a joke.", []),
    ("remind me in 10 minutes to take the pizza out", ["calculator", "timer"]),
    ("what is 3.5% of 1,240 plus 17", ["calculator"]),
    ("what day of the week is Christmas this year?", ["clock"]),
    ("how many seconds are in a fortnight", ["calculator", "timer"]),
    ("cancel the pizza timer", ["timer"]),
])
def test_a_request_is_offered_the_built_in_tools_it_could_need(request_text, offered):
    assert [t.name for t in offered_for(request_text, all_tools()).specs()] == offered


def test_a_tool_parley_does_not_know_is_always_offered():
    tools = all_tools()
    tools.register(Tool(ToolSpec("weather", "The forecast.", {"type": "object"}),
                        lambda _: "sunny", lambda _: "Checking the weather"))
    assert [t.name for t in offered_for("Tell me a joke.", tools).specs()] == ["weather"]


def test_a_question_needing_no_tool_reaches_the_model_without_them():
    model = ScriptedChatModel()
    conversation = Conversation(model, all_tools())
    model.enqueue("Run docker logs with the container's name.", "Try docker logs -f.")
    conversation.reply("How do I check the logs of a docker container?", lambda e: None)
    conversation.reply("And to follow them?", lambda e: None)
    assert model.offered == [[], ["conversation_history"]]


def test_a_timer_started_without_its_length_is_not_run():
    timers = Timers(ManualClock())
    tools = builtin_tools()
    tools.register(timer_tool(timers))
    model = ScriptedChatModel()
    conversation = Conversation(model, tools)
    model.enqueue('{"name": "timer", "arguments": {"action": "start"}}',
                  "How long should the timer run?")
    events: list = []
    done = conversation.reply("set a timer", events.append)
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.is_error and timers.running() == []
    assert done.text == "How long should the timer run?"
    assert [e.name for e in events if isinstance(e, ToolCall)] == ["timer"]
