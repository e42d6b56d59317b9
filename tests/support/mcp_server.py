"""A small Model Context Protocol server for the tests: "notes", written with the `mcp` SDK's
high-level `MCPServer`, serving a few notes kept in memory.

    python -m tests.support.mcp_server --transport stdio
    python -m tests.support.mcp_server --transport http --port 8931   # http://127.0.0.1:8931/mcp

Its tools cover what a client meets in the wild: read-only tools, a destructive one, one that
changes something without destroying it, one with no annotations at all (a client must assume
it can change things), an expected failure (`ToolError`), an unexpected one (a plain
exception), a slow one, a huge answer, an answer mixing text, an image and a resource, and one
that names its process so a test can kill the server in the middle of a call, and one that
says who is signed in from the HTTP request's bearer token.

It writes nothing to disk (the notes live in a dict) and nothing but the protocol to stdout,
which is the stdio transport; its log goes to stderr, warnings and worse only.
"""

from __future__ import annotations

import argparse
import base64
import logging
import os
import struct
import sys
import zlib
from collections.abc import Sequence

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import (
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)

SEED_NOTES = {
    "shopping.txt": "eggs, milk, bread",
    "notes.txt": "call the plumber on Tuesday",
}

HUGE_CHARS = 1_000_000
HUGE_SENTENCE = "The quick brown fox jumps over the lazy dog. "

CHART_DATA_URI = "notes://chart-data.csv"
CHART_DATA = "day,notes\nMonday,2\nTuesday,5\nWednesday,3\n"

LOG_LEVEL = "WARNING"
"""Uvicorn's access log and the SDK's per-request info lines would bury a test's own output."""

READ_ONLY = ToolAnnotations(read_only_hint=True)
CHANGES = ToolAnnotations(read_only_hint=False, destructive_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True)


def one_pixel_png() -> bytes:
    """A valid 1x1 opaque red PNG, built in memory (signature, IHDR, IDAT, IEND)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data)))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    pixels = zlib.compress(b"\x00\xff\x00\x00")  # filter byte 0, then one red pixel
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels)
            + chunk(b"IEND", b""))


def huge_text() -> str:
    repeats = HUGE_CHARS // len(HUGE_SENTENCE) + 1
    return (HUGE_SENTENCE * repeats)[:HUGE_CHARS]


def create_server() -> MCPServer:
    """A fresh server with its own copy of the seeded notes."""
    notes = dict(SEED_NOTES)
    # The tools return plain text: structured_output=False keeps MCPServer from adding an
    # outputSchema {"result": string} and sending every answer twice (as text and as
    # structuredContent), which would make `huge` two million characters on the wire.
    server = MCPServer("notes", version="1.0.0", log_level=LOG_LEVEL,
                       instructions="Notes kept in memory: list, read, add and delete them.")

    def known(name: str) -> str:
        if name not in notes:
            names = ", ".join(notes) or "none"
            raise ToolError(f"There is no note named {name!r}. The notes are: {names}.")
        return name

    @server.tool(title="List notes", description="List the names of the notes.",
                 annotations=READ_ONLY, structured_output=False)
    def list_notes() -> str:
        return "\n".join(notes)

    @server.tool(title="Read a note", description="Read the text of one note, by its name.",
                 annotations=READ_ONLY, structured_output=False)
    def read_note(name: str) -> str:
        return notes[known(name)]

    @server.tool(title="Delete a note", description="Delete a note, by its name. It cannot "
                 "be undone.", annotations=DESTRUCTIVE, structured_output=False)
    def delete_note(name: str) -> str:
        del notes[known(name)]
        return f"Deleted {name}."

    @server.tool(title="Add a note", description="Add a note with this name and text.",
                 annotations=CHANGES, structured_output=False)
    def add_note(name: str, text: str) -> str:
        if name in notes:
            raise ToolError(f"There is already a note named {name!r}.")
        notes[name] = text
        return f"Added {name}."

    @server.tool(title="Wait", description="Wait this many seconds, then answer.",
                 annotations=READ_ONLY, structured_output=False)
    async def wait(seconds: float) -> str:
        await anyio.sleep(seconds)
        return f"Waited {seconds:g} s."

    @server.tool(title="Fail", description="Try to open the notes database (it is locked).",
                 annotations=READ_ONLY, structured_output=False)
    def fail() -> str:
        raise RuntimeError("the notes database is locked")

    @server.tool(title="Huge", description=f"Return {HUGE_CHARS:,} characters of text.",
                 annotations=READ_ONLY, structured_output=False)
    def huge() -> str:
        return huge_text()

    @server.tool(title="Chart", description="Chart the notes written per day: a summary, "
                 "the chart as a PNG image, and its data as CSV.", annotations=READ_ONLY)
    def chart() -> list[ContentBlock]:
        # A list of content blocks is sent as the result's content, in order and unstructured.
        image = base64.b64encode(one_pixel_png()).decode("ascii")
        return [
            TextContent(type="text", text="Notes per day: most on Tuesday (5)."),
            ImageContent(type="image", data=image, mime_type="image/png"),
            EmbeddedResource(type="resource", resource=TextResourceContents(
                uri=CHART_DATA_URI, mime_type="text/csv", text=CHART_DATA)),
        ]

    @server.tool(title="Process id", description="The process id of the notes server.",
                 annotations=READ_ONLY, structured_output=False)
    def process_id() -> str:
        return str(os.getpid())

    @server.tool(title="Signed in", description="Who the notes are kept for.",
                 annotations=READ_ONLY, structured_output=False)
    def signed_in(ctx: Context) -> str:
        # Over HTTP, the bearer token the client sent names the user; stdio has no headers.
        token = (ctx.headers or {}).get("authorization", "").removeprefix("Bearer ")
        return f"Signed in as {token}." if token else "Not signed in."

    @server.tool(description="Tidy the notes.", structured_output=False)
    def tidy() -> str:
        return "Tidied."

    return server


class OneLineFormatter(logging.Formatter):
    """A record on one line: an exception is named by its innermost cause, not a traceback.

    The SDK logs a tool that crashes (`fail`) with its whole traceback, which Rich, when
    installed, draws over a hundred lines of the test's stderr."""

    def formatException(self, ei) -> str:  # noqa: N802 (logging's name)
        error = ei[1]
        while error is not None and error.__cause__ is not None:
            error = error.__cause__
        return f"({type(error).__name__}: {error})" if error is not None else ""

    def format(self, record: logging.LogRecord) -> str:
        return super().format(record).replace("\n", " ")


def quiet_logging() -> None:
    """Warnings and worse, one line each, to stderr: stdout is the stdio transport. Set before
    `MCPServer` is made, its own `logging.basicConfig` (a Rich handler) changes nothing."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLineFormatter("notes server: %(levelname)s %(message)s"))
    logging.basicConfig(level=LOG_LEVEL, handlers=[handler], force=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transport", choices=("stdio", "http"), required=True)
    parser.add_argument("--port", type=int, default=8931,
                        help="for --transport http: the port on 127.0.0.1 (path /mcp)")
    args = parser.parse_args(argv)
    quiet_logging()
    server = create_server()
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.port,
                   streamable_http_path="/mcp")


if __name__ == "__main__":
    main()
