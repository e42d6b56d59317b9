"""A reply is offered the built-in tools its request could need; everything else is offered
always, and a local answer may use any tool."""

import pytest

from assistant.conversation import Conversation
from assistant.events import ToolCall, ToolResult
from assistant.timer_tool import timer_tool
from assistant.timers import Timers
from assistant.tool_offers import offered_for
from assistant.tools import Tool, builtin_tools
from models.base import ModelCapabilities, ToolSpec
from tests.support.clocks import ManualClock
from tests.support.fakes import ScriptedChatModel


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


def test_a_call_made_again_in_the_same_reply_is_not_run_and_the_model_is_told_to_answer():
    asked: list[str] = []
    tools = all_tools()
    tools.register(Tool(ToolSpec("world_time", "The time in a zone.", {"type": "object"}),
                        lambda args: asked.append(args["zone"]) or "20:33",
                        lambda _: "Asking the world clock", read_only=True))
    model = ScriptedChatModel()
    tokyo = '<tool_call>{"name": "world_time", "arguments": {"zone": "Asia/Tokyo"}}</tool_call>'
    model.enqueue(tokyo, tokyo, "It is 20:33 in Tokyo.")
    events: list = []
    done = Conversation(model, tools).reply("What time is it in Tokyo?", events.append)
    results = [e for e in events if isinstance(e, ToolResult)]
    assert asked == ["Asia/Tokyo"]
    assert [r.is_error for r in results] == [False, True]
    assert results[1].content.startswith("Error: world_time was called with these arguments "
                                         "already; its result is above.")
    assert done.text == "It is 20:33 in Tokyo."


def native_tool_model() -> ScriptedChatModel:
    """A model whose chat template reads tools itself, as Qwen's and Llama 3.x's do."""
    model = ScriptedChatModel()
    model.capabilities = ModelCapabilities(native_tools=True, prefill=True)
    return model


def test_a_question_needing_no_tool_reaches_the_model_without_them():
    model = native_tool_model()
    conversation = Conversation(model, all_tools())
    model.enqueue("Run docker logs with the container's name.", "Try docker logs -f.")
    conversation.reply("How do I check the logs of a docker container?", lambda e: None)
    conversation.reply("And to follow them?", lambda e: None)
    assert model.offered == [[], ["conversation_history"]]


def test_a_model_told_its_tools_in_the_prompt_is_offered_them_all_every_time():
    # Its tools are written into the system prompt: the same every turn, so the beginning
    # of the prompt prepared between turns is the one the reply uses.
    model = ScriptedChatModel()
    conversation = Conversation(model, all_tools())
    conversation.reply("Name a colour.", lambda e: None)
    conversation.reply("Name another one.", lambda e: None)
    everything = ["clock", "calculator", "timer"]
    assert model.offered == [everything, [*everything, "conversation_history"]]


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


def test_a_timer_set_by_the_model_is_said_and_ends_the_reply():
    timers = Timers(ManualClock())
    tools = builtin_tools()
    tools.register(timer_tool(timers))
    model = ScriptedChatModel()
    conversation = Conversation(model, tools)
    # What the 0.5B model did: set the timer, then go on to cancel it.
    model.enqueue('{"name": "timer", "arguments": {"action": "start", "seconds": 600}}',
                  '{"name": "timer", "arguments": {"action": "cancel_all"}}')
    events: list = []
    done = conversation.reply("remind me in 10 minutes to take the pizza out", events.append)
    assert done.text == "Your 10 minute timer is set."
    assert len(timers.running()) == 1 and len(model.prompts) == 1
    assert conversation.history.messages[-1].content == "Your 10 minute timer is set."


@pytest.mark.parametrize("request_text,arguments,refused", [
    ("remind me in 10 minutes", {"action": "cancel_all"}, True),
    ("remind me in 10 minutes", {"action": "pause"}, True),
    ("cancel all my timers", {"action": "cancel_all"}, False),
    ("how long is left on the timer?", {"action": "status"}, False),
])
def test_a_timer_change_runs_only_when_the_request_asks_for_it(request_text, arguments,
                                                               refused):
    timers = Timers(ManualClock())
    timers.start(600, "pizza")
    tools = builtin_tools()
    tools.register(timer_tool(timers))
    output = offered_for(request_text, tools).call("timer", arguments)
    assert output.is_error == refused
    assert (len(timers.running()) == 1) == (refused or arguments["action"] == "status")
