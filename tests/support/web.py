"""`parley web` in process for the tests: the real session builder, room, Starlette app and
uvicorn server on 127.0.0.1 (a port the OS picks), on a stand-in language model and
stand-in speech engines (or none: typed chat); and a tab as a script sees it, a WebSocket
client reading the server's messages (JSON, and the reply's audio frames) with a
deadline."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import uvicorn
from websockets.sync.client import ClientConnection, connect

from assistant.cli.saved import close_saved
from assistant.confirmation import Confirmation
from assistant.session import engines
from assistant.session.engines import Loaded
from assistant.session.settings import ModelSettings, Settings
from assistant.tools import Tool
from assistant.web.app import build_app
from assistant.web.room import ChatRoom
from assistant.web.server import web_config
from assistant.web.session import web_room
from assistant.web.voice_room import VoiceRoom
from models.base import CancelToken, Chunk, PromptMessage, TextChunk, ToolSpec
from models.speech import SpeechToText, TextToSpeech
from tests.support.clocks import HUNG_S, wait_until
from tests.support.conversations import varied_words
from tests.support.fakes import ScriptedChatModel, ScriptedSpeechToText, ToneTextToSpeech

TOKEN = "test-token-0123456789"

SETTINGS = Settings(model=ModelSettings(no_local_intents=True))


@dataclass
class WebServer:
    room: ChatRoom | VoiceRoom
    port: int
    tabs: ExitStack
    """The tabs connected, closed with the server."""

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def page_url(self) -> str:
        return f"{self.base}/?token={TOKEN}"

    def get(self, path: str, token: str | None = TOKEN) -> tuple[int, str]:
        """(status, body) of a GET, the token in the query unless None."""
        url = f"{self.base}{path}" + (f"?token={token}" if token is not None else "")
        try:
            with urllib.request.urlopen(url, timeout=HUNG_S) as response:
                return response.status, response.read().decode("utf-8")
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode("utf-8")

    def conversation(self) -> dict:
        status, body = self.get("/api/conversation")
        assert status == 200, body
        return json.loads(body)

    def tab(self, token: str = TOKEN) -> Tab:
        return Tab(self.tabs.enter_context(connect(f"ws://127.0.0.1:{self.port}/ws?token={token}",
                                                   open_timeout=HUNG_S)))


class Tab:
    """One connected tab: every message the server sent it, in order."""

    def __init__(self, socket: ClientConnection) -> None:
        self.socket = socket
        self.seen: list[dict] = []
        self.audio: list[bytes] = []
        """The reply's audio frames received, in order (`seen` holds the JSON messages)."""

    def send(self, data: dict | str | bytes) -> None:
        self.socket.send(data if isinstance(data, str | bytes) else json.dumps(data))

    def next(self) -> dict:
        """The next JSON message (audio frames on the way are kept in `audio`)."""
        while True:
            received = self.socket.recv(timeout=HUNG_S)
            if isinstance(received, bytes):
                self.audio.append(received)
                continue
            message = json.loads(received)
            self.seen.append(message)
            return message

    def until(self, done: Callable[[dict], bool]) -> list[dict]:
        """The messages up to and including the first that `done` accepts."""
        got = []
        while True:
            got.append(self.next())
            if done(got[-1]):
                return got

    def until_type(self, kind: str) -> list[dict]:
        return self.until(lambda m: m["type"] == kind)

    def until_idle(self) -> list[dict]:
        """The messages until Parley is idle again after a reply."""
        return self.until(lambda m: m == {"type": "state", "state": "idle"})

    def close(self) -> None:
        self.socket.close()


SPEECH = object()
"""`web_server`'s default speech engines: a fresh stand-in pair (hears nothing said, speaks
tones, 5 ms a character: a long answer does not keep a test waiting)."""


@contextmanager
def web_server(settings: Settings = SETTINGS,
               speech: tuple[SpeechToText, TextToSpeech] | None | object = SPEECH,
               warn: Callable[[str], None] | None = None) -> Iterator[WebServer]:
    """The whole server, as `parley web` builds it (the language model is whatever the test
    made `engines.load_model` return). `speech`: the engines to use, loaded already; None
    loads them as the settings say (a test makes loading fail to get typed chat)."""
    if speech is SPEECH:
        speech = (ScriptedSpeechToText({}), ToneTextToSpeech(ms_per_char=5))
    loaded = Loaded() if speech is None else Loaded(stt=speech[0], tts=speech[1])  # type: ignore[index]
    with web_room(settings, warn or _no_warnings, loaded) as room:
        server = uvicorn.Server(web_config(build_app(room, TOKEN, "127.0.0.1"), "127.0.0.1", 0))
        thread = threading.Thread(target=server.run, name="web server", daemon=True)
        thread.start()
        try:
            wait_until(lambda: server.started or not thread.is_alive(), "the server started")
            assert server.started, "the web server did not start"
            with ExitStack() as tabs:
                yield WebServer(room, server.servers[0].sockets[0].getsockname()[1], tabs)
        finally:
            server.should_exit = True
            thread.join(HUNG_S)
            room.close()
            close_saved(room.conversation)


class EndlessModel(ScriptedChatModel):
    """Writes words (never the same twice) until the reply is stopped."""

    def stream(self, messages: Sequence[PromptMessage], tools: Sequence[ToolSpec],
               max_tokens: int, cancel: CancelToken | None = None) -> Iterator[Chunk]:
        for word in varied_words(5000).split():
            if cancel is not None and cancel.cancelled:
                return
            yield TextChunk(word + " ")
            time.sleep(0.01)


def asking_tool(ran: list[dict]) -> Tool:
    """A notes server's tool that asks first; what it was run with goes into `ran`."""
    return Tool(ToolSpec("notes__delete_note", "Delete a note.",
                         {"type": "object", "properties": {"name": {"type": "string"}}}),
                lambda arguments: ran.append(arguments) or "Deleted.",
                lambda _: "Asking notes: delete_note",
                approval=lambda arguments: Confirmation("notes__delete_note", "notes",
                                                        "delete_note", arguments),
                source="notes")


def tool_call(name: str, arguments: dict) -> str:
    """A reply that is a call of `name`, as the embedded model writes one."""
    return f'<tool_call>{json.dumps({"name": name, "arguments": arguments})}</tool_call>'


def _no_warnings(line: str) -> None:
    raise AssertionError(f"warned: {line}")


def scripted_model(monkeypatch) -> ScriptedChatModel:
    """A scripted model, the one the server loads as its language model."""
    scripted = ScriptedChatModel()
    monkeypatch.setattr(engines, "load_model", lambda chosen: scripted)
    return scripted
