"""A scripted OpenAI-compatible server on loopback, streaming what llama.cpp's server, vLLM
and Ollama stream (text, tool calls, errors, stalls), and `parley chat --llm-url` against it
through the real `main()` with a piped stdin."""

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from assistant.cli.main import main
from tests.support.command_line import piped, without_user_settings

WAIT_S = 60
"""The longest a scripted server holds a request, so no test can hang."""


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


def chat_from_a_pipe(monkeypatch, stdin) -> None:
    """None of the user's settings, a 400-column terminal (long error lines stay on one
    line) and `stdin` (text, or a file the test writes to) piped in, for the real `main()`."""
    without_user_settings(monkeypatch)
    monkeypatch.setenv("COLUMNS", "400")
    piped(monkeypatch, stdin)


def parley_chat(monkeypatch, capsys, url: str, stdin, *flags: str) -> tuple[str, str]:
    """`parley chat --llm-url URL` with `stdin` piped in; returns stdout and stderr. Local
    intents are off, so the server answers everything."""
    chat_from_a_pipe(monkeypatch, stdin)
    assert main(["chat", "--llm-url", url, "--no-local-intents", *flags]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def said(out: str) -> str:
    """Output with every run of whitespace as one space (the terminal may wrap)."""
    return " ".join(out.split())
