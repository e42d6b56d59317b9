"""The Starlette application of `parley web`: the page, `GET /api/conversation` and the
one WebSocket, `/ws`, every one of them behind the token printed with the URL.

The token keeps other local users and web sites out: a page elsewhere can reach
127.0.0.1 from the browser, but it cannot know the token. It comes in the URL's `?token=`;
the page itself is sent a cookie holding it, so that its style sheet and scripts load
(the cookie's name carries the port: two servers on one host keep theirs apart). Before
the token, a request's Host and Origin must be Parley's own (`guard`).
"""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import HTTPConnection, Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket, WebSocketDisconnect

from assistant.web.guard import refusal
from assistant.web.inbox import AudioPace, Room, receive
from assistant.web.tabs import Tab

STATIC = Path(__file__).parent / "static"

REFUSED = ("Parley refused this request: it needs the token from the address `parley web` "
           "printed (…/?token=…). Open that address as printed.")


def new_token() -> str:
    return secrets.token_urlsafe(18)


def build_app(room: Room, token: str, listen_host: str) -> Starlette:
    """The app; `listen_host`: the address it listens on, as `--uri` gave it."""
    def refused(connection: HTTPConnection) -> Response | None:
        """The 403 that answers `connection`, or None when it may go on."""
        why = refusal(connection.headers, connection.scope.get("server"), listen_host)
        if why is None:
            given = connection.query_params.get("token") or connection.cookies.get(
                _cookie_name(connection))
            if given is not None and secrets.compare_digest(given, token):
                return None
            why = REFUSED
        return PlainTextResponse(why, status_code=403)

    async def page(request: Request) -> Response:
        if (denial := refused(request)) is not None:
            return denial
        response = FileResponse(STATIC / "index.html", headers=_PAGE_HEADERS)
        response.set_cookie(_cookie_name(request), token, httponly=True, samesite="strict")
        return response

    async def conversation(request: Request) -> Response:
        if (denial := refused(request)) is not None:
            return denial
        snapshot = room.tabs.snapshot()
        return JSONResponse({key: snapshot[key] for key in
                             ("messages", "summary", "state", "timers")}, headers=_NO_STORE)

    async def socket(websocket: WebSocket) -> None:
        if (denial := refused(websocket)) is not None:
            await websocket.send_denial_response(denial)
            return
        await websocket.accept()
        await _serve_tab(room, websocket)

    static = StaticFiles(directory=STATIC)

    async def assets(scope, receive, send) -> None:
        if (denial := refused(Request(scope))) is not None:
            await denial(scope, receive, send)
            return
        await static(scope, receive, send)

    return Starlette(routes=[Route("/", page), Route("/api/conversation", conversation),
                             WebSocketRoute("/ws", socket), Mount("/static", app=assets)])


_NO_STORE = {"Cache-Control": "no-store"}
_PAGE_HEADERS = {**_NO_STORE, "X-Content-Type-Options": "nosniff",
                 # The page's own files and socket only: nothing from elsewhere runs or loads
                 # (a second guard, behind inserting every text as text), and no site frames it.
                 "Content-Security-Policy": "default-src 'self'; connect-src 'self'; "
                                            "base-uri 'none'; form-action 'none'; "
                                            "frame-ancestors 'none'"}


def _cookie_name(connection: HTTPConnection) -> str:
    return f"parley_token_{connection.url.port or 80}"


async def _serve_tab(room: Room, websocket: WebSocket) -> None:
    """One tab: what the room broadcasts goes out in order; what the tab sends goes in
    (JSON text, or binary frames of its microphone's audio)."""
    loop = asyncio.get_running_loop()
    outgoing: asyncio.Queue[dict | bytes] = asyncio.Queue()

    def send(data: dict | bytes) -> None:  # on any thread
        loop.call_soon_threadsafe(outgoing.put_nowait, data)

    async def forward() -> None:
        while True:
            data = await outgoing.get()
            if isinstance(data, bytes):
                await websocket.send_bytes(data)
            else:
                await websocket.send_text(json.dumps(data, ensure_ascii=False))

    tab = Tab(send)
    pace = AudioPace()
    leave = room.join(tab)
    sender = asyncio.create_task(forward())
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                break
            text = message.get("text")
            receive(room, text if text is not None else message.get("bytes") or b"", tab, pace)
    except WebSocketDisconnect:
        pass
    finally:
        leave()
        sender.cancel()
