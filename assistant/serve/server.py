"""The Wyoming server: where it listens, its connections, and a clean stop."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from assistant.errors import ConfigError
from assistant.serve.connection import Connection
from assistant.serve.service import Service
from assistant.serve.wire import MAX_LINE_BYTES, ClientError, write_event

log = logging.getLogger(__name__)

DEFAULT_URI = "tcp://127.0.0.1:10700"
MAX_CONNECTIONS = 64
"""Open connections at most; one more is told the server is busy and closed."""
EXPIRY_CHECK_SECONDS = 30.0


@dataclass(frozen=True)
class Address:
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False  # a name: it may reach anyone

    def uri(self, port: int | None = None) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"tcp://{host}:{self.port if port is None else port}"


def parse_uri(uri: str) -> Address:
    """`tcp://HOST:PORT` (an IPv6 host in brackets); a ConfigError says what is wrong."""
    parts = urlsplit(uri)
    if parts.scheme != "tcp":
        raise ConfigError(f"--uri {uri!r}: Parley serves Wyoming over TCP; give "
                          "tcp://HOST:PORT, e.g. tcp://127.0.0.1:10700")
    try:
        port = parts.port
    except ValueError:
        port = None
    if not parts.hostname or port is None:
        raise ConfigError(f"--uri {uri!r} needs a host and a port, e.g. tcp://127.0.0.1:10700")
    return Address(parts.hostname, port)


class WyomingServer:
    """Serves `service` at `address` until `stop()`; `ready(uri)` once it listens."""

    def __init__(self, service: Service, address: Address) -> None:
        self.service, self.address = service, address
        self._connections: set[asyncio.Task] = set()
        self._stopped: asyncio.Event | None = None

    async def run(self, ready: Callable[[str], None]) -> None:
        self._stopped = asyncio.Event()
        server = await asyncio.start_server(self._accept, self.address.host, self.address.port,
                                            limit=MAX_LINE_BYTES)
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, self.stop)
        expiry = asyncio.create_task(self._expire_idle())
        try:
            port = server.sockets[0].getsockname()[1]
            ready(self.address.uri(port))
            await self._stopped.wait()
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)
            expiry.cancel()
            server.close()
            self.service.engines.stop_summaries()
            background = [*self._connections, *self.service.background]
            for task in background:
                task.cancel()  # a reply in progress is cancelled with it
            await asyncio.gather(*background, expiry, return_exceptions=True)
            await server.wait_closed()

    def stop(self) -> None:
        if self._stopped is not None:
            self._stopped.set()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if len(self._connections) >= MAX_CONNECTIONS:
            busy = ClientError("busy", f"Parley has {MAX_CONNECTIONS} connections open; try "
                                       "again in a moment.", fatal=True)
            try:
                await write_event(writer, busy.event())
            except ConnectionError:
                pass
            writer.close()
            return
        assert task is not None
        self._connections.add(task)
        try:
            await Connection(self.service, reader, writer).run()
        except asyncio.CancelledError:
            writer.close()
            raise
        except Exception:  # a bug: that client's connection ends, everyone else is served
            log.exception("a connection failed")
            writer.close()
        finally:
            self._connections.discard(task)

    async def _expire_idle(self) -> None:
        while True:
            await asyncio.sleep(EXPIRY_CHECK_SECONDS)
            if gone := self.service.conversations.expire():
                log.debug("%d idle conversations forgotten", gone)
