"""Tool calls through an OpenAI-compatible server (`--llm-url`), and the scripted server
that streams them: SmolLM2 behind llama-cpp-python's server never calls a tool, so a small
real HTTP server on loopback streams what llama.cpp's server, vLLM and Ollama stream.

Every chat runs the real `main()` with a piped stdin, as `parley chat --llm-url URL`."""

import io
import json
import os
import shutil
import struct
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from assistant.cli.main import main
from tests.fakes import untimed

WAIT_S = 60
"""The longest a scripted server holds a request, so no test can hang."""

# -- the scripted server -------------------------------------------------------------

def chunk(delta: dict | None = None, finish: str | None = None, **extra) -> dict:
    """One `chat.completion.chunk` event as llama.cpp's server sends it."""
    return {"choices": [{"finish_reason": finish, "index": 0, "delta": delta or {}}],
            "created": 1700000000, "id": "chatcmpl-scripted", "model": "scripted",
            "object": "chat.completion.chunk", **extra}


USAGE = {**chunk(), "choices": [],  # include_usage's last event
         "usage": {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55}}


def text(*pieces: str) -> list[dict]:
    """The events of a streamed answer: the role, a delta per piece, the stop, the usage."""
    return [chunk({"role": "assistant", "content": None}),
            *(chunk({"content": piece}) for piece in pieces), chunk(finish="stop"), USAGE]


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    """Lower-case names."""
    body: dict


Answer = Callable[["ScriptedHandler"], None]


def stream(events: list, stall: bool = False) -> Answer:
    """Stream `events` (dicts as JSON `data:` events, strings as raw lines), then `[DONE]`,
    or hold the connection open without a word more when `stall`."""
    def answer(handler: "ScriptedHandler") -> None:
        handler.start(200, "text/event-stream")
        for event in events:
            line = event if isinstance(event, str) else f"data: {json.dumps(event)}"
            handler.send_chunk(f"{line}\n\n".encode())
        if stall:
            handler.server.script.released.wait(WAIT_S)
            return
        handler.send_chunk(b"data: [DONE]\n\n")
        handler.send_chunk(b"")
    return answer


def status(code: int, body: str, content_type: str = "application/json") -> Answer:
    def answer(handler: "ScriptedHandler") -> None:
        handler.start(code, content_type)
        handler.send_chunk(body.encode())
        handler.send_chunk(b"")
    return answer


def stall(handler: "ScriptedHandler") -> None:
    """Read the request and say nothing until the test ends (or WAIT_S), then hang up."""
    handler.server.script.released.wait(WAIT_S)
    handler.close_connection = True  # else http.server waits for the next request


class ScriptedHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # chunked streams, as uvicorn and llama.cpp's httplib
    server: "ScriptedHTTPServer"

    def do_POST(self):  # noqa: N802 - http.server API
        script = self.server.script
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        headers = {k.lower(): v for k, v in self.headers.items()}
        with script.lock:
            script.requests.append(Request(self.path, headers, body))
            answer = script.answer_for(self.path, headers, body)
        try:
            answer(self)
        except (BrokenPipeError, ConnectionResetError):
            # Parley hung up first: it stops reading a stream it found broken. A real
            # server shrugs that off; a traceback here would land in the test's stderr.
            self.close_connection = True
        finally:
            if self.path.endswith("/chat/completions"):
                script.answered.release()

    def start(self, code: int, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()

    def send_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def log_message(self, *args):
        pass


class ScriptedHTTPServer(ThreadingHTTPServer):
    script: "ScriptedServer"


class ScriptedServer:
    """An OpenAI-compatible server on 127.0.0.1 that answers each chat request with the
    next scripted answer and records every request.

    `tokenizer` is "extras" (llama-cpp-python's /extras/tokenize), "llama.cpp" (/tokenize)
    or None (both 404); it counts a token per word. With `api_key`, a request without
    that bearer token gets HTTP 401 quoting the key it brought, as some proxies do.
    """

    def __init__(self, *answers: Answer, tokenizer: str | None = None,
                 api_key: str | None = None) -> None:
        self.answers = list(answers)
        self.tokenizer = tokenizer
        self.api_key = api_key
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self.released = threading.Event()
        self.answered = threading.Semaphore(0)
        """Released once per chat request fully answered."""
        self._http = ScriptedHTTPServer(("127.0.0.1", 0), ScriptedHandler)
        self._http.daemon_threads = True
        self._http.script = self
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()

    def answer_for(self, path: str, headers: dict[str, str], body: dict) -> Answer:
        given = headers.get("authorization", "")
        if self.api_key and given != f"Bearer {self.api_key}":
            return status(401, json.dumps({"error": {
                "code": 401, "type": "authentication_error",
                "message": f"Incorrect API key provided: {given.removeprefix('Bearer ')}"}}))
        tokenize = {"extras": ("/extras/tokenize", "input"),
                    "llama.cpp": ("/tokenize", "content")}.get(self.tokenizer or "")
        if tokenize and path == tokenize[0]:
            words = len(str(body.get(tokenize[1], "")).split())
            return status(200, json.dumps({"tokens": list(range(1000, 1000 + words))}))
        if path == "/v1/chat/completions" and self.answers:
            return self.answers.pop(0)
        return status(404, json.dumps({"detail": "Not Found"}))

    @property
    def chats(self) -> list[dict]:
        """The bodies of the chat requests, in order."""
        return [r.body for r in self.requests if r.path == "/v1/chat/completions"]

    def stop(self) -> None:
        """Stop listening: from now on the server is down."""
        self.released.set()
        self._http.shutdown()
        self._http.server_close()

    def __enter__(self) -> "ScriptedServer":
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()


def piped(monkeypatch, stdin) -> None:
    """No PARLEY_* variables, no config file, and `stdin` (text, or a file the test writes
    to) piped in, for the real `main()`."""
    for name in [name for name in os.environ if name.startswith("PARLEY_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", "/nonexistent")  # no ~/.config/parley/config.toml
    monkeypatch.setenv("COLUMNS", "400")  # long error lines stay on one line
    if isinstance(stdin, str):
        stdin = io.TextIOWrapper(io.BytesIO(stdin.encode()))
    monkeypatch.setattr(sys, "stdin", stdin)


def parley_chat(monkeypatch, capsys, url: str, stdin, *flags: str) -> tuple[str, str]:
    """`parley chat --llm-url URL` with `stdin` piped in; returns stdout and stderr. Local
    intents are off, so the server answers everything."""
    piped(monkeypatch, stdin)
    assert main(["chat", "--llm-url", url, "--no-local-intents", *flags]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def said(out: str) -> str:
    """Output with every run of whitespace as one space (the terminal may wrap)."""
    return " ".join(out.split())


# -- native tool calls ----------------------------------------------------------------

PIECES = ('{"expr', 'ession": "17', '*23"}')
"""The call's arguments, split over chunks as servers stream them."""


def native_call(style: str) -> list[dict]:
    """A calculator call streamed in the shape each server sends."""
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


@pytest.mark.parametrize("style", ["llama.cpp", "vllm", "ollama"])
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
    piped(monkeypatch, "What is 17 times 23?\n/history\n")
    assert main(["chat", "--llm-model", str(model), "--ctx", "2048", "--no-local-intents",
                 "--answer-tokens", "24"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("· Calculating 17*23…\n") and "<tool_call>" not in out, out
    assert "#2 tool (calculator): 17*23 = 391\n" in untimed(out)
    asked, answering = prompts
    tools = asked.split("<tools>\n")[1].split("\n</tools>")[0].splitlines()
    assert [json.loads(t)["function"]["name"] for t in tools] == ["clock", "calculator", "timer"]
    assert "You can use tools" not in asked  # not Parley's own description
    assert answering.endswith(
        '<|im_start|>user\nWhat is 17 times 23?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n'
        '{"name": "calculator", "arguments": {"expression": "17*23"}}\n</tool_call><|im_end|>\n'
        '<|im_start|>user\n<tool_response>\n17*23 = 391\n</tool_response><|im_end|>\n'
        '<|im_start|>assistant\n')
