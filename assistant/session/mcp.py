"""The configured MCP servers, started beside a session."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from assistant.mcp_client.tools import McpTools
from assistant.session.engines import configured_servers
from assistant.session.settings import ToolSettings
from assistant.tools import ToolRegistry


@contextmanager
def running_mcp(settings: ToolSettings, registry: ToolRegistry,
                warn: Callable[[str], None]) -> Iterator[McpTools | None]:
    """The configured servers, started in the background (None if there are none): their
    tools join `registry` as each is ready, and a reply never waits for them. They are
    stopped at the end, however it comes. A tool of theirs that asks first is asked by the
    reply that calls it (`assistant.confirmation`)."""
    servers = configured_servers(settings)
    if not servers:
        yield None
        return
    tools = McpTools(servers, registry, warn, server_stderr=settings.server_stderr)
    tools.start()
    try:
        yield tools
    finally:
        tools.close()
