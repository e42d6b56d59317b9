"""Which MCP servers Parley uses: `[mcp-servers.NAME]` tables in the config file or in
a TOML file of their own, or the `mcpServers` JSON file other MCP clients read (Claude
Desktop's shape), so a user can point Parley at the file they already have.

```toml
[mcp-servers.time]
command = "mcp-server-time"
args = ["--local-timezone", "Europe/Paris"]
trusted-tools = ["get_current_time"]
```

```json
{"mcpServers": {"time": {"command": "mcp-server-time", "args": []},
                "notes": {"url": "http://127.0.0.1:8000/mcp",
                          "headers": {"Authorization": "Bearer …"}}}}
```
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assistant.errors import ConfigError

TABLE = "mcp-servers"
"""The config file's table of servers (TOML)."""
JSON_KEY = "mcpServers"

SEPARATOR = "__"
"""Between a server's name and its tool's in the name the model calls (`time__get_current_time`)."""
DEFAULT_TIMEOUT_S = 30.0
SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")

_LISTS = ("allowed-tools", "blocked-tools", "confirm-tools", "trusted-tools")
_KEYS = {"command", "args", "env", "cwd", "url", "headers", "enabled", "timeout-s", *_LISTS}
_OTHER_CLIENTS_KEYS = {"type", "transportType", "autoApprove", "alwaysAllow", "description",
                       "timeout"}
"""Keys other clients write in the same JSON file, which Parley leaves alone. Their
"always allow" lists are not read as Parley's trusted tools: trusting is said for Parley."""
_JSON_ALIASES = {"disabled": "enabled", "disabledTools": "blocked-tools",
                 "allowedTools": "allowed-tools", "blockedTools": "blocked-tools",
                 "confirmTools": "confirm-tools", "trustedTools": "trusted-tools",
                 "timeoutS": "timeout-s"}


@dataclass(frozen=True)
class ServerConfig:
    """One MCP server: how to reach it, and what of it Parley uses."""

    name: str
    """Its name in the file; it prefixes its tools' names (`time__get_current_time`)."""
    command: str | None = None
    """A stdio server: the program Parley starts…"""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    """…with these variables added to a clean environment (the SDK's safe default set)."""
    cwd: str | None = None
    url: str | None = None
    """A streamable HTTP server: its endpoint, with `headers` on every request."""
    headers: Mapping[str, str] = field(default_factory=dict)
    enabled: bool = True
    allowed_tools: frozenset[str] | None = None
    """Only these of its tools are used (None: all but the blocked)."""
    blocked_tools: frozenset[str] = frozenset()
    confirm_tools: frozenset[str] = frozenset()
    """Tools that ask the user first even though the server calls them read-only."""
    trusted_tools: frozenset[str] = frozenset()
    """Tools that run without asking, in every mode, `parley serve` included."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    """How long starting, listing or one call may take before the server counts as hung."""
    source: str = ""
    """The file it was read from, for messages."""

    @property
    def where(self) -> str:
        return self.url if self.url else " ".join((self.command or "", *self.args))

    def uses(self, tool: str) -> bool:
        if tool in self.blocked_tools:
            return False
        return self.allowed_tools is None or tool in self.allowed_tools

    def names_not_found(self, tools: set[str]) -> list[str]:
        """The tool names its lists give that the server does not have ("confirm-tools:
        delete_notes"): a typo there would let a tool run unasked, or hide none."""
        lists = (("allowed-tools", self.allowed_tools or frozenset()),
                 ("blocked-tools", self.blocked_tools), ("confirm-tools", self.confirm_tools),
                 ("trusted-tools", self.trusted_tools))
        return [f"{key}: {name}" for key, names in lists for name in sorted(names - tools)]


def read_mcp_file(path: Path) -> list[ServerConfig]:
    """The servers of an `--mcp` file: JSON with `mcpServers`, or TOML with
    `[mcp-servers.NAME]` tables."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"no MCP server file at {path} (--mcp)") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not UTF-8 text; --mcp takes a JSON or TOML file") from None
    except OSError as exc:
        raise ConfigError(f"cannot read the MCP server file {path} ({exc.strerror})") from exc
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path} is not valid JSON ({exc})") from None
        if not isinstance(data, dict) or not isinstance(data.get(JSON_KEY), dict):
            raise ConfigError(f'{path} has no "{JSON_KEY}" object; an MCP server file '
                              f'looks like {{"{JSON_KEY}": {{"time": {{"command": '
                              '"mcp-server-time"}}}}')
        return servers_from(data[JSON_KEY], str(path), json_file=True)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is neither JSON nor valid TOML ({exc})") from None
    unknown = sorted(set(data) - {TABLE})
    if unknown or not isinstance(data.get(TABLE), dict):
        raise ConfigError(f"{path}: an MCP server file in TOML holds [{TABLE}.NAME] tables "
                          f"only{' (found ' + ', '.join(unknown) + ')' if unknown else ''}")
    return servers_from(data[TABLE], str(path))


def servers_from(table: Any, source: str, json_file: bool = False) -> list[ServerConfig]:
    """The servers of one table of them (name → settings); a ConfigError names the file,
    the server and the key that is wrong."""
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: {TABLE} must be a table of servers by name")
    return [_server(name, entry, source, json_file) for name, entry in table.items()]


def merged(*groups: list[ServerConfig]) -> list[ServerConfig]:
    """Servers from several places; a later one replaces an earlier one of the same name
    (the --mcp file over the config file, as a flag is over the file)."""
    by_name: dict[str, ServerConfig] = {}
    for group in groups:
        for server in group:
            by_name[server.name] = server
    return list(by_name.values())


def _server(name: str, entry: Any, source: str, json_file: bool) -> ServerConfig:
    where = f"{source}: server {name!r}"
    if not SERVER_NAME.match(name):
        raise ConfigError(f"{where}: a server's name is letters, digits, '-' and '_' (at most "
                          "32): it begins the names of its tools")
    if not isinstance(entry, dict):
        raise ConfigError(f"{where} must be a table of settings (command or url, …)")
    values: dict[str, Any] = {}
    for key, value in entry.items():
        if key in ("type", "transportType") and str(value).lower() == "sse":
            raise ConfigError(f"{where}: SSE servers (MCP's older HTTP transport) are not "
                              "supported; give the url of its streamable HTTP endpoint "
                              "(often /mcp)")
        if json_file and key in _OTHER_CLIENTS_KEYS:
            continue
        if json_file and key == "disabled" and not isinstance(value, bool):
            raise ConfigError(f"{where}: disabled must be true or false")
        if json_file and key in _JSON_ALIASES:
            key, value = _JSON_ALIASES[key], (not value if key == "disabled" else value)
        key = key.replace("_", "-")
        if key not in _KEYS:
            raise ConfigError(f"{where}: unknown key {key!r} (known: {', '.join(sorted(_KEYS))})")
        values[key] = value
    command, url = values.get("command"), values.get("url")
    if (command is None) == (url is None):
        raise ConfigError(f"{where} needs either a command (a server Parley starts) or a url "
                          "(a streamable HTTP server), not both")
    if command is not None and (not isinstance(command, str) or not command.strip()):
        raise ConfigError(f"{where}: command must be a program's name or path")
    if url is not None and (not isinstance(url, str) or
                            not re.match(r"^https?://", url, re.IGNORECASE)):
        raise ConfigError(f"{where}: url must start with http:// or https://")
    timeout = values.get("timeout-s", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (
            0 < timeout <= 3600):
        raise ConfigError(f"{where}: timeout-s must be a number of seconds above 0 "
                          "and at most 3600")
    enabled = values.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigError(f"{where}: enabled must be true or false")
    allowed = _names(values, "allowed-tools", where, name)
    return ServerConfig(
        name=name, command=command, args=tuple(_strings(values, "args", where)),
        env=_mapping(values, "env", where), cwd=_text(values, "cwd", where), url=url,
        headers=_mapping(values, "headers", where), enabled=enabled,
        allowed_tools=allowed if "allowed-tools" in values else None,
        blocked_tools=_names(values, "blocked-tools", where, name),
        confirm_tools=_names(values, "confirm-tools", where, name),
        trusted_tools=_names(values, "trusted-tools", where, name),
        timeout_s=float(timeout), source=source)


def _strings(values: dict, key: str, where: str) -> list[str]:
    value = values.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: {key} must be a list of strings")
    return value


def _names(values: dict, key: str, where: str, server: str) -> frozenset[str]:
    """A list of the server's tool names, as the server names them or as `parley tools`
    shows them (`notes__delete_note`)."""
    prefix = f"{server}{SEPARATOR}"
    return frozenset(name.removeprefix(prefix) for name in _strings(values, key, where))


def _mapping(values: dict, key: str, where: str) -> dict[str, str]:
    value = values.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(f"{where}: {key} must be a table of strings")
    return dict(value)


def _text(values: dict, key: str, where: str) -> str | None:
    value = values.get(key)
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"{where}: {key} must be a string")
    return value
