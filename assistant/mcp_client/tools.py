"""MCP servers' tools as Parley's tools: offered to the model beside its own, under names
that cannot collide, run through the hub, asking the user first where they change things."""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from assistant.confirmation import Confirmation
from assistant.mcp_client.config import SEPARATOR, ServerConfig
from assistant.mcp_client.hub import CallFailed, McpHub, ServerState
from assistant.tools import Failure, Tool, ToolOutput, ToolRegistry, failed
from models.base import ToolSpec

log = logging.getLogger(__name__)

NAME_LIMIT = 64
"""OpenAI-compatible servers take tool names of at most 64 of [A-Za-z0-9_-]."""


@dataclass(frozen=True)
class Listed:
    """One of a server's tools, as `parley tools` shows it."""

    name: str
    """The name the model calls."""
    server: str
    server_tool: str
    description: str
    asks_first: bool
    read_only: bool


def needs_yes(tool: Any, config: ServerConfig) -> bool:
    """Whether the user must say yes before `tool` runs: the server does not call it
    read-only, or calls it destructive (MCP's annotations; a tool without them may change
    anything), or the config lists it in confirm-tools; never for a trusted tool."""
    if tool.name in config.trusted_tools:
        return False
    if tool.name in config.confirm_tools:
        return True
    return not read_only(tool)


def read_only(tool: Any) -> bool:
    hints = tool.annotations
    return bool(hints is not None and hints.read_only_hint is True
                and hints.destructive_hint is not True)


def model_name(server: str, tool: str, taken: set[str]) -> str:
    """`server__tool`, made of the characters every model server accepts, at most 64 of
    them, and numbered if still taken."""
    base = re.sub(r"[^A-Za-z0-9_-]", "_", f"{server}{SEPARATOR}{tool}")[:NAME_LIMIT]
    name, n = base, 2
    while name in taken:
        suffix = f"_{n}"
        name, n = base[:NAME_LIMIT - len(suffix)] + suffix, n + 1
    return name


def result_text(result: Any) -> str:
    """What the model reads of a `CallToolResult`: its text, with images, audio and
    resources named rather than included; the structured content when there is no text."""
    parts: list[str] = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            size = len(block.data) * 3 // 4  # base64
            parts.append(f"[{kind} ({block.mime_type}, about {size:,} bytes) not shown]")
        elif kind == "resource":
            resource = block.resource
            mime = f", {resource.mime_type}" if getattr(resource, "mime_type", None) else ""
            parts.append(f"[resource {resource.uri}{mime} not shown]")
        elif kind == "resource_link":
            parts.append(f"[link to resource {block.uri} ({block.name})]")
        else:
            parts.append(f"[{kind or 'unknown'} content not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts) if parts else "(no content)"


def schema_check(schema: dict) -> Callable[[dict], str | None]:
    """The arguments checked against the tool's whole JSON schema before the call."""
    from jsonschema import validators
    from jsonschema.exceptions import SchemaError

    try:
        validator_class = validators.validator_for(schema)
        validator_class.check_schema(schema)
        validator = validator_class(schema)
    except SchemaError as exc:  # the server's schema is broken: its tool cannot be checked
        log.debug("an MCP tool's input schema is invalid: %s", exc.message)
        problem = f"the tool's own input schema is invalid ({exc.message})"
        return lambda _: problem

    def check(arguments: dict) -> str | None:
        try:
            errors = sorted(validator.iter_errors(arguments), key=lambda e: e.path)
        except Exception as exc:  # e.g. a $ref to nowhere: found only once it is followed
            log.debug("an MCP tool's input schema cannot be used", exc_info=True)
            return f"the tool's own input schema cannot be used ({str(exc)[:200]})"
        error = next(iter(errors), None)
        if error is None:
            return None
        where = ".".join(str(p) for p in error.absolute_path)
        return f"{'argument ' + repr(where) + ': ' if where else ''}{error.message}"

    return check


class McpTools:
    """The configured servers, started in the background; their tools are registered in
    `registry` when a server is ready and withdrawn when it fails."""

    def __init__(self, servers: list[ServerConfig], registry: ToolRegistry,
                 warn: Callable[[str], None], server_stderr: bool = False) -> None:
        self.registry = registry
        self._configs = {s.name: s for s in servers}
        self._warn = warn
        self._names: dict[str, set[str]] = {}
        self._listed: dict[str, list[Listed]] = {}
        self._lock = threading.Lock()
        self.hub = McpHub(servers, self._tools_changed, warn, server_stderr)

    def start(self) -> None:
        self.hub.start()

    def close(self) -> None:
        self.hub.close()

    def wait_started(self) -> None:
        """Until every server is ready or has failed (each within its own timeout)."""
        self.hub.wait_started(max((s.config.timeout_s for s in self.servers), default=0) + 5)

    def restart_failed(self) -> list[str]:
        return self.hub.restart_failed()

    @property
    def servers(self) -> list[ServerState]:
        return self.hub.servers

    def listed(self) -> list[Listed]:
        with self._lock:
            return [tool for tools in self._listed.values() for tool in tools]

    def _tools_changed(self, server: str, tools: list[Any] | None) -> None:
        self._offer(server, tools)
        if tools is None:
            return
        not_found = self._configs[server].names_not_found({t.name for t in tools})
        if not_found:
            self._warn(f"MCP server {server!r} has no tool named in {'; '.join(not_found)} "
                       f"(its tools: {', '.join(sorted(t.name for t in tools)) or 'none'}); "
                       "check the names in its settings.")

    def _offer(self, server: str, tools: list[Any] | None) -> None:
        with self._lock:
            self.registry.withdraw(self._names.pop(server, set()))
            self._listed.pop(server, None)
            if tools is None:
                return
            config = self._configs[server]
            taken = self.registry.names()
            names: set[str] = set()
            listed: list[Listed] = []
            for tool in tools:
                if not config.uses(tool.name):
                    continue
                name = model_name(server, tool.name, taken | names)
                names.add(name)
                parley_tool = self._tool(name, config, tool)
                self.registry.register(parley_tool)
                listed.append(Listed(name, server, tool.name, tool.description or "",
                                     parley_tool.asks_first, parley_tool.read_only))
            self._names[server], self._listed[server] = names, listed

    def _tool(self, name: str, config: ServerConfig, tool: Any) -> Tool:
        schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
        schema = {"type": "object", **schema}
        asks = needs_yes(tool, config)
        server, server_tool = config.name, tool.name

        def run(arguments: dict) -> ToolOutput:
            try:
                result = self.hub.call(server, server_tool, arguments)
            except CallFailed as exc:
                return failed(Failure.RAISED, str(exc), exc)
            text = result_text(result)
            if result.is_error:
                return failed(Failure.RAISED, f"{server_tool} failed: {text}")
            value = result.structured_content if result.structured_content is not None else text
            return ToolOutput(text, value)

        return Tool(ToolSpec(name, (tool.description or tool.name).strip(), schema), run,
                    lambda _: f"Asking {server}: {server_tool}",
                    read_only=read_only(tool) and not asks,
                    approval=(lambda arguments: Confirmation(name, server, server_tool,
                                                             dict(arguments))) if asks else None,
                    check=schema_check(schema), source=server)
