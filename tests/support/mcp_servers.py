"""The "notes" MCP server (tests/support/mcp_server.py) as a subprocess for the tests: over
stdio, launched by the client itself from `notes_server_command()` and `notes_server_env()`,
or over streamable HTTP on a free loopback port with `run_http_notes_server()`."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.support.serving import Lines

REPO_ROOT = Path(__file__).resolve().parents[2]
"""Where the `tests` package is found: the child is a `python -m tests.support.mcp_server`."""

MODULE = "tests.support.mcp_server"

START_S = 20.0
"""It answers in about half a second; a busy 2-core machine may take many times that."""

STOP_S = 5.0


def notes_server_command() -> tuple[str, list[str]]:
    """The stdio server as (command, args), as an MCP client launches it. `-B`: no bytecode
    cache, so the server writes nothing to disk, not even its own `.pyc` files."""
    return sys.executable, ["-B", "-m", MODULE, "--transport", "stdio"]


def notes_server_env() -> dict[str, str]:
    """What the server's environment needs besides what a client passes on (an MCP stdio
    client passes only a few safe variables, such as PATH, HOME and USER)."""
    return {"PYTHONPATH": str(REPO_ROOT), "PYTHONDONTWRITEBYTECODE": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def run_http_notes_server(start_s: float = START_S) -> Iterator[str]:
    """The notes server over streamable HTTP on 127.0.0.1, while the block runs: yields its
    URL, `http://127.0.0.1:PORT/mcp`, once it answers. Each run starts from the seeded
    notes. Afterwards it is terminated, and killed if it lingers."""
    port = free_port()
    command, args = notes_server_command()
    args = [*args[:-1], "http", "--port", str(port)]
    process = subprocess.Popen(
        [command, *args], cwd=REPO_ROOT, env={**os.environ, **notes_server_env()},
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    stderr = Lines(process.stderr)  # read as it comes, so a chatty server never blocks
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + start_s
        while not _answers(url):
            if process.poll() is not None:
                raise RuntimeError(f"the notes MCP server exited with code {process.returncode}"
                                   f" before it answered; its stderr:\n{stderr.text(1)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the notes MCP server did not answer at {url} within "
                                   f"{start_s:.0f} s; its stderr so far:\n{stderr.text(0)}")
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(STOP_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _answers(url: str) -> bool:
    """Any HTTP answer at all: a bare GET without a session is refused, but by the server."""
    try:
        httpx.get(url, timeout=1)
        return True
    except httpx.HTTPError:
        return False
