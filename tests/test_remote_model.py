"""The OpenAI-compatible backend against real HTTP servers on loopback: llama-cpp-python's
own server, and the scripted one of `tests/support/remote_model.py` for what SmolLM2 cannot
be made to do (fail in every way a server can, check a key, have no tokenizer)."""

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from assistant.cli.main import main
from assistant.conversation import Conversation
from assistant.events import ReplyDone
from assistant.tools import builtin_tools
from models.base import PromptMessage, TextChunk
from models.errors import EngineError
from models.openai_compat import OpenAIChatModel, RemoteModelError
from models.openai_format import openai_messages
from tests.support.llama_server import free_port, run_llama_server
from tests.support.remote_model import (
    WAIT_S,
    ScriptedServer,
    chat_from_a_pipe,
    chunk,
    parley_chat,
    said,
    stall,
    status,
    stream,
    text,
)
from tests.support.transcripts import untimed


@pytest.fixture(scope="module")
def llama_server():
    """llama-cpp-python's own server serving the embedded GGUF."""
    with run_llama_server() as url:
        yield url


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
    # Content "", not null: llama-cpp-python's server answers null with HTTP 500.
    assert call == {"role": "assistant", "content": "", "tool_calls": [{
        "id": "call00001", "type": "function",
        "function": {"name": "clock", "arguments": '{"zone": "UTC"}'}}]}
    # No "name" on the result: OpenAI documents none there, and some servers refuse it.
    assert result == {"role": "tool", "tool_call_id": "call00001", "content": "12:00"}


# -- a message's content is never null ------------------------------------------------

@pytest.mark.real
def test_a_tool_result_in_the_history_reaches_llama_cpp_pythons_server(llama_server,
                                                                        monkeypatch, capsys):
    # The local calculator leaves a call and its result in the history; the next message
    # sends them to the server as an assistant message with tool_calls. With null content
    # there, llama-cpp-python's server answered HTTP 500.
    chat_from_a_pipe(monkeypatch, "what is 17 times 23\nName a fruit.\n/history\n")
    assert main(["chat", "--llm-url", llama_server, "--ctx", "2048",
                 "--answer-tokens", "32"]) == 0
    out = capsys.readouterr().out
    assert "The model failed" not in out, out
    assert "#2 tool (calculator): 17 * 23 = 391\n" in untimed(out)
    # A failed reply takes its message back; SmolLM2's answer itself may be empty.
    assert "#4 user: Name a fruit.\n" in untimed(out)


# -- the API key ----------------------------------------------------------------------

KEY = "sk-parley-test-4f7c1e9a2b"


@pytest.mark.parametrize("accepted", [True, False], ids=["accepted", "refused"])
def test_the_api_key_goes_as_a_bearer_token_and_is_never_printed(tmp_path, accepted):
    answers = [stream(text("Hi there."))] * 2
    with ScriptedServer(*answers, tokenizer="extras",
                        api_key=KEY if accepted else "sk-another-key") as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
        env.update(HOME=str(tmp_path), PARLEY_LLM_API_KEY=KEY, COLUMNS="400")
        result = subprocess.run(
            [str(Path(sys.executable).with_name("parley")), "--debug", "chat",
             "--llm-url", server.url, "--no-local-intents"],
            input=b"hello\nagain\n/history\n", capture_output=True, env=env, timeout=120)
    out, err = result.stdout.decode(), result.stderr.decode()
    assert result.returncode == 0, err
    assert {r.headers.get("authorization") for r in server.requests} == {f"Bearer {KEY}"}
    assert {"/extras/tokenize", "/v1/chat/completions"} <= {r.path for r in server.requests}
    if accepted:
        assert "Hi there." in untimed(out) and "#4 assistant: Hi there." in untimed(out)
    else:  # the server's answer quotes the key: the user sees the refusal, not the key
        assert "answered HTTP 401" in said(out) and "Incorrect API key provided: ***" in out
        assert "#1" not in out  # the refused messages were not added
    assert KEY not in out and KEY not in err


def test_without_a_key_no_authorization_is_sent(monkeypatch, capsys):
    with ScriptedServer(stream(text("Hi.")), tokenizer="llama.cpp") as server:
        out, _ = parley_chat(monkeypatch, capsys, server.url, "hello\n")
    assert out == "Hi.\n"
    assert len(server.requests) >= 2  # a count and the reply, at least
    assert all("authorization" not in r.headers for r in server.requests)


# -- counting tokens ------------------------------------------------------------------

TOO_LONG = re.compile(r"it needs about ([\d,]+) tokens and ([\d,]+) are free")


def too_long(out: str) -> list[tuple[int, int]]:
    """(needed, free) of each "too long for the model's context" message."""
    return [(int(a.replace(",", "")), int(b.replace(",", "")))
            for a, b in TOO_LONG.findall(said(out))]


def words(n: int) -> str:
    return " ".join(["abcde"] * n)  # 6 characters a word, 6n - 1 in all


@pytest.mark.parametrize("tokenizer", ["extras", "llama.cpp", None])
def test_tokens_are_counted_by_the_server_or_as_one_per_3_characters(tokenizer, monkeypatch,
                                                                      capsys):
    # Two messages too long for a 2048-token context, 300 words apart: the server counts
    # a token per word, Parley's estimate a token per 3 characters (2 a word).
    with ScriptedServer(tokenizer=tokenizer) as server:
        out, _ = parley_chat(monkeypatch, capsys, server.url,
                             f"{words(4000)}\n{words(4300)}\n/history\n", "--ctx", "2048")
    (first, room), (second, same_room) = too_long(out)
    assert room == same_room and first > room
    assert second - first == (600 if tokenizer is None else 300)
    assert "#1" not in out and server.chats == []  # nothing that cannot fit is sent
    asked = [r for r in server.requests if "tokenize" in r.path]
    if tokenizer == "extras":
        assert {r.path for r in asked} == {"/extras/tokenize"}
        assert any(r.body.get("input") == words(4000) for r in asked)
    elif tokenizer == "llama.cpp":  # after llama-cpp-python's endpoint answered 404
        assert any(r.body.get("content") == words(4000) for r in asked)
    else:  # each endpoint was tried once; then Parley estimates without asking again
        assert sorted(r.path for r in asked) == ["/extras/tokenize", "/tokenize"]


def test_a_message_fits_by_3_character_counts_to_the_last_token(monkeypatch, capsys):
    # Without a tokenize endpoint, a message of 3 × (free - overhead) characters exactly
    # fills the room and is sent; 3 characters more and it is refused.
    with ScriptedServer() as server:
        out, _ = parley_chat(monkeypatch, capsys, server.url, "x" * 30000 + "\n",
                             "--ctx", "2048")
    needed, room = too_long(out)[0]
    overhead = needed - 10000
    fits, over = "y" * (3 * (room - overhead)), "z" * (3 * (room - overhead + 1))
    with ScriptedServer(stream(text("Got it."))) as server:
        out, _ = parley_chat(monkeypatch, capsys, server.url, f"{over}\n{fits}\n/history\n",
                             "--ctx", "2048")
    assert too_long(out) == [(room + 1, room)]
    assert "Got it.\n#1 user: yyy" in untimed(out)
    assert [m["content"] for m in server.chats[0]["messages"]][1:] == [fits]


# -- a server that is down, slow, or answers garbage ----------------------------------

def cut(handler) -> None:
    """A stream the server abandons: a first event, then the connection closes mid-body."""
    handler.start(200, "text/event-stream")
    handler.send_chunk(f"data: {json.dumps(chunk({'content': 'Part'}))}\n\n".encode())


FAILURES = {  # how the server answers the second message, and what the user is told
    "slow": (stall, "did not answer within 1 s"),
    "slow mid-stream": (stream([chunk({"role": "assistant", "content": "Part"})], stall=True),
                        "did not answer within 1 s"),
    "html": (status(200, "<html><body>Welcome to nginx!</body></html>\n", "text/html"),
             "did not answer with an OpenAI-compatible stream"),
    "http 500": (status(500, '{"error": {"code": 500, "message": "model crashed"}}'),
                 'answered HTTP 500: {"error": {"code": 500, "message": "model crashed"}}'),
    "not json": (stream(["data: {'choices': oops"]), "sent a stream event that is not JSON"),
    "llama.cpp error line": (
        stream([chunk({"role": "assistant", "content": None}),
                'error: {"code": 400, "message": "the request exceeds the available context '
                'size, try increasing it", "type": "exceed_context_size_error"}']),
        "reported: the request exceeds the available context size, try increasing it"),
    "error event": (stream([{"error": {"message": "CUDA out of memory", "code": 500}}]),
                    "reported: CUDA out of memory"),
    "cut": (cut, "failed: peer closed connection"),
}


@pytest.mark.parametrize("failure", FAILURES)
def test_a_failing_server_is_a_clear_error_and_the_conversation_goes_on(failure, monkeypatch,
                                                                        capsys):
    answer, told = FAILURES[failure]
    with ScriptedServer(stream(text("Hi.")), answer, stream(text("Back."))) as server:
        out, err = parley_chat(monkeypatch, capsys, server.url,
                               "hello\nagain\nonce more\n/history\n", "--llm-timeout", "1")
    assert f"! The model failed to answer (the model server at {server.url}" in said(out) \
        or f"! The model failed to answer (the server at {server.url}" in said(out), out
    assert told in said(out) and "The conversation is kept; try again." in out
    assert untimed(out).endswith("Back.\n#1 user: hello\n#2 assistant: Hi.\n"
                        "#3 user: once more\n#4 assistant: Back.\n"), out
    last = [m["content"] for m in server.chats[2]["messages"][1:]]
    assert last == ["hello", "Hi.", "once more"]
    assert "Traceback" not in err


def test_a_server_hung_on_every_request_fails_at_the_first_one(monkeypatch, capsys):
    # Waiting once per endpoint (two token counts, then the reply) would keep the user
    # several times --llm-timeout, to be told it was waited for once.
    with ScriptedServer(tokenizer="extras") as server:
        server.answer_for = lambda *request: stall
        out, _ = parley_chat(monkeypatch, capsys, server.url, "hello\n/history\n",
                             "--llm-timeout", "1")
    assert "did not answer within 1 s" in said(out) and "#1" not in out
    # The reply gave up at its first count; the next prompt's preparation tried once more.
    assert {r.path for r in server.requests} == {"/extras/tokenize"}


def test_a_server_that_goes_down_is_a_clear_error_and_the_conversation_is_kept(monkeypatch,
                                                                                capsys):
    read, write = os.pipe()
    with ScriptedServer(stream(text("Hi."))) as server, open(write, "w") as typing:
        def type_then_stop_the_server() -> None:
            typing.write("hello\n")
            typing.flush()
            assert server.answered.acquire(timeout=WAIT_S)
            server.stop()
            typing.write("again\n/history\n")
            typing.close()

        typist = threading.Thread(target=type_then_stop_the_server)
        typist.start()
        out, _ = parley_chat(monkeypatch, capsys, server.url, open(read))
        typist.join(WAIT_S)
    assert f"cannot reach the model server at {server.url}; is it running?" in said(out)
    assert untimed(out).endswith("#1 user: hello\n#2 assistant: Hi.\n"), out
