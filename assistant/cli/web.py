"""`parley web`: the conversation in the browser, on a local web server.

One conversation per server, shared by every tab. The session is built as voice's is
(`voice_session`: the tabs' microphones are heard, the replies spoken to them), or as
chat's when the speech engines cannot load; the server runs until Ctrl-C or SIGTERM, and
ends with exit code 0.
"""

from __future__ import annotations

import argparse
import sys
import webbrowser

from rich.console import Console

from assistant.cli.saved import announce, close_saved
from assistant.session.settings import Settings

DEFAULT_URI = "http://127.0.0.1:8765"


def add_web_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--uri", dest="web_uri", default=DEFAULT_URI, metavar="URI",
                        help=f"where to listen, http://HOST:PORT (default {DEFAULT_URI}, this "
                             "machine only; port 0 picks a free one, and the line printed "
                             "shows it)")
    parser.add_argument("--open", dest="web_open", action="store_true",
                        help="open the page in the desktop's browser")


def run_web(args: argparse.Namespace, settings: Settings) -> int:
    from assistant.web.app import build_app, new_token
    from assistant.web.server import parse_web_uri, serve
    from assistant.web.session import web_room

    address = parse_web_uri(args.web_uri)  # a mistake is said before the model loads
    console = Console(highlight=False, markup=False, stderr=True)
    if not address.loopback:
        print(f"parley: warning: listening on {address.url()}, which other machines can "
              "reach: anyone who has the address with its token can use this conversation.",
              file=sys.stderr)
    token = new_token()

    def ready(port: int) -> None:
        url = f"{address.url(port)}/?token={token}"
        print(f"Parley is at {url}", flush=True)
        if args.web_open:
            webbrowser.open(url)

    with web_room(settings, lambda line: print(f"parley: {line}", file=sys.stderr,
                                               flush=True)) as room:
        announce(room.conversation, console)
        try:
            serve(build_app(room, token, address.host), address, ready)
        finally:
            room.close()
            close_saved(room.conversation)
    console.print("· Stopped.", style="dim")
    return 0
