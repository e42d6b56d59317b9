"""A native tool call through llama-cpp-python's real server (`python -m llama_cpp.server`)
serving the embedded SmolLM2 on loopback.

SmolLM2-135M never chooses a tool on its own, and that server offers tools to the model
only when the request names one in `tool_choice` (it then constrains the call's arguments
with a grammar made from the tool's JSON schema). So Parley names it:
`--llm-tool-choice clock --max-tool-calls 1`. The clock takes no arguments, so the
grammar allows nothing but `{}` and the call is the same at any seed; the server's seed
is pinned anyway, for the words of the answers.
"""

import re

import pytest

from assistant.cli.main import main
from assistant.tools import builtin_tools
from models.base import PromptMessage, TextChunk, ToolCallChunk, UsageChunk
from models.openai_compat import OpenAIChatModel
from tests.support.llama_server import run_llama_server
from tests.support.remote_model import chat_from_a_pipe
from tests.support.transcripts import untimed

pytestmark = pytest.mark.real

CLOCK_RESULT = r"\w+day, \d\d \w+ \d{4}, \d\d:\d\d:\d\d, time zone \S+ \(UTC[+-]\d{4}\)"
"""What the clock tool answers, e.g. "Sunday, 06 December 2026, 06:01:21, time zone UTC
(UTC+0000)"."""


@pytest.fixture(scope="module", params=[None, "chatml-function-calling"],
                ids=["gguf-template", "chatml-function-calling"])
def llama_server(request):
    """The server with the GGUF's own chat template (which shows the model each tool
    result as a `tool` turn) or llama-cpp-python's function-calling one (which shows it
    the tools and its calls); one at a time."""
    chat_format = ["--chat_format", request.param] if request.param else []
    with run_llama_server("--seed", "7", *chat_format) as url:
        yield url


def test_the_servers_streamed_call_is_one_call_with_its_name_once(llama_server):
    # llama-cpp-python repeats the tool's name in every delta of the call's arguments.
    model = OpenAIChatModel(llama_server, context_size=2048, tool_choice="clock")
    question = [PromptMessage("user", "What time is it?")]
    chunks = list(model.stream(question, builtin_tools().specs(), 32))
    calls = [c for c in chunks if isinstance(c, ToolCallChunk)]
    assert [(c.name, c.arguments, c.error) for c in calls] == [("clock", {}, None)]
    assert not "".join(c.text for c in chunks if isinstance(c, TextChunk)).strip()
    assert isinstance(chunks[-1], UsageChunk) and chunks[-1].prompt_tokens > 0


def test_a_native_tool_call_its_result_and_the_next_message_through_the_server(
        llama_server, monkeypatch, capsys):
    chat_from_a_pipe(monkeypatch, "What time is it?\nName a fruit.\n/history\n")
    assert main(["chat", "--llm-url", llama_server, "--no-local-intents",
                 "--llm-tool-choice", "clock", "--max-tool-calls", "1",
                 "--ctx", "2048", "--answer-tokens", "48", "--llm-timeout", "60"]) == 0
    out = untimed(capsys.readouterr().out)
    # No HTTP 500: the server took the call, its result and the next message.
    assert not re.search(r"^! ", out, re.MULTILINE), out  # no error line at all
    # The clock is named for the question that could need it; "Name a fruit." could not,
    # so it is offered no clock and answered in words after the turn with the call.
    assert out.count("· Checking the clock…\n") == 1, out
    replies, history = out.split("#1 user:", 1)
    # Each turn's answer, if SmolLM2 said anything, follows its call and is in the history.
    # /history shows a long message's first 200 characters and "…"; the answer's words
    # follow the clock's result, which is the wall-clock time, so its length varies.
    answers = re.findall(r"^#\d assistant: (.*)$", history, re.MULTILINE)
    for answer in answers:
        assert answer.removesuffix("…") in replies
    # The numbered messages in order: the question, the clock's call and result, the
    # answer (kept only when the model wrote one; its words vary with the build), the next.
    roles = re.findall(r"^#\d (user|tool \(clock\)|assistant): ", "#1 user:" + history,
                       re.MULTILINE)
    assert [r for r in roles if r != "assistant"] == ["user", "tool (clock)", "user"], history
    assert re.search(rf"^#1 user: What time is it\?\n#2 tool \(clock\): {CLOCK_RESULT}\n",
                     "#1 user:" + history, re.MULTILINE), history
    assert re.search(r"^#\d user: Name a fruit\.$", history, re.MULTILINE), history
