"""Tool calls through an OpenAI-compatible server (`--llm-url`): SmolLM2 behind
llama-cpp-python's server never chooses a tool (`tests/test_real_server_tools.py` names one
for it), so a small real HTTP server on loopback (`tests/support/remote_model.py`) streams
what llama.cpp's server, vLLM, Ollama and llama-cpp-python's server stream.

Every chat runs the real `main()` with a piped stdin, as `parley chat --llm-url URL`."""

import json
import shutil
import struct
from pathlib import Path

import pytest

from assistant.cli.main import main
from tests.support.remote_model import (
    USAGE,
    ScriptedServer,
    chat_from_a_pipe,
    chunk,
    parley_chat,
    stream,
    text,
)
from tests.support.transcripts import untimed

# -- native tool calls ----------------------------------------------------------------

PIECES = ('{"expr', 'ession": "17', '*23"}')
"""The call's arguments, split over chunks as servers stream them."""


def native_call(style: str) -> list[dict]:
    """A calculator call streamed in the shape each server sends."""
    if style == "llama-cpp-python":  # every delta repeats the id and the whole name; no usage
        def delta(arguments: str) -> dict:
            return {"role": None, "content": None,
                    "function_call": {"name": "calculator", "arguments": arguments},
                    "tool_calls": [{"index": 0, "id": "call__0_calculator_cmpl-7f3a",
                                    "type": "function",
                                    "function": {"name": "calculator", "arguments": arguments}}]}
        nothing = {"role": None, "content": None, "function_call": None, "tool_calls": None}
        return [chunk({**nothing, "role": "assistant"}), *(chunk(delta(p)) for p in PIECES),
                chunk(nothing, finish="tool_calls")]
    if style == "ollama":  # the whole call in one chunk
        return [chunk({"role": "assistant", "content": "", "tool_calls": [{
                    "id": "call_9xk2", "index": 0, "type": "function", "function": {
                        "name": "calculator", "arguments": '{"expression":"17*23"}'}}]}),
                chunk({"role": "assistant", "content": ""}, finish="tool_calls"), USAGE]
    # llama.cpp's server: null content, then the name with empty arguments; vLLM: "",
    # then the name alone
    first = {"role": "assistant", "content": None if style == "llama.cpp" else ""}
    function = {"name": "calculator", **({"arguments": ""} if style == "llama.cpp" else {})}
    return [chunk(first),
            chunk({"tool_calls": [{"index": 0, "id": "chatcmpl-tool-5c1d", "type": "function",
                                   "function": function}]}),
            *(chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
              for piece in PIECES),
            chunk(finish="tool_calls"), USAGE]


def replayed_call(body: dict) -> tuple[dict, str]:
    """The call and its result that end a request's messages, their ids checked to match:
    (the call's function, the result)."""
    call, result = body["messages"][-2:]
    (tool_call,) = call["tool_calls"]
    assert call == {"role": "assistant", "content": "", "tool_calls": [tool_call]}
    assert result == {"role": "tool", "tool_call_id": tool_call["id"], "content": result["content"]}
    assert tool_call["type"] == "function"
    return tool_call["function"], result["content"]


@pytest.mark.parametrize("style", ["llama.cpp", "vllm", "ollama", "llama-cpp-python"])
def test_native_tool_calls_run_and_their_result_goes_back_to_the_server(style, monkeypatch,
                                                                        capsys):
    with ScriptedServer(stream(native_call(style)), stream(text("17*23 ", "is 391."))) as server:
        out, err = parley_chat(monkeypatch, capsys, server.url,
                               "Multiply 17 by 23 for me\n/history\n")
    assert untimed(out) == ("· Calculating 17*23…\n17*23 is 391.\n"
                            "#1 user: Multiply 17 by 23 for me\n"
                            "#2 tool (calculator): 17*23 = 391\n#3 assistant: 17*23 is 391.\n"), err
    asked, answered = server.chats
    assert asked["stream"] is True
    offered = {t["function"]["name"]: t["function"]["parameters"] for t in asked["tools"]}
    assert offered["calculator"]["required"] == ["expression"]
    assert answered["messages"][:-2] == asked["messages"]
    assert replayed_call(answered) == (
        {"name": "calculator", "arguments": '{"expression": "17*23"}'}, "17*23 = 391")


# -- --llm-tool-choice -------------------------------------------------------------------

CLOCK = {"type": "function", "function": {"name": "clock"}}


@pytest.mark.parametrize("choice, sent", [
    (None, [None, None]),  # the server's default
    ("auto", ["auto", "auto"]),
    ("clock", [CLOCK, CLOCK]),
    # Named, conversation_history is asked for once it is offered: from the second message.
    ("conversation_history", [None, {"type": "function",
                                     "function": {"name": "conversation_history"}}]),
])
def test_the_tool_choice_goes_with_the_tools_and_never_without(choice, sent, monkeypatch,
                                                                capsys):
    clock_call = [chunk({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                                         "function": {"name": "clock", "arguments": "{}"}}]}),
                  chunk(finish="tool_calls")]
    flags = ["--max-tool-calls", "1"] + (["--llm-tool-choice", choice] if choice else [])
    with ScriptedServer(stream(clock_call), stream(text("It is noon.")),
                        stream(text("Hi."))) as server:
        out, err = parley_chat(monkeypatch, capsys, server.url,
                               "What time is it?\nAnd the time now?\n", *flags)
    assert out.startswith("· Checking the clock…\n") and "! " not in out, err
    first, answering, second = server.chats
    assert [body.get("tool_choice") for body in (first, second)] == sent
    # The answer after the last call the budget allows is asked for without tools, and a
    # tool_choice without tools is an error to OpenAI's API.
    assert "tools" not in answering and "tool_choice" not in answering


def test_a_named_tool_choice_is_not_sent_with_a_request_that_is_not_offered_that_tool(
        monkeypatch, capsys):
    # "hello" could not need the clock, so the clock is not offered, and a tool_choice naming
    # a tool the request does not carry would be refused by the server.
    with ScriptedServer(stream(text("Hi."))) as server:
        parley_chat(monkeypatch, capsys, server.url, "hello\n", "--llm-tool-choice", "clock")
    (only,) = server.chats
    assert "tool_choice" not in only
    assert "clock" not in [tool["function"]["name"] for tool in only.get("tools", [])]


def test_an_unknown_tool_choice_is_one_line_naming_the_tools(monkeypatch, capsys):
    with ScriptedServer() as server:
        chat_from_a_pipe(monkeypatch, "hello\n")
        assert main(["chat", "--llm-url", server.url, "--llm-tool-choice", "weather"]) == 2
    assert server.requests == []
    assert ("--llm-tool-choice 'weather' is neither auto, required, none nor a tool's name "
            "(clock, calculator, timer, conversation_history)") in capsys.readouterr().err


def test_tool_call_text_in_the_content_is_parsed_too(monkeypatch, capsys):
    # A model whose server does not parse its calls writes them as text, tag split too.
    pieces = ("<tool", '_call>{"name": "calculator", "arg', 'uments": {"expression": "6*7"}}',
              "</tool_", "call>")
    with ScriptedServer(stream(text(*pieces)), stream(text("That is 42."))) as server:
        out, err = parley_chat(monkeypatch, capsys, server.url, "Six sevens?\n/history\n")
    assert untimed(out) == ("· Calculating 6*7…\nThat is 42.\n#1 user: Six sevens?\n"
                            "#2 tool (calculator): 6*7 = 42\n#3 assistant: That is 42.\n"), err
    assert replayed_call(server.chats[1]) == (
        {"name": "calculator", "arguments": '{"expression": "6*7"}'}, "6*7 = 42")


@pytest.mark.parametrize("name, arguments, error", [
    ("calculator", '{"expression": "17*', "the tool call's arguments are not JSON"),
    ("weather", '{"city": "Oslo"}', "there is no tool named 'weather'"),
])
def test_a_malformed_or_unknown_native_call_is_an_error_the_model_reads(name, arguments, error,
                                                                        monkeypatch, capsys):
    call = chunk({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                                  "function": {"name": name, "arguments": arguments}}]})
    with ScriptedServer(stream([call, chunk(finish="tool_calls")]),
                        stream(text("Sorry, I could not."))) as server:
        out, err = parley_chat(monkeypatch, capsys, server.url, "Try it\n")
    assert error in out and out.endswith("Sorry, I could not.\n"), err
    result = server.chats[1]["messages"][-1]
    assert result["role"] == "tool" and error in result["content"]


# -- a GGUF whose own chat template knows tools ----------------------------------------

# Qwen2.5's template (its tool parts, whitespace folded): tools in a <tools> block of the
# system message, calls as <tool_call> JSON with the arguments as an object, results as
# <tool_response> in a user turn.
QWEN_TEMPLATE = """\
{%- if tools %}{{- '<|im_start|>system\\n' + messages[0]['content'] }}\
{{- '\\n\\n# Tools\\n\\nYou are provided with function signatures within <tools></tools> XML \
tags:\\n<tools>' }}{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}\
{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and \
arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{"name": <function-name>, \
"arguments": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}\
{%- else %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}{%- endif %}
{%- for message in messages[1:] %}
{%- if message.role == "user" or (message.role == "assistant" and not message.tool_calls) %}\
{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
{%- elif message.role == "assistant" %}{{- '<|im_start|>assistant' }}\
{%- for tool_call in message.tool_calls %}{%- set tool_call = tool_call.function %}\
{{- '\\n<tool_call>\\n{"name": "' + tool_call.name + '", "arguments": ' }}\
{{- tool_call.arguments | tojson }}{{- '}\\n</tool_call>' }}{%- endfor %}{{- '<|im_end|>\\n' }}
{%- elif message.role == "tool" %}{{- '<|im_start|>user\\n<tool_response>\\n' }}\
{{- message.content + '\\n</tool_response><|im_end|>\\n' }}{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"""


def with_chat_template(source: Path, target: Path, template: str) -> None:
    """Copy a GGUF file with its `tokenizer.chat_template` replaced (GGUF version 3)."""
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    with open(source, "rb") as f:
        head = f.read(16 << 20)  # metadata and tensor descriptions; the weights follow
    at = 0

    def take(n: int) -> bytes:
        nonlocal at
        at += n
        return head[at - n:at]

    def skip(kind: int) -> None:
        if kind == 8:  # a string
            take(struct.unpack("<Q", take(8))[0])
        elif kind == 9:  # an array
            item, count = struct.unpack("<IQ", take(12))
            for _ in range(count):
                skip(item)
        else:
            take(sizes[kind])

    magic, version, tensors, keys = struct.unpack("<4sIQQ", take(24))
    assert (magic, version) == (b"GGUF", 3)
    out, alignment = [head[:24]], 32
    for _ in range(keys):
        start = at
        key = take(struct.unpack("<Q", take(8))[0])
        kind = struct.unpack("<I", take(4))[0]
        value = at
        skip(kind)
        if key == b"tokenizer.chat_template":
            out.append(head[start:value] + struct.pack("<Q", len(template.encode()))
                       + template.encode())
            continue
        if key == b"general.alignment":
            alignment = struct.unpack("<I", head[value:at])[0]
        out.append(head[start:at])
    infos = at
    for _ in range(tensors):  # name, dimensions, type, offset into the weights
        take(struct.unpack("<Q", take(8))[0])
        take(8 * struct.unpack("<I", take(4))[0] + 12)
    out.append(head[infos:at])
    header = b"".join(out)
    with open(source, "rb") as f, open(target, "wb") as g:
        g.write(header + b"\0" * (-len(header) % alignment))
        f.seek(at + -at % alignment)
        shutil.copyfileobj(f, g, 1 << 20)


@pytest.mark.real
def test_a_gguf_whose_template_knows_tools_gets_them_and_its_calls_run(tmp_path, monkeypatch,
                                                                       capsys):
    # SmolLM2 with Qwen2.5's template. SmolLM2 never calls a tool, so its first answer is
    # Qwen's call, written as Qwen writes it; the rest is the real model.
    import llama_cpp

    from models.embedded import default_llm

    model = tmp_path / "smollm2-qwen-template.gguf"
    with_chat_template(default_llm(), model, QWEN_TEMPLATE)
    real, prompts = llama_cpp.Llama.create_completion, []

    def create_completion(self, tokens, max_tokens=16, **kwargs):
        if max_tokens == 1:  # the next prompt processed ahead
            return real(self, tokens, max_tokens=max_tokens, **kwargs)
        prompts.append(self.detokenize(tokens, special=True).decode())
        if len(prompts) > 1:
            return real(self, tokens, max_tokens=max_tokens, **kwargs)
        call = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "17*23"}}\n'
        return ({"choices": [{"text": piece}]} for piece in (call, "</tool_call>"))

    monkeypatch.setattr(llama_cpp.Llama, "create_completion", create_completion)
    chat_from_a_pipe(monkeypatch, "What is 17 times 23?\n/history\n")
    assert main(["chat", "--llm-model", str(model), "--ctx", "2048", "--no-local-intents",
                 "--answer-tokens", "24"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("· Calculating 17*23…\n") and "<tool_call>" not in out, out
    assert "#2 tool (calculator): 17*23 = 391\n" in untimed(out)
    asked, answering = prompts
    tools = asked.split("<tools>\n")[1].split("\n</tools>")[0].splitlines()
    # Rendered by the template itself, with the tools the request could need: a sum.
    assert [json.loads(t)["function"]["name"] for t in tools] == ["calculator"]
    assert "You can use tools" not in asked  # not Parley's own description
    assert answering.endswith(
        '<|im_start|>user\nWhat is 17 times 23?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n'
        '{"name": "calculator", "arguments": {"expression": "17*23"}}\n</tool_call><|im_end|>\n'
        '<|im_start|>user\n<tool_response>\n17*23 = 391\n</tool_response><|im_end|>\n'
        '<|im_start|>assistant\n')
