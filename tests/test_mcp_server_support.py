"""The tests' "notes" MCP server (tests/support/mcp_server.py) as an MCP client sees it, over
both transports: launched over stdio by the client, and over streamable HTTP on loopback."""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import CallToolResult, EmbeddedResource, ImageContent, TextContent

from tests.support.mcp_servers import (
    notes_server_command,
    notes_server_env,
    run_http_notes_server,
)

T = TypeVar("T")

Target = StdioServerParameters | str


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with run_http_notes_server() as url:
        yield url


@pytest.fixture(params=["stdio", "http"])
def server(request: pytest.FixtureRequest) -> Target:
    """What `Client` connects to: the stdio server (a fresh process, with the seeded notes,
    for each client) or the HTTP server's URL (one server for this module's tests)."""
    if request.param == "http":
        return request.getfixturevalue("http_url")
    command, args = notes_server_command()
    return StdioServerParameters(command=command, args=args, env=notes_server_env())


def with_client(server: Target, use: Callable[[Client], Awaitable[T]]) -> T:
    async def go() -> T:
        async with Client(server) as client:
            return await use(client)

    return asyncio.run(go())


def text_of(result: CallToolResult) -> str:
    assert all(isinstance(block, TextContent) for block in result.content), result.content
    return "".join(block.text for block in result.content)  # type: ignore[union-attr]


def call(server: Target, name: str, arguments: dict[str, Any] | None = None) -> CallToolResult:
    return with_client(server, lambda client: client.call_tool(name, arguments or {}))


def test_the_tools_are_listed_with_their_descriptions_and_annotations(server: Target) -> None:
    tools = with_client(server, lambda client: client.list_tools()).tools
    annotations = {tool.name: tool.annotations and tool.annotations.model_dump(
        by_alias=True, exclude_none=True) for tool in tools}
    read_only = {"readOnlyHint": True}
    assert annotations == {
        "list_notes": read_only, "read_note": read_only, "wait": read_only, "fail": read_only,
        "huge": read_only, "chart": read_only, "process_id": read_only,
        "signed_in": read_only,
        "delete_note": {"readOnlyHint": False, "destructiveHint": True},
        "add_note": {"readOnlyHint": False, "destructiveHint": False},
        "tidy": None,
    }
    assert all(tool.description for tool in tools)
    tidy = next(tool for tool in tools if tool.name == "tidy")
    assert tidy.title is None
    read_note = next(tool for tool in tools if tool.name == "read_note")
    assert read_note.input_schema["required"] == ["name"]
    assert read_note.input_schema["properties"]["name"]["type"] == "string"


def test_a_note_is_read_added_and_deleted(server: Target) -> None:
    async def use(client: Client) -> list[CallToolResult]:
        return [
            await client.call_tool("read_note", {"name": "shopping.txt"}),
            await client.call_tool("add_note", {"name": "todo.txt", "text": "water the fern"}),
            await client.call_tool("list_notes", {}),
            await client.call_tool("delete_note", {"name": "todo.txt"}),
            await client.call_tool("list_notes", {}),
            await client.call_tool("read_note", {"name": "todo.txt"}),
        ]

    read, added, listed, deleted, listed_after, read_deleted = with_client(server, use)
    assert text_of(read) == "eggs, milk, bread"
    assert text_of(added) == "Added todo.txt."
    assert text_of(listed).splitlines() == ["shopping.txt", "notes.txt", "todo.txt"]
    assert text_of(deleted) == "Deleted todo.txt."
    assert text_of(listed_after).splitlines() == ["shopping.txt", "notes.txt"]
    assert not read.is_error and not deleted.is_error
    assert read_deleted.is_error
    assert "no note named 'todo.txt'" in text_of(read_deleted)


def test_an_unexpected_error_is_an_error_result_that_keeps_its_text_on_the_server(
        server: Target) -> None:
    result = call(server, "fail")
    assert result.is_error
    assert text_of(result) == "Error executing tool fail"


def test_a_huge_answer_arrives_whole(server: Target) -> None:
    result = call(server, "huge")
    assert not result.is_error
    assert len(text_of(result)) == 1_000_000
    assert result.structured_content is None  # sent once, as text


def test_the_chart_is_text_an_image_and_a_resource(server: Target) -> None:
    result = call(server, "chart")
    text, image, resource = result.content
    assert isinstance(text, TextContent) and "Tuesday" in text.text
    assert isinstance(image, ImageContent) and image.mime_type == "image/png"
    png = base64.b64decode(image.data)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and png.endswith(b"IEND\xaeB`\x82")
    assert isinstance(resource, EmbeddedResource)
    assert resource.resource.uri == "notes://chart-data.csv"
    assert resource.resource.text.startswith("day,notes\n")  # type: ignore[union-attr]


def test_waiting_answers_afterwards_and_the_server_names_its_process(server: Target) -> None:
    async def use(client: Client) -> tuple[str, int, str]:
        waited = text_of(await client.call_tool("wait", {"seconds": 0.05}))
        pid = int(text_of(await client.call_tool("process_id", {})))
        os.kill(pid, 0)  # the server's process is there to be killed while the client talks
        return waited, pid, text_of(await client.call_tool("tidy", {}))

    waited, pid, tidied = with_client(server, use)
    assert waited == "Waited 0.05 s."
    assert pid != os.getpid()
    assert tidied == "Tidied."
