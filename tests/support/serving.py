"""`parley serve` as a subprocess for the tests: started on 127.0.0.1 on a port the OS picks
(port 0), ready once it prints its one line, stopped with Ctrl-C (SIGINT) and checked to exit 0.

The server's stdout and stderr are read line by line in background threads: it never blocks
on a full pipe, and a test can wait for a line with a deadline instead of hanging.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

PARLEY = Path(sys.executable).with_name("parley")
"""The installed command the user types; `python -m assistant` where it is not installed."""

READY = re.compile(r"Parley is serving Wyoming at tcp://([^:]+|\[[^\]]+\]):(\d+)")
"""The ready line, as the contract gives it to tests."""

LOOPBACK = "tcp://127.0.0.1:0"
"""Loopback only, on a free port: tests never listen where other machines can reach."""

START_S = 300.0
"""Loading the models takes ~3 s; a busy 2-core machine, under strace, takes far longer."""

STOP_S = 60.0


def parley(*args: str) -> list[str]:
    return [str(PARLEY), *args] if PARLEY.exists() else [sys.executable, "-m", "assistant", *args]


def environment(**extra: str) -> dict[str, str]:
    return dict(os.environ, PYTHONDONTWRITEBYTECODE="1", **extra)


class Lines:
    """A pipe read line by line in a background thread, until it closes."""

    def __init__(self, pipe: IO[str]) -> None:
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe: IO[str]) -> None:
        for line in pipe:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def wait_for(self, pattern: re.Pattern[str], timeout: float) -> re.Match[str] | None:
        """The first line matching `pattern`; None when the pipe closed or time ran out."""
        deadline = time.monotonic() + timeout
        seen = 0
        with self._changed:
            while True:
                for line in self.lines[seen:]:
                    if match := pattern.search(line):
                        return match
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if self._closed or left <= 0:
                    return None
                self._changed.wait(left)

    def text(self, timeout: float = 10.0) -> str:
        """Everything read; after the process ended, everything it wrote."""
        self._thread.join(timeout)
        with self._changed:
            return "\n".join(self.lines)


@dataclass
class Server:
    """A running `parley serve`: its process and the port it listens on (on 127.0.0.1)."""

    process: subprocess.Popen[str]
    host: str
    """As the ready line names it: "127.0.0.1", or "0.0.0.0" when told to listen there."""
    port: int
    stdout: Lines
    stderr: Lines

    def parley_pid(self) -> int:
        """The process running Parley. Under strace it is strace's child: strace blocks
        Ctrl-C and SIGTERM for itself while it logs to a file (its -I 3 default)."""
        if Path(self.process.args[0]).name != "strace":
            return self.process.pid
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        pids = children.read_text().split() if children.exists() else []
        return int(pids[0]) if pids else self.process.pid

    def stop(self, signum: int = signal.SIGINT) -> int:
        """Stops it the way a user does, and waits for its exit code."""
        if self.process.poll() is None:
            os.kill(self.parley_pid(), signum)
        try:
            return self.process.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"parley serve did not stop {STOP_S:.0f} s after "
                                 f"{signal.Signals(signum).name}:\n{self.stderr.text(1)}") from None

    def kill(self) -> None:
        """For a test gone wrong: Parley first, since killing strace alone would set it free."""
        for pid in dict.fromkeys([self.parley_pid(), self.process.pid]):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait(timeout=STOP_S)

    def output(self) -> str:
        return f"stdout:\n{self.stdout.text(1)}\nstderr:\n{self.stderr.text(1)}"


def start(command: Sequence[str], env: dict[str, str] | None = None) -> Server:
    """Starts `command` (a `parley serve`, maybe under strace) and waits for its ready line."""
    process = subprocess.Popen(list(command), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env or environment())
    assert process.stdout is not None and process.stderr is not None
    stdout, stderr = Lines(process.stdout), Lines(process.stderr)
    ready = stdout.wait_for(READY, START_S)
    server = Server(process, "", 0, stdout, stderr)
    if ready is None:
        if process.poll() is None:
            server.kill()
        raise AssertionError(f"parley serve never said it was serving (exit code "
                             f"{process.returncode}):\n{server.output()}")
    server.host, server.port = ready[1].strip("[]"), int(ready[2])
    return server


@contextlib.contextmanager
def serving(*flags: str, uri: str = LOOPBACK, command: Sequence[str] | None = None,
            env: dict[str, str] | None = None, stop_signal: int = signal.SIGINT
            ) -> Iterator[Server]:
    """`parley serve --uri URI FLAGS` (or `command`) while the block runs; afterwards it
    must stop on `stop_signal` with exit code 0. A block that fails kills it instead."""
    server = start(command or parley("serve", "--uri", uri, *flags), env)
    try:
        yield server
    except BaseException:
        server.kill()
        raise
    code = server.stop(stop_signal)
    assert code == 0, f"parley serve exited {code} on {signal.Signals(stop_signal).name}:\n" \
                      f"{server.output()}"
