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
import socket

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from assistant.web.guard import accepted_names, refusal
from tests.support.clocks import HUNG_S
from tests.support.fakes import ScriptedChatModel
from tests.support.web import TOKEN, WebServer, scripted_model, web_server


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
