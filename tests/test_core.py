"""The conversation core with a scripted model: turns, tools, budget, fitting, errors."""

from assistant.conversation import Conversation, ReplySettings
from assistant.events import Error, ReplyDone, Sentence, TextDelta, ToolCall, ToolResult
from assistant.tools import builtin_tools
from models.base import CancelToken
from models.errors import EngineError
from tests.support.fakes import ScriptedChatModel


def texts(events: list, kind: type) -> list[str]:
    return [getattr(e, "text", getattr(e, "content", "")) for e in events if isinstance(e, kind)]


def make(context_size: int = 8192, **settings) -> tuple[Conversation, ScriptedChatModel]:
    model = ScriptedChatModel(context_size)
    return Conversation(model, builtin_tools(), ReplySettings(**settings)), model


def test_reply_streams_text_sentences_and_numbers_messages():
    conversation, model = make()
    model.enqueue("Hello there. How can I help?")
    events: list = []
    done = conversation.reply("hi", events.append)
    assert "".join(texts(events, TextDelta)) == "Hello there. How can I help?"
    assert texts(events, Sentence) == ["Hello there.", "How can I help?"]
    assert isinstance(events[-1], ReplyDone) and done.text == "Hello there. How can I help?"
    assert [(m.seq, m.role) for m in conversation.history.messages] == [
        (1, "user"), (2, "assistant")]


def test_tool_call_runs_and_result_goes_back_to_the_model():
    conversation, model = make()
    model.enqueue('<tool_call>{"name": "calculator", "arguments": {"expression": "17*3"}}'
                  '</tool_call>', "It is 51.")
    events: list = []
    conversation.reply("what is 17 times 3", events.append)
    call = next(e for e in events if isinstance(e, ToolCall))
    assert call.label == "Calculating 17*3"
    assert texts(events, ToolResult) == ["17*3 = 51"]
    second_prompt = model.prompts[1]
    assert second_prompt[-1].role == "tool" and second_prompt[-1].content == "17*3 = 51"
    assert "<tool_call>" not in "".join(texts(events, TextDelta))
    tool_message = conversation.history.messages[1]
    assert (tool_message.tool, tool_message.query) == ("calculator", "17*3")


def test_malformed_and_unknown_calls_become_errors_the_model_sees():
    conversation, model = make()
    model.enqueue("<tool_call>{not json</tool_call>",
                  '<tool_call>{"name": "weather", "arguments": {}}</tool_call>',
                  "Sorry, I cannot do that.")
    events: list = []
    done = conversation.reply("weather?", events.append)
    results = [e for e in events if isinstance(e, ToolResult)]
    assert all(r.is_error for r in results) and len(results) == 2
    assert "not valid JSON" in results[0].content
    assert "no tool named 'weather'" in results[1].content
    assert done.text == "Sorry, I cannot do that."


def test_research_budget_then_final_answer_without_tools():
    conversation, model = make(max_tool_calls=2)
    call = '<tool_call>{"name": "clock", "arguments": {}}</tool_call>'
    model.enqueue(call, call, "Done.")
    events: list = []
    conversation.reply("time?", events.append)
    assert model.offered == [["clock", "calculator"], ["clock", "calculator"], []]
    assert len([e for e in events if isinstance(e, ToolCall)]) == 2


def test_fitting_drops_old_research_then_old_exchanges_keeps_current():
    # When the summary cannot be written, fitting drops what does not fit: old
    # research first, then whole exchanges, oldest first.
    conversation, model = make(context_size=1200, answer_tokens=200)
    model.enqueue('<tool_call>{"name": "calculator", "arguments": {"expression": "1+1"}}'
                  '</tool_call>', "A" * 1200, "B" * 1200, "C" * 1200,
                  EngineError("summarizer down"), "fine")
    for question in ["first", "second", "third", "fourth"]:
        conversation.reply(question, lambda e: None)
    assert conversation.summary.covered_through == 0
    last = model.prompts[-1]
    assert last[-1].content == "fourth"
    contents = [m.content for m in last]
    assert "first" not in contents and "1+1 = 2" not in contents
    assert "C" * 1200 in contents


def test_current_message_that_cannot_fit_is_a_clear_error_and_keeps_history():
    conversation, model = make(context_size=2000, answer_tokens=200)
    model.enqueue("Hi.")
    conversation.reply("hello", lambda e: None)
    events: list = []
    assert conversation.reply("x" * 1_000_000, events.append) is None
    error = next(e for e in events if isinstance(e, Error))
    assert "too long" in error.message and "--ctx" in error.message
    assert [m.content for m in conversation.history.messages] == ["hello", "Hi."]


def test_model_failure_keeps_the_conversation():
    conversation, model = make()
    model.enqueue("Hi.", EngineError("server went away"))
    conversation.reply("hello", lambda e: None)
    events: list = []
    conversation.reply("again", events.append)
    assert "server went away" in next(e for e in events if isinstance(e, Error)).message
    assert len(conversation.history) == 2


def test_a_bug_inside_the_core_is_logged_with_its_traceback_and_keeps_the_conversation(
        monkeypatch, caplog):
    conversation, model = make()
    model.enqueue("Hi.")
    conversation.reply("hello", lambda e: None)

    def broken_fit(*args, **kwargs):
        raise KeyError("a bug in fitting")

    monkeypatch.setattr("assistant.prompt.fit_history", broken_fit)
    events: list = []
    with caplog.at_level("DEBUG", logger="assistant"):
        assert conversation.reply("again", events.append) is None
    error = next(e for e in events if isinstance(e, Error))
    assert error.stage == "internal" and "a bug in fitting" in error.message
    assert "--debug" in error.message
    record = next(r for r in caplog.records if r.levelname == "ERROR")
    assert record.exc_info and "broken_fit" in caplog.text
    assert [m.content for m in conversation.history.messages] == ["hello", "Hi."]


def test_cancel_stops_reply_and_keeps_what_was_said():
    conversation, model = make()
    model.enqueue("One. Two. Three. Four. Five. Six.")
    token = CancelToken()
    events: list = []

    def emit(event):
        events.append(event)
        if isinstance(event, Sentence):
            token.cancel()

    done = conversation.reply("count", emit, token)
    assert done.cancelled and done.text.startswith("One.") and "Six" not in done.text
    assert conversation.history.messages[-1].content == done.text


def test_the_prepared_prefix_is_the_beginning_of_the_next_replys_prompt():
    conversation, model = make()
    model.enqueue("Hi.", '<tool_call>{"name": "clock", "arguments": {}}</tool_call>', "Noon.")
    conversation.reply("hello", lambda e: None)
    conversation.prepare_next()
    conversation.reply("what time is it?", lambda e: None)
    prepared, used = model.prefills[-1], model.prompts[1]
    assert used[:len(prepared)] == prepared and used[len(prepared)].content == "what time is it?"
    conversation.prepare_next()  # after a tool call, its result is in the prefix too
    assert [(m.role, m.content) for m in model.prefills[-1][-3:]] == [
        ("user", "what time is it?"), ("tool", model.prompts[-1][-1].content),
        ("assistant", "Noon.")]
