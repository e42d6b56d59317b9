"""The OpenAI-compatible backend against real HTTP servers on loopback."""

import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from assistant.conversation import Conversation
from assistant.events import Error, ReplyDone
from assistant.tools import builtin_tools
from models.base import PromptMessage, TextChunk
from models.embedded import default_llm
from models.errors import EngineError
from models.openai_compat import OpenAIChatModel, RemoteModelError
from models.openai_format import openai_messages


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server():
    """llama-cpp-python's own server serving the embedded GGUF."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(default_llm()),
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--verbose", "False"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    for _ in range(120):
        try:
            if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.5)
    else:
        process.kill()
        pytest.fail("llama_cpp.server did not start")
    yield url
    process.terminate()
    process.wait(10)


@pytest.mark.real
def test_streams_a_reply_and_counts_tokens_with_the_server(llama_server):
    model = OpenAIChatModel(llama_server, context_size=2048)
    assert model.count_tokens(PromptMessage("user", "hello there")) > 6
    assert model.counts_exactly
    chunks = list(model.stream([PromptMessage("user", "Say hello.")], [], 20))
    assert "".join(c.text for c in chunks if isinstance(c, TextChunk)).strip()
    assert chunks[-1].prompt_tokens > 0


@pytest.mark.real
def test_conversation_through_the_server(llama_server):
    conversation = Conversation(OpenAIChatModel(llama_server, context_size=2048),
                                builtin_tools())
    events: list = []
    done = conversation.reply("Name a fruit.", events.append)
    assert isinstance(done, ReplyDone) and done.text
    assert [m.role for m in conversation.history.messages] == ["user", "assistant"]


class Garbage(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server API
        if "slow" in self.server.mode:
            time.sleep(3)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"<html>definitely not a stream</html>\n")

    def log_message(self, *args):
        pass


@pytest.fixture(params=["garbage", "slow"])
def bad_server(request):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Garbage)
    server.mode = request.param
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield request.param, f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def test_garbage_or_slow_server_is_a_clear_error_and_keeps_the_conversation(bad_server):
    mode, url = bad_server
    conversation = Conversation(OpenAIChatModel(url, timeout=1.0), builtin_tools())
    conversation.history.add("user", "earlier")
    conversation.history.add("assistant", "kept")
    events: list = []
    assert conversation.reply("hello", events.append) is None
    message = next(e for e in events if isinstance(e, Error)).message
    expected = "did not answer within" if mode == "slow" else "OpenAI-compatible"
    assert expected in message and url in message
    assert [m.content for m in conversation.history.messages] == ["earlier", "kept"]


def test_server_that_is_down():
    url = f"http://127.0.0.1:{free_port()}/v1"
    conversation = Conversation(OpenAIChatModel(url), builtin_tools())
    events: list = []
    conversation.reply("hello", events.append)
    error = next(e for e in events if isinstance(e, Error))
    assert "cannot reach the model server" in error.message


def test_remote_failures_are_engine_errors():
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(RemoteModelError, match="cannot reach the model server") as caught:
        list(OpenAIChatModel(url).stream([PromptMessage("user", "hello")], [], 8))
    assert isinstance(caught.value, EngineError)


def test_servers_get_each_tool_result_after_its_call_in_the_openai_shape():
    user, call, result = openai_messages([
        PromptMessage("user", "What time is it?"),
        PromptMessage("tool", "12:00", "clock", {"zone": "UTC"})])
    assert user == {"role": "user", "content": "What time is it?"}
    assert call == {"role": "assistant", "content": None, "tool_calls": [{
        "id": "call00001", "type": "function",
        "function": {"name": "clock", "arguments": '{"zone": "UTC"}'}}]}
    # No "name" on the result: OpenAI documents none there, and some servers refuse it.
    assert result == {"role": "tool", "tool_call_id": "call00001", "content": "12:00"}
