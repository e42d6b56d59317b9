"""Tools described in the prompt, and `<tool_call>` blocks parsed from model output."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

from models.base import TextChunk, ToolCallChunk, ToolSpec

OPEN, CLOSE = "<tool_call>", "</tool_call>"


def describe_tools(tools: Sequence[ToolSpec]) -> str:
    """Tool instructions for a model whose chat template has no tool support."""
    lines = [
        "You can use tools. To call one, answer with only this, on one line:",
        f'{OPEN}{{"name": "<tool name>", "arguments": {{...}}}}{CLOSE}',
        "The result comes back in the next message. Available tools:",
    ]
    for tool in tools:
        lines.append(f"- {tool.name}: {tool.description} Arguments: {json.dumps(tool.parameters)}")
    return "\n".join(lines)


def render_call(name: str, arguments: dict | None) -> str:
    return f"{OPEN}{json.dumps({'name': name, 'arguments': arguments or {}})}{CLOSE}"


_TOO_BIG = "the tool call is not valid JSON (a number with too many digits, or nesting too deep)"


def parse_call(body: str) -> ToolCallChunk:
    """Read one call's JSON; a malformed call becomes a chunk carrying the error."""
    try:
        data = json.loads(body.strip())
    except json.JSONDecodeError as exc:
        return ToolCallChunk("", {}, f"the tool call is not valid JSON ({exc.msg})")
    except (ValueError, RecursionError):  # Python's own limits, not a syntax error
        return ToolCallChunk("", {}, _TOO_BIG)
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return ToolCallChunk("", {}, 'a tool call needs {"name": "...", "arguments": {...}}')
    arguments = data.get("arguments", data.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):  # a decode error, or too many digits or levels
            return ToolCallChunk(data["name"], {}, "the tool call's arguments are not JSON")
    if not isinstance(arguments, dict):
        return ToolCallChunk(data["name"], {}, "the tool call's arguments must be an object")
    return ToolCallChunk(data["name"], arguments)


class ToolCallScanner:
    """Splits streamed text into plain text and `<tool_call>` blocks.

    Text that might be the start of a tag is held back until it is known not to be,
    so the user never sees half a tag.
    """

    def __init__(self) -> None:
        self._buffer = ""
        self._inside = False

    def feed(self, text: str) -> Iterator[TextChunk | ToolCallChunk]:
        self._buffer += text
        while True:
            if self._inside:
                end = self._buffer.find(CLOSE)
                if end < 0:
                    return
                yield parse_call(self._buffer[:end])
                self._buffer = self._buffer[end + len(CLOSE):]
                self._inside = False
                continue
            start = self._buffer.find(OPEN)
            if start >= 0:
                if start:
                    yield TextChunk(self._buffer[:start])
                self._buffer = self._buffer[start + len(OPEN):]
                self._inside = True
                continue
            keep = _partial_tag_length(self._buffer)
            ready = self._buffer[: len(self._buffer) - keep]
            if ready:
                yield TextChunk(ready)
            self._buffer = self._buffer[len(ready):]
            return

    def finish(self) -> Iterator[TextChunk | ToolCallChunk]:
        if self._inside:
            # An unclosed call: take it if its JSON is complete, else report it.
            yield parse_call(self._buffer)
        elif self._buffer:
            yield TextChunk(self._buffer)
        self._buffer, self._inside = "", False


def _partial_tag_length(text: str) -> int:
    for size in range(min(len(OPEN) - 1, len(text)), 0, -1):
        if OPEN.startswith(text[-size:]):
            return size
    return 0
