"""How Parley reaches an MCP server: a program it starts (stdio) or a streamable HTTP URL."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

from assistant.mcp_client.config import ServerConfig


def transport_for(config: ServerConfig, server_stderr: bool) -> Any:
    """What `mcp.Client` connects to: a stdio server it starts, or a streamable HTTP URL."""
    if config.url is not None:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        http = create_mcp_http_client(headers=dict(config.headers) or None)
        return streamable_http_client(config.url, http_client=http)
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=program(config.command or ""),
                                   args=list(config.args), env=dict(config.env) or None,
                                   cwd=config.cwd)
    # A server's log lines would land in the middle of the conversation: discarded
    # unless --debug (never written to a file).
    errlog = sys.stderr if server_stderr else open(os.devnull, "w")  # noqa: SIM115
    return _StdioTransport(params, errlog)


def program(command: str) -> str:
    """`command` as given, or the program of that name installed beside Parley (pip put
    `mcp-server-time` in Parley's own environment, whose bin folder need not be on PATH)."""
    if os.sep in command or shutil.which(command):
        return command
    beside = Path(sys.executable).parent / command
    return str(beside) if os.access(beside, os.X_OK) else command


class _StdioTransport:
    """`stdio_client` as a Transport that closes the discarded-stderr file it was given."""

    def __init__(self, params: Any, errlog: Any) -> None:
        self._params, self._errlog = params, errlog
        self._context: Any = None

    async def __aenter__(self) -> Any:
        from mcp.client.stdio import stdio_client

        self._context = stdio_client(self._params, errlog=self._errlog)
        try:
            return await self._context.__aenter__()
        except BaseException:  # not started: __aexit__ will not be called to close it
            self._close_errlog()
            raise

    async def __aexit__(self, *exc: Any) -> Any:
        try:
            return await self._context.__aexit__(*exc)
        finally:
            self._close_errlog()

    def _close_errlog(self) -> None:
        if self._errlog is not None and self._errlog.name == os.devnull:
            self._errlog.close()
