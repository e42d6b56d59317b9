"""Serving the web app with uvicorn: on the address asked for (port 0: a free one), saying
the real address once it listens, and ending quietly on Ctrl-C or SIGTERM."""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from ipaddress import ip_address
from urllib.parse import urlsplit

import uvicorn

from assistant.errors import ConfigError


@dataclass(frozen=True)
class WebAddress:
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        try:
            return ip_address(self.host).is_loopback
        except ValueError:
            return self.host == "localhost"

    def url(self, port: int | None = None) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port if port is None else port}"


def parse_web_uri(uri: str) -> WebAddress:
    """`--uri http://HOST:PORT`: where `parley web` listens."""
    parts = urlsplit(uri)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme != "http" or not parts.hostname or port is None or port < 0 \
            or parts.path not in ("", "/"):
        raise ConfigError(f"--uri {uri!r} is not http://HOST:PORT (for example "
                          "http://127.0.0.1:8765; port 0 picks a free one)")
    return WebAddress(parts.hostname, port)


class _Server(uvicorn.Server):
    """uvicorn's server, telling `ready` the port once it listens, and ending with the
    process's exit code 0 on Ctrl-C or SIGTERM (uvicorn raises the signal again once it
    has shut down, which would end the process by that signal)."""

    def __init__(self, config: uvicorn.Config, ready: Callable[[int], None]) -> None:
        super().__init__(config)
        self._ready = ready
        self.port = 0

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if not self.should_exit:
            self.port = self.servers[0].sockets[0].getsockname()[1]
            self._ready(self.port)

    def handle_exit(self, sig: int, frame) -> None:
        super().handle_exit(sig, frame)
        self._captured_signals.clear()


MAX_MESSAGE_BYTES = 1024 * 1024
"""A WebSocket message, at most (uvicorn's own bound is 16 MiB). A typed message this long
is already far more than a model's context takes (that is said to the tab as chat says it),
and the page's audio frames are 1.6 kB: a larger one is refused as it arrives, the socket
closed with code 1009 and the reason, before it is held in memory."""


def web_config(app, host: str, port: int) -> uvicorn.Config:
    """uvicorn's settings for `parley web` (the tests' server uses them too)."""
    return uvicorn.Config(app, host=host, port=port, log_level="warning", ws="auto",
                          ws_max_size=MAX_MESSAGE_BYTES, lifespan="off", access_log=False)


def serve(app, address: WebAddress, ready: Callable[[int], None]) -> None:
    """Run until Ctrl-C or SIGTERM; `ready(port)` once it listens."""
    server = _Server(web_config(app, address.host, address.port), ready)
    try:
        server.run()
    except SystemExit as exc:  # uvicorn exits when it cannot bind: say why in one line
        raise ConfigError(f"cannot listen on {address.url()}: the port is taken or the "
                          "address is not this machine's. Pick another --uri.") from exc
