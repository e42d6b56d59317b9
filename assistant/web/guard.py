"""Which requests `parley web` takes: those addressed to it, and not from another site's page.

The token keeps out pages that cannot know it; these checks also keep out those that could
learn it some other way, and the browser's own guards cannot:

- **Host.** A site may point a name of its own at 127.0.0.1 (DNS rebinding): the browser
  then counts Parley as that site's. Such a request still says the site's name in its
  `Host`, so only the names Parley is reached by are taken: the address it listens on (as
  given in `--uri`), the address the connection arrived at (what a user on another machine
  types: the machine's IP address), and on loopback `localhost`, `127.0.0.1` and `[::1]`;
  each with the port Parley listens on.
- **Origin.** A browser says which page opened a WebSocket (or sent a form); a page on
  another site may open one to any address. When the request has an `Origin`, it must be
  Parley's own page's (`http://` and a name the Host rule takes). Scripts and other
  programs send none: the token alone guards them.
"""

from __future__ import annotations

from collections.abc import Mapping
from ipaddress import ip_address
from urllib.parse import urlsplit

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})

_ANOTHER_ADDRESS = ("Parley refused this request: it was addressed to {host}, not to the "
                    "address Parley listens on (a site can point its own name at this "
                    "machine). Open the address `parley web` printed, or start it with "
                    "--uri http://NAME:PORT to be reached by another name.")
_ANOTHER_SITE = ("Parley refused this request: it came from a page on another site ({origin}). "
                 "Only Parley's own page may use it; a script that sends no Origin may, "
                 "with the token.")


def refusal(headers: Mapping[str, str], server: tuple[str, int] | None,
            listen_host: str) -> str | None:
    """Why a request is refused, or None when its Host and Origin are Parley's own.
    `server`: the local address and port the connection arrived at (ASGI's `server`)."""
    host = headers.get("host")
    if server is None or host is None or not _ours(_authority(host), server, listen_host):
        return _ANOTHER_ADDRESS.format(host=f"“{host}”" if host else "no address (no Host)")
    origin = headers.get("origin")
    if origin is not None and not _ours(_origin(origin), server, listen_host):
        return _ANOTHER_SITE.format(origin=origin)
    return None


def accepted_names(listen_host: str, local_address: str) -> set[str]:
    """The host names a request may be addressed to, arriving at `local_address`."""
    names = {local_address.lower()}
    try:
        local = ip_address(local_address)
    except ValueError:
        local = None
    if local is not None and local.version == 6 and local.ipv4_mapped is not None:
        local = local.ipv4_mapped  # a dual-stack socket reached over IPv4
        names.add(str(local))
    if local is not None and local.is_loopback:
        names |= LOOPBACK_NAMES
    try:
        everywhere = ip_address(listen_host).is_unspecified  # 0.0.0.0 or ::
    except ValueError:
        everywhere = False
    if not everywhere:
        names.add(listen_host.lower())
    return names


def _ours(authority: tuple[str, int] | None, server: tuple[str, int],
          listen_host: str) -> bool:
    if authority is None:
        return False
    name, port = authority
    local_address, local_port = server
    return port == local_port and name in accepted_names(listen_host, local_address)


def _authority(host: str) -> tuple[str, int] | None:
    """(name, port) of a Host header, `name:port` or `[v6]:port` (port 80 when left out)."""
    return _split(urlsplit(f"//{host}"))


def _origin(origin: str) -> tuple[str, int] | None:
    """(name, port) of an `http://` Origin; None for any other (`null`, https, a file)."""
    parts = urlsplit(origin)
    return _split(parts) if parts.scheme == "http" else None


def _split(parts) -> tuple[str, int] | None:
    try:
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname or parts.username is not None or parts.path or parts.query:
        return None
    return parts.hostname, 80 if port is None else port
