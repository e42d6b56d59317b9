"""The tool-call forms models write (Hermes/Qwen tags, Llama 3.x, Mistral, fenced and bare
JSON), read from text streamed in any pieces; JSON that is not a call stays text."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assistant.conversation import Conversation
from assistant.events import TextDelta, ToolCall, ToolResult
from assistant.tools import builtin_tools
from models.base import TextChunk, ToolCallChunk, ToolSpec
from models.toolcalls import ToolCallScanner
from tests.support.fakes import ScriptedChatModel
from tests.support.remote_model import ScriptedServer, parley_chat, stream, text
from tests.support.transcripts import untimed

PROPERTY = settings(max_examples=150, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

TIMER = ToolCallChunk("timer", {"action": "start", "seconds": 600, "name": "pizza"})
CLOCK = ToolCallChunk("clock", {})
SUM = ToolCallChunk("calculator", {"expression": "0.035 * 1240 + 17"})
TIMER_JSON = '{"name": "timer", "arguments": {"action": "start", "seconds": 600, "name": "pizza"}}'

FORMS = {
    "hermes tags": ('<tool_call>\n' + TIMER_JSON + '\n</tool_call>', [TIMER]),
    "tags, unclosed": ('<tool_call>{"name": "clock", "arguments": {}}', [CLOCK]),
    "fenced json": ('```json\n' + TIMER_JSON + '\n```', [TIMER]),
    "bare fence": ('```\n{"name": "clock", "parameters": {}}\n```', [CLOCK]),
    "bare object": (TIMER_JSON, [TIMER]),
    "bare object, wrapped": ('{"type": "function", "function": {"name": "calculator", '
                             '"arguments": "{\\"expression\\": \\"0.035 * 1240 + 17\\"}"}}',
                             [SUM]),
    "llama python_tag": ('<|python_tag|>{"name": "clock", "parameters": {}}', [CLOCK]),
    "llama bare": ('{"name": "calculator", "parameters": {"expression": "0.035 * 1240 + 17"}}',
                   [SUM]),
    "mistral list": ('[TOOL_CALLS] [{"name": "clock", "arguments": {}}, {"name": "calculator",'
                     ' "arguments": {"expression": "0.035 * 1240 + 17"}}]', [CLOCK, SUM]),
    "last brace missing": ('{"name": "timer", "parameters": {"action": "start", "seconds": 600,'
                           ' "name": "pizza"}', [TIMER]),
}


def scan(text: str, cuts: list[int] = ()) -> list[TextChunk | ToolCallChunk]:
    """The scanner's output for `text` streamed in pieces cut at `cuts`, with adjacent text
    pieces joined (how the stream was cut must not matter)."""
    scanner, out, last = ToolCallScanner(), [], 0
    for cut in sorted({min(c, len(text)) for c in cuts}) + [len(text)]:
        out.extend(scanner.feed(text[last:cut]))
        last = cut
    out.extend(scanner.finish())
    merged: list = []
    for chunk in out:
        if isinstance(chunk, TextChunk) and merged and isinstance(merged[-1], TextChunk):
            merged[-1] = TextChunk(merged[-1].text + chunk.text)
        elif not isinstance(chunk, TextChunk) or chunk.text:
            merged.append(chunk)
    return merged


CUTS = st.lists(st.integers(0, 200), max_size=8)


@pytest.mark.parametrize("form", FORMS)
@PROPERTY
@given(cuts=CUTS)
def test_every_form_is_a_call_however_it_is_streamed(form, cuts):
    text, calls = FORMS[form]
    assert scan(text, cuts) == calls


@pytest.mark.parametrize("form", [f for f in FORMS if not f.startswith(("bare", "llama bare",
                                                                        "last"))])
@PROPERTY
@given(cuts=CUTS)
def test_words_around_a_marked_or_fenced_call_are_said_and_none_of_the_call(form, cuts):
    text, calls = FORMS[form]
    before, after = "Let me set that up.\n", "\nDone: it will ring."
    if form == "tags, unclosed" or form.startswith(("llama python", "mistral")):
        after = ""  # these run to the end of the reply
    chunks = scan(before + text + after, cuts)
    assert [c for c in chunks if isinstance(c, ToolCallChunk)] == calls
    assert "".join(c.text for c in chunks if isinstance(c, TextChunk)) == before + after


NOT_CALLS = [
    '```json\n{"name": "Ada", "age": 36}\n```',
    '```json\n[1, 2, 3]\n```',
    '{"name": "Ada", "arguments": {}, "age": 36}',
    '```python\nprint({"name": "clock", "arguments": {}})\n```\nRun it with python3.',
    'Use `docker logs <container>`; add ```-f``` to follow.',
    '{"services": {"billing": {"ports": ["8101:8101"]}}}',
    'Sure: {"name": "clock", "arguments": {}} is what a call looks like.',
    '```yaml\nservices:\n  web:\n    ports: ["80:80"]\n```',
    "```json\n{\"name\": \"clock\", \"arguments\": {}}\n{\"name\": \"clock\"}\n```",
    "1 < 2 and [x] {y}",
]


@pytest.mark.parametrize("text", NOT_CALLS)
@PROPERTY
@given(cuts=CUTS)
def test_json_and_code_that_are_not_a_call_stay_text_word_for_word(text, cuts):
    assert scan(text, cuts) == [TextChunk(text)]


MALFORMED = {
    "<tool_call>{not json</tool_call>": "not valid JSON",
    '<tool_call>{"arguments": {}}</tool_call>': "needs",
    '<|python_tag|>brave_search.call(query="docker logs")': "not JSON",
    '[TOOL_CALLS] [{"name": 3}]': "needs",
    '{"name": "timer", "arguments": 600}': "must be an object",
    '```json\n{"name": "calculator", "arguments": "2+"}\n```': "arguments are not JSON",
    "[TOOL_CALLS]": "empty",
}


@pytest.mark.parametrize("text", MALFORMED)
@PROPERTY
@given(cuts=CUTS)
def test_a_malformed_call_is_an_error_and_never_said(text, cuts):
    chunks = scan(text, cuts)
    assert len(chunks) == 1 and isinstance(chunks[0], ToolCallChunk)
    assert MALFORMED[text] in chunks[0].error


TIMER_SPEC = ToolSpec("timer", "Timers.", {"type": "object", "properties": {
    "action": {"type": "string"}, "seconds": {"type": "integer"}, "name": {"type": "string"}}})


@pytest.mark.parametrize("text", [
    '{"name": "timer", "action": "start", "seconds": 600}',
    '```json\n{"name": "timer", "seconds": 600, "action": "start"}\n```',
    '<tool_call>{"name": "timer", "action": "start", "seconds": 600}</tool_call>',
])
def test_a_flat_call_of_an_offered_tool_has_its_arguments_beside_the_name(text):
    scanner = ToolCallScanner(tools=[TIMER_SPEC])
    chunks = [*scanner.feed(text), *scanner.finish()]
    assert chunks == [ToolCallChunk("timer", {"action": "start", "seconds": 600})]


@pytest.mark.parametrize("text", [
    '{"name": "cat", "description": "A fluffy cat."}',  # no such tool
    '{"name": "timer", "colour": "red"}',  # not the timer's arguments
    '{"name": "Ada", "email": "ada@example.com"}',
])
def test_a_flat_object_that_is_no_offered_tool_call_stays_text(text):
    scanner = ToolCallScanner(tools=[TIMER_SPEC])
    assert [*scanner.feed(text), *scanner.finish()] == [TextChunk(text)]


def test_text_goes_out_as_it_comes_and_only_a_possible_call_is_held_back():
    scanner = ToolCallScanner()
    assert list(scanner.feed("You can run docker logs")) == [TextChunk("You can run docker logs")]
    assert list(scanner.feed(" like this: <tool")) == [TextChunk(" like this: ")]
    assert list(scanner.feed("box>")) == [TextChunk("<toolbox>")]
    assert list(scanner.feed("\n```bash\ndocker logs web\n")) == [
        TextChunk("\n"), TextChunk("```bash\n"), TextChunk("docker logs web\n")]
    held = ToolCallScanner()
    assert list(held.feed('{"name": "timer", "arguments": {"action": "st')) == []
    assert list(held.finish()) == [ToolCallChunk("timer", {"action": "st"})]


TEXT = st.text(st.sampled_from('ab {}[]"\n`<>|_:,'), max_size=30)
FORM_TEXT = st.lists(st.sampled_from([text for text, _ in FORMS.values()] + NOT_CALLS
                                     + list(MALFORMED)) | TEXT, max_size=4).map("".join)


@PROPERTY
@given(FORM_TEXT, CUTS)
def test_any_text_gives_the_same_chunks_however_it_is_streamed(text, cuts):
    chunks = scan(text, cuts)
    assert chunks == scan(text)
    if not any(isinstance(c, ToolCallChunk) for c in chunks):
        assert "".join(c.text for c in chunks) == text  # nothing lost, nothing added


@PROPERTY
@given(st.dictionaries(st.text(max_size=6), st.integers() | st.text(max_size=8), max_size=3),
       CUTS)
def test_any_arguments_in_a_fenced_call_come_back_exactly(arguments, cuts):
    text = "```json\n" + json.dumps({"name": "calculator", "arguments": arguments}) + "\n```"
    assert scan(text, cuts) == [ToolCallChunk("calculator", arguments)]


# -- in a conversation ---------------------------------------------------------------


def test_a_fenced_call_runs_and_the_user_hears_the_answer_not_the_json():
    model = ScriptedChatModel(chunk_size=3)
    conversation = Conversation(model, builtin_tools())
    model.enqueue('```json\n{"name": "calculator", "arguments": {"expression": "17 * 3"}}\n```',
                  "It is 51.")
    events: list = []
    done = conversation.reply("what is 17 times 3", events.append)
    assert [e.name for e in events if isinstance(e, ToolCall)] == ["calculator"]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "It is 51."
    assert done.text == "It is 51."
    assert all("{" not in m.content for m in conversation.history.messages
               if m.role == "assistant")


def test_a_call_to_an_unknown_tool_is_an_error_the_model_reads_then_it_answers():
    model = ScriptedChatModel()
    conversation = Conversation(model, builtin_tools())
    model.enqueue('{"name": "joke", "arguments": {}}',
                  "Why did the tomato blush? It saw the salad dressing.")
    events: list = []
    done = conversation.reply("Tell me a joke.", events.append)
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.is_error and "no tool named 'joke'" in result.content
    assert model.prompts[1][-1].content == result.content
    assert done.text.startswith("Why did the tomato")
    assert "joke" not in "".join(e.text for e in events if isinstance(e, TextDelta)).lower()


# -- behind a server that returns calls as text ------------------------------------------


@pytest.mark.parametrize("content", [
    ('{"name": "calculator", ', '"arguments": {"expression": "17*23"}}'),
    ("```json\n", '{"name": "calculator", "parameters": {"expression": "17*23"}}', "\n```"),
])
def test_a_call_a_server_returns_as_text_runs(content, monkeypatch, capsys):
    # llama-cpp-python's server renders the tools through Qwen's template and returns the
    # model's call as content: Parley reads it as a call, and the user never sees it.
    with ScriptedServer(stream(text(*content)), stream(text("17*23 ", "is 391."))) as server:
        out, err = parley_chat(monkeypatch, capsys, server.url, "Multiply 17 by 23 for me\n")
    assert untimed(out) == "· Calculating 17*23…\n17*23 is 391.\n", err
    assert [m["role"] for m in server.chats[1]["messages"]][-2:] == ["assistant", "tool"]
