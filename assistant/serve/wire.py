"""Wyoming events off the wire, with limits, and the errors a client is told.

The `wyoming` package reads an event with no bound on its size and takes a line that is
not JSON for the end of the connection. A server open to other programs needs both: a
client that sends a 50 MB payload, or garbage, gets an `error` event saying so, and the
server goes on serving everyone else.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from wyoming.error import Error
from wyoming.event import Event as WyomingEvent
from wyoming.event import async_write_event

MAX_LINE_BYTES = 64 * 1024
"""An event's JSON header line (the reader's buffer limit, too)."""
MAX_DATA_BYTES = 1024 * 1024
"""An event's data or payload: a second of 48 kHz stereo 32-bit audio is 384 KiB."""


@dataclass(frozen=True)
class ClientError(Exception):
    """Something a client sent that Parley cannot serve; `code` is machine-readable."""

    code: str
    text: str
    fatal: bool = False
    """The connection cannot go on (its framing is lost): closed after the error."""

    def __str__(self) -> str:
        return self.text

    def event(self) -> WyomingEvent:
        return Error(text=self.text, code=self.code).event()


def malformed(text: str) -> ClientError:
    return ClientError("malformed-event", f"{text}; each event is a JSON object on one line "
                                          "(the Wyoming protocol). Closing the connection.",
                       fatal=True)


def too_large(what: str, size: int, limit: int) -> ClientError:
    return ClientError("too-large", f"The event's {what} is {size:,} bytes; Parley takes at "
                                    f"most {limit:,}. Closing the connection.", fatal=True)


async def read_event(reader: asyncio.StreamReader) -> WyomingEvent | None:
    """The next event, or None when the client has closed the connection.

    Raises ClientError for a line that is not an event or one over the limits.
    """
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None
        raise malformed("The connection ended inside an event") from None
    except asyncio.LimitOverrunError:
        raise ClientError("too-large", f"An event's header line is over {MAX_LINE_BYTES:,} "
                                       "bytes. Closing the connection.", fatal=True) from None
    try:
        header = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise malformed("A line that is not JSON came") from None
    if not isinstance(header, dict) or not isinstance(header.get("type"), str):
        raise malformed("An event without a \"type\" came")
    data = header.get("data") or {}
    if not isinstance(data, dict):
        raise malformed("An event's \"data\" is not a JSON object")
    data_length = _length(header, "data_length")
    payload_length = _length(header, "payload_length")
    if data_length:
        try:
            extra = json.loads(await reader.readexactly(data_length))
        except asyncio.IncompleteReadError:
            return None  # gone mid-event: nothing to answer
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise malformed("An event's data is not JSON") from None
        if not isinstance(extra, dict):
            raise malformed("An event's data is not a JSON object")
        data = {**data, **extra}
    payload = None
    if payload_length:
        try:
            payload = await reader.readexactly(payload_length)
        except asyncio.IncompleteReadError:
            return None
    return WyomingEvent(type=header["type"], data=data, payload=payload)


def _length(header: dict, key: str) -> int:
    value = header.get(key)
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise malformed(f"An event's {key} is not a whole number of bytes")
    if value > MAX_DATA_BYTES:
        raise too_large(key.removesuffix("_length"), value, MAX_DATA_BYTES)
    return value


async def write_event(writer: asyncio.StreamWriter, event: WyomingEvent) -> None:
    await async_write_event(event, writer)
