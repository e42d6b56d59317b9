"""`parley web` in a real Chromium against what is not its page's ordinary use: another
site's page cannot drive it, even knowing its token; a paste over its size bound is said.

A second small web server on another port serves a page whose script opens Parley's
WebSocket with the right token; Chromium sends that page's Origin, Parley refuses it, and
the socket never delivers Parley's conversation. Chromium is the system's driven by
Playwright; without them these tests skip, saying why (under CI a skip fails).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from assistant.web.server import MAX_MESSAGE_BYTES
from tests.support.browser import chromium, expect, prepared
from tests.support.web import TOKEN, scripted_model, web_server

OTHER_SITE = """<!doctype html><title>Another site</title><p id="said">opening</p>
<script>
  const said = document.getElementById("said");
  const socket = new WebSocket("ws://127.0.0.1:{port}/ws?token={token}");
  socket.onopen = () => {{ said.textContent = "open"; }};
  socket.onmessage = (received) => {{ said.textContent = "got: " + received.data; }};
  socket.onclose = () => {{ if (said.textContent !== "open") said.textContent = "closed"; }};
</script>"""


@contextmanager
def another_site(page: str) -> Iterator[str]:
    """A web server on 127.0.0.1 at another port, serving `page` at /; yields its URL."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            body = page.encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, name="another site", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def page() -> Iterator:
    with chromium() as browser:
        yield prepared(browser.new_page())


def test_a_page_on_another_site_never_gets_parleys_conversation(page, monkeypatch):
    scripted_model(monkeypatch)
    with web_server() as parley:
        with another_site(OTHER_SITE.format(port=parley.port, token=TOKEN)) as url:
            page.goto(url)
            expect(page.locator("#said")).to_have_text("closed")
        assert parley.room.tabs.connected() == []
        # The same socket from Parley's own page is taken: the refusal is the Origin's.
        page.goto(parley.page_url)
        expect(page.get_by_role("status")).to_have_text("Idle")
        assert len(parley.room.tabs.connected()) == 1


def test_a_paste_over_the_bound_is_said_and_another_tab_goes_on(page, monkeypatch):
    scripted_model(monkeypatch).enqueue("Still here.")
    with web_server() as parley:
        other = parley.tab()
        other.next()
        page.goto(parley.page_url)
        box = page.get_by_role("textbox", name="Message")
        box.fill("x" * (MAX_MESSAGE_BYTES + 1))
        box.press("Enter")
        expect(page.get_by_role("status")).to_have_text(re.compile(
            r"^Disconnected: that message was too large for Parley \(.*exceeds limit of "
            rf"{MAX_MESSAGE_BYTES} bytes\)\. Reload the page and send less\.$"))
        other.send({"type": "text", "text": "Are you there?"})
        assert other.until(lambda m: m["type"] == "reply-done")[-1]["text"] == "Still here."
