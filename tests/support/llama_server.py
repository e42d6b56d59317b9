"""llama-cpp-python's own OpenAI-compatible server (`python -m llama_cpp.server`) serving
the embedded SmolLM2 GGUF on loopback, for the tests of `--llm-url` against a real server."""

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from models.embedded import default_llm

START_S = 60
"""The longest the server may take to answer its first request."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def run_llama_server(*settings: str, model: Path | None = None, context: int = 2048,
                     port: int | None = None, start_s: float = START_S) -> Iterator[str]:
    """The server's `/v1` URL on 127.0.0.1, serving `model` (default: the embedded SmolLM2)
    with llama_cpp.server's `settings` (e.g. "--seed", "7"); its output is discarded, and it
    is terminated (killed if it lingers) when the block ends."""
    port = free_port() if port is None else port
    process = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(model or default_llm()),
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(context),
         "--verbose", "False", *settings],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + start_s
        while not _answers(url):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server did not start (exit code "
                                   f"{process.poll()})")
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/models", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
