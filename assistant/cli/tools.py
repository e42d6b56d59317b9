"""MCP servers on the command line: starting the configured ones beside a conversation,
and `parley tools`, which lists every tool or calls one to check a configuration."""

from __future__ import annotations

import argparse
import json

from rich.console import Console

from assistant.confirmation import YES
from assistant.errors import ConfigError
from assistant.mcp_client.hub import Status
from assistant.mcp_client.tools import McpTools
from assistant.session.engines import conversation_tools
from assistant.session.mcp import running_mcp
from assistant.session.settings import ToolSettings
from assistant.tools import ToolRegistry


def describe_servers(tools: McpTools) -> list[str]:
    """A line a server: where it is, and how it is (`/tools` and `parley tools`)."""
    lines = []
    for state in tools.servers:
        config = state.config
        if state.status is Status.READY:
            used = [t for t in tools.listed() if t.server == config.name]
            how = f"ready, {len(used)} tool{'s' if len(used) != 1 else ''}"
        elif state.status is Status.FAILED:
            how = f"failed: {state.problem}"
        else:
            how = state.status.value
        lines.append(f"{config.name} ({config.where}): {how}")
    return lines


def tool_lines(registry: ToolRegistry) -> list[str]:
    """Every tool the model is offered: its name, where it comes from, whether it asks."""
    rows = [(tool.spec.name, tool.source or "Parley",
             "asks first" if tool.asks_first else "runs without asking",
             tool.spec.description.split("\n")[0][:70]) for tool in registry.tools()]
    widths = [max(len(row[i]) for row in rows) for i in range(3)] if rows else [0, 0, 0]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True))
            + f"  {row[3]}" for row in rows]


def run_tools(args: argparse.Namespace, settings: ToolSettings) -> int:
    """`parley tools` lists every tool; `parley tools call NAME '{"arg": …}'` runs one."""
    from assistant.timers import Timers

    console = Console(highlight=False, markup=False, soft_wrap=True)
    notes = Console(highlight=False, markup=False, soft_wrap=True, stderr=True)
    words = list(args.tool_command)
    if words and words[0] != "call" or words[:1] == ["call"] and not 2 <= len(words) <= 3:
        raise ConfigError("use `parley tools` to list the tools, or `parley tools call NAME "
                          "'{\"argument\": \"value\"}'` to run one")
    arguments = _arguments(words[2] if len(words) == 3 else "{}")
    timers = Timers()
    registry = conversation_tools(timers)
    try:
        with running_mcp(settings, registry,
                         lambda line: notes.print(f"! {line}", style="bold red")) as mcp:
            if mcp is not None:
                count = len(mcp.servers)
                notes.print(f"· Starting {count} MCP server{'s' if count != 1 else ''}…",
                            style="dim")
                mcp.wait_started()
            if not words:
                for line in tool_lines(registry):
                    console.print(line)
                for line in describe_servers(mcp) if mcp is not None else []:
                    console.print(f"· {line}", style="dim")
                if mcp is None:
                    console.print("· No MCP servers are configured (--mcp FILE, or "
                                  "[mcp-servers.NAME] in the config file).", style="dim")
                return 0
            name = _tool_name(words[1], registry, mcp)
            console.print(f"· {registry.label(name, arguments)}…", style="dim")
            # The user's own command is the yes a tool that asks first would need.
            output = registry.call(name, arguments, approve=lambda _: YES)
            console.print(output.text)
            return 1 if output.is_error else 0
    finally:
        timers.close()


def _arguments(text: str) -> dict:
    try:
        arguments = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"the arguments are not JSON ({exc.msg}); write them like "
                          "'{\"timezone\": \"Asia/Tokyo\"}'") from None
    if not isinstance(arguments, dict):
        raise ConfigError("the arguments must be a JSON object, like '{\"timezone\": "
                          "\"Asia/Tokyo\"}'")
    return arguments


def _tool_name(name: str, registry: ToolRegistry, mcp: McpTools | None) -> str:
    """The model's name for a tool, given it or the server's own name (if one server
    alone has a tool of that name)."""
    names = registry.names()
    if name in names:
        return name
    matches = sorted(tool.name for tool in (mcp.listed() if mcp is not None else [])
                     if tool.server_tool == name)
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise ConfigError(f"several servers have a tool {name!r}: {', '.join(matches)}; "
                          "name one of them")
    raise ConfigError(f"no tool {name!r} (`parley tools` lists them: {', '.join(sorted(names))})")
