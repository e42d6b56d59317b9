"""`parley web` against other sites and bad input: a real uvicorn server on 127.0.0.1, the
`websockets` client, a stand-in language model.

What a user relies on: a page on another site cannot open Parley's socket, even with the
token, and neither can a site whose own name points at this machine (DNS rebinding), while
Parley's own page and scripts (which send no Origin) can; a message Parley cannot take,
too large, or audio faster than a microphone records, gets that tab a clear `error` and
the conversation goes on; a tab that leaves mid-reply loses nothing for the others; twenty
tabs at once all see the reply.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator, Sequence

import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from assistant.session import engines
from assistant.web.guard import accepted_names, refusal
from assistant.web.inbox import AUDIO_AHEAD_S, RATE, TOO_FAST, AudioPace
from assistant.web.server import MAX_MESSAGE_BYTES
from models.base import CancelToken, Chunk, PromptMessage, TextChunk, ToolSpec
from tests.support.clocks import HUNG_S, ManualClock, wait_until
from tests.support.fakes import ScriptedChatModel
from tests.support.web import TOKEN, WebServer, scripted_model, web_server

FRAME = 480
"""Samples a frame, 30 ms, as the page's worklet sends them."""


@pytest.fixture
def model(monkeypatch) -> ScriptedChatModel:
    return scripted_model(monkeypatch)


def open_socket(server: WebServer, origin: str | None = None, host: str | None = None):
    """A WebSocket to the server's `/ws` with the token, sending `origin` (None: no Origin)
    and addressed to `host` (as a browser does when a site's own name points at 127.0.0.1)."""
    address = host or f"127.0.0.1:{server.port}"
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=HUNG_S)
    return connect(f"ws://{address}/ws?token={TOKEN}", sock=sock, origin=origin,
                   open_timeout=HUNG_S, proxy=None)


def refused_socket(server: WebServer, **kwargs) -> str:
    """The body of the 403 that refused the socket."""
    with pytest.raises(InvalidStatus) as refused:
        open_socket(server, **kwargs)
    assert refused.value.response.status_code == 403
    return refused.value.response.body.decode("utf-8")


def get(server: WebServer, path: str, host: str) -> tuple[int, str]:
    """(status, body) of a GET with the token, its Host header `host`."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=HUNG_S)
    try:
        connection.putrequest("GET", f"{path}?token={TOKEN}", skip_host=True)
        connection.putheader("Host", host)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.read().decode("utf-8")
    finally:
        connection.close()


def test_a_page_on_another_site_cannot_open_the_socket_even_with_the_token(model):
    with web_server() as server:
        for origin in ("http://evil.example", f"http://evil.example:{server.port}",
                       f"http://127.0.0.1:{server.port + 1}", f"https://127.0.0.1:{server.port}",
                       "null"):
            body = refused_socket(server, origin=origin)
            assert body.startswith("Parley refused this request: it came from a page on "
                                   f"another site ({origin})."), origin


def test_its_own_page_and_a_script_without_origin_open_the_socket(model):
    with web_server() as server:
        for origin in (f"http://127.0.0.1:{server.port}", f"http://localhost:{server.port}",
                       None):
            with open_socket(server, origin=origin,
                             host=f"localhost:{server.port}" if origin and "localhost" in origin
                             else None) as tab:
                assert '"type": "conversation"' in tab.recv(timeout=HUNG_S), origin


def test_a_request_addressed_to_another_name_is_refused(model):
    """DNS rebinding: evil.example made to resolve to 127.0.0.1 sends Host: evil.example."""
    with web_server() as server:
        for host in (f"evil.example:{server.port}", "evil.example",
                     f"127.0.0.1:{server.port + 1}", f"localhost.evil.example:{server.port}"):
            for path in ("/", "/api/conversation", "/static/app.js"):
                status, body = get(server, path, host)
                assert status == 403, (host, path)
                assert body.startswith(f"Parley refused this request: it was addressed to "
                                       f"“{host}”, not to the address Parley listens on")
            assert "addressed to" in refused_socket(server, host=host)
        for host in (f"127.0.0.1:{server.port}", f"localhost:{server.port}",
                     f"LOCALHOST:{server.port}", f"[::1]:{server.port}"):
            status, page = get(server, "/", host)
            assert status == 200 and "<title>Parley</title>" in page, host


@pytest.mark.parametrize("listen, arrived, host, origin, taken", [
    # Listening on every address: what a user on another machine types, its IP address.
    ("0.0.0.0", "192.168.1.5", "192.168.1.5:8765", "http://192.168.1.5:8765", True),
    ("0.0.0.0", "192.168.1.5", "mybox.lan:8765", None, False),
    ("0.0.0.0", "127.0.0.1", "localhost:8765", "http://localhost:8765", True),
    ("0.0.0.0", "192.168.1.5", "localhost:8765", None, False),
    ("::", "::ffff:192.168.1.5", "192.168.1.5:8765", None, True),
    ("0.0.0.0", "192.168.1.5", "0.0.0.0:8765", None, False),
    # A name given in --uri is taken, with its port.
    ("mybox.lan", "192.168.1.5", "mybox.lan:8765", "http://mybox.lan:8765", True),
    ("mybox.lan", "192.168.1.5", "mybox.lan:8766", None, False),
    ("192.168.1.5", "192.168.1.5", "192.168.1.5:8765", "http://evil.example:8765", False),
    ("192.168.1.5", "192.168.1.5", "192.168.1.5", None, False),  # port 80 is not 8765
    ("127.0.0.1", "127.0.0.1", "[::1]:8765", None, True),
    ("127.0.0.1", "127.0.0.1", "127.0.0.1:8765", "http://user@127.0.0.1:8765", False),
])
def test_the_host_and_origin_rule_on_other_addresses(listen, arrived, host, origin, taken):
    headers = {"host": host} | ({"origin": origin} if origin else {})
    assert (refusal(headers, (arrived, 8765), listen) is None) is taken


def test_a_request_without_a_host_is_refused():
    assert "no address (no Host)" in refusal({}, ("127.0.0.1", 8765), "127.0.0.1")
    assert accepted_names("127.0.0.1", "127.0.0.1") == {"127.0.0.1", "localhost", "::1"}


def test_a_malformed_message_gets_a_clear_error_and_the_talk_goes_on(model):
    model.enqueue("Still here.")
    with web_server() as server:
        tab = server.tab()
        tab.next()
        for bad, said in (("[" * 100_000, "not a JSON object"), ("[]", "not a JSON object"),
                          (json.dumps({"type": None}), "not a JSON object"),
                          (json.dumps({"type": "text", "text": 5}), "non-empty"),
                          (json.dumps({"type": "confirm"}), "needs an \"answer\""),
                          (b"\x01\x02\x03", "odd number of bytes")):
            tab.send(bad)
            error = tab.next()
            assert error["type"] == "error" and error["stage"] == "request", bad[:20]
            assert said in error["message"]
        tab.send({"type": "text", "text": "Are you there?"})
        got = tab.until_idle()
        assert next(m for m in got if m["type"] == "reply-done")["text"] == "Still here."


def test_a_paste_longer_than_the_context_is_refused_as_chat_refuses_it(model):
    model.enqueue("Short answer.")
    with web_server() as server:
        tab = server.tab()
        tab.next()
        tab.send({"type": "text", "text": "word " * 100_000})  # 500 kB, 125,000 tokens
        error = tab.until_type("error")[-1]
        assert error["stage"] == "prompt"
        assert error["message"].startswith("That message is too long for the model's context")
        assert "It was not added to the conversation." in error["message"]
        tab.until_idle()  # a message sent before would be refused: Parley is still answering
        tab.send({"type": "text", "text": "A short one, then."})
        got = tab.until(lambda m: m["type"] == "reply-done")
        assert got[-1]["text"] == "Short answer."
        assert [m["text"] for m in server.conversation()["messages"]] == [
            "A short one, then.", "Short answer."]


def test_a_message_over_the_bound_closes_that_tab_saying_why_and_the_rest_goes_on(model):
    model.enqueue("Still here.")
    with web_server() as server:
        huge, other = server.tab(), server.tab()
        huge.next(), other.next()
        huge.send(b"\0\0" * (MAX_MESSAGE_BYTES // 2 + 1))
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                huge.socket.recv(timeout=HUNG_S)
        assert closed.value.rcvd.code == 1009  # message too big
        assert f"exceeds limit of {MAX_MESSAGE_BYTES} bytes" in closed.value.rcvd.reason
        other.send({"type": "text", "text": "Are you there?"})
        got = other.until(lambda m: m["type"] == "reply-done")
        assert got[-1]["text"] == "Still here."
        assert server.tab().next()["type"] == "conversation"


def test_audio_is_heard_at_most_a_little_ahead_of_real_time():
    clock = ManualClock()
    pace = AudioPace(clock)
    ahead = int(AUDIO_AHEAD_S * RATE)
    assert pace.take(ahead - 100) == ahead - 100
    assert pace.take(FRAME) == 100  # the first 100 samples of the frame, the rest dropped
    assert pace.take(FRAME) == 0
    clock.now += 1.0  # a second later, a second more
    assert pace.take(10 * RATE) == RATE
    clock.now += 60.0  # a pause does not save up more than the allowance
    assert pace.take(100 * RATE) == ahead
    clock.now += FRAME / RATE  # a microphone's pace is heard whole
    assert pace.take(FRAME) == FRAME


def test_a_tab_flooding_audio_is_told_once_and_heard_at_a_microphones_pace(model, monkeypatch):
    model.enqueue("Still here.")
    with web_server() as server:
        heard: list[int] = []
        feed = server.room.loop.feed_audio
        monkeypatch.setattr(server.room.loop, "feed_audio",
                            lambda pcm: (heard.append(len(pcm)), feed(pcm)))
        connected = time.monotonic()
        tab = server.tab()
        tab.next()
        tab.send({"type": "hands-free", "on": True})
        frame = np.zeros(FRAME, dtype="<i2").tobytes()
        for _ in range(60 * RATE // FRAME):  # a minute of audio, as fast as it goes
            tab.send(frame)
        tab.send({"type": "text", "text": "Are you there?"})
        got = tab.until(lambda m: m["type"] == "reply-done")
        taken = time.monotonic()  # the server had read every frame: the text came after
        assert got[-1]["text"] == "Still here."
        assert [m["message"] for m in tab.seen if m["type"] == "error"] == [TOO_FAST]
        wait_until(lambda: sum(heard) >= AUDIO_AHEAD_S * RATE, "the allowance was heard")
        assert sum(heard) <= (AUDIO_AHEAD_S + taken - connected) * RATE


class HeldModel(ScriptedChatModel):
    """Writes the first half of its reply, waits for `go_on`, then writes the rest."""

    REPLY = "The first half of the answer, and then the second half of it."

    def __init__(self) -> None:
        super().__init__()
        self.go_on = threading.Event()

    def stream(self, messages: Sequence[PromptMessage], tools: Sequence[ToolSpec],
               max_tokens: int, cancel: CancelToken | None = None) -> Iterator[Chunk]:
        first, rest = self.REPLY[:30], self.REPLY[30:]
        yield TextChunk(first)
        self.go_on.wait(HUNG_S)
        yield TextChunk(rest)


def test_a_tab_that_leaves_mid_reply_loses_nothing_for_the_others(monkeypatch):
    held = HeldModel()
    monkeypatch.setattr(engines, "load_model", lambda chosen: held)
    with web_server() as server:
        asker, watcher = server.tab(), server.tab()
        asker.next(), watcher.next()
        asker.send({"type": "text", "text": "Tell me both halves."})
        asker.until_type("text-delta")
        asker.close()
        held.go_on.set()
        got = watcher.until(lambda m: m["type"] == "reply-done")
        assert got[-1]["text"] == HeldModel.REPLY and not got[-1]["cancelled"]
        watcher.until_idle()
        joined = server.tab().next()
        assert [m["text"] for m in joined["messages"]] == ["Tell me both halves.",
                                                           HeldModel.REPLY]


def test_twenty_tabs_at_once_all_see_the_same_reply(model):
    model.enqueue("One answer for every tab.")
    with web_server() as server:
        tabs = [server.tab() for _ in range(20)]
        assert all(tab.next()["type"] == "conversation" for tab in tabs)
        tabs[7].send({"type": "text", "text": "Hello, everyone."})
        for tab in tabs:
            got = tab.until_idle()
            assert "".join(m["text"] for m in got if m["type"] == "text-delta") == \
                "One answer for every tab."
            assert [m["seq"] for m in got if m["type"] == "message"] == [1, 2]
