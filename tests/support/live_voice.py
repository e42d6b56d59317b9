"""`parley voice` as a user runs it at a terminal (pexpect), on the private sound server:
starting it, reading its /history, quitting it, and listening to its speaker."""

from __future__ import annotations

import os
import re
import sys
import time

import numpy as np
import pexpect

from tests.support.sound_server import MIC_RATE, SoundServer
from tests.support.transcripts import HISTORY_TIME


def spawn_voice(server: SoundServer, *flags: str) -> pexpect.spawn:
    """`parley voice FLAGS` on the sound server's devices, with a small context, once it
    says it is listening."""
    env = dict(os.environ, **server.env, PYTHONDONTWRITEBYTECODE="1", TERM="dumb",
               COLUMNS="200")
    child = pexpect.spawn(
        sys.executable,
        ["-m", "assistant", "voice", "--input-device", "pulse", "--output-device", "pulse",
         "--ctx", "2048", "--answer-tokens", "40", *flags],
        env=env, encoding="utf-8", timeout=120, dimensions=(50, 250))
    child.expect("Parley is listening")
    return child


def wait_for_history(child: pexpect.spawn, pattern: str, tries: int = 60) -> None:
    """Ask /history until `pattern` shows (the reply being spoken may not be done yet)."""
    for _ in range(tries):
        child.sendline("/history")
        if child.expect([pattern, pexpect.TIMEOUT], timeout=2) == 0:
            return
    raise AssertionError(f"{pattern!r} never showed in /history")


def full_history(child: pexpect.spawn) -> dict[int, str]:
    """Every message of the conversation now, by number, from a complete /history listing
    (the /help that follows it marks where the listing ended)."""
    child.sendline("/history")
    child.sendline("/help")
    child.expect("Commands:")
    listed = re.findall(r"^#(\d+) (\w+(?: \(\w+\))?)(?:" + HISTORY_TIME + r")?: ([^\r\n]*)",
                        child.before, re.MULTILINE)
    return {int(seq): f"{who}: {text}" for seq, who, text in listed}


def wait_until_speaking(recording, within: float = 60.0) -> None:
    """Until the speaker's monitor carries Parley's voice (a busy machine may take a while
    between the reply's first words on screen and its first audio)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        played = recording.samples
        if played.size and np.abs(played[-MIC_RATE // 2:]).max() > 100:
            return
        time.sleep(0.05)
    raise AssertionError("Parley never started speaking")


def wait_until_quiet(recording, quiet_s: float = 1.0, within: float = 60.0) -> None:
    """Until the speaker's monitor has carried nothing for `quiet_s` (the end of a reply
    reaches the speaker a little after the reply is in the history)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        played = recording.samples
        tail = played[-int(MIC_RATE * quiet_s):]
        if tail.size >= int(MIC_RATE * quiet_s) and np.abs(tail).max() <= 100:
            recording.stop()
            return
        time.sleep(0.05)
    raise AssertionError("Parley never stopped speaking")


def quit_cleanly(child: pexpect.spawn) -> None:
    """`/quit`, and Parley ends with exit code 0."""
    child.sendline("/quit")
    ended_cleanly(child)


def ended_cleanly(child: pexpect.spawn) -> None:
    """Parley ends (its terminal closes) with exit code 0."""
    child.expect(pexpect.EOF, timeout=30)
    # Its exit, however long a busy machine takes (close() would kill it after 0.1 s).
    assert child.wait() == 0, f"ended by signal {child.signalstatus}: {child.before[-500:]!r}"
